//! What a region charges to its limit for itself as it goes: its threads' scratch once each
//! has used any, and folios in flight between their move out and their store. The most of it
//! a configuration can charge is `FixedCharge` (config.rs), which `RegionConfig::validate`
//! holds the limit to. What it keeps per page is charged as the program touches pages
//! (`Inner::usage`).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use zswap::PAGE_SIZE;

/// The scratch of the region's own threads, charged once each has used any (`FixedCharge::
/// per_thread`), and their bounce buffers once each has one (`FixedCharge::bounce`). A thread
/// checks after each piece of work (`charge_this_thread`): a buffer allocated during one is
/// charged by its end, one share late at most (a few folios).
#[derive(Debug)]
pub(crate) struct ThreadScratch {
    per_thread: u64,
    bounce: u64,
    charged: AtomicU64,
}

thread_local! {
    /// This thread's scratch, and its bounce buffer, are charged (to the region whose thread
    /// it is).
    static CHARGED: Cell<(bool, bool)> = const { Cell::new((false, false)) };
    /// Bytes of this thread's segment buffers charged (they only grow).
    static SEGMENTS_CHARGED: Cell<u64> = const { Cell::new(0) };
}

impl ThreadScratch {
    pub fn new(per_thread: u64, bounce: u64) -> Self {
        ThreadScratch {
            per_thread,
            bounce,
            charged: AtomicU64::new(0),
        }
    }

    /// Called by one of the region's threads after a piece of work: once it has used
    /// scratch (or holds a bounce buffer), its share is charged from then on (the thread
    /// lives as long as the region).
    pub fn charge_this_thread(&self) {
        let (mut scratch, mut bounce) = CHARGED.get();
        if !scratch && zswap::scratch::used() {
            scratch = true;
            self.charged.fetch_add(self.per_thread, Relaxed);
        }
        if !bounce && zswap::swap::file::bounce_held() {
            bounce = true;
            self.charged.fetch_add(self.bounce, Relaxed);
        }
        CHARGED.set((scratch, bounce));
        // The buffers for segments grow with the largest batch or read the thread has
        // done: charged as they grow.
        let segments = zswap::swap::segments::thread_scratch_bytes();
        let charged = SEGMENTS_CHARGED.get();
        if segments > charged {
            self.charged.fetch_add(segments - charged, Relaxed);
            SEGMENTS_CHARGED.set(segments);
        }
    }

    /// Bytes charged.
    pub fn bytes(&self) -> u64 {
        self.charged.load(Relaxed)
    }
}

/// Pages out of the mapping that still occupy memory and are counted nowhere else: moved out
/// to staging by an eviction whose store is under way, or a staged folio a fault has taken
/// back and is moving in. Each is charged to the region (its usage's `staged`) as it stops
/// counting as resident or staged (just before), until the guard drops, by which time it is
/// kept staged (and counted there), stored and its slot freed (a dirty slot is counted as
/// such), or resident again. Charged as they go rather than up front: a region most of whose
/// threads are idle holds none.
pub(crate) struct InFlight<'a> {
    /// The region's bytes in flight (`Inner::in_flight`).
    charged: &'a AtomicU64,
    bytes: u64,
}

impl<'a> InFlight<'a> {
    pub fn new(charged: &'a AtomicU64) -> Self {
        InFlight { charged, bytes: 0 }
    }

    pub fn add(&mut self, bytes: u64) {
        self.charged.fetch_add(bytes, Relaxed);
        self.bytes += bytes;
    }

    pub fn add_page(&mut self) {
        self.add(PAGE_SIZE as u64);
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.charged.fetch_sub(self.bytes, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering::Relaxed;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::config::FixedCharge;
    use crate::{Region, RegionConfig};

    /// A region charges its threads' scratch once they have used it, and a folio in flight
    /// while it is: idle, it charges neither. Under pressure, evictions by kswapd and by
    /// faults charge the threads that evicted (at least one thread's share, at most all of
    /// theirs), and every folio in flight is uncharged once stored. Would fail if either were charged
    /// up front (an idle region's charge), or a path out of an eviction kept its charge.
    #[test]
    fn scratch_and_folios_in_flight_are_charged_as_they_are_used() {
        let folio = 64 << 10;
        let config = RegionConfig::new(16 << 20).folio_size(folio);
        let fixed = FixedCharge::of(&config, (64 << 20) / PAGE_SIZE as u32);
        let mut r = Region::new(64 << 20, config).unwrap();
        let inner = r.inner().clone();
        let idle = r.usage();
        assert_eq!(inner.thread_scratch.bytes(), 0);
        assert_eq!(idle.staged, 0);
        assert!(
            idle.metadata < fixed.bytes + fixed.per_thread,
            "idle: {idle:?}, charged from the start {}",
            fixed.bytes
        );
        // Four times the limit, written page by page: kswapd and the faults evict.
        let mem = r.as_mut_slice();
        for (i, page) in mem.chunks_exact_mut(PAGE_SIZE).enumerate() {
            page[..8].copy_from_slice(&(i as u64).to_ne_bytes());
        }
        for (i, page) in mem.chunks_exact(PAGE_SIZE).enumerate() {
            assert_eq!(page[..8], (i as u64).to_ne_bytes());
        }
        let scratch = inner.thread_scratch.bytes();
        assert!(scratch >= fixed.per_thread);
        assert!(scratch <= fixed.region_threads as u64 * (fixed.per_thread + fixed.bounce));
        // Evictions finish (kswapd's pass may still be under way).
        let deadline = Instant::now() + Duration::from_secs(10);
        while inner.in_flight.load(Relaxed) != 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(inner.in_flight.load(Relaxed), 0);
        assert!(r.stats().folios_evicted > 0);
    }
}
