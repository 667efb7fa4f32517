//! The kernel peers: the same workload on plain memory in a worker process, under a v1 memory
//! cgroup with a swap file, the kernel's zswap on (`kernel-zswap`) or off (`kernel-swap`).
//!
//! [`PeerMachine`] sets the machine up (swap file, page-cluster, debugfs) and restores every
//! setting it changed when dropped, also on errors; a SIGINT/SIGTERM kills the worker, so the
//! command unwinds through the same drops (see [`install_interrupt_handler`]). Each run gets its
//! own cgroup, removed after the worker is gone.
//!
//! Memory policy (see shared/notes/kernel-peer.md): random-access workloads under
//! `memory.limit_in_bytes` with zswap on were OOM-killed, and cgroup v1 has no memory.high. So
//! by default (`Reclaim::Controller`, used for every workload so both kernel systems and all
//! workloads see one policy) a controller thread pages out random 1 MiB chunks of the worker's
//! area with `process_madvise(MADV_PAGEOUT)` whenever the cgroup's usage passes the target,
//! and `memory.limit_in_bytes` = target + 64 MiB is only the hard stop. The compression then
//! runs in the controller, on the other core; its CPU time is reported as helper CPU.
//! `Reclaim::Limit` uses `memory.limit_in_bytes` = target alone (the kernel's own reclaim, as
//! the notes' usemem rows were measured): the same limit as uzswap's, held the way memory.high
//! is, by the faulting task's own reclaim, with no page-out helper on the other core (the
//! monitor reclaims only when it sets the limit back after waking an OOM wait; its CPU time
//! is reported as helper CPU in both modes).
//!
//! The cgroup's OOM killer is off under both (`memory.oom_control`). A charge that the
//! worker's own reclaim cannot make room for at the hard stop waits instead, and the monitor
//! wakes it to try again (see `OomWatch`); the waits are counted. Such charges fail now and
//! then without anything being wrong: under the controller, the worker's reclaim found nothing
//! to reclaim while the controller held the pages isolated for its own page-out (1 mix run in
//! 5 was OOM-killed so); under the limit alone, a random workload with zswap on was
//! OOM-killed in most runs (`mix --size 300M --memory-high 250M`: 6 runs of 6), and with the
//! killer off it waits once or twice a run, for milliseconds.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

/// A peer's worker was killed by the OOM killer in its cgroup, stood in an OOM wait longer
/// than `OOM_WAIT_MAX` (10 s), or had a charge fail at the hard stop. A property of that run, not
/// of the setup: the benchmark leaves the run out and goes on.
#[derive(Debug)]
pub struct OomKilled {
    /// The worker's exit status and what ended it.
    why: String,
}

impl std::fmt::Display for OomKilled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the worker died ({}: the limit is too tight for this reclaim policy)",
            self.why
        )
    }
}

impl std::error::Error for OomKilled {}

use anyhow::{anyhow, bail, Context, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use super::stats::{self, CpuTimes, Snapshot};
use super::systems::{System, WorkloadResult};
use super::worker;
use zswap::PAGE_SIZE;

use super::workload::{WorkloadOutput, WorkloadSpec};

/// The kernel zswap's tunables.
pub const ZSWAP_PARAMS: &str = "/sys/module/zswap/parameters";
/// The zswap parameters saved and restored (all of them that a run may touch, and the rest
/// for the record).
const SAVED_PARAMS: [&str; 5] = [
    "enabled",
    "compressor",
    "max_pool_percent",
    "accept_threshold_percent",
    "shrinker_enabled",
];
/// The kernel's swap readahead setting (log2 of the pages read around a swap-in).
pub const PAGE_CLUSTER: &str = "/proc/sys/vm/page-cluster";
/// Where the cgroup v1 memory controller is mounted.
pub const CGROUP_V1_MEMORY: &str = "/sys/fs/cgroup/memory";
const DEBUGFS: &str = "/sys/kernel/debug";
const CHUNK: usize = 1 << 20;
/// Slack of the hard limit above the controller's target.
pub const HARD_LIMIT_SLACK: u64 = 64 << 20;
/// Longest OOM wait of a worker before the run is given up: a wait ends within milliseconds
/// once the controller's page-outs or the worker's own reclaim, woken to retry, make room, so
/// one this long means neither can.
const OOM_WAIT_MAX: Duration = Duration::from_secs(10);

/// How the peer's memory is held to the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Reclaim {
    /// Page-out controller at the target, `memory.limit_in_bytes` = target + 64 MiB.
    Controller,
    /// `memory.limit_in_bytes` = target, the kernel's own reclaim.
    Limit,
}

/// How the kernel peers are set up and run.
#[derive(Debug, Clone)]
pub struct PeerOptions {
    /// Where the swap file goes.
    pub swap_dir: PathBuf,
    /// Swap file size in bytes.
    pub swap_bytes: u64,
    /// `/proc/sys/vm/page-cluster` for the runs; None leaves it.
    pub page_cluster: Option<u32>,
    /// zswap `max_pool_percent` for the runs; None leaves it.
    pub max_pool_percent: Option<u32>,
    /// How a run's memory is held to the limit.
    pub reclaim: Reclaim,
    /// `memory.swappiness` of each run's cgroup; None inherits the root's.
    pub swappiness: Option<u32>,
    /// The `uzswap` binary, run as `uzswap bench worker SPEC`.
    pub worker_exe: PathBuf,
}

/// The root check: the peers write kernel settings, swap files and cgroups.
pub fn check_root(euid: u32) -> Result<()> {
    if euid != 0 {
        bail!(
            "the kernel peers need root (they set up a swap file, a memory cgroup and zswap \
             parameters): run as root, or drop --peer and pick --system uzswap"
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// interruption

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// The running worker's pid, 0 when none: what the signal thread kills.
static WORKER_PID: AtomicI32 = AtomicI32::new(0);

/// Block SIGINT/SIGTERM and start a thread that waits for them: it kills the running worker,
/// so the command's next step fails and every guard restores what it changed. Call from the
/// command before any other thread starts (threads inherit the blocked mask).
pub fn install_interrupt_handler() -> Result<()> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        result = uffd::process::block_termination_signals()
            .map_err(|e| anyhow!("cannot block SIGINT/SIGTERM: {e}"));
        if result.is_ok() {
            std::thread::spawn(|| {
                while let Ok(sig) = uffd::process::wait_termination_signal() {
                    INTERRUPTED.store(true, Ordering::SeqCst);
                    eprintln!("uzswap: signal {sig}: stopping, restoring kernel settings");
                    kill_worker();
                }
            });
        }
    });
    result
}

fn kill_worker() {
    let pid = WORKER_PID.load(Ordering::SeqCst);
    if let Some(p) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
    }
}

/// Whether SIGINT or SIGTERM has arrived (see `install_interrupt_handler`).
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

fn check_interrupted() -> Result<()> {
    if interrupted() {
        bail!("interrupted");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// machine setup

fn read_trim(p: &Path) -> Result<String> {
    Ok(std::fs::read_to_string(p)
        .with_context(|| format!("cannot read {}", p.display()))?
        .trim()
        .to_string())
}

fn write_setting(p: &Path, v: &str) -> Result<()> {
    std::fs::write(p, v).with_context(|| format!("cannot write '{v}' to {}", p.display()))
}

fn zswap_param(name: &str) -> PathBuf {
    Path::new(ZSWAP_PARAMS).join(name)
}

fn run_tool(cmd: &str, args: &[&str]) -> Result<()> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .with_context(|| format!("cannot run {cmd}"))?;
    if !out.status.success() {
        bail!(
            "{cmd} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// The settings of the machine before the command touched them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedSettings {
    /// The kernel zswap's parameters, name and value as sysfs shows them.
    pub zswap: Vec<(String, String)>,
    /// `/proc/sys/vm/page-cluster`.
    pub page_cluster: String,
}

impl SavedSettings {
    /// Read them from the machine.
    pub fn read() -> Result<SavedSettings> {
        let zswap = SAVED_PARAMS
            .iter()
            .map(|p| Ok((p.to_string(), read_trim(&zswap_param(p))?)))
            .collect::<Result<Vec<_>>>()?;
        Ok(SavedSettings {
            zswap,
            page_cluster: read_trim(Path::new(PAGE_CLUSTER))?,
        })
    }
}

/// The machine set up for kernel-peer runs; restores everything when dropped.
#[derive(Debug)]
pub struct PeerMachine {
    opts: PeerOptions,
    saved: SavedSettings,
    swap_file: Option<PathBuf>,
    swap_on: bool,
    mounted_debugfs: bool,
    /// The settings recorded with every result (page-cluster, THP, zswap knobs).
    settings: BTreeMap<String, String>,
}

impl PeerMachine {
    /// Set the machine up (needs root and a cgroup v1 memory controller): page-cluster and
    /// `max_pool_percent` as `opts` says, debugfs, and a swap file turned on.
    pub fn new(opts: PeerOptions) -> Result<PeerMachine> {
        check_root(rustix::process::geteuid().as_raw())?;
        if !Path::new(CGROUP_V1_MEMORY).join("cgroup.procs").exists() {
            bail!("no cgroup v1 memory controller at {CGROUP_V1_MEMORY}");
        }
        let saved = SavedSettings::read()
            .context("the kernel's zswap is needed (built in or module loaded)")?;
        let mut m = PeerMachine {
            opts,
            saved,
            swap_file: None,
            swap_on: false,
            mounted_debugfs: false,
            settings: BTreeMap::new(),
        };
        // Every step from here on is undone by Drop if a later one fails.
        if let Some(pc) = m.opts.page_cluster {
            write_setting(Path::new(PAGE_CLUSTER), &pc.to_string())?;
        }
        if let Some(p) = m.opts.max_pool_percent {
            write_setting(&zswap_param("max_pool_percent"), &p.to_string())?;
        }
        m.mount_debugfs();
        m.make_swap()?;
        m.settings = m.record_settings();
        Ok(m)
    }

    fn mount_debugfs(&mut self) {
        if Path::new(stats::ZSWAP_DEBUGFS).exists() {
            return;
        }
        // Only to read the pool gauges: a failure just leaves them out.
        if run_tool("mount", &["-t", "debugfs", "none", DEBUGFS]).is_ok() {
            self.mounted_debugfs = true;
        }
    }

    fn make_swap(&mut self) -> Result<()> {
        let path = self
            .opts
            .swap_dir
            .join(format!("uzswap-peer-{}.swap", std::process::id()));
        let f = std::fs::File::create(&path)
            .with_context(|| format!("cannot create swap file {}", path.display()))?;
        self.swap_file = Some(path.clone());
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        rustix::fs::fallocate(
            &f,
            rustix::fs::FallocateFlags::empty(),
            0,
            self.opts.swap_bytes,
        )
        .map_err(|e| {
            anyhow!(
                "cannot allocate {} MiB for {}: {e}",
                self.opts.swap_bytes >> 20,
                path.display()
            )
        })?;
        drop(f);
        let p = path.to_string_lossy().into_owned();
        run_tool("mkswap", &[&p])?;
        run_tool("swapon", &[&p])?;
        self.swap_on = true;
        Ok(())
    }

    fn record_settings(&self) -> BTreeMap<String, String> {
        let mut s = BTreeMap::new();
        if let Ok(v) = read_trim(Path::new(PAGE_CLUSTER)) {
            s.insert("page_cluster".into(), v);
        }
        for p in [
            "max_pool_percent",
            "accept_threshold_percent",
            "shrinker_enabled",
        ] {
            if let Ok(v) = read_trim(&zswap_param(p)) {
                s.insert(format!("zswap_{p}"), v);
            }
        }
        for (k, f) in [("thp_enabled", "enabled"), ("thp_defrag", "defrag")] {
            if let Ok(v) = read_trim(&Path::new("/sys/kernel/mm/transparent_hugepage").join(f)) {
                s.insert(k.into(), v);
            }
        }
        s.insert(
            "reclaim".into(),
            match self.opts.reclaim {
                Reclaim::Controller => "controller".into(),
                Reclaim::Limit => "limit".into(),
            },
        );
        if let Some(v) = self.opts.swappiness {
            s.insert("cgroup_swappiness".into(), v.to_string());
        }
        s
    }

    /// Put zswap in the state `system` needs.
    fn configure(&self, system: &System) -> Result<()> {
        match system {
            System::KernelZswap { compressor } => {
                // A name the kernel does not know fails the write (ENOENT); one it knows but
                // cannot load is refused silently: read it back in both cases.
                let written = write_setting(&zswap_param("compressor"), compressor);
                let now = read_trim(&zswap_param("compressor"))?;
                if written.is_err() || now != *compressor {
                    bail!(
                        "the kernel refused zswap compressor '{compressor}' (it kept '{now}'; \
                         this kernel offers lzo, lzo-rle and deflate here)"
                    );
                }
                write_setting(&zswap_param("enabled"), "Y")?;
            }
            System::KernelSwap => write_setting(&zswap_param("enabled"), "N")?,
            System::Uzswap(_) => bail!("{system} is not a kernel peer"),
        }
        Ok(())
    }

    /// Set zswap up for `system` (a kernel system) and turn it off again: a compressor the
    /// kernel refuses is found before any run.
    pub fn check(&self, system: &System) -> Result<()> {
        let r = self.configure(system);
        let _ = write_setting(&zswap_param("enabled"), "N");
        r.with_context(|| system.to_string())
    }

    /// One run of `spec` on `system` (a kernel system).
    pub fn run(&mut self, system: &System, spec: &WorkloadSpec) -> Result<WorkloadResult> {
        check_interrupted()?;
        self.configure(system)?;
        let r = run_worker(&self.opts, system, spec);
        // zswap off between runs: nothing of ours should land in it while idle.
        let _ = write_setting(&zswap_param("enabled"), "N");
        let mut r = r.with_context(|| system.to_string())?;
        r.settings.extend(self.settings.clone());
        if let System::KernelZswap { compressor } = system {
            r.settings
                .insert("zswap_compressor".into(), compressor.clone());
        }
        Ok(r)
    }

    /// The settings recorded with every result (page-cluster, THP, zswap knobs).
    pub fn settings(&self) -> &BTreeMap<String, String> {
        &self.settings
    }
}

impl Drop for PeerMachine {
    fn drop(&mut self) {
        let warn = |what: &str, e: anyhow::Error| eprintln!("uzswap: restoring {what}: {e:#}");
        if self.swap_on {
            if let Some(p) = &self.swap_file {
                if let Err(e) = run_tool("swapoff", &[&p.to_string_lossy()]) {
                    warn("swap", e);
                }
            }
        }
        if let Some(p) = &self.swap_file {
            if let Err(e) = std::fs::remove_file(p) {
                warn("swap file", e.into());
            }
        }
        // enabled last: the other knobs are restored while zswap is off.
        let mut params = self.saved.zswap.clone();
        params.sort_by_key(|(k, _)| k == "enabled");
        for (k, v) in &params {
            if read_trim(&zswap_param(k)).ok().as_deref() != Some(v.as_str()) {
                if let Err(e) = write_setting(&zswap_param(k), v) {
                    warn(k, e);
                }
            }
        }
        if let Err(e) = write_setting(Path::new(PAGE_CLUSTER), &self.saved.page_cluster) {
            warn("page-cluster", e);
        }
        if self.mounted_debugfs {
            if let Err(e) = run_tool("umount", &[DEBUGFS]) {
                warn("debugfs", e);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// one run: cgroup, worker, controller

/// A v1 memory cgroup for one run; removed on drop after moving any process left to the root.
struct Cgroup {
    dir: PathBuf,
}

impl Cgroup {
    fn create(name: &str) -> Result<Cgroup> {
        let dir = Path::new(CGROUP_V1_MEMORY).join(name);
        std::fs::create_dir(&dir)
            .with_context(|| format!("cannot create cgroup {}", dir.display()))?;
        Ok(Cgroup { dir })
    }
    fn file(&self, f: &str) -> PathBuf {
        self.dir.join(f)
    }
    fn read_u64(&self, f: &str) -> Result<u64> {
        read_trim(&self.file(f))?
            .parse()
            .with_context(|| format!("bad number in {}", self.file(f).display()))
    }
    /// A line of `memory.oom_control`: `oom_kill` (kills so far), `under_oom` (1 while a
    /// charge waits with the OOM killer off).
    fn oom_control(&self, key: &str) -> Option<u64> {
        cgroup_field(&self.file("memory.oom_control"), key)
    }
    fn oom_kills(&self) -> Option<u64> {
        self.oom_control("oom_kill")
    }
}

/// The value of a `KEY VALUE` line of a cgroup file (`memory.oom_control`, `memory.stat`).
fn cgroup_field(path: &Path, key: &str) -> Option<u64> {
    let t = std::fs::read_to_string(path).ok()?;
    t.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' '))?
        .trim()
        .parse()
        .ok()
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let root = Path::new(CGROUP_V1_MEMORY).join("cgroup.procs");
        for _ in 0..50 {
            if let Ok(procs) = std::fs::read_to_string(self.file("cgroup.procs")) {
                for pid in procs.split_whitespace() {
                    let _ = std::fs::write(&root, pid);
                }
            }
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            // A dying worker leaves the cgroup only when its exit is complete.
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("uzswap: cannot remove cgroup {}", self.dir.display());
    }
}

/// The worker process; killed and reaped on drop if still running.
struct Worker {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    /// What it said in an "error" line.
    error: Option<String>,
    /// The thread passing its stderr on.
    relay: Option<std::thread::JoinHandle<()>>,
}

impl Worker {
    fn send(&mut self, line: &str) -> Result<()> {
        let i = self
            .stdin
            .as_mut()
            .ok_or_else(|| anyhow!("worker stdin closed"))?;
        writeln!(i, "{line}")
            .and_then(|_| i.flush())
            .map_err(|e| anyhow!("worker gone: {e}"))
    }

    /// What is left to read of a worker that has ended: its "error ..." line, if any, kept
    /// in `error`.
    fn read_error_line(&mut self) {
        let mut line = String::new();
        while self.error.is_none() && matches!(self.stdout.read_line(&mut line), Ok(n) if n > 0) {
            if let Some(e) = line.trim_end().strip_prefix("error ") {
                self.error = Some(e.to_string());
            }
            line.clear();
        }
    }

    /// The next line that starts with `want`; None if the worker ended instead, after an
    /// "error ..." line (kept in `error`) or without a word.
    fn expect(&mut self, want: &str) -> Result<Option<String>> {
        let mut line = String::new();
        if self.stdout.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        let line = line.trim_end();
        if let Some(e) = line.strip_prefix("error ") {
            self.error = Some(e.to_string());
            return Ok(None);
        }
        match line.strip_prefix(want) {
            Some(rest) => Ok(Some(rest.trim().to_string())),
            None => bail!("worker said '{line}', expected '{want}'"),
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        WORKER_PID.store(0, Ordering::SeqCst);
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(r) = self.relay.take() {
            let _ = r.join();
        }
    }
}

#[derive(Debug, Default)]
struct MonitorReport {
    max_rss: u64,
    max_usage_sampled: u64,
    /// Largest cgroup usage (over the baseline) plus zswap pool, sampled together.
    max_memory: u64,
    cpu: Option<CpuTimes>,
    pageout_calls: u64,
    pageout_bytes: u64,
    pageout_errors: u64,
    last_error: Option<String>,
    /// OOM waits seen (samples 10 ms apart that found `under_oom 1` after one that did not,
    /// or after pages were charged), and the longest, sampled.
    oom_waits: u64,
    longest_oom_wait: Duration,
    /// The worker was killed after an OOM wait of [`OOM_WAIT_MAX`].
    oom_wait_gave_up: bool,
}

struct Monitor {
    pid: i32,
    pidfd: OwnedFd,
    area: (usize, usize),
    usage: PathBuf,
    /// The cgroup's usage before the workload allocated (binary, corpus), and the zswap pool
    /// then (another user's, if any).
    baseline: u64,
    pool_baseline: u64,
    target: u64,
    controller: bool,
    /// The cgroup's `memory.oom_control`, watched for OOM waits, and its `memory.stat`, for
    /// the pages charged meanwhile.
    oom_control: PathBuf,
    stat: PathBuf,
    /// The cgroup's `memory.limit_in_bytes` and its value.
    limit: PathBuf,
    hard: u64,
    stop: Arc<AtomicBool>,
}

/// The kernel's compressed pool, in bytes (zswap debugfs; machine-wide, and this workload is
/// the machine's only zswap user while it runs).
fn zswap_pool_bytes() -> u64 {
    std::fs::read_to_string(Path::new(stats::ZSWAP_DEBUGFS).join("pool_total_size"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

fn vm_rss(pid: i32) -> Option<u64> {
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

/// The worker's OOM waits at the hard stop, as the monitor samples them, and the wake-up it
/// gives them.
#[derive(Default)]
struct OomWatch {
    /// The wait under way: since when, and the cgroup's `pgpgin` then.
    wait: Option<(Instant, Option<u64>)>,
    /// The last sample found the worker waiting, and it has not been woken since.
    to_wake: bool,
    /// The limit is a page up, to be set back.
    limit_raised: bool,
}

impl OomWatch {
    /// Read whether the worker waits; false when one wait has lasted `OOM_WAIT_MAX`.
    fn sample(&mut self, m: &Monitor, rep: &mut MonitorReport) -> bool {
        let waiting = cgroup_field(&m.oom_control, "under_oom") == Some(1);
        self.to_wake = waiting;
        // A worker that charged pages since the last sample got on between them (a wake-up
        // let it, and it waited again): a new wait.
        let charged = match waiting {
            true => cgroup_field(&m.stat, "pgpgin"),
            false => None,
        };
        if let Some((since, at)) = self.wait {
            if waiting && charged == at {
                return since.elapsed() <= OOM_WAIT_MAX;
            }
        }
        self.end_wait(rep);
        if waiting {
            rep.oom_waits += 1;
            self.wait = Some((Instant::now(), charged));
        }
        true
    }

    fn end_wait(&mut self, rep: &mut MonitorReport) {
        if let Some((since, _)) = self.wait.take() {
            rep.longest_oom_wait = rep.longest_oom_wait.max(since.elapsed());
        }
    }

    /// A v1 cgroup wakes its OOM waiters when memory is freed or its limit raised, but not
    /// when a page is swapped out: the controller's page-outs make room and never wake the
    /// worker, and under the limit alone nothing makes room but the worker's own reclaim,
    /// which has given up once. Raising the limit by a page and setting it back wakes it, to
    /// retry its charge and its reclaim (not while it is still raised: that would not raise
    /// it). Setting it back can fail (EBUSY) while usage is above it and the cgroup's reclaim
    /// cannot bring it under: tried again at the next call.
    fn wake(&mut self, m: &Monitor) {
        if self.to_wake
            && !self.limit_raised
            && write_setting(&m.limit, &(m.hard + PAGE_SIZE as u64).to_string()).is_ok()
        {
            self.limit_raised = true;
        }
        self.to_wake = false; // until the next sample
        if self.limit_raised && write_setting(&m.limit, &m.hard.to_string()).is_ok() {
            self.limit_raised = false;
        }
    }

    fn finish(&mut self, m: &Monitor, rep: &mut MonitorReport) {
        if self.limit_raised {
            let _ = write_setting(&m.limit, &m.hard.to_string());
        }
        self.end_wait(rep);
    }
}

/// Sample RSS, cgroup usage and the zswap pool; as the controller, page out random 1 MiB chunks of the
/// worker's area while usage is above the target.
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

fn run_worker(opts: &PeerOptions, system: &System, spec: &WorkloadSpec) -> Result<WorkloadResult> {
    let cg = Cgroup::create(&format!(
        "uzswap-peer-{}-{}",
        std::process::id(),
        RUN_SEQ.fetch_add(1, Ordering::SeqCst)
    ))?;
    let mut child = Command::new(&opts.worker_exe)
        .args(["bench", "worker", &serde_json::to_string(spec)?])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start worker {}", opts.worker_exe.display()))?;
    // Its warnings, above any progress bar.
    let relay = child.stderr.take().map(super::progress::relay);
    let stdin = child.stdin.take();
    let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
    let pid = child.id() as i32;
    let mut w = Worker {
        child,
        stdin,
        stdout,
        error: None,
        relay,
    };
    WORKER_PID.store(pid, Ordering::SeqCst);
    if let Some(v) = opts.swappiness {
        write_setting(&cg.file("memory.swappiness"), &v.to_string())?;
    }
    // Into the cgroup before it allocates anything: it waits for "start".
    write_setting(&cg.file("cgroup.procs"), &pid.to_string())?;
    let died = |w: &mut Worker, cg: &Cgroup| -> anyhow::Error {
        let status = w.child.wait();
        if interrupted() {
            return anyhow!("interrupted");
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
        bail!("worker said 'area {area}'");
    };
    let pidfd = rustix::process::pidfd_open(
        rustix::process::Pid::from_raw(pid).expect("child pid > 0"),
        rustix::process::PidfdFlags::empty(),
    )
    .map_err(|e| anyhow!("pidfd_open: {e}"))?;
    let stop = Arc::new(AtomicBool::new(false));
    let mon = Monitor {
        pid,
        pidfd,
        area: (addr, len),
        usage: cg.file("memory.usage_in_bytes"),
        baseline,
        pool_baseline,
        target,
        controller: opts.reclaim == Reclaim::Controller,
        oom_control: cg.file("memory.oom_control"),
        stat: cg.file("memory.stat"),
        limit: cg.file("memory.limit_in_bytes"),
        hard,
        stop: stop.clone(),
    };
    let handle = std::thread::spawn(move || monitor(mon));
    let result_line = w.expect("result");
    // Read everything while the worker still holds its memory: the pool gauges drop to zero
    // when it exits.
    let after = Snapshot::take();
    let gauges = stats::zswap_debugfs();
    let cpu = CpuTimes::from_stat_file(Path::new(&format!("/proc/{pid}/stat")));
    let majflt = stats::major_faults(pid);
    stop.store(true, Ordering::Relaxed);
    let rep = handle
        .join()
        .map_err(|_| anyhow!("monitor thread panicked"))?;
    if rep.oom_wait_gave_up {
        let status = w.child.wait().map(|s| s.to_string()).unwrap_or_default();
        return Err(anyhow::Error::new(OomKilled {
            why: format!(
                "{status}; killed after an OOM wait of {} s in its cgroup",
                OOM_WAIT_MAX.as_secs()
            ),
        }));
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
            bail!("bad worker result: {e}");
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

/// Why a worker ended before its result: killed by its cgroup's OOM killer, or a charge it
/// made outside a page fault failed at the hard stop (runs the benchmark leaves out), or an
/// error of its own (`said`, its "error" line), which ends the command.
fn worker_ended(status: Option<ExitStatus>, said: Option<String>, ooms: u64) -> anyhow::Error {
    let status_text = status.map(|s| s.to_string()).unwrap_or_default();
    if ooms > 0 {
        return anyhow::Error::new(OomKilled {
            why: format!("{status_text}; {ooms} OOM kills in its cgroup"),
        });
    }
    if status.is_some_and(|s| s.code() == Some(worker::NOMEM_EXIT)) {
        return anyhow::Error::new(OomKilled {
            why: format!(
                "{status_text}; a charge failed at the hard stop: {}",
                said.as_deref().unwrap_or("ENOMEM")
            ),
        });
    }
    match said {
        Some(e) => anyhow!("worker: {e}"),
        None => anyhow!("the worker died ({status_text})"),
    }
}

static RUN_SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Swap file size for workloads of at most `area` bytes: every swapped page, zswap's included,
/// holds a swap slot, so the whole area plus headroom.
pub fn swap_bytes_for(area: usize) -> u64 {
    (area as u64 + (512 << 20)).div_ceil(1 << 20) << 20
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_root_is_one_clear_line() {
        let e = check_root(1000).unwrap_err().to_string();
        assert!(e.contains("need root") && !e.contains('\n'), "{e}");
        assert!(check_root(0).is_ok());
    }

    #[test]
    fn a_worker_whose_charge_failed_is_left_out_like_an_oom_kill() {
        use std::os::unix::process::ExitStatusExt;
        let is_oom = |e: &anyhow::Error| e.chain().any(|c| c.is::<OomKilled>());
        let exited = |code: i32| Some(ExitStatus::from_raw(code << 8));
        let nomem = worker_ended(
            exited(worker::NOMEM_EXIT),
            Some("writing the result: Cannot allocate memory (os error 12)".into()),
            0,
        );
        assert!(is_oom(&nomem), "{nomem:#}");
        assert!(format!("{nomem:#}").contains("a charge failed at the hard stop"));
        // The line that would have said so may be the charge that failed.
        assert!(is_oom(&worker_ended(exited(worker::NOMEM_EXIT), None, 0)));
        assert!(is_oom(&worker_ended(
            Some(ExitStatus::from_raw(9)),
            None,
            1
        )));
        let own = worker_ended(exited(2), Some("bad spec".into()), 0);
        assert!(!is_oom(&own));
        assert_eq!(format!("{own:#}"), "worker: bad spec");
        assert!(!is_oom(&worker_ended(exited(0), None, 0)));
    }

    #[test]
    fn swap_covers_the_area() {
        assert!(swap_bytes_for(1 << 30) >= (1 << 30) + (512 << 20));
        assert_eq!(swap_bytes_for(1) % (1 << 20), 0);
    }
}
