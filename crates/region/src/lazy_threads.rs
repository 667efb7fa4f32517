//! The threads a region starts only once it needs them: the kswapd threads past the first,
//! once reclaim first has work, and the readahead threads, once readahead first has a folio
//! queued. A region that never nears its limit runs its fault handlers, the spare, one kswapd
//! and its engine's shrink worker. The first kswapd starts the rest (it looks after each
//! pass, every `KSWAPD_PERIOD` at most), and the region joins them when it is dropped.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Weak;
use std::thread::JoinHandle;

use crate::lock_order::{self, Mutex};

/// A kind of thread started once needed.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Lazy {
    /// kswapd threads past the first.
    Kswapd,
    /// Readahead threads.
    Readahead,
}

/// Starts a region's lazy threads, for reclaim, which sees the threads but not the state
/// they hold.
pub(crate) trait StartLazy: Sync {
    /// Start the threads of `kind`, the first time only.
    fn start(&self, kind: Lazy);
}

/// Threads of one kind: `name-N` for each N of `numbers`, each running `run`.
pub(crate) struct LazyKind<T> {
    pub name: &'static str,
    pub numbers: Range<usize>,
    pub run: fn(&T),
    started: AtomicBool,
}

impl<T> LazyKind<T> {
    pub fn new(name: &'static str, numbers: Range<usize>, run: fn(&T)) -> Self {
        LazyKind {
            name,
            numbers,
            run,
            started: AtomicBool::new(false),
        }
    }
}

/// The lazy threads of a region whose shared state is a `T`.
pub(crate) struct LazyThreads<T> {
    /// The region's state, which the threads started here hold while they run.
    owner: Weak<T>,
    kswapd: LazyKind<T>,
    readahead: LazyKind<T>,
    /// Run first on every thread the region starts (`RegionConfig::thread_start`).
    thread_start: Option<fn()>,
    /// The threads started here; None once the region is stopping (`join_all`): nothing
    /// starts after that.
    handles: Mutex<Option<Vec<JoinHandle<()>>>>,
}

impl<T: Send + Sync + 'static> StartLazy for LazyThreads<T> {
    fn start(&self, kind: Lazy) {
        let kind = match kind {
            Lazy::Kswapd => &self.kswapd,
            Lazy::Readahead => &self.readahead,
        };
        if kind.started.swap(true, Relaxed) {
            return;
        }
        for n in kind.numbers.clone() {
            self.spawn(format!("{}-{n}", kind.name), kind.run);
        }
    }
}

impl<T: Send + Sync + 'static> LazyThreads<T> {
    pub fn new(
        owner: Weak<T>,
        kswapd: LazyKind<T>,
        readahead: LazyKind<T>,
        thread_start: Option<fn()>,
    ) -> Self {
        LazyThreads {
            owner,
            kswapd,
            readahead,
            thread_start,
            handles: Mutex::new(&lock_order::THREAD_HANDLES, Some(Vec::new())),
        }
    }

    /// Start a thread running `run`. A thread the system refuses is said once and done
    /// without: the region works with the threads it has.
    fn spawn(&self, name: String, run: fn(&T)) {
        let Some(owner) = self.owner.upgrade() else {
            return;
        };
        // Under the lock that `join_all` closes: a thread starts before it, or not at all.
        let mut handles = self.handles.lock();
        let Some(handles) = handles.as_mut() else {
            return;
        };
        match crate::threads::spawn_critical(name.clone(), self.thread_start, move || run(&owner)) {
            Ok(handle) => handles.push(handle),
            Err(e) => crate::threads::report(format_args!(
                "uzswap: warning: cannot start {name} ({e}); the region goes on without it"
            )),
        }
    }

    /// Start no more threads, and wait for every thread started here (the region is
    /// stopping: they return).
    pub fn join_all(&self) {
        let handles = self.handles.lock().take().unwrap_or_default();
        for handle in handles {
            let _ = handle.join();
        }
    }
}
