//! The uzswap side of `bench run`: the program as `uzswap run --stats` starts it (the run
//! machinery's own command, preload and configuration), its statistics read from the file
//! the preload writes when the program exits.

use std::collections::BTreeMap;

use anyhow::{anyhow, Context, Result};

use super::child::{Exited, Running};

/// One run of a program under uzswap.
#[derive(Debug)]
pub struct UzswapRun {
    /// How it ended, its time and its output.
    pub exited: Exited,
    /// The region's limit (`--memory-high`).
    pub limit: u64,
    /// The preload's statistics at the program's exit (`uzswap run --stats`), by name;
    /// empty if it ended without exiting (a signal).
    pub stats: BTreeMap<String, f64>,
}

impl UzswapRun {
    /// A statistic, if the preload wrote it.
    pub fn stat(&self, name: &str) -> Option<f64> {
        self.stats.get(name).copied()
    }

    /// What the region held at the program's exit: its resident folios, staged folios,
    /// compressed pool and metadata, the parts its limit holds.
    pub fn region_bytes(&self) -> Option<f64> {
        ["resident", "staged", "pool", "metadata"]
            .iter()
            .map(|k| self.stat(&format!("region_{k}_bytes")))
            .sum()
    }
}

/// The preload's statistics (`name value` lines); lines that are not are left out.
pub fn parse_stats(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.trim().split_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

/// Run the program as `args` says (`uzswap run`'s options; `stats` is ignored: the
/// statistics are always read).
pub fn run(args: &crate::run::RunArgs) -> Result<UzswapRun> {
    let file = crate::run::SharedFile::new().map_err(|e| anyhow!(e))?;
    let tree = crate::run::SharedFile::ledger().map_err(|e| anyhow!(e))?;
    let mut command = match crate::run::held_from_outside(args) {
        // Held from outside: `uzswap run` itself runs it, and its time is counted with
        // the program's.
        true => {
            let exe = std::env::current_exe().context("uzswap's own path")?;
            let mut command = std::process::Command::new(exe);
            let with_file = crate::run::RunArgs {
                stats_file: Some(file.path().to_path_buf()),
                stats: None,
                program: args.program.clone(),
                compressor: args.compressor.clone(),
                swap_dir: args.swap_dir.clone(),
                swap_to: args.swap_to.clone(),
                ..*args
            };
            command.arg("run").args(with_file.to_args());
            command
        }
        false => crate::run::command(args, Some(file.path()), Some(tree.path()))
            .map_err(|(_, line)| anyhow!(line))?,
    };
    let program = args.program[0].to_string_lossy();
    let exited = Running::spawn(&mut command)
        .and_then(Running::wait)
        .with_context(|| format!("running {program} under uzswap"))?;
    let stats = parse_stats(&file.read());
    Ok(UzswapRun {
        exited,
        limit: args.memory_high,
        stats,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preloads_lines_parse() {
        let s = parse_stats(
            "zswpout 12\npages_per_fault 4.40\nhugepages-16kB/stats/swpin 3\nbad line x\n\n\
             region_resident_bytes 100\nregion_staged_bytes 0\nregion_pool_bytes 20\n\
             region_metadata_bytes 5\n",
        );
        assert_eq!(s["zswpout"], 12.0);
        assert_eq!(s["pages_per_fault"], 4.4);
        assert_eq!(s["hugepages-16kB/stats/swpin"], 3.0);
        assert!(!s.contains_key("bad"));
        let run = UzswapRun {
            exited: Exited {
                wall: std::time::Duration::ZERO,
                status: std::os::unix::process::ExitStatusExt::from_raw(0),
                cpu: None,
                stdout: vec![],
                stderr: vec![],
            },
            limit: 1,
            stats: s,
        };
        assert_eq!(run.region_bytes(), Some(125.0));
        assert_eq!(run.stat("zswpin"), None);
    }
}
