//! Shared test helpers: a handler thread that reads events and serves them with a closure.
#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread::{self, JoinHandle};
use std::time::Duration;
use uffd::{Event, Uffd, UffdBuilder};

pub fn page() -> usize {
    uffd::page_size()
}

/// A non-blocking userfaultfd with the default features (kernel-mode faults where allowed).
pub fn uffd() -> Arc<Uffd> {
    Arc::new(
        UffdBuilder::new()
            .non_blocking(true)
            .create()
            .expect("create uffd"),
    )
}

pub struct Handler {
    stop: Arc<AtomicBool>,
    join: JoinHandle<Vec<Event>>,
}

/// Spawn a reader that calls `serve` on each event, in order, and records them all. It polls
/// with a short timeout so `finish` can stop it.
pub fn spawn_handler<F>(uffd: Arc<Uffd>, mut serve: F) -> Handler
where
    F: FnMut(&Uffd, &Event) + Send + 'static,
{
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let ready = Arc::new(Barrier::new(2));
    let ready2 = ready.clone();
    let join = thread::spawn(move || {
        // Allocate before reading: with EVENT_FORK, glibc's fork holds the malloc locks while
        // the forking thread waits for this reader, so the reader must not allocate until it
        // has read the Fork event.
        let mut all = Vec::with_capacity(1024);
        let mut batch = Vec::with_capacity(uffd::EVENT_BATCH);
        ready2.wait();
        loop {
            if uffd
                .wait_readable(Some(Duration::from_millis(10)))
                .expect("poll")
            {
                batch.clear();
                uffd.read_events(&mut batch).expect("read events");
                for e in batch.drain(..) {
                    serve(&uffd, &e);
                    all.push(e);
                }
            } else if stop2.load(Ordering::Acquire) {
                return all;
            }
        }
    });
    // Thread start-up allocates too; let it finish before the test can fork.
    ready.wait();
    Handler { stop, join }
}

impl Handler {
    /// Stop once no event is pending; returns every event seen.
    pub fn finish(self) -> Vec<Event> {
        self.stop.store(true, Ordering::Release);
        self.join.join().expect("handler panicked")
    }
}
