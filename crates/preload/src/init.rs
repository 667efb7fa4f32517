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

use crate::thread_role::AllocatingOutside;

/// Stop the process before `main`, saying why.
fn refuse(why: &str) -> ! {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "uzswap: {why}");
    // SAFETY: `_exit` ends the process at once; nothing of the program has run.
    unsafe { libc::_exit(125) }
}

extern "C" fn init() {
    // The program's threads keep their thread-locals in blocks its malloc gives, so in the
    // region: the lock-order checks of debug builds would read them under the region's locks.
    zswap::lock_order::disable();
    // Before the heap exists: no lookup of libc's functions happens later (resolve_all).
    crate::in_thread_wrappers::resolve_all();
    crate::malloc::resolve_libc();
    let Ok(text) = std::env::var(crate::config::ENV) else {
        // Loaded without `uzswap run` (a child that kept LD_PRELOAD): an allocator only.
        return;
    };
    // Before any thread of uzswap's exists (descriptors.rs in the uffd crate).
    uffd::descriptors::grow_table();
    let config = crate::config::parse(&text)
        .unwrap_or_else(|e| refuse(&format!("{}: {e}", crate::config::ENV)));
    // uzswap's own allocations are glibc's (lib.rs, `Outside`): its freed buffers of a folio
    // or a batch go back to the kernel, not into arenas the limit does not count.
    uffd::process::return_large_blocks_when_freed();
    let size = config.max_heap as usize;
    let mut region_config = config
        .region
        .pinned(crate::heap::arena_info_bytes(crate::heap::arena_len(size)));
    region_config.thread_start = Some(crate::thread_role::mark_uzswap_thread);
    if let Some((url, run)) = &config.swap_to {
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        let options = redis_tier::TierOptions {
            thread_start: Some(crate::thread_role::mark_uzswap_thread),
            ..Default::default()
        };
        // Each process of the tree has keys of its own under the run's id.
        let store = redis_tier::RedisSegments::connect(url, &format!("{run}-{pid}"), options)
            .unwrap_or_else(|e| refuse(&format!("--swap-to: {e}")));
        region_config = region_config.segment_device(std::sync::Arc::new(store));
    }
    let region_config_in_thread = region_config.in_thread_faults;
    let limit = region_config.memory_limit;
    let least = Region::min_memory_limit(size, &region_config).unwrap_or(limit);
    // The tree's limits are shared with the other processes of `uzswap run` (tree.rs): the
    // region starts with its share of them.
    let tree = config
        .tree_file
        .as_deref()
        .and_then(crate::tree::map)
        .and_then(|ledger| {
            let tree = crate::tree::Tree::join(ledger, limit, config.memory_max, least);
            if tree.is_none() {
                crate::say("the process tree's ledger is full: this process is held alone");
            }
            tree.map(std::sync::Arc::new)
        });
    if let Some(tree) = &tree {
        use region::SharedLimit;
        let (high, max) = tree.share(0);
        region_config.memory_limit = high;
        region_config.over_limit.memory_max = max;
        region_config = region_config.shared_limit(tree.clone());
    }
    crate::run::set_tree(tree);
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
    crate::thread_role::set_uzswap_threads(unsafe { libc::getpid() });
    if let Err(e) = crate::heap::start(region.as_ptr(), region.len()) {
        refuse(&e);
    }
    if region_config_in_thread {
        crate::in_thread_wrappers::turn_on();
    }
    // SAFETY: getppid has no preconditions.
    let parent = unsafe { libc::getppid() } as u32;
    crate::run::set(crate::run::Run {
        region,
        limits: (limit, config.memory_max),
        stats_file: config
            .stats_file
            .filter(|_| config.stats_parent == Some(parent)),
        parent,
    });
    // SAFETY: the three handlers are `extern "C" fn()`s that live as long as the process.
    let r =
        unsafe { libc::pthread_atfork(Some(fork_prepare), Some(fork_parent), Some(fork_child)) };
    if r != 0 {
        refuse("cannot register the fork handlers");
    }
}

/// What a fork holds from its prepare handler to the parent's or the child's, which run on
/// the forking thread (besides the preload's tables: `hold_tables`).
struct Forking {
    /// The region made safe to fork (fork.rs in the region crate); none in a forked child,
    /// whose heap is plain memory.
    region: Option<ForkGuard<'static>>,
    /// The forking thread's allocations sent outside the region meanwhile.
    _outside: AllocatingOutside,
}

thread_local! {
    static FORKING: std::cell::RefCell<Option<Forking>> = const { std::cell::RefCell::new(None) };
}

/// Hold the tables of the preload's own allocators across the fork (fork_table.rs), after
/// the region is made safe: every prepare handler that runs after this one, and every parent
/// or child handler before ours, uses them through this thread's hold.
fn hold_tables() {
    crate::fork_table::set_forking(true);
    crate::mmap::BLOCKS.hold();
    crate::large_blocks::FREE.hold();
    crate::over_aligned::CARVED.hold();
}

/// Let the tables go, in the parent or the child.
fn release_tables() {
    crate::over_aligned::CARVED.release();
    crate::large_blocks::FREE.release();
    crate::mmap::BLOCKS.release();
    crate::fork_table::set_forking(false);
}

/// Before `fork`: bring every evicted page of the heap back, so the child sees all of it,
/// then hold the preload's tables.
unsafe extern "C" fn fork_prepare() {
    let Some(run) = crate::run::get() else { return };
    // The region's code runs on this thread until the parent's or the child's handler.
    let outside = crate::thread_role::allocate_outside();
    // Its first use registers its destructor with glibc, under the loader's lock: before this
    // thread holds anything another thread (a `dlopen` mapping memory) may wait for.
    FORKING.with(|_| ());
    let region = match crate::run::is_forked_child() {
        true => None,
        false => {
            let before = run.region.usage().resident;
            let guard = run
                .region
                .prepare_fork()
                .unwrap_or_else(|e| refuse(&format!("cannot prepare the heap for fork: {e}")));
            let brought_back = run.region.usage().resident.saturating_sub(before);
            BROUGHT_BACK.store(brought_back, Relaxed);
            Some(guard)
        }
    };
    FORKING.with(|f| {
        *f.borrow_mut() = Some(Forking {
            region,
            _outside: outside,
        })
    });
    hold_tables();
}

/// Bytes the last fork's prepare brought back into memory.
static BROUGHT_BACK: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// After `fork`, in the parent: the tables go, reclaim goes on. A fork that brought a MiB or
/// more back is said, the first time: the child's copy of it is outside the limit, and the
/// region is neither throttled nor killed over its limit until reclaim has taken it back
/// under (over_limit.rs, shared_folios.rs). Less is not: a shell's fork (a pyenv shim's)
/// would print a line about nothing.
unsafe extern "C" fn fork_parent() {
    let Some(forking) = FORKING.with(|f| f.borrow_mut().take()) else {
        return;
    };
    release_tables();
    let held = forking.region.is_some();
    drop(forking);
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let brought_back = BROUGHT_BACK.load(Relaxed);
    if held && brought_back >= 1 << 20 && !SAID.swap(true, Relaxed) {
        crate::say(&format!(
            "a fork brought {:.1} MiB of the heap back from the pool and the swap file so that the \
             child sees it: the child's copy is outside the limit, and the parent holds that \
             much past it, unthrottled, until reclaim has made the pages it shares with the \
             child its own again and moved them out (said for the first fork only)",
            brought_back as f64 / (1 << 20) as f64
        ));
    }
}

/// After `fork`, in the child: the tables go; the region's guard belongs to the parent's
/// region, and so does the statistics socket; the heap is plain memory from now on (run.rs).
unsafe extern "C" fn fork_child() {
    crate::run::set_forked_child();
    crate::server::close_in_child();
    let Some(forking) = FORKING.with(|f| f.borrow_mut().take()) else {
        return;
    };
    release_tables();
    std::mem::forget(forking.region);
}

/// At exit: write the statistics (stats.rs), if `uzswap run --stats` asked for them.
extern "C" fn fini() {
    if crate::run::is_forked_child() {
        return;
    }
    let Some(run) = crate::run::get() else { return };
    let _outside = crate::thread_role::allocate_outside();
    if let Some(tree) = crate::run::tree() {
        tree.exit(run.region);
    }
    let Some(path) = &run.stats_file else { return };
    // `uzswap run`'s own memfd, `/proc/PID/fd/N` (crates/cli/src/run/shared_file.rs): it
    // opens only while `uzswap run` lives, and only for its user and root. Written only while
    // `uzswap run` is still this process's parent, and only if the path still names its
    // memfd: once it is gone, its PID may be another process's.
    // SAFETY: getppid has no preconditions.
    let parent = unsafe { libc::getppid() } as u32;
    let ours = std::fs::read_link(path).is_ok_and(|l| {
        l.to_str()
            .is_some_and(|l| l.starts_with("/memfd:uzswap-stats"))
    });
    if parent != run.parent || !ours {
        return;
    }
    use std::io::Write;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
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
