//! A program that `bench run` runs, from the parent's side: started with an empty stdin and
//! its stdout and stderr captured, timed from its start to its exit, its CPU time (its own
//! and that of the children it waited for) read once it has exited and before it is reaped,
//! and killed by the signal thread on SIGINT/SIGTERM (the run then fails, and every guard
//! restores what it changed).

use std::io::{self, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::bench::peer::KillOnInterrupt;
use crate::bench::stats::CpuTimes;

/// A program that ran to its exit.
#[derive(Debug)]
pub struct Exited {
    /// From its start to its exit.
    pub wall: Duration,
    /// How it ended.
    pub status: ExitStatus,
    /// Its CPU time and its waited-for children's, if `/proc` had it.
    pub cpu: Option<CpuTimes>,
    /// What it wrote to stdout.
    pub stdout: Vec<u8>,
    /// What it wrote to stderr.
    pub stderr: Vec<u8>,
}

/// A running program; killed and reaped if dropped before it was waited for.
pub struct Running {
    child: Child,
    start: Instant,
    stdout: Option<JoinHandle<Vec<u8>>>,
    stderr: Option<JoinHandle<Vec<u8>>>,
    _kill: KillOnInterrupt,
}

/// Read `r` to its end in a thread of its own (stdout and stderr both, or a program that
/// fills one pipe while we wait on the other would stop).
fn collect(mut r: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        v
    })
}

impl Running {
    /// Start `command` with an empty stdin, its stdout and stderr captured.
    pub fn spawn(command: &mut Command) -> io::Result<Running> {
        let start = Instant::now();
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let kill = KillOnInterrupt::new(child.id() as i32);
        let stdout = child.stdout.take().map(collect);
        let stderr = child.stderr.take().map(collect);
        Ok(Running {
            child,
            start,
            stdout,
            stderr,
            _kill: kill,
        })
    }

    /// Its pid.
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Wait for it to exit, and for the ends of its stdout and stderr.
    pub fn wait(mut self) -> io::Result<Exited> {
        let pid = rustix::process::Pid::from_raw(self.pid()).expect("child pid > 0");
        // Exited but not reaped: its /proc entry still has its CPU time.
        loop {
            let options =
                rustix::process::WaitIdOptions::EXITED | rustix::process::WaitIdOptions::NOWAIT;
            match rustix::process::waitid(rustix::process::WaitId::Pid(pid), options) {
                Ok(_) => break,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        let wall = self.start.elapsed();
        let cpu = std::fs::read_to_string(format!("/proc/{}/stat", pid.as_raw_nonzero()))
            .ok()
            .and_then(|t| CpuTimes::parse_stat_with_children(&t));
        let status = self.child.wait()?;
        let join = |h: Option<JoinHandle<Vec<u8>>>| {
            h.map(|h| h.join().unwrap_or_default()).unwrap_or_default()
        };
        Ok(Exited {
            wall,
            status,
            cpu,
            stdout: join(self.stdout.take()),
            stderr: join(self.stderr.take()),
        })
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // A child already waited for is not signalled again (std knows its status).
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_status_and_time_are_captured() {
        let mut c = Command::new("/bin/sh");
        c.args(["-c", "echo out; echo err >&2; sleep 0.1; exit 3"]);
        let e = Running::spawn(&mut c).unwrap().wait().unwrap();
        assert_eq!(e.stdout, b"out\n");
        assert_eq!(e.stderr, b"err\n");
        assert_eq!(e.status.code(), Some(3));
        assert!(e.wall >= Duration::from_millis(100), "{:?}", e.wall);
        assert!(e.cpu.is_some());
    }
}
