//! `uzswap bench usemem | mix | sweep`: run the listed systems alternately, several times, and
//! print medians side by side with ratios (or one JSON object). Alternating in one command is
//! the only fair comparison on a shared machine whose run-to-run spread is 10-40%.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Result};
use serde_json::json;

use super::peer::{self, PeerMachine, PeerOptions, Reclaim};
use super::systems::{run_uzswap, System, SystemName, WorkloadResult};
use super::uzswap_side::check_limit;
use super::workload::{Workload, WorkloadSpec};
use crate::size::{parse_folio_size, parse_size};

/// Options shared by the three commands.
#[derive(Debug, Clone, clap::Args)]
pub struct CommonArgs {
    /// Memory limit (memory.high) of the workload, e.g. 1G.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub memory_high: u64,
    /// uzswap's limit where it differs from --memory-high (usemem, mix): to compare at equal
    /// memory with a kernel peer, whose compressed pool a cgroup v1 does not charge. Give it
    /// the peer's "max charged + pool MiB" of an earlier run.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub uzswap_memory_high: Option<u64>,
    /// uzswap folio size (4K..2M). Default: 2M for usemem (sequential, as THP serves it: a
    /// fault brings a whole folio back at once, an eviction moves 512 pages out with one TLB
    /// flush and writes them to disk in one I/O), 4K for mix and sweep (random: a larger
    /// folio would move pages nobody asked for, in and out).
    #[arg(long, value_name = "SIZE", value_parser = parse_folio_size)]
    pub folio_size: Option<usize>,
    /// uzswap's compressor (a system's ':COMPRESSOR' suffix overrides it).
    #[arg(long, default_value = "lz4")]
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
    /// Systems to run (default: uzswap; sweep: uzswap-nocompress, uzswap, uzswap-writethrough);
    /// any of uzswap[:COMP], uzswap-writethrough[:COMP], uzswap-nocompress,
    /// kernel-zswap[:COMP], kernel-swap.
    #[arg(long, value_name = "SYSTEM")]
    pub system: Vec<SystemName>,
    /// Runs of each system, alternating; medians are reported.
    #[arg(long, default_value_t = 3)]
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
    /// /proc/sys/vm/page-cluster for the kernel peers (default: leave it; always recorded).
    #[arg(long, value_name = "N")]
    pub page_cluster: Option<u32>,
    /// uzswap's pool limit, percent of the region's memory limit (the pool is charged to it).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub uzswap_max_pool_percent: u32,
    /// zswap max_pool_percent for the kernel peers (default: leave it).
    #[arg(long, value_name = "PERCENT")]
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
}

/// The arguments of `uzswap bench usemem`.
#[derive(Debug, Clone, clap::Args)]
pub struct UsememArgs {
    /// Workers (threads), each writing and re-reading its own SIZE.
    #[arg(long, default_value_t = 1)]
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
    #[arg(long)]
    pub seconds: f64,
    /// The options every benchmark takes.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// The arguments of `uzswap bench sweep`.
#[derive(Debug, Clone, clap::Args)]
pub struct SweepArgs {
    /// Seconds of random accesses per cell.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// The options every benchmark takes.
    #[command(flatten)]
    pub common: CommonArgs,
}

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
    super::uzswap_side::uzswap_worker(&a.spec, &a.config)
}

fn systems(c: &CommonArgs, default: &[&str]) -> Result<Vec<System>> {
    let mut names = c.system.clone();
    if names.is_empty() {
        names = default
            .iter()
            .map(|s| s.parse())
            .collect::<Result<Vec<SystemName>>>()?;
    }
    names.extend(c.peer.iter().cloned());
    let mut out: Vec<System> = Vec::new();
    for n in names {
        let s = n.resolve(
            &c.compressor,
            &c.kernel_compressor,
            c.uzswap_max_pool_percent,
        );
        if !out.contains(&s) {
            out.push(s);
        }
    }
    Ok(out)
}

fn check_common(c: &CommonArgs) -> Result<()> {
    if c.runs == 0 {
        bail!("--runs must be at least 1");
    }
    if c.memory_high < (16 << 20) {
        bail!("--memory-high must be at least 16M");
    }
    if c.uzswap_memory_high.is_some_and(|l| l < (16 << 20)) {
        bail!("--uzswap-memory-high must be at least 16M");
    }
    Ok(())
}

fn check_seconds(s: f64) -> Result<()> {
    if !(s.is_finite() && s > 0.0) {
        bail!("--seconds must be a positive number, got {s}");
    }
    Ok(())
}

/// The systems of one command and the machine set up for the kernel ones.
struct Runner {
    peer: Option<PeerMachine>,
    uzswap_memory_high: Option<u64>,
}

impl Runner {
    fn new(c: &CommonArgs, systems: &[System], max_area: usize) -> Result<Runner> {
        let peer = if systems.iter().any(System::is_kernel) {
            peer::check_root(rustix::process::geteuid().as_raw())?;
            peer::install_interrupt_handler()?;
            Some(PeerMachine::new(PeerOptions {
                swap_dir: c.swap_dir.clone(),
                swap_bytes: peer::swap_bytes_for(max_area),
                page_cluster: c.page_cluster,
                max_pool_percent: c.max_pool_percent,
                reclaim: c.peer_reclaim,
                swappiness: c.peer_swappiness,
                worker_exe: std::env::current_exe()?,
            })?)
        } else {
            None
        };
        Ok(Runner {
            peer,
            uzswap_memory_high: c.uzswap_memory_high,
        })
    }

    fn run(&mut self, system: &System, spec: &WorkloadSpec) -> Result<WorkloadResult> {
        match system {
            System::Uzswap(cfg) => run_uzswap(&uzswap_spec(self.uzswap_memory_high, spec), cfg),
            _ => self
                .peer
                .as_mut()
                .expect("peer machine set up for kernel systems")
                .run(system, spec),
        }
    }

    fn settings(&self) -> BTreeMap<String, String> {
        let mut s = self
            .peer
            .as_ref()
            .map(|p| p.settings().clone())
            .unwrap_or_default();
        if let Some(l) = self.uzswap_memory_high {
            s.insert("uzswap_memory_high".into(), l.to_string());
        }
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

/// Refuse, before anything is set up or run, a limit the uzswap systems' regions would
/// refuse (else the kernel peers' runs would go first for nothing), and
/// `--uzswap-memory-high` with no uzswap system to apply to.
fn check_uzswap_limits(c: &CommonArgs, systems: &[System], spec: &WorkloadSpec) -> Result<()> {
    let uzswap: Vec<_> = systems
        .iter()
        .filter_map(|s| match s {
            System::Uzswap(cfg) => Some(cfg),
            _ => None,
        })
        .collect();
    if c.uzswap_memory_high.is_some() && uzswap.is_empty() {
        bail!("--uzswap-memory-high needs a uzswap system to run");
    }
    let option = match c.uzswap_memory_high {
        Some(_) => "--uzswap-memory-high",
        None => "--memory-high",
    };
    for cfg in uzswap {
        check_limit(&uzswap_spec(c.uzswap_memory_high, spec), cfg, option)?;
    }
    Ok(())
}

fn spec(c: &CommonArgs, workload: Workload) -> WorkloadSpec {
    let default_folio = match workload {
        Workload::Usemem { .. } => 2 << 20,
        Workload::Mix { .. } | Workload::Heap { .. } => 4 << 10,
    };
    WorkloadSpec {
        workload,
        memory_high: c.memory_high,
        folio_size: c.folio_size.unwrap_or(default_folio),
        corpus: c.corpus.clone(),
        seed: c.seed,
    }
}

/// The figures of one result, in print order, by name.
pub fn figures(r: &WorkloadResult) -> Vec<(String, f64)> {
    let mut f = Vec::new();
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    for p in &r.output.phases {
        f.push((format!("{} KB/s (total)", p.name), p.total_kb_s));
        if p.per_worker_kb_s.len() > 1 {
            for (i, v) in p.per_worker_kb_s.iter().enumerate() {
                f.push((format!("{} KB/s worker {i}", p.name), *v));
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
        f.push(("max RSS over limit KiB".into(), over as f64 / 1024.0));
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
        f.push((k.clone(), *v as f64));
    }
    for (k, v) in &r.gauges {
        f.push((format!("{k} (end)"), *v as f64));
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

fn fmt_num(v: f64) -> String {
    if v.is_nan() {
        "-".into()
    } else if v.abs() >= 1000.0 || v == v.trunc() {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// The side-by-side table: one column per system, then each system's ratio to the first.
fn print_table(
    title: &str,
    settings: &BTreeMap<String, String>,
    cols: &[(String, Vec<(String, f64)>)],
) {
    println!("{title}");
    let s: Vec<String> = settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!("settings: {}", s.join(" "));
    let mut rows: Vec<String> = Vec::new();
    for (_, figs) in cols {
        for (k, _) in figs {
            if !rows.contains(k) {
                rows.push(k.clone());
            }
        }
    }
    let mut header = vec!["figure (median)".to_string()];
    header.extend(cols.iter().map(|(n, _)| n.clone()));
    if let Some((first, _)) = cols.first() {
        header.extend(cols.iter().skip(1).map(|(n, _)| format!("{n}/{first}")));
    }
    let get = |c: &Vec<(String, f64)>, k: &str| {
        c.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| *v)
            .unwrap_or(f64::NAN)
    };
    let mut table = vec![header];
    for k in &rows {
        let mut line = vec![k.clone()];
        let base = get(&cols[0].1, k);
        for (_, c) in cols {
            line.push(fmt_num(get(c, k)));
        }
        for (_, c) in cols.iter().skip(1) {
            let v = get(c, k);
            line.push(if base != 0.0 && !base.is_nan() && !v.is_nan() {
                format!("{:.2}", v / base)
            } else {
                "-".into()
            });
        }
        table.push(line);
    }
    let widths: Vec<usize> = (0..table[0].len())
        .map(|i| table.iter().map(|l| l[i].len()).max().unwrap_or(0))
        .collect();
    for l in &table {
        let cells: Vec<String> = l
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == 0 {
                    format!("{c:<w$}", w = widths[i])
                } else {
                    format!("{c:>w$}", w = widths[i])
                }
            })
            .collect();
        println!("{}", cells.join("  "));
    }
}

/// The runs of every system, by system, in system order: what each run gave, and why the
/// runs left out failed.
type Runs = (Vec<Vec<WorkloadResult>>, Vec<Vec<String>>);

/// Run every system `runs` times, alternating. A kernel peer's run whose worker could not be
/// held to the limit (`peer::OomKilled`: an OOM wait over 10 s, a charge that failed at the
/// hard stop, or the OOM killer, were it on) is left out, and said so, and the runs that did
/// finish stand. Any other failure (a setup refused, a check of the data that failed) stops
/// the benchmark.
fn alternate(
    runner: &mut Runner,
    systems: &[System],
    spec: &WorkloadSpec,
    runs: usize,
    json: bool,
) -> Result<Runs> {
    let mut out: Vec<Vec<WorkloadResult>> = vec![Vec::new(); systems.len()];
    let mut failed: Vec<Vec<String>> = vec![Vec::new(); systems.len()];
    for run in 0..runs {
        for (i, s) in systems.iter().enumerate() {
            let r = match runner.run(s, spec) {
                Ok(r) => r,
                Err(e) if e.chain().any(|c| c.is::<super::peer::OomKilled>()) => {
                    eprintln!("run {}/{runs} {s}: failed, left out: {e:#}", run + 1);
                    failed[i].push(format!("{e:#}"));
                    continue;
                }
                Err(e) => return Err(e),
            };
            if !json {
                let main = r
                    .output
                    .accesses_per_s
                    .map(|a| format!("{a:.0} accesses/s"))
                    .unwrap_or_else(|| {
                        r.output
                            .phases
                            .iter()
                            .map(|p| format!("{} {:.0} KB/s", p.name, p.total_kb_s))
                            .collect::<Vec<_>>()
                            .join(", ")
                    });
                eprintln!("run {}/{runs} {s}: {main}", run + 1);
            }
            out[i].push(r);
        }
    }
    Ok((out, failed))
}

fn side_by_side(
    command: &str,
    title: String,
    c: &CommonArgs,
    systems: &[System],
    spec: WorkloadSpec,
) -> Result<()> {
    check_uzswap_limits(c, systems, &spec)?;
    let mut runner = Runner::new(c, systems, spec.area_bytes())?;
    let (results, failed) = alternate(&mut runner, systems, &spec, c.runs, c.json)?;
    let settings = runner.settings();
    drop(runner); // restore the machine before printing
    let any_failed = failed.iter().any(|f| !f.is_empty());
    let cols: Vec<(String, Vec<(String, f64)>)> = systems
        .iter()
        .zip(&results)
        .zip(&failed)
        .map(|((s, r), f)| {
            let mut figures = median_figures(r);
            if any_failed {
                figures.insert(0, ("runs left out (failed)".into(), f.len() as f64));
            }
            (s.to_string(), figures)
        })
        .collect();
    if c.json {
        let sys: Vec<_> = systems
            .iter()
            .zip(&results)
            .zip(&cols)
            .zip(&failed)
            .map(|(((s, r), (_, m)), f)| {
                json!({
                    "system": s.to_string(),
                    "config": s,
                    "median": m.iter().cloned().collect::<BTreeMap<_, _>>(),
                    "runs": r,
                    "failed_runs": f,
                })
            })
            .collect();
        let out = json!({
            "command": command,
            "spec": spec,
            "uzswap_memory_high": c.uzswap_memory_high,
            "runs": c.runs,
            "settings": settings,
            "systems": sys,
        });
        println!("{out}");
    } else {
        print_table(&title, &settings, &cols);
    }
    Ok(())
}

/// For a title: uzswap's own limit, if it has one.
fn uzswap_limit_note(c: &CommonArgs) -> String {
    c.uzswap_memory_high
        .map(|l| format!(" (uzswap under {:.1} MiB)", l as f64 / (1 << 20) as f64))
        .unwrap_or_default()
}

/// Run `uzswap bench usemem`: the systems alternately, medians side by side.
pub fn usemem(a: &UsememArgs) -> Result<()> {
    check_common(&a.common)?;
    if a.workers == 0 || a.size < 4096 {
        bail!("--workers must be at least 1 and --size at least 4K");
    }
    let systems = systems(&a.common, &["uzswap"])?;
    let spec = spec(
        &a.common,
        Workload::Usemem {
            workers: a.workers,
            size: a.size,
        },
    );
    let title = format!(
        "usemem: {} worker(s) x {} MiB under {} MiB{}, {} run(s) alternating",
        a.workers,
        a.size >> 20,
        a.common.memory_high >> 20,
        uzswap_limit_note(&a.common),
        a.common.runs
    );
    side_by_side("usemem", title, &a.common, &systems, spec)
}

/// Run `uzswap bench mix`: the systems alternately, medians side by side.
pub fn mix(a: &MixArgs) -> Result<()> {
    check_common(&a.common)?;
    check_seconds(a.seconds)?;
    if a.size < 3 * 4096 {
        bail!("--size must hold at least three pages");
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
        "mix: {} MiB in three areas under {} MiB{}, {} s of random accesses, {} run(s) alternating",
        a.size >> 20,
        a.common.memory_high >> 20,
        uzswap_limit_note(&a.common),
        a.seconds,
        a.common.runs
    );
    side_by_side("mix", title, &a.common, &systems, spec)
}

/// Heap sizes of the sweep: 75% to 175% of the limit in 12.5% steps.
pub fn sweep_sizes(limit: u64) -> Vec<(f64, u64)> {
    (0..9)
        .map(|i| {
            let pct = 75.0 + 12.5 * i as f64;
            (pct, (limit as f64 * pct / 100.0) as u64 / 4096 * 4096)
        })
        .collect()
}

/// Run `uzswap bench sweep`: each system on heaps of 75% to 175% of the limit.
pub fn sweep(a: &SweepArgs) -> Result<()> {
    let c = &a.common;
    check_common(c)?;
    check_seconds(a.seconds)?;
    if c.uzswap_memory_high.is_some() {
        bail!("--uzswap-memory-high is for usemem and mix: sweep sizes its heaps from one limit");
    }
    let systems = systems(c, &["uzswap-nocompress", "uzswap", "uzswap-writethrough"])?;
    let sizes = sweep_sizes(c.memory_high);
    let max_area = sizes.last().map(|s| s.1 as usize).unwrap_or(0);
    for (_, size) in &sizes {
        let s = spec(
            c,
            Workload::Heap {
                size: *size,
                seconds: a.seconds,
            },
        );
        check_uzswap_limits(c, &systems, &s)?;
    }
    let mut runner = Runner::new(c, &systems, max_area)?;
    // cells[size][system] = median accesses/s, runs kept for JSON.
    let mut cells: Vec<Vec<f64>> = Vec::new();
    let mut all: Vec<serde_json::Value> = Vec::new();
    for (pct, size) in &sizes {
        let spec = spec(
            c,
            Workload::Heap {
                size: *size,
                seconds: a.seconds,
            },
        );
        let (results, failed) = alternate(&mut runner, &systems, &spec, c.runs, c.json)?;
        let row: Vec<f64> = results
            .iter()
            .map(|rs| median(rs.iter().filter_map(|r| r.output.accesses_per_s).collect()))
            .collect();
        all.push(json!({
            "heap_percent": pct,
            "heap_bytes": size,
            "accesses_per_s": systems.iter().zip(&row)
                .map(|(s, v)| (s.to_string(), *v)).collect::<BTreeMap<_, _>>(),
            "runs": systems.iter().zip(&results)
                .map(|(s, r)| (s.to_string(), r)).collect::<BTreeMap<_, _>>(),
            "failed_runs": systems.iter().zip(&failed)
                .map(|(s, f)| (s.to_string(), f)).collect::<BTreeMap<_, _>>(),
        }));
        cells.push(row);
    }
    let settings = runner.settings();
    drop(runner);
    let best = cells
        .iter()
        .flatten()
        .copied()
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    if c.json {
        println!(
            "{}",
            json!({
                "command": "sweep",
                "memory_high": c.memory_high,
                "seconds": a.seconds,
                "runs": c.runs,
                "settings": settings,
                "systems": systems.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                "best_accesses_per_s": best,
                "cells": all,
            })
        );
        return Ok(());
    }
    println!(
        "sweep: heap from 75% to 175% of {} MiB, {} s of random accesses a cell, median of {}; \
         accesses/s normalized to the best cell ({best:.0}/s)",
        c.memory_high >> 20,
        a.seconds,
        c.runs
    );
    let s: Vec<String> = settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!("settings: {}", s.join(" "));
    let mut header = format!("{:>6} {:>8}", "heap%", "MiB");
    for s in &systems {
        header.push_str(&format!("  {:>24}", s.to_string()));
    }
    println!("{header}");
    for ((pct, size), row) in sizes.iter().zip(&cells) {
        let mut line = format!("{pct:>6.1} {:>8}", size >> 20);
        for v in row {
            line.push_str(&format!("  {:>24}", format!("{:.3} ({v:.0}/s)", v / best)));
        }
        println!("{line}");
    }
    Ok(())
}

/// Run `uzswap bench worker`: one workload on plain memory, for a kernel peer.
pub fn worker(a: &WorkerArgs) -> Result<()> {
    super::worker::run(&a.spec)
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
        assert_eq!(s[8].1 % 4096, 0);
    }

    #[test]
    fn medians() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0]), 2.5);
        assert!(median(vec![]).is_nan());
    }
}
