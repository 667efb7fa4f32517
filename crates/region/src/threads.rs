//! The region's threads are critical: one that dies would leave the program reading zeros
//! where its data is, so its panic stops the process (invariant 9), saying why.

use std::thread::JoinHandle;

/// Spawn a thread whose panic stops the process; `start` runs on it first
/// (`RegionConfig::thread_start`).
pub(crate) fn spawn_critical(
    name: String,
    start: Option<fn()>,
    f: impl FnOnce() + Send + 'static,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            if let Some(start) = start {
                start();
            }
            touch_thread_locals();
            if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
                let why = panic
                    .downcast_ref::<&str>()
                    .copied()
                    .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                    .unwrap_or("a panic without a message");
                report(format_args!(
                    "uzswap: {name} died ({why}); stopping the process so it never reads lost data"
                ));
                std::process::abort();
            }
        })
}

/// Make every thread-local with a destructor a region thread uses, before it serves anything:
/// the first use of one registers its destructor with glibc under the loader's lock, which a
/// program thread may hold while it faults on the region (dlopen allocates under it), waiting
/// for this thread. parking_lot's per-thread data is one: a wait that times out at once
/// makes it.
fn touch_thread_locals() {
    zswap::scratch::touch_thread_locals();
    crate::folio_buf::touch_thread_local();
    let lock = parking_lot::Mutex::new(());
    let _ = parking_lot::Condvar::new().wait_for(&mut lock.lock(), std::time::Duration::ZERO);
}

/// Write a line to the process's standard error itself: the one thing the library prints,
/// the reason it stops the process. `eprintln!` writes into a test harness's capture buffer
/// when one is set (spawned threads inherit it), and that buffer is lost when the process is
/// stopped right after.
pub(crate) fn report(line: std::fmt::Arguments) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}
