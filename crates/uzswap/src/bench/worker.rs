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

use anyhow::{bail, Result};

use zswap::PAGE_SIZE;

use super::workload::{run_on_memory, Content, WorkloadSpec};

/// The worker's exit status when a charge failed with `ENOMEM`.
pub const NOMEM_EXIT: i32 = 3;

/// Run the worker: the workload `spec_json` (a `WorkloadSpec` as JSON) on plain memory,
/// talking the line protocol above on stdin and stdout.
pub fn run(spec_json: &str) -> Result<()> {
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
            let msg = format!("{e:#}").replace('\n', " ");
            let _ = writeln!(out, "error {msg}").and_then(|_| out.flush());
            // Before "go" no limit was set: an ENOMEM then is an error of its own.
            if limited && is_nomem(&e) {
                std::process::exit(NOMEM_EXIT);
            }
            // The parent tells it, once.
            Err(crate::report::AlreadyTold.into())
        }
    }
}

/// The error is, or was caused by, `ENOMEM`.
fn is_nomem(e: &anyhow::Error) -> bool {
    let nomem = rustix::io::Errno::NOMEM.raw_os_error();
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.raw_os_error() == Some(nomem))
    })
}

fn wait_for(input: &mut impl BufRead, want: &str) -> Result<()> {
    let mut line = String::new();
    input.read_line(&mut line)?;
    if line.trim() != want {
        bail!("expected '{want}' from the parent, got '{}'", line.trim());
    }
    Ok(())
}

/// `limited` is set once the parent has set the limit (it said "go").
fn protocol(
    spec_json: &str,
    input: &mut impl BufRead,
    out: &mut impl Write,
    limited: &mut bool,
) -> Result<Vec<u8>> {
    let spec: WorkloadSpec = serde_json::from_str(spec_json)?;
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
    writeln!(out, "result {}", serde_json::to_string(&output)?)?;
    out.flush()?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_charge_is_told_from_other_errors() {
        let nomem = std::io::Error::from_raw_os_error(rustix::io::Errno::NOMEM.raw_os_error());
        assert!(is_nomem(
            &anyhow::Error::new(nomem).context("writing the result")
        ));
        let other = std::io::Error::from_raw_os_error(rustix::io::Errno::PIPE.raw_os_error());
        assert!(!is_nomem(&anyhow::Error::new(other)));
        assert!(!is_nomem(&anyhow::anyhow!("bad spec")));
    }
}
