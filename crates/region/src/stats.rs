//! The region's own statistics: faults by source, redundant faults, pages per fault, fault
//! latency, reclaim. The engine's kernel-named statistics are in `Zswap::stats`. A
//! [`RegionStatsSnapshot`] prints itself as `name value` lines (`Display`) or as JSON.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::lock_order::{self, Mutex};
use hdrhistogram::Histogram;

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// The region's counters, relaxed atomics like the kernel's event counters.
        #[derive(Debug)]
        pub(crate) struct RegionStats {
            $($(#[$doc])* pub $name: AtomicU64,)*
            latency_ns: LatencyHistogram,
            /// Faults that brought pages from the pool (none from the swap device).
            pool_latency_ns: LatencyHistogram,
            /// Faults that brought pages from the swap device.
            device_latency_ns: LatencyHistogram,
        }

        impl Default for RegionStats {
            fn default() -> Self {
                RegionStats {
                    $($name: AtomicU64::new(0),)*
                    latency_ns: LatencyHistogram::default(),
                    pool_latency_ns: LatencyHistogram::default(),
                    device_latency_ns: LatencyHistogram::default(),
                }
            }
        }

        /// A copy of the region's statistics at one moment.
        #[derive(Debug, Clone, PartialEq)]
        pub struct RegionStatsSnapshot {
            $($(#[$doc])* pub $name: u64,)*
            /// `pages_in / faults`: pages a fault brought in, on average.
            pub pages_per_fault: f64,
            /// Fault service time, median: from reading the event to waking the thread.
            pub fault_latency_p50: Duration,
            /// Fault service time, 99th percentile.
            pub fault_latency_p99: Duration,
            /// Fault service time, the longest.
            pub fault_latency_max: Duration,
            /// Median and 99th percentile of faults served from the pool.
            pub fault_latency_pool: (Duration, Duration),
            /// Median and 99th percentile of faults that read the swap device.
            pub fault_latency_device: (Duration, Duration),
        }

        impl RegionStats {
            pub fn snapshot(&self) -> RegionStatsSnapshot {
                let quantiles = |h: &LatencyHistogram| (h.quantile(0.5), h.quantile(0.99));
                let fault_latency_pool = quantiles(&self.pool_latency_ns);
                let fault_latency_device = quantiles(&self.device_latency_ns);
                let h = &self.latency_ns;
                let q = |x: f64| h.quantile(x);
                let (faults, pages_in) = (self.faults.load(Relaxed), self.pages_in.load(Relaxed));
                RegionStatsSnapshot {
                    $($name: self.$name.load(Relaxed),)*
                    pages_per_fault: if faults == 0 { 0.0 } else { pages_in as f64 / faults as f64 },
                    fault_latency_p50: q(0.5),
                    fault_latency_p99: q(0.99),
                    fault_latency_max: h.max(),
                    fault_latency_pool,
                    fault_latency_device,
                }
            }
        }

        impl RegionStatsSnapshot {
            /// Every counter by name, in a stable order, then the fault latencies in
            /// nanoseconds (`fault_latency_p50_ns`, `_p99_ns`, `_max_ns`; of faults from
            /// the pool and from the swap device, `fault_latency_{pool,device}_p{50,99}_ns`).
            pub fn lines(&self) -> Vec<(&'static str, u64)> {
                let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
                vec![
                    $((stringify!($name), self.$name),)*
                    ("fault_latency_p50_ns", ns(self.fault_latency_p50)),
                    ("fault_latency_p99_ns", ns(self.fault_latency_p99)),
                    ("fault_latency_max_ns", ns(self.fault_latency_max)),
                    ("fault_latency_pool_p50_ns", ns(self.fault_latency_pool.0)),
                    ("fault_latency_pool_p99_ns", ns(self.fault_latency_pool.1)),
                    ("fault_latency_device_p50_ns", ns(self.fault_latency_device.0)),
                    ("fault_latency_device_p99_ns", ns(self.fault_latency_device.1)),
                ]
            }
        }
    };
}

counters! {
    /// Faults served on a folio (its lock taken), write-protect faults on clean folios aside.
    faults,
    /// Served from a folio still staged (staged.rs, reclaim's inactive list): no
    /// decompression.
    faults_staged,
    /// Of those, folios activated: used while reclaim had them (swapin.rs).
    staged_activate,
    /// Served from the engine (pool, disk or zero marks), whole folio in one install.
    faults_folio,
    /// Served page by page (the folio's pages were in different places).
    faults_pages,
    /// First touch: nothing stored, zero-filled.
    faults_first_touch,
    /// The page was already present when we came to install it.
    redundant,
    /// Pages brought into the mapping by faults.
    pages_in,
    /// Pages that could not be read back, poisoned (SIGBUS on access; invariant 7).
    poisoned,
    /// Folios reclaim stored (or, clean, dropped) and freed.
    folios_evicted,
    /// Folios reclaim moved out of the mapping onto its inactive list (staged.rs), not yet
    /// stored: as the kernel's `pgdeactivate`, in folios.
    pgdeactivate,
    /// Evictions of several neighbouring 4 KiB folios with one move (reclaim.rs).
    batch_evictions,
    /// Evictions given up: the folio stayed resident and was queued again.
    evict_failed,
    /// Resident pages of folios reclaim took off its queue because the program gave a page
    /// of them another protection than read-write (unevictable.rs), as mm's
    /// `unevictable_pgs_culled`.
    unevictable_pgs_culled,
    /// Resident pages of folios queued again when their pages were all made read-write
    /// (`Region::protect`), as mm's `unevictable_pgs_rescued`.
    unevictable_pgs_rescued,
    /// Faults that found the region over its limit with nothing left to reclaim
    /// (over_limit.rs), as memory.events `high`.
    high,
    /// Of those, faults past the hard limit (`memory_max`), as memory.events `max`.
    max,
    /// Times the hard limit was reached with the policy to kill, as memory.events `oom`.
    oom,
    /// Processes killed for it, as memory.events `oom_kill`.
    oom_kill,
    /// Nanoseconds faults were made to sleep over the limit (memory.high's throttling).
    throttled_ns,
    /// The most the region was seen to hold (`Usage::total`), in bytes, sampled by each fault
    /// as it made room.
    peak_charged_bytes,
    /// Nanoseconds of fault service, all faults together (what `fault_latency_*` describe).
    fault_wait_ns,
    /// Reclaim passes a fault ran itself, because its folio would have taken the region past
    /// its limit.
    direct_reclaim,
    /// Staged folios that reached the end of the inactive list untouched: stored then (or,
    /// clean, dropped) and their staging memory freed.
    staged_dropped,
    /// Pages the program discarded (`MADV_DONTNEED`, `MADV_FREE`, `munmap`), whatever held
    /// them freed.
    discarded_pages,
    /// Moves of the whole region (`mremap`).
    remaps,
    /// Folios read from disk installed write-protected, keeping their disk copy.
    clean_installs,
    /// Writes that met a write-protected clean folio: its disk copy dropped.
    wp_faults,
    /// Folios reclaimed while still clean: no store, no write.
    clean_evictions,
    /// Folios reclaim found at the LRU's head and asked whether they were written since it
    /// last asked (`Policies::referenced_writes`, reclaim.rs; answered from the written
    /// bits, written_bits.rs).
    written_checks,
    /// Of those, folios found written: activated, kept resident.
    written_activated,
    /// Reads of a chunk of the region's written bits from the page tables (written_bits.rs).
    written_scans,
    /// Folios brought in by readahead, ahead of any fault.
    readahead_folios,
    /// Folios reclaimed because a sequential scan had passed them (drop-behind).
    dropped_behind,
    /// Untouched folios mapped after a first touch next to them (fault-around: zero-filled
    /// after a write, the zero page after a read).
    fault_around,
    /// Folios reclaim passed over because their last store found them incompressible
    /// (incompressible.rs).
    incompressible_skipped,
    /// Folios found incompressible at their first store and kept resident, because the
    /// region's incompressible data keeps coming back in (incompressible.rs).
    incompressible_kept,
    /// Faults that brought back a folio last stored as-is (incompressible.rs).
    incompressible_refaults,
    /// Faults on pages marked resident that were not mapped (a bookkeeping bug, recovered).
    lost_track,
    /// Pages still mapped when their discard was processed (`MADV_FREE`, or a zap later than
    /// the wait): left mapped, and uncounted until they fault again.
    discards_not_zapped,
    /// Pages the kernel unmapped after their discard was processed (a zap that came late, or
    /// `MADV_FREE`'s lazy free), found by a fault or by reclaim: they read zero.
    late_zaps,
    /// Pages found in a staging slot that should have been empty (left there and discarded).
    stray_staged_pages,
    /// Pages of folios reclaim found shared with a forked child that kswapd made the
    /// region's own again, so reclaim could move them out (shared_folios.rs).
    fork_unshared,
    /// Pages the kernel mapped in a lazy region's range before it was registered, counted
    /// as the region's once it was (adopt.rs).
    adopted_pages,
    /// Waits for events that a handler's poll ended, without its sleeping (busy_poll.rs).
    busy_polled,
    /// Nanoseconds handlers spent polling for events (busy_poll.rs).
    busy_poll_ns,
    /// Events the spare handler read and served (or left: `spare_deferred`), while every
    /// regular one waited on the disk.
    spare_events,
    /// Events a handler served that waited for a folio someone held (spare.rs).
    folio_lock_waits,
    /// Faults on a folio someone held that the spare left to a regular handler (spare.rs).
    spare_deferred,
    /// Faults a program thread served itself, from its SIGBUS handler (in_thread.rs).
    in_thread_faults,
    /// Discards of the program's that waited for operations earlier discards held off
    /// (mmap_changing.rs).
    discards_waited,
    /// Nanoseconds they waited.
    discard_wait_ns,
    /// Faults that brought a folio back from the engine (workingset.rs), as the kernel's
    /// `workingset_refault_anon`.
    workingset_refault,
    /// Of those, folios that came back within fewer evictions than the region holds
    /// resident and were activated, as `workingset_activate_anon`.
    workingset_activate,
    /// Of the faults that brought a folio back, those a resident share larger by a step
    /// would have saved (pool_share.rs): back within a step's pages of evictions.
    refaults_near_resident,
    /// Of the faults that read the swap device, those a pool larger by a step would have
    /// saved (pool_share.rs): written back within a step's pool pages of writebacks.
    refaults_near_pool,
    /// Faults that brought the faulted page alone (swapin_window.rs): of a folio the engine
    /// held whole, or of one partly in.
    faults_page_alone,
    /// Faults on another page of a folio brought in a page at a time, while it was partly
    /// in: faults the whole folio would have saved.
    page_alone_hits,
    /// Folios brought in a page alone that reclaim took with that page alone in: the rest
    /// never came in.
    page_alone_misses,
}

/// Where a fault's pages came from, for its latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FaultSource {
    /// Some from the swap device.
    Device,
    /// From the pool (none from the device).
    Pool,
    /// Neither: staged, zero-filled, or already there.
    Other,
}

impl RegionStats {
    /// What a refault has cost, from the pool and from the swap device: the medians of the
    /// faults' service times (zero before the first of each).
    pub(crate) fn refault_costs(&self) -> crate::pool_share::Costs {
        crate::pool_share::Costs {
            pool: self.pool_latency_ns.quantile(0.5),
            disk: self.device_latency_ns.quantile(0.5),
        }
    }

    pub fn record_latency(&self, d: Duration, source: FaultSource) {
        let ns = (d.as_nanos() as u64).max(1);
        self.fault_wait_ns.fetch_add(ns, Relaxed);
        self.latency_ns.record(ns);
        let by_source = match source {
            FaultSource::Device => &self.device_latency_ns,
            FaultSource::Pool => &self.pool_latency_ns,
            FaultSource::Other => return,
        };
        by_source.record(ns);
    }
}

/// Fault latencies in nanoseconds, 1 ns to 60 s at three significant digits: 37,000 buckets
/// (221 KB), allocated at the first fault timed. A process that never faults (most under a
/// limit far above their use: registration.rs) neither zeroes them at its start nor scans
/// them at each snapshot (every 100 ms under `uzswap run`).
#[derive(Debug)]
struct LatencyHistogram(Mutex<Option<Histogram<u64>>>);

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram(Mutex::new(&lock_order::LATENCY, None))
    }
}

impl LatencyHistogram {
    fn record(&self, ns: u64) {
        let mut h = self.0.lock();
        let h = h.get_or_insert_with(|| {
            Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds")
        });
        let _ = h.record(ns);
    }

    /// The latency at quantile `x`; zero before the first.
    fn quantile(&self, x: f64) -> Duration {
        match &*self.0.lock() {
            Some(h) if !h.is_empty() => Duration::from_nanos(h.value_at_quantile(x)),
            _ => Duration::ZERO,
        }
    }

    /// The longest latency; zero before the first.
    fn max(&self) -> Duration {
        self.0
            .lock()
            .as_ref()
            .map_or(Duration::ZERO, |h| Duration::from_nanos(h.max()))
    }
}

impl RegionStatsSnapshot {
    /// One JSON object: every line of [`lines`](Self::lines), and `pages_per_fault`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut map: serde_json::Map<String, serde_json::Value> = self
            .lines()
            .into_iter()
            .map(|(n, v)| (n.to_string(), v.into()))
            .collect();
        map.insert("pages_per_fault".into(), self.pages_per_fault.into());
        serde_json::Value::Object(map)
    }
}

/// `name value` lines, like /proc/vmstat: every line of `lines()`, then `pages_per_fault`.
impl std::fmt::Display for RegionStatsSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (name, value) in self.lines() {
            writeln!(f, "{name} {value}")?;
        }
        writeln!(f, "pages_per_fault {:.2}", self.pages_per_fault)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_prints_every_counter_once_as_lines_and_json() {
        let stats = RegionStats::default();
        stats.faults.store(4, Relaxed);
        stats.pages_in.store(10, Relaxed);
        stats.late_zaps.store(3, Relaxed);
        stats.record_latency(Duration::from_micros(7), FaultSource::Pool);
        let s = stats.snapshot();
        let text = s.to_string();
        assert!(text.starts_with("faults 4\n"), "{text}");
        assert!(text.contains("\nlate_zaps 3\n"), "{text}");
        assert!(text.ends_with("pages_per_fault 2.50\n"), "{text}");
        let names: Vec<&str> = text.lines().map(|l| l.split(' ').next().unwrap()).collect();
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "a name printed twice");
        let json = s.to_json();
        assert_eq!(json["late_zaps"], 3);
        assert_eq!(json.as_object().unwrap().len(), names.len());
        let p50 = json["fault_latency_p50_ns"].as_u64().unwrap();
        assert!((6_990..=7_010).contains(&p50), "{p50}");
    }
}
