//! Events read but not yet served: those a thread read while it could not act on them (it
//! held a folio), and the faults the spare handler left to a regular one (spare.rs). The bell
//! wakes a handler asleep on the userfaultfd to serve them.

use crate::lock_order::{self, Mutex};
use uffd::{Doorbell, Event, UffdError};

pub(crate) struct DeferredEvents {
    deferred: Mutex<Vec<Event>>,
    left_by_spare: Mutex<Vec<Event>>,
    bell: Doorbell,
}

impl DeferredEvents {
    pub fn new() -> Result<Self, UffdError> {
        Ok(DeferredEvents {
            deferred: Mutex::new(&lock_order::DEFERRED, Vec::new()),
            left_by_spare: Mutex::new(&lock_order::DEFERRED, Vec::new()),
            bell: Doorbell::new()?,
        })
    }

    /// Events read by a thread that cannot serve them: a handler serves them, now rather
    /// than after its poll times out.
    pub fn defer(&self, events: Vec<Event>) {
        self.deferred.lock().extend(events);
        self.bell.ring();
    }

    /// A fault the spare leaves to a regular handler, which the bell wakes.
    pub fn leave_to_regular(&self, ev: Event) {
        self.left_by_spare.lock().push(ev);
        self.bell.ring();
    }

    /// Take the deferred events, and for a regular handler (not `spare`) the faults the spare
    /// left.
    pub fn take(&self, spare: bool) -> Vec<Event> {
        let mut events = std::mem::take(&mut *self.deferred.lock());
        if !spare {
            events.append(&mut self.left_by_spare.lock());
        }
        events
    }

    /// Whether any event waits here.
    pub fn any(&self) -> bool {
        !self.deferred.lock().is_empty() || !self.left_by_spare.lock().is_empty()
    }

    /// The bell a handler waits on besides the userfaultfd.
    pub fn bell(&self) -> &Doorbell {
        &self.bell
    }
}
