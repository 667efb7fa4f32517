//! The lock order, checked in debug builds (lockdep's idea, reduced to ranks): every lock
//! belongs to a [`Class`] with a rank, and a thread may wait for a lock only while each lock
//! it holds has a lower rank. Waiting for a lock of a rank it already holds, or a lower one,
//! panics at once with both names: the inversion a deadlock needs, found on the first run
//! that takes the two in the wrong order, not on the rare run where two threads meet there.
//!
//! A try-lock never waits, so it is not checked, but the lock it takes counts as held. In
//! release builds every check is compiled out and [`Mutex`] and [`RwLock`] are parking_lot's.
//!
//! The ranks of the engine's callers (crates/region/src/lock_order.rs documents the order):
//! [`FOLIO`] is this crate's, the others are the region's.

use std::ops::{Deref, DerefMut};

/// A kind of lock and its place in the order: lower ranks are taken first.
#[derive(Debug)]
pub struct Class {
    name: &'static str,
    // Read by the checks, which release builds leave out.
    #[cfg_attr(not(debug_assertions), allow(dead_code))]
    rank: u8,
}

/// Ranks run from 0 to `RANKS - 1`.
const RANKS: usize = 64;

impl Class {
    /// The class `name` of rank `rank` (below 64).
    pub const fn new(name: &'static str, rank: u8) -> Self {
        assert!((rank as usize) < RANKS, "a lock rank is below 64");
        Class { name, rank }
    }

    /// This class's name, as a panic names it.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

/// The swap cache's folio locks: one waited for at a time; more may be held by try-locks
/// (reclaim's batch of neighbours) or taken in ascending order within one folio
/// (`SwapCache::lock_folio`).
pub static FOLIO: Class = Class::new("folio lock", 10);

/// Whether this process checks the order (debug builds: until `disable`).
#[cfg(debug_assertions)]
static ENABLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Check nothing in this process from now on; call it before any lock is taken. For a
/// process whose threads' thread-locals may live in memory a region holds (a program under
/// the preload, whose malloc gives glibc the blocks of lazily allocated thread-locals): a
/// check reads them, and a fault on one under the event gate would wait for a handler that
/// waits for the gate.
pub fn disable() {
    #[cfg(debug_assertions)]
    ENABLED.store(false, std::sync::atomic::Ordering::Relaxed);
}

#[cfg(debug_assertions)]
fn enabled() -> bool {
    ENABLED.load(std::sync::atomic::Ordering::Relaxed)
}

#[cfg(debug_assertions)]
mod held {
    use std::cell::Cell;

    use super::{Class, RANKS};

    // Counts and names in `Cell`s with constant initialisers: no allocation and no
    // destructor to register, as a thread of a preloaded program may take a lock first
    // inside its malloc.
    thread_local! {
        /// How many locks of each rank this thread holds.
        static COUNT: [Cell<u32>; RANKS] = const { [const { Cell::new(0) }; RANKS] };
        /// The class last taken at each rank, for the message.
        static NAME: [Cell<&'static str>; RANKS] = const { [const { Cell::new("") }; RANKS] };
    }

    pub fn will_wait(class: &Class) {
        COUNT.with(|count| {
            let held = (class.rank as usize..RANKS)
                .rev()
                .find(|&r| count[r].get() > 0);
            if let Some(r) = held {
                let name = NAME.with(|n| n[r].get());
                panic!(
                    "lock order: waiting for the {} (rank {}) while holding the {name} (rank {r})",
                    class.name, class.rank
                );
            }
        });
    }

    pub fn taken(class: &Class) {
        let r = class.rank as usize;
        COUNT.with(|count| count[r].set(count[r].get() + 1));
        NAME.with(|n| n[r].set(class.name));
    }

    pub fn released(class: &Class) {
        let r = class.rank as usize;
        COUNT.with(|count| {
            let n = count[r].get();
            // (Unwinding, a panic here would abort.)
            if n == 0 && !std::thread::panicking() {
                panic!(
                    "lock order: the {} released by a thread that did not take it",
                    class.name
                );
            }
            count[r].set(n.saturating_sub(1));
        });
    }

    pub fn holds_any() -> Option<&'static str> {
        COUNT.with(|count| {
            let r = (0..RANKS).find(|&r| count[r].get() > 0)?;
            Some(NAME.with(|n| n[r].get()))
        })
    }
}

/// This thread is about to wait for a lock of `class`: panics (debug builds) if it holds
/// one of the same rank or a later one.
#[inline]
pub fn will_wait(class: &Class) {
    #[cfg(debug_assertions)]
    if enabled() {
        held::will_wait(class);
    }
    #[cfg(not(debug_assertions))]
    let _ = class;
}

/// This thread now holds a lock of `class` (after waiting for it, or by a try-lock).
#[inline]
pub fn taken(class: &Class) {
    #[cfg(debug_assertions)]
    if enabled() {
        held::taken(class);
    }
    #[cfg(not(debug_assertions))]
    let _ = class;
}

/// This thread no longer holds a lock of `class`.
#[inline]
pub fn released(class: &Class) {
    #[cfg(debug_assertions)]
    if enabled() {
        held::released(class);
    }
    #[cfg(not(debug_assertions))]
    let _ = class;
}

/// Panics (debug builds) if this thread holds any lock: before `what`, a call that waits
/// for another thread which may need them (an `madvise` of the range waits for a handler
/// to read its event).
#[inline]
pub fn assert_none_held(what: &str) {
    #[cfg(debug_assertions)]
    if let Some(name) = enabled().then(held::holds_any).flatten() {
        panic!("lock order: {what} while holding the {name}");
    }
    #[cfg(not(debug_assertions))]
    let _ = what;
}

/// A held lock of a class: released from the order when it drops.
struct Held(&'static Class);

impl Held {
    fn taken(class: &'static Class) -> Self {
        taken(class);
        Held(class)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        released(self.0);
    }
}

/// parking_lot's mutex in a lock class.
#[derive(Debug)]
pub struct Mutex<T> {
    class: &'static Class,
    lock: parking_lot::Mutex<T>,
}

/// A [`Mutex`] held.
pub struct MutexGuard<'a, T> {
    guard: parking_lot::MutexGuard<'a, T>,
    _held: Held,
}

impl<T> Mutex<T> {
    /// `value` under a mutex of `class`.
    pub const fn new(class: &'static Class, value: T) -> Self {
        Mutex {
            class,
            lock: parking_lot::Mutex::new(value),
        }
    }

    /// Wait for the mutex (checked against the locks this thread holds).
    pub fn lock(&self) -> MutexGuard<'_, T> {
        will_wait(self.class);
        MutexGuard {
            guard: self.lock.lock(),
            _held: Held::taken(self.class),
        }
    }
}

impl<'a, T> MutexGuard<'a, T> {
    /// parking_lot's guard, for a `Condvar` to wait on (the lock counts as held meanwhile:
    /// a thread asleep takes nothing).
    pub fn parking_lot(&mut self) -> &mut parking_lot::MutexGuard<'a, T> {
        &mut self.guard
    }
}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

/// parking_lot's reader-writer lock in a lock class (shared or exclusive, the same rank).
#[derive(Debug)]
pub struct RwLock<T> {
    class: &'static Class,
    lock: parking_lot::RwLock<T>,
}

/// A [`RwLock`] held shared.
pub struct RwLockReadGuard<'a, T> {
    guard: parking_lot::RwLockReadGuard<'a, T>,
    held: Held,
}

/// A [`RwLock`] held exclusively.
pub struct RwLockWriteGuard<'a, T> {
    guard: parking_lot::RwLockWriteGuard<'a, T>,
    _held: Held,
}

impl<T> RwLock<T> {
    /// `value` under a reader-writer lock of `class`.
    pub const fn new(class: &'static Class, value: T) -> Self {
        RwLock {
            class,
            lock: parking_lot::RwLock::new(value),
        }
    }

    /// Wait to hold it shared.
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        will_wait(self.class);
        RwLockReadGuard {
            guard: self.lock.read(),
            held: Held::taken(self.class),
        }
    }

    /// Hold it exclusively if nobody holds it (never waits, so not checked).
    pub fn try_write(&self) -> Option<RwLockWriteGuard<'_, T>> {
        Some(RwLockWriteGuard {
            guard: self.lock.try_write()?,
            _held: Held::taken(self.class),
        })
    }

    /// Wait to hold it exclusively.
    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        will_wait(self.class);
        RwLockWriteGuard {
            guard: self.lock.write(),
            _held: Held::taken(self.class),
        }
    }
}

impl<'a, T> RwLockReadGuard<'a, T> {
    /// Whether `s` holds `lock`.
    pub fn is_of(s: &Self, lock: &RwLock<T>) -> bool {
        std::ptr::eq(parking_lot::RwLockReadGuard::rwlock(&s.guard), &lock.lock)
    }

    /// Run `f` with the lock given up, and take it again after (checked like any wait).
    pub fn unlocked<U>(s: &mut Self, f: impl FnOnce() -> U) -> U {
        // Taken again when `f` returns, or panics: parking_lot takes the lock again then.
        struct TakenAgain(&'static Class);
        impl Drop for TakenAgain {
            fn drop(&mut self) {
                taken(self.0);
            }
        }
        let class = s.held.0;
        released(class);
        let _taken_again = TakenAgain(class);
        parking_lot::RwLockReadGuard::unlocked(&mut s.guard, || {
            let u = f();
            will_wait(class);
            u
        })
    }
}

impl<T> Deref for RwLockReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> Deref for RwLockWriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> DerefMut for RwLockWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

#[cfg(all(test, debug_assertions))]
mod tests {
    use super::*;

    static OUTER: Class = Class::new("outer test lock", 1);
    static INNER: Class = Class::new("inner test lock", 2);

    #[test]
    fn locks_taken_in_rank_order_pass() {
        let outer = Mutex::new(&OUTER, 1);
        let inner = RwLock::new(&INNER, 2);
        let a = outer.lock();
        let b = inner.read();
        assert_eq!(*a + *b, 3);
        drop(a); // out of order releases are fine
        drop(b);
        let _again = outer.lock();
    }

    #[test]
    #[should_panic(
        expected = "waiting for the outer test lock (rank 1) while holding the inner test lock (rank 2)"
    )]
    fn a_lower_rank_waited_for_under_a_higher_one_panics() {
        let outer = Mutex::new(&OUTER, ());
        let inner = Mutex::new(&INNER, ());
        let _b = inner.lock();
        let _a = outer.lock();
    }

    #[test]
    #[should_panic(expected = "while holding the inner test lock")]
    fn two_locks_of_one_rank_panic() {
        let one = RwLock::new(&INNER, ());
        let two = RwLock::new(&INNER, ());
        let _a = one.write();
        let _b = two.read();
    }

    #[test]
    #[should_panic(expected = "lock order: an madvise while holding the outer test lock")]
    fn a_call_that_needs_no_lock_held_panics_under_one() {
        let outer = Mutex::new(&OUTER, ());
        let _a = outer.lock();
        assert_none_held("an madvise");
    }
}
