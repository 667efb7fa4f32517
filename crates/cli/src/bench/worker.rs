//! `uzswap bench worker SPEC` (hidden): one workload on plain memory, for a kernel peer.
//!
//! Line protocol with the parent (`peer.rs`), so that the worker is inside its cgroup before it
//! allocates and the parent can read its CPU time and the pool gauges before it exits:
//! parent "start" → worker loads the corpus, "ready" → parent sets the limit, "go" → worker
//! allocates, "area ADDR LEN", runs, "result JSON" → worker waits for EOF on stdin, then
//! exits. A worker that fails says "error MSG" (and nothing on stderr: the parent tells it)
//! and exits at once (the parent reads its status):
//! with [`NOMEM_EXIT`] if what failed after "go" (under the limit) was a charge outside a page
//! fault (`ENOMEM`: a v1 cgroup at its hard stop with the OOM killer off fails such a charge
//! rather than waiting), which may have been the very line that would have said so.

use std::io::{BufRead, Write};

use zswap::PAGE_SIZE;

use super::workload::{run_on_memory, Content, WorkloadError, WorkloadSpec};
use crate::report::AlreadyTold;

/// The worker's exit status when a charge failed with `ENOMEM`.
pub const NOMEM_EXIT: i32 = 3;

/// Why the worker failed: what it says to the parent in its "error" line.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The spec the parent gave does not parse.
    #[error("bad workload spec")]
    Spec(#[source] serde_json::Error),
    /// The parent said something out of turn.
    #[error("expected '{want}' from the parent, got '{got}'")]
    OutOfTurn {
        /// The word expected.
        want: &'static str,
        /// The line read.
        got: String,
    },
    /// Reading from the parent or writing to it failed.
    #[error("talking to the parent")]
    Parent(#[from] std::io::Error),
    /// The workload's result does not encode.
    #[error("encoding the result")]
    Result(#[source] serde_json::Error),
    /// The workload could not run, or its check failed.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
}

/// Run the worker: the workload `spec_json` (a `WorkloadSpec` as JSON) on plain memory,
/// talking the line protocol above on stdin and stdout. A failure has been told to the
/// parent, which tells it.
pub fn run(spec_json: &str) -> Result<(), AlreadyTold> {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut out = std::io::stdout().lock();
    let mut limited = false;
    match protocol(spec_json, &mut input, &mut out, &mut limited) {
        Ok(_memory) => {
            // Hold the memory until the parent has read what it needs.
            let mut rest = Vec::new();
            let _ = std::io::Read::read_to_end(&mut input, &mut rest);
            Ok(())
        }
        Err(e) => {
            let msg = crate::report::error_line(&e);
            let _ = writeln!(out, "error {msg}").and_then(|_| out.flush());
            // Before "go" no limit was set: an ENOMEM then is an error of its own.
            if limited && is_nomem(&e) {
                std::process::exit(NOMEM_EXIT);
            }
            // The parent tells it, once.
            Err(AlreadyTold)
        }
    }
}

/// The error is, or was caused by, `ENOMEM`.
fn is_nomem(e: &(dyn std::error::Error + 'static)) -> bool {
    let nomem = rustix::io::Errno::NOMEM.raw_os_error();
    crate::report::chain(e).any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.raw_os_error() == Some(nomem))
    })
}

fn wait_for(input: &mut impl BufRead, want: &'static str) -> Result<(), WorkerError> {
    let mut line = String::new();
    input.read_line(&mut line)?;
    if line.trim() != want {
        return Err(WorkerError::OutOfTurn {
            want,
            got: line.trim().to_string(),
        });
    }
    Ok(())
}

/// `limited` is set once the parent has set the limit (it said "go").
fn protocol(
    spec_json: &str,
    input: &mut impl BufRead,
    out: &mut impl Write,
    limited: &mut bool,
) -> Result<Vec<u8>, WorkerError> {
    let spec: WorkloadSpec = serde_json::from_str(spec_json).map_err(WorkerError::Spec)?;
    wait_for(input, "start")?;
    let content = if spec.needs_content() {
        Some(Content::load_or_builtin(spec.corpus.as_deref())?)
    } else {
        None
    };
    writeln!(out, "ready")?;
    out.flush()?;
    wait_for(input, "go")?;
    *limited = true;
    let n = spec.area_bytes();
    // Zeroed allocation: mmap'd and untouched, so nothing is charged until the workload
    // writes. One page extra to align the area, so its pages are the kernel's pages.
    let mut buf = vec![0u8; n + PAGE_SIZE];
    let off = (PAGE_SIZE - buf.as_ptr() as usize % PAGE_SIZE) % PAGE_SIZE;
    let mem = &mut buf[off..off + n];
    writeln!(out, "area {} {}", mem.as_ptr() as usize, n)?;
    out.flush()?;
    let output = run_on_memory(&spec, content.as_ref(), mem)?;
    let json = serde_json::to_string(&output).map_err(WorkerError::Result)?;
    writeln!(out, "result {json}")?;
    out.flush()?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_charge_is_told_from_other_errors() {
        let nomem = std::io::Error::from_raw_os_error(rustix::io::Errno::NOMEM.raw_os_error());
        assert!(is_nomem(&WorkerError::Parent(nomem)));
        let other = std::io::Error::from_raw_os_error(rustix::io::Errno::PIPE.raw_os_error());
        assert!(!is_nomem(&WorkerError::Parent(other)));
        let out_of_turn = WorkerError::OutOfTurn {
            want: "go",
            got: "stop".into(),
        };
        assert!(!is_nomem(&out_of_turn));
    }
}
