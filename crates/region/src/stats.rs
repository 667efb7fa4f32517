//! The region's own statistics: faults by source, redundant faults, pages per fault, fault
//! latency, reclaim. The engine's kernel-named statistics are in `Zswap::stats`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use serde::Serialize;

#[derive(Debug)]
pub(crate) struct RegionStats {
    pub faults: AtomicU64,
    /// Served from a folio still in the swap cache (staged): no decompression.
    pub faults_swapcache: AtomicU64,
    /// Served from the engine (pool, disk or zero marks), whole folio in one install.
    pub faults_folio: AtomicU64,
    /// Served page by page (the folio's pages were in different places).
    pub faults_pages: AtomicU64,
    /// First touch: nothing stored, zero-filled.
    pub faults_first_touch: AtomicU64,
    /// The page was already present when we came to install it.
    pub redundant: AtomicU64,
    pub pages_in: AtomicU64,
    pub poisoned: AtomicU64,
    pub folios_evicted: AtomicU64,
    /// Evictions of several neighbouring 4 KiB folios with one move (reclaim.rs).
    pub batch_evictions: AtomicU64,
    pub evict_failed: AtomicU64,
    pub direct_reclaim: AtomicU64,
    pub swapcache_dropped: AtomicU64,
    pub discarded_pages: AtomicU64,
    pub remaps: AtomicU64,
    /// Folios read from disk installed write-protected, keeping their disk copy.
    pub clean_installs: AtomicU64,
    /// Writes to such folios (their disk copy dropped).
    pub wp_faults: AtomicU64,
    /// Folios reclaimed while still clean: no store, no write.
    pub clean_evictions: AtomicU64,
    /// Folios brought in by readahead, ahead of any fault.
    pub readahead_folios: AtomicU64,
    /// Folios reclaimed because a sequential scan had passed them (drop-behind).
    pub dropped_behind: AtomicU64,
    /// Untouched folios mapped to the zero page after a first touch next to them.
    pub fault_around: AtomicU64,
    /// Folios reclaim passed over because their last store found them incompressible
    /// (incompressible.rs).
    pub incompressible_skipped: AtomicU64,
    /// Folios found incompressible at their first store and kept resident, because the
    /// region's incompressible data keeps coming back in (incompressible.rs).
    pub incompressible_kept: AtomicU64,
    /// Faults that brought back a folio last stored as-is (incompressible.rs).
    pub incompressible_refaults: AtomicU64,
    /// Faults on pages marked resident that were not mapped (a bookkeeping bug, recovered).
    pub lost_track: AtomicU64,
    /// Pages still mapped when their discard was processed (`MADV_FREE`, or a zap later than
    /// the wait): left mapped, and uncounted until they fault again.
    pub discards_not_zapped: AtomicU64,
    /// Pages the kernel unmapped after their discard was processed (a zap that came late, or
    /// `MADV_FREE`'s lazy free), found by a fault or by reclaim: they read zero.
    pub late_zaps: AtomicU64,
    /// Pages found in a staging slot that should have been empty (left there and discarded).
    pub stray_staged_pages: AtomicU64,
    /// Events the spare handler read and served (or left: `spare_deferred`), while every
    /// regular one waited on the disk.
    pub spare_events: AtomicU64,
    /// Events a handler served that waited for a folio someone held (spare.rs).
    pub folio_lock_waits: AtomicU64,
    /// Faults on a folio someone held that the spare left to a regular handler (spare.rs).
    pub spare_deferred: AtomicU64,
    latency_ns: Mutex<Histogram<u64>>,
}

impl Default for RegionStats {
    fn default() -> Self {
        RegionStats {
            faults: AtomicU64::new(0),
            faults_swapcache: AtomicU64::new(0),
            faults_folio: AtomicU64::new(0),
            faults_pages: AtomicU64::new(0),
            faults_first_touch: AtomicU64::new(0),
            redundant: AtomicU64::new(0),
            pages_in: AtomicU64::new(0),
            poisoned: AtomicU64::new(0),
            folios_evicted: AtomicU64::new(0),
            batch_evictions: AtomicU64::new(0),
            evict_failed: AtomicU64::new(0),
            direct_reclaim: AtomicU64::new(0),
            swapcache_dropped: AtomicU64::new(0),
            discarded_pages: AtomicU64::new(0),
            remaps: AtomicU64::new(0),
            clean_installs: AtomicU64::new(0),
            wp_faults: AtomicU64::new(0),
            clean_evictions: AtomicU64::new(0),
            readahead_folios: AtomicU64::new(0),
            dropped_behind: AtomicU64::new(0),
            fault_around: AtomicU64::new(0),
            incompressible_skipped: AtomicU64::new(0),
            incompressible_kept: AtomicU64::new(0),
            incompressible_refaults: AtomicU64::new(0),
            lost_track: AtomicU64::new(0),
            discards_not_zapped: AtomicU64::new(0),
            late_zaps: AtomicU64::new(0),
            stray_staged_pages: AtomicU64::new(0),
            spare_events: AtomicU64::new(0),
            folio_lock_waits: AtomicU64::new(0),
            spare_deferred: AtomicU64::new(0),
            latency_ns: Mutex::new(
                Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds"),
            ),
        }
    }
}

impl RegionStats {
    pub fn record_latency(&self, d: Duration) {
        let ns = (d.as_nanos() as u64).max(1);
        let _ = self.latency_ns.lock().record(ns);
    }

    pub fn snapshot(&self) -> RegionStatsSnapshot {
        let h = self.latency_ns.lock();
        let q = |x: f64| Duration::from_nanos(h.value_at_quantile(x));
        let faults = self.faults.load(Relaxed);
        RegionStatsSnapshot {
            faults,
            faults_swapcache: self.faults_swapcache.load(Relaxed),
            faults_folio: self.faults_folio.load(Relaxed),
            faults_pages: self.faults_pages.load(Relaxed),
            faults_first_touch: self.faults_first_touch.load(Relaxed),
            redundant: self.redundant.load(Relaxed),
            pages_in: self.pages_in.load(Relaxed),
            pages_per_fault: if faults == 0 {
                0.0
            } else {
                self.pages_in.load(Relaxed) as f64 / faults as f64
            },
            poisoned: self.poisoned.load(Relaxed),
            folios_evicted: self.folios_evicted.load(Relaxed),
            batch_evictions: self.batch_evictions.load(Relaxed),
            evict_failed: self.evict_failed.load(Relaxed),
            direct_reclaim: self.direct_reclaim.load(Relaxed),
            swapcache_dropped: self.swapcache_dropped.load(Relaxed),
            discarded_pages: self.discarded_pages.load(Relaxed),
            remaps: self.remaps.load(Relaxed),
            clean_installs: self.clean_installs.load(Relaxed),
            wp_faults: self.wp_faults.load(Relaxed),
            clean_evictions: self.clean_evictions.load(Relaxed),
            readahead_folios: self.readahead_folios.load(Relaxed),
            dropped_behind: self.dropped_behind.load(Relaxed),
            fault_around: self.fault_around.load(Relaxed),
            incompressible_skipped: self.incompressible_skipped.load(Relaxed),
            incompressible_kept: self.incompressible_kept.load(Relaxed),
            incompressible_refaults: self.incompressible_refaults.load(Relaxed),
            lost_track: self.lost_track.load(Relaxed),
            discards_not_zapped: self.discards_not_zapped.load(Relaxed),
            late_zaps: self.late_zaps.load(Relaxed),
            stray_staged_pages: self.stray_staged_pages.load(Relaxed),
            spare_events: self.spare_events.load(Relaxed),
            folio_lock_waits: self.folio_lock_waits.load(Relaxed),
            spare_deferred: self.spare_deferred.load(Relaxed),
            fault_latency_p50: q(0.5),
            fault_latency_p99: q(0.99),
            fault_latency_max: Duration::from_nanos(h.max()),
        }
    }
}

/// A copy of the region's statistics.
#[derive(Debug, Clone, Serialize)]
pub struct RegionStatsSnapshot {
    /// Missing-page faults served (each brings in at most one folio).
    pub faults: u64,
    /// Faults served from a folio still in the region's swap cache (staged): no decompression.
    pub faults_swapcache: u64,
    /// Faults served from the engine (pool, disk or zero marks), whole folio in one install.
    pub faults_folio: u64,
    /// Faults served page by page (the folio's pages were in different places).
    pub faults_pages: u64,
    /// First touches: nothing stored, zero-filled.
    pub faults_first_touch: u64,
    /// Faults whose page was already present when the handler came to install it.
    pub redundant: u64,
    /// Pages installed by faults.
    pub pages_in: u64,
    /// `pages_in / faults` (0 before the first fault).
    pub pages_per_fault: f64,
    /// Pages that could not be read back and were poisoned (SIGBUS on access).
    pub poisoned: u64,
    /// Folios reclaimed: stored in the pool or written to the swap file.
    pub folios_evicted: u64,
    /// Evictions of several neighbouring 4 KiB folios with one move (`batch_eviction`).
    pub batch_evictions: u64,
    /// Evictions that failed (neither the pool nor the swap file took the folio): it stays
    /// resident and is queued again.
    pub evict_failed: u64,
    /// Direct reclaim steps: a fault found the region at its limit and reclaimed a folio before
    /// bringing its own in.
    pub direct_reclaim: u64,
    /// Staged folios dropped from the region's swap cache (the engine still holds them).
    pub swapcache_dropped: u64,
    /// Pages discarded by the program (`MADV_DONTNEED`, `MADV_REMOVE`, `munmap`...): whatever
    /// the engine held of them is freed.
    pub discarded_pages: u64,
    /// Moves of the whole region (`mremap`) followed.
    pub remaps: u64,
    /// Folios read from disk installed write-protected, keeping their disk copy (`keep_clean`).
    pub clean_installs: u64,
    /// Writes to such folios (their disk copy dropped).
    pub wp_faults: u64,
    /// Folios reclaimed while still clean: no store, no write.
    pub clean_evictions: u64,
    /// Folios brought in by readahead, ahead of any fault.
    pub readahead_folios: u64,
    /// Folios reclaimed because a sequential scan had passed them (`drop_behind`).
    pub dropped_behind: u64,
    /// Untouched folios mapped to the zero page after a first touch next to them.
    pub fault_around: u64,
    /// Folios reclaim passed over because their last store found them incompressible
    /// (`keep_incompressible`).
    pub incompressible_skipped: u64,
    /// Folios found incompressible at their first store and kept resident, because the region's
    /// incompressible data keeps coming back in.
    pub incompressible_kept: u64,
    /// Faults that brought back a folio last stored as-is.
    pub incompressible_refaults: u64,
    /// Faults on pages marked resident that were not mapped (a bookkeeping bug, recovered).
    pub lost_track: u64,
    /// Pages still mapped when their discard was processed (`MADV_FREE`, or a zap later than the
    /// wait): left mapped, and uncounted until they fault again.
    pub discards_not_zapped: u64,
    /// Pages the kernel unmapped after their discard was processed, found by a fault or by
    /// reclaim: they read zero.
    pub late_zaps: u64,
    /// Pages found in a staging slot that should have been empty (left there and discarded).
    pub stray_staged_pages: u64,
    /// Events the spare handler read and served (or left: `spare_deferred`), while every regular
    /// handler waited on the disk.
    pub spare_events: u64,
    /// Events a handler served that waited for a folio someone held.
    pub folio_lock_waits: u64,
    /// Faults on a folio someone held that the spare handler left to a regular handler.
    pub spare_deferred: u64,
    /// Median fault latency: from a handler taking the fault up to its folio installed, direct
    /// reclaim included.
    pub fault_latency_p50: Duration,
    /// 99th percentile fault latency.
    pub fault_latency_p99: Duration,
    /// Longest fault latency.
    pub fault_latency_max: Duration,
}
