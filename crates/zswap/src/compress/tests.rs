//! Codec tests: round trips on real memory pages, incompressible input, corrupt input, and
//! the spec syntax. The corpus is the repository's set of real pages (see corpus/README.md).

use std::path::PathBuf;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};

use super::*;
use crate::PAGE_SIZE;

fn corpus_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../corpus"))
}

/// Every corpus file, whole. Missing corpus is a failure, not a skip: these tests are the
/// codecs' main evidence.
fn corpus() -> Vec<(String, Vec<u8>)> {
    let dir = corpus_dir();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus at {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pages"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no *.pages in {}", dir.display());
    files
        .into_iter()
        .map(|p| {
            let data = std::fs::read(&p).unwrap();
            assert_eq!(data.len() % PAGE_SIZE, 0, "{}", p.display());
            (p.file_name().unwrap().to_string_lossy().into_owned(), data)
        })
        .collect()
}

/// Every codec at its default level, plus levels that exercise other code paths.
fn specs() -> Vec<CompressorSpec> {
    let mut names = vec![
        "lz4",
        "zstd",
        "zstd:-1",
        "zstd:-5",
        "zstd:3",
        "deflate",
        "deflate:6",
        "deflate:12",
    ];
    if cfg!(feature = "lzo") {
        names.extend(["lzo", "lzo:1"]);
    }
    names.iter().map(|s| s.parse().unwrap()).collect()
}

fn all_default() -> Vec<Arc<dyn Compressor>> {
    Algorithm::ALL
        .iter()
        .map(|a| a.default_spec().build())
        .collect()
}

/// Compress a page as the engine does (into PAGE_SIZE - 1 bytes); on success it must come
/// back exactly.
fn check_page(c: &dyn Compressor, page: &[u8], what: &str) -> Option<usize> {
    let mut comp = [0u8; PAGE_SIZE - 1];
    let mut out = [0xa5u8; PAGE_SIZE];
    match c.compress(page, &mut comp) {
        Ok(n) => {
            assert!(n <= comp.len(), "{what}: {n}");
            let got = c
                .decompress(&comp[..n], &mut out)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(got, PAGE_SIZE, "{what}");
            assert!(out[..] == page[..], "{what}: data differs");
            Some(n)
        }
        Err(CompressError::DoesNotFit(n)) => {
            assert_eq!(n, PAGE_SIZE - 1);
            None
        }
        Err(e) => panic!("{what}: {e}"),
    }
}

#[test]
fn round_trip_every_corpus_page_every_codec() {
    let corpus = corpus();
    for spec in specs() {
        let c = spec.build();
        assert_eq!(c.spec(), spec);
        for (name, data) in &corpus {
            let mut stored = 0usize;
            let mut compressed = 0usize;
            for (i, page) in data.chunks_exact(PAGE_SIZE).enumerate() {
                if let Some(n) = check_page(&*c, page, &format!("{spec} {name} page {i}")) {
                    stored += 1;
                    compressed += n;
                }
            }
            // Real pages compress: a codec that stores nearly nothing is broken, not unlucky.
            assert!(
                stored * 10 > data.len() / PAGE_SIZE * 8,
                "{spec} {name}: only {stored} pages compressed"
            );
            assert!(compressed < stored * PAGE_SIZE, "{spec} {name}");
        }
    }
}

#[test]
fn round_trip_64k_chunks() {
    // Large folios compress as one unit in benchmarks: the codecs must handle 64 KiB inputs.
    let corpus = corpus();
    for c in all_default() {
        for (name, data) in &corpus {
            for (i, chunk) in data.chunks_exact(16 * PAGE_SIZE).enumerate().step_by(7) {
                let mut comp = vec![0u8; 2 * chunk.len()];
                let n = c.compress(chunk, &mut comp).unwrap();
                let mut out = vec![0u8; chunk.len()];
                let got = c.decompress(&comp[..n], &mut out).unwrap();
                assert_eq!(got, chunk.len(), "{:?} {name} chunk {i}", c.spec());
                assert!(out == chunk, "{:?} {name} chunk {i}", c.spec());
            }
        }
    }
}

#[test]
fn zero_page_and_extreme_levels() {
    let zero = [0u8; PAGE_SIZE];
    let min = *Algorithm::Zstd.levels().start();
    let max = *Algorithm::Zstd.levels().end();
    for spec in [
        format!("zstd:{min}"),
        format!("zstd:{max}"),
        "deflate:12".into(),
    ] {
        let c = spec.parse::<CompressorSpec>().unwrap().build();
        // zstd's fastest levels skip so far ahead that they find no match even in a zero
        // page (and zstd never emits a frame's first block as RLE): a page that does not fit
        // is a correct answer there, just a poor one.
        if let Some(n) = check_page(&*c, &zero, &spec) {
            assert!(n < 100, "{spec}: zero page took {n} bytes");
        } else {
            assert_eq!(spec, format!("zstd:{min}"));
        }
        let (_, data) = &corpus()[0];
        for page in data.chunks_exact(PAGE_SIZE).take(64) {
            check_page(&*c, page, &spec);
        }
    }
}

#[test]
fn random_bytes_do_not_fit_in_a_page() {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
    for spec in specs() {
        let c = spec.build();
        for _ in 0..16 {
            let mut page = [0u8; PAGE_SIZE];
            rng.fill(&mut page[..]);
            let mut dst = [0u8; PAGE_SIZE - 1];
            assert_eq!(
                c.compress(&page, &mut dst),
                Err(CompressError::DoesNotFit(PAGE_SIZE - 1)),
                "{spec}"
            );
        }
    }
}

#[test]
fn tiny_destinations_do_not_fit() {
    let (_, data) = &corpus()[1];
    let page = &data[..PAGE_SIZE];
    for c in all_default() {
        for len in [0, 1, 4, 16] {
            let mut dst = vec![0u8; len];
            assert_eq!(
                c.compress(page, &mut dst),
                Err(CompressError::DoesNotFit(len)),
                "{:?}",
                c.spec()
            );
        }
    }
}

/// Decompress into a page-sized window of a larger buffer and check that the bytes around the
/// window are untouched and the result is bounded by the window.
fn decompress_guarded(c: &dyn Compressor, src: &[u8]) -> Result<usize, CompressError> {
    const GUARD: usize = 64;
    let mut buf = vec![0x5au8; PAGE_SIZE + 2 * GUARD];
    let r = c.decompress(src, &mut buf[GUARD..GUARD + PAGE_SIZE]);
    assert!(buf[..GUARD].iter().all(|&b| b == 0x5a), "wrote before dst");
    assert!(
        buf[GUARD + PAGE_SIZE..].iter().all(|&b| b == 0x5a),
        "wrote after dst"
    );
    if let Ok(n) = r {
        assert!(n <= PAGE_SIZE);
    }
    r
}

#[test]
fn corrupt_truncated_and_bit_flipped_pages_never_panic() {
    let corpus = corpus();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(11);
    for c in all_default() {
        for (_, data) in &corpus {
            for page in data.chunks_exact(PAGE_SIZE).step_by(97) {
                let mut comp = [0u8; PAGE_SIZE - 1];
                let Ok(n) = c.compress(page, &mut comp) else {
                    continue;
                };
                let good = &comp[..n];
                // Every truncation: a truncated stream must not come back as a whole page.
                for cut in 0..n {
                    if let Ok(got) = decompress_guarded(&*c, &good[..cut]) {
                        assert!(got < PAGE_SIZE || cut + 1 == n, "{:?} cut {cut}", c.spec());
                    }
                }
                // Random single bit flips and random byte overwrites.
                for _ in 0..64 {
                    let mut bad = good.to_vec();
                    let i = rng.gen_range(0..n);
                    bad[i] ^= 1 << rng.gen_range(0..8);
                    let _ = decompress_guarded(&*c, &bad);
                    bad[rng.gen_range(0..n)] = rng.gen();
                    let _ = decompress_guarded(&*c, &bad);
                }
                // A correct stream into too small a destination is an error, not a short page.
                let mut small = [0u8; PAGE_SIZE / 2];
                assert!(c.decompress(good, &mut small).is_err(), "{:?}", c.spec());
            }
        }
    }
}

#[test]
fn contexts_are_never_used_by_two_threads_at_once() {
    // Several threads, several levels of the same codec at once: each use of a context must
    // be the only one (deflate's are per thread, zstd's shared and taken for one unit; a
    // context used twice at once would corrupt streams, and one put back at the wrong level
    // would give other frames).
    let (_, data) = &corpus()[2];
    std::thread::scope(|s| {
        for t in 0..4 {
            s.spawn(move || {
                for spec in ["zstd:1", "zstd:-1", "deflate:1", "deflate:9", "lz4"] {
                    let c = spec.parse::<CompressorSpec>().unwrap().build();
                    for page in data.chunks_exact(PAGE_SIZE).skip(t).step_by(16) {
                        check_page(&*c, page, spec);
                    }
                }
            });
        }
    });
}

#[test]
fn zstd_contexts_are_shared_and_few_are_kept() {
    let (_, data) = &corpus()[2];
    let threads = 16;
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                let c = "zstd:1".parse::<CompressorSpec>().unwrap().build();
                for page in data.chunks_exact(PAGE_SIZE).skip(t).step_by(threads) {
                    check_page(&*c, page, "zstd:1");
                }
            });
        }
    });
    // Two of each kind for each CPU at most (a context is under 100 KiB), not one for each
    // of the threads that used them.
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 16)) as u64;
    let bytes = super::shared_context_bytes();
    assert!(bytes > 0, "the contexts kept are counted");
    assert!(
        bytes <= cpus * 2 * (100 << 10),
        "{bytes} bytes of zstd contexts after {threads} threads on {cpus} CPUs"
    );
}

#[test]
fn spec_parse_and_display_round_trip() {
    let cases = [
        ("lz4", "lz4"),
        ("lz4:0", "lz4"),
        ("zstd", "zstd"),
        ("zstd:1", "zstd"),
        ("zstd:-1", "zstd:-1"),
        ("zstd:3", "zstd:3"),
        ("zstd:+3", "zstd:3"),
        ("deflate", "deflate"),
        ("deflate:6", "deflate:6"),
        ("deflate:1", "deflate"),
        (" zstd:19\n", "zstd:19"),
    ];
    for (input, canonical) in cases {
        let spec: CompressorSpec = input.parse().unwrap_or_else(|e| panic!("{input}: {e}"));
        assert_eq!(spec.to_string(), canonical, "{input}");
        assert_eq!(canonical.parse::<CompressorSpec>().unwrap(), spec);
        assert_eq!(spec.build().spec(), spec);
    }
    assert_eq!(
        "zstd:-2".parse::<CompressorSpec>().unwrap(),
        CompressorSpec {
            algorithm: Algorithm::Zstd,
            level: -2
        }
    );
    for a in Algorithm::ALL {
        assert_eq!(a.default_spec().to_string(), a.name());
        let r = a.levels();
        for level in [*r.start(), *r.end()] {
            let spec = CompressorSpec::new(*a, level).unwrap();
            assert_eq!(spec.to_string().parse::<CompressorSpec>().unwrap(), spec);
        }
    }
    assert_eq!(available().len(), Algorithm::ALL.len());
    assert_eq!(CompressorSpec::default().to_string(), "lz4");
}

#[test]
fn unknown_names_and_bad_levels_list_what_is_available() {
    for bad in [
        "",
        "lz5",
        "LZ4",
        "zstd:",
        "zstd:x",
        "zstd:23",
        "zstd:-200000",
        "deflate:13",
        "deflate:0",
        "lz4:1",
        "zstd:1:2",
        "zstd:99999999999",
        ":1",
        "lzo-rle",
    ] {
        let e = bad.parse::<CompressorSpec>().unwrap_err();
        assert_eq!(e.given, bad);
        let msg = e.to_string();
        assert!(
            msg.starts_with(&format!("unknown compressor '{bad}'")),
            "{msg}"
        );
        for name in available() {
            assert!(msg.contains(name), "{msg}");
        }
        assert!(!msg.contains('\n'), "{msg}");
    }
    if !cfg!(feature = "lzo") {
        assert!("lzo".parse::<CompressorSpec>().is_err());
    }
    let e = "zstd:99".parse::<CompressorSpec>().unwrap_err();
    assert!(
        e.to_string()
            .contains("zstd -131072..=22 default 1, deflate 1..=12 default 1"),
        "{e}"
    );
    assert!(CompressorSpec::new(Algorithm::Deflate, 13).is_err());
}

#[test]
fn hand_built_out_of_range_level_is_clamped() {
    let c = CompressorSpec {
        algorithm: Algorithm::Deflate,
        level: 99,
    }
    .build();
    assert_eq!(c.spec().level, 12);
    let (_, data) = &corpus()[0];
    check_page(&*c, &data[..PAGE_SIZE], "deflate:99");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Arbitrary bytes into every decompressor: an error or a bounded result, never a panic.
    #[test]
    fn arbitrary_input_never_panics(src in proptest::collection::vec(any::<u8>(), 0..6000)) {
        for c in all_default() {
            let _ = decompress_guarded(&*c, &src);
        }
    }

    /// A valid stream with arbitrary edits: the same promise, from much closer to valid input
    /// (where decoders' deeper paths are).
    #[test]
    fn edited_valid_streams_never_panic(
        page_idx in 0usize..2048,
        edits in proptest::collection::vec((any::<u16>(), any::<u8>()), 1..8),
        cut in any::<u16>(),
    ) {
        let corpus = corpus_page(page_idx);
        for c in all_default() {
            let mut comp = [0u8; PAGE_SIZE - 1];
            let Ok(n) = c.compress(&corpus, &mut comp) else { continue };
            let mut bad = comp[..n].to_vec();
            for (at, byte) in &edits {
                let i = usize::from(*at) % n;
                bad[i] = *byte;
            }
            bad.truncate(usize::from(cut) % (n + 1));
            let _ = decompress_guarded(&*c, &bad);
        }
    }
}

/// One page from the first corpus file, read without loading the whole corpus per case.
fn corpus_page(idx: usize) -> Vec<u8> {
    use std::io::{Read, Seek, SeekFrom};
    let mut files: Vec<_> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pages"))
        .collect();
    files.sort();
    let path = &files[idx % files.len()];
    let mut f = std::fs::File::open(path).unwrap();
    let pages = f.metadata().unwrap().len() as usize / PAGE_SIZE;
    f.seek(SeekFrom::Start(((idx % pages) * PAGE_SIZE) as u64))
        .unwrap();
    let mut page = vec![0u8; PAGE_SIZE];
    f.read_exact(&mut page).unwrap();
    page
}
