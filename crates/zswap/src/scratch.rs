//! Per-thread scratch (buffers, codec contexts) that works in a thread whose thread-locals
//! are already destroyed: a thread that is exiting may still fault on a region and serve the
//! fault itself (region's in_thread.rs), after its thread-local destructors ran. It then gets
//! a fresh scratch for the call, made by `init` and dropped after.

use std::cell::RefCell;
use std::thread::LocalKey;

/// Run `f` on this thread's scratch in `key`, or on a fresh one if it is gone.
pub fn with<T, R>(
    key: &'static LocalKey<RefCell<T>>,
    init: impl FnOnce() -> T,
    f: impl FnOnce(&RefCell<T>) -> R,
) -> R {
    let mut f = Some(f);
    if let Ok(r) = key.try_with(|scratch| f.take().expect("called once")(scratch)) {
        return r;
    }
    let fresh = RefCell::new(init());
    f.take().expect("not called: the thread-local is gone")(&fresh)
}
