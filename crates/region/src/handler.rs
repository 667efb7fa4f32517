//! The fault handler threads: they wait on the region's userfaultfd (and the deferred
//! events' bell), read its events and hand each to the part that serves it: a fault to
//! fault.rs, a discard to events.rs. The regular handlers always wait, one of them polling
//! while faults come fast (busy_poll.rs); the spare waits only while every regular one waits
//! on the disk (spare.rs).

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

use uffd::{Event, UffdError};

use crate::busy_poll::{BusyPoll, PollWindow, Woken};
use crate::charge::ThreadScratch;
use crate::deferred::DeferredEvents;
use crate::events::Events;
use crate::fault::Faults;
use crate::mapping::Mapping;
use crate::spare::{self, SpareHandlers};
use crate::stats::RegionStats;

/// A fault handler thread's view of the region. What it may touch: the parts below.
#[derive(Clone, Copy)]
pub(crate) struct Handler<'a> {
    pub faults: Faults<'a>,
    pub events: Events<'a>,
    /// What it waits on: the userfaultfd, and the deferred events' bell.
    pub mapping: &'a Mapping,
    pub deferred: &'a DeferredEvents,
    pub busy_poll: &'a BusyPoll,
    pub spares: &'a SpareHandlers,
    pub thread_scratch: &'a ThreadScratch,
    pub stop: &'a AtomicBool,
    pub stats: &'a RegionStats,
}

impl Handler<'_> {
    /// Read events until the region stops; serve each.
    pub(crate) fn handler_loop(&self) {
        spare::mark_handler(false);
        // Reserved once: a reader must not allocate between reads (see the uffd crate).
        let mut events = Vec::with_capacity(uffd::EVENT_BATCH);
        let mut window = PollWindow::default();
        while !self.stop.load(Relaxed) {
            let timeout = Duration::from_millis(100);
            self.serve_events(&mut events, |ready| {
                let (woken, polled) = self.busy_poll.wait(&mut window, timeout, ready)?;
                let stats = &self.stats;
                stats
                    .busy_poll_ns
                    .fetch_add(polled.as_nanos() as u64, Relaxed);
                stats
                    .busy_polled
                    .fetch_add((woken == Woken::Polled) as u64, Relaxed);
                Ok(woken != Woken::TimedOut)
            });
            self.thread_scratch.charge_this_thread();
        }
    }

    /// Serve the deferred events, `wait` for the userfaultfd (or the deferred bell: `wait`
    /// calls its argument, which polls both for up to the time it is given), serve the deferred
    /// events again (those the bell rang for), then read what is there and serve it. `events`
    /// is empty and has room for a batch. Returns how many events were served (the faults the
    /// spare left to a regular handler are not).
    fn serve_events(
        &self,
        events: &mut Vec<Event>,
        wait: impl FnOnce(Ready<'_>) -> Result<bool, UffdError>,
    ) -> usize {
        let mut served = self.serve_deferred();
        let mut ready = |t| {
            self.mapping
                .wait_readable_or_rung(self.deferred.bell(), Some(t))
        };
        match wait(&mut ready) {
            Ok(true) => {}
            Ok(false) => return served,
            Err(e) => panic!("waiting on the userfaultfd failed: {e}"),
        }
        // If the bell woke us, we took its ring: the handlers still asleep no longer hear it,
        // so what it rang for is served here, before new events that may hold us on the disk
        // (and them up to their timeout).
        served += self.serve_deferred();
        events.clear();
        match self.events.read_events(events) {
            Ok(_) => {}
            Err(e) if e.is_retry() => return served,
            Err(e) => panic!("reading the userfaultfd failed: {e}"),
        }
        for ev in events.drain(..) {
            served += self.handle_event(ev) as usize;
        }
        served
    }

    /// Serve the events handlers deferred, and for a regular handler the faults the spare left
    /// (spare.rs: the spare would take them back). Returns how many were served.
    fn serve_deferred(&self) -> usize {
        let mut served = 0;
        for ev in self.deferred.take(spare::is_spare()) {
            served += self.handle_event(ev) as usize;
        }
        served
    }

    /// Serve one event; false if it was left to a regular handler (the spare found its folio
    /// held).
    fn handle_event(&self, ev: Event) -> bool {
        let served = match ev {
            Event::Pagefault { addr, flags, .. } if flags.wp => self.faults.serve_wp_fault(addr),
            Event::Pagefault { addr, flags, .. } => self.faults.serve_fault(addr, flags.write),
            Event::Remove { start, end } | Event::Unmap { start, end } => {
                self.events.discard(start, end);
                true
            }
            // Moves are applied as they are read (events.rs).
            _ => true,
        };
        if !served {
            self.deferred.leave_to_regular(ev);
        }
        served
    }

    /// The spare's thread: sleep until every regular handler is in a `blocking` wait, then serve
    /// events as a handler does until one of them is back.
    pub(crate) fn spare_loop(&self) {
        spare::mark_handler(true);
        // Reserved once: a reader must not allocate between reads (see the uffd crate).
        let mut events = Vec::with_capacity(uffd::EVENT_BATCH);
        let stopped = || self.stop.load(Relaxed);
        while !stopped() {
            self.spares.wait_needed(stopped);
            while self.spares.needed() && !stopped() {
                // A short poll: the spare should stop polling soon after a handler is back, as
                // each poller costs every fault a wake-up.
                let served =
                    self.serve_events(&mut events, |ready| ready(Duration::from_millis(5)));
                self.stats.spare_events.fetch_add(served as u64, Relaxed);
                self.thread_scratch.charge_this_thread();
            }
            // The last poll may have taken the deferred bell's ring for events deferred (or
            // faults left) after the queues were served: ring again for a regular handler,
            // which serves them at once. (Not while polling: the spare would wake itself.)
            if self.deferred.any() {
                self.deferred.bell().ring();
            }
        }
    }
}

/// Waits up to the time it is given for the userfaultfd or the deferred bell; says whether
/// either is ready.
type Ready<'a> = &'a mut dyn FnMut(Duration) -> Result<bool, UffdError>;
