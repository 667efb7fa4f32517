//! The `uzswap corpus capture` command: its arguments, and a page file of a process's
//! anonymous memory written in the corpus format (4096-byte pages, no header, blocks of 16
//! virtually contiguous pages), with a line saying what it holds; the reading is capture.rs.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};

use zswap::PAGE_SIZE;

use super::capture::{capture_pid, capture_program, BLOCK_PAGES};

/// The arguments of `uzswap corpus capture`.
#[derive(Debug, Clone, clap::Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["pid", "program"])))]
pub struct CaptureArgs {
    /// The process to read, left running (reading it needs ptrace access: root, or its user
    /// with kernel.yama.ptrace_scope 0).
    #[arg(long)]
    pub pid: Option<u32>,
    /// The page file to write.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Pages to write at most, in whole blocks of 16 (64 KiB), sampled evenly over the
    /// process's anonymous memory that is in memory.
    #[arg(long, default_value_t = 2048, value_parser = clap::value_parser!(u64).range(16..))]
    pub pages: u64,
    /// With a program: seconds from its start to the capture; sooner if the program stops
    /// itself (SIGSTOP) first. It is stopped while read, then killed.
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 2.0,
        conflicts_with = "pid"
    )]
    pub after: f64,
    /// The program to start and capture, and its arguments, after `--`.
    #[arg(last = true, value_name = "PROG")]
    pub program: Vec<OsString>,
}

/// `uzswap corpus capture`: write a page file of a process's anonymous memory.
pub fn capture(args: &CaptureArgs) -> Result<()> {
    if !(args.after.is_finite() && args.after >= 0.0) {
        bail!("--after must be a number of seconds, got {}", args.after);
    }
    let max_pages = usize::try_from(args.pages)?;
    let c = match args.pid {
        Some(pid) => capture_pid(pid, max_pages)?,
        None => capture_program(
            &args.program,
            Duration::from_secs_f64(args.after),
            max_pages,
        )?,
    };
    std::fs::write(&args.out, &c.data)
        .map_err(|e| anyhow!("{}: cannot write: {e}", args.out.display()))?;
    let pages = c.nr_pages();
    let unreadable = match c.unreadable_blocks {
        0 => String::new(),
        n => format!(" ({n} unreadable left out)"),
    };
    println!(
        "{}: {pages} pages ({} blocks of {} KiB) of {} (pid {}), sampled from {} resident \
         blocks{unreadable} of {} MiB of anonymous memory; {:.1}% zero pages",
        args.out.display(),
        pages / BLOCK_PAGES,
        BLOCK_PAGES * PAGE_SIZE / 1024,
        c.comm,
        c.pid,
        c.resident_blocks,
        c.anonymous_bytes >> 20,
        100.0 * c.zero_pages() as f64 / pages as f64,
    );
    Ok(())
}
