//! Per-thread scratch (buffers, codec contexts) that works in a thread whose thread-locals
//! are already destroyed: a thread that is exiting may still fault on a region and serve the
//! fault itself (region's in_thread.rs), after its thread-local destructors ran. It then gets
//! a fresh scratch for the call, made by `init` and dropped after.
//!
//! Whether a thread has used any scratch (`used`) is what its buffers are charged by (region's
//! charge.rs): scratch is allocated on first use and kept.

use std::cell::{Cell, RefCell};
use std::thread::LocalKey;

thread_local! {
    static USED: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread has used any scratch (and so keeps some).
pub fn used() -> bool {
    USED.try_with(Cell::get).unwrap_or(false)
}

/// Make this thread's thread-locals with destructors now, without using any (nothing is
/// charged for them): their first use registers the destructor with glibc, which takes the
/// loader's lock, and a thread that serves faults must never wait for that lock, which a
/// program thread may hold while it faults (dlopen allocates under it). A region runs this
/// first on each of its threads.
pub fn touch_thread_locals() {
    crate::swap::file::touch_thread_locals();
    crate::swap::segments::touch_thread_locals();
    crate::zswap::touch_thread_locals();
    crate::compress::touch_thread_locals();
}

/// Run `f` on this thread's scratch in `key`, or on a fresh one if it is gone.
pub fn with<T, R>(
    key: &'static LocalKey<RefCell<T>>,
    init: impl FnOnce() -> T,
    f: impl FnOnce(&RefCell<T>) -> R,
) -> R {
    let _ = USED.try_with(|u| u.set(true));
    let mut f = Some(f);
    if let Ok(r) = key.try_with(|scratch| f.take().expect("called once")(scratch)) {
        return r;
    }
    let fresh = RefCell::new(init());
    f.take().expect("not called: the thread-local is gone")(&fresh)
}
