//! The workload kernels on small plain buffers: they must catch corruption, or a benchmark of
//! a broken memory system would report a figure instead of an error.

use uzswap_cli::bench::workload::{
    self, access_word, fill, mix_fills, run_accesses_for_test, run_on_memory, usemem_check,
    usemem_write, Content, Fill, Ledger, Workload, WorkloadSpec,
};
use zswap::PAGE_SIZE;

fn content() -> Content {
    // Two distinct "compressible" pages: enough to tell pages apart in the check.
    let mut pages = vec![0u8; 2 * PAGE_SIZE];
    for (i, b) in pages.iter_mut().enumerate() {
        *b = (i / 7 % 251) as u8;
    }
    Content::from_pages(pages)
}

fn spec(workload: Workload) -> WorkloadSpec {
    WorkloadSpec {
        workload,
        memory_high: 1 << 20,
        folio_size: PAGE_SIZE,
        corpus: None,
        seed: 7,
    }
}

#[test]
fn usemem_writes_index_words_and_checks_them() {
    let mut mem = vec![0u8; 16 * PAGE_SIZE];
    usemem_write(&mut mem);
    usemem_check(&mem).unwrap();
    assert_eq!(u64::from_ne_bytes(mem[8..16].try_into().unwrap()), 1);
}

#[test]
fn usemem_check_catches_a_flipped_word() {
    let mut mem = vec![0u8; 16 * PAGE_SIZE];
    usemem_write(&mut mem);
    mem[5 * PAGE_SIZE + 24] ^= 0x10;
    let e = usemem_check(&mem).unwrap_err().to_string();
    assert!(
        e.contains(&format!("word {}", (5 * PAGE_SIZE + 24) / 8)),
        "{e}"
    );
}

#[test]
fn usemem_reports_every_worker() {
    let s = spec(Workload::Usemem {
        workers: 3,
        size: 8 * PAGE_SIZE as u64,
    });
    let mut mem = vec![0u8; s.area_bytes()];
    let out = run_on_memory(&s, None, &mut mem).unwrap();
    assert_eq!(out.phases.len(), 2);
    for p in &out.phases {
        assert_eq!(p.per_worker_kb_s.len(), 3);
        assert!(p.total_kb_s > 0.0);
        assert_eq!(p.bytes, 24 * PAGE_SIZE as u64);
    }
    assert!(out.verified);
}

#[test]
fn mix_fills_three_areas_and_verifies_after_accesses() {
    let c = content();
    let s = spec(Workload::Mix {
        size: 3 * 32 * PAGE_SIZE as u64,
        seconds: 1.0,
    });
    let mut mem = vec![0u8; s.area_bytes()];
    let out = run_accesses_for_test(&s, &c, &mut mem, 20_000).unwrap();
    assert_eq!(out.accesses, Some(20_480)); // whole batches of 1024
    assert!(out.verified);
    // The third area is random, not the content.
    assert_ne!(&mem[64 * PAGE_SIZE..65 * PAGE_SIZE], c.page(0));
}

#[test]
fn mix_verification_catches_a_lost_access_and_a_changed_byte() {
    let c = content();
    let pages = 3 * 8;
    let fills = mix_fills(8, 3);
    let mut mem = vec![0u8; pages * PAGE_SIZE];
    for (chunk, f) in mem.chunks_mut(8 * PAGE_SIZE).zip(&fills) {
        fill(chunk, *f, Some(&c));
    }
    let mut ledger = Ledger::new(pages);
    let (n, _) = workload::random_accesses(&mut mem, 3, &mut ledger, f64::INFINITY, Some(1), 9);
    assert_eq!(ledger.total(), n);
    workload::verify(&mem, &fills, Some(&c), &ledger).unwrap();

    // An access the ledger does not know of (a write lost or doubled by the memory system).
    let mut bad = mem.clone();
    let page = 17; // in the random area
    let w = page * PAGE_SIZE + access_word(page) * 8;
    bad[w] = bad[w].wrapping_add(1);
    let e = workload::verify(&bad, &fills, Some(&c), &ledger)
        .unwrap_err()
        .to_string();
    assert!(e.contains("page 17"), "{e}");

    // A byte elsewhere in a compressible page.
    let mut bad = mem.clone();
    bad[3 * PAGE_SIZE + 100] ^= 1;
    let e = workload::verify(&bad, &fills, Some(&c), &ledger)
        .unwrap_err()
        .to_string();
    assert!(e.contains("page 3 ") && e.contains("byte 100"), "{e}");
}

#[test]
fn heap_is_one_compressible_area() {
    let c = content();
    let s = spec(Workload::Heap {
        size: 10 * PAGE_SIZE as u64,
        seconds: 1.0,
    });
    let mut mem = vec![0u8; s.area_bytes()];
    let out = run_accesses_for_test(&s, &c, &mut mem, 5_000).unwrap();
    assert!(out.verified && out.accesses_per_s.unwrap() > 0.0);
    // Untouched words are the content, cycled.
    let p = 4;
    let w = access_word(p);
    let off = if w == 0 { 8 } else { 0 };
    assert_eq!(mem[p * PAGE_SIZE + off], c.page(p)[off]);
    // A fill is reproducible: the check regenerates it.
    let mut again = vec![0u8; 2 * PAGE_SIZE];
    fill(&mut again, Fill::Random { seed: 5 }, None);
    let mut twice = vec![0u8; 2 * PAGE_SIZE];
    fill(&mut twice, Fill::Random { seed: 5 }, None);
    assert_eq!(again, twice);
}

#[test]
fn missing_corpus_is_a_clear_error() {
    let e = Content::load(std::path::Path::new("/nonexistent/corpus"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("/nonexistent/corpus") && e.contains("--corpus"),
        "{e}"
    );
}

#[test]
fn specs_round_trip_as_json() {
    let s = spec(Workload::Mix {
        size: 1 << 20,
        seconds: 2.5,
    });
    let j = serde_json::to_string(&s).unwrap();
    assert_eq!(serde_json::from_str::<WorkloadSpec>(&j).unwrap(), s);
    assert_eq!(s.area_bytes() % (3 * PAGE_SIZE), 0);
}

#[test]
fn the_built_in_corpus_is_the_repository_corpus() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../corpus");
    let from_dir = Content::load(&dir).unwrap();
    let built_in = Content::builtin();
    let pages: u64 = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pages"))
        .map(|p| std::fs::metadata(p).unwrap().len() / PAGE_SIZE as u64)
        .sum();
    assert!(pages >= 1024, "{pages} pages in {}", dir.display());
    // One whole cycle and the start of the next: the same pages in the same order.
    for n in 0..pages as usize + 16 {
        assert!(from_dir.page(n) == built_in.page(n), "page {n}");
    }
    assert!(
        Content::load_or_builtin(None).unwrap().page(7) == built_in.page(7)
            && Content::load_or_builtin(Some(&dir)).unwrap().page(7) == from_dir.page(7)
    );
}
