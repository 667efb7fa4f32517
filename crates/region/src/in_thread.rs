//! In-thread faults (`RegionConfig::in_thread_faults`): a thread that faults on the region
//! serves its own fault, from the SIGBUS handler the uffd crate puts in place (uffd's
//! `sigbus`), as the kernel serves a swap-in in the faulting task. No event, no handler thread
//! woken, no wake-up back: 6-7 us a fault where a handler thread costs 17-59 us on this VM.
//! The handler threads still read the region's other events (discards, unmaps, moves).
//!
//! The trade-off: a fault the kernel takes for a system call (read(2) into an evicted page)
//! is not served, and the call fails with EFAULT. So only memory the program never hands to
//! the kernel may be in such a region.
//!
//! Why serving from a signal handler is safe here: a SIGBUS of ours comes only from an access
//! to the range, and no code of the region touches the range while it holds a folio lock, the
//! event gate or any part's lock (inner.rs), so the interrupted code holds none of what the
//! fault takes. The program's own locks are never taken. Memory is allocated from the
//! process's allocator, which never touches the range itself.
//!
//! What a serving thread keeps: the engine's per-thread scratch (a folio buffer, the codec's
//! context) stays with the thread, charged to every in-thread region while the thread lives
//! (`scratch_bytes`). Direct reclaim, which stages folios, is bounded as for handlers: at most
//! as many program threads reclaim at once as the region has fault handlers (`reclaim_slot`).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use parking_lot::Condvar;

use crate::lock_order::{self, Mutex, RwLock};
use uffd::sigbus::Fault;
use zswap::compress::CompressorSpec;

use crate::inner::Inner;

/// The regions that serve faults in the faulting thread.
static REGIONS: RwLock<Vec<Arc<Inner>>> = RwLock::new(&lock_order::IN_THREAD_REGIONS, Vec::new());

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
/// together), and the codecs' contexts (zstd's are the process's: `Inner::usage`).
fn scratch_per_thread(folio_bytes: usize, codecs: &[CompressorSpec]) -> u64 {
    let codec: u64 = codecs.iter().map(|c| c.thread_context_bytes()).sum();
    let store_batch = (folio_bytes as u64).min(zswap::zswap::STORE_SCRATCH_BYTES);
    2 * folio_bytes as u64 + store_batch + (16 << 10) + codec
}

/// Serve faults on `inner` in the faulting thread from now on.
pub(crate) fn register(inner: &Arc<Inner>) -> std::io::Result<()> {
    uffd::sigbus::install(serve)?;
    REGIONS.write().push(inner.clone());
    Ok(())
}

/// Stop serving `inner`'s faults (nothing if it was not registered).
pub(crate) fn unregister(inner: &Arc<Inner>) {
    REGIONS.write().retain(|r| !Arc::ptr_eq(r, inner));
}

/// The SIGBUS handler's function: serve a fault on a registered region (uffd's `ServeFn`).
fn serve(fault: Fault) -> bool {
    let inner = REGIONS
        .read()
        .iter()
        .find(|r| r.mapping.page_of(fault.addr).is_some())
        .cloned();
    let Some(inner) = inner else {
        return false;
    };
    // A poisoned page (its data lost: swapin.rs) faults as a SIGBUS of its own, which a
    // kernel without CONFIG_MEMORY_FAILURE reports as a userfault's would be: it goes on to
    // the program, whose access must not be retried (invariant 7).
    let page = inner.mapping.page_of(fault.addr);
    if page.is_some_and(|p| inner.group.peek(p).kind == zswap::swap::Kind::Poisoned) {
        return false;
    }
    // Not counted once its thread-locals are gone (it is exiting): its scratch is then
    // made for each fault and dropped after.
    let _ = SERVING.try_with(|s| {
        let serving = s.take().unwrap_or_else(|| {
            SERVING_THREADS.fetch_add(1, Relaxed);
            Serving { segment_scratch: 0 }
        });
        s.set(Some(serving));
    });
    inner.stats.in_thread_faults.fetch_add(1, Relaxed);
    // Neither ever leaves a fault to another thread (only the spare does), and a fault
    // found served already (or left by a page whose discard is pending) is retried by the
    // access itself.
    if fault.present && fault.write {
        crate::fault::serve_wp_fault(&inner, fault.addr);
    } else {
        crate::fault::serve_fault(&inner, fault.addr, fault.write);
        // Left missing (its discard pending, a handler to process it): give the handler the
        // CPU before the access faults again.
        if page.is_some_and(|p| !inner.pages.is_resident(p)) {
            std::thread::yield_now();
        }
    }
    let _ = SERVING.try_with(|s| {
        let mut serving = s.take();
        if let Some(serving) = &mut serving {
            serving.count_segment_scratch();
        }
        s.set(serving);
    });
    true
}
