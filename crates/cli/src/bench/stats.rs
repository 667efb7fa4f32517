//! Kernel-style statistics around one run: deltas of `/proc/vmstat` swap counters and of the
//! per-order mTHP counters, and the zswap debugfs gauges. Under cgroup v1 these counters are
//! machine-wide, so the benchmark takes deltas around one run at a time.

use std::collections::BTreeMap;
use std::path::Path;

/// The /proc/vmstat counters reported (zswap and swap traffic, zero-page shortcuts, major
/// faults).
pub const VMSTAT_COUNTERS: [&str; 8] = [
    "zswpout",
    "zswpin",
    "zswpwb",
    "pswpout",
    "pswpin",
    "swpin_zero",
    "swpout_zero",
    "pgmajfault",
];

const THP_DIR: &str = "/sys/kernel/mm/transparent_hugepage";
const THP_COUNTERS: [&str; 3] = ["zswpout", "swpout", "swpin"];
/// The kernel zswap's debugfs directory (pool gauges and reject counters).
pub const ZSWAP_DEBUGFS: &str = "/sys/kernel/debug/zswap";

/// Counter values at one moment, by name (`zswpout`, `thp_64kB_zswpout`, ...).
#[derive(Debug, Clone, Default)]
pub struct Snapshot(pub BTreeMap<String, i64>);

impl Snapshot {
    /// Read the counters now: `VMSTAT_COUNTERS` from /proc/vmstat and the per-order mTHP
    /// counters; a counter that cannot be read is left out.
    pub fn take() -> Snapshot {
        let mut m = BTreeMap::new();
        if let Ok(text) = std::fs::read_to_string("/proc/vmstat") {
            for line in text.lines() {
                let mut it = line.split_whitespace();
                if let (Some(k), Some(v)) = (it.next(), it.next()) {
                    if VMSTAT_COUNTERS.contains(&k) {
                        if let Ok(v) = v.parse() {
                            m.insert(k.to_string(), v);
                        }
                    }
                }
            }
        }
        if let Ok(dirs) = std::fs::read_dir(THP_DIR) {
            for d in dirs.flatten() {
                let name = d.file_name().to_string_lossy().into_owned();
                let Some(size) = name.strip_prefix("hugepages-") else {
                    continue;
                };
                for c in THP_COUNTERS {
                    if let Some(v) = read_i64(&d.path().join("stats").join(c)) {
                        m.insert(format!("thp_{size}_{c}"), v);
                    }
                }
            }
        }
        Snapshot(m)
    }

    /// `self - before` for every counter present in both. Per-order counters that did not
    /// move are left out: most orders stay at zero and would only fill the table.
    pub fn delta(&self, before: &Snapshot) -> BTreeMap<String, i64> {
        self.0
            .iter()
            .filter_map(|(k, v)| before.0.get(k).map(|b| (k, v - b)))
            .filter(|(k, d)| !k.starts_with("thp_") || *d != 0)
            .map(|(k, d)| (k.clone(), d))
            .collect()
    }
}

fn read_i64(p: &Path) -> Option<i64> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

/// Every numeric file of zswap's debugfs directory (`pool_total_size`, `stored_pages`, ...),
/// empty when debugfs is not mounted.
pub fn zswap_debugfs() -> BTreeMap<String, i64> {
    let mut m = BTreeMap::new();
    if let Ok(dir) = std::fs::read_dir(ZSWAP_DEBUGFS) {
        for e in dir.flatten() {
            if let Some(v) = read_i64(&e.path()) {
                m.insert(format!("zswap_{}", e.file_name().to_string_lossy()), v);
            }
        }
    }
    m
}

/// Major faults of a process so far (`majflt`, field 12 of `/proc/<pid>/stat`): faults that
/// had to read a page, as a swap-in from zswap or disk does (one that finds the page in the
/// swap cache, put there by readahead, does not count).
pub fn major_faults(pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_major_faults(&text)
}

fn parse_major_faults(text: &str) -> Option<u64> {
    // As in `CpuTimes::parse_stat`: count from the last ')'; field 3 is the first after it.
    text[text.rfind(')')? + 1..]
        .split_whitespace()
        .nth(12 - 3)?
        .parse()
        .ok()
}

/// User and system CPU seconds.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct CpuTimes {
    /// User CPU seconds.
    pub user_s: f64,
    /// System CPU seconds.
    pub sys_s: f64,
}

impl CpuTimes {
    /// From a `/proc/<pid>/stat` (or `/proc/thread-self/stat`) file: fields 14 and 15.
    pub fn from_stat_file(path: &Path) -> Option<CpuTimes> {
        let text = std::fs::read_to_string(path).ok()?;
        Self::parse_stat(&text)
    }

    /// From the text of a `/proc/<pid>/stat` file; None if it is malformed.
    pub fn parse_stat(text: &str) -> Option<CpuTimes> {
        Self::stat_fields(text, false)
    }

    /// From the text of a `/proc/<pid>/stat` file, the CPU time of the children it has
    /// waited for (fields 16 and 17) added: a program's and its whole tree's.
    pub fn parse_stat_with_children(text: &str) -> Option<CpuTimes> {
        Self::stat_fields(text, true)
    }

    fn stat_fields(text: &str, children: bool) -> Option<CpuTimes> {
        // The command name (field 2) is in parentheses and may hold spaces: count from the
        // last ')'. Field 3 is then the first after it, so utime (14) is index 11.
        let rest = &text[text.rfind(')')? + 1..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        let hz = rustix::param::clock_ticks_per_second() as f64;
        let ticks = |i: usize| f.get(i)?.parse::<u64>().ok();
        let (cutime, cstime) = match children {
            true => (ticks(13)?, ticks(14)?),
            false => (0, 0),
        };
        Some(CpuTimes {
            user_s: (ticks(11)? + cutime) as f64 / hz,
            sys_s: (ticks(12)? + cstime) as f64 / hz,
        })
    }

    /// `self - before`, field by field.
    pub fn minus(self, before: CpuTimes) -> CpuTimes {
        CpuTimes {
            user_s: self.user_s - before.user_s,
            sys_s: self.sys_s - before.sys_s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_parses_past_a_name_with_spaces() {
        let line = "42 (a b) c) S 1 2 3 4 5 6 7 8 9 10 250 150 0 0 20 0 1 0";
        let hz = rustix::param::clock_ticks_per_second() as f64;
        let c = CpuTimes::parse_stat(line).unwrap();
        assert_eq!(c.user_s, 250.0 / hz);
        assert_eq!(c.sys_s, 150.0 / hz);
        assert_eq!(parse_major_faults(line), Some(9));
        let all = CpuTimes::parse_stat_with_children(line).unwrap();
        assert_eq!(all.user_s, 250.0 / hz);
        let line = "42 (a b) c) Z 1 2 3 4 5 6 7 8 9 10 250 150 30 20 20 0 1 0";
        let all = CpuTimes::parse_stat_with_children(line).unwrap();
        assert_eq!(all.user_s, 280.0 / hz);
        assert_eq!(all.sys_s, 170.0 / hz);
    }

    #[test]
    fn deltas_keep_moved_thp_counters_only() {
        let mut a = Snapshot::default();
        let mut b = Snapshot::default();
        a.0.insert("zswpout".into(), 10);
        b.0.insert("zswpout".into(), 10);
        a.0.insert("thp_64kB_swpout".into(), 1);
        b.0.insert("thp_64kB_swpout".into(), 1);
        a.0.insert("thp_2048kB_swpout".into(), 1);
        b.0.insert("thp_2048kB_swpout".into(), 3);
        let d = b.delta(&a);
        assert_eq!(d.get("zswpout"), Some(&0));
        assert_eq!(d.get("thp_2048kB_swpout"), Some(&2));
        assert!(!d.contains_key("thp_64kB_swpout"));
    }

    #[test]
    fn own_stat_file_reads() {
        let c = CpuTimes::from_stat_file(Path::new("/proc/self/stat")).unwrap();
        assert!(c.user_s >= 0.0 && c.sys_s >= 0.0);
    }
}
