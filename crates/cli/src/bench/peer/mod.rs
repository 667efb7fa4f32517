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
//! - `setting`: a kernel setting's file, read or written.
//! - `program`: one run of a user's program for `bench run`, in a cgroup of its own under
//!   `memory.limit_in_bytes`, sampled by the same monitor.
//!
//! Memory policy (see shared/notes/kernel-peer.md): random-access workloads under
//! `memory.limit_in_bytes` with zswap on are OOM-killed, and cgroup v1 has no memory.high. So
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
//! then without anything being wrong: under the controller, the worker's reclaim finds nothing
//! to reclaim while the controller holds the pages isolated for its own page-out; under the
//! limit alone, a random workload with zswap on meets such charges in most runs. With the
//! killer on, those runs are OOM-killed (DESIGN.md section 6); with it off, a run waits once
//! or twice, for milliseconds.

use std::io;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

mod cgroup;
mod controller;
mod machine;
mod program;
mod protocol;
mod run;
mod setting;

pub use cgroup::CGROUP_V1_MEMORY;
pub use machine::{
    check_root, swap_bytes_for, PeerMachine, SavedSettings, PAGE_CLUSTER, ZSWAP_PARAMS,
};
pub use program::KernelRun;
pub use protocol::{install_interrupt_handler, interrupted, KillOnInterrupt};
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

/// Why the kernel peers could not be set up, or a run on one failed. Each message names what
/// failed (the setting and its file, the cgroup, the worker); the OS error, if any, is its
/// source.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// Not root.
    #[error(
        "the kernel peers need root (they set up a swap file, a memory cgroup and zswap \
         parameters): run as root, or drop --peer and pick --system uzswap"
    )]
    NotRoot,
    /// No cgroup v1 memory controller.
    #[error("no cgroup v1 memory controller at {CGROUP_V1_MEMORY}")]
    NoCgroupV1,
    /// The kernel's zswap parameters cannot be read.
    #[error("the kernel's zswap is needed (built in or module loaded)")]
    NoZswap(#[source] Box<PeerError>),
    /// SIGINT and SIGTERM cannot be blocked for the signal thread.
    #[error("cannot block SIGINT/SIGTERM")]
    Signals(#[source] io::Error),
    /// SIGINT or SIGTERM arrived.
    #[error("interrupted")]
    Interrupted,
    /// A kernel setting or a cgroup file cannot be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A kernel setting or a cgroup file cannot be written.
    #[error("cannot write '{value}' to {path}")]
    Write {
        /// The file.
        path: PathBuf,
        /// What was written.
        value: String,
        /// Why.
        source: io::Error,
    },
    /// A cgroup file does not hold a number.
    #[error("bad number in {path}")]
    Number {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::num::ParseIntError,
    },
    /// A tool (mount, mkswap, swapon, swapoff, umount) cannot be run.
    #[error("cannot run {tool}")]
    Tool {
        /// The tool.
        tool: String,
        /// Why.
        source: io::Error,
    },
    /// A tool failed; what it said.
    #[error("{command}: {stderr}")]
    ToolFailed {
        /// The tool and its arguments.
        command: String,
        /// Its stderr.
        stderr: String,
    },
    /// The swap file cannot be created.
    #[error("cannot create swap file {path}")]
    SwapFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The swap file's space cannot be allocated.
    #[error("cannot allocate {mib} MiB for {path}")]
    SwapSpace {
        /// The file.
        path: PathBuf,
        /// Its size in MiB.
        mib: u64,
        /// Why.
        source: rustix::io::Errno,
    },
    /// The kernel did not take the zswap compressor.
    #[error(
        "the kernel refused zswap compressor '{compressor}' (it kept '{kept}'; this kernel \
         offers lzo, lzo-rle and deflate here)"
    )]
    CompressorRefused {
        /// The compressor asked for.
        compressor: String,
        /// The one zswap kept.
        kept: String,
    },
    /// A uzswap system given to the kernel peers.
    #[error("{0} is not a kernel peer")]
    NotKernel(String),
    /// What failed while the machine was set up for, or ran, the system named.
    #[error("{system}")]
    System {
        /// The system.
        system: String,
        /// What failed.
        source: Box<PeerError>,
    },
    /// The run's cgroup cannot be created.
    #[error("cannot create cgroup {path}")]
    Cgroup {
        /// Its directory.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The workload does not encode for the worker.
    #[error("encoding the workload for the worker")]
    Spec(#[source] serde_json::Error),
    /// The worker cannot be started.
    #[error("cannot start worker {path}")]
    Start {
        /// The `uzswap` binary.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The worker's stdin is closed already.
    #[error("worker stdin closed")]
    StdinClosed,
    /// Writing to the worker failed.
    #[error("worker gone")]
    WorkerGone(#[source] io::Error),
    /// Reading from the worker failed.
    #[error("reading from the worker")]
    WorkerRead(#[source] io::Error),
    /// The worker said something out of turn.
    #[error("worker said '{line}', expected '{want}'")]
    OutOfTurn {
        /// What it said.
        line: String,
        /// The word expected.
        want: String,
    },
    /// The worker's "area" line does not parse.
    #[error("worker said 'area {0}'")]
    BadArea(String),
    /// The worker's pidfd cannot be opened (for the controller's page-outs).
    #[error("pidfd_open")]
    Pidfd(#[source] rustix::io::Errno),
    /// The monitor thread panicked.
    #[error("monitor thread panicked")]
    MonitorPanicked,
    /// The worker's result line does not parse.
    #[error("bad worker result")]
    BadResult(#[source] serde_json::Error),
    /// The worker was killed by the OOM killer in its cgroup, stood in an OOM wait longer
    /// than `OOM_WAIT_MAX` (10 s), or had a charge fail at the hard stop. A property of that
    /// run, not of the setup: the benchmark leaves the run out and goes on (see
    /// [`PeerError::left_out`]).
    #[error("the worker died ({why}: the limit is too tight for this reclaim policy)")]
    OomKilled {
        /// The worker's exit status and what ended it.
        why: String,
    },
    /// The worker's own error, as its "error" line said it.
    #[error("worker: {0}")]
    Worker(String),
    /// The worker died without a word.
    #[error("the worker died ({0})")]
    Died(String),
    /// A program (`bench run`) that cannot be started.
    #[error("cannot start {program}")]
    ProgramStart {
        /// The program as given.
        program: String,
        /// Why.
        source: io::Error,
    },
    /// Waiting for a program (`bench run`) failed.
    #[error("waiting for the program")]
    ProgramWait(#[source] io::Error),
    /// A program (`bench run`) stood in one OOM wait at its cgroup's limit for
    /// `OOM_WAIT_MAX` (10 s), and was killed.
    #[error(
        "the program waited {seconds} s for memory at its cgroup's limit and was killed: the \
         limit is too tight for it under the kernel's reclaim"
    )]
    ProgramStuck {
        /// How long it waited.
        seconds: u64,
    },
}

impl PeerError {
    /// The run failed because its worker could not be held to the limit ([`OomKilled`]):
    /// a run to leave out, where any other error stops the benchmark.
    ///
    /// [`OomKilled`]: PeerError::OomKilled
    pub fn left_out(&self) -> bool {
        match self {
            PeerError::OomKilled { .. } => true,
            PeerError::System { source, .. } => source.left_out(),
            _ => false,
        }
    }

    /// This error, as it happened for `system`.
    fn in_system(self, system: &impl std::fmt::Display) -> PeerError {
        PeerError::System {
            system: system.to_string(),
            source: Box::new(self),
        }
    }
}
