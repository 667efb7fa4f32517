//! `uzswap bench usemem | mix | sweep`: run the listed systems alternately, several times, and
//! print medians side by side with ratios (or one JSON object). Alternating in one command is
//! the only fair comparison on a shared machine whose run-to-run spread is 10-40%. And the
//! hidden workers those commands start (`bench worker`, `bench uzswap-worker`).

use std::collections::BTreeMap;
use std::io::Write;

use anyhow::{bail, Result};
use serde_json::json;
use zswap::PAGE_SIZE;

use super::figures::{median, median_figures};
use super::java_heap::JavaHeap;
use super::machine_check::{check_run, folio_hint};
use super::plot;
use super::progress::Progress;
use super::runner::{alternate, spec, systems, Runner};
use super::summary::{self, Column};
use super::systems::System;
use super::titles::{print_summary, runs_text, uzswap_limit_note, workers_text};
use super::workload::{Workload, WorkloadSpec};
use super::workload_args::{
    CommonArgs, Locality, MixArgs, SweepArgs, UsememArgs, UzswapWorkerArgs, WorkerArgs,
};
use crate::report;
use crate::size::fmt_size;

/// Run `uzswap bench usemem`: the systems alternately, medians side by side.
pub fn usemem(a: &UsememArgs) -> Result<()> {
    if a.size < PAGE_SIZE as u64 {
        bail!(
            "--size {} is below one page: give at least 4K",
            fmt_size(a.size)
        );
    }
    let systems = systems(&a.common, &["uzswap"])?;
    let spec = spec(
        &a.common,
        Workload::Usemem {
            workers: a.workers,
            size: a.size,
        },
    );
    let per = format!("{} x {} MiB", workers_text(a.workers), a.size >> 20);
    let title = format!(
        "usemem: {per} under {} MiB{}, {}",
        a.common.memory_high >> 20,
        uzswap_limit_note(&a.common, &systems),
        runs_text(a.common.runs, systems.len())
    );
    let verified = format!("every byte of {per} read back correctly");
    let area = format!("--size {} x {}", fmt_size(a.size), workers_text(a.workers));
    side_by_side("usemem", title, verified, &a.common, &systems, spec, &area)
}

/// Run `uzswap bench mix`: the systems alternately, medians side by side.
pub fn mix(a: &MixArgs) -> Result<()> {
    if a.size < 3 * PAGE_SIZE as u64 {
        bail!(
            "--size {} is below three pages: give at least 12K",
            fmt_size(a.size)
        );
    }
    let systems = systems(&a.common, &["uzswap"])?;
    let spec = spec(
        &a.common,
        Workload::Mix {
            size: a.size,
            seconds: a.seconds,
        },
    );
    let title = format!(
        "mix: {} MiB in three areas under {} MiB{}, {} s of random accesses, {}",
        a.size >> 20,
        a.common.memory_high >> 20,
        uzswap_limit_note(&a.common, &systems),
        a.seconds,
        runs_text(a.common.runs, systems.len())
    );
    let verified = format!(
        "every byte of the three areas ({} MiB) correct after the accesses",
        spec.area_bytes() >> 20
    );
    let area = format!("--size {}", fmt_size(a.size));
    side_by_side("mix", title, verified, &a.common, &systems, spec, &area)
}

/// Run `systems` on `spec` alternately and print their medians side by side (or one JSON
/// object): the body of `usemem` and `mix`.
fn side_by_side(
    command: &str,
    title: String,
    verified: String,
    c: &CommonArgs,
    systems: &[System],
    spec: WorkloadSpec,
    area: &str,
) -> Result<()> {
    check_run(c, systems, std::slice::from_ref(&spec), area)?;
    let hint = folio_hint(c, systems, &spec);
    let mut runner = Runner::new(c, systems, spec.area_bytes())?;
    let progress = Progress::new((systems.len() * c.runs) as u64, "runs", !c.json);
    let (results, failed) = alternate(&mut runner, systems, &spec, c.runs, &progress, "")?;
    drop(progress);
    let settings = runner.settings();
    drop(runner); // restore the machine before printing
    let cols: Vec<Column> = systems
        .iter()
        .zip(&results)
        .zip(&failed)
        .map(|((system, runs), f)| Column {
            system,
            runs,
            failed: f.len(),
            figures: median_figures(runs),
        })
        .collect();
    let sum = summary::side_by_side(&cols, c.runs, &verified, hint);
    if c.json {
        let sys: Vec<_> = cols
            .iter()
            .zip(&failed)
            .map(|(col, f)| {
                json!({
                    "system": col.system.to_string(),
                    "config": col.system,
                    "median": summary::figure_map(&col.figures),
                    "runs": col.runs,
                    "failed_runs": f,
                })
            })
            .collect();
        let out = json!({
            "command": command,
            "spec": spec,
            "uzswap_memory_high": c.uzswap_memory_high,
            "uzswap_memory": settings.get("uzswap_memory_high"),
            "runs": c.runs,
            "settings": settings,
            "systems": sys,
            "notes": sum.notes,
            "verdict": sum.verdict,
        });
        writeln!(report::stdout(), "{out}")?;
    } else {
        print_summary(&title, &settings, &sum)?;
    }
    Ok(())
}

/// Heap sizes of the sweep: 75% to 175% of the limit in 12.5% steps.
pub fn sweep_sizes(limit: u64) -> Vec<(f64, u64)> {
    let percents: Vec<f64> = (0..9).map(|i| 75.0 + 12.5 * i as f64).collect();
    sizes_at(limit, &percents)
}

/// Heaps of `percents` of `limit`, in whole pages.
fn sizes_at(limit: u64, percents: &[f64]) -> Vec<(f64, u64)> {
    let page = PAGE_SIZE as u64;
    percents
        .iter()
        .map(|&pct| (pct, (limit as f64 * pct / 100.0) as u64 / page * page))
        .collect()
}

/// Run `uzswap bench sweep`: each system on heaps of 75% to 175% of the limit.
pub fn sweep(a: &SweepArgs) -> Result<()> {
    let c = &a.common;
    if c.uzswap_memory_high.is_some() {
        bail!("--uzswap-memory-high is for usemem and mix: sweep sizes its heaps from one limit");
    }
    let systems = systems(
        c,
        &[
            "uzswap-nocompress",
            "uzswap",
            "uzswap-writethrough",
            "uzswap-adaptive",
        ],
    )?;
    let sizes = match a.heap_percent.is_empty() {
        true => sweep_sizes(c.memory_high),
        false => {
            let percents: Vec<f64> = a.heap_percent.iter().map(|&p| f64::from(p)).collect();
            sizes_at(c.memory_high, &percents)
        }
    };
    let cells_text = match a.heap_percent.is_empty() {
        true => "from 75% to 175%".to_string(),
        false => {
            let p: Vec<String> = a.heap_percent.iter().map(|p| format!("{p}%")).collect();
            p.join(", ")
        }
    };
    let heap = |size: u64| {
        let seconds = a.seconds;
        let workload = match a.locality {
            Locality::Uniform => Workload::Heap { size, seconds },
            Locality::Java => Workload::JavaHeap {
                size,
                seconds,
                model: JavaHeap {
                    young_percent: a.young_percent,
                    zipf_exponent: a.zipf_exponent,
                    alloc_per_mille: a.alloc_per_mille,
                    mark_seconds: a.mark_seconds,
                },
            },
        };
        spec(c, workload)
    };
    let specs: Vec<WorkloadSpec> = sizes.iter().map(|&(_, size)| heap(size)).collect();
    let largest = sizes.iter().map(|&(p, _)| p).fold(0.0, f64::max);
    let area = format!(
        "--memory-high {} (heaps up to {largest}% of it)",
        fmt_size(c.memory_high)
    );
    check_run(c, &systems, &specs, &area)?;
    let max_area = specs
        .iter()
        .map(WorkloadSpec::area_bytes)
        .max()
        .unwrap_or(0);
    let mut runner = Runner::new(c, &systems, max_area)?;
    let total = sizes.len() * systems.len() * c.runs;
    let progress = Progress::new(total as u64, "runs", !c.json);
    // cells[size][system] = median accesses/s and memory held, runs kept for JSON.
    let mut cells: Vec<Vec<summary::SweepCell>> = Vec::new();
    let mut all: Vec<serde_json::Value> = Vec::new();
    for ((pct, size), spec) in sizes.iter().zip(&specs) {
        let cell = format!("cell {pct}% ({} MiB heap), ", size >> 20);
        let (results, failed) = alternate(&mut runner, &systems, spec, c.runs, &progress, &cell)?;
        let row: Vec<summary::SweepCell> = results
            .iter()
            .map(|rs| summary::SweepCell {
                accesses_per_s: median(rs.iter().filter_map(|r| r.output.accesses_per_s).collect()),
                held_bytes: median(
                    rs.iter()
                        .filter_map(|r| r.max_memory_bytes.or(r.max_usage_bytes))
                        .map(|b| b as f64)
                        .collect(),
                ),
            })
            .collect();
        all.push(json!({
            "heap_percent": pct,
            "heap_bytes": size,
            "accesses_per_s": systems.iter().zip(&row)
                .map(|(s, v)| (s.to_string(), v.accesses_per_s)).collect::<BTreeMap<_, _>>(),
            "held_bytes": systems.iter().zip(&row)
                .map(|(s, v)| (s.to_string(), v.held_bytes)).collect::<BTreeMap<_, _>>(),
            "runs": systems.iter().zip(&results)
                .map(|(s, r)| (s.to_string(), r)).collect::<BTreeMap<_, _>>(),
            "failed_runs": systems.iter().zip(&failed)
                .map(|(s, f)| (s.to_string(), f)).collect::<BTreeMap<_, _>>(),
        }));
        cells.push(row);
    }
    drop(progress);
    let settings = runner.settings();
    drop(runner);
    let sum = summary::sweep(&systems, &sizes, &cells, c.runs);
    let best = summary::best_cell(&cells);
    let locality = match a.locality {
        Locality::Java => "a Java heap's accesses",
        Locality::Uniform => "random accesses",
    };
    if let Some(path) = &a.plot {
        let lines: Vec<plot::Line> = systems
            .iter()
            .enumerate()
            .map(|(i, s)| plot::Line {
                name: s.to_string(),
                points: sizes
                    .iter()
                    .zip(&cells)
                    .map(|(&(pct, _), row)| {
                        let v = row[i].accesses_per_s;
                        (pct, (best > 0.0 && v > 0.0).then(|| 100.0 * v / best))
                    })
                    .collect(),
            })
            .collect();
        let title = format!(
            "sweep, {locality}, limit {} MiB, {} s a cell, median of {}",
            c.memory_high >> 20,
            a.seconds,
            c.runs
        );
        plot::sweep_chart(path, &title, &lines)?;
    }
    if c.json {
        let out = json!({
            "command": "sweep",
            "locality": format!("{:?}", a.locality).to_lowercase(),
            "java_heap": (a.locality == Locality::Java).then(|| json!({
                "young_percent": a.young_percent,
                "zipf_exponent": a.zipf_exponent,
                "alloc_per_mille": a.alloc_per_mille,
                "mark_seconds": a.mark_seconds,
            })),
            "memory_high": c.memory_high,
            "seconds": a.seconds,
            "runs": c.runs,
            "settings": settings,
            "systems": systems.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            "best_accesses_per_s": best,
            "cells": all,
            "verdict": sum.verdict,
        });
        writeln!(report::stdout(), "{out}")?;
        return Ok(());
    }
    let title = format!(
        "sweep: heap {cells_text} of {} MiB, {} s of {locality} a cell, {}; each cell \
         its median accesses/s relative to the best cell ({best:.0} accesses/s), and the \
         median itself",
        c.memory_high >> 20,
        a.seconds,
        runs_text(c.runs, systems.len())
    );
    print_summary(&title, &settings, &sum)
}

/// Run `uzswap bench worker`: one workload on plain memory, for a kernel peer.
pub fn worker(a: &WorkerArgs) -> Result<()> {
    Ok(super::worker::run(&a.spec)?)
}

/// Run `uzswap bench uzswap-worker`: one workload on a uzswap region, in a process of its own.
pub fn uzswap_worker(a: &UzswapWorkerArgs) -> Result<()> {
    // The worker's RSS is the figure compared with the limit: uzswap's freed buffers must
    // not stay in it.
    uffd::process::return_large_blocks_when_freed();
    Ok(super::region_worker::uzswap_worker(&a.spec, &a.config)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_goes_from_75_to_175_percent() {
        let s = sweep_sizes(1 << 30);
        assert_eq!(s.len(), 9);
        assert_eq!(s[0].0, 75.0);
        assert_eq!(s[8].0, 175.0);
        assert_eq!(s[0].1, 3 << 28);
        assert_eq!(s[8].1 % PAGE_SIZE as u64, 0);
    }
}
