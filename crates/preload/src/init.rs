//! The constructor: runs when the library is loaded, before the program's `main`.
//!
//! It makes the region from `UZSWAP_RUN` (config.rs), starts the statistics server
//! (server.rs), hands the region's memory to mimalloc as the region heap's arena (heap.rs),
//! and registers fork handlers: before a fork every evicted page comes back, so a child sees
//! all its parent's heap, as plain memory of its own. A failure is one line on stderr and exit
//! status 125, as `uzswap run` promises: a program must never run thinking it is held under a
//! limit when it is not.
#![cfg(not(test))]

use std::sync::atomic::Ordering::Relaxed;

use region::{ForkGuard, Region};

/// Stop the process before `main`, saying why.
fn refuse(why: &str) -> ! {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "uzswap: {why}");
    // SAFETY: `_exit` ends the process at once; nothing of the program has run.
    unsafe { libc::_exit(125) }
}

extern "C" fn init() {
    let Ok(text) = std::env::var(crate::config::ENV) else {
        // Loaded without `uzswap run` (a child that kept LD_PRELOAD): an allocator only.
        return;
    };
    let config = crate::config::parse(&text)
        .unwrap_or_else(|e| refuse(&format!("{}: {e}", crate::config::ENV)));
    let size = config.max_heap as usize;
    let region_config = config.region.pinned(crate::heap::arena_info_bytes(size));
    let region_config_in_thread = region_config.in_thread_faults;
    let region = Region::new(size, region_config)
        .unwrap_or_else(|e| refuse(&format!("cannot make the region: {}", e.chain())));
    // The region serves the program until it exits.
    let region: &'static Region = Box::leak(Box::new(region));
    // Started before the region's threads are recorded, so that it is one of them.
    if let Err(e) = crate::server::start(region) {
        // The program runs as it would; only `uzswap stat` cannot reach it.
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "uzswap: warning: no live statistics: {e}"
        );
    }
    // SAFETY: getpid has no preconditions.
    crate::heap::set_uzswap_threads(unsafe { libc::getpid() });
    if let Err(e) = crate::heap::start(region.as_ptr(), region.len()) {
        refuse(&e);
    }
    if region_config_in_thread {
        crate::in_thread::turn_on();
    }
    // SAFETY: getppid has no preconditions.
    let parent = unsafe { libc::getppid() } as u32;
    let _ = RUN.set(Run {
        region,
        stats_file: config
            .stats_file
            .filter(|_| config.stats_parent == Some(parent)),
    });
    // SAFETY: the three handlers are `extern "C" fn()`s that live as long as the process.
    let r =
        unsafe { libc::pthread_atfork(Some(fork_prepare), Some(fork_parent), Some(fork_child)) };
    if r != 0 {
        refuse("cannot register the fork handlers");
    }
}

thread_local! {
    /// The region made safe to fork, from the prepare handler to the parent's or the
    /// child's, which run on the forking thread (fork.rs in the region crate).
    static FORKING: std::cell::RefCell<Option<ForkGuard<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// This process is a forked child: its heap is plain memory, nothing of the region runs.
static CHILD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Before `fork`: bring every evicted page of the heap back, so the child sees all of it.
unsafe extern "C" fn fork_prepare() {
    if CHILD.load(Relaxed) {
        return;
    }
    let Some(run) = RUN.get() else { return };
    match run.region.prepare_fork() {
        Ok(guard) => FORKING.with(|f| *f.borrow_mut() = Some(guard)),
        Err(e) => refuse(&format!("cannot prepare the heap for fork: {e}")),
    }
}

/// After `fork`, in the parent: reclaim goes on.
unsafe extern "C" fn fork_parent() {
    drop(FORKING.with(|f| f.borrow_mut().take()));
}

/// After `fork`, in the child: the guard belongs to the parent's region, and so does the
/// statistics socket.
unsafe extern "C" fn fork_child() {
    CHILD.store(true, Relaxed);
    crate::server::close_in_child();
    std::mem::forget(FORKING.with(|f| f.borrow_mut().take()));
}

/// The region the program runs in, and where its statistics go at exit.
struct Run {
    region: &'static Region,
    stats_file: Option<std::path::PathBuf>,
}

static RUN: std::sync::OnceLock<Run> = std::sync::OnceLock::new();

/// The region the heap lives in, once it is made.
pub fn region() -> Option<&'static Region> {
    RUN.get().map(|run| run.region)
}

/// At exit: write the statistics (stats.rs), if `uzswap run --stats` asked for them.
extern "C" fn fini() {
    if CHILD.load(Relaxed) {
        return;
    }
    let Some(run) = RUN.get() else { return };
    let Some(path) = &run.stats_file else { return };
    // `uzswap run` made the file, the user's alone: open it as it is, never through a link.
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path);
    if let Ok(mut file) = file {
        let _ = file.write_all(crate::stats::render(run.region).as_bytes());
    }
}

/// Run `fini` when the process exits.
#[used]
#[link_section = ".fini_array"]
static FINI: extern "C" fn() = fini;

/// Run `init` when the library is loaded.
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;
