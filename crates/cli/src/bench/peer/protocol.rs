//! The worker process of a run, from the parent's side: starting `uzswap bench worker SPEC`,
//! the line protocol with it (documented with the worker's side, `bench::worker`), and why it
//! ended when it ended early. The running worker's pid is kept for the signal thread, which
//! kills it on SIGINT/SIGTERM so that the command's next step fails and every guard restores
//! what it changed.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Once;

use super::PeerError;
use crate::bench::worker;
use crate::bench::workload::WorkloadSpec;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// The running worker's pid, 0 when none: what the signal thread kills.
static WORKER_PID: AtomicI32 = AtomicI32::new(0);

/// Block SIGINT/SIGTERM and start a thread that waits for them: it kills the running worker,
/// so the command's next step fails and every guard restores what it changed. Call from the
/// command before any other thread starts (threads inherit the blocked mask).
pub fn install_interrupt_handler() -> Result<(), PeerError> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        result = uffd::process::block_termination_signals().map_err(PeerError::Signals);
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

/// While it lives, the signal thread kills the process `pid` on SIGINT/SIGTERM as it kills a
/// worker: a program that `bench run` runs. A signal that came before is acted on now.
pub struct KillOnInterrupt(());

impl KillOnInterrupt {
    /// Kill `pid` on SIGINT/SIGTERM from now on until the guard drops.
    pub fn new(pid: i32) -> KillOnInterrupt {
        WORKER_PID.store(pid, Ordering::SeqCst);
        if interrupted() {
            kill_worker();
        }
        KillOnInterrupt(())
    }
}

impl Drop for KillOnInterrupt {
    fn drop(&mut self) {
        WORKER_PID.store(0, Ordering::SeqCst);
    }
}

/// Whether SIGINT or SIGTERM has arrived (see `install_interrupt_handler`).
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

pub(super) fn check_interrupted() -> Result<(), PeerError> {
    match interrupted() {
        true => Err(PeerError::Interrupted),
        false => Ok(()),
    }
}

/// The worker process; killed and reaped on drop if still running.
pub(super) struct Worker {
    pub(super) child: Child,
    pub(super) stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    /// What it said in an "error" line.
    pub(super) error: Option<String>,
    /// The thread passing its stderr on.
    relay: Option<std::thread::JoinHandle<()>>,
}

impl Worker {
    /// Start the worker on `spec` (`exe bench worker SPEC`), its stderr relayed above any
    /// progress bar; the signal thread kills it from now on.
    pub(super) fn spawn(exe: &Path, spec: &WorkloadSpec) -> Result<Worker, PeerError> {
        let spec = serde_json::to_string(spec).map_err(PeerError::Spec)?;
        let mut child = Command::new(exe)
            .args(["bench", "worker", &spec])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| PeerError::Start {
                path: exe.to_path_buf(),
                source,
            })?;
        // Its warnings, above any progress bar.
        let relay = child.stderr.take().map(crate::bench::progress::relay);
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let pid = child.id() as i32;
        let w = Worker {
            child,
            stdin,
            stdout,
            error: None,
            relay,
        };
        WORKER_PID.store(pid, Ordering::SeqCst);
        Ok(w)
    }

    /// Its pid.
    pub(super) fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub(super) fn send(&mut self, line: &str) -> Result<(), PeerError> {
        let i = self.stdin.as_mut().ok_or(PeerError::StdinClosed)?;
        writeln!(i, "{line}")
            .and_then(|_| i.flush())
            .map_err(PeerError::WorkerGone)
    }

    /// What is left to read of a worker that has ended: its "error ..." line, if any, kept
    /// in `error`.
    pub(super) fn read_error_line(&mut self) {
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
    pub(super) fn expect(&mut self, want: &str) -> Result<Option<String>, PeerError> {
        let mut line = String::new();
        if self
            .stdout
            .read_line(&mut line)
            .map_err(PeerError::WorkerRead)?
            == 0
        {
            return Ok(None);
        }
        let line = line.trim_end();
        if let Some(e) = line.strip_prefix("error ") {
            self.error = Some(e.to_string());
            return Ok(None);
        }
        match line.strip_prefix(want) {
            Some(rest) => Ok(Some(rest.trim().to_string())),
            None => Err(PeerError::OutOfTurn {
                line: line.to_string(),
                want: want.to_string(),
            }),
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

/// Why a worker ended before its result: killed by its cgroup's OOM killer, or a charge it
/// made outside a page fault failed at the hard stop (runs the benchmark leaves out), or an
/// error of its own (`said`, its "error" line), which ends the command.
pub(super) fn worker_ended(
    status: Option<ExitStatus>,
    said: Option<String>,
    ooms: u64,
) -> PeerError {
    let status_text = status.map(|s| s.to_string()).unwrap_or_default();
    if ooms > 0 {
        return PeerError::OomKilled {
            why: format!("{status_text}; {ooms} OOM kills in its cgroup"),
        };
    }
    if status.is_some_and(|s| s.code() == Some(worker::NOMEM_EXIT)) {
        return PeerError::OomKilled {
            why: format!(
                "{status_text}; a charge failed at the hard stop: {}",
                said.as_deref().unwrap_or("ENOMEM")
            ),
        };
    }
    match said {
        Some(e) => PeerError::Worker(e),
        None => PeerError::Died(status_text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_whose_charge_failed_is_left_out_like_an_oom_kill() {
        use std::os::unix::process::ExitStatusExt;
        let is_oom = |e: &PeerError| e.left_out();
        let exited = |code: i32| Some(ExitStatus::from_raw(code << 8));
        let nomem = worker_ended(
            exited(worker::NOMEM_EXIT),
            Some("writing the result: Cannot allocate memory (os error 12)".into()),
            0,
        );
        assert!(is_oom(&nomem), "{nomem}");
        // As the run reports it: in the system's name.
        let run_error = worker_ended(exited(worker::NOMEM_EXIT), None, 0).in_system(&"kernel-swap");
        assert!(is_oom(&run_error), "{run_error}");
        let line = crate::report::error_line(&run_error);
        assert!(line.starts_with("kernel-swap: the worker died ("), "{line}");
        assert!(nomem
            .to_string()
            .contains("a charge failed at the hard stop"));
        // The line that would have said so may be the charge that failed.
        assert!(is_oom(&worker_ended(exited(worker::NOMEM_EXIT), None, 0)));
        assert!(is_oom(&worker_ended(
            Some(ExitStatus::from_raw(9)),
            None,
            1
        )));
        let own = worker_ended(exited(2), Some("bad spec".into()), 0);
        assert!(!is_oom(&own));
        assert_eq!(own.to_string(), "worker: bad spec");
        assert!(!is_oom(&worker_ended(exited(0), None, 0)));
    }
}
