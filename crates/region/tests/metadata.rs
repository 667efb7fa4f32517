//! What a region costs grows with the memory the program touches, not with the address
//! space it reserves: the engine's state words, the page flags and the LRU's per-folio state
//! are allocated as pages are touched (zswap::sparse). One test in its own binary, so that
//! the process's resident memory is the region's alone to change.

use region::{Region, RegionConfig};

const MIB: usize = 1 << 20;
const GIB: usize = 1 << 30;

/// The process's resident memory, in bytes.
fn rss() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib * 1024
}

/// A region of `size` bytes under a 1 GiB limit, in 64 KiB folios; its metadata charge and
/// the process's resident memory right after it is made, then after the program wrote its
/// first 100 MiB, and what it reads back of them; then its metadata charge after the rest,
/// never touched, was protected, made read-write again and discarded twice (a runtime
/// committing and uncommitting its reservation).
fn touch_100_mib(size: usize) -> [usize; 5] {
    let config = RegionConfig::new(GIB as u64).folio_size(64 << 10);
    let before = rss();
    let mut region = Region::new(size, config).unwrap();
    let (made, made_rss) = (region.usage().metadata as usize, rss() - before);
    let memory = &mut region.as_mut_slice()[..100 * MIB];
    for (i, page) in memory.chunks_mut(4096).enumerate() {
        page[..8].copy_from_slice(&(i as u64).to_le_bytes());
    }
    for (i, page) in memory.chunks(4096).enumerate() {
        assert_eq!(page[..8], (i as u64).to_le_bytes(), "page {i}");
    }
    let touched = region.usage().metadata as usize;
    let touched_rss = rss() - before;
    let rest = size - 100 * MIB;
    for _ in 0..2 {
        region.protect(100 * MIB, rest, libc::PROT_NONE).unwrap();
        region
            .protect(100 * MIB, rest, libc::PROT_READ | libc::PROT_WRITE)
            .unwrap();
        region.discard(100 * MIB, rest).unwrap();
    }
    let memory = &region.as_mut_slice()[..100 * MIB];
    for (i, page) in memory.chunks(4096).enumerate() {
        assert_eq!(page[..8], (i as u64).to_le_bytes(), "page {i}");
    }
    let after_rest = region.usage().metadata as usize;
    [made, made_rss, touched, touched_rss, after_rest]
}

#[test]
fn a_64_gib_reservation_costs_what_is_touched() {
    let [small, _, small_touched, _, _] = touch_100_mib(256 * MIB);
    let [big, big_rss, big_touched, big_touched_rss, big_after_rest] = touch_100_mib(64 * GIB);
    eprintln!(
        "metadata charged, made / after 100 MiB touched: 256 MiB region {small} / \
         {small_touched}, 64 GiB region {big} / {big_touched}; resident memory the 64 GiB \
         region added: {big_rss} made, {big_touched_rss} with 100 MiB touched"
    );
    // Made, the 64 GiB region holds only its tables of leaves beyond the small one: 96 KiB
    // for the state words, a few KiB for the rest (with the whole array charged up front,
    // it was 146 MB).
    assert!(big - small < 256 << 10, "{big} vs {small}");
    // Touching 100 MiB costs the same in both, under 1 MiB: the same leaves and bits, give
    // or take one thread's scratch (128 KiB in 64 KiB folios, `FixedCharge::
    // per_thread`), charged once a handler has used it: which handlers serve the faults
    // depends on timing.
    assert!(big_touched - big < MIB, "{big_touched} vs {big}");
    assert!(
        (big_touched - big).abs_diff(small_touched - small) < 192 << 10,
        "{big_touched} - {big} vs {small_touched} - {small}"
    );
    // And in resident memory: the region's buffers, threads' stacks and its metadata, well
    // under what 64 GiB of state words alone would be (128 MiB).
    assert!(big_rss < 4 * MIB, "{big_rss}");
    assert!(big_touched_rss < 100 * MIB + 8 * MIB, "{big_touched_rss}");
    // Protecting and discarding the untouched 64 GiB costs nothing more either (state words
    // for the range would be 128 MiB, a bit a page for its protection 2 MiB).
    assert!(
        big_after_rest - big_touched < 64 << 10,
        "{big_after_rest} vs {big_touched}"
    );
}
