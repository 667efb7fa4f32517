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
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

use parking_lot::Condvar;

use crate::lock_order::{self, Mutex};

/// Spare handlers a region runs besides its `fault_threads`.
pub(crate) const SPARE_HANDLERS: usize = 1;

/// When the spare is needed: the regular handlers' count, and how many handlers wait.
#[derive(Debug)]
pub(crate) struct SpareHandlers {
    /// Regular fault handler threads.
    fault_threads: usize,
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

/// This thread handles faults; `spare`: it is the spare.
pub(crate) fn mark_handler(spare: bool) {
    HANDLER.with(|h| h.set(true));
    SPARE.with(|s| s.set(spare));
}

/// Decrements the count of handlers on the disk, also if the read panics.
struct OnDisk<'a>(&'a AtomicUsize);

impl Drop for OnDisk<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, SeqCst);
    }
}

impl SpareHandlers {
    pub fn new(fault_threads: usize) -> Self {
        SpareHandlers {
            fault_threads,
            on_disk: AtomicUsize::new(0),
            lock: Mutex::new(&lock_order::SPARE, ()),
            needed: Condvar::new(),
        }
    }

    /// Run `wait`, which may last as long as a disk read: a read from the swap file, or
    /// taking a folio lock that someone holds (perhaps across such a read). In a fault
    /// handler, the spare polls meanwhile if this leaves no regular handler polling.
    pub fn blocking<R>(&self, wait: impl FnOnce() -> R) -> R {
        if !HANDLER.with(Cell::get) {
            return wait();
        }
        let _on_disk = OnDisk(&self.on_disk);
        if self.on_disk.fetch_add(1, SeqCst) + 1 >= self.fault_threads {
            // Under the lock, which the spare holds from its check to its wait: not lost.
            let _g = self.lock.lock();
            self.needed.notify_all();
        }
        wait()
    }

    /// Wake the spare from `wait_needed`, to see that it must stop.
    pub fn wake(&self) {
        let _g = self.lock.lock();
        self.needed.notify_all();
    }

    /// Every regular handler is in a `blocking` wait.
    pub fn needed(&self) -> bool {
        self.on_disk.load(SeqCst) >= self.fault_threads
    }

    /// Sleep until the spare is needed, or `stopped` says so (looked at every 100 ms).
    pub fn wait_needed(&self, stopped: impl Fn() -> bool) {
        let mut g = self.lock.lock();
        while !self.needed() && !stopped() {
            self.needed
                .wait_for(g.parking_lot(), Duration::from_millis(100));
        }
    }
}
