//! `uzswap bench suite`: the suite's programs (suite_programs.rs), each at several pressures,
//! under the kernel's zswap and under uzswap with its limit at what the kernel held, uzswap with its defaults and
//! with a small grid of other settings, as `bench run` runs one program.
//!
//! For each program: one plain run under the kernel side with no limit to speak of gives its
//! peak (its cgroup's charge plus the zswap pool). For each pressure P, the kernel side runs
//! under peak / P, and every uzswap cell under what the kernel side held in that run. A row
//! is a program at a pressure; its figures are medians over `--runs`. Every run must exit
//! with status 0 and print what the plain run printed. Every run starts with the page cache
//! dropped, so what the kernel charges for the program's files does not depend on the runs
//! before it.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde_json::json;

use super::figures::median;
use super::peer::{self, KernelRun, PeerMachine, PeerOptions, Reclaim};
use super::plot::{self, Axes, Line};
use super::program::child::Exited;
use super::program::uzswap::{self, UzswapRun};
use super::program::{check_exit, check_peer, equal_memory, limit_hint};
use super::progress::Progress;
use super::suite_programs::{self, SuiteProgram};
use super::systems::System;
use super::workload_args::count_in;
use crate::run::RunArgs;
use crate::size::{fmt_size, parse_size};

/// The arguments of `uzswap bench suite`.
#[derive(Debug, Clone, clap::Args)]
pub struct SuiteArgs {
    /// The programs, comma-separated (default: all of python-objects, node-map, jvm-cache,
    /// sqlite3, redis-ycsb, sort, java-like-heap, c-mallocs, go-churn, gcc).
    #[arg(long, value_delimiter = ',')]
    pub programs: Vec<String>,
    /// How far over its limit each program runs: its plain peak over the kernel side's
    /// limit, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1.5,3", value_parser = pressure_arg)]
    pub pressures: Vec<f64>,
    /// Runs of each row, each the kernel side first; medians are reported.
    #[arg(long, default_value_t = 1, value_parser = |s: &str| count_in(s, 1, 100))]
    pub runs: usize,
    /// uzswap's settings beside its defaults: small (folio size 4K/16K/64K by fault service,
    /// a pool fixed at 20% and at 50% of the limit, whole-folio swap-in), or none (the
    /// defaults alone).
    #[arg(long, value_enum, default_value_t = Grid::Small)]
    pub grid: Grid,
    /// Where the kernel side's swap file goes.
    #[arg(long, default_value = "/var/tmp")]
    pub swap_dir: PathBuf,
    /// The kernel side's swap file.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "4G")]
    pub swap_size: u64,
    /// Draw each row's speeds, in percent of the row's best, into this PNG file.
    #[arg(long, value_name = "FILE.png")]
    pub plot: Option<PathBuf>,
    /// Print the programs' stdout and stderr of every run (on stderr).
    #[arg(long)]
    pub show_output: bool,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// `--grid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Grid {
    /// Folio sizes 4K, 16K and 64K, each with handler threads and in-thread faults, and the
    /// defaults with a pool fixed at 20% and at 50% of the limit, and with whole-folio
    /// swap-in.
    Small,
    /// uzswap's defaults alone.
    None,
}

/// `--pressures`' values: more than 1 (a program under its own peak).
fn pressure_arg(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(p) if p > 1.0 && p <= 100.0 => Ok(p),
        _ => Err(format!(
            "'{text}' is not a pressure: give the plain peak over the limit, above 1 and at \
             most 100 (1.5 for a limit of two thirds of the peak)"
        )),
    }
}

/// The limit of a plain run: none a suite program comes near.
const PLAIN_LIMIT: u64 = 64 << 30;

/// One uzswap setting: a change from `uzswap run`'s defaults.
#[derive(Debug, Clone, PartialEq)]
struct Cell {
    name: String,
    folio_size: Option<u64>,
    max_pool_percent: Option<u32>,
    in_thread_faults: bool,
    /// `--no-adaptive-swapin`.
    whole_folios: bool,
    /// `--referenced-writes`.
    referenced_writes: bool,
    /// `--inactive-list`.
    inactive_list: bool,
}

impl Cell {
    fn defaults() -> Cell {
        Cell {
            name: "defaults".into(),
            folio_size: None,
            max_pool_percent: None,
            in_thread_faults: false,
            whole_folios: false,
            referenced_writes: false,
            inactive_list: false,
        }
    }

    /// `uzswap run`'s arguments for this cell: its defaults (as its parser gives them), the
    /// cell's changes, `limit` and the program.
    fn run_args(&self, limit: u64, program: &[OsString]) -> RunArgs {
        #[derive(clap::Parser)]
        struct Defaults {
            #[command(flatten)]
            run: RunArgs,
        }
        let mut a =
            <Defaults as clap::Parser>::parse_from(["run", "--memory-high=1M", "--", "true"]).run;
        a.memory_high = limit;
        a.program = program.to_vec();
        a.stats = Some(crate::run::StatsForm::Full);
        a.folio_size = self.folio_size.unwrap_or(a.folio_size);
        // A cell's pool share is the share: fixed, not a ceiling.
        if let Some(percent) = self.max_pool_percent {
            a.max_pool_percent = percent;
            a.fixed_pool_share = true;
        }
        a.in_thread_faults |= self.in_thread_faults;
        a.no_adaptive_swapin |= self.whole_folios;
        a.referenced_writes |= self.referenced_writes;
        a.inactive_list |= self.inactive_list;
        a
    }
}

/// The cells of `grid`, the defaults first.
fn cells(grid: Grid) -> Vec<Cell> {
    let mut cells = vec![Cell::defaults()];
    if grid == Grid::None {
        return cells;
    }
    for folio in [4u64 << 10, 16 << 10, 64 << 10] {
        for in_thread in [false, true] {
            let cell = Cell {
                name: format!(
                    "{} {}",
                    fmt_size(folio),
                    if in_thread { "in-thread" } else { "handlers" }
                ),
                folio_size: Some(folio),
                max_pool_percent: None,
                in_thread_faults: in_thread,
                whole_folios: false,
                referenced_writes: false,
                inactive_list: false,
            };
            let same_as_defaults = cell.run_args(1, &[]).folio_size
                == Cell::defaults().run_args(1, &[]).folio_size
                && !in_thread;
            if !same_as_defaults {
                cells.push(cell);
            }
        }
    }
    for percent in [20, 50] {
        cells.push(Cell {
            name: format!("pool {percent}%"),
            max_pool_percent: Some(percent),
            ..Cell::defaults()
        });
    }
    cells.push(Cell {
        name: "whole folios".into(),
        whole_folios: true,
        ..Cell::defaults()
    });
    cells.push(Cell {
        name: "referenced writes".into(),
        referenced_writes: true,
        ..Cell::defaults()
    });
    cells.push(Cell {
        name: "inactive list".into(),
        inactive_list: true,
        ..Cell::defaults()
    });
    cells
}

/// A program at one pressure: its runs.
struct Row {
    program: &'static str,
    pressure: f64,
    /// The kernel side's limit.
    limit: u64,
    kernel: Vec<KernelRun>,
    /// Per cell, its runs.
    uzswap: Vec<Vec<UzswapRun>>,
    /// Per cell, why a run of it failed (its row goes on without it: only the defaults must
    /// never fail).
    failed: Vec<Option<String>>,
}

fn wall(e: &Exited) -> f64 {
    e.wall.as_secs_f64()
}

impl Row {
    fn kernel_wall(&self) -> f64 {
        median(self.kernel.iter().map(|k| wall(&k.exited)).collect())
    }

    /// The cell's median wall time; NaN for a cell that failed.
    fn cell_wall(&self, c: usize) -> f64 {
        match self.failed[c] {
            Some(_) => f64::NAN,
            None => median(self.uzswap[c].iter().map(|u| wall(&u.exited)).collect()),
        }
    }

    fn kernel_held(&self) -> f64 {
        median(self.kernel.iter().map(|k| k.held as f64).collect())
    }

    /// The kernel side's major faults (`pgmajfault`, machine-wide around the run).
    fn kernel_majfaults(&self) -> f64 {
        median(
            self.kernel
                .iter()
                .map(|k| k.stats.get("pgmajfault").copied().unwrap_or(0) as f64)
                .collect(),
        )
    }

    /// Pages the kernel side brought back from its pool or disk (`zswpin` + `pswpin`,
    /// machine-wide around the run).
    fn kernel_swapins(&self) -> f64 {
        let pages = |k: &KernelRun| {
            ["zswpin", "pswpin"]
                .iter()
                .map(|n| k.stats.get(*n).copied().unwrap_or(0) as f64)
                .sum::<f64>()
        };
        median(self.kernel.iter().map(pages).collect())
    }

    /// Pages uzswap brought back from its pool or disk with its defaults, in every process
    /// of the program's tree (a program that starts others, as redis-ycsb or gcc do).
    fn default_swapins(&self) -> f64 {
        median(self.uzswap[0].iter().map(tree_swapins).collect())
    }

    /// The peak RSS of the program's process with uzswap's defaults (`peak_rss_bytes`, its
    /// VmHWM: the region, the program's code and files, stacks and uzswap's own), where that
    /// process holds the program's memory: None where another process of its tree held
    /// `TREE_MEMBER_BYTES` or more in a run (a shell script's child, a driver's server: the
    /// first process's figure is not the program's), or where a run left no statistics.
    fn default_peak_rss(&self) -> Option<f64> {
        let peaks = self.uzswap[0].iter().map(|u| {
            let first = u.stat("peak_rss_bytes")?;
            (!memory_in_a_child(&u.stats)).then_some(first)
        });
        Some(median(peaks.collect::<Option<Vec<f64>>>()?))
    }

    /// The fastest cell that did not fail, and its wall time.
    fn best_cell(&self) -> (usize, f64) {
        (0..self.uzswap.len())
            .map(|c| (c, self.cell_wall(c)))
            .fold((0, f64::INFINITY), |b, x| if x.1 < b.1 { x } else { b })
    }
}

/// What a process of the program's tree other than the first must have held at its peak for
/// the first process's peak RSS not to stand for the program's.
const TREE_MEMBER_BYTES: f64 = (8 << 20) as f64;

/// A process of the run's tree other than the first one (the one `uzswap run` started, whose
/// parent is not in the tree) held `TREE_MEMBER_BYTES` or more.
fn memory_in_a_child(stats: &BTreeMap<String, f64>) -> bool {
    let tree_value = |pid: &str, name: &str| stats.get(&format!("tree/{pid}/{name}")).copied();
    let pids: Vec<&str> = stats
        .keys()
        .filter_map(|k| k.strip_prefix("tree/")?.strip_suffix("/parent"))
        .collect();
    let in_tree = |parent: f64| pids.iter().any(|p| p.parse::<f64>().ok() == Some(parent));
    pids.iter().any(|pid| {
        let child = tree_value(pid, "parent").is_some_and(in_tree);
        let held = tree_value(pid, "peak_charged_bytes").unwrap_or(0.0);
        child && held >= TREE_MEMBER_BYTES
    })
}

/// `zswpin` + `pswpin` summed over the process tree's ledger (`tree/PID/NAME`); the
/// program's own where there is no ledger (a static program, held from outside).
fn tree_swapins(u: &UzswapRun) -> f64 {
    let tree =
        |k: &str| k.starts_with("tree/") && (k.ends_with("/zswpin") || k.ends_with("/pswpin"));
    let own = |k: &str| k == "zswpin" || k == "pswpin";
    let has_tree = u.stats.keys().any(|k| k.starts_with("tree/"));
    u.stats
        .iter()
        .filter(|(k, _)| match has_tree {
            true => tree(k),
            false => own(k),
        })
        .map(|(_, v)| v)
        .sum()
}

/// Run `uzswap bench suite`.
pub fn run(a: &SuiteArgs) -> Result<()> {
    let programs = suite_programs::select(&a.programs)?;
    let kernel = System::KernelZswap {
        compressor: "lzo".into(),
    };
    check_peer(
        &kernel,
        rustix::process::geteuid().as_raw(),
        Path::new(peer::ZSWAP_PARAMS),
        Path::new(peer::CGROUP_V1_MEMORY),
    )?;
    peer::install_interrupt_handler()?;
    let dir = WorkDir::new()?;
    for p in &programs {
        p.prepare(&dir.0)?;
    }
    let mut machine = PeerMachine::new(PeerOptions {
        swap_dir: a.swap_dir.clone(),
        swap_bytes: a.swap_size,
        page_cluster: Some(0),
        max_pool_percent: None,
        reclaim: Reclaim::Limit,
        swappiness: None,
        worker_exe: std::env::current_exe()?,
    })?;
    machine.check(&kernel)?;
    let cells = cells(a.grid);
    let per_row = a.runs * (1 + cells.len());
    let total = programs.len() * (1 + a.pressures.len() * per_row);
    let progress = Progress::new(total as u64, "runs", !a.json);
    let mut rows = Vec::new();
    let mut plain_peaks = BTreeMap::new();
    for p in &programs {
        let command = (p.command)(&dir.0);
        let run_kernel = |m: &mut PeerMachine, limit: u64, what: &str| -> Result<KernelRun> {
            progress.start(what);
            drop_page_cache()?;
            let k = m.run_program(&kernel, &command, limit)?;
            check_exit(
                what,
                p.name,
                &k.exited,
                a.show_output,
                &limit_hint(k.oom_waits),
            )?;
            progress.done(&format!(
                "{what}: {:.2} s, held {}",
                wall(&k.exited),
                fmt_size(k.held)
            ));
            Ok(k)
        };
        let plain = run_kernel(&mut machine, PLAIN_LIMIT, &format!("{}, plain", p.name))?;
        plain_peaks.insert(p.name, plain.held);
        for &pressure in &a.pressures {
            let limit = equal_memory((plain.held as f64 / pressure) as u64);
            let mut row = Row {
                program: p.name,
                pressure,
                limit,
                kernel: Vec::new(),
                uzswap: cells.iter().map(|_| Vec::new()).collect(),
                failed: cells.iter().map(|_| None).collect(),
            };
            for i in 1..=a.runs {
                let what = format!("{} at {pressure}x, {kernel} run {i}", p.name);
                let k = run_kernel(&mut machine, limit, &what)?;
                same_output(p, &plain.exited, &k.exited, &what)?;
                let held = equal_memory(k.held);
                for (c, cell) in cells.iter().enumerate() {
                    if row.failed[c].is_some() {
                        continue;
                    }
                    let what = format!("{} at {pressure}x, uzswap {} run {i}", p.name, cell.name);
                    progress.start(&what);
                    drop_page_cache()?;
                    let run = uzswap::run(&cell.run_args(held, &command)).and_then(|u| {
                        check_exit(&what, p.name, &u.exited, a.show_output, "")?;
                        same_output(p, &plain.exited, &u.exited, &what)?;
                        Ok(u)
                    });
                    match run {
                        Ok(u) => {
                            progress.done(&format!("{what}: {:.2} s", wall(&u.exited)));
                            row.uzswap[c].push(u);
                        }
                        // The defaults are what the suite measures: their failure ends it.
                        Err(e) if c == 0 => return Err(e),
                        Err(e) => {
                            progress.done(&format!("{what}: failed"));
                            row.failed[c] = Some(format!("{e:#}"));
                        }
                    }
                }
                row.kernel.push(k);
            }
            rows.push(row);
        }
    }
    drop(progress);
    let settings = machine.settings().clone();
    drop(machine); // the machine restored before printing
    let report = Report {
        a,
        cells: &cells,
        rows: &rows,
        settings,
    };
    if let Some(path) = &a.plot {
        report.plot(path)?;
    }
    match a.json {
        true => report.print_json()?,
        false => report.print()?,
    }
    let failed = rows.iter().flat_map(|r| r.failed.iter().flatten()).count();
    if failed > 0 {
        bail!("{failed} cell(s) of the grid failed (above); their rows went on without them");
    }
    Ok(())
}

/// Every run starts with the page cache empty. The kernel charges a file page to the first
/// cgroup that reads it, so a program whose code and files an earlier run left cached is
/// charged less: the plain peak, and the limits made from it, would move with what ran
/// before (BENCHMARKS.md, the suite).
fn drop_page_cache() -> Result<()> {
    let synced = Command::new("sync").status().context("running sync")?;
    if !synced.success() {
        bail!("sync failed before dropping the page cache: {synced}");
    }
    std::fs::write("/proc/sys/vm/drop_caches", "1")
        .context("dropping the page cache (/proc/sys/vm/drop_caches)")
}

/// A run must print what the plain run printed.
fn same_output(p: &SuiteProgram, plain: &Exited, run: &Exited, what: &str) -> Result<()> {
    if run.stdout != plain.stdout {
        bail!(
            "{what}: {} printed {:?} where its plain run printed {:?}",
            p.name,
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&plain.stdout)
        );
    }
    Ok(())
}

/// The directory the programs are written to, removed with it.
struct WorkDir(PathBuf);

impl WorkDir {
    fn new() -> Result<WorkDir> {
        let dir = std::env::temp_dir().join(format!("uzswap-suite-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(WorkDir(dir))
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What the suite prints.
struct Report<'a> {
    a: &'a SuiteArgs,
    cells: &'a [Cell],
    rows: &'a [Row],
    settings: BTreeMap<String, String>,
}

impl Report<'_> {
    /// Kernel wall time over uzswap's with its defaults, per row.
    fn ratios(&self) -> Vec<f64> {
        self.rows
            .iter()
            .map(|r| r.kernel_wall() / r.cell_wall(0))
            .collect()
    }

    fn print(&self) -> Result<()> {
        let mut out = crate::report::stdout();
        writeln!(
            out,
            "bench suite: {} programs at {} pressures, {} run(s) a row, each the kernel first; \
             uzswap under what the kernel held (its cgroup's charge + the zswap pool)",
            self.rows.len() / self.a.pressures.len().max(1),
            self.a.pressures.len(),
            self.a.runs
        )?;
        let s: Vec<String> = self
            .settings
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        writeln!(out, "kernel settings: {}", s.join(" "))?;
        writeln!(
            out,
            "| program | pressure | kernel limit | kernel held | kernel s | kernel pgmajfault | \
             kernel swap-ins | uzswap peak RSS | uzswap s | uzswap swap-ins | kernel/uzswap | \
             best cell | defaults/best |"
        )?;
        writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")?;
        for (r, ratio) in self.rows.iter().zip(self.ratios()) {
            let (best, best_wall) = r.best_cell();
            writeln!(
                out,
                "| {} | {}x | {} | {:.1} MiB | {:.2} | {:.0} | {:.0} | {} | {:.2} | {:.0} | \
                 {:.2} | {} {:.2} s | {:.2} |",
                r.program,
                r.pressure,
                fmt_size(r.limit),
                r.kernel_held() / (1u64 << 20) as f64,
                r.kernel_wall(),
                r.kernel_majfaults(),
                r.kernel_swapins(),
                r.default_peak_rss().map_or("-".into(), |b| format!(
                    "{:.1} MiB",
                    b / (1u64 << 20) as f64
                )),
                r.cell_wall(0),
                r.default_swapins(),
                ratio,
                self.cells[best].name,
                best_wall,
                best_wall / r.cell_wall(0),
            )?;
        }
        let ratios = self.ratios();
        if !ratios.is_empty() {
            let worst = ratios.iter().cloned().fold(f64::INFINITY, f64::min);
            let closest = self
                .rows
                .iter()
                .map(|r| r.best_cell().1 / r.cell_wall(0))
                .fold(f64::INFINITY, f64::min);
            write!(
                out,
                "kernel/uzswap with uzswap's defaults: median {:.2}, lowest {worst:.2}",
                median(ratios.clone())
            )?;
            if self.cells.len() > 1 {
                write!(
                    out,
                    "; the defaults' time is at most {:.0}% above the best cell's on every row",
                    (1.0 / closest - 1.0) * 100.0
                )?;
            }
            writeln!(out)?;
        }
        writeln!(
            out,
            "cells: {}",
            self.cells
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )?;
        for r in self.rows {
            for (c, why) in r.failed.iter().enumerate() {
                if let Some(why) = why {
                    writeln!(
                        out,
                        "failed: {} at {}x, {}: {why}",
                        r.program, r.pressure, self.cells[c].name
                    )?;
                }
            }
        }
        Ok(())
    }

    fn print_json(&self) -> Result<()> {
        let rows: Vec<_> = self
            .rows
            .iter()
            .map(|r| {
                let cells: BTreeMap<&str, _> = self
                    .cells
                    .iter()
                    .enumerate()
                    .map(|(c, cell)| {
                        let runs = &r.uzswap[c];
                        (
                            cell.name.as_str(),
                            json!({
                                "wall_s": r.cell_wall(c),
                                "failed": r.failed[c],
                                "limit_bytes": runs.iter().map(|u| u.limit).collect::<Vec<_>>(),
                                "swapins": runs.iter().map(tree_swapins).collect::<Vec<_>>(),
                                "stats": runs.iter().map(|u| &u.stats).collect::<Vec<_>>(),
                            }),
                        )
                    })
                    .collect();
                json!({
                    "program": r.program,
                    "pressure": r.pressure,
                    "kernel_limit_bytes": r.limit,
                    "kernel": {
                        "wall_s": r.kernel_wall(),
                        "held_bytes": r.kernel_held(),
                        "pgmajfault": r.kernel_majfaults(),
                        "swapins": r.kernel_swapins(),
                        "vmstat": r.kernel.iter().map(|k| &k.stats).collect::<Vec<_>>(),
                    },
                    "uzswap": cells,
                    "uzswap_defaults_peak_rss_bytes": r.default_peak_rss(),
                    "kernel_over_uzswap_defaults": r.kernel_wall() / r.cell_wall(0),
                })
            })
            .collect();
        let out = json!({
            "command": "suite",
            "runs": self.a.runs,
            "pressures": self.a.pressures,
            "settings": self.settings,
            "rows": rows,
        });
        writeln!(crate::report::stdout(), "{out}")?;
        Ok(())
    }

    /// One line per side (the kernel, each cell): each row's speed in percent of the row's
    /// best, rows along the x axis.
    fn plot(&self, path: &Path) -> Result<()> {
        let best: Vec<f64> = self
            .rows
            .iter()
            .map(|r| r.best_cell().1.min(r.kernel_wall()))
            .collect();
        // A failed cell (NaN) has no point.
        let percent = |row: usize, wall: f64| wall.is_finite().then(|| best[row] / wall * 100.0);
        let mut lines = vec![Line {
            name: "kernel zswap".into(),
            points: (0..self.rows.len())
                .map(|i| ((i + 1) as f64, percent(i, self.rows[i].kernel_wall())))
                .collect(),
        }];
        for (c, cell) in self.cells.iter().enumerate() {
            lines.push(Line {
                name: format!("uzswap {}", cell.name),
                points: (0..self.rows.len())
                    .map(|i| ((i + 1) as f64, percent(i, self.rows[i].cell_wall(c))))
                    .collect(),
            });
        }
        let names: Vec<String> = self
            .rows
            .iter()
            .enumerate()
            .map(|(i, r)| format!("{} {} {}x", i + 1, r.program, r.pressure))
            .collect();
        plot::chart(
            path,
            &format!("bench suite: {}", names.join(", ")),
            &Axes {
                x: "row (program at a pressure)",
                y: "speed, % of the row's best (log)",
            },
            &lines,
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swap_ins_are_summed_over_the_process_tree() {
        let stats = [
            ("zswpin", 5.0),
            ("tree/10/zswpin", 3.0),
            ("tree/10/pswpin", 1.0),
            ("tree/11/zswpin", 7.0),
            ("tree/11/faults", 100.0),
        ];
        let u = UzswapRun {
            exited: Exited {
                wall: std::time::Duration::ZERO,
                status: std::os::unix::process::ExitStatusExt::from_raw(0),
                cpu: None,
                stdout: Vec::new(),
                stderr: Vec::new(),
            },
            limit: 0,
            stats: stats.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        };
        assert_eq!(tree_swapins(&u), 11.0);
    }

    /// The first process's peak RSS stands for the program's unless a child of it held 8 MiB
    /// or more: a shell script's `sort`, not a pyenv shim's `readlink` nor the process itself
    /// under the names it exec'd through.
    #[test]
    fn memory_in_a_child_is_a_child_of_the_tree_holding_eight_mib() {
        const M: f64 = (1 << 20) as f64;
        let stats = |rows: &[(&str, f64)]| -> BTreeMap<String, f64> {
            rows.iter().map(|(k, v)| (k.to_string(), *v)).collect()
        };
        let shim = stats(&[
            ("tree/10/parent", 1.0),
            ("tree/10/peak_charged_bytes", 200.0 * M),
            ("tree/11/parent", 10.0),
            ("tree/11/peak_charged_bytes", 1.2 * M),
        ]);
        assert!(!memory_in_a_child(&shim));
        let script = stats(&[
            ("tree/10/parent", 1.0),
            ("tree/10/peak_charged_bytes", 2.0 * M),
            ("tree/12/parent", 10.0),
            ("tree/12/peak_charged_bytes", 300.0 * M),
        ]);
        assert!(memory_in_a_child(&script));
        // Held from outside: no tree at all.
        assert!(!memory_in_a_child(&stats(&[("peak_rss_bytes", 9.0 * M)])));
    }

    /// A cell that failed is no cell's best and has no time; the row keeps the others.
    #[test]
    fn a_failed_cell_is_left_out_of_its_row() {
        let run = |secs: u64| UzswapRun {
            exited: Exited {
                wall: std::time::Duration::from_secs(secs),
                status: std::os::unix::process::ExitStatusExt::from_raw(0),
                cpu: None,
                stdout: Vec::new(),
                stderr: Vec::new(),
            },
            limit: 0,
            stats: Default::default(),
        };
        let row = Row {
            program: "p",
            pressure: 1.5,
            limit: 0,
            kernel: Vec::new(),
            uzswap: vec![vec![run(10)], Vec::new(), vec![run(8)]],
            failed: vec![None, Some("exited with status 1".into()), None],
        };
        assert!(row.cell_wall(1).is_nan());
        assert_eq!(row.best_cell(), (2, 8.0));
    }

    #[test]
    fn pressures_are_above_one() {
        assert_eq!(pressure_arg("1.5").unwrap(), 1.5);
        assert!(pressure_arg("1").unwrap_err().contains("above 1"));
        assert!(pressure_arg("x").is_err());
    }

    #[test]
    fn the_grid_starts_with_the_defaults_and_holds_them_once() {
        let none = cells(Grid::None);
        assert_eq!(none, vec![Cell::defaults()]);
        let small = cells(Grid::Small);
        assert_eq!(small[0], Cell::defaults());
        // 3 folio sizes x 2 fault services, less the one that is the defaults, two fixed pool
        // shares, whole folios, referenced writes, and the inactive list.
        assert_eq!(small.len(), 1 + 5 + 2 + 1 + 1 + 1);
        let d = Cell::defaults().run_args(1 << 20, &["prog".into()]);
        assert!(!d.in_thread_faults);
        assert_eq!(d.memory_high, 1 << 20);
        assert_eq!(d.program, ["prog"]);
        for c in &small[1..] {
            let a = c.run_args(1 << 20, &[]);
            assert!(
                (
                    a.folio_size,
                    a.max_pool_percent,
                    a.fixed_pool_share,
                    a.in_thread_faults,
                    a.no_adaptive_swapin,
                    a.referenced_writes,
                    a.inactive_list
                ) != (
                    d.folio_size,
                    d.max_pool_percent,
                    d.fixed_pool_share,
                    d.in_thread_faults,
                    d.no_adaptive_swapin,
                    d.referenced_writes,
                    d.inactive_list
                ),
                "{} is the defaults",
                c.name
            );
        }
    }
}
