//! `uzswap param PID [NAME [VALUE]]`: the engine's tunables of a program under `uzswap run`,
//! read and changed while it runs, as /sys/module/zswap/parameters is for the kernel's zswap:
//! every tunable as `name value` lines, one tunable's value, or a new value (`writethrough
//! auto`, `max_pool_percent 30`, `compressor zstd`). The same channel and the same gate as
//! `uzswap stat` (stat/mod.rs): the program's own user and root only.
//!
//! Exit status: 0 done; 1 when the program cannot be reached, refuses, or rejects the name or
//! the value, as one line on stderr; 2 for a usage error.

use std::process::ExitCode;

use clap::Args;

use crate::report;
use crate::stat::{request, UNAVAILABLE};

/// `uzswap param`'s arguments.
#[derive(Debug, Args)]
pub struct ParamArgs {
    /// The program's process ID, or that of the `uzswap run` that started it.
    pub pid: u32,
    /// A tunable (enabled, compressor, max_pool_percent, accept_threshold_percent,
    /// shrinker_enabled, writethrough, compress_threads). Without it, all of them.
    pub name: Option<String>,
    /// Its new value, in its sysfs spelling (Y/N, a number, a codec, `auto`). Without it,
    /// the value is printed.
    pub value: Option<String>,
}

/// Print or change process `args.pid`'s tunables.
pub fn run(args: &ParamArgs) -> ExitCode {
    let text = match (&args.name, &args.value) {
        (Some(name), Some(value)) => {
            if let Some(bad) = [name, value]
                .into_iter()
                .find(|w| w.is_empty() || w.contains(char::is_whitespace))
            {
                report::say(&format!(
                    "{bad:?}: a tunable's name and value are one word each"
                ));
                return ExitCode::from(report::FAILED);
            }
            request(args.pid, &format!("set {name} {value}")).map(|_| String::new())
        }
        (name, _) => show(args.pid, name.as_deref()),
    };
    let text = match text {
        Ok(t) => t,
        Err(line) => {
            report::say(&line);
            return ExitCode::from(UNAVAILABLE);
        }
    };
    report::print(&text, "the tunables")
}

/// Every tunable of process `pid` as `name value` lines, or the value of `name` alone.
fn show(pid: u32, name: Option<&str>) -> Result<String, String> {
    let all = request(pid, "params")?;
    let Some(name) = name else {
        return Ok(all);
    };
    let value = all
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '));
    match value {
        Some(v) => Ok(format!("{v}\n")),
        None => {
            let known: Vec<&str> = all.lines().filter_map(|l| l.split(' ').next()).collect();
            Err(format!(
                "process {pid}: unknown tunable '{name}': known are {}",
                known.join(", ")
            ))
        }
    }
}
