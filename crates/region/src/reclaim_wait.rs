//! What reclaim's threads wait on, as mm/vmscan.c's `kswapd_wait` and `reclaim_wait`: kswapd
//! sleeps until it is woken (a fault found the region near its limit) or its period passes,
//! and a caller of `Region::reclaim_to` that found nothing left to take waits for another
//! reclaimer to free something (an eviction it had in flight, a discard processed). Reclaim
//! can also be held off (a fork, fork.rs).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Condvar;

use crate::lock_order::{self, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

#[derive(Debug)]
pub(crate) struct ReclaimWait {
    /// kswapd was woken since it last looked. Set without the mutex: a fault wakes kswapd
    /// each time it finds the region near its limit, and while a wake is pending it does no
    /// more: a mutex taken by every fault would make the faults wait for each other and for
    /// the kswapd threads it wakes.
    kswapd_woken: AtomicBool,
    /// Held by a sleeping kswapd from its look at `kswapd_woken` until it waits, and by a
    /// waker around its notification, so that no wake falls between the two.
    kswapd_sleeping: Mutex<()>,
    kswapd_wait: Condvar,
    /// Folios freed by reclaim or discards, ever: a waiter looks for it to change.
    freed: Mutex<u64>,
    reclaim_wait: Condvar,
    /// Held shared by each eviction, exclusively while reclaim is held off (a fork).
    held_off: RwLock<()>,
}

impl Default for ReclaimWait {
    fn default() -> Self {
        ReclaimWait {
            kswapd_woken: AtomicBool::new(false),
            kswapd_sleeping: Mutex::new(&lock_order::KSWAPD_SLEEPING, ()),
            kswapd_wait: Condvar::new(),
            freed: Mutex::new(&lock_order::RECLAIM_FREED, 0),
            reclaim_wait: Condvar::new(),
            held_off: RwLock::new(&lock_order::RECLAIM_HOLD_OFF, ()),
        }
    }
}

impl ReclaimWait {
    /// Wake kswapd (nothing more to do if a wake is pending).
    pub fn wake_kswapd(&self) {
        if self.kswapd_woken.swap(true, Ordering::AcqRel) {
            return;
        }
        let _sleeping = self.kswapd_sleeping.lock();
        self.kswapd_wait.notify_all();
    }

    /// kswapd's sleep: until woken, or `period` passes. A wake before the return is seen by
    /// the pass that follows.
    pub fn kswapd_sleep(&self, period: Duration) {
        let mut sleeping = self.kswapd_sleeping.lock();
        if !self.kswapd_woken.load(Ordering::Acquire) {
            self.kswapd_wait.wait_for(sleeping.parking_lot(), period);
        }
        drop(sleeping);
        self.kswapd_woken.store(false, Ordering::Release);
    }

    /// Something was freed: wake whoever waits for reclaim to make progress.
    pub fn freed(&self) {
        *self.freed.lock() += 1;
        self.reclaim_wait.notify_all();
    }

    /// How many times something was freed so far, to wait for more with `wait_freed`.
    pub fn freed_count(&self) -> u64 {
        *self.freed.lock()
    }

    /// Held by reclaim around each attempt to free something: waits while reclaim is held
    /// off.
    pub fn reclaiming(&self) -> RwLockReadGuard<'_, ()> {
        self.held_off.read()
    }

    /// Hold reclaim off until the guard drops: evictions under way finish first, and no
    /// new one starts.
    pub fn hold_off(&self) -> RwLockWriteGuard<'_, ()> {
        self.held_off.write()
    }

    /// Wait until something is freed after `seen` (a `freed_count`), or `deadline` passes;
    /// false on the deadline.
    pub fn wait_freed(&self, seen: u64, deadline: Instant) -> bool {
        let mut freed = self.freed.lock();
        while *freed == seen {
            if self
                .reclaim_wait
                .wait_until(freed.parking_lot(), deadline)
                .timed_out()
            {
                return *freed != seen;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiter_sees_what_was_freed_after_it_looked() {
        let w = ReclaimWait::default();
        let seen = w.freed_count();
        assert!(!w.wait_freed(seen, Instant::now() + Duration::from_millis(5)));
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(10));
                w.freed();
            });
            assert!(w.wait_freed(seen, Instant::now() + Duration::from_secs(10)));
        });
        w.wake_kswapd();
        let t = Instant::now();
        w.kswapd_sleep(Duration::from_secs(10));
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "woken before it slept"
        );
    }

    #[test]
    fn kswapd_is_woken_while_it_sleeps_and_a_wake_is_seen_once() {
        let w = ReclaimWait::default();
        std::thread::scope(|s| {
            let sleeper = s.spawn(|| {
                let t = Instant::now();
                w.kswapd_sleep(Duration::from_secs(10));
                t.elapsed()
            });
            // Woken again and again until it is seen to have returned: a wake that comes
            // before it sleeps is pending, not lost, and the ones after find it pending.
            while !sleeper.is_finished() {
                w.wake_kswapd();
                std::thread::sleep(Duration::from_millis(1));
            }
            assert!(sleeper.join().unwrap() < Duration::from_secs(5));
        });
        // The wakes it returned for are spent, but the last may have come after it looked.
        w.kswapd_sleep(Duration::ZERO);
        let t = Instant::now();
        w.kswapd_sleep(Duration::from_millis(50));
        assert!(
            t.elapsed() >= Duration::from_millis(50),
            "no wake was pending"
        );
    }
}
