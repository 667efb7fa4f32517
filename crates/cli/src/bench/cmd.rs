//! `uzswap bench usemem | mix | sweep`: run the listed systems alternately, several times, and
//! print medians side by side with ratios (or one JSON object). Alternating in one command is
//! the only fair comparison on a shared machine whose run-to-run spread is 10-40%.

use std::collections::BTreeMap;
use std::path::PathBuf;

use std::io::Write;

use anyhow::{bail, Context, Result};
use serde_json::json;
use zswap::PAGE_SIZE;

use super::java_heap::JavaHeap;
use super::peer::{self, PeerError, PeerMachine, PeerOptions, Reclaim};
use super::plot;
use super::progress::Progress;
use super::summary::{self, Column, Summary};
use super::systems::WorkloadResult;
use super::systems::{compressor_arg, run_uzswap, FaultService, System, SystemName, UzswapConfig};
use super::uzswap_side::{data_room, min_limit, proc_kb, with_folio};
use super::workload::{Workload, WorkloadSpec};
use crate::report;
use crate::size::{fmt_human, fmt_mib_up, fmt_size, fmt_unit, parse_folio_size, parse_size};

/// Options shared by the three commands.
#[derive(Debug, Clone, clap::Args)]
pub struct CommonArgs {
    /// Memory limit (memory.high) of the workload, e.g. 1G.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub memory_high: u64,
    /// uzswap's limit, fixed (usemem, mix). By default, beside a kernel peer, uzswap runs at
    /// equal memory: each round the kernel peers run first, and uzswap gets what they held
    /// (the cgroup's charge plus the zswap pool, which a cgroup v1 does not charge, sampled
    /// together; the most of any peer), exactly, as its limit.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, conflicts_with = "same_limit")]
    pub uzswap_memory_high: Option<u64>,
    /// Run uzswap under --memory-high itself beside a kernel peer, not under what the peer
    /// held: the kernel then holds more memory than uzswap (its pool is not charged).
    #[arg(long)]
    pub same_limit: bool,
    /// uzswap folio size (4K..2M). Default: 2M for usemem (sequential, as THP serves it: a
    /// fault brings a whole folio back at once, an eviction moves 512 pages out with one TLB
    /// flush and writes them to disk in one I/O), 4K for mix and sweep (random: a larger
    /// folio would move pages nobody asked for, in and out).
    #[arg(long, value_name = "SIZE", value_parser = parse_folio_size)]
    pub folio_size: Option<usize>,
    /// uzswap's compressor (a system's ':COMPRESSOR' suffix overrides it).
    #[arg(long, default_value = "lz4", value_parser = compressor_arg)]
    pub compressor: String,
    /// The kernel zswap's compressor for `kernel-zswap` without a suffix.
    #[arg(long, default_value = "lzo")]
    pub kernel_compressor: String,
    // The help text shows `[:COMP]` as written: not an intra-doc link.
    #[allow(rustdoc::broken_intra_doc_links)]
    /// Kernel peers to run besides the systems: kernel-zswap[:COMP], kernel-swap.
    #[arg(long, value_name = "SYSTEM")]
    pub peer: Vec<SystemName>,
    #[allow(rustdoc::broken_intra_doc_links)]
    /// Systems to run (default: uzswap; sweep: uzswap-nocompress, uzswap, uzswap-writethrough,
    /// uzswap-adaptive); any of uzswap[:COMP], uzswap-writethrough[:COMP],
    /// uzswap-adaptive[:COMP] (writethrough=auto: written through while the pool is above its
    /// accept threshold and its pages have been leaving for the disk), uzswap-nocompress,
    /// kernel-zswap[:COMP], kernel-swap.
    #[arg(long, value_name = "SYSTEM")]
    pub system: Vec<SystemName>,
    /// Runs of each system, alternating; medians are reported (1 to 1000).
    #[arg(long, default_value_t = 3, value_parser = |s: &str| count_in(s, 1, 1000))]
    pub runs: usize,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Directory of *.pages files (compressible content). Default: the repository's corpus/,
    /// built into the binary.
    #[arg(long, value_name = "DIR")]
    pub corpus: Option<PathBuf>,
    /// Where the kernel peers' swap file goes.
    #[arg(long, default_value = "/var/tmp")]
    pub swap_dir: PathBuf,
    /// /proc/sys/vm/page-cluster for the kernel peers, 0 to 31 (default: leave it; always
    /// recorded).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=31))]
    pub page_cluster: Option<u32>,
    /// uzswap's pool limit, percent of the region's memory limit (the pool is charged to it).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub uzswap_max_pool_percent: u32,
    /// Threads that may compress one of uzswap's folios at once, 1 to 8 (zswap's
    /// `compress_threads`: folios of 16 pages or more are cut in parts of at least 8).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=8))]
    pub uzswap_compress_threads: u32,
    /// Turn off uzswap's working-set protection (refault detection, as mm/workingset.c: a
    /// folio that refaults within what the region holds resident is kept out of reclaim's
    /// reach for a while), for a comparison.
    #[arg(long)]
    pub uzswap_no_workingset: bool,
    /// Who serves uzswap's faults: the faulting thread itself (no wake-ups), or the region's
    /// handler threads.
    #[arg(long, value_enum, default_value_t = FaultService::InThread)]
    pub uzswap_faults: FaultService,
    /// zswap max_pool_percent for the kernel peers, 0 to 100 (default: leave it).
    #[arg(long, value_name = "PERCENT", value_parser = clap::value_parser!(u32).range(0..=100))]
    pub max_pool_percent: Option<u32>,
    /// How the kernel peers are held to the limit: a page-out controller at the limit with a
    /// hard limit 64 MiB above (a memory.high stand-in), or memory.limit_in_bytes alone.
    #[arg(long, value_enum, default_value_t = Reclaim::Controller)]
    pub peer_reclaim: Reclaim,
    /// memory.swappiness of the kernel peers' cgroups (default: inherit the root's). 0 keeps
    /// the cgroup's own reclaim from swapping, so that only the page-out controller does.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=200))]
    pub peer_swappiness: Option<u32>,
    /// Seed of the random content and accesses.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The Redis Cluster that `uzswap-redis` writes back to: redis://HOST:PORT[,...]
    /// (scripts/redis-cluster starts one on loopback).
    #[arg(long, value_name = "URL")]
    pub redis_cluster: Option<String>,
}

/// The arguments of `uzswap bench usemem`.
#[derive(Debug, Clone, clap::Args)]
pub struct UsememArgs {
    /// Workers (threads), each writing and re-reading its own SIZE (1 to 1024).
    #[arg(long, default_value_t = 1, value_parser = |s: &str| count_in(s, 1, 1024))]
    pub workers: usize,
    /// Bytes per worker.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub size: u64,
    /// The options every benchmark takes.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// The arguments of `uzswap bench mix`.
#[derive(Debug, Clone, clap::Args)]
pub struct MixArgs {
    /// Total bytes of the three areas.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub size: u64,
    /// Seconds of random accesses.
    #[arg(long, value_parser = parse_seconds)]
    pub seconds: f64,
    /// The options every benchmark takes.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// The arguments of `uzswap bench sweep`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_long_help = JAVA_HEAP_HELP)]
pub struct SweepArgs {
    /// Seconds of accesses per cell.
    #[arg(long, default_value_t = 10.0, value_parser = parse_seconds)]
    pub seconds: f64,
    /// Where the accesses go: `java`, a Java server's generational heap (below), or
    /// `uniform`, every page of the heap alike.
    #[arg(long, value_enum, default_value_t = Locality::Java)]
    pub locality: Locality,
    /// java: the young area's share of the heap, in percent.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=90))]
    pub young_percent: u32,
    /// java: the Zipf exponent of the old area's accesses (0: uniform; 1: about 60% of them
    /// on the hottest 1% of a 100,000-page area).
    #[arg(long, default_value_t = 1.0, value_parser = parse_exponent)]
    pub zipf_exponent: f64,
    /// java: young pages allocated per 1000 old accesses.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(0..=1000))]
    pub alloc_per_mille: u32,
    /// java: seconds between two whole-heap marks (0: none).
    #[arg(long, default_value_t = 5.0, value_parser = parse_mark_seconds)]
    pub mark_seconds: f64,
    /// Draw the table as a chart into this PNG file: one line per system, heap in percent of
    /// the limit on the x axis, accesses/s relative to the best cell on the y axis.
    #[arg(long, value_name = "FILE.png")]
    pub plot: Option<PathBuf>,
    /// The heap of a cell, in percent of the limit, 25 to 2000 (repeat for more cells):
    /// instead of 75% to 175% in 12.5% steps; 500 is a cold set four times the limit.
    #[arg(long, value_name = "PERCENT", value_parser = clap::value_parser!(u32).range(25..=2000))]
    pub heap_percent: Vec<u32>,
    /// The options every benchmark takes.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Where the sweep's accesses go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Locality {
    /// A Java server's generational heap (java_heap.rs).
    Java,
    /// Every page of the heap alike.
    Uniform,
}

/// The Java heap model, in `bench sweep --help`.
const JAVA_HEAP_HELP: &str = "\
The java locality models a Java server's generational heap of real compressible pages:
  - young area (--young-percent of the heap): allocation bumps through it, writing a whole
    page at a time with new contents, and wraps around; what was there is dead and is
    overwritten without being read;
  - old area (the rest): each access reads and writes one word of a page drawn from a Zipf
    distribution (--zipf-exponent) over its pages, the ranks scattered over the area;
  - one young page is allocated every 1000/--alloc-per-mille old accesses; both count as
    accesses;
  - every --mark-seconds a whole-heap mark reads one word of every page in address order,
    its time counted against the accesses, as a collector's pause counts against a
    server's throughput.
Every byte of both areas is checked at the end of each cell.";

/// The hidden worker of the kernel peers.
#[derive(Debug, Clone, clap::Args)]
pub struct WorkerArgs {
    /// The WorkloadSpec as JSON.
    pub spec: String,
}

/// The hidden worker of the uzswap side.
#[derive(Debug, Clone, clap::Args)]
pub struct UzswapWorkerArgs {
    /// The WorkloadSpec as JSON.
    pub spec: String,
    /// The UzswapConfig as JSON.
    pub config: String,
}

/// Run `uzswap bench uzswap-worker`: one workload on a uzswap region, in a process of its own.
pub fn uzswap_worker(a: &UzswapWorkerArgs) -> Result<()> {
    // The worker's RSS is the figure compared with the limit: uzswap's freed buffers must
    // not stay in it.
    uffd::process::return_large_blocks_when_freed();
    Ok(super::uzswap_side::uzswap_worker(&a.spec, &a.config)?)
}

fn systems(c: &CommonArgs, default: &[&str]) -> Result<Vec<System>> {
    let mut names = c.system.clone();
    if names.is_empty() {
        names = default
            .iter()
            .map(|s| s.parse())
            .collect::<Result<Vec<SystemName>, _>>()?;
    }
    names.extend(c.peer.iter().cloned());
    if names.iter().any(|n| n.name == "uzswap-redis") && c.redis_cluster.is_none() {
        anyhow::bail!(
            "uzswap-redis needs --redis-cluster redis://HOST:PORT[,...] (scripts/redis-cluster start)"
        );
    }
    let mut out: Vec<System> = Vec::new();
    for n in names {
        let mut s = n.resolve(
            &c.compressor,
            &c.kernel_compressor,
            c.uzswap_max_pool_percent,
            c.redis_cluster.as_deref(),
        );
        if let System::Uzswap(config) = &mut s {
            config.faults = c.uzswap_faults;
            config.compress_threads = c.uzswap_compress_threads;
            config.workingset = !c.uzswap_no_workingset;
        }
        if !out.contains(&s) {
            out.push(s);
        }
    }
    Ok(out)
}

/// A whole number from `min` to `max`, for clap.
pub(crate) fn count_in(text: &str, min: usize, max: usize) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(format!("give a whole number from {min} to {max}")),
    }
}

/// A number of seconds above 0, for clap.
fn parse_exponent(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && (0.0..=10.0).contains(&s) => Ok(s),
        _ => Err("give an exponent from 0 to 10 (e.g. 1 or 0.8)".into()),
    }
}

fn parse_mark_seconds(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s >= 0.0 => Ok(s),
        _ => Err("give a number of seconds, 0 (no marks) or more (e.g. 5)".into()),
    }
}

pub(crate) fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 => Ok(s),
        _ => Err("give a number of seconds above 0 (e.g. 10 or 0.5)".into()),
    }
}

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
fn check_run(c: &CommonArgs, systems: &[System], specs: &[WorkloadSpec], area: &str) -> Result<()> {
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
fn folio_hint(c: &CommonArgs, systems: &[System], spec: &WorkloadSpec) -> Option<String> {
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

/// The systems of one command and the machine set up for the kernel ones.
struct Runner {
    peer: Option<PeerMachine>,
    uzswap_memory_high: Option<u64>,
    /// `--same-limit`: uzswap is not given what the kernel peers held.
    same_limit: bool,
}

impl Runner {
    fn new(c: &CommonArgs, systems: &[System], max_area: usize) -> Result<Runner> {
        let peer = if systems.iter().any(System::is_kernel) {
            peer::check_root(rustix::process::geteuid().as_raw())?;
            peer::install_interrupt_handler()?;
            let machine = PeerMachine::new(PeerOptions {
                swap_dir: c.swap_dir.clone(),
                swap_bytes: peer::swap_bytes_for(max_area),
                page_cluster: c.page_cluster,
                max_pool_percent: c.max_pool_percent,
                reclaim: c.peer_reclaim,
                swappiness: c.peer_swappiness,
                worker_exe: std::env::current_exe()?,
            })?;
            // A compressor the kernel refuses, before any run.
            for s in systems.iter().filter(|s| s.is_kernel()) {
                machine.check(s)?;
            }
            Some(machine)
        } else {
            None
        };
        Ok(Runner {
            peer,
            uzswap_memory_high: c.uzswap_memory_high,
            same_limit: c.same_limit,
        })
    }

    /// Run `system` on `spec`; a uzswap system under `--uzswap-memory-high`, or else under
    /// `kernel_held` (what the kernel peers held in this round) unless `--same-limit`.
    fn run(
        &mut self,
        system: &System,
        spec: &WorkloadSpec,
        kernel_held: Option<u64>,
    ) -> Result<WorkloadResult> {
        let equal = kernel_held.filter(|_| !self.same_limit);
        match system {
            System::Uzswap(cfg) => {
                run_uzswap(&uzswap_spec(self.uzswap_memory_high.or(equal), spec), cfg)
                    .with_context(|| system.to_string())
            }
            _ => Ok(self
                .peer
                .as_mut()
                .expect("peer machine set up for kernel systems")
                .run(system, spec)?),
        }
    }

    fn settings(&self) -> BTreeMap<String, String> {
        let mut s = self
            .peer
            .as_ref()
            .map(|p| p.settings().clone())
            .unwrap_or_default();
        let memory = match (self.uzswap_memory_high, self.same_limit) {
            (Some(l), _) => l.to_string(),
            (None, true) => "same-limit".into(),
            (None, false) => "equal".into(),
        };
        s.insert("uzswap_memory_high".into(), memory);
        if !s.contains_key("page_cluster") {
            if let Ok(v) = std::fs::read_to_string(peer::PAGE_CLUSTER) {
                s.insert("page_cluster".into(), v.trim().to_string());
            }
        }
        s
    }
}

/// `spec` as the uzswap side runs it: under `--uzswap-memory-high` if given.
fn uzswap_spec(uzswap_memory_high: Option<u64>, spec: &WorkloadSpec) -> WorkloadSpec {
    WorkloadSpec {
        memory_high: uzswap_memory_high.unwrap_or(spec.memory_high),
        ..spec.clone()
    }
}

fn spec(c: &CommonArgs, workload: Workload) -> WorkloadSpec {
    let default_folio = match workload {
        Workload::Usemem { .. } => 2 << 20,
        Workload::Mix { .. } | Workload::Heap { .. } | Workload::JavaHeap { .. } => PAGE_SIZE,
    };
    WorkloadSpec {
        workload,
        memory_high: c.memory_high,
        folio_size: c.folio_size.unwrap_or(default_folio),
        corpus: c.corpus.clone(),
        seed: c.seed,
    }
}

/// A statistic or gauge in bytes (the others count pages, folios or events): shown in MiB.
fn in_bytes(name: &str) -> bool {
    name.ends_with("_bytes") || name.ends_with("pool_total_size")
}

/// A statistic's or gauge's name and value as the table shows it: bytes in MiB.
fn named(name: &str, v: i64, suffix: &str) -> (String, f64) {
    match in_bytes(name) {
        true => (
            format!("{} MiB{suffix}", name.trim_end_matches("_bytes")),
            v as f64 / (1 << 20) as f64,
        ),
        false => (format!("{name}{suffix}"), v as f64),
    }
}

/// The figures of one result, in print order, by name, each with its unit: sizes in MiB,
/// throughput in MiB/s, CPU time in s, latency in us; statistics by their kernel names.
pub fn figures(r: &WorkloadResult) -> Vec<(String, f64)> {
    let mut f = Vec::new();
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    // The workload measures KB/s as usemem does (KB = 1024 bytes).
    for p in &r.output.phases {
        f.push((format!("{} MiB/s (total)", p.name), p.total_kb_s / 1024.0));
        if p.per_worker_kb_s.len() > 1 {
            for (i, v) in p.per_worker_kb_s.iter().enumerate() {
                f.push((format!("{} MiB/s worker {i}", p.name), *v / 1024.0));
            }
        }
    }
    if let Some(a) = r.output.accesses_per_s {
        f.push(("accesses/s".into(), a));
    }
    f.push(("cpu user s".into(), r.cpu.user_s));
    f.push(("cpu sys s".into(), r.cpu.sys_s));
    if let Some(h) = r.helper_cpu {
        f.push(("helper cpu user s".into(), h.user_s));
        f.push(("helper cpu sys s".into(), h.sys_s));
    }
    if let Some(v) = r.max_rss_bytes {
        f.push(("max RSS MiB".into(), mib(v)));
        // Exact, where "max RSS MiB" rounds: the limit allows a folio per thread over it.
        let over = v.saturating_sub(r.limit_bytes);
        f.push(("max RSS over limit MiB".into(), mib(over)));
    }
    if let Some(v) = r.max_usage_bytes {
        f.push(("max charged MiB".into(), mib(v)));
    }
    if let Some(v) = r.max_memory_bytes {
        f.push(("max charged + pool MiB".into(), mib(v)));
    }
    if let Some(l) = r.fault_latency {
        f.push(("fault p50 us".into(), l.p50_us));
        f.push(("fault p99 us".into(), l.p99_us));
        f.push(("fault max us".into(), l.max_us));
    }
    if let Some(p) = r.pages_per_fault {
        f.push(("pages/fault".into(), p));
    }
    for (k, v) in &r.stats {
        f.push(named(k, *v, ""));
    }
    for (k, v) in &r.gauges {
        f.push(named(k, *v, " (end)"));
    }
    f
}

/// The median of `v` (the mean of the middle two for an even count); NaN when it is empty.
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Median of every figure over the runs of one system, in first-seen order.
pub fn median_figures(runs: &[WorkloadResult]) -> Vec<(String, f64)> {
    let mut order: Vec<String> = Vec::new();
    let mut vals: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in runs {
        for (k, v) in figures(r) {
            if !vals.contains_key(&k) {
                order.push(k.clone());
            }
            vals.entry(k).or_default().push(v);
        }
    }
    order
        .into_iter()
        .map(|k| {
            let v = median(vals.remove(&k).unwrap_or_default());
            (k, v)
        })
        .collect()
}

/// The runs of every system, by system, in system order: what each run gave, and why the
/// runs left out failed.
type Runs = (Vec<Vec<WorkloadResult>>, Vec<Vec<String>>);

/// Run every system `runs` times, alternating. A kernel peer's run whose worker could not be
/// held to the limit ([`PeerError::left_out`]: an OOM wait over 10 s, a charge that failed at
/// the hard stop, or the OOM killer, were it on) is left out, and said so, and the runs that did
/// finish stand. Any other failure (a setup refused, a check of the data that failed) stops
/// the benchmark. `cell` names the sweep's cell in the progress, if any.
fn alternate(
    runner: &mut Runner,
    systems: &[System],
    spec: &WorkloadSpec,
    runs: usize,
    progress: &Progress,
    cell: &str,
) -> Result<Runs> {
    let mut out: Vec<Vec<WorkloadResult>> = vec![Vec::new(); systems.len()];
    let mut failed: Vec<Vec<String>> = vec![Vec::new(); systems.len()];
    // The kernel peers first in each round: uzswap then runs under what they held.
    let mut order: Vec<usize> = (0..systems.len()).collect();
    order.sort_by_key(|&i| !systems[i].is_kernel());
    for run in 0..runs {
        let mut kernel_held: Option<u64> = None;
        for &i in &order {
            let s = &systems[i];
            let what = format!("{cell}run {}/{runs} {s}", run + 1);
            progress.start(&what);
            let r = match runner.run(s, spec, kernel_held) {
                Ok(r) => r,
                Err(e)
                    if e.downcast_ref::<PeerError>()
                        .is_some_and(PeerError::left_out) =>
                {
                    progress.failed(&format!("{what}: failed, left out: {e:#}"));
                    failed[i].push(format!("{e:#}"));
                    continue;
                }
                Err(e) => return Err(e),
            };
            let main = r
                .output
                .accesses_per_s
                .map(|a| format!("{a:.0} accesses/s"))
                .unwrap_or_else(|| {
                    r.output
                        .phases
                        .iter()
                        .map(|p| format!("{} {:.0} MiB/s", p.name, p.total_kb_s / 1024.0))
                        .collect::<Vec<_>>()
                        .join(", ")
                });
            progress.done(&format!("{what}: {main}"));
            if s.is_kernel() {
                let held = r.max_memory_bytes.or(r.max_usage_bytes);
                // Whole pages: a region's limit is counted in them.
                let held = held.map(|h| h.next_multiple_of(PAGE_SIZE as u64));
                kernel_held = kernel_held.max(held);
            }
            out[i].push(r);
        }
    }
    Ok((out, failed))
}

/// Print a summary: the title and settings, the table, its notes, and the verdict last.
fn print_summary(title: &str, settings: &BTreeMap<String, String>, sum: &Summary) -> Result<()> {
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
fn runs_text(runs: usize, systems: usize) -> String {
    match (runs, systems) {
        (1, 1) => "1 run".into(),
        (n, 1) => format!("{n} runs"),
        (1, _) => "1 run of each system".into(),
        (n, _) => format!("{n} runs of each system, alternating"),
    }
}

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

/// For a title: uzswap's own limit, if it has one, or what it runs under beside a kernel peer.
fn uzswap_limit_note(c: &CommonArgs, systems: &[System]) -> String {
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
fn workers_text(n: usize) -> String {
    match n {
        1 => "1 worker".into(),
        n => format!("{n} workers"),
    }
}

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

    #[test]
    fn medians() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0]), 2.5);
        assert!(median(vec![]).is_nan());
    }
}
