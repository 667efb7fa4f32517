//! The region's charge against its limit, as a memory cgroup's: what it holds in memory
//! by kind (`Meter::usage`), the limits, and what the region charges for itself as it goes:
//! its threads' scratch once each has used any, and folios in flight between their move out
//! and their store. The most of the latter a configuration can charge is `FixedCharge`
//! (config.rs), which `RegionConfig::validate` holds the limit to. What it keeps per page is
//! charged as the program touches pages.
//!
//! Memory accounting, like memory.high with the pool charged: resident + staged + pool +
//! metadata bytes. Reclaim keeps it under the limit; a fault that would pass it reclaims
//! first.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use uffd::Staging;
use zswap::{Zswap, ZswapGroup, PAGE_SIZE};

use crate::incompressible::IncompressibleFolios;
use crate::lru::Lru;
use crate::page_flags::PageFlags;
use crate::reclaim_wait::ReclaimWait;
use crate::registration::Registration;
use crate::serving_threads::InThreadFaults;
use crate::staged::StagedFolios;
use crate::swapin_window::SwapinWindow;
use crate::unevictable::Unevictable;

/// Bytes the region holds in memory, by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Usage {
    /// Pages mapped in the region, in bytes.
    pub resident: u64,
    /// Staged folios (moved out after their store, uncompressed), folios in flight (moved
    /// out, their store under way, or moving back in from staging), and freed staging slots
    /// not yet discarded beyond what the fixed charge holds for them, in bytes.
    pub staged: u64,
    /// The compressed pool's pages, the free ones it keeps for reuse included, in bytes.
    pub pool: u64,
    /// uzswap's own bookkeeping (the engine's state words, the page flags, the pool's handle
    /// table and span descriptors, the LRU), charged like the kernel charges zswap's entries
    /// to the cgroup.
    pub metadata: u64,
}

impl Usage {
    /// All of it, in bytes: what the memory limit is compared with.
    pub fn total(&self) -> u64 {
        self.resident + self.staged + self.pool + self.metadata
    }
}

/// The region's charge: its limits, and every part that holds memory, read for its usage.
#[derive(Clone, Copy)]
pub(crate) struct Meter<'a> {
    /// The memory limit, in bytes: `RegionConfig::memory_limit`, or what `set_limits` made
    /// it since (a share of a limit other regions use too).
    pub limit: &'a AtomicU64,
    /// The hard limit (over_limit.rs), u64::MAX for none: `OverLimit::memory_max`, or what
    /// `set_limits` made it.
    pub memory_max: &'a AtomicU64,
    /// Bytes charged from the start.
    pub fixed_metadata: u64,
    /// Bytes of freed staging slots that `fixed_metadata` covers: only dirty bytes past it
    /// count in the usage.
    pub dirty_reserve: u64,
    /// Bytes out of the mapping and counted nowhere else (`InFlight`).
    pub in_flight: &'a AtomicU64,
    pub thread_scratch: &'a ThreadScratch,
    /// Woken when the limit is lowered.
    pub reclaim_wait: &'a ReclaimWait,
    pub pages: &'a PageFlags,
    pub staged: &'a StagedFolios,
    pub staging: &'a Staging,
    pub batch_staging: Option<&'a Staging>,
    pub zswap: &'a Zswap,
    pub group: &'a ZswapGroup,
    pub incompressible: &'a IncompressibleFolios,
    pub swapin_window: &'a SwapinWindow,
    pub unevictable: &'a Unevictable,
    pub lru: &'a Lru,
    pub in_thread: Option<&'a InThreadFaults>,
    /// A lazy region not registered yet: the process's anonymous memory, charged as resident.
    pub registration: &'a Registration,
}

impl Meter<'_> {
    /// The memory limit now, in bytes.
    pub fn limit(&self) -> u64 {
        self.limit.load(Relaxed)
    }

    /// The hard limit now, in bytes (u64::MAX for none).
    pub fn memory_max(&self) -> u64 {
        self.memory_max.load(Relaxed)
    }

    /// `Region::set_limits`: a lower limit wakes kswapd.
    pub fn set_limits(&self, limit: u64, memory_max: Option<u64>) {
        let max = memory_max.map_or(u64::MAX, |m| m.max(limit));
        // Each fault of a region with a shared limit comes here: stores only on a change, so
        // the faulting threads do not bounce the line between them.
        if self.memory_max.load(Relaxed) != max {
            self.memory_max.store(max, Relaxed);
        }
        let old = self.limit.load(Relaxed);
        if old == limit {
            return;
        }
        self.limit.store(limit, Relaxed);
        if limit < old {
            self.reclaim_wait.wake_kswapd();
        }
    }

    /// What the region holds in memory now, by kind.
    pub fn usage(&self) -> Usage {
        // A page joins `in_flight` before it leaves the resident count and leaves it after it
        // is counted where it goes (resident, staged): read before and after the rest, the
        // larger counts a page that moved meanwhile, either way.
        let in_flight = self.in_flight.load(Relaxed);
        let mut usage = Usage {
            resident: self.pages.nr_resident() * PAGE_SIZE as u64 + self.registration.uncounted(),
            // Staged folios, folios in flight, and freed staging slots not discarded yet
            // beyond what the fixed charge holds for them.
            staged: self.staged.pages() * PAGE_SIZE as u64
                + self
                    .staging_dirty_bytes()
                    .saturating_sub(self.dirty_reserve),
            // The pool's pages, and the freed ones it keeps for reuse: both are resident.
            pool: self.zswap.pool().charged_bytes(),
            metadata: self.fixed_metadata
                + self.thread_scratch.bytes()
                + self.group.cache().metadata_bytes()
                + self.pages.bytes()
                + self.incompressible.bytes()
                + self.swapin_window.bytes()
                + self.unevictable.bytes()
                + self.zswap.pool().metadata_bytes()
                + self.zswap.swap_metadata_bytes()
                + zswap::compress::shared_context_bytes()
                + self.lru.bytes()
                + self.staged.queue_bytes()
                + self.in_thread.map_or(0, InThreadFaults::scratch_bytes),
        };
        usage.staged += in_flight.max(self.in_flight.load(Relaxed));
        usage
    }

    /// Bytes that freed staging slots hold until their batch is discarded.
    fn staging_dirty_bytes(&self) -> u64 {
        let batch = self.batch_staging.map_or(0, |b| b.dirty_bytes());
        (self.staging.dirty_bytes() + batch) as u64
    }
}

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
    /// The region's bytes in flight (`Meter::in_flight`).
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
        let meter = inner.meter();
        let idle = r.usage();
        assert_eq!(meter.thread_scratch.bytes(), 0);
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
        let scratch = meter.thread_scratch.bytes();
        assert!(scratch >= fixed.per_thread);
        assert!(scratch <= fixed.region_threads as u64 * (fixed.per_thread + fixed.bounce));
        // Evictions finish (kswapd's pass may still be under way).
        let deadline = Instant::now() + Duration::from_secs(10);
        while meter.in_flight.load(Relaxed) != 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(meter.in_flight.load(Relaxed), 0);
        assert!(r.stats().folios_evicted > 0);
    }
}
