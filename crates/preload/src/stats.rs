//! The statistics of the program's region as the preload hands them out: at exit to
//! `uzswap run --stats` (a file, init.rs) and while the program runs to `uzswap stat PID`
//! (a socket, server.rs). One form for both: a header line `uzswap-stats 1`, then `name value`
//! lines. The `uzswap` command parses it and prints it as text, JSON or Prometheus
//! (crates/cli/src/stat/format.rs, which documents every name).
//!
//! The lines: the engine's kernel-named statistics (`zswpout`, `stored_pages`,
//! `hugepages-16kB/stats/zswpout`, ...), the region's (faults, fault latency in ns, ...), then
//! where the memory is, in bytes: the region's usage by kind and its charged total, the memory
//! limit, the swap file's slots in use, the process's peak and current resident memory, and
//! what of that lies outside the region's resident, staged and pool pages, split by kind
//! (not_held.rs).

#![cfg(not(test))]

use region::Region;

/// The statistics now, header first.
pub fn render(region: &Region) -> String {
    let (high, max) = crate::run::limits().unwrap_or((region.limit(), None));
    let usage = region.usage();
    let mut text = region.stats_text(&usage, high, max.unwrap_or(0));
    let mut lines = Vec::new();
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = |field: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|k| k * 1024)
    };
    if let (Some(peak), Some(rss)) = (kib("VmHWM:"), kib("VmRSS:")) {
        let heap = region.as_ptr() as usize..region.as_ptr() as usize + region.len();
        // Not registered yet, the region's resident part is the process's anonymous memory:
        // the heap's own is what its mappings hold.
        let resident = match region.registered() {
            true => usage.resident,
            false => crate::not_held::heap_resident(heap.clone()),
        };
        let inside = resident + usage.staged + usage.pool;
        let outside = rss.saturating_sub(inside);
        let not_held = crate::not_held::measure(heap, outside);
        lines.extend([
            ("peak_rss_bytes", peak),
            ("rss_bytes", rss),
            ("outside_bytes", outside),
            ("outside_files_bytes", not_held.files),
            ("outside_shared_bytes", not_held.shared),
            ("outside_stacks_bytes", not_held.stacks),
            ("outside_uzswap_bytes", not_held.uzswap),
            ("outside_anonymous_bytes", not_held.anonymous),
        ]);
    }
    for (name, value) in lines {
        text.push_str(&format!("{name} {value}\n"));
    }
    if let Some(tree) = crate::run::tree() {
        text.push_str(&tree.lines());
    }
    text
}
