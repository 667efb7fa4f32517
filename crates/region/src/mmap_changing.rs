//! Operations held off by the program's own discards. From the moment the kernel raises an
//! event for the range (a discard's `UFFD_EVENT_REMOVE`) until the thread that raised it runs
//! again after a handler has read it, every install, move and unprotect on the range fails
//! `EAGAIN` (the kernel's `mmap_changing`); the caller reads the events and starts over
//! (`Mapping::under_gate`). A program thread that discards in a loop (a runtime freeing and
//! taking back an untouched reservation) raises its next event before that retry: always,
//! where the two share a CPU, since the handler's read wakes the discarder, which runs on to
//! its next event before the handler runs again. No fault is served while the loop lasts.
//! (The kernel's own fault path has no such check: it meets a zap only on the page-table lock.)
//!
//! So an operation that stopped for pending events counts itself here until it is done, and a
//! program thread about to discard region memory waits first until none is counted
//! (`wait_for_retries`, at most `WAIT_MAX`: an operation may be held off by an event no
//! discarder here raised, or retry across a read from the disk).
//!
//! The count is the futex itself: no lock, so the wait and the count's drop are safe in a
//! signal handler (an in-thread fault is served in one, in_thread.rs, and a program's handler
//! may discard).

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use rustix::thread::futex;

/// The longest a discarding thread waits for the operations held off.
const WAIT_MAX: Duration = Duration::from_millis(20);

/// Operations on the range starting over after a stop for pending events.
#[derive(Default)]
pub(crate) struct MmapChanging {
    retrying: AtomicU32,
}

/// An operation starting over, counted until it drops.
pub(crate) struct Retrying<'a>(&'a MmapChanging);

impl MmapChanging {
    /// An operation stopped for pending events: discarders wait for it until the guard drops.
    pub fn retrying(&self) -> Retrying<'_> {
        self.retrying.fetch_add(1, Ordering::SeqCst);
        Retrying(self)
    }

    /// Wait until no operation on the range is starting over, or `WAIT_MAX` has passed:
    /// called by a thread about to raise an event on the range (a discard). Returns how long
    /// it waited, if it did.
    pub fn wait_for_retries(&self) -> Option<Duration> {
        let mut began = None;
        loop {
            let n = self.retrying.load(Ordering::SeqCst);
            let waited = began.map(|at: Instant| at.elapsed());
            if n == 0 {
                return waited;
            }
            let began = *began.get_or_insert_with(Instant::now);
            let Some(left) = WAIT_MAX.checked_sub(began.elapsed()) else {
                return waited;
            };
            let left = rustix::time::Timespec {
                tv_sec: left.as_secs() as i64,
                tv_nsec: left.subsec_nanos().into(),
            };
            // Sleeps only while the count is still `n`: a drop to zero before the call makes
            // it return at once (EAGAIN), one after it wakes it. A signal or the timeout ends
            // it too; the loop looks again.
            let _ = futex::wait(&self.retrying, futex::Flags::PRIVATE, n, Some(&left));
        }
    }
}

impl Drop for Retrying<'_> {
    fn drop(&mut self) {
        if self.0.retrying.fetch_sub(1, Ordering::SeqCst) == 1 {
            let _ = futex::wake(&self.0.retrying, futex::Flags::PRIVATE, u32::MAX);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn a_discarder_waits_for_a_retry_until_it_is_done() {
        let m = MmapChanging::default();
        assert_eq!(m.wait_for_retries(), None, "nothing retrying: no wait");
        let dropped = AtomicBool::new(false);
        std::thread::scope(|s| {
            let first = m.retrying();
            let second = m.retrying();
            let waiter = s.spawn(|| {
                let waited = m.wait_for_retries().expect("waited");
                dropped.load(Ordering::SeqCst) || waited >= WAIT_MAX
            });
            std::thread::sleep(Duration::from_millis(2));
            drop(first);
            std::thread::sleep(Duration::from_millis(2));
            dropped.store(true, Ordering::SeqCst);
            drop(second);
            assert!(waiter.join().unwrap(), "returned while a retry went on");
        });
    }

    #[test]
    fn a_discarder_waits_at_most_wait_max() {
        let m = MmapChanging::default();
        let _retrying = m.retrying();
        assert!(m.wait_for_retries().expect("waited") >= WAIT_MAX);
    }
}
