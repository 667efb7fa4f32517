//! The process's run, set once by the constructor (init.rs) and read by the statistics
//! (stats.rs, server.rs), the exit handler and the allocator's hooks: its region, the limits
//! `uzswap run` was given, its place in the process tree, where its statistics go.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use region::Region;

/// The region the program runs in, and where its statistics go at exit.
pub struct Run {
    pub region: &'static Region,
    /// `--memory-high` and `--memory-max`, the tree's (the region's own limits are its share).
    pub limits: (u64, Option<u64>),
    /// The parent at the start: `uzswap run`, where `stats_file` is set.
    pub parent: u32,
    pub stats_file: Option<std::path::PathBuf>,
}

static RUN: std::sync::OnceLock<Run> = std::sync::OnceLock::new();

/// This process's place in the process tree's ledger (tree.rs), if it has one; set before
/// the statistics thread reads it.
static TREE: std::sync::OnceLock<Option<std::sync::Arc<crate::tree::Tree>>> =
    std::sync::OnceLock::new();

/// This process is a forked child: its heap is plain memory, a copy of the parent's, and the
/// region (the parent's, copied with the process) is not to be used here: none of its threads
/// runs, its userfaultfd serves the parent's memory, and its locks may have been held at the
/// fork by threads the child does not have.
static FORKED_CHILD: AtomicBool = AtomicBool::new(false);

/// Record that this process is a forked child (the fork's child handler, init.rs).
pub fn set_forked_child() {
    FORKED_CHILD.store(true, Relaxed);
}

/// Whether this process is a forked child, whose heap is plain memory.
pub fn is_forked_child() -> bool {
    FORKED_CHILD.load(Relaxed)
}

/// The region the heap lives in, once it is made; none in a forked child.
pub fn region() -> Option<&'static Region> {
    RUN.get()
        .filter(|_| !is_forked_child())
        .map(|run| run.region)
}

/// The tree's place of this process, if it has one.
pub fn tree() -> Option<&'static crate::tree::Tree> {
    TREE.get().and_then(Option::as_deref)
}

/// `--memory-high` and `--memory-max` as `uzswap run` was given them.
pub fn limits() -> Option<(u64, Option<u64>)> {
    RUN.get().map(|run| run.limits)
}

/// Record the run (once: the constructor's).
pub fn set(run: Run) {
    let _ = RUN.set(run);
}

/// The run, once the constructor has made it.
pub fn get() -> Option<&'static Run> {
    RUN.get()
}

/// Record this process's place in the tree's ledger (once, before the region is made).
pub fn set_tree(tree: Option<std::sync::Arc<crate::tree::Tree>>) {
    let _ = TREE.set(tree);
}
