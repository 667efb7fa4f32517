//! What a region charges to its limit from the start, whatever the program does: the
//! buffers and staging of its threads. What it keeps per page (the engine's state words,
//! the page flags, the LRU's times) is charged as the program touches pages, not here: a
//! reservation of address space costs what is touched of it. A limit that cannot hold this and a few
//! folios besides could only be exceeded, so `RegionConfig::validate` refuses it.

use zswap::PAGE_SIZE;

use crate::config::RegionConfig;

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

/// What a region charges to its limit from the start, whatever the program does.
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
    /// Charged from the start.
    pub bytes: u64,
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
        // Each thread that loads or writes pages keeps a folio buffer and, for direct I/O
        // from an unaligned buffer, a bounce buffer of at most `BOUNCE_BYTES`, and one that
        // stores large folios a store's batch buffer: resident memory too, allocated on
        // first use, so charged up front.
        let threads = handlers + config.kswapd_threads + READAHEAD_THREADS + 1;
        let io_buffers = threads as u64
            * (fs
                + zswap::swap::file::BOUNCE_BYTES as u64
                + fs.min(zswap::zswap::STORE_SCRATCH_BYTES));
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
            threads,
            evicting,
            dirty_reserve,
            // Folios in flight in staging, freed slots, buffers, the drop-behind queue. What
            // is kept per page or per folio is charged as it is allocated (`Inner::usage`).
            bytes: evicting as u64 * in_flight
                + dirty_reserve
                + io_buffers
                + compress_helpers
                + crate::lru::INACTIVE_MAX as u64 * 4,
        }
    }
}
