//! `uzswap bench engine`: every page of each file through the engine (store into the pool,
//! load back exclusively), timed, every byte checked; then pool density and metadata per
//! page when full, and again after a random half is freed and the pool compacted.
//!
//! Each file gets a fresh engine with no pool limit and no backing device, so the figures are
//! the engine's own cost on top of the codec: compare with `bench codecs` on the same file.
//! Store and load are timed apart from the byte check; each is the median of `--rounds`.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::Serialize;
use zswap::compress::CompressorSpec;
use zswap::{Zswap, ZswapConfig, ZswapGroup, PAGE_SIZE};

use super::figures::median;
use super::progress::Progress;
use super::systems::parse_compressor;
use super::workload_args::count_in;
use crate::pages::{load_page_files, PageFile, PageFileError};
use crate::report;
use crate::size::parse_folio_size;

/// Why `uzswap bench engine` stopped: a page file that cannot be used, the engine failing
/// one (it names the file), or the output that could not be written.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A page file that cannot be used.
    #[error(transparent)]
    PageFile(#[from] PageFileError),
    /// The engine failed the page file `path`.
    #[error("{path}")]
    File {
        /// The page file.
        path: PathBuf,
        /// How.
        source: Box<EngineError>,
    },
    /// The file holds less than one folio.
    #[error("has {pages} pages, fewer than one {folio_kib} KiB folio")]
    FewerThanAFolio {
        /// Pages in the file.
        pages: usize,
        /// The folio size, in KiB.
        folio_kib: usize,
    },
    /// Folio stores failed (with no pool limit and a device attached, none should).
    #[error("{0} folio stores failed")]
    StoresFailed(usize),
    /// A page came back from the engine with other bytes than it was stored with.
    #[error("page {0} read back wrong")]
    ReadBackWrong(usize),
    /// The engine's audit found its state inconsistent after a round.
    #[error("engine inconsistent after round {round}: {why}")]
    Inconsistent {
        /// The round.
        round: usize,
        /// What the audit found.
        why: String,
    },
    /// The engine's audit found its state inconsistent after half the pages were freed and
    /// the pool compacted.
    #[error("engine inconsistent after compaction: {0}")]
    InconsistentCompacted(String),
    /// The table or the JSON could not be written.
    #[error("writing the output")]
    Output(#[from] std::io::Error),
    /// The JSON report does not encode.
    #[error("encoding the report")]
    Json(#[from] serde_json::Error),
}

/// The arguments of `uzswap bench engine`.
#[derive(Debug, Clone, clap::Args)]
pub struct EngineArgs {
    /// Page files (raw 4096-byte pages, e.g. corpus/*.pages).
    #[arg(long, value_name = "FILE", required = true, num_args = 1..)]
    pub pages: Vec<PathBuf>,
    /// Compressor, as NAME or NAME:LEVEL.
    #[arg(long, default_value = "lz4", value_parser = parse_compressor)]
    pub compressor: CompressorSpec,
    /// Folio size: 4K to 2M, a power of two (4K, 16K, 64K, 2M; or bytes).
    #[arg(long, value_name = "SIZE", default_value = "4K", value_parser = parse_folio_size)]
    pub folio_size: usize,
    /// Threads storing and loading at once (1 to 256).
    #[arg(long, default_value_t = 1, value_parser = |s: &str| count_in(s, 1, 256))]
    pub threads: usize,
    /// Threads that may compress one folio at once (zswap's `compress_threads`, 1 to 8).
    #[arg(long, default_value_t = 1, value_parser = |s: &str| count_in(s, 1, 8))]
    pub compress_threads: usize,
    /// Timed rounds; the median is reported (1 to 1000). The default holds engine/codec
    /// ratios steady from run to run on a shared machine, where fewer, shorter rounds move
    /// them.
    #[arg(long, default_value_t = 11, value_parser = |s: &str| count_in(s, 1, 1000))]
    pub rounds: usize,
    /// Minimum time of a round, in seconds (0 or more): a round repeats store and load of
    /// every page (and the bare codec passes) until it has run this long.
    #[arg(long, default_value_t = 1.0, value_parser = parse_seconds_or_zero)]
    pub seconds: f64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// One file's results.
#[derive(Debug, Clone, Serialize)]
pub struct EngineResult {
    /// The page file's name.
    pub file: String,
    /// Pages in the file.
    pub pages: usize,
    /// MB (10^6 bytes) of pages stored per second.
    pub store_mb_s: f64,
    /// MB of pages loaded (exclusively: entries freed) per second.
    pub load_mb_s: f64,
    /// The bare codec on one thread, timed in the same rounds: MB of pages compressed per
    /// second (as `bench codecs` counts it).
    pub codec_compress_mb_s: f64,
    /// The bare codec: MB of compressible pages decompressed per second.
    pub codec_decompress_mb_s: f64,
    /// store_mb_s / codec_compress_mb_s.
    pub store_vs_codec: f64,
    /// load_mb_s / codec_decompress_mb_s.
    pub load_vs_codec: f64,
    /// Page bytes over compressed bytes, raw pages at 4096 and zero pages not counted.
    pub ratio: f64,
    /// Stored compressed bytes / pool_total_size, with every page stored.
    pub density_full: f64,
    /// The same after a random half of the pages was freed and the pool compacted.
    pub density_compacted: f64,
    /// Engine metadata (swap cache words, pool handles and spans) per page held.
    pub metadata_bytes_per_page: f64,
    /// The pool's size in bytes (zswap's `pool_total_size`), with every page stored.
    pub pool_total_size: u64,
    /// Bytes of the objects in the pool, with every page stored.
    pub stored_bytes: u64,
    /// Statistics after one store and load of every page.
    pub stats: serde_json::Value,
}

#[derive(Debug, Serialize)]
struct Report<'a> {
    compressor: String,
    folio_size: usize,
    threads: usize,
    compress_threads: usize,
    rounds: usize,
    results: &'a [EngineResult],
    verdict: &'a str,
}

/// A number of seconds, 0 or more, for clap.
fn parse_seconds_or_zero(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s >= 0.0 => Ok(s),
        _ => Err("give a number of seconds, 0 or more (e.g. 1 or 0.5)".into()),
    }
}

/// Run `uzswap bench engine`: store and load every page of each file through the engine and
/// print a table or JSON.
pub fn run(args: &EngineArgs) -> Result<(), EngineError> {
    let (spec, folio_size) = (args.compressor, args.folio_size);
    let files = load_page_files(&args.pages)?;
    let progress = Progress::new(files.len() as u64, "files", false);
    let mut results = Vec::new();
    for file in &files {
        progress.start(&file.name);
        results.push(
            bench_file(
                file,
                spec,
                folio_size,
                (args.threads, args.compress_threads as u32),
                args.rounds,
                args.seconds,
            )
            .map_err(|e| EngineError::File {
                path: file.path.clone(),
                source: Box::new(e),
            })?,
        );
        progress.done("");
    }
    drop(progress);
    let verdict = verdict(spec, &results);
    let mut out = report::stdout();
    if args.json {
        let report = Report {
            compressor: spec.to_string(),
            folio_size,
            threads: args.threads,
            compress_threads: args.compress_threads,
            rounds: args.rounds,
            results: &results,
            verdict: &verdict,
        };
        writeln!(out, "{}", serde_json::to_string(&report)?)?;
        return Ok(());
    }
    writeln!(
        out,
        "compressor {spec}, folio {} KiB, {} thread(s), compress_threads {}, median of {} rounds",
        folio_size / 1024,
        args.threads,
        args.compress_threads,
        args.rounds
    )?;
    writeln!(
        out,
        "{:<24} {:>6} {:>10} {:>9} {:>10} {:>9} {:>6} {:>8} {:>10} {:>9}",
        "file",
        "pages",
        "store MB/s",
        "vs codec",
        "load MB/s",
        "vs codec",
        "ratio",
        "density",
        "compacted",
        "meta B/pg"
    )?;
    for r in &results {
        writeln!(
            out,
            "{:<24} {:>6} {:>10.0} {:>9.2} {:>10.0} {:>9.2} {:>6.2} {:>8.3} {:>10.3} {:>9.1}",
            r.file,
            r.pages,
            r.store_mb_s,
            r.store_vs_codec,
            r.load_mb_s,
            r.load_vs_codec,
            r.ratio,
            r.density_full,
            r.density_compacted,
            r.metadata_bytes_per_page
        )?;
    }
    for r in &results {
        writeln!(
            out,
            "\n{}: statistics after one store and load of every page",
            r.file
        )?;
        if let Some(map) = r.stats.as_object() {
            for (name, value) in map {
                if value.as_u64() != Some(0) {
                    writeln!(out, "  {name} {value}")?;
                }
            }
        }
    }
    writeln!(out, "\n{verdict}")?;
    Ok(())
}

/// The last line: what was checked, and the engine against the bare codec over all the
/// files (MB/s of all the pages over all the time).
fn verdict(spec: CompressorSpec, results: &[EngineResult]) -> String {
    let pages: usize = results.iter().map(|r| r.pages).sum();
    let rate = |f: &dyn Fn(&EngineResult) -> f64| {
        let bytes: f64 = results.iter().map(|r| r.pages as f64).sum();
        bytes / results.iter().map(|r| r.pages as f64 / f(r)).sum::<f64>()
    };
    let (store, load) = (rate(&|r| r.store_mb_s), rate(&|r| r.load_mb_s));
    let (compress, decompress) = (
        rate(&|r| r.codec_compress_mb_s),
        rate(&|r| r.codec_decompress_mb_s),
    );
    format!(
        "verified: every page of {} ({} MiB) read back byte for byte from the engine in every \
         pass, and the engine audited after every round; {spec}, all files: store {store:.0} \
         MB/s ({:.2} of the bare codec), load {load:.0} MB/s ({:.2})",
        match results.len() {
            1 => "1 file".to_string(),
            n => format!("{n} files"),
        },
        (pages * PAGE_SIZE) >> 20,
        store / compress,
        load / decompress
    )
}

fn new_engine(
    spec: CompressorSpec,
    bytes: usize,
    compress_threads: u32,
) -> (Zswap, Arc<ZswapGroup>) {
    // Limits as percentages of far more memory than the file: the pool never fills. A device
    // is attached, as in the default configuration, so incompressible pages are stored raw
    // (with no writeback possible they would be refused); nothing is ever written to it.
    let pages = (bytes / PAGE_SIZE) as u32;
    let device = Arc::new(zswap::swap::MemoryDevice::new(pages));
    let zswap = Zswap::new(
        ZswapConfig::new(bytes as u64 * 100)
            .compressor(spec)
            .device(device, pages),
    );
    zswap
        .params()
        .set_compress_threads(compress_threads)
        .expect("1 to 8, as the flag takes");
    let group = zswap.new_group((bytes / PAGE_SIZE) as u32);
    (zswap, group)
}

/// Run `f` on each thread's share of the folios; returns the wall time in seconds.
fn on_threads(threads: usize, nr_folios: usize, f: impl Fn(usize) + Sync) -> f64 {
    let per = nr_folios.div_ceil(threads);
    let t0 = Instant::now();
    if threads == 1 {
        // On the calling thread, as the bare codec runs: a spawned thread would add its
        // creation, its wait for a CPU and a possibly colder cache to the engine's time.
        (0..nr_folios).for_each(f);
        return t0.elapsed().as_secs_f64();
    }
    std::thread::scope(|s| {
        for t in 0..threads {
            let f = &f;
            s.spawn(move || {
                for i in t * per..((t + 1) * per).min(nr_folios) {
                    f(i);
                }
            });
        }
    });
    t0.elapsed().as_secs_f64()
}

fn store_all(
    group: &ZswapGroup,
    data: &[u8],
    folio_pages: usize,
    threads: usize,
) -> Result<f64, EngineError> {
    let order = folio_pages.trailing_zeros() as u8;
    let nr_folios = data.len() / (folio_pages * PAGE_SIZE);
    let failures = std::sync::atomic::AtomicUsize::new(0);
    let secs = on_threads(threads, nr_folios, |i| {
        let folio = group.lock_folio((i * folio_pages) as u32, order);
        let bytes = &data[i * folio_pages * PAGE_SIZE..(i + 1) * folio_pages * PAGE_SIZE];
        if group.store(&folio, bytes).is_err() {
            failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    });
    let failed = failures.into_inner();
    if failed > 0 {
        return Err(EngineError::StoresFailed(failed));
    }
    Ok(secs)
}

fn load_all(group: &ZswapGroup, out: &mut [u8], folio_pages: usize, threads: usize) -> f64 {
    let order = folio_pages.trailing_zeros() as u8;
    let chunk = folio_pages * PAGE_SIZE;
    let nr_folios = out.len() / chunk;
    // Each folio's output range is written by exactly one thread.
    let chunks: Vec<std::sync::Mutex<&mut [u8]>> =
        out.chunks_mut(chunk).map(std::sync::Mutex::new).collect();
    on_threads(threads, nr_folios, |i| {
        let folio = group.lock_folio((i * folio_pages) as u32, order);
        let mut dst = chunks[i].lock().expect("no thread panics holding it");
        group
            .load(&folio, &mut dst)
            .expect("the pool holds every page");
        group.finish_load(&folio);
    })
}

/// The codec alone, as `bench codecs` runs it: every page compressed into a buffer one byte
/// short of a page; the pages that fit decompressed back.
struct BareCodec<'a> {
    codec: Arc<dyn zswap::compress::Compressor>,
    pages: Vec<&'a [u8]>,
    compressed: Vec<Vec<u8>>,
    decompressed_bytes: usize,
}

impl<'a> BareCodec<'a> {
    fn new(spec: CompressorSpec, data: &'a [u8]) -> Self {
        let codec = spec.build();
        let pages: Vec<&[u8]> = data.chunks(PAGE_SIZE).collect();
        let mut buf = vec![0u8; PAGE_SIZE - 1];
        let compressed: Vec<Vec<u8>> = pages
            .iter()
            .filter_map(|p| codec.compress(p, &mut buf).ok().map(|n| buf[..n].to_vec()))
            .collect();
        let decompressed_bytes = compressed.len() * PAGE_SIZE;
        BareCodec {
            codec,
            pages,
            compressed,
            decompressed_bytes,
        }
    }

    fn compress_pass(&self) -> f64 {
        let mut buf = vec![0u8; PAGE_SIZE - 1];
        let t0 = Instant::now();
        for p in &self.pages {
            let _ = std::hint::black_box(self.codec.compress(std::hint::black_box(p), &mut buf));
        }
        t0.elapsed().as_secs_f64()
    }

    /// Each page decompressed to its own place, as a swap-in writes distinct pages (and as
    /// `bench codecs` measures): a single reused buffer would stay in cache and flatter the
    /// codec against any real use of it.
    fn decompress_pass(&self, out: &mut [u8]) -> f64 {
        let t0 = Instant::now();
        for (c, page) in self.compressed.iter().zip(out.chunks_exact_mut(PAGE_SIZE)) {
            let _ = std::hint::black_box(self.codec.decompress(std::hint::black_box(c), page));
        }
        t0.elapsed().as_secs_f64()
    }
}

fn bench_file(
    file: &PageFile,
    spec: CompressorSpec,
    folio_size: usize,
    (threads, compress_threads): (usize, u32),
    rounds: usize,
    min_secs: f64,
) -> Result<EngineResult, EngineError> {
    let folio_pages = folio_size / PAGE_SIZE;
    let nr_pages = file.data.len() / PAGE_SIZE;
    // Whole folios only: a tail shorter than a folio is left out.
    let usable = nr_pages / folio_pages * folio_pages * PAGE_SIZE;
    if usable == 0 {
        return Err(EngineError::FewerThanAFolio {
            pages: nr_pages,
            folio_kib: folio_size / 1024,
        });
    }
    let data = &file.data[..usable];
    let mut out = vec![0u8; usable];
    // The bare codec writes its own buffer: `out` was just read by the check, and writing it
    // again at once would find it in cache, which the engine's load into it does not.
    let mut codec_out = vec![0u8; usable];
    let codec = BareCodec::new(spec, data);
    let mut rates: [Vec<f64>; 4] = Default::default();
    let mut stats = serde_json::Value::Null;
    for round in 0..rounds {
        let (zswap, group) = new_engine(spec, usable, compress_threads);
        let mut secs = [0f64; 4];
        let mut passes = 0u32;
        while passes == 0 || secs[0] + secs[1] + secs[2] + secs[3] < min_secs {
            out.fill(0);
            secs[0] += store_all(&group, data, folio_pages, threads)?;
            secs[1] += load_all(&group, &mut out, folio_pages, threads);
            if out != data {
                let page = out
                    .chunks(PAGE_SIZE)
                    .zip(data.chunks(PAGE_SIZE))
                    .position(|(a, b)| a != b)
                    .expect("they differ somewhere");
                return Err(EngineError::ReadBackWrong(page));
            }
            secs[2] += codec.compress_pass();
            secs[3] += codec.decompress_pass(&mut codec_out);
            passes += 1;
            if round == 0 && passes == 1 {
                stats = zswap.stats().to_json();
            }
        }
        zswap.compact();
        zswap
            .audit()
            .map_err(|why| EngineError::Inconsistent { round, why })?;
        let n = f64::from(passes);
        rates[0].push(n * usable as f64 / 1e6 / secs[0]);
        rates[1].push(n * usable as f64 / 1e6 / secs[1]);
        rates[2].push(n * usable as f64 / 1e6 / secs[2]);
        rates[3].push(n * codec.decompressed_bytes as f64 / 1e6 / secs[3]);
    }
    let [store_mb_s, load_mb_s, codec_compress_mb_s, codec_decompress_mb_s] = rates.map(median);

    // Density: everything stored; then a random half freed and the pool compacted.
    let (zswap, group) = new_engine(spec, usable, compress_threads);
    store_all(&group, data, folio_pages, threads)?;
    let pool = zswap.pool();
    let stored_bytes = pool.stored_bytes();
    let pool_total_size = pool.total_size();
    let density_full = ratio(stored_bytes, pool_total_size);
    let held = usable / PAGE_SIZE;
    let metadata = (pool.metadata_bytes() + group.cache().metadata_bytes()) as f64;
    let compressed_pages = zswap.stats().get("stored_pages");
    let mut pages: Vec<u32> = (0..held as u32).collect();
    pages.shuffle(&mut rand::rngs::SmallRng::seed_from_u64(1));
    for &p in &pages[..held / 2] {
        let folio = group.lock_folio(p, 0);
        group.invalidate(&folio);
    }
    zswap.compact();
    let density_compacted = ratio(pool.stored_bytes(), pool.total_size());
    zswap.audit().map_err(EngineError::InconsistentCompacted)?;

    Ok(EngineResult {
        file: file.name.clone(),
        pages: held,
        store_mb_s,
        load_mb_s,
        codec_compress_mb_s,
        codec_decompress_mb_s,
        store_vs_codec: store_mb_s / codec_compress_mb_s,
        load_vs_codec: load_mb_s / codec_decompress_mb_s,
        ratio: ratio(compressed_pages * PAGE_SIZE as u64, stored_bytes),
        density_full,
        density_compacted,
        metadata_bytes_per_page: metadata / held as f64,
        pool_total_size,
        stored_bytes,
        stats,
    })
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}
