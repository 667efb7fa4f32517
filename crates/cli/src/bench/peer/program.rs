//! One run of a user's program on a kernel peer, for `bench run`: in a v1 memory cgroup of its
//! own from its first instruction (a shell writes its own pid into the cgroup, then execs the
//! program), held to the limit by `memory.limit_in_bytes` alone (the kernel's own reclaim: a
//! program has no one area for a page-out controller to work on), the OOM killer off and its
//! waits woken as a worker's are (`OomWatch`), its memory sampled by the monitor thread.
//!
//! What it held is its cgroup's usage plus the zswap pool, sampled together every 10 ms: a v1
//! cgroup does not charge the pool, so the program holds more than its limit.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use super::cgroup::{Cgroup, OOM_WAIT_MAX};
use super::controller::{start_monitor, zswap_pool_bytes, Targets};
use super::protocol::interrupted;
use super::setting::write_setting;
use super::{PeerError, PeerOptions};
use crate::bench::program::child::{Exited, Running};
use crate::bench::stats::Snapshot;

static RUN_SEQ: AtomicU32 = AtomicU32::new(0);

/// The shell that puts itself in the cgroup (its `cgroup.procs` is `$0`) and becomes the
/// program (`$@`) in a cgroup namespace of its own. It fails with 125 and a line of its own if
/// it cannot join.
///
/// The namespace keeps the limit from the program, as uzswap's side has none to show: a
/// program that reads its cgroup's limit sizes itself to it (in a 96M cgroup, OpenJDK 17
/// picks the Serial collector instead of G1, and node caps its heap at 259 MiB instead of
/// about 4 GiB), and the two sides would run different programs. In its own namespace its
/// cgroup is the root (`/proc/self/cgroup`), whose limit it reads as none.
const JOIN_AND_EXEC: &str = "echo $$ > \"$0\" || { echo 'uzswap: cannot join the cgroup' >&2; \
                             exit 125; }; exec unshare --cgroup -- \"$@\"";

/// One run of a program on a kernel peer.
#[derive(Debug)]
pub struct KernelRun {
    /// How it ended, its time and its output.
    pub exited: Exited,
    /// Its cgroup's `memory.limit_in_bytes`.
    pub limit: u64,
    /// The most it held: its cgroup's usage plus the zswap pool, sampled together.
    pub held: u64,
    /// Its cgroup's peak charge (`memory.max_usage_in_bytes`).
    pub max_charged: u64,
    /// The zswap pool's peak, sampled (the machine's, over what it held before the run).
    pub max_pool: u64,
    /// Its largest resident set, sampled (the program's own process, not its children).
    pub max_rss: u64,
    /// `/proc/vmstat` deltas around the run (machine-wide: one run at a time).
    pub stats: BTreeMap<String, i64>,
    /// Waits at the limit with the OOM killer off, each woken by the monitor.
    pub oom_waits: u64,
}

/// Run `program` (its name and arguments) in a cgroup of its own under `limit`, the machine
/// set up for a kernel system already.
pub(super) fn run_program(
    opts: &PeerOptions,
    program: &[OsString],
    limit: u64,
) -> Result<KernelRun, PeerError> {
    let cg = Cgroup::create(&format!(
        "uzswap-peer-run-{}-{}",
        std::process::id(),
        RUN_SEQ.fetch_add(1, Ordering::SeqCst)
    ))?;
    if let Some(v) = opts.swappiness {
        write_setting(&cg.file("memory.swappiness"), &v.to_string())?;
    }
    write_setting(&cg.file("memory.limit_in_bytes"), &limit.to_string())?;
    // A charge its own reclaim cannot make room for waits, to be woken by the monitor,
    // instead of killing the program.
    write_setting(&cg.file("memory.oom_control"), "1")?;
    let baseline = cg.read_u64("memory.usage_in_bytes")?;
    let pool_baseline = zswap_pool_bytes();
    let before = Snapshot::take();
    let mut command = Command::new("/bin/sh");
    command
        .args(["-c", JOIN_AND_EXEC])
        .arg(cg.file("cgroup.procs"))
        .args(program);
    let running = Running::spawn(&mut command).map_err(|source| PeerError::ProgramStart {
        program: program[0].to_string_lossy().into_owned(),
        source,
    })?;
    let pid = running.pid();
    let targets = Targets {
        area: (0, 0),
        baseline,
        pool_baseline,
        target: limit,
        hard: limit,
        controller: false,
    };
    let (handle, stop) = start_monitor(pid, &cg, targets)?;
    let exited = running.wait().map_err(PeerError::ProgramWait);
    stop.store(true, Ordering::Relaxed);
    let rep = handle.join().map_err(|_| PeerError::MonitorPanicked)?;
    let exited = exited?;
    let after = Snapshot::take();
    if interrupted() {
        return Err(PeerError::Interrupted);
    }
    if rep.oom_wait_gave_up {
        return Err(PeerError::ProgramStuck {
            seconds: OOM_WAIT_MAX.as_secs(),
        });
    }
    let max_charged = cg
        .read_u64("memory.max_usage_in_bytes")
        .unwrap_or(rep.max_usage_sampled)
        .saturating_sub(baseline);
    Ok(KernelRun {
        exited,
        limit,
        // The charge's exact peak, should the samples have missed it.
        held: rep.max_memory.max(max_charged),
        max_charged,
        max_pool: rep.max_pool,
        max_rss: rep.max_rss,
        stats: after.delta(&before),
        oom_waits: rep.oom_waits,
    })
}
