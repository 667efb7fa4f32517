//! The systems a benchmark compares, and the result every system fills for one run.
//!
//! `Uzswap` runs the workload on a uzswap region in this process (see [`run_uzswap`]); the
//! kernel systems run it on plain memory in a worker process under a memory cgroup
//! (`peer.rs`).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use zswap::compress::{Algorithm, CompressorSpec, UnknownCompressor};

use super::stats::CpuTimes;
use super::workload::WorkloadOutput;

/// A system or a codec named on the command line that does not parse, or that this build does
/// not have; the message says what it takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SystemError {
    /// A codec this build does not have, or a malformed name.
    #[error(transparent)]
    UnknownCompressor(#[from] UnknownCompressor),
    /// A level given to a codec that takes none.
    #[error("compressor '{text}': {name} takes no level (give '{name}')")]
    NoLevel {
        /// The compressor as given.
        text: String,
        /// The codec.
        name: String,
    },
    /// A level the codec does not take.
    #[error("compressor '{text}': {name}'s levels are {min}..={max} (default {default})")]
    Level {
        /// The compressor as given.
        text: String,
        /// The codec.
        name: String,
        /// Its lowest level.
        min: i32,
        /// Its highest level.
        max: i32,
        /// Its default level.
        default: i32,
    },
    /// `NAME:` with nothing after the ':'.
    #[error("system '{0}': empty compressor after ':'")]
    EmptyCompressor(String),
    /// A name that is none of [`SYSTEM_NAMES`].
    #[error("unknown system '{0}': expected one of {names}", names = SYSTEM_NAMES.join(", "))]
    UnknownSystem(String),
    /// A compressor given to a system that compresses nothing.
    #[error("system '{0}' compresses nothing: no ':COMPRESSOR' allowed")]
    CompressesNothing(String),
}

/// A codec as `NAME` or `NAME:LEVEL`. A codec this build has, given a level it does not
/// take, is answered with its levels (the engine's parser calls the whole text unknown).
pub fn parse_compressor(text: &str) -> Result<CompressorSpec, SystemError> {
    if let Some((name, level)) = text.trim().split_once(':') {
        if let Some(a) = Algorithm::ALL.iter().find(|a| a.name() == name) {
            let levels = a.levels();
            if !level.parse().is_ok_and(|l: i32| levels.contains(&l)) {
                let (text, name) = (text.to_string(), name.to_string());
                if levels.start() == levels.end() {
                    return Err(SystemError::NoLevel { text, name });
                }
                return Err(SystemError::Level {
                    text,
                    name,
                    min: *levels.start(),
                    max: *levels.end(),
                    default: a.default_level(),
                });
            }
        }
    }
    Ok(text.parse()?)
}

/// [`parse_compressor`] for clap: the text as given, once it parses.
pub fn compressor_arg(text: &str) -> Result<String, SystemError> {
    parse_compressor(text).map(|_| text.to_string())
}

/// How a uzswap region treats the pool: the three columns of the writethrough patch's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UzswapMode {
    /// Compressed pool in front of the swap file, written back when the pool is full.
    Writeback,
    /// Compressed pool, every page also written to the swap file.
    Writethrough,
    /// No compression: cold pages go to the swap file only.
    NoCompression,
    /// Compressed pool, written through while it is above its accept threshold and its pages
    /// have been leaving for the disk, written back otherwise (`writethrough=auto`).
    Adaptive,
}

/// Who serves a uzswap region's faults in a benchmark (`RegionConfig::in_thread_faults`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum FaultService {
    /// The faulting thread itself, from its SIGBUS handler: no wake-ups. A benchmark's
    /// memory is never handed to a system call, which would fail with EFAULT on an evicted
    /// page.
    #[default]
    InThread,
    /// The region's fault handler threads, woken for each fault.
    Handlers,
}

/// The configuration of a uzswap region for a benchmark run (the parts the spec does not say).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UzswapConfig {
    /// Codec name as `CompressorSpec` parses it (`lz4`, `zstd:-1`, ...).
    pub compressor: String,
    /// Writeback, writethrough, or no compression.
    pub mode: UzswapMode,
    /// The pool's share of the region's limit, in percent (the pool is charged to the limit).
    #[serde(default = "default_pool_percent")]
    pub max_pool_percent: u32,
    /// Who serves the region's faults.
    #[serde(default)]
    pub faults: FaultService,
    /// Threads that may compress one folio at once (zswap's `compress_threads`).
    #[serde(default = "default_compress_threads")]
    pub compress_threads: u32,
    /// Refault detection protects the working set (region's `policies.workingset`).
    #[serde(default = "default_workingset")]
    pub workingset: bool,
    /// Where written-back pages go, and in what form.
    #[serde(default)]
    pub tier: SwapTier,
}

/// Where a uzswap region's written-back pages go, and in what form (`RegionConfig`'s
/// `swap_format`, `encrypt` and `segment_device`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SwapTier {
    /// Segments on the swap file, sealed (the default).
    #[default]
    Segments,
    /// Segments on the swap file, in the clear.
    PlainSegments,
    /// Segments on the swap file, sealed, each object re-encoded with zstd:-1
    /// (`writeback_compressor`).
    ReencodedSegments,
    /// A page a slot, decompressed (the kernel's writeback).
    Pages,
    /// Sealed segments in a Redis Cluster at this address.
    Redis(String),
}

fn default_workingset() -> bool {
    true
}

fn default_compress_threads() -> u32 {
    1
}

fn default_pool_percent() -> u32 {
    20
}

/// A system a benchmark runs on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "system", rename_all = "kebab-case")]
pub enum System {
    /// A uzswap region, configured so.
    Uzswap(UzswapConfig),
    /// Plain memory in a cgroup, swap file, the kernel's zswap on with this compressor.
    KernelZswap {
        /// The kernel's name for the compressor (`lzo`, `lz4`, `zstd`, ...).
        compressor: String,
    },
    /// Plain memory in a cgroup, swap file, zswap off.
    KernelSwap,
}

impl System {
    /// Whether it is a kernel peer (run in a worker process under a cgroup).
    pub fn is_kernel(&self) -> bool {
        !matches!(self, System::Uzswap(_))
    }
}

impl fmt::Display for System {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            System::Uzswap(c) if c.tier != SwapTier::Segments => {
                let tier = match c.tier {
                    SwapTier::PlainSegments => "plain",
                    SwapTier::ReencodedSegments => "reencode",
                    SwapTier::Pages => "pages",
                    _ => "redis",
                };
                write!(f, "uzswap-{tier}:{}", c.compressor)
            }
            System::Uzswap(c) => match c.mode {
                UzswapMode::Writeback => write!(f, "uzswap:{}", c.compressor),
                UzswapMode::Writethrough => write!(f, "uzswap-writethrough:{}", c.compressor),
                UzswapMode::NoCompression => write!(f, "uzswap-nocompress"),
                UzswapMode::Adaptive => write!(f, "uzswap-adaptive:{}", c.compressor),
            },
            System::KernelZswap { compressor } => write!(f, "kernel-zswap:{compressor}"),
            System::KernelSwap => write!(f, "kernel-swap"),
        }
    }
}

/// A system as named on the command line: `NAME[:COMPRESSOR]`, the compressor defaulting to
/// the command's `--compressor` (uzswap) or `--kernel-compressor` (kernel zswap).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemName {
    /// One of `SYSTEM_NAMES`.
    pub name: String,
    /// The compressor after the ':', if one was given.
    pub compressor: Option<String>,
}

/// Every system name the command line takes.
pub const SYSTEM_NAMES: [&str; 10] = [
    "uzswap",
    "uzswap-pages",
    "uzswap-plain",
    "uzswap-reencode",
    "uzswap-redis",
    "uzswap-writethrough",
    "uzswap-adaptive",
    "uzswap-nocompress",
    "kernel-zswap",
    "kernel-swap",
];

impl FromStr for SystemName {
    type Err = SystemError;
    fn from_str(s: &str) -> Result<Self, SystemError> {
        let (name, comp) = match s.split_once(':') {
            Some((n, c)) if !c.is_empty() => (n, Some(c.to_string())),
            Some(_) => return Err(SystemError::EmptyCompressor(s.to_string())),
            None => (s, None),
        };
        if !SYSTEM_NAMES.contains(&name) {
            return Err(SystemError::UnknownSystem(name.to_string()));
        }
        if comp.is_some() && matches!(name, "kernel-swap" | "uzswap-nocompress") {
            return Err(SystemError::CompressesNothing(name.to_string()));
        }
        // uzswap's codecs are known here; the kernel's only to the kernel (checked when the
        // machine is set up, before any run).
        if let (Some(c), true) = (&comp, name.starts_with("uzswap")) {
            parse_compressor(c)?;
        }
        Ok(SystemName {
            name: name.to_string(),
            compressor: comp,
        })
    }
}

impl SystemName {
    /// The system this name stands for, the compressor defaulting to `uzswap_compressor` or
    /// `kernel_compressor`, the uzswap pool limit `uzswap_pool_percent`; `uzswap-redis` on the
    /// cluster at `redis` (checked by the caller).
    pub fn resolve(
        &self,
        uzswap_compressor: &str,
        kernel_compressor: &str,
        uzswap_pool_percent: u32,
        redis: Option<&str>,
    ) -> System {
        let comp = |d: &str| self.compressor.clone().unwrap_or_else(|| d.to_string());
        let uz = |mode| {
            System::Uzswap(UzswapConfig {
                compressor: comp(uzswap_compressor),
                mode,
                max_pool_percent: uzswap_pool_percent,
                faults: FaultService::default(),
                compress_threads: default_compress_threads(),
                workingset: default_workingset(),
                tier: SwapTier::Segments,
            })
        };
        let tiered = |tier| match uz(UzswapMode::Writeback) {
            System::Uzswap(c) => System::Uzswap(UzswapConfig { tier, ..c }),
            other => other,
        };
        match self.name.as_str() {
            "uzswap" => uz(UzswapMode::Writeback),
            "uzswap-pages" => tiered(SwapTier::Pages),
            "uzswap-plain" => tiered(SwapTier::PlainSegments),
            "uzswap-reencode" => tiered(SwapTier::ReencodedSegments),
            "uzswap-redis" => tiered(SwapTier::Redis(redis.unwrap_or_default().to_string())),
            "uzswap-writethrough" => uz(UzswapMode::Writethrough),
            "uzswap-nocompress" => uz(UzswapMode::NoCompression),
            "uzswap-adaptive" => uz(UzswapMode::Adaptive),
            "kernel-zswap" => System::KernelZswap {
                compressor: comp(kernel_compressor),
            },
            _ => System::KernelSwap,
        }
    }
}

/// Fault latency in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// The median.
    pub p50_us: f64,
    /// The 99th percentile.
    pub p99_us: f64,
    /// The longest.
    pub max_us: f64,
}

/// One run of one workload on one system. Every system fills what it can; the `Option`
/// fields are the ones only some systems can measure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadResult {
    /// `System`'s display name.
    pub system: String,
    /// Phases, accesses/s, check: what the workload kernel measured.
    pub output: WorkloadOutput,
    /// CPU time of the workload's threads (the worker process for a kernel peer).
    pub cpu: CpuTimes,
    /// CPU time of the helpers working for it outside its threads: uzswap's fault handlers and
    /// reclaim; the page-out controller of a kernel peer (where the kernel's compression then
    /// runs). None when there is none.
    pub helper_cpu: Option<CpuTimes>,
    /// Counter deltas around the run (`zswpout`, `pswpin`, `thp_64kB_zswpout`, ... for the
    /// kernel; the engine's own counters under the same names for uzswap).
    pub stats: BTreeMap<String, i64>,
    /// Gauges at the end of the run, before the memory is freed (zswap debugfs: pool size,
    /// stored pages; uzswap: pool bytes, resident pages).
    pub gauges: BTreeMap<String, i64>,
    /// The memory limit the workload ran under, in bytes.
    pub limit_bytes: u64,
    /// Largest sampled resident set of the workload (VmRSS), in bytes.
    pub max_rss_bytes: Option<u64>,
    /// Largest charged memory: the cgroup's max usage for a peer (its compressed pool is not
    /// charged under v1), resident + swap cache + pool for uzswap.
    pub max_usage_bytes: Option<u64>,
    /// Largest memory the workload held, charged or not: uzswap's charged bytes (its pool is
    /// charged); a kernel peer's cgroup usage plus the zswap pool, sampled together.
    #[serde(default)]
    pub max_memory_bytes: Option<u64>,
    /// Settings that shape the figure (`page_cluster`, `thp_enabled`, `reclaim`, ...).
    pub settings: BTreeMap<String, String>,
    /// uzswap only: latency of a userfault, and pages brought in per fault.
    pub fault_latency: Option<Latency>,
    /// uzswap only: pages installed per fault.
    pub pages_per_fault: Option<f64>,
}

impl WorkloadResult {
    /// A result with only the workload's own figures, for a system to fill in the rest.
    pub fn new(system: &System, output: WorkloadOutput, limit_bytes: u64) -> WorkloadResult {
        WorkloadResult {
            system: system.to_string(),
            output,
            cpu: CpuTimes::default(),
            helper_cpu: None,
            stats: BTreeMap::new(),
            gauges: BTreeMap::new(),
            limit_bytes,
            max_rss_bytes: None,
            max_usage_bytes: None,
            max_memory_bytes: None,
            settings: BTreeMap::new(),
            fault_latency: None,
            pages_per_fault: None,
        }
    }
}

pub use super::region_worker::run_uzswap;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrong_level_says_the_levels() {
        let e = parse_compressor("zstd:99").unwrap_err().to_string();
        assert!(e.contains("zstd's levels are -131072..=22"), "{e}");
        let e = parse_compressor("lz4:3").unwrap_err().to_string();
        assert!(e.contains("lz4 takes no level"), "{e}");
        let e = parse_compressor("foo").unwrap_err().to_string();
        assert!(e.contains("unknown compressor 'foo'"), "{e}");
        assert_eq!(parse_compressor("zstd:-1").unwrap().level, -1);
        let e = "uzswap:zstd:x"
            .parse::<SystemName>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("zstd's levels"), "{e}");
        assert!("kernel-zswap:zstd:x".parse::<SystemName>().is_ok());
    }
}
