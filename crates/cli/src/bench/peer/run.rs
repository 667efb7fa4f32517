//! One run of a workload on a kernel peer, tying the parts together: a cgroup of its own, the
//! worker started in it, the limits set once the worker's baseline (binary, corpus) is known,
//! the monitor thread while the workload runs, and the figures read before the worker exits
//! (its CPU time, the counters' deltas, the pool gauges).

use std::path::Path;
use std::sync::atomic::Ordering;

use super::cgroup::{Cgroup, OOM_WAIT_MAX};
use super::controller::{start_monitor, vm_rss, zswap_pool_bytes, Targets};
use super::protocol::{interrupted, worker_ended, Worker};
use super::setting::write_setting;
use super::{PeerError, PeerOptions, Reclaim};
use crate::bench::stats::{self, CpuTimes, Snapshot};
use crate::bench::systems::{System, WorkloadResult};
use crate::bench::worker;
use crate::bench::workload::{WorkloadOutput, WorkloadSpec};

/// Slack of the hard limit above the controller's target.
pub const HARD_LIMIT_SLACK: u64 = 64 << 20;

static RUN_SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// One run of `spec` on `system` (a kernel system; the machine set up for it): the worker
/// in a cgroup of its own, held to the limit as `opts.reclaim` says, and its figures.
pub(super) fn run_worker(
    opts: &PeerOptions,
    system: &System,
    spec: &WorkloadSpec,
) -> Result<WorkloadResult, PeerError> {
    let cg = Cgroup::create(&format!(
        "uzswap-peer-{}-{}",
        std::process::id(),
        RUN_SEQ.fetch_add(1, Ordering::SeqCst)
    ))?;
    let mut w = Worker::spawn(&opts.worker_exe, spec)?;
    let pid = w.pid();
    if let Some(v) = opts.swappiness {
        write_setting(&cg.file("memory.swappiness"), &v.to_string())?;
    }
    // Into the cgroup before it allocates anything: it waits for "start".
    write_setting(&cg.file("cgroup.procs"), &pid.to_string())?;
    let died = |w: &mut Worker, cg: &Cgroup| -> PeerError {
        let status = w.child.wait();
        if interrupted() {
            return PeerError::Interrupted;
        }
        // Gone before we read what it said (it failed before reading "start", say).
        w.read_error_line();
        worker_ended(status.ok(), w.error.take(), cg.oom_kills().unwrap_or(0))
    };
    if w.send("start").is_err() || w.expect("ready")?.is_none() {
        return Err(died(&mut w, &cg));
    }
    // The worker's baseline (binary, corpus) is not the workload's: the limit applies on top,
    // as on the uzswap side where the corpus lives outside the region.
    let baseline = cg.read_u64("memory.usage_in_bytes")?;
    // Likewise for its RSS, which the uzswap side counts from after the corpus is loaded.
    let rss_baseline = vm_rss(pid).unwrap_or(0);
    let target = spec.memory_high + baseline;
    let hard = match opts.reclaim {
        Reclaim::Controller => target + HARD_LIMIT_SLACK,
        Reclaim::Limit => target,
    };
    write_setting(&cg.file("memory.limit_in_bytes"), &hard.to_string())?;
    // A charge at the hard stop that the worker's own reclaim cannot satisfy waits to be
    // woken by the monitor, instead of killing the run.
    write_setting(&cg.file("memory.oom_control"), "1")?;
    let _ = write_setting(&cg.file("memory.max_usage_in_bytes"), "0");
    let before = Snapshot::take();
    let cpu_before =
        CpuTimes::from_stat_file(Path::new(&format!("/proc/{pid}/stat"))).unwrap_or_default();
    let majflt_before = stats::major_faults(pid);
    let pool_baseline = zswap_pool_bytes();
    w.send("go")?;
    let Some(area) = w.expect("area")? else {
        return Err(died(&mut w, &cg));
    };
    let mut it = area.split_whitespace().map(|s| s.parse::<usize>());
    let (Some(Ok(addr)), Some(Ok(len))) = (it.next(), it.next()) else {
        return Err(PeerError::BadArea(area));
    };
    let targets = Targets {
        area: (addr, len),
        baseline,
        pool_baseline,
        target,
        hard,
        controller: opts.reclaim == Reclaim::Controller,
    };
    let (handle, stop) = start_monitor(pid, &cg, targets)?;
    let result_line = w.expect("result");
    // Read everything while the worker still holds its memory: the pool gauges drop to zero
    // when it exits.
    let after = Snapshot::take();
    let gauges = stats::zswap_debugfs();
    let cpu = CpuTimes::from_stat_file(Path::new(&format!("/proc/{pid}/stat")));
    let majflt = stats::major_faults(pid);
    stop.store(true, Ordering::Relaxed);
    let rep = handle.join().map_err(|_| PeerError::MonitorPanicked)?;
    if rep.oom_wait_gave_up {
        let status = w.child.wait().map(|s| s.to_string()).unwrap_or_default();
        return Err(PeerError::OomKilled {
            why: format!(
                "{status}; killed after an OOM wait of {} s in its cgroup",
                OOM_WAIT_MAX.as_secs()
            ),
        });
    }
    let line = match result_line? {
        Some(l) => l,
        None => return Err(died(&mut w, &cg)),
    };
    let output: WorkloadOutput = match serde_json::from_str(&line) {
        Ok(o) => o,
        Err(e) => {
            // A result line cut short by a failed charge, the error line after it.
            w.stdin = None;
            let status = w.child.wait().ok();
            if status.is_some_and(|s| s.code() == Some(worker::NOMEM_EXIT)) {
                return Err(worker_ended(status, Some(line), 0));
            }
            return Err(PeerError::BadResult(e));
        }
    };
    let max_usage = cg.read_u64("memory.max_usage_in_bytes").ok();
    w.stdin = None; // EOF: the worker exits.
    let _ = w.child.wait();

    let mut r = WorkloadResult::new(system, output, spec.memory_high);
    r.cpu = cpu.map(|c| c.minus(cpu_before)).unwrap_or_default();
    r.helper_cpu = rep.cpu;
    r.stats = after.delta(&before);
    if let (Some(a), Some(b)) = (majflt, majflt_before) {
        // The worker's own, not the machine's (/proc/vmstat counts every process's).
        r.stats.insert("pgmajfault".into(), (a - b) as i64);
    }
    if opts.reclaim == Reclaim::Controller {
        r.stats
            .insert("controller_pageout_calls".into(), rep.pageout_calls as i64);
        r.stats.insert(
            "controller_advised_mib".into(),
            (rep.pageout_bytes >> 20) as i64,
        );
        r.stats.insert(
            "controller_pageout_errors".into(),
            rep.pageout_errors as i64,
        );
        if let Some(e) = rep.last_error {
            r.settings.insert("controller_last_error".into(), e);
        }
    }
    r.stats
        .insert("cgroup_oom_waits".into(), rep.oom_waits as i64);
    r.stats.insert(
        "cgroup_longest_oom_wait_ms".into(),
        rep.longest_oom_wait.as_millis() as i64,
    );
    r.gauges = gauges;
    r.gauges.insert("baseline_bytes".into(), baseline as i64);
    r.max_rss_bytes = Some(rep.max_rss.saturating_sub(rss_baseline));
    r.max_memory_bytes = Some(rep.max_memory);
    r.max_usage_bytes = max_usage
        .or(Some(rep.max_usage_sampled))
        .map(|u| u.saturating_sub(baseline));
    r.settings
        .insert("cgroup_limit_in_bytes".into(), hard.to_string());
    Ok(r)
}
