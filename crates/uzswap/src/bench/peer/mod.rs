//! The kernel peers: the same workload on plain memory in a worker process, under a v1 memory
//! cgroup with a swap file, the kernel's zswap on (`kernel-zswap`) or off (`kernel-swap`).
//!
//! - `machine`: [`PeerMachine`] sets the machine up (swap file, zswap parameters,
//!   page-cluster, debugfs) and restores every setting it changed when dropped, also on
//!   errors.
//! - `cgroup`: each run's own v1 memory cgroup, removed after the worker is gone, and the
//!   watch on its OOM waits.
//! - `protocol`: the worker process from the parent's side: starting it, the line protocol
//!   (`bench::worker` is the worker's side), why it ended; and the signal thread, which kills
//!   it on SIGINT/SIGTERM so that the command unwinds through the same drops (see
//!   [`install_interrupt_handler`]).
//! - `controller`: the monitor thread of a run, which samples its memory and, as the page-out
//!   controller, holds it to the target.
//! - `run`: one run, tying them together: cgroup, worker, limits, monitor, figures.
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

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

mod cgroup;
mod controller;
mod machine;
mod protocol;
mod run;

pub use cgroup::CGROUP_V1_MEMORY;
pub use machine::{
    check_root, swap_bytes_for, PeerMachine, SavedSettings, PAGE_CLUSTER, ZSWAP_PARAMS,
};
pub use protocol::{install_interrupt_handler, interrupted, OomKilled};
pub use run::HARD_LIMIT_SLACK;

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
