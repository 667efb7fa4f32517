//! The checks of a workload benchmark's run against the options and the machine, before any
//! run starts: the limits, the area, the disk the swap files need; and the folio size hint.

use anyhow::{bail, Result};
use zswap::PAGE_SIZE;

use super::peer;
use super::region_worker::{data_room, min_limit, proc_kb, with_folio};
use super::runner::uzswap_spec;
use super::systems::{System, UzswapConfig};
use super::workload::WorkloadSpec;
use super::workload_args::CommonArgs;
use crate::size::{fmt_human, fmt_mib_up, fmt_size, fmt_unit};

/// The least memory limit of any run: below it a kernel peer's cgroup has no room to work.
const LEAST_LIMIT: u64 = 16 << 20;

/// The machine's memory (MemTotal), in bytes.
fn mem_total() -> u64 {
    proc_kb("/proc/meminfo", "MemTotal:")
}

/// Free bytes in the file system of `dir` (for an unprivileged user), if it can be read.
fn free_space(dir: &std::path::Path) -> Option<u64> {
    let st = rustix::fs::statvfs(dir).ok()?;
    Some(st.f_bavail.saturating_mul(st.f_frsize))
}

/// The configurations of the uzswap systems among `systems`.
fn uzswap_configs(systems: &[System]) -> Vec<&UzswapConfig> {
    systems
        .iter()
        .filter_map(|s| match s {
            System::Uzswap(cfg) => Some(cfg),
            _ => None,
        })
        .collect()
}

/// Check every option against the others and the machine, before any worker or kernel
/// peer starts (else the runs before a refusal would be done for nothing): the limits
/// against the least a run takes (the most the uzswap regions charge for themselves) and the
/// machine's memory, the area against what a region holds and the disk the swap files
/// need. `specs` are the workloads to run; `area` names the option that sized their area.
pub(super) fn check_run(
    c: &CommonArgs,
    systems: &[System],
    specs: &[WorkloadSpec],
    area: &str,
) -> Result<()> {
    let uzswap = uzswap_configs(systems);
    if c.uzswap_memory_high.is_some() && uzswap.is_empty() {
        bail!("--uzswap-memory-high needs a uzswap system to run");
    }
    let total = mem_total();
    for (option, limit) in [
        ("--memory-high", Some(c.memory_high)),
        ("--uzswap-memory-high", c.uzswap_memory_high),
    ] {
        if let Some(l) = limit.filter(|&l| total > 0 && l > total) {
            bail!(
                "{option} {} is above this machine's memory ({:.1} GiB, MemTotal in \
                 /proc/meminfo): give at most {}",
                fmt_size(l),
                total as f64 / (1u64 << 30) as f64,
                fmt_size(match total >> 30 {
                    0 => total >> 20 << 20,
                    g => g << 30,
                })
            );
        }
    }
    let largest = specs
        .iter()
        .max_by_key(|s| s.area_bytes())
        .expect("a workload to run");
    let largest_uzswap = uzswap_spec(c.uzswap_memory_high, largest);
    for cfg in &uzswap {
        if min_limit(&largest_uzswap, cfg).is_none() {
            bail!(
                "{area}: {} of memory to work on is above 16T, the most a uzswap region holds",
                fmt_size(largest.area_bytes() as u64)
            );
        }
    }
    // A page directory given with --corpus is read here, before any run, not in a worker.
    if let Some(spec) = specs.iter().find(|s| s.needs_content()) {
        crate::bench::workload::Content::load_or_builtin(spec.corpus.as_deref())?;
    }
    // The least limit: a floor for every run, and what the uzswap regions take for every
    // workload (under --uzswap-memory-high if given, else under --memory-high).
    let mut region_least = 0;
    for spec in specs {
        for cfg in &uzswap {
            let least = min_limit(&uzswap_spec(c.uzswap_memory_high, spec), cfg);
            region_least = region_least.max(least.unwrap_or(0));
        }
    }
    for (option, limit, uzswap_under_it) in [
        (
            "--memory-high",
            Some(c.memory_high),
            c.uzswap_memory_high.is_none(),
        ),
        ("--uzswap-memory-high", c.uzswap_memory_high, true),
    ] {
        let Some(limit) = limit else { continue };
        let region = if uzswap_under_it { region_least } else { 0 };
        if limit >= LEAST_LIMIT.max(region) {
            continue;
        }
        if region <= LEAST_LIMIT {
            bail!(
                "{option} {} is below {}, the least a run takes",
                fmt_size(limit),
                fmt_size(LEAST_LIMIT)
            );
        }
        let folio = largest.folio_size;
        let mut why = format!(
            "what a uzswap region of {} folios may charge for itself (its threads' folios and \
             buffers, staging) plus four folios",
            fmt_unit(folio as u64)
        );
        let smaller = uzswap
            .iter()
            .filter_map(|cfg| min_limit(&with_folio(&largest_uzswap, 64 << 10), cfg))
            .max()
            .unwrap_or(0)
            .max(LEAST_LIMIT);
        if folio > 64 << 10 && smaller < region {
            why.push_str(&format!(
                "; with --folio-size 64K it takes {}",
                fmt_mib_up(smaller)
            ));
        }
        bail!(
            "{option} {} is below {}, the least this run takes: {why}",
            fmt_size(limit),
            fmt_mib_up(region)
        );
    }
    // The swap files. uzswap's (unnamed, in the temporary directory) holds what neither
    // memory nor the pool does: at the most, the area less the limit.
    let area_bytes = largest.area_bytes() as u64;
    let tmp = std::env::temp_dir();
    let need = area_bytes.saturating_sub(c.uzswap_memory_high.unwrap_or(c.memory_high));
    if let Some(free) = free_space(&tmp).filter(|&f| !uzswap.is_empty() && need > f) {
        bail!(
            "{area}: uzswap's swap file may take up to {} in {}, which has {} free (TMPDIR \
             sets another directory)",
            fmt_human(need),
            tmp.display(),
            fmt_human(free)
        );
    }
    if systems.iter().any(System::is_kernel) {
        let need = peer::swap_bytes_for(largest.area_bytes());
        if let Some(free) = free_space(&c.swap_dir).filter(|&f| need > f) {
            bail!(
                "{area}: the kernel peers' swap file takes {} in {}, which has {} free \
                 (--swap-dir sets another directory)",
                fmt_human(need),
                c.swap_dir.display(),
                fmt_human(free)
            );
        }
    }
    Ok(())
}

/// The hint for a limit that the folio size leaves little room for data in: a quarter of
/// the limit or less, where smaller folios would leave more.
pub(super) fn folio_hint(
    c: &CommonArgs,
    systems: &[System],
    spec: &WorkloadSpec,
) -> Option<String> {
    let cfg = *uzswap_configs(systems).first()?;
    let spec = uzswap_spec(c.uzswap_memory_high, spec);
    let smaller = match spec.folio_size {
        f if f > 64 << 10 => 64 << 10,
        f if f > PAGE_SIZE => PAGE_SIZE,
        _ => return None,
    };
    let room = data_room(&spec, cfg)?;
    if room > spec.memory_high / 4 {
        return None;
    }
    let then = data_room(&with_folio(&spec, smaller), cfg)?;
    Some(format!(
        "hint: {} folios leave {} MiB of the {} MiB limit for data (the rest is what the \
         region may charge for itself); --folio-size {} leaves {} MiB",
        fmt_unit(spec.folio_size as u64),
        room >> 20,
        spec.memory_high >> 20,
        fmt_size(smaller as u64),
        then >> 20
    ))
}
