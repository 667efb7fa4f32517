//! The statistics of a program under `uzswap run` in the form the preload and the agent hand
//! them out (`region::Region::stats_text`: the line `uzswap-stats 1`, then `name value`
//! lines, to which each adds what it knows of the process), and
//! printed as text (those lines), JSON (one object, name to value) or the Prometheus text
//! format. `uzswap run --stats` prints them at exit and `uzswap stat PID` while the program
//! runs, both through [`Snapshot`].
//!
//! Prometheus names: `uzswap_` and the statistic's name; counters end in `_total`; values in
//! base units (`fault_latency_p50_ns` is `uzswap_fault_latency_p50_seconds`,
//! `pool_total_size` is `uzswap_pool_total_size_bytes`); the per-folio-size counters
//! `hugepages-<N>kB/stats/<what>` are `uzswap_hugepages_<what>_total{size="<N>kB"}`, and the
//! process tree's `tree/<PID>/<what>` are `uzswap_process_<what>{pid="<PID>"}`.

use std::fmt::Write;

/// The first line of the statistics (`region::Region::stats_text`): their form and version.
pub use region::STATS_HEADER as HEADER;

/// One statistic's value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// A count, in the unit its name says (pages unless it ends in `_bytes`, `_ns`, ...).
    Count(u64),
    /// A ratio (`pages_per_fault`).
    Ratio(f64),
}

impl Value {
    /// The value as a float.
    pub fn as_f64(self) -> f64 {
        match self {
            Value::Count(n) => n as f64,
            Value::Ratio(x) => x,
        }
    }
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Count(n) => write!(f, "{n}"),
            Value::Ratio(x) => write!(f, "{x:.2}"),
        }
    }
}

/// Why a text is not the preload's statistics.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ParseError {
    /// The first line is not [`HEADER`].
    #[error("not uzswap's statistics: the first line is {0:?}, not {HEADER:?}")]
    Header(String),
    /// A line is not `name value`.
    #[error("line {0} of the statistics is {1:?}, not `name value`")]
    Line(usize, String),
}

/// The statistics at one moment, in the preload's order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Snapshot {
    /// Every statistic as (name, value).
    pub lines: Vec<(String, Value)>,
}

impl Snapshot {
    /// Read the preload's form: [`HEADER`], then `name value` lines.
    pub fn parse(text: &str) -> Result<Snapshot, ParseError> {
        let mut lines = text.lines();
        let first = lines.next().unwrap_or_default();
        if first != HEADER {
            return Err(ParseError::Header(first.into()));
        }
        let lines = lines
            .enumerate()
            .map(|(i, line)| {
                let bad = || ParseError::Line(i + 2, line.into());
                let (name, value) = line.split_once(' ').ok_or_else(bad)?;
                let value = match value.parse() {
                    Ok(n) => Value::Count(n),
                    Err(_) => Value::Ratio(value.parse().map_err(|_| bad())?),
                };
                Ok((name.to_string(), value))
            })
            .collect::<Result<_, _>>()?;
        Ok(Snapshot { lines })
    }

    /// A statistic's value, by name.
    pub fn get(&self, name: &str) -> Option<Value> {
        self.lines.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }

    /// The same without the per-folio-size lines of sizes never used (every
    /// `hugepages-<N>kB/stats/*` of that size 0).
    pub fn used_orders_only(&self) -> Snapshot {
        let size_of = |name: &str| -> Option<String> {
            let rest = name.strip_prefix("hugepages-")?;
            Some(rest.split_once('/')?.0.to_string())
        };
        let used: std::collections::BTreeSet<String> = self
            .lines
            .iter()
            .filter(|(_, v)| v.as_f64() != 0.0)
            .filter_map(|(name, _)| size_of(name))
            .collect();
        let lines = self
            .lines
            .iter()
            .filter(|(name, _)| size_of(name).is_none_or(|size| used.contains(&size)))
            .cloned()
            .collect();
        Snapshot { lines }
    }

    /// `name value` lines, like /proc/vmstat.
    pub fn text(&self) -> String {
        let mut s = String::new();
        for (name, value) in &self.lines {
            let _ = writeln!(s, "{name} {value}");
        }
        s
    }

    /// One JSON object, name to value.
    pub fn json(&self) -> serde_json::Value {
        let map = self.lines.iter().map(|(name, value)| {
            let v = match *value {
                Value::Count(n) => n.into(),
                Value::Ratio(x) => x.into(),
            };
            (name.clone(), v)
        });
        serde_json::Value::Object(map.collect())
    }

    /// The Prometheus text format (0.0.4): each family's `# HELP` and `# TYPE` lines, then its
    /// samples.
    pub fn prometheus(&self) -> String {
        let mut families: Vec<Family> = Vec::new();
        for (name, value) in &self.lines {
            let (family, sample) = describe(name, *value);
            match families.iter_mut().find(|f| f.name == family.name) {
                Some(f) => f.samples.push(sample),
                None => families.push(Family {
                    samples: vec![sample],
                    ..family
                }),
            }
        }
        let mut s = String::new();
        for f in families {
            let _ = writeln!(s, "# HELP {} {}", f.name, f.help);
            let _ = writeln!(s, "# TYPE {} {}", f.name, f.kind);
            for (labels, value) in f.samples {
                let _ = writeln!(s, "{}{labels} {value}", f.name);
            }
        }
        s
    }
}

/// A Prometheus metric family: its name, type, help and samples (labels, value).
struct Family {
    name: String,
    kind: &'static str,
    help: String,
    samples: Vec<(String, String)>,
}

/// The family a statistic belongs to, and its sample.
fn describe(name: &str, value: Value) -> (Family, (String, String)) {
    if let Some((pid, what)) = name
        .strip_prefix("tree/")
        .and_then(|rest| rest.split_once('/'))
    {
        let (what, labels) = match what.strip_prefix("comm.") {
            Some(comm) => ("comm", format!("{{pid=\"{pid}\",comm=\"{comm}\"}}")),
            None => (what, format!("{{pid=\"{pid}\"}}")),
        };
        let known = TREE_METRICS
            .iter()
            .find(|(n, ..)| n.split('.').next() == Some(what));
        let (mut family, (_, value)) = match known {
            Some(&(_, kind, unit, help)) => {
                family_of(&format!("process_{what}"), kind, unit, help, value)
            }
            None => untyped(&format!("process_{what}"), value),
        };
        family.help = format!("Per process of the tree: {}", family.help);
        return (family, (labels, value));
    }
    if let Some((size, what)) = name
        .strip_prefix("hugepages-")
        .and_then(|rest| rest.split_once("/stats/"))
    {
        let help = match what {
            "zswpout" => "Pages of folios of this size stored in the compressed pool",
            "swpout" => "Folios of this size written to the swap file",
            "swpin" => "Folios of this size brought back in one piece",
            _ => "A per-folio-size counter",
        };
        let family = Family {
            name: format!("uzswap_hugepages_{}_total", sanitize(what)),
            kind: "counter",
            help: format!("{help} (the kernel's hugepages-<size>/stats/{what})."),
            samples: Vec::new(),
        };
        return (family, (format!("{{size=\"{size}\"}}"), value.to_string()));
    }
    match METRICS.iter().find(|m| m.0 == name) {
        Some(&(_, kind, unit, help)) => family_of(name, kind, unit, help, value),
        None => untyped(name, value),
    }
}

/// The family of a statistic this uzswap does not describe.
fn untyped(name: &str, value: Value) -> (Family, (String, String)) {
    let family = Family {
        name: format!("uzswap_{}", sanitize(name)),
        kind: "untyped",
        help: format!("The statistic {name} (not described by this uzswap)."),
        samples: Vec::new(),
    };
    (family, (String::new(), value.to_string()))
}

/// The family of a described statistic, in base units, and its sample.
fn family_of(
    name: &str,
    kind: Kind,
    unit: Unit,
    help: &str,
    value: Value,
) -> (Family, (String, String)) {
    let (base, value) = match unit {
        Unit::None => (name.to_string(), value.to_string()),
        Unit::Bytes if name.ends_with("_bytes") => (name.to_string(), value.to_string()),
        Unit::Bytes => (format!("{name}_bytes"), value.to_string()),
        Unit::Nanoseconds => (
            format!("{}_seconds", name.trim_end_matches("_ns")),
            (value.as_f64() / 1e9).to_string(),
        ),
    };
    let (suffix, kind) = match kind {
        Kind::Counter => ("_total", "counter"),
        Kind::Gauge => ("", "gauge"),
    };
    let family = Family {
        name: format!("uzswap_{base}{suffix}"),
        kind,
        help: help.into(),
        samples: Vec::new(),
    };
    (family, (String::new(), value))
}

/// A name as Prometheus allows it: `[a-zA-Z0-9_]`, anything else as `_`.
fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| match c.is_ascii_alphanumeric() {
            true => c,
            false => '_',
        })
        .collect()
}

#[derive(Clone, Copy)]
enum Kind {
    /// Only goes up.
    Counter,
    /// A level now.
    Gauge,
}

#[derive(Clone, Copy)]
enum Unit {
    /// Pages, events, a ratio.
    None,
    Bytes,
    /// Printed in seconds for Prometheus.
    Nanoseconds,
}

use Kind::{Counter, Gauge};

/// Every statistic the preload prints, but the per-folio-size ones: its name, kind, unit and
/// what it counts (counts are pages unless said otherwise).
#[rustfmt::skip]
const METRICS: &[(&str, Kind, Unit, &str)] = &[
    // The engine: vmstat.
    ("zswpin", Counter, Unit::None, "Pages loaded from the compressed pool (vmstat zswpin)."),
    ("zswpout", Counter, Unit::None, "Pages stored in the compressed pool (vmstat zswpout)."),
    ("zswpwb", Counter, Unit::None, "Pages written back from the pool to the swap file (vmstat zswpwb)."),
    ("pswpin", Counter, Unit::None, "Pages read from the swap file (vmstat pswpin)."),
    ("pswpout", Counter, Unit::None, "Pages written to the swap file, writeback and writethrough included (vmstat pswpout)."),
    ("swpin_zero", Counter, Unit::None, "Zero pages brought back without storage (vmstat swpin_zero)."),
    ("swpout_zero", Counter, Unit::None, "Zero pages recorded without storage (vmstat swpout_zero)."),
    // The engine: debugfs.
    ("pool_limit_hit", Counter, Unit::None, "Stores refused because the pool was at max_pool_percent (debugfs)."),
    ("reject_reclaim_fail", Counter, Unit::None, "Stores refused because reclaim could not make room, and failed writebacks (debugfs)."),
    ("reject_alloc_fail", Counter, Unit::None, "Stores refused because the pool could not allocate (debugfs)."),
    ("reject_compress_fail", Counter, Unit::None, "Stores refused because the compressor failed (debugfs)."),
    ("reject_compress_poor", Counter, Unit::None, "Incompressible pages refused because writeback is off (debugfs)."),
    ("decompress_fail", Counter, Unit::None, "Stored pages that could not be decompressed into one page (debugfs)."),
    ("written_back_pages", Counter, Unit::None, "Pages written back by the shrinker (debugfs)."),
    ("stored_pages", Gauge, Unit::None, "Pages held in the pool, raw ones included (debugfs)."),
    ("stored_incompressible_pages", Gauge, Unit::None, "Pages held raw in the pool because they did not compress (debugfs)."),
    ("pool_total_size", Gauge, Unit::Bytes, "Bytes of the compressed pool's pages (debugfs pool_total_size)."),
    // The engine: uzswap's own.
    ("same_filled_pages", Gauge, Unit::None, "Same-filled pages recorded as a value, without storage."),
    ("writethrough_pages", Counter, Unit::None, "Pages also written to the swap file at store time."),
    ("writethrough_evictions", Counter, Unit::None, "Pool entries dropped without a write because a writethrough copy existed."),
    ("swap_write_fail", Counter, Unit::None, "Swap file writes that failed."),
    ("swap_read_fail", Counter, Unit::None, "Swap file reads that failed."),
    ("writeback_busy_stop", Counter, Unit::None, "Shrinker passes that stopped at a folio someone held."),
    ("folio_splits", Counter, Unit::None, "Large folios split into single pages."),
    ("folios_compressed_in_parts", Counter, Unit::None, "Large folios whose pages more than one thread compressed."),
    ("swap_slots_used", Gauge, Unit::None, "Page slots of the swap file in use."),
    ("swap_written_bytes", Counter, Unit::Bytes, "Bytes written to the swap device (segments: padding and compaction included; pages: a page each)."),
    ("swap_read_bytes", Counter, Unit::Bytes, "Bytes read from the swap device."),
    ("swap_segments_written", Counter, Unit::None, "Segments written to the swap device, compaction's included."),
    ("swap_segment_compactions", Counter, Unit::None, "Segments compacted: their live objects rewritten, the segment deleted."),
    ("swap_segment_compacted_pages", Counter, Unit::None, "Pages moved by segment compaction."),
    ("swap_auth_fail", Counter, Unit::None, "Pages whose sealed object on the swap device failed authentication (poisoned)."),
    ("swap_segments", Gauge, Unit::None, "Segments held on the swap device."),
    ("swap_segment_bytes", Gauge, Unit::Bytes, "Bytes of the segments held on the swap device."),
    ("swap_segment_live_bytes", Gauge, Unit::Bytes, "Bytes of those segments still in use (the rest waits for compaction)."),
    ("swap_device_memory_bytes", Gauge, Unit::Bytes, "Bytes of memory the swap device's client holds (a Redis Cluster's connections, and its copies of pipelines under way), charged to the limit as metadata."),
    // The region: faults.
    ("faults", Counter, Unit::None, "Faults served on a folio."),
    ("faults_staged", Counter, Unit::None, "Faults served from a folio still staged (on the inactive list), without decompression."),
    ("staged_activate", Counter, Unit::None, "Folios a fault took back from staging, activated: used while reclaim had them."),
    ("faults_folio", Counter, Unit::None, "Faults served from the engine, a whole folio in one install."),
    ("faults_pages", Counter, Unit::None, "Faults served page by page."),
    ("faults_page_alone", Counter, Unit::None, "Faults that brought the faulted page alone (the swap-in window): of a folio the engine held whole, or of one partly in."),
    ("page_alone_hits", Counter, Unit::None, "Faults on another page of a folio brought in a page at a time, while it was partly in: faults the whole folio would have saved."),
    ("page_alone_misses", Counter, Unit::None, "Folios brought in a page alone and reclaimed with that page alone in."),
    ("faults_first_touch", Counter, Unit::None, "Faults on memory never stored, zero-filled."),
    ("redundant", Counter, Unit::None, "Faults whose page was already present."),
    ("pages_in", Counter, Unit::None, "Pages brought into the heap by faults."),
    ("poisoned", Counter, Unit::None, "Pages that could not be read back, poisoned (SIGBUS on access)."),
    // The region: reclaim.
    ("folios_evicted", Counter, Unit::None, "Folios reclaim stored (or, clean, dropped) and freed."),
    ("pgdeactivate", Counter, Unit::None, "Folios reclaim moved out of the heap onto its inactive list, uncompressed (--inactive-list)."),
    ("batch_evictions", Counter, Unit::None, "Evictions of several neighbouring folios with one move."),
    ("evict_failed", Counter, Unit::None, "Evictions given up, the folio kept resident."),
    ("unevictable_pgs_culled", Counter, Unit::None, "Resident pages of folios reclaim took off its queue: the program gave a page of them another protection than read-write."),
    ("unevictable_pgs_rescued", Counter, Unit::None, "Resident pages of folios queued for reclaim again once all their pages were read-write."),
    ("direct_reclaim", Counter, Unit::None, "Reclaim passes a fault ran itself to stay under the limit."),
    // The region: the limit past reclaim (memory.events).
    ("high", Counter, Unit::None, "Faults that found the heap over --memory-high with nothing left to reclaim (memory.events high)."),
    ("max", Counter, Unit::None, "Of those, faults past --memory-max (memory.events max)."),
    ("oom", Counter, Unit::None, "Times --memory-max was reached with --on-limit kill (memory.events oom)."),
    ("oom_kill", Counter, Unit::None, "Processes killed for it (memory.events oom_kill)."),
    ("throttled_ns", Counter, Unit::Nanoseconds, "Time faults were made to sleep over --memory-high (memory.high's throttling)."),
    ("peak_charged_bytes", Gauge, Unit::Bytes, "The most the heap was seen to hold against the limit (sampled by each fault)."),
    ("fault_wait_ns", Counter, Unit::Nanoseconds, "Fault service time, all faults together."),
    ("staged_dropped", Counter, Unit::None, "Staged folios that reached the end of the inactive list unused: stored then, their staging memory freed."),
    ("discarded_pages", Counter, Unit::None, "Pages the program discarded (MADV_DONTNEED, MADV_FREE, munmap)."),
    ("remaps", Counter, Unit::None, "Moves of the whole region (mremap)."),
    ("clean_installs", Counter, Unit::None, "Folios read from the swap file installed write-protected, keeping their copy."),
    ("wp_faults", Counter, Unit::None, "Writes that met a write-protected clean folio: its swap file copy dropped."),
    ("clean_evictions", Counter, Unit::None, "Folios reclaimed while still clean: no store, no write."),
    ("written_checks", Counter, Unit::None, "Folios reclaim found at the LRU's head and asked whether they were written since it last asked (`--referenced-writes`), answered from the written bits."),
    ("written_activated", Counter, Unit::None, "Of those, folios found written: activated, kept resident."),
    ("written_scans", Counter, Unit::None, "Reads of a 2 MiB chunk of the region's written bits from the page tables (and their re-arming), which the answers above come from."),
    ("readahead_folios", Counter, Unit::None, "Folios brought in by readahead, ahead of any fault."),
    ("dropped_behind", Counter, Unit::None, "Folios reclaimed because a sequential scan had passed them."),
    ("fault_around", Counter, Unit::None, "Untouched folios mapped after a first touch next to them."),
    ("incompressible_skipped", Counter, Unit::None, "Folios reclaim passed over because they did not compress."),
    ("incompressible_kept", Counter, Unit::None, "Incompressible folios kept resident because such data kept coming back."),
    ("incompressible_refaults", Counter, Unit::None, "Faults that brought back a folio stored as-is."),
    ("lost_track", Counter, Unit::None, "Faults on pages marked resident that were not mapped (recovered)."),
    ("discards_not_zapped", Counter, Unit::None, "Pages still mapped when their discard was processed."),
    ("late_zaps", Counter, Unit::None, "Pages the kernel unmapped after their discard was processed."),
    ("stray_staged_pages", Counter, Unit::None, "Pages found in a staging slot that should have been empty."),
    ("fork_unshared", Counter, Unit::None, "Pages of folios reclaim found shared with a forked child, made the heap's own again so reclaim could move them out."),
    ("adopted_pages", Counter, Unit::None, "Pages the heap had before its registration with userfaultfd, counted as the heap's from then on (registered once the process's anonymous memory reaches half the limit, under a limit of 1G or more, 512M a CPU)."),
    ("busy_polled", Counter, Unit::None, "Waits for events a handler's poll ended, without its sleeping."),
    ("busy_poll_ns", Counter, Unit::Nanoseconds, "Time fault handlers spent polling for events between faults."),
    ("spare_events", Counter, Unit::None, "Events the spare handler served while every regular one waited on the disk."),
    ("folio_lock_waits", Counter, Unit::None, "Events that waited for a folio someone held."),
    ("spare_deferred", Counter, Unit::None, "Faults on a held folio the spare handler left to a regular one."),
    ("in_thread_faults", Counter, Unit::None, "Faults a program thread served itself, from its SIGBUS handler."),
    ("discards_waited", Counter, Unit::None, "Discards (madvise) of the program's that first waited for faults the discards before them held off."),
    ("discard_wait_ns", Counter, Unit::Nanoseconds, "Time those discards waited, at most 20 ms each."),
    ("workingset_refault", Counter, Unit::None, "Faults that brought a folio back from the pool or the swap file."),
    ("workingset_activate", Counter, Unit::None, "Refaulted folios activated: back within fewer evictions than the region holds resident."),
    ("refaults_near_resident", Counter, Unit::None, "Refaults a resident share larger by a step of the pool's share (10% of the limit) would have saved: by what the pool's share is sized."),
    ("refaults_near_pool", Counter, Unit::None, "Refaults from the swap file a pool larger by a step would have saved: written back within the pages a step holds."),
    ("fault_latency_p50_ns", Gauge, Unit::Nanoseconds, "Fault service time, median, since the start."),
    ("fault_latency_p99_ns", Gauge, Unit::Nanoseconds, "Fault service time, 99th percentile, since the start."),
    ("fault_latency_max_ns", Gauge, Unit::Nanoseconds, "Fault service time, the longest, since the start."),
    ("fault_latency_pool_p50_ns", Gauge, Unit::Nanoseconds, "Service time of faults served from the pool, median."),
    ("fault_latency_pool_p99_ns", Gauge, Unit::Nanoseconds, "Service time of faults served from the pool, 99th percentile."),
    ("fault_latency_device_p50_ns", Gauge, Unit::Nanoseconds, "Service time of faults that read the swap device (file or cluster), median."),
    ("fault_latency_device_p99_ns", Gauge, Unit::Nanoseconds, "Service time of faults that read the swap device, 99th percentile."),
    ("pages_per_fault", Gauge, Unit::None, "Pages a fault brought in, on average."),
    // Where the memory is.
    ("region_resident_bytes", Gauge, Unit::Bytes, "The heap's pages in memory."),
    ("region_staged_bytes", Gauge, Unit::Bytes, "Folios moved out of the heap onto the inactive list and not yet stored, uncompressed."),
    ("region_pool_bytes", Gauge, Unit::Bytes, "The compressed pool's pages, free ones kept for reuse included."),
    ("region_metadata_bytes", Gauge, Unit::Bytes, "uzswap's bookkeeping charged to the limit."),
    ("region_charged_bytes", Gauge, Unit::Bytes, "All the above: what the memory limit holds."),
    ("memory_limit_bytes", Gauge, Unit::Bytes, "The memory limit (--memory-high)."),
    ("memory_max_bytes", Gauge, Unit::Bytes, "The hard limit (--memory-max), 0 for none."),
    ("region_limit_bytes", Gauge, Unit::Bytes, "This process's share of --memory-high: the limit less what the tree's other processes hold."),
    ("region_registered", Gauge, Unit::None, "1 once the heap is registered with userfaultfd and counts its own pages; 0 before (under a limit of 1G or more, 512M a CPU, until the process's anonymous memory reaches half the limit: region_resident_bytes is then that anonymous memory)."),
    ("pool_share_percent", Gauge, Unit::None, "The most of the limit the pool may take now, in percent: --max-pool-percent, or the share under it found by what the pool costs the program."),
    ("swap_file_bytes", Gauge, Unit::Bytes, "Bytes of the swap file in use."),
    ("peak_rss_bytes", Gauge, Unit::Bytes, "The process's peak resident memory (VmHWM)."),
    ("rss_bytes", Gauge, Unit::Bytes, "The process's resident memory (VmRSS)."),
    ("outside_bytes", Gauge, Unit::Bytes, "Resident memory outside the heap's pages, staging and pool: the five outside_* below together."),
    ("outside_files_bytes", Gauge, Unit::Bytes, "Of outside_bytes: file-backed private mappings, the program's code and libraries and the files it maps."),
    ("outside_shared_bytes", Gauge, Unit::Bytes, "Of outside_bytes: shared mappings, anonymous (shared memory) or of files."),
    ("outside_stacks_bytes", Gauge, Unit::Bytes, "Of outside_bytes: the threads' stacks, uzswap's threads' included."),
    ("outside_uzswap_bytes", Gauge, Unit::Bytes, "Of outside_bytes: uzswap's own allocations (glibc's malloc in use)."),
    ("outside_anonymous_bytes", Gauge, Unit::Bytes, "Of outside_bytes: anonymous memory the program mapped past uzswap (a runtime's heap at addresses it chose, reservations too large for the heap, executable mappings)."),
    // The process tree (crates/preload/src/tree.rs), then `tree/PID/NAME` lines.
    ("tree_processes", Gauge, Unit::None, "Processes of the tree that have had a region, ended ones included."),
    ("tree_charged_bytes", Gauge, Unit::Bytes, "What the tree's running processes hold against --memory-high together."),
    ("tree_peak_charged_bytes", Gauge, Unit::Bytes, "The most the tree's running processes were seen to hold together (sampled every 50 ms)."),
];

/// The per-process lines `tree/PID/NAME`: NAME, kind, unit, what it is.
#[rustfmt::skip]
const TREE_METRICS: &[(&str, Kind, Unit, &str)] = &[
    ("comm.NAME", Gauge, Unit::None, "1, naming the process (/proc/PID/comm)."),
    ("parent", Gauge, Unit::None, "Its parent's PID."),
    ("running", Gauge, Unit::None, "1 while it runs, 0 once it has ended."),
    ("charged_bytes", Gauge, Unit::Bytes, "What it holds against the limit now (0 once ended)."),
    ("peak_charged_bytes", Gauge, Unit::Bytes, "The most it held."),
    ("resident_bytes", Gauge, Unit::Bytes, "Its heap's pages in memory."),
    ("pool_bytes", Gauge, Unit::Bytes, "Its compressed pool's pages."),
    ("zswpout", Counter, Unit::None, "Pages it stored in its pool."),
    ("zswpin", Counter, Unit::None, "Pages loaded from its pool."),
    ("pswpout", Counter, Unit::None, "Pages it wrote to its swap file."),
    ("pswpin", Counter, Unit::None, "Pages it read from its swap file."),
    ("faults", Counter, Unit::None, "Faults served on its heap."),
    ("fault_wait_ns", Counter, Unit::Nanoseconds, "Fault service time, all its faults together."),
    ("throttled_ns", Counter, Unit::Nanoseconds, "Time its faults slept over its share of the limit."),
    ("oom_kill", Counter, Unit::None, "1 if it was killed at --memory-max."),
];

/// Every statistic `uzswap run --stats=full` and `uzswap stat` print, one Markdown table:
/// docs/STATISTICS.md (a test keeps the file equal to this).
pub fn reference() -> String {
    let mut s = String::from(
        "# uzswap's statistics\n\n\
         What `uzswap run --stats=full` prints at exit and `uzswap stat PID` while the program \
         runs, in their order (generated from crates/cli/src/stat/format.rs; a test keeps \
         this file equal to it). Counts are pages unless the name says otherwise. The engine's \
         names are the kernel's zswap's (vmstat, debugfs, memory.events); the per-folio-size \
         counters `hugepages-<N>kB/stats/{zswpout,swpout,swpin}` follow, printed only for sizes \
         used. Prometheus names (`--prometheus`) are `uzswap_` and the name, in base units, \
         `_total` on counters.\n\n| name | kind | what it is |\n|---|---|---|\n",
    );
    let row = |s: &mut String, name: &str, kind: &Kind, help: &str| {
        let kind = match kind {
            Counter => "counter",
            Gauge => "gauge",
        };
        let _ = writeln!(s, "| `{name}` | {kind} | {help} |");
    };
    for (name, kind, _, help) in METRICS {
        row(&mut s, name, kind, help);
    }
    s.push_str(
        "\nThen, for every process of the tree that has had a region (the program and the \
         children it started that keep uzswap's environment, ended ones included), \
         `tree/PID/NAME` lines (Prometheus: `uzswap_process_NAME{pid=\"PID\"}`):\n\n\
         | NAME | kind | what it is |\n|---|---|---|\n",
    );
    for (name, kind, _, help) in TREE_METRICS {
        row(&mut s, name, kind, help);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docs_statistics_md_is_the_reference() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/STATISTICS.md");
        let on_disk = std::fs::read_to_string(path).unwrap_or_default();
        if on_disk != reference() {
            if std::env::var_os("UZSWAP_BLESS").is_some() {
                std::fs::write(path, reference()).unwrap();
                return;
            }
            panic!(
                "docs/STATISTICS.md is not what format.rs says: run this test with UZSWAP_BLESS=1"
            );
        }
    }

    #[test]
    fn unused_folio_sizes_are_left_out() {
        let s = Snapshot::parse(
            "uzswap-stats 1\nhugepages-4kB/stats/zswpout 0\nhugepages-4kB/stats/swpin 0\n\
             hugepages-16kB/stats/zswpout 7\nhugepages-16kB/stats/swpin 0\nzswpout 0\n",
        )
        .unwrap()
        .used_orders_only();
        assert_eq!(
            s.text(),
            "hugepages-16kB/stats/zswpout 7\nhugepages-16kB/stats/swpin 0\nzswpout 0\n"
        );
    }

    fn sample() -> Snapshot {
        Snapshot::parse(
            "uzswap-stats 1\nzswpout 12\nstored_pages 3\npool_total_size 8192\n\
             hugepages-4kB/stats/zswpout 5\nhugepages-4kB/stats/swpin 0\n\
             hugepages-16kB/stats/zswpout 7\nfault_latency_p99_ns 25000\n\
             pages_per_fault 2.50\nmemory_limit_bytes 1048576\nnew_thing 1\n",
        )
        .unwrap()
    }

    #[test]
    fn the_preload_form_parses_and_prints_back_as_text_and_json() {
        let s = sample();
        assert_eq!(s.get("zswpout"), Some(Value::Count(12)));
        assert_eq!(s.get("pages_per_fault"), Some(Value::Ratio(2.5)));
        assert!(s.text().starts_with("zswpout 12\nstored_pages 3\n"));
        assert!(s.text().contains("\npages_per_fault 2.50\n"));
        let json = s.json();
        assert_eq!(json["hugepages-16kB/stats/zswpout"], 7);
        assert_eq!(json["pages_per_fault"], 2.5);
        assert_eq!(
            Snapshot::parse("zswpout 1\n"),
            Err(ParseError::Header("zswpout 1".into()))
        );
        assert_eq!(
            Snapshot::parse("uzswap-stats 1\nzswpout\n"),
            Err(ParseError::Line(2, "zswpout".into()))
        );
    }

    #[test]
    fn prometheus_has_one_family_per_name_in_base_units() {
        let p = sample().prometheus();
        for line in [
            "# TYPE uzswap_zswpout_total counter",
            "uzswap_zswpout_total 12",
            "# TYPE uzswap_stored_pages gauge",
            "# TYPE uzswap_pool_total_size_bytes gauge",
            "uzswap_pool_total_size_bytes 8192",
            "uzswap_fault_latency_p99_seconds 0.000025",
            "# TYPE uzswap_memory_limit_bytes gauge",
            "# TYPE uzswap_new_thing untyped",
        ] {
            assert!(p.lines().any(|l| l == line), "{line:?} missing from\n{p}");
        }
        // The per-folio-size counters: one family each, its samples together after its TYPE.
        let zswpout: Vec<&str> = p
            .lines()
            .skip_while(|l| *l != "# TYPE uzswap_hugepages_zswpout_total counter")
            .skip(1)
            .take(2)
            .collect();
        assert_eq!(
            zswpout,
            [
                "uzswap_hugepages_zswpout_total{size=\"4kB\"} 5",
                "uzswap_hugepages_zswpout_total{size=\"16kB\"} 7"
            ]
        );
        let types = p.lines().filter(|l| l.starts_with("# TYPE ")).count();
        let helps = p.lines().filter(|l| l.starts_with("# HELP ")).count();
        assert_eq!((types, helps), (9, 9), "{p}");
    }
}
