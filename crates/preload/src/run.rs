//! The process's run, set once by the constructor (init.rs) and read by the statistics
//! (stats.rs, server.rs), the exit handler and the allocator's hooks: its region, the limits
//! `uzswap run` was given, its place in the process tree, where its statistics go.

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

/// The region the heap lives in, once it is made.
pub fn region() -> Option<&'static Region> {
    RUN.get().map(|run| run.region)
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
