//! What a region charges to its limit from the start, whatever the program does: the
//! buffers and staging of its threads, its bitmaps. A limit that cannot hold this and a few
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
    pub bytes: u64,
}

impl FixedCharge {
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
        // from an unaligned buffer, a bounce buffer of at most `BOUNCE_BYTES`: resident
        // memory too, allocated on first use, so charged up front.
        let threads = handlers + config.kswapd_threads + READAHEAD_THREADS + 1;
        let io_buffers = threads as u64 * (fs + zswap::swap::file::BOUNCE_BYTES as u64);
        let dirty_reserve = (discard_batch_slots(config) - 1) * fs
            + match batching(config) {
                true => ((BATCH_DISCARD_SLOTS - 1) * BATCH_PAGES * PAGE_SIZE) as u64,
                false => 0,
            };
        let folio_pages = (fs / PAGE_SIZE as u64) as u32;
        let bitmaps = 2 * u64::from(nr_pages).div_ceil(8)
            + crate::incompressible::IncompressibleFolios::bytes_for(nr_pages, folio_pages)
            + 4 * u64::from(nr_pages.div_ceil(folio_pages));
        FixedCharge {
            threads,
            evicting,
            dirty_reserve,
            // Resident and discarded bits, the incompressible marks, when each folio was
            // queued for reclaim, folios in flight in staging, freed slots, buffers, the
            // drop-behind queue.
            bytes: bitmaps
                + evicting as u64 * in_flight
                + dirty_reserve
                + io_buffers
                + crate::lru::INACTIVE_MAX as u64 * 4,
        }
    }
}
