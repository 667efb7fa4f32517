//! The text of a workload benchmark's printout: its title's words for the runs, the workers and
//! uzswap's limit, and the printout itself (title, settings, table, notes, verdict).

use std::collections::BTreeMap;
use std::io::Write;

use anyhow::Result;

use super::summary::Summary;
use super::systems::System;
use super::workload_args::CommonArgs;
use crate::report;

/// Print a summary: the title and settings, the table, its notes, and the verdict last.
pub(super) fn print_summary(
    title: &str,
    settings: &BTreeMap<String, String>,
    sum: &Summary,
) -> Result<()> {
    let mut out = report::stdout();
    writeln!(out, "{title}")?;
    let s: Vec<String> = settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
    writeln!(out, "settings: {}", s.join(" "))?;
    for line in sum.table.iter().chain(&sum.notes) {
        writeln!(out, "{line}")?;
    }
    writeln!(out, "{}", sum.verdict)?;
    Ok(())
}

/// How a title says the runs: "3 runs alternating", "1 run".
pub(super) fn runs_text(runs: usize, systems: usize) -> String {
    match (runs, systems) {
        (1, 1) => "1 run".into(),
        (n, 1) => format!("{n} runs"),
        (1, _) => "1 run of each system".into(),
        (n, _) => format!("{n} runs of each system, alternating"),
    }
}

/// For a title: uzswap's own limit, if it has one, or what it runs under beside a kernel peer.
pub(super) fn uzswap_limit_note(c: &CommonArgs, systems: &[System]) -> String {
    let beside_kernel = systems.iter().any(System::is_kernel);
    match c.uzswap_memory_high {
        Some(l) => format!(" (uzswap under {:.1} MiB)", l as f64 / (1 << 20) as f64),
        None if beside_kernel && !c.same_limit => {
            " (uzswap under what the kernel held in the same round: equal memory)".into()
        }
        None => String::new(),
    }
}

/// "1 worker", "2 workers".
pub(super) fn workers_text(n: usize) -> String {
    match n {
        1 => "1 worker".into(),
        n => format!("{n} workers"),
    }
}
