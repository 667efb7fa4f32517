//! The memory the cluster client holds is what the tier charges (`client_bytes`, the
//! device's `memory_bytes`): checked against a counting allocator, at rest with several
//! connections and at the peak of a pipelined write and read.

mod common;

use common::Cluster;
use peak_alloc::PeakAlloc;
use redis_tier::{RedisSegments, TierOptions};
use zswap::swap::segments::SegmentRead;
use zswap::swap::SegmentDevice;

/// The process's heap, counted: bytes live now and the most since the peak was reset. Its
/// realloc copies (a new block, then the old freed), where glibc's remaps a large block:
/// a growing buffer's peak counts its old size once more than glibc would hold.
#[global_allocator]
static HEAP: PeakAlloc = PeakAlloc;

fn live() -> i64 {
    HEAP.current_usage() as i64
}

/// The most the heap and the tier's charge grew while `op` ran.
fn peaks(store: &RedisSegments, op: impl FnOnce()) -> (i64, i64) {
    let charged_before = store.client_bytes();
    store.take_client_peak();
    let live_before = live();
    HEAP.reset_peak_usage();
    op();
    (
        HEAP.peak_usage() as i64 - live_before,
        store.take_client_peak() as i64 - charged_before as i64,
    )
}

fn within(what: &str, charged: i64, counted: i64) {
    eprintln!("{what}: charged {charged}, counted {counted}");
    assert!(
        charged as f64 >= 0.7 * counted as f64 && charged as f64 <= 2.5 * counted as f64,
        "{what}: the tier charged {charged} bytes, the allocator counted {counted}"
    );
}

#[test]
fn the_client_s_memory_is_charged() {
    let cluster = Cluster::start(7250, false);
    let segment = vec![7u8; 64 << 10];
    let mut outs = vec![vec![0u8; 4096]; 16];
    let base = live();
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
        live() - base,
    );
    assert_eq!(store.nr_live(), 344);
}
