//! Each run's own v1 memory cgroup, and its OOM waits.
//!
//! [`Cgroup`] creates the cgroup and removes it when dropped, after moving any process left
//! in it to the root. [`OomWatch`] follows the worker's OOM waits at the hard stop as the
//! monitor samples them (the cgroup's OOM killer is off, so a charge that reclaim cannot make
//! room for waits), counts them, and wakes the worker to retry.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use zswap::PAGE_SIZE;

use super::controller::{Monitor, MonitorReport};
use super::setting::{read_trim, write_setting};
use super::PeerError;

/// Where the cgroup v1 memory controller is mounted.
pub const CGROUP_V1_MEMORY: &str = "/sys/fs/cgroup/memory";
/// Longest OOM wait of a worker before the run is given up: a wait ends within milliseconds
/// once the controller's page-outs or the worker's own reclaim, woken to retry, make room, so
/// one this long means neither can.
pub(super) const OOM_WAIT_MAX: Duration = Duration::from_secs(10);

/// A v1 memory cgroup for one run; removed on drop after moving any process left to the root.
pub(super) struct Cgroup {
    dir: PathBuf,
}

impl Cgroup {
    pub(super) fn create(name: &str) -> Result<Cgroup, PeerError> {
        let dir = Path::new(CGROUP_V1_MEMORY).join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => Ok(Cgroup { dir }),
            Err(source) => Err(PeerError::Cgroup { path: dir, source }),
        }
    }
    pub(super) fn file(&self, f: &str) -> PathBuf {
        self.dir.join(f)
    }
    pub(super) fn read_u64(&self, f: &str) -> Result<u64, PeerError> {
        read_trim(&self.file(f))?
            .parse()
            .map_err(|source| PeerError::Number {
                path: self.file(f),
                source,
            })
    }
    /// A line of `memory.oom_control`: `oom_kill` (kills so far), `under_oom` (1 while a
    /// charge waits with the OOM killer off).
    pub(super) fn oom_control(&self, key: &str) -> Option<u64> {
        cgroup_field(&self.file("memory.oom_control"), key)
    }
    pub(super) fn oom_kills(&self) -> Option<u64> {
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

/// The worker's OOM waits at the hard stop, as the monitor samples them, and the wake-up it
/// gives them.
#[derive(Default)]
pub(super) struct OomWatch {
    /// The wait under way: since when, and the cgroup's `pgpgin` then.
    wait: Option<(Instant, Option<u64>)>,
    /// The last sample found the worker waiting, and it has not been woken since.
    to_wake: bool,
    /// The limit is a page up, to be set back.
    limit_raised: bool,
}

impl OomWatch {
    /// Read whether the worker waits; false when one wait has lasted `OOM_WAIT_MAX`.
    pub(super) fn sample(&mut self, m: &Monitor, rep: &mut MonitorReport) -> bool {
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

    pub(super) fn end_wait(&mut self, rep: &mut MonitorReport) {
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
    pub(super) fn wake(&mut self, m: &Monitor) {
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

    pub(super) fn finish(&mut self, m: &Monitor, rep: &mut MonitorReport) {
        if self.limit_raised {
            let _ = write_setting(&m.limit, &m.hard.to_string());
        }
        self.end_wait(rep);
    }
}
