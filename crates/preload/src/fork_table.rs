//! The tables of the preload's own allocators (mmap.rs's blocks, large_blocks.rs's free
//! ranges, over_aligned.rs's carved blocks): each behind a mutex that program threads take
//! for a moment, and that a fork holds from its prepare handler to its parent's or child's
//! (init.rs). So a fork copies every table while no thread is changing it, and a child
//! never finds one locked by a thread it does not have (glibc holds its malloc's arenas
//! across a fork for the same reason). The forking thread itself may use a table meanwhile
//! (another library's fork handler that frees or maps memory runs between the prepare
//! handler and ours in the parent or the child): through the guard it holds.

use std::cell::Cell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicPtr, Ordering::Acquire, Ordering::Release};
use std::sync::{Mutex, MutexGuard};

thread_local! {
    /// This thread holds the tables across a fork. A `Cell<bool>`: no destructor, so a first
    /// use registers nothing with glibc (which would take the loader's lock).
    static FORKING: Cell<bool> = const { Cell::new(false) };
}

/// Mark this thread as the one holding the tables across a fork, or not any more.
pub fn set_forking(on: bool) {
    FORKING.with(|f| f.set(on));
}

/// A table the forking thread holds across a fork.
pub struct ForkTable<T: 'static> {
    lock: Mutex<T>,
    /// The guard the forking thread holds (`hold`), boxed; null when no fork holds it.
    held: AtomicPtr<MutexGuard<'static, T>>,
}

/// The table, locked for this thread.
pub enum TableGuard<T: 'static> {
    Locked(MutexGuard<'static, T>),
    /// The forking thread's use of the table its fork holds.
    Held(&'static mut T),
}

impl<T> ForkTable<T> {
    pub const fn new(table: T) -> Self {
        ForkTable {
            lock: Mutex::new(table),
            held: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// Lock the table (a thread that panicked holding it left it whole: each change is one
    /// map operation).
    pub fn lock(&'static self) -> TableGuard<T> {
        if FORKING.with(Cell::get) {
            let held = self.held.load(Acquire);
            if !held.is_null() {
                // SAFETY: `held` is the box `hold` made on this thread (`FORKING` is this
                // thread's own), alive until `release`, which this thread calls from the
                // fork's parent or child handler, never while it uses a table; the preload
                // never takes a table while it has one, so this is the one reference made
                // from the box now.
                return TableGuard::Held(unsafe { &mut **held });
            }
        }
        TableGuard::Locked(self.lock.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Hold the table until `release` (the fork's prepare handler; this thread is marked
    /// `set_forking` before it uses the table again).
    pub fn hold(&'static self) {
        let guard = Box::new(self.lock.lock().unwrap_or_else(|e| e.into_inner()));
        self.held.store(Box::into_raw(guard), Release);
    }

    /// Let the table go (the fork's parent or child handler, on the thread that held it).
    pub fn release(&'static self) {
        let held = self.held.swap(std::ptr::null_mut(), Acquire);
        if !held.is_null() {
            // SAFETY: the box `hold` made and leaked, taken out of `held` here once.
            drop(unsafe { Box::from_raw(held) });
        }
    }
}

impl<T> Deref for TableGuard<T> {
    type Target = T;

    fn deref(&self) -> &T {
        match self {
            TableGuard::Locked(g) => g,
            TableGuard::Held(t) => t,
        }
    }
}

impl<T> DerefMut for TableGuard<T> {
    fn deref_mut(&mut self) -> &mut T {
        match self {
            TableGuard::Locked(g) => g,
            TableGuard::Held(t) => t,
        }
    }
}
