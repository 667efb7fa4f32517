//! The state a region's threads share: its parts, each owning its own state, and the lock
//! order between them.
//!
//! Where a page is: present in the mapping (`pages`, its resident bit), staged (`staged`:
//! moved out after its store, uncompressed, still in memory), or held by the engine (pool,
//! zero mark, swap file: `group`'s swap cache); missing otherwise. All three change only under
//! the page's folio lock in the engine's swap cache, which is what makes concurrent faults,
//! reclaim and discards agree.
//!
//! Memory accounting, like memory.high with the pool charged: resident + staged + pool +
//! metadata bytes. Reclaim keeps it under the limit; a fault that would pass it reclaims
//! first.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use uffd::Staging;
use zswap::swap::FolioLock;
use zswap::{Zswap, ZswapGroup, PAGE_SIZE};

use crate::charge::ThreadScratch;
use crate::clean::CleanTracking;
use crate::deferred::DeferredEvents;
use crate::discards::Discards;
use crate::incompressible::IncompressibleFolios;
use crate::lru::Lru;
use crate::mapping::Mapping;
use crate::over_limit::{OverLimit, OverLimitState};
use crate::page_flags::PageFlags;
use crate::read_failures::ReadFailures;
use crate::readahead::Readahead;
use crate::reclaim_wait::ReclaimWait;
use crate::serving_threads::InThreadFaults;
use crate::spare::SpareHandlers;
use crate::staged::StagedFolios;
use crate::stats::RegionStats;
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

/// The state the region's threads share.
///
/// Its locks are taken in the order lock_order.rs gives (checked in debug builds).
pub(crate) struct Inner {
    /// The range, its userfaultfd and the event gate: every userfaultfd call on the range.
    pub mapping: Mapping,
    pub zswap: Zswap,
    /// The region's engine group: its pages' state words and folio locks (the swap cache).
    pub group: Arc<ZswapGroup>,
    /// Where folios are moved out to (one folio a slot); batch evictions of 4 KiB folios
    /// have slots of their own (reclaim.rs).
    pub staging: Arc<Staging>,
    pub batch_staging: Option<Arc<Staging>>,
    /// The memory limit, in bytes (`limit()`): `RegionConfig::memory_limit`, or what
    /// `Region::set_limits` made it since (a share of a limit other regions use too).
    pub limit: AtomicU64,
    /// The hard limit (over_limit.rs), u64::MAX for none: `OverLimit::memory_max`, or what
    /// `Region::set_limits` made it.
    pub memory_max: AtomicU64,
    /// Bytes charged from the start (charge.rs).
    pub fixed_metadata: u64,
    /// Bytes out of the mapping and counted nowhere else: an eviction's whose store is under
    /// way, a staged folio's that a fault is moving back in (charge.rs, `InFlight`).
    pub in_flight: AtomicU64,
    /// The scratch of the region's threads that have used any (charge.rs).
    pub thread_scratch: ThreadScratch,
    /// Bytes of freed staging slots that `fixed_metadata` covers: only dirty bytes past it
    /// count in the usage.
    pub dirty_reserve: u64,
    pub folio_pages: u32,
    pub folio_order: u8,
    /// Resident and discarded bits.
    pub pages: PageFlags,
    /// The order reclaim takes folios in.
    pub lru: Lru,
    /// Folios moved out after their store, kept uncompressed for a second chance.
    pub staged: StagedFolios,
    /// Discards read, pending and recent (events.rs).
    pub discards: Discards,
    /// Events read but not served yet.
    pub deferred: DeferredEvents,
    /// Pages under another protection than read-write, which reclaim cannot take.
    pub unevictable: Unevictable,
    /// Pages the device failed to read once (swapin.rs).
    pub read_failures: ReadFailures,
    /// Policies: incompressible folios left resident, clean folios, readahead and
    /// drop-behind. They decide; the actions are reclaim's and the fault's.
    pub incompressible: IncompressibleFolios,
    /// `Policies::keep_incompressible`.
    pub keep_incompressible: bool,
    pub clean: CleanTracking,
    pub readahead: Readahead,
    /// How much of a folio a fault brings back (swapin_window.rs).
    pub swapin_window: SwapinWindow,
    /// `Policies::workingset`: near refaults activate folios (workingset.rs).
    pub workingset: bool,
    /// `Policies::referenced_writes`, where the region has write-protect faults: reclaim
    /// sends a folio round write-protected before it takes it (lru.rs).
    pub referenced_writes: bool,
    /// The spare fault handler's state (spare.rs).
    pub spares: SpareHandlers,
    /// The pool's share of the limit (pool_share.rs): None where it is fixed
    /// (`Policies::auto_pool_share` off).
    pub pool_share: Option<crate::pool_share::PoolShare>,
    /// Which fault handler polls the userfaultfd between faults (busy_poll.rs).
    pub busy_poll: crate::busy_poll::BusyPoll,
    /// The memory of the process the range is in (this one, or a program served from
    /// here), read where it is (reclaim's try of a folio's compression); None where `/proc`
    /// is not mounted: folios are then tried after they moved out.
    pub program_memory: Option<uffd::process::ProcessMemory>,
    /// The program's threads in `/proc`, for its CPU time (pool_share.rs).
    pub program_tasks: std::path::PathBuf,
    /// The program, where it is not this process (a `RemoteRegion`'s): what a kill at the
    /// hard limit kills (throttle.rs).
    pub program_pid: Option<rustix::process::Pid>,
    /// Faults served in the faulting thread (in_thread.rs): None where handlers serve them.
    pub in_thread: Option<InThreadFaults>,
    /// kswapd's wake-ups, and reclaim's progress for those who wait on it.
    pub reclaim_wait: ReclaimWait,
    /// What a fault over the limit with nothing to reclaim does (over_limit.rs), and the
    /// episodes under way.
    pub over_limit_config: OverLimit,
    /// The limit this region shares with others, if any (`RegionConfig::shared_limit`).
    pub shared_limit: Option<std::sync::Arc<dyn crate::over_limit::SharedLimit>>,
    pub over_limit: OverLimitState,
    pub stop: AtomicBool,
    /// The threads started once needed (lazy_threads.rs).
    pub lazy_threads: crate::lazy_threads::LazyThreads<Inner>,
    pub stats: RegionStats,
}

impl Inner {
    /// The memory limit now, in bytes.
    pub fn limit(&self) -> u64 {
        self.limit.load(Relaxed)
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

    pub fn folio_bytes(&self) -> usize {
        self.folio_pages as usize * PAGE_SIZE
    }

    /// Pages in the region.
    pub fn nr_pages(&self) -> u32 {
        (self.mapping.len() / PAGE_SIZE) as u32
    }

    pub fn usage(&self) -> Usage {
        // A page joins `in_flight` before it leaves the resident count and leaves it after it
        // is counted where it goes (resident, staged): read before and after the rest, the
        // larger counts a page that moved meanwhile, either way.
        let in_flight = self.in_flight.load(Relaxed);
        let mut usage = Usage {
            resident: self.pages.nr_resident() * PAGE_SIZE as u64,
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
                + self
                    .in_thread
                    .as_ref()
                    .map_or(0, InThreadFaults::scratch_bytes),
        };
        usage.staged += in_flight.max(self.in_flight.load(Relaxed));
        usage
    }

    /// Bytes that freed staging slots hold until their batch is discarded.
    fn staging_dirty_bytes(&self) -> u64 {
        let batch = self.batch_staging.as_ref().map_or(0, |b| b.dirty_bytes());
        (self.staging.dirty_bytes() + batch) as u64
    }

    /// Lock the folio at `start` for an event a handler serves: a folio someone holds (a
    /// fault or readahead reading it from disk, reclaim storing or writing it) may keep the
    /// handler as long as a disk read, a `SpareHandlers::blocking` wait.
    pub fn lock_folio_for_event(&self, start: u32) -> FolioLock<'_> {
        if !self.group.is_locked(start) {
            return self.group.lock_folio(start, self.folio_order);
        }
        self.stats.folio_lock_waits.fetch_add(1, Relaxed);
        self.spares
            .blocking(|| self.group.lock_folio(start, self.folio_order))
    }
}
