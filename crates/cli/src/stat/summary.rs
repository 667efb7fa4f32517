//! The short summary `uzswap run --stats` prints when the program exits: the limits, the
//! most held, the peak resident memory and what of it was outside the limit, what was
//! compressed and at what ratio, what went to the swap file, how long the program waited on
//! faults and throttling, and the limit's events. `--stats=full` prints every counter instead
//! (docs/STATISTICS.md says what each is).

use super::{Snapshot, Value};

/// The summary of `s`, a few `uzswap: ...` lines.
pub fn summary(s: &Snapshot) -> String {
    let n = |name: &str| match s.get(name) {
        Some(Value::Count(v)) => v,
        Some(Value::Ratio(x)) => x as u64,
        None => 0,
    };
    let mib = crate::report::mib;
    let mut lines = Vec::new();
    let max = match n("memory_max_bytes") {
        0 => String::new(),
        m => format!(", --memory-max {}", mib(m)),
    };
    // A heap far from its limit is never registered: the kernel's alone (registration.rs).
    let kernels = match s.get("region_registered") {
        Some(Value::Count(0)) => {
            " (the program's anonymous memory: far from the limit, the heap was left to the \
             kernel)"
        }
        _ => "",
    };
    lines.push(format!(
        "limit: --memory-high {}{max}; the heap held at most {}{kernels}",
        mib(n("memory_limit_bytes")),
        mib(n("peak_charged_bytes"))
    ));
    lines.push(format!(
        "peak RSS {}; outside the limit at exit {}: code and files {}, shared {}, stacks {}, \
         uzswap's own {}, anonymous memory mapped past uzswap {}",
        mib(n("peak_rss_bytes")),
        mib(n("outside_bytes")),
        mib(n("outside_files_bytes")),
        mib(n("outside_shared_bytes")),
        mib(n("outside_stacks_bytes")),
        mib(n("outside_uzswap_bytes")),
        mib(n("outside_anonymous_bytes")),
    ));
    let (stored, pool) = (n("stored_pages"), n("pool_total_size"));
    // Below 1 the pool is mostly free pages it keeps for reuse (a stored page takes at most a
    // page): no ratio to give.
    let ratio = (stored * zswap::PAGE_SIZE as u64) as f64 / pool.max(1) as f64;
    let ratio = match ratio >= 1.0 {
        true => format!("{ratio:.2}"),
        false => "-".to_string(),
    };
    // What a written-back page cost on the device: segments hold pages compressed.
    let per_page = match (n("swap_written_bytes"), n("pswpout")) {
        (_, 0) => String::new(),
        (bytes, pages) => format!(
            ", {} bytes a page{}",
            bytes / pages,
            if n("swap_segments_written") > 0 {
                " in segments"
            } else {
                ""
            }
        ),
    };
    lines.push(format!(
        "compressed {} pages (zswpout), {} brought back (zswpin); at exit the pool held {} \
         pages in {} (ratio {ratio}); written below the pool {} pages (pswpout{per_page}), \
         read {} (pswpin)",
        n("zswpout"),
        n("zswpin"),
        stored,
        mib(pool),
        n("pswpout"),
        n("pswpin")
    ));
    let secs = |ns: u64| ns as f64 / 1e9;
    lines.push(format!(
        "the program waited {:.2} s on {} faults (median {} us, p99 {} us) and {:.2} s \
         throttled over the limit",
        secs(n("fault_wait_ns")),
        n("faults"),
        n("fault_latency_p50_ns") / 1000,
        n("fault_latency_p99_ns") / 1000,
        secs(n("throttled_ns"))
    ));
    lines.push(format!(
        "events: high {}, max {}, oom {}, oom_kill {}; pages lost to read errors (poisoned) {}; \
         swap file write failures {}",
        n("high"),
        n("max"),
        n("oom"),
        n("oom_kill"),
        n("poisoned"),
        n("swap_write_fail")
    ));
    lines.extend(tree(s));
    lines.push("--stats=full prints every counter".into());
    lines.iter().map(|l| format!("uzswap: {l}\n")).collect()
}

/// Processes of the tree beyond which the summary gives a count only.
const TREE_ROWS: usize = 16;

/// The tree's lines, when the program started others that had regions: one per process,
/// the first `TREE_ROWS`.
fn tree(s: &Snapshot) -> Vec<String> {
    let mut rows: Vec<(String, Vec<(String, u64)>)> = Vec::new();
    for (name, value) in &s.lines {
        let Some((pid, what)) = name
            .strip_prefix("tree/")
            .and_then(|rest| rest.split_once('/'))
        else {
            continue;
        };
        if rows.last().is_none_or(|(p, _)| p != pid) {
            rows.push((pid.to_string(), Vec::new()));
        }
        let v = match value {
            Value::Count(n) => *n,
            Value::Ratio(x) => *x as u64,
        };
        rows.last_mut().unwrap().1.push((what.to_string(), v));
    }
    if rows.len() < 2 {
        return Vec::new();
    }
    let get = |values: &[(String, u64)], n: &str| {
        values.iter().find(|(w, _)| w == n).map_or(0, |(_, v)| *v)
    };
    let lines_before = rows.len();
    // The processes that held a MiB or more, the largest first.
    rows.retain(|(_, v)| get(v, "peak_charged_bytes") >= 1 << 20 || get(v, "zswpout") > 0);
    rows.sort_by_key(|(_, v)| std::cmp::Reverse(get(v, "peak_charged_bytes")));
    let mut lines = vec![format!(
        "the tree: {lines_before} processes had a region, held under the limit together \
         (at most {} at once); {} held a MiB or more:",
        crate::report::mib(
            s.get("tree_peak_charged_bytes")
                .map_or(0, |v| v.as_f64() as u64)
        ),
        rows.len()
    )];
    for (pid, values) in rows.iter().take(TREE_ROWS) {
        let get = |n: &str| get(values, n);
        let comm = values
            .iter()
            .find_map(|(w, _)| w.strip_prefix("comm."))
            .unwrap_or("?");
        lines.push(format!(
            "  {comm} ({pid}{}): held at most {}, compressed {} pages, {} faults ({:.2} s), \
             throttled {:.2} s{}",
            if get("running") == 1 { ", running" } else { "" },
            crate::report::mib(get("peak_charged_bytes")),
            get("zswpout"),
            get("faults"),
            get("fault_wait_ns") as f64 / 1e9,
            get("throttled_ns") as f64 / 1e9,
            if get("oom_kill") > 0 {
                ", killed at --memory-max"
            } else {
                ""
            },
        ));
    }
    if rows.len() > TREE_ROWS {
        lines.push(format!("  and {} more", rows.len() - TREE_ROWS));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_says_the_limit_the_peaks_the_ratio_and_the_waits() {
        let s = Snapshot::parse(
            "uzswap-stats 1\nzswpout 1000\nzswpin 10\nstored_pages 800\n\
             pool_total_size 1048576\npswpout 5\npswpin 2\nfaults 50\nfault_wait_ns 1500000000\n\
             fault_latency_p50_ns 21000\nfault_latency_p99_ns 400000\nthrottled_ns 0\n\
             high 3\nmax 0\noom 0\noom_kill 0\npoisoned 0\nswap_write_fail 0\n\
             memory_limit_bytes 41943040\nmemory_max_bytes 50331648\n\
             peak_charged_bytes 41000000\npeak_rss_bytes 60000000\noutside_bytes 9000000\n",
        )
        .unwrap();
        let text = summary(&s);
        assert!(text.lines().all(|l| l.starts_with("uzswap: ")), "{text}");
        for part in [
            "--memory-high 40 MiB, --memory-max 48 MiB; the heap held at most 39.1 MiB",
            "peak RSS 57.2 MiB",
            "800 pages in 1 MiB (ratio 3.12)",
            "waited 1.50 s on 50 faults (median 21 us, p99 400 us)",
            "events: high 3, max 0",
        ] {
            assert!(text.contains(part), "{part:?} not in\n{text}");
        }
        assert!(text.lines().count() <= 6, "{text}");
    }

    #[test]
    fn a_heap_never_registered_is_said_to_be_the_kernels() {
        let stats = |registered: u8| {
            let text = format!(
                "uzswap-stats 1\nmemory_limit_bytes 4294967296\npeak_charged_bytes 104857600\n\
                 region_registered {registered}\n"
            );
            summary(&Snapshot::parse(&text).unwrap())
        };
        let first = |t: String| t.lines().next().unwrap().to_string();
        assert!(first(stats(0)).ends_with("100 MiB (the program's anonymous memory: far from the limit, the heap was left to the kernel)"), "{}", stats(0));
        assert!(
            first(stats(1)).ends_with("the heap held at most 100 MiB"),
            "{}",
            stats(1)
        );
    }

    #[test]
    fn a_tree_of_processes_gets_a_line_each() {
        let s = Snapshot::parse(
            "uzswap-stats 1\ntree_processes 2\ntree/10/comm.git 1\ntree/10/running 1\n\
             tree/10/peak_charged_bytes 1048576\ntree/10/zswpout 3\ntree/11/comm.pack-objects 1\n\
             tree/11/running 0\ntree/11/peak_charged_bytes 41943040\ntree/11/zswpout 900\n\
             tree/11/faults 12\ntree/11/oom_kill 0\n",
        )
        .unwrap();
        let text = summary(&s);
        assert!(text.contains("the tree: 2 processes"), "{text}");
        assert!(
            text.find("pack-objects").unwrap() < text.find("git (10").unwrap(),
            "{text}"
        );
        assert!(
            text.contains("git (10, running): held at most 1 MiB, compressed 3 pages"),
            "{text}"
        );
        assert!(
            text.contains(
                "pack-objects (11): held at most 40 MiB, compressed 900 pages, 12 faults"
            ),
            "{text}"
        );
    }
}
