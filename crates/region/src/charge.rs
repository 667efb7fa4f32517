//! What a region charges to its limit for itself: the buffers and staging of its threads,
//! some from the start, the rest as they are used. What it keeps per page (the engine's
//! state words, the page flags, the LRU's times) is charged as the program touches pages,
//! not here: a reservation of address space costs what is touched of it. A limit that cannot
//! hold all of this in use at once and a few folios besides could be exceeded, so
//! `RegionConfig::validate` refuses it.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use zswap::PAGE_SIZE;

use crate::config::RegionConfig;
use crate::inner::Inner;

/// Readahead threads: each waits on the disk for one folio at a time.
pub(crate) const READAHEAD_THREADS: usize = 4;

/// Whether reclaim evicts neighbouring folios together (4 KiB folios only: a larger folio is
/// one move already).
pub(crate) fn batching(config: &RegionConfig) -> bool {
    config.policies.batch_eviction && config.folio_size == PAGE_SIZE
}

/// Freed staging slots discarded at once, one TLB flush for all: up to 512 KiB of them (1/64
/// of a small limit), at least one.
pub(crate) fn discard_batch_slots(config: &RegionConfig) -> u64 {
    ((config.memory_limit / 64).min(512 << 10) / config.folio_size as u64).max(1)
}

/// Pages a batch eviction of 4 KiB folios moves at once, at most (reclaim.rs,
/// `with_neighbours`).
pub(crate) const BATCH_PAGES: usize = 16;

/// Freed batch-eviction slots (64 KiB each) discarded at once.
pub(crate) const BATCH_DISCARD_SLOTS: usize = 4;

/// What a region charges to its limit besides the program's pages and the pool: some from the
/// start, the rest as it is used, up to the most `FixedCharge::most` says.
pub(crate) struct FixedCharge {
    /// Threads that hold buffers: fault handlers (the spare too), kswapd, readahead, the
    /// shrink worker.
    pub threads: usize,
    /// Threads that may evict at once: fault handlers and the spare (direct reclaim),
    /// kswapd, readahead (direct reclaim too), and the program's own `Region::reclaim_to`.
    pub evicting: usize,
    /// Freed staging slots wait for a batch to be discarded together; until then they hold
    /// pages. Charged up front, all but the slot that fills a batch (its release discards
    /// the batch at once), so that an eviction, which frees its slot, never adds to the
    /// usage on that account: counted as they come, each eviction into the pool would add a
    /// page until the next discard (a region of incompressible data some 250 KiB past its
    /// limit). Dirty bytes past this (two batches discarding at once) still count.
    pub dirty_reserve: u64,
    /// Charged from the start: the dirty reserve, the shrink worker's buffers, the
    /// compression helpers' scratch, the drop-behind queue.
    pub bytes: u64,
    /// The most bytes in flight to the engine at once: each evicting thread's folio (or
    /// batch) between its move out and its store. Charged while in flight
    /// (`Inner::in_flight`).
    pub in_flight: u64,
    /// What one of the region's own threads (a fault handler, kswapd, readahead) keeps once
    /// it has loaded or stored: a folio buffer and the store's batch buffer. Allocated on
    /// first use and kept, so charged from then on (`ThreadScratch`): a handler whose faults
    /// the program's threads serve themselves, or a readahead thread of a region that never
    /// writes to disk, charges nothing.
    pub per_thread: u64,
    /// A bounce buffer for direct I/O from an unaligned buffer (`BOUNCE_BYTES`), charged
    /// the same way once a thread has one.
    pub bounce: u64,
    /// The region's own threads (`per_thread`).
    pub region_threads: usize,
    /// What the region keeps per page and per folio once the program has touched every
    /// page: charged as pages are touched (`Inner::usage`), not from the start, but a limit
    /// that could not hold it with the rest could be exceeded by a program that uses its
    /// whole region. The engine's state word (8 bytes a page), the resident and discarded
    /// bits; a folio's queue time (4 bytes) and six bits (its active mark, its incompressible
    /// marks, and the compaction marks of the LRU's two queues and of the staged queue); the
    /// tables of leaves (zswap::sparse) aside, a few bytes per 16 MiB.
    pub per_page: u64,
}

impl FixedCharge {
    /// The charge of a region of `nr_pages` pages under `config`.
    pub fn of(config: &RegionConfig, nr_pages: u32) -> FixedCharge {
        let fs = config.folio_size as u64;
        // The fault handlers, the spare included (spare.rs).
        let handlers = config.fault_threads + crate::spare::SPARE_HANDLERS;
        let evicting = handlers + config.kswapd_threads + READAHEAD_THREADS + 1;
        // Each evicting thread has a folio in flight in staging, or a batch of them.
        let in_flight = match batching(config) {
            true => (BATCH_PAGES * PAGE_SIZE) as u64,
            false => fs,
        };
        let region_threads = handlers + config.kswapd_threads + READAHEAD_THREADS;
        let per_thread = fs + fs.min(zswap::zswap::STORE_SCRATCH_BYTES);
        let bounce = zswap::swap::file::BOUNCE_BYTES as u64;
        let dirty_reserve = (discard_batch_slots(config) - 1) * fs
            + match batching(config) {
                true => ((BATCH_DISCARD_SLOTS - 1) * BATCH_PAGES * PAGE_SIZE) as u64,
                false => 0,
            };
        // The helpers that compress parts of a folio (zswap's parallel.rs) keep scratch of
        // their own; shared by the process, charged to each region that uses them.
        let helpers = u64::from(config.compress_threads.saturating_sub(1))
            .min(zswap::zswap::parallel::helper_threads() as u64);
        let compress_helpers = helpers * zswap::zswap::parallel::HELPER_SCRATCH_BYTES;
        let nr_pages = u64::from(nr_pages);
        let nr_folios = nr_pages.div_ceil(fs / PAGE_SIZE as u64);
        FixedCharge {
            per_page: nr_pages * 8
                + 2 * nr_pages.div_ceil(8)
                + nr_folios * 4
                + 6 * nr_folios.div_ceil(8),
            threads: region_threads + 1,
            evicting,
            dirty_reserve,
            // The shrink worker (the engine's thread) writes back with buffers like a region
            // thread's (its buffers for segments are charged as they grow: `Inner::usage`).
            // What is kept per page or per folio is charged as it is allocated
            // (`Inner::usage`).
            bytes: dirty_reserve
                + per_thread
                + bounce
                + compress_helpers
                + crate::lru::INACTIVE_MAX as u64 * 4,
            in_flight: evicting as u64 * in_flight,
            per_thread,
            bounce,
            region_threads,
        }
    }

    /// The most the region charges besides the program's data and the pool: all of it in
    /// use at once, every page touched.
    pub fn most(&self) -> u64 {
        self.bytes
            + self.in_flight
            + self.region_threads as u64 * (self.per_thread + self.bounce)
            + self.per_page
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
    inner: &'a Inner,
    bytes: u64,
}

impl<'a> InFlight<'a> {
    pub fn new(inner: &'a Inner) -> Self {
        InFlight { inner, bytes: 0 }
    }

    pub fn add(&mut self, bytes: u64) {
        self.inner.in_flight.fetch_add(bytes, Relaxed);
        self.bytes += bytes;
    }

    pub fn add_page(&mut self) {
        self.add(PAGE_SIZE as u64);
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.inner.in_flight.fetch_sub(self.bytes, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering::Relaxed;
    use std::time::{Duration, Instant};

    use super::*;
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
