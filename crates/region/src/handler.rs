//! The fault handler threads: they wait on the region's userfaultfd (and the deferred
//! events' bell), read its events and hand each to the part that serves it: a fault to
//! fault.rs, a discard to events.rs. The regular handlers always wait, one of them polling
//! while faults come fast (busy_poll.rs); the spare waits only while every regular one waits
//! on the disk (spare.rs).

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use uffd::{Event, UffdError};

use crate::busy_poll::{PollWindow, Woken};
use crate::inner::Inner;
use crate::{events, fault, spare};

/// Read events until the region stops; serve each.
pub(crate) fn handler_loop(inner: &Inner) {
    spare::mark_handler(false);
    // Reserved once: a reader must not allocate between reads (see the uffd crate).
    let mut events = Vec::with_capacity(uffd::EVENT_BATCH);
    let mut window = PollWindow::default();
    while !inner.stop.load(Relaxed) {
        let timeout = Duration::from_millis(100);
        serve_events(inner, &mut events, |ready| {
            let (woken, polled) = inner.busy_poll.wait(&mut window, timeout, ready)?;
            let stats = &inner.stats;
            stats
                .busy_poll_ns
                .fetch_add(polled.as_nanos() as u64, Relaxed);
            stats
                .busy_polled
                .fetch_add((woken == Woken::Polled) as u64, Relaxed);
            Ok(woken != Woken::TimedOut)
        });
        inner.thread_scratch.charge_this_thread();
    }
}

/// Waits up to the time it is given for the userfaultfd or the deferred bell; says whether
/// either is ready.
type Ready<'a> = &'a mut dyn FnMut(Duration) -> Result<bool, UffdError>;

/// Serve the deferred events, `wait` for the userfaultfd (or the deferred bell: `wait`
/// calls its argument, which polls both for up to the time it is given), serve the deferred
/// events again (those the bell rang for), then read what is there and serve it. `events`
/// is empty and has room for a batch. Returns how many events were served (the faults the
/// spare left to a regular handler are not).
pub(crate) fn serve_events(
    inner: &Inner,
    events: &mut Vec<Event>,
    wait: impl FnOnce(Ready<'_>) -> Result<bool, UffdError>,
) -> usize {
    let mut served = serve_deferred(inner);
    let mut ready = |t| {
        inner
            .mapping
            .wait_readable_or_rung(inner.deferred.bell(), Some(t))
    };
    match wait(&mut ready) {
        Ok(true) => {}
        Ok(false) => return served,
        Err(e) => panic!("waiting on the userfaultfd failed: {e}"),
    }
    // If the bell woke us, we took its ring: the handlers still asleep no longer hear it,
    // so what it rang for is served here, before new events that may hold us on the disk
    // (and them up to their timeout).
    served += serve_deferred(inner);
    events.clear();
    match crate::events::read_events(inner, events) {
        Ok(_) => {}
        Err(e) if e.is_retry() => return served,
        Err(e) => panic!("reading the userfaultfd failed: {e}"),
    }
    for ev in events.drain(..) {
        served += handle_event(inner, ev) as usize;
    }
    served
}

/// Serve the events handlers deferred, and for a regular handler the faults the spare left
/// (spare.rs: the spare would take them back). Returns how many were served.
fn serve_deferred(inner: &Inner) -> usize {
    let mut served = 0;
    for ev in inner.deferred.take(spare::is_spare()) {
        served += handle_event(inner, ev) as usize;
    }
    served
}

/// Serve one event; false if it was left to a regular handler (the spare found its folio
/// held).
fn handle_event(inner: &Inner, ev: Event) -> bool {
    let served = match ev {
        Event::Pagefault { addr, flags, .. } if flags.wp => fault::serve_wp_fault(inner, addr),
        Event::Pagefault { addr, flags, .. } => fault::serve_fault(inner, addr, flags.write),
        Event::Remove { start, end } | Event::Unmap { start, end } => {
            events::discard(inner, start, end);
            true
        }
        // Moves are applied as they are read (events.rs).
        _ => true,
    };
    if !served {
        inner.deferred.leave_to_regular(ev);
    }
    served
}

/// The spare's thread: sleep until every regular handler is in a `blocking` wait, then serve
/// events as a handler does until one of them is back.
pub(crate) fn spare_loop(inner: &Inner) {
    spare::mark_handler(true);
    // Reserved once: a reader must not allocate between reads (see the uffd crate).
    let mut events = Vec::with_capacity(uffd::EVENT_BATCH);
    let stopped = || inner.stop.load(Relaxed);
    while !stopped() {
        inner.spares.wait_needed(stopped);
        while inner.spares.needed() && !stopped() {
            // A short poll: the spare should stop polling soon after a handler is back, as
            // each poller costs every fault a wake-up.
            let served = serve_events(inner, &mut events, |ready| ready(Duration::from_millis(5)));
            inner.stats.spare_events.fetch_add(served as u64, Relaxed);
            inner.thread_scratch.charge_this_thread();
        }
        // The last poll may have taken the deferred bell's ring for events deferred (or
        // faults left) after the queues were served: ring again for a regular handler,
        // which serves them at once. (Not while polling: the spare would wake itself.)
        if inner.deferred.any() {
            inner.deferred.bell().ring();
        }
    }
}
