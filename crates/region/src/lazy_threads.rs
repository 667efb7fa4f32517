//! The threads a region starts only once it needs them: the kswapd threads past the first,
//! once reclaim first has work, and the readahead threads, once readahead first has a folio
//! queued. A region that never nears its limit runs its fault handlers, the spare, one kswapd
//! and its engine's shrink worker. The first kswapd starts the rest (it looks after each
//! pass, every `KSWAPD_PERIOD` at most), and the region joins them when it is dropped.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Weak;
use std::thread::JoinHandle;

use crate::lock_order::{self, Mutex};

use crate::inner::Inner;

pub(crate) struct LazyThreads {
    /// The region's state, which the threads started here hold while they run.
    inner: Weak<Inner>,
    /// kswapd threads in all, the first (started with the region) included.
    kswapd_threads: usize,
    kswapd_started: AtomicBool,
    readahead_started: AtomicBool,
    /// Run first on every thread the region starts (`RegionConfig::thread_start`).
    thread_start: Option<fn()>,
    /// The threads started here; None once the region is stopping (`join_all`): nothing
    /// starts after that.
    handles: Mutex<Option<Vec<JoinHandle<()>>>>,
}

impl LazyThreads {
    pub fn new(inner: Weak<Inner>, kswapd_threads: usize, thread_start: Option<fn()>) -> Self {
        LazyThreads {
            inner,
            kswapd_threads,
            kswapd_started: AtomicBool::new(false),
            readahead_started: AtomicBool::new(false),
            thread_start,
            handles: Mutex::new(&lock_order::THREAD_HANDLES, Some(Vec::new())),
        }
    }

    /// After a kswapd pass: start the other kswapd threads once reclaim has had work
    /// (`reclaiming`), and the readahead threads once a folio waits to be read ahead.
    pub fn start_if_needed(&self, inner: &Inner, reclaiming: bool) {
        if reclaiming && !self.kswapd_started.swap(true, Relaxed) {
            for i in 1..self.kswapd_threads {
                self.start(format!("uzswap-kswapd-{i}"), crate::reclaim::kswapd_loop);
            }
        }
        if inner.readahead.any_queued() && !self.readahead_started.swap(true, Relaxed) {
            for i in 0..crate::charge::READAHEAD_THREADS {
                self.start(
                    format!("uzswap-readahead-{i}"),
                    crate::swapin::readahead_loop,
                );
            }
        }
    }

    /// Start a thread running `run`. A thread the system refuses is said once and done
    /// without: the region works with the threads it has.
    fn start(&self, name: String, run: fn(&Inner)) {
        let Some(inner) = self.inner.upgrade() else {
            return;
        };
        // Under the lock that `join_all` closes: a thread starts before it, or not at all.
        let mut handles = self.handles.lock();
        let Some(handles) = handles.as_mut() else {
            return;
        };
        match crate::threads::spawn_critical(name.clone(), self.thread_start, move || run(&inner)) {
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
