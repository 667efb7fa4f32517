//! Statistics, with the kernel's names: the vmstat events (`zswpin zswpout zswpwb pswpin
//! pswpout swpin_zero swpout_zero`), the per-order mTHP counters (`hugepages-<N>kB/stats/
//! {zswpout,swpout,swpin}`), the debugfs files of `/sys/kernel/debug/zswap`, and our own
//! additions. A [`StatsSnapshot`] prints as `name value` lines (like /proc/vmstat) or as JSON.
//!
//! Events are relaxed atomics, like the kernel's approximate counters; gauges (stored pages,
//! pool size) are exact because every change to them happens under the page's lock.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Folio orders 0 (4 KiB) to 9 (2 MiB).
pub const NR_ORDERS: usize = 10;

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        /// Event counters and gauges of one zswap instance.
        #[derive(Debug, Default)]
        pub struct Stats {
            $($(#[$doc])* pub $name: AtomicU64,)*
            /// Per folio order: pages of folios of that order stored in zswap.
            pub order_zswpout: [AtomicU64; NR_ORDERS],
            /// Per folio order: folios of that order written to the backing device.
            pub order_swpout: [AtomicU64; NR_ORDERS],
            /// Per folio order: folios of that order brought back in one piece.
            pub order_swpin: [AtomicU64; NR_ORDERS],
        }

        impl Stats {
            fn fixed(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name.load(Relaxed)),)*]
            }
        }
    };
}

counters! {
    /// Pages loaded from the pool (vmstat).
    zswpin,
    /// Pages stored into the pool (vmstat).
    zswpout,
    /// Pages written back from the pool to the backing device (vmstat).
    zswpwb,
    /// Pages read from the backing device (vmstat).
    pswpin,
    /// Pages written to the backing device, writeback and writethrough included (vmstat).
    pswpout,
    /// Same-filled zero pages brought back without storage (vmstat).
    swpin_zero,
    /// Zero pages recorded without storage (vmstat).
    swpout_zero,
    /// Stores refused because the pool was at `max_pool_percent` (debugfs).
    pool_limit_hit,
    /// Stores refused because a group was at its `zswap_max` and reclaim could not make room,
    /// and writebacks that failed (debugfs).
    reject_reclaim_fail,
    /// Stores refused because the pool could not allocate (debugfs).
    reject_alloc_fail,
    /// Stores refused because the compressor failed (debugfs).
    reject_compress_fail,
    /// Incompressible pages refused because writeback is off for their group (debugfs).
    reject_compress_poor,
    /// Pages whose stored data could not be decompressed into exactly one page (debugfs).
    decompress_fail,
    /// Pages written back by the shrinker (debugfs).
    written_back_pages,
    /// Pages held in the pool now, raw ones included (debugfs gauge).
    stored_pages,
    /// Pages held raw in the pool now because they did not compress (debugfs gauge).
    stored_incompressible_pages,
    /// Same-filled pages recorded as a value, without storage, now (ours; gauge).
    same_filled_pages,
    /// Pages also written to the backing device at store time (ours).
    writethrough_pages,
    /// Pool entries dropped without a write because a writethrough copy existed (ours).
    writethrough_evictions,
    /// Backing-device writes that failed: EIO, ENOSPC, short writes, no free slot (ours).
    swap_write_fail,
    /// Backing-device reads that failed (ours).
    swap_read_fail,
    /// Shrinker passes that stopped at a page someone else owned: the kernel's -EEXIST (ours).
    writeback_busy_stop,
    /// Large folios split into single pages (ours).
    folio_splits,
    /// Large folios whose pages were compressed in parts by more than one thread (ours).
    folios_compressed_in_parts,
}

/// One statistic and its value.
pub type StatLine = (String, u64);

/// A point-in-time copy of every statistic, in a stable order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StatsSnapshot {
    /// Every statistic as (name, value): the counters, then the pool's gauges, then the
    /// per-folio-size `hugepages-*/stats/*` counters.
    pub lines: Vec<StatLine>,
}

/// The kernel's name for a folio order's size, as in `hugepages-64kB`.
pub fn order_size_name(order: usize) -> String {
    format!("{}kB", 4usize << order)
}

impl Stats {
    /// Count `nr` pages stored for a folio of `order`.
    pub(crate) fn count_order(counter: &[AtomicU64; NR_ORDERS], order: u8, n: u64) {
        counter[order as usize].fetch_add(n, Relaxed);
    }

    pub(crate) fn inc(c: &AtomicU64) {
        c.fetch_add(1, Relaxed);
    }

    pub(crate) fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Relaxed);
    }

    pub(crate) fn sub(c: &AtomicU64, n: u64) {
        c.fetch_sub(n, Relaxed);
    }

    /// Counters only; `Zswap::stats` adds the pool's gauges.
    pub(crate) fn snapshot_with(&self, gauges: &[(&'static str, u64)]) -> StatsSnapshot {
        let mut lines: Vec<StatLine> = self
            .fixed()
            .into_iter()
            .map(|(n, v)| (n.to_string(), v))
            .collect();
        lines.extend(gauges.iter().map(|(n, v)| (n.to_string(), *v)));
        for order in 0..NR_ORDERS {
            let size = order_size_name(order);
            for (name, arr) in [
                ("zswpout", &self.order_zswpout),
                ("swpout", &self.order_swpout),
                ("swpin", &self.order_swpin),
            ] {
                lines.push((
                    format!("hugepages-{size}/stats/{name}"),
                    arr[order].load(Relaxed),
                ));
            }
        }
        StatsSnapshot { lines }
    }
}

/// `name value` lines, like /proc/vmstat.
impl std::fmt::Display for StatsSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_lines())
    }
}

impl StatsSnapshot {
    /// The value of a statistic, by name. Panics on an unknown name: a typo in a test or a
    /// benchmark should fail loudly.
    pub fn get(&self, name: &str) -> u64 {
        self.lines
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
            .unwrap_or_else(|| panic!("no statistic named {name}"))
    }

    /// `name value` lines, like /proc/vmstat.
    pub fn to_lines(&self) -> String {
        let mut s = String::new();
        for (n, v) in &self.lines {
            s.push_str(n);
            s.push(' ');
            s.push_str(&v.to_string());
            s.push('\n');
        }
        s
    }

    /// One JSON object, name to value.
    pub fn to_json(&self) -> serde_json::Value {
        let map: serde_json::Map<String, serde_json::Value> = self
            .lines
            .iter()
            .map(|(n, v)| (n.clone(), serde_json::Value::from(*v)))
            .collect();
        serde_json::Value::Object(map)
    }

    /// What changed since `earlier`, counter by counter (gauges subtract too; they may go
    /// down, so the difference saturates at zero: use `get` on both for gauges).
    pub fn delta(&self, earlier: &StatsSnapshot) -> StatsSnapshot {
        StatsSnapshot {
            lines: self
                .lines
                .iter()
                .map(|(n, v)| {
                    let before = earlier
                        .lines
                        .iter()
                        .find(|(m, _)| m == n)
                        .map_or(0, |(_, b)| *b);
                    (n.clone(), v.saturating_sub(before))
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_prints_kernel_names_as_lines_and_json() {
        let s = Stats::default();
        Stats::inc(&s.zswpout);
        Stats::count_order(&s.order_zswpout, 4, 16);
        let snap = s.snapshot_with(&[("pool_total_size", 8192)]);
        let text = snap.to_lines();
        assert!(text.contains("zswpout 1\n"));
        assert!(text.contains("hugepages-64kB/stats/zswpout 16\n"));
        assert!(text.contains("pool_total_size 8192\n"));
        let json = snap.to_json();
        assert_eq!(json["zswpout"], 1);
        assert_eq!(json["hugepages-2048kB/stats/swpin"], 0);
        for name in [
            "zswpin",
            "zswpwb",
            "pswpin",
            "pswpout",
            "swpin_zero",
            "swpout_zero",
            "pool_limit_hit",
            "reject_reclaim_fail",
            "reject_alloc_fail",
            "reject_compress_fail",
            "reject_compress_poor",
            "decompress_fail",
            "written_back_pages",
            "stored_pages",
            "stored_incompressible_pages",
        ] {
            snap.get(name);
        }
    }
}
