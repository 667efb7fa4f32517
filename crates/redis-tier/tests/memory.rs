//! The memory the cluster client holds is what the tier charges (`client_bytes`, the
//! device's `memory_bytes`): checked against a counting allocator, at rest with several
//! connections and at the peak of a pipelined write and read.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};

use common::Cluster;
use redis_tier::{RedisSegments, TierOptions};
use zswap::swap::segments::SegmentRead;
use zswap::swap::SegmentDevice;

/// The process's heap, counted: bytes live now and the most since `PEAK` was reset.
struct Counting;
static LIVE: AtomicI64 = AtomicI64::new(0);
static PEAK: AtomicI64 = AtomicI64::new(0);

// SAFETY: every call is System's, with the caller's arguments; the counting only adds and
// subtracts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size() as i64, Relaxed) + layout.size() as i64;
        PEAK.fetch_max(live, Relaxed);
        // SAFETY: the caller's layout, as GlobalAlloc::alloc requires.
        unsafe { System.alloc(layout) }
    }
    /// Counted as a change of size, as glibc's realloc moves a large block by remapping it.
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let grow = new_size as i64 - layout.size() as i64;
        let live = LIVE.fetch_add(grow, Relaxed) + grow;
        PEAK.fetch_max(live, Relaxed);
        // SAFETY: the caller's block, layout and size, as GlobalAlloc::realloc requires.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Relaxed);
        // SAFETY: `ptr` came from System.alloc with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// The most the heap and the tier's charge grew while `op` ran.
fn peaks(store: &RedisSegments, op: impl FnOnce()) -> (i64, i64) {
    let charged_before = store.client_bytes();
    store.take_client_peak();
    let live_before = LIVE.load(Relaxed);
    PEAK.store(live_before, Relaxed);
    op();
    (
        PEAK.load(Relaxed) - live_before,
        store.take_client_peak() as i64 - charged_before as i64,
    )
}

fn within(what: &str, charged: i64, counted: i64) {
    eprintln!("{what}: charged {charged}, counted {counted}");
    assert!(
        charged as f64 >= 0.8 * counted as f64 && charged as f64 <= 2.5 * counted as f64,
        "{what}: the tier charged {charged} bytes, the allocator counted {counted}"
    );
}

#[test]
fn the_client_s_memory_is_charged() {
    let cluster = Cluster::start(7250, false);
    let segment = vec![7u8; 64 << 10];
    let mut outs = vec![vec![0u8; 4096]; 16];
    let base = LIVE.load(Relaxed);
    let store = RedisSegments::connect(&cluster.url, "t-memory", TierOptions::default()).unwrap();

    // A pipelined write of eight segments, then a read of sixteen ranges.
    for round in 0..3u64 {
        let segments: Vec<(u64, &[u8])> = (0..8).map(|i| (round * 8 + i, &segment[..])).collect();
        let (counted, charged) = peaks(&store, || {
            store.put_all(&segments).unwrap();
        });
        within("a write of 8 x 64 KiB at its peak", charged, counted);
    }
    let (counted, charged) = peaks(&store, || {
        let mut reads: Vec<SegmentRead> = outs
            .iter_mut()
            .enumerate()
            .map(|(i, out)| SegmentRead {
                id: i as u64,
                addr: 0,
                offset: 100,
                out: &mut out[..],
            })
            .collect();
        store.get_all(&mut reads).unwrap();
    });
    within("a read of 16 x 4 KiB at its peak", charged, counted);

    // Four threads at once leave four connections.
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (store, segment) = (&store, &segment);
            s.spawn(move || {
                for r in 0..20 {
                    let segments: Vec<(u64, &[u8])> = (0..4)
                        .map(|i| (1000 + t * 1000 + r * 4 + i, &segment[..]))
                        .collect();
                    store.put_all(&segments).unwrap();
                }
            });
        }
    });
    within(
        "at rest, four connections and 344 live segments",
        store.client_bytes() as i64,
        LIVE.load(Relaxed) - base,
    );
    assert_eq!(store.nr_live(), 344);
}
