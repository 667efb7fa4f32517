//! Segments are written full: a store that finds the pool full writes its folio together with
//! the pool's coldest pages (one segment, not a few pages padded to a page), and the
//! shrinker's batches fill a segment (sized, when objects are re-encoded by the
//! `writeback_compressor`, by what that made of recent batches). Every byte comes back.

mod common;

use std::sync::Arc;

use zswap::swap::MemoryDevice;
use zswap::zswap::SwapOutResult;
use zswap::{Zswap, ZswapConfig, PAGE_SIZE};

const PAGES: u32 = 4096;

fn page(i: u32) -> Vec<u8> {
    let corpus = common::corpus();
    let mut p = corpus[i as usize % corpus.len()].clone();
    p[..4].copy_from_slice(&i.to_le_bytes());
    p
}

/// Load folios of `order` over the first `stored` pages, and check every page.
fn check_all(group: &zswap::ZswapGroup, stored: u32, order: u8) {
    let nr = 1u32 << order;
    let mut buf = vec![0u8; nr as usize * PAGE_SIZE];
    for start in (0..stored).step_by(nr as usize) {
        let folio = group.lock_folio(start, order);
        group.load(&folio, &mut buf).unwrap();
        for (k, got) in buf.chunks_exact(PAGE_SIZE).enumerate() {
            let i = start + k as u32;
            assert!(got == page(i), "page {i} came back wrong");
        }
    }
}

#[test]
fn a_store_that_finds_the_pool_full_writes_a_full_segment() {
    let device = Arc::new(MemoryDevice::new(2 * PAGES));
    // A pool of 20% of 4 MiB: a few hundred corpus pages fill it.
    let zswap = Zswap::new(
        ZswapConfig::new(4 << 20)
            .device(device, 2 * PAGES)
            .segments(true),
    );
    let group = zswap.new_group(PAGES);
    let mut i = 0;
    loop {
        let folio = group.lock_page(i);
        let result = group.swap_out(&folio, &page(i)).unwrap();
        i += 1;
        if matches!(result, SwapOutResult::WrittenToDisk(_)) {
            break;
        }
    }
    let stats = zswap.stats();
    assert_eq!(stats.get("swap_segments_written"), 1);
    let written_back = stats.get("written_back_pages");
    assert!(
        written_back >= 8,
        "the pool's coldest pages went with the page: {written_back}"
    );
    let bytes = stats.get("swap_written_bytes");
    assert!(
        bytes >= 48 << 10,
        "one segment of {bytes} bytes: not filled"
    );
    // More stores: the pool takes them until it is full again (the accept threshold), and
    // every direct write fills its segment the same way.
    for _ in 0..2000 {
        let folio = group.lock_page(i);
        group.swap_out(&folio, &page(i)).unwrap();
        i += 1;
    }
    let stats = zswap.stats();
    let (segments, bytes) = (
        stats.get("swap_segments_written"),
        stats.get("swap_written_bytes"),
    );
    assert!(segments >= 10, "{segments} direct writes");
    assert!(
        bytes / segments >= 48 << 10,
        "{segments} segments of {bytes} bytes"
    );
    zswap.audit().unwrap();
    check_all(&group, i, 0);
}

#[test]
fn the_shrinker_fills_its_segments() {
    let device = Arc::new(MemoryDevice::new(2 * PAGES));
    let zswap = Zswap::new(
        ZswapConfig::new(1 << 30)
            .device(device, 2 * PAGES)
            .segments(false),
    );
    let group = zswap.new_group(PAGES);
    // Folios of 4 pages: a segment holds a few of them, and a batch may not end on one.
    let stored = 1024;
    for start in (0..stored).step_by(4) {
        let folio = group.lock_folio(start, 2);
        let data: Vec<u8> = (start..start + 4).flat_map(page).collect();
        assert!(matches!(
            group.swap_out(&folio, &data).unwrap(),
            SwapOutResult::Stored
        ));
    }
    let written = group.shrink(stored).written;
    assert_eq!(written, stored);
    let stats = zswap.stats();
    let (segments, bytes) = (
        stats.get("swap_segments_written"),
        stats.get("swap_written_bytes"),
    );
    // Objects as the pool holds them: full segments, but for the last, none followed by a
    // spill of a few pages.
    assert!(
        bytes > (segments - 1) * (56 << 10),
        "{segments} segments of {bytes} bytes"
    );
    zswap.audit().unwrap();
    check_all(&group, stored, 2);
}

/// Store 1024 corpus pages and write them all back with `writeback_compressor` set to
/// `codec`: the bytes the pool held, the bytes written and the segments written.
fn pool_and_written_bytes(codec: &str) -> (u64, u64, u64) {
    let device = Arc::new(MemoryDevice::new(2 * PAGES));
    let zswap = Zswap::new(
        ZswapConfig::new(1 << 30)
            .device(device, 2 * PAGES)
            .segments(true),
    );
    zswap.set_param("writeback_compressor", codec).unwrap();
    let group = zswap.new_group(PAGES);
    let stored = 1024;
    for start in (0..stored).step_by(4) {
        let folio = group.lock_folio(start, 2);
        let data: Vec<u8> = (start..start + 4).flat_map(page).collect();
        group.swap_out(&folio, &data).unwrap();
    }
    let pool = zswap.stats().get("pool_total_size");
    assert_eq!(group.shrink(stored).written, stored);
    zswap.audit().unwrap();
    // Loads never read the tunable (invariant 5): each object names its codec.
    zswap.set_param("writeback_compressor", "same").unwrap();
    check_all(&group, stored, 2);
    zswap.audit().unwrap();
    let stats = zswap.stats();
    (
        pool,
        stats.get("swap_written_bytes"),
        stats.get("swap_segments_written"),
    )
}

#[test]
fn writeback_re_encodes_objects_with_its_own_codec() {
    let (pool, same, _) = pool_and_written_bytes("same");
    let (_, zstd, segments) = pool_and_written_bytes("zstd");
    // As the pool holds them: the same bytes, but for the segments' last pages.
    assert!(same >= pool * 9 / 10, "pool {pool}, written {same}");
    // zstd makes the corpus's lz4 objects about 40% smaller.
    assert!(zstd < same * 3 / 4, "as held {same}, re-encoded {zstd}");
    // Batches sized by what re-encoding made of the last ones: mostly full segments (47-48
    // KiB on average here: corpus batches re-encode unevenly, and one that does worse
    // than the last spills a little; sized by the pool's bytes alone, about 40 KiB).
    assert!(
        zstd / segments >= 44 << 10,
        "{segments} segments of {zstd} bytes"
    );
}
