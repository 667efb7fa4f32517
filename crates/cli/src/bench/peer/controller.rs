//! The monitor thread of a run: it samples the worker's RSS, its cgroup's usage and the
//! kernel's zswap pool, follows its OOM waits (`OomWatch`), and, as the page-out controller
//! (`Reclaim::Controller`), pages out random 1 MiB chunks of the worker's area with
//! `process_madvise(MADV_PAGEOUT)` while the cgroup's usage is above the target. What it saw
//! comes back as a [`MonitorReport`] when the run stops it.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use zswap::PAGE_SIZE;

use super::cgroup::{Cgroup, OomWatch};
use super::setting::read_trim;
use super::PeerError;
use crate::bench::stats::{self, CpuTimes};

/// What the controller pages out at once: a random chunk of the worker's area.
const CHUNK: usize = 1 << 20;

/// What the monitor saw over a run.
#[derive(Debug, Default)]
pub(super) struct MonitorReport {
    pub(super) max_rss: u64,
    pub(super) max_usage_sampled: u64,
    /// Largest cgroup usage (over the baseline) plus zswap pool, sampled together.
    pub(super) max_memory: u64,
    /// Largest zswap pool (over its baseline), sampled.
    pub(super) max_pool: u64,
    pub(super) cpu: Option<CpuTimes>,
    pub(super) pageout_calls: u64,
    pub(super) pageout_bytes: u64,
    pub(super) pageout_errors: u64,
    pub(super) last_error: Option<String>,
    /// OOM waits seen (samples 10 ms apart that found `under_oom 1` after one that did not,
    /// or after pages were charged), and the longest, sampled.
    pub(super) oom_waits: u64,
    pub(super) longest_oom_wait: Duration,
    /// The worker was killed after an OOM wait of
    /// [`OOM_WAIT_MAX`](super::cgroup::OOM_WAIT_MAX).
    pub(super) oom_wait_gave_up: bool,
}

/// What the monitor of a run watches, and the targets it holds the worker to.
pub(super) struct Monitor {
    pub(super) pid: i32,
    pub(super) pidfd: OwnedFd,
    pub(super) area: (usize, usize),
    pub(super) usage: PathBuf,
    /// The cgroup's usage before the workload allocated (binary, corpus), and the zswap pool
    /// then (another user's, if any).
    pub(super) baseline: u64,
    pub(super) pool_baseline: u64,
    pub(super) target: u64,
    pub(super) controller: bool,
    /// The cgroup's `memory.oom_control`, watched for OOM waits, and its `memory.stat`, for
    /// the pages charged meanwhile.
    pub(super) oom_control: PathBuf,
    pub(super) stat: PathBuf,
    /// The cgroup's `memory.limit_in_bytes` and its value.
    pub(super) limit: PathBuf,
    pub(super) hard: u64,
    pub(super) stop: Arc<AtomicBool>,
}

/// What a monitor holds a run to, and measures it from.
pub(super) struct Targets {
    /// The worker's area the controller pages out, or `(0, 0)`.
    pub(super) area: (usize, usize),
    pub(super) baseline: u64,
    pub(super) pool_baseline: u64,
    pub(super) target: u64,
    /// `memory.limit_in_bytes` as set.
    pub(super) hard: u64,
    /// Be the page-out controller (`Reclaim::Controller`).
    pub(super) controller: bool,
}

/// Watch process `pid` in `cg` on a thread of its own: setting the flag returned stops it,
/// and the thread returns what it saw.
pub(super) fn start_monitor(
    pid: i32,
    cg: &Cgroup,
    t: Targets,
) -> Result<(std::thread::JoinHandle<MonitorReport>, Arc<AtomicBool>), PeerError> {
    let pidfd = rustix::process::pidfd_open(
        rustix::process::Pid::from_raw(pid).expect("child pid > 0"),
        rustix::process::PidfdFlags::empty(),
    )
    .map_err(PeerError::Pidfd)?;
    let stop = Arc::new(AtomicBool::new(false));
    let mon = Monitor {
        pid,
        pidfd,
        area: t.area,
        usage: cg.file("memory.usage_in_bytes"),
        baseline: t.baseline,
        pool_baseline: t.pool_baseline,
        target: t.target,
        controller: t.controller,
        oom_control: cg.file("memory.oom_control"),
        stat: cg.file("memory.stat"),
        limit: cg.file("memory.limit_in_bytes"),
        hard: t.hard,
        stop: stop.clone(),
    };
    Ok((std::thread::spawn(move || monitor(mon)), stop))
}

/// The kernel's compressed pool, in bytes (zswap debugfs; machine-wide, and this workload is
/// the machine's only zswap user while it runs).
pub(super) fn zswap_pool_bytes() -> u64 {
    std::fs::read_to_string(Path::new(stats::ZSWAP_DEBUGFS).join("pool_total_size"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

pub(super) fn vm_rss(pid: i32) -> Option<u64> {
    let t = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: u64 = t
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// Sample RSS, cgroup usage and the zswap pool; as the controller, page out random 1 MiB
/// chunks of the worker's area while usage is above the target.
fn monitor(m: Monitor) -> MonitorReport {
    let thread_stat = Path::new("/proc/thread-self/stat");
    let cpu0 = CpuTimes::from_stat_file(thread_stat);
    let mut rep = MonitorReport::default();
    let mut rng = SmallRng::seed_from_u64(m.pid as u64);
    let (start, len) = m.area;
    let chunks = len.div_ceil(CHUNK).max(1);
    let mut last_sample = Instant::now() - Duration::from_secs(1);
    let mut oom = OomWatch::default();
    while !m.stop.load(Ordering::Relaxed) {
        let usage: u64 = read_trim(&m.usage)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        rep.max_usage_sampled = rep.max_usage_sampled.max(usage);
        if last_sample.elapsed() >= Duration::from_millis(10) {
            last_sample = Instant::now();
            match vm_rss(m.pid) {
                Some(r) => rep.max_rss = rep.max_rss.max(r),
                None => break,
            }
            // The pool is not charged to a v1 cgroup: what the workload held in all.
            let pool = zswap_pool_bytes().saturating_sub(m.pool_baseline);
            rep.max_pool = rep.max_pool.max(pool);
            let held = usage.saturating_sub(m.baseline) + pool;
            rep.max_memory = rep.max_memory.max(held);
            if !oom.sample(&m, &mut rep) {
                // The wake-ups below have not ended a wait: give the run up.
                rep.oom_wait_gave_up = true;
                let _ = rustix::process::pidfd_send_signal(
                    m.pidfd.as_fd(),
                    rustix::process::Signal::KILL,
                );
                break;
            }
        }
        if m.controller && usage > m.target {
            // One random 1 MiB chunk per MiB of excess (up to 16) in one call: a fast writer
            // (a fill at 1 GB/s) outruns one chunk a call, and at the hard limit the cgroup's
            // own reclaim takes over, which is what OOM-killed random workloads.
            let n = ((usage.saturating_sub(m.target) as usize) / CHUNK).clamp(1, 16);
            let ranges: Vec<(usize, usize)> = (0..n)
                .map(|_| {
                    let c = rng.gen_range(0..chunks);
                    let addr = (start + c * CHUNK) / PAGE_SIZE * PAGE_SIZE;
                    let end = (start + c * CHUNK + CHUNK).min(start + len);
                    (addr, end - addr)
                })
                .collect();
            rep.pageout_calls += 1;
            match uffd::process::process_madvise(
                m.pidfd.as_fd(),
                &ranges,
                uffd::process::Advice::PageOut,
            ) {
                Ok(n) => rep.pageout_bytes += n as u64,
                Err(e) if e.raw_os_error() == Some(libc_esrch()) => break,
                Err(e) => {
                    rep.pageout_errors += 1;
                    rep.last_error = Some(e.to_string());
                }
            }
        } else {
            std::thread::sleep(Duration::from_millis(1));
        }
        oom.wake(&m);
    }
    oom.finish(&m, &mut rep);
    rep.cpu = CpuTimes::from_stat_file(thread_stat)
        .zip(cpu0)
        .map(|(a, b)| a.minus(b));
    rep
}

fn libc_esrch() -> i32 {
    rustix::io::Errno::SRCH.raw_os_error()
}
