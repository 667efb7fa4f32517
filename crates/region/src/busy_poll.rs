//! Busy polling of the userfaultfd between faults, as the guest's cpuidle haltpoll governor
//! polls before it halts (drivers/cpuidle/governors/haltpoll.c). A handler asleep in poll(2)
//! is woken by the next fault at the cost of a wake-up across CPUs, and the faulting thread
//! waits that long too (on a VM that halts idle CPUs, several times a polling handler's
//! cost: docs/DESIGN.md section 6); a handler that polls without sleeping sees the fault
//! at once. The poll window adapts as haltpoll's does: a wait longer than the window but
//! within `POLL_MAX` grows it (doubling from `POLL_GROW_START`); a wait longer than `POLL_MAX`
//! halves it (to nothing under `POLL_GROW_START`). So a program whose faults come closer than
//! `POLL_MAX` finds a handler awake, and one that faults seldom costs no CPU.
//!
//! One handler polls at a time (the others sleep in poll(2)): a second poller would take a
//! CPU from the program or from kswapd. The poller yields between polls, so a runnable
//! thread on its CPU runs first.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{Acquire, Release};
use std::time::{Duration, Instant};

use uffd::UffdError;

/// The longest window (haltpoll's `guest_halt_poll_ns` is 200 us): a few wake-ups' worth.
/// Past it, a wait is not one a poll should cover.
const POLL_MAX: Duration = Duration::from_micros(200);
/// The first window once waits are short (haltpoll's `guest_halt_poll_grow_start`).
const POLL_GROW_START: Duration = Duration::from_micros(50);

/// Which handler polls: at most one at a time.
#[derive(Default)]
pub(crate) struct BusyPoll {
    polling: AtomicBool,
}

/// One handler's poll window.
#[derive(Default)]
pub(crate) struct PollWindow {
    limit: Duration,
}

/// How a wait ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Woken {
    /// The userfaultfd or the bell was ready while the handler polled.
    Polled,
    /// The userfaultfd or the bell woke the handler from poll(2).
    Slept,
    /// The timeout passed.
    TimedOut,
}

impl BusyPoll {
    /// Wait up to `timeout` for what `ready` polls (the userfaultfd and the deferred events'
    /// bell; `ready(t)` waits up to `t` and says whether it is ready): first by polling, for
    /// as long as `window` says and if no other handler polls, then asleep in poll(2). Says
    /// how the wait ended and how long it polled.
    pub(crate) fn wait(
        &self,
        window: &mut PollWindow,
        timeout: Duration,
        mut ready: impl FnMut(Duration) -> Result<bool, UffdError>,
    ) -> Result<(Woken, Duration), UffdError> {
        let began = Instant::now();
        let mut polled_for = Duration::ZERO;
        if !window.limit.is_zero() && !self.polling.swap(true, Acquire) {
            let polled = loop {
                if ready(Duration::ZERO)? {
                    break true;
                }
                if began.elapsed() >= window.limit {
                    break false;
                }
                std::thread::yield_now();
            };
            self.polling.store(false, Release);
            polled_for = began.elapsed();
            if polled {
                return Ok((Woken::Polled, polled_for));
            }
        }
        let woken = match ready(timeout)? {
            true => Woken::Slept,
            false => Woken::TimedOut,
        };
        window.adjust(began.elapsed());
        Ok((woken, polled_for))
    }

    /// Whether a handler polls now.
    #[cfg(test)]
    fn polling(&self) -> bool {
        self.polling.load(Acquire)
    }
}

impl PollWindow {
    /// After a wait that slept: grow the window if polling a little longer would have
    /// caught its end, shrink it if the wait was longer than any poll should be.
    fn adjust(&mut self, waited: Duration) {
        if waited > self.limit && waited <= POLL_MAX {
            self.limit = (self.limit * 2).clamp(POLL_GROW_START, POLL_MAX);
        } else if waited > POLL_MAX {
            // Halved, and under the first window, none: a handler of a quiet region sleeps.
            self.limit /= 2;
            if self.limit < POLL_GROW_START {
                self.limit = Duration::ZERO;
            }
        }
    }

    /// The window now.
    #[cfg(test)]
    fn limit(&self) -> Duration {
        self.limit
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering::Relaxed;

    use super::*;

    #[test]
    fn short_waits_grow_the_window_and_long_ones_shrink_it_to_nothing() {
        let mut w = PollWindow::default();
        assert_eq!(w.limit(), Duration::ZERO, "no polling before a short wait");
        w.adjust(Duration::from_micros(30));
        assert_eq!(w.limit(), POLL_GROW_START);
        w.adjust(Duration::from_micros(40));
        assert_eq!(w.limit(), POLL_GROW_START, "a wait the window covers");
        w.adjust(Duration::from_micros(60));
        assert_eq!(w.limit(), 2 * POLL_GROW_START);
        for _ in 0..4 {
            w.adjust(Duration::from_micros(190));
        }
        assert_eq!(w.limit(), POLL_MAX, "never past the most");
        w.adjust(Duration::from_millis(5));
        assert_eq!(w.limit(), POLL_MAX / 2);
        for _ in 0..3 {
            w.adjust(Duration::from_millis(5));
        }
        assert_eq!(
            w.limit(),
            Duration::ZERO,
            "a handler of a quiet region sleeps"
        );
    }

    #[test]
    fn one_handler_polls_at_a_time() {
        let busy = BusyPoll::default();
        let rung = AtomicBool::new(false);
        // A userfaultfd stand-in: ready once rung; a wait that is not a poll sleeps its time.
        let ready = |t: Duration| {
            std::thread::sleep(t);
            Ok(rung.load(Relaxed))
        };
        let long = || PollWindow {
            limit: Duration::from_secs(5),
        };
        std::thread::scope(|s| {
            let polling = s.spawn(|| busy.wait(&mut long(), Duration::from_millis(1), ready));
            while !busy.polling() {
                std::thread::yield_now();
            }
            // The other handler sleeps at once: only its timeout ends its wait.
            let began = Instant::now();
            let woken = busy.wait(&mut long(), Duration::from_millis(1), ready);
            assert_eq!(woken.unwrap(), (Woken::TimedOut, Duration::ZERO));
            assert!(began.elapsed() < Duration::from_secs(1));
            rung.store(true, Relaxed);
            assert_eq!(polling.join().unwrap().unwrap().0, Woken::Polled);
        });
        assert!(!busy.polling());
    }
}
