//! The uzswap side of the workload benchmarks: the workload runs on a managed region under the
//! limit in a child process of its own (`uzswap bench uzswap-worker`), and the figures are
//! filled in the same shape as a kernel peer's: the engine's counters under the kernel's names,
//! CPU time of the workload's threads and of uzswap's own (fault handlers, kswapd, shrink
//! worker), sampled RSS and the region's own accounting, fault latency and pages per fault.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use region::{Region, RegionConfig, RegionError, SwapFormat, Usage, Writethrough};
use zswap::compress::{CompressorSpec, UnknownCompressor};
use zswap::stats::StatsSnapshot;

use super::stats::CpuTimes;
use super::systems::{
    FaultService, Latency, SwapTier, System, UzswapConfig, UzswapMode, WorkloadResult,
};
use super::workload::{run_on_memory, Content, WorkloadError, WorkloadSpec};
use crate::report::AlreadyTold;

/// Why a run on the uzswap side failed: starting or hearing from its child process (the
/// parent's side), or the run itself (the child's side, told by the parent as the child's
/// "error" line).
#[derive(Debug, thiserror::Error)]
pub enum UzswapSideError {
    /// This program's own path is unknown (the child runs it again).
    #[error("finding the uzswap binary")]
    Exe(#[source] std::io::Error),
    /// The spec or the configuration does not encode for the child, or its result does not
    /// encode for the parent.
    #[error("encoding for the uzswap worker")]
    Encode(#[source] serde_json::Error),
    /// The child could not be started.
    #[error("starting the uzswap worker")]
    Start(#[source] std::io::Error),
    /// Waiting for the child failed.
    #[error("waiting for the uzswap worker")]
    Wait(#[source] std::io::Error),
    /// The child's error, as its "error" line said it.
    #[error("{0}")]
    Worker(String),
    /// The child ended without a result line.
    #[error("the uzswap worker ended without a result ({0})")]
    NoResult(std::process::ExitStatus),
    /// The child's result line does not parse.
    #[error("bad result from the uzswap worker")]
    BadResult(#[source] serde_json::Error),
    /// The spec or the configuration the parent gave does not parse.
    #[error("bad workload spec or configuration")]
    BadInput(#[source] serde_json::Error),
    /// The configuration's compressor is not one this build has.
    #[error(transparent)]
    Compressor(#[from] UnknownCompressor),
    /// The region could not be made.
    #[error("creating the uzswap region")]
    Region(#[source] RegionError),
    /// The workload could not run, or its check failed.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
}

/// The value of `key` (in kB, as /proc prints it) in the /proc file `path`, in bytes.
pub(crate) fn proc_kb(path: &str, key: &str) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Set in the environment, the uzswap side prints where its memory is once a second (on
/// stderr): the region's usage and the pool's contents while the workload runs, which the
/// figures at the end (after the workload's verification pass) do not show.
pub const TRACE_ENV: &str = "UZSWAP_BENCH_TRACE";

fn trace_line(t0: Instant, u: &Usage, stats: &StatsSnapshot) {
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    eprintln!(
        "trace {:>5.1} s: resident {:.1} MiB, staged {:.1} MiB, pool {:.1} MiB, \
         metadata {:.1} MiB; stored_pages {}, stored_incompressible_pages {}, \
         written_back_pages {}",
        t0.elapsed().as_secs_f64(),
        mib(u.resident),
        mib(u.staged),
        mib(u.pool),
        mib(u.metadata),
        stats.get("stored_pages"),
        stats.get("stored_incompressible_pages"),
        stats.get("written_back_pages"),
    );
}

/// VmRSS of this process, in bytes.
fn rss() -> u64 {
    proc_kb("/proc/self/status", "VmRSS:")
}

/// The system's page cache (`Cached` in /proc/meminfo), in bytes: a swap file's pages would
/// sit there, in memory but outside any limit of ours (the kernel's swap writes bypass it).
fn page_cache() -> u64 {
    proc_kb("/proc/meminfo", "Cached:")
}

/// CPU of this process's threads, split: uzswap's own threads (named `uzswap-*` and
/// `zswap-shrink`) and the rest.
fn cpu_split() -> (CpuTimes, CpuTimes) {
    let (mut ours, mut rest) = (CpuTimes::default(), CpuTimes::default());
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return (ours, rest);
    };
    for t in tasks.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        let Some(c) = CpuTimes::from_stat_file(&t.path().join("stat")) else {
            continue;
        };
        let acc = if comm.starts_with("uzswap-") || comm.starts_with("zswap-shrink") {
            &mut ours
        } else {
            &mut rest
        };
        acc.user_s += c.user_s;
        acc.sys_s += c.sys_s;
    }
    (ours, rest)
}

fn process_cpu() -> CpuTimes {
    CpuTimes::from_stat_file(Path::new("/proc/self/stat")).unwrap_or_default()
}

/// Run `spec` on a uzswap region in a child process (`uzswap bench uzswap-worker`): if
/// uzswap stops its process (it does rather than let a program read lost data), only the
/// child goes, and this process still restores every kernel setting the peers changed. The
/// child's stderr (warnings, the trace) is passed on above any progress bar; an error of the
/// child's comes back as its "error" line, to be told once, by this process.
pub fn run_uzswap(
    spec: &WorkloadSpec,
    config: &UzswapConfig,
) -> Result<WorkloadResult, UzswapSideError> {
    let exe = std::env::current_exe().map_err(UzswapSideError::Exe)?;
    let spec_json = serde_json::to_string(spec).map_err(UzswapSideError::Encode)?;
    let config_json = serde_json::to_string(config).map_err(UzswapSideError::Encode)?;
    let mut child = std::process::Command::new(exe)
        .args(["bench", "uzswap-worker", &spec_json, &config_json])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(UzswapSideError::Start)?;
    let relay = child.stderr.take().map(super::progress::relay);
    let out = child.wait_with_output();
    if let Some(r) = relay {
        let _ = r.join();
    }
    let out = out.map_err(UzswapSideError::Wait)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if let Some(e) = stdout.lines().find_map(|l| l.strip_prefix("error ")) {
        return Err(UzswapSideError::Worker(e.to_string()));
    }
    match stdout.lines().find_map(|l| l.strip_prefix("result ")) {
        Some(json) if out.status.success() => {
            serde_json::from_str(json).map_err(UzswapSideError::BadResult)
        }
        _ => Err(UzswapSideError::NoResult(out.status)),
    }
}

/// The child's side of `run_uzswap`: run here and print `result JSON`, or `error MSG` (on
/// stdout, for the parent to tell) and end with [`AlreadyTold`].
pub fn uzswap_worker(spec_json: &str, config_json: &str) -> Result<(), AlreadyTold> {
    let run = || -> Result<String, UzswapSideError> {
        let spec: WorkloadSpec =
            serde_json::from_str(spec_json).map_err(UzswapSideError::BadInput)?;
        let config: UzswapConfig =
            serde_json::from_str(config_json).map_err(UzswapSideError::BadInput)?;
        let result = run_uzswap_here(&spec, &config)?;
        serde_json::to_string(&result).map_err(UzswapSideError::Encode)
    };
    match run() {
        Ok(json) => {
            println!("result {json}");
            Ok(())
        }
        Err(e) => {
            println!("error {}", crate::report::error_line(&e));
            Err(AlreadyTold)
        }
    }
}

/// The region configuration of the uzswap side (the compressor aside: it is parsed where
/// the region is made).
fn region_config(spec: &WorkloadSpec, config: &UzswapConfig) -> RegionConfig {
    RegionConfig::new(spec.memory_high)
        .folio_size(spec.folio_size)
        .writethrough(match config.mode {
            UzswapMode::Writethrough => Writethrough::On,
            UzswapMode::Adaptive => Writethrough::Auto,
            UzswapMode::Writeback | UzswapMode::NoCompression => Writethrough::Off,
        })
        .max_pool_percent(config.max_pool_percent)
        .compress_threads(config.compress_threads)
        .workingset(config.workingset)
        .fault_threads(2)
        .in_thread_faults(config.faults == FaultService::InThread)
        .swap_format(match config.tier {
            SwapTier::Pages => SwapFormat::Pages,
            _ => SwapFormat::Segments,
        })
        .encrypt(!matches!(
            config.tier,
            SwapTier::Pages | SwapTier::PlainSegments
        ))
        .writeback_compressor(match config.tier {
            SwapTier::ReencodedSegments => zswap::params::WritebackCompressor::Codec(
                "zstd:-1".parse().expect("zstd is always built"),
            ),
            _ => zswap::params::WritebackCompressor::Same,
        })
}

/// The least limit the uzswap side's region takes for `spec` (what it charges from the
/// start, plus four folios); None for an area no region holds (over 16 TiB).
pub fn min_limit(spec: &WorkloadSpec, config: &UzswapConfig) -> Option<u64> {
    Region::min_memory_limit(spec.area_bytes(), &region_config(spec, config))
}

/// `spec` with another folio size.
pub fn with_folio(spec: &WorkloadSpec, folio_size: usize) -> WorkloadSpec {
    WorkloadSpec {
        folio_size,
        ..spec.clone()
    }
}

/// What the uzswap side's region leaves for data under `spec`'s limit at the least: the limit
/// less the most the region charges for itself (its threads' folios and buffers, staging, all
/// in use), less four folios. None if the limit is below that.
pub fn data_room(spec: &WorkloadSpec, config: &UzswapConfig) -> Option<u64> {
    spec.memory_high.checked_sub(min_limit(spec, config)?)
}

fn run_uzswap_here(
    spec: &WorkloadSpec,
    config: &UzswapConfig,
) -> Result<WorkloadResult, UzswapSideError> {
    let system = System::Uzswap(config.clone());
    let compressor: CompressorSpec = config.compressor.parse()?;
    let content = if spec.needs_content() {
        Some(Content::load_or_builtin(spec.corpus.as_deref())?)
    } else {
        None
    };
    let mut cfg = region_config(spec, config).compressor(compressor);
    if let SwapTier::Redis(url) = &config.tier {
        let run = format!("bench-{}", redis_tier::new_run_id());
        let store = redis_tier::RedisSegments::connect(url, &run, Default::default())
            .map_err(|e| UzswapSideError::Worker(e.to_string()))?;
        cfg = cfg.segment_device(std::sync::Arc::new(store));
    }
    let mut region = Region::new(spec.area_bytes(), cfg).map_err(UzswapSideError::Region)?;
    match config.mode {
        // Every cold page goes straight to the swap file.
        UzswapMode::NoCompression => region.zswap().params().set_enabled(false),
        UzswapMode::Writeback | UzswapMode::Writethrough | UzswapMode::Adaptive => {}
    }
    let baseline = rss();
    let before_cpu = process_cpu();
    let (before_ours, _) = cpu_split();

    // Sample RSS (over the baseline) and the region's own accounting while the workload
    // runs; the sampler holds only a probe, the workload has the memory.
    let (max_rss, max_usage, done) = (AtomicU64::new(0), AtomicU64::new(0), AtomicBool::new(false));
    let (cache_baseline, max_cache) = (page_cache(), AtomicU64::new(0));
    let probe = region.usage_probe();
    let engine = region.zswap().clone();
    let trace = std::env::var_os(TRACE_ENV).is_some();
    let output = std::thread::scope(|s| {
        s.spawn(|| {
            let (t0, mut last_trace) = (Instant::now(), None::<Instant>);
            while !done.load(Relaxed) {
                max_rss.fetch_max(rss().saturating_sub(baseline), Relaxed);
                max_usage.fetch_max(probe.usage().total(), Relaxed);
                max_cache.fetch_max(page_cache().saturating_sub(cache_baseline), Relaxed);
                if trace && last_trace.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                    last_trace = Some(Instant::now());
                    trace_line(t0, &probe.usage(), &engine.stats());
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let r = run_on_memory(spec, content.as_ref(), region.as_mut_slice());
        done.store(true, Relaxed);
        r
    })?;

    let after_cpu = process_cpu();
    let (after_ours, _) = cpu_split();
    let ours = after_ours.minus(before_ours);
    let total = after_cpu.minus(before_cpu);
    let mut result = WorkloadResult::new(&system, output, spec.memory_high);
    result.helper_cpu = Some(ours);
    result.cpu = CpuTimes {
        user_s: total.user_s - ours.user_s,
        sys_s: total.sys_s - ours.sys_s,
    };
    let zs = engine.stats();
    let mut stats = BTreeMap::new();
    for (name, v) in &zs.lines {
        // hugepages-64kB/stats/zswpout -> thp_64kB_zswpout, as the kernel peer names it.
        let key = match name.strip_prefix("hugepages-") {
            Some(rest) => format!("thp_{}", rest.replace("/stats/", "_")),
            None => name.clone(),
        };
        if *v != 0 {
            stats.insert(key, *v as i64);
        }
    }
    let rs = region.stats();
    // The kernel's major faults, in uzswap's terms: faults served from the engine (pool,
    // disk or zero marks; not a first touch, not a staged folio moved back). A fault, not a page:
    // with large folios one brings back many (the kernel swaps in 4 KiB pages from a file).
    stats.insert(
        "pgmajfault".into(),
        (rs.faults_folio + rs.faults_pages) as i64,
    );
    result.stats = stats;
    let usage = region.usage();
    result.gauges = BTreeMap::from([
        ("pool_total_size".into(), usage.pool as i64),
        ("resident_bytes".into(), usage.resident as i64),
        ("staged_bytes".into(), usage.staged as i64),
        ("rss_baseline_bytes".into(), baseline as i64),
        // System-wide: on an otherwise idle machine, the swap file's cached pages.
        (
            "page_cache_growth_max_bytes".into(),
            max_cache.load(Relaxed) as i64,
        ),
    ]);
    // The region's own statistics that moved, under their own names (the latencies are
    // reported apart).
    result.gauges.extend(
        rs.lines()
            .into_iter()
            .filter(|&(name, v)| {
                v != 0
                    && (!name.starts_with("fault_latency")
                        || name.contains("_pool_")
                        || name.contains("_device_"))
            })
            .map(|(name, v)| (name.to_string(), v as i64)),
    );
    result.max_rss_bytes = Some(max_rss.load(Relaxed));
    result.max_usage_bytes = Some(max_usage.load(Relaxed));
    result.max_memory_bytes = result.max_usage_bytes;
    result.settings = BTreeMap::from([
        ("folio_size".into(), spec.folio_size.to_string()),
        ("compressor".into(), config.compressor.clone()),
        (
            "max_pool_percent".into(),
            config.max_pool_percent.to_string(),
        ),
        (
            "compress_threads".into(),
            config.compress_threads.to_string(),
        ),
        (
            "kernel_faults_served".into(),
            region.kernel_faults_served().to_string(),
        ),
        (
            "rss".into(),
            "max VmRSS over the baseline taken before the workload".into(),
        ),
    ]);
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    result.fault_latency = Some(Latency {
        p50_us: us(rs.fault_latency_p50),
        p99_us: us(rs.fault_latency_p99),
        max_us: us(rs.fault_latency_max),
    });
    result.pages_per_fault = Some(rs.pages_per_fault);
    Ok(result)
}
