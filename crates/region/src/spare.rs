//! The spare fault handler: it reads the userfaultfd only while every regular handler waits
//! on the disk.
//!
//! A fault served from the swap file reads the disk synchronously in the handler that took it
//! (milliseconds on a busy device, where the pool takes microseconds), and a fault on a folio
//! someone holds waits for its holder, who may be in such a read. With every handler in such
//! a wait, every other event would wait behind them: a fault on a page in the pool, and a
//! program's `madvise`, which does not return before a handler has read its event. The
//! kernel's swap-in has no such head-of-line wait (each faulting thread does its own read).
//! Adding handlers that always poll is no answer: every thread that polls the userfaultfd is
//! woken for every fault (bench mix spends 9% of its faulting thread in those wake-ups with
//! two). The spare sleeps on its own condition variable instead and polls only while it is
//! needed. It never waits itself for a folio someone holds (a second fault on a folio under a
//! disk read): it leaves that fault to a regular handler (`left_by_spare`, which only they
//! take) and goes on polling.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use zswap::swap::FolioLock;

use crate::region::Inner;

/// Spare handlers a region runs besides its `fault_threads`.
pub(crate) const SPARE_HANDLERS: usize = 1;

#[derive(Debug, Default)]
pub(crate) struct SpareHandlers {
    /// Fault handlers (the spare included) inside a wait that may last as long as a disk
    /// read (`blocking`).
    on_disk: AtomicUsize,
    lock: Mutex<()>,
    needed: Condvar,
}

thread_local! {
    /// This thread handles faults (a regular handler or the spare); readahead threads, which
    /// read the disk too, hold up no event.
    static HANDLER: Cell<bool> = const { Cell::new(false) };
    /// This thread is the spare.
    static SPARE: Cell<bool> = const { Cell::new(false) };
}

pub(crate) fn is_spare() -> bool {
    SPARE.with(Cell::get)
}

pub(crate) fn mark_handler() {
    HANDLER.with(|h| h.set(true));
}

/// Decrements the count of handlers on the disk, also if the read panics.
struct OnDisk<'a>(&'a AtomicUsize);

impl Drop for OnDisk<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, SeqCst);
    }
}

/// Run `wait`, which may last as long as a disk read: a read from the swap file, or taking a
/// folio lock that someone holds (perhaps across such a read). In a fault handler, the spare
/// polls meanwhile if this leaves no regular handler polling.
pub(crate) fn blocking<R>(inner: &Inner, wait: impl FnOnce() -> R) -> R {
    if !HANDLER.with(Cell::get) {
        return wait();
    }
    let s = &inner.spares;
    let _on_disk = OnDisk(&s.on_disk);
    if s.on_disk.fetch_add(1, SeqCst) + 1 >= inner.fault_threads {
        // Under the lock, which the spare holds from its check to its wait: not lost.
        let _g = s.lock.lock();
        s.needed.notify_all();
    }
    wait()
}

/// Lock the folio at `start` (of the region's folio size) for an event a handler serves: a
/// folio someone holds (a fault or readahead reading it from disk, reclaim storing or writing
/// it) may keep the handler as long as a disk read, a `blocking` wait.
pub(crate) fn lock_folio(inner: &Inner, start: u32) -> FolioLock<'_> {
    if !inner.group.is_locked(start) {
        return inner.group.lock_folio(start, inner.folio_order);
    }
    inner.stats.folio_lock_waits.fetch_add(1, Relaxed);
    blocking(inner, || inner.group.lock_folio(start, inner.folio_order))
}

/// This thread is the spare and the fault's folio at `start` is held: the fault is left to
/// a regular handler (only they may wait for a folio). A holder that comes between this check
/// and the lock is waited for, as any handler would.
pub(crate) fn leaves(inner: &Inner, start: u32) -> bool {
    let leave = is_spare() && inner.group.is_locked(start);
    if leave {
        inner.stats.spare_deferred.fetch_add(1, Relaxed);
    }
    leave
}

fn needed(inner: &Inner) -> bool {
    inner.spares.on_disk.load(SeqCst) >= inner.fault_threads
}

/// The spare's thread: sleep until every regular handler is in a `blocking` wait, then serve
/// events as a handler does until one of them is back.
pub(crate) fn spare_loop(inner: &Inner) {
    mark_handler();
    SPARE.with(|s| s.set(true));
    // Reserved once: a reader must not allocate between reads (see the uffd crate).
    let mut events = Vec::with_capacity(uffd::EVENT_BATCH);
    while !inner.stop.load(Relaxed) {
        {
            let mut g = inner.spares.lock.lock();
            while !needed(inner) && !inner.stop.load(Relaxed) {
                // Timed, to see `stop`.
                inner
                    .spares
                    .needed
                    .wait_for(&mut g, Duration::from_millis(100));
            }
        }
        while needed(inner) && !inner.stop.load(Relaxed) {
            // A short poll: the spare should stop polling soon after a handler is back, as
            // each poller costs every fault a wake-up.
            let served = crate::fault::serve_events(inner, &mut events, Duration::from_millis(5));
            inner.stats.spare_events.fetch_add(served as u64, Relaxed);
        }
        // The last poll may have taken the deferred bell's ring for events deferred (or
        // faults left) after the queues were served: ring again for a regular handler,
        // which serves them at once. (Not while polling: the spare would wake itself.)
        if !inner.deferred.lock().is_empty() || !inner.left_by_spare.lock().is_empty() {
            inner.deferred_bell.ring();
        }
    }
}
