//! The arguments of `uzswap bench usemem | mix | sweep` and of their hidden workers, as clap
//! takes them, and their value parsers (`count_in` and `parse_seconds` serve the other
//! benchmarks too).

use std::path::PathBuf;

use super::peer::Reclaim;
use super::systems::{compressor_arg, FaultService, SystemName};
use crate::size::{parse_folio_size, parse_size};

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
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub uzswap_max_pool_percent: u32,
    /// Threads that may compress one of uzswap's folios at once, 1 to 8 (zswap's
    /// `compress_threads`: folios of 16 pages or more are cut in parts of at least 8).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1,
        value_parser = clap::value_parser!(u32).range(1..=8),
    )]
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

/// A whole number from `min` to `max`, for clap.
pub(crate) fn count_in(text: &str, min: usize, max: usize) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(format!("give a whole number from {min} to {max}")),
    }
}

/// An exponent from 0 to 10, for clap.
fn parse_exponent(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && (0.0..=10.0).contains(&s) => Ok(s),
        _ => Err("give an exponent from 0 to 10 (e.g. 1 or 0.8)".into()),
    }
}

/// A number of seconds, 0 or more, for clap.
fn parse_mark_seconds(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s >= 0.0 => Ok(s),
        _ => Err("give a number of seconds, 0 (no marks) or more (e.g. 5)".into()),
    }
}

/// A number of seconds above 0, for clap.
pub(crate) fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 => Ok(s),
        _ => Err("give a number of seconds above 0 (e.g. 10 or 0.5)".into()),
    }
}
