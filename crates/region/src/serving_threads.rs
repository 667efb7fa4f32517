//! The program threads that serve their own faults (in_thread.rs): the direct reclaim slots
//! they take turns in, as many as the region has fault handlers, and the engine's scratch
//! each keeps once it has served a fault, charged to every in-thread region while the
//! thread lives.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use parking_lot::Condvar;
use zswap::compress::CompressorSpec;

use crate::lock_order::{self, Mutex};

/// Threads alive that have served an in-thread fault (and keep the engine's scratch).
static SERVING_THREADS: AtomicU64 = AtomicU64::new(0);
/// What those threads keep for segments (zswap's `thread_scratch_bytes`), as of their last
/// fault.
static SERVING_SEGMENT_SCRATCH: AtomicU64 = AtomicU64::new(0);

/// Counts this thread among `SERVING_THREADS`, and its segment buffers in
/// `SERVING_SEGMENT_SCRATCH`, while it lives.
struct Serving {
    segment_scratch: u64,
}

impl Serving {
    /// Count what the thread's segment buffers grew to (they never shrink).
    fn count_segment_scratch(&mut self) {
        let now = zswap::swap::segments::thread_scratch_bytes();
        if now > self.segment_scratch {
            SERVING_SEGMENT_SCRATCH.fetch_add(now - self.segment_scratch, Relaxed);
            self.segment_scratch = now;
        }
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        SERVING_THREADS.fetch_sub(1, Relaxed);
        SERVING_SEGMENT_SCRATCH.fetch_sub(self.segment_scratch, Relaxed);
    }
}

thread_local! {
    static SERVING: Cell<Option<Serving>> = const { Cell::new(None) };
}

/// A region's in-thread state: its direct reclaim slots.
#[derive(Debug)]
pub(crate) struct InThreadFaults {
    free_slots: Mutex<usize>,
    slot_freed: Condvar,
    /// What a serving thread's scratch costs (`scratch_bytes`).
    per_thread: u64,
}

impl InThreadFaults {
    /// `slots` program threads may reclaim at once; folios of `folio_bytes`, compressed
    /// with `codecs` (the pool's, and writeback's if it has its own).
    pub fn new(slots: usize, folio_bytes: usize, codecs: &[CompressorSpec]) -> Self {
        InThreadFaults {
            free_slots: Mutex::new(&lock_order::RECLAIM_SLOTS, slots),
            slot_freed: Condvar::new(),
            per_thread: scratch_per_thread(folio_bytes, codecs),
        }
    }

    /// Wait for a direct reclaim slot; it is given back when the guard drops.
    pub fn reclaim_slot(&self) -> ReclaimSlot<'_> {
        let mut free = self.free_slots.lock();
        while *free == 0 {
            self.slot_freed.wait(free.parking_lot());
        }
        *free -= 1;
        ReclaimSlot(self)
    }

    /// The scratch of the threads that serve in-thread faults now, in bytes.
    pub fn scratch_bytes(&self) -> u64 {
        SERVING_THREADS.load(Relaxed) * self.per_thread + SERVING_SEGMENT_SCRATCH.load(Relaxed)
    }
}

/// A direct reclaim slot (`InThreadFaults::reclaim_slot`).
pub(crate) struct ReclaimSlot<'a>(&'a InThreadFaults);

impl Drop for ReclaimSlot<'_> {
    fn drop(&mut self) {
        *self.0.free_slots.lock() += 1;
        self.0.slot_freed.notify_one();
    }
}

/// The engine's scratch one thread keeps once it has swapped in and reclaimed: two folio
/// buffers (a load's, a writeback's), the store's batch buffer (at most
/// `STORE_SCRATCH_BYTES`), the load's page buffer and the store's entry list (16 KiB
/// together), and the codecs' contexts (zstd's are the process's: `Meter::usage`).
fn scratch_per_thread(folio_bytes: usize, codecs: &[CompressorSpec]) -> u64 {
    let codec: u64 = codecs.iter().map(|c| c.thread_context_bytes()).sum();
    let store_batch = (folio_bytes as u64).min(zswap::zswap::STORE_SCRATCH_BYTES);
    2 * folio_bytes as u64 + store_batch + (16 << 10) + codec
}

/// This thread serves an in-thread fault: count it among the serving threads (once), while
/// it lives. Not counted once its thread-locals are gone (it is exiting): its scratch is then
/// made for each fault and dropped after.
pub(crate) fn this_thread_serves() {
    let _ = SERVING.try_with(|s| {
        let serving = s.take().unwrap_or_else(|| {
            SERVING_THREADS.fetch_add(1, Relaxed);
            Serving { segment_scratch: 0 }
        });
        s.set(Some(serving));
    });
}

/// After a fault: count what this thread's segment buffers grew to.
pub(crate) fn count_segment_scratch() {
    let _ = SERVING.try_with(|s| {
        let mut serving = s.take();
        if let Some(serving) = &mut serving {
            serving.count_segment_scratch();
        }
        s.set(serving);
    });
}
