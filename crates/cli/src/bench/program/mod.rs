//! `uzswap bench run`: the user's own program under the kernel's zswap and under uzswap, side
//! by side, at equal memory.
//!
//! Each round runs the kernel side first: the program in a v1 memory cgroup of its own under
//! `--memory-high` (`memory.limit_in_bytes`), with a swap file and the kernel's zswap on
//! (`peer::PeerMachine`, which restores every setting it changed, also on an error or
//! SIGINT/SIGTERM). A v1 cgroup does not charge the zswap pool, so the program holds more
//! than its limit: what it held is its cgroup's usage plus the pool, sampled together. The
//! uzswap side then runs the program as `uzswap run` does (`crate::run::command`), under a
//! limit of exactly what the kernel side held in that round, and the preload's statistics
//! file gives its figures. `--peer none` runs the uzswap side alone, under `--memory-high`.
//!
//! Equal, as far as the two can be compared: the kernel's charge is what the program's cgroup
//! was charged (its anonymous memory, and file pages it was the first to read), uzswap's limit
//! holds the program's heap (the region), and its peak RSS counts the whole process (the
//! interpreter's text, its libraries, uzswap's threads). Both are printed.
//!
//! Every run must exit with status 0; the program's stdin is empty, its stdout and stderr are
//! captured, compared between runs, and printed on a failure (or with `--show-output`).

pub mod child;
pub mod report;
pub mod uzswap;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use serde_json::json;
use zswap::PAGE_SIZE;

use super::peer::{self, KernelRun, PeerMachine, PeerOptions, Reclaim};
use super::progress::{self, Progress};
use super::systems::{compressor_arg, System, SystemName};
use super::workload_args::count_in;
use crate::size::{fmt_size, parse_size};
use child::Exited;
use uzswap::UzswapRun;

/// The arguments of `uzswap bench run`.
#[derive(Debug, Clone, clap::Args)]
pub struct ProgramArgs {
    /// The kernel side's memory limit (memory.limit_in_bytes of its cgroup), e.g. 100M.
    /// uzswap then runs under what the kernel side held (its charge plus its zswap pool,
    /// which a v1 cgroup does not charge); with --peer none, under this.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub memory_high: u64,
    // The help text shows `[:COMP]` as written: not an intra-doc link.
    #[allow(rustdoc::broken_intra_doc_links)]
    /// The kernel side: kernel-zswap[:COMP] (lzo by default), kernel-swap (zswap off), or
    /// none (uzswap alone). The kernel sides need root.
    #[arg(long, value_name = "PEER", default_value = "kernel-zswap", value_parser = peer_arg)]
    pub peer: PeerArg,
    /// Runs of each side, alternating, the kernel side first; medians are reported.
    #[arg(long, default_value_t = 3, value_parser = |s: &str| count_in(s, 1, 1000))]
    pub runs: usize,
    /// uzswap's compressor (default: uzswap run's).
    #[arg(long, value_parser = compressor_arg)]
    pub compressor: Option<String>,
    /// uzswap's folio size, as for uzswap run.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "16K")]
    pub folio_size: u64,
    /// uzswap's heap reservation, as for uzswap run (default: four times its limit, at
    /// least 1 GiB).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_heap: Option<u64>,
    /// uzswap's pool limit, percent of its limit (the pool is charged to it).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub uzswap_max_pool_percent: u32,
    /// Run uzswap without kernel-mode userfaultfd, as for uzswap run.
    #[arg(long)]
    pub user_mode_only: bool,
    /// Serve uzswap's faults in the faulting thread, as for uzswap run (and with its
    /// trade-off).
    #[arg(long)]
    pub in_thread_faults: bool,
    /// Turn off uzswap's working-set protection, as uzswap run's --no-workingset.
    #[arg(long)]
    pub uzswap_no_workingset: bool,
    /// zswap max_pool_percent for the kernel side, 0 to 100 (default: leave it).
    #[arg(long, value_name = "PERCENT", value_parser = clap::value_parser!(u32).range(0..=100))]
    pub max_pool_percent: Option<u32>,
    /// /proc/sys/vm/page-cluster for the kernel side, 0 to 31 (restored after). 0 by
    /// default: with the kernel's readahead (3: 8 pages a swap-in) CPython under a third of
    /// its peak filled its limit with the unmapped pages read ahead and stood still for
    /// minutes, at 100% system time.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 0,
        value_parser = clap::value_parser!(u32).range(0..=31),
    )]
    pub page_cluster: u32,
    /// Where the kernel side's swap file goes.
    #[arg(long, default_value = "/var/tmp")]
    pub swap_dir: PathBuf,
    /// The kernel side's swap file: every page in its zswap pool holds a slot too, so at
    /// least what the program holds beyond --memory-high.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "4G")]
    pub swap_size: u64,
    /// Print the program's stdout and stderr of every run (on stderr).
    #[arg(long)]
    pub show_output: bool,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// The program and its arguments.
    #[arg(last = true, required = true, num_args = 1..)]
    pub program: Vec<OsString>,
}

/// `--peer`: a kernel system, or none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerArg(pub Option<SystemName>);

/// `--peer`'s value, for clap.
pub fn peer_arg(text: &str) -> Result<PeerArg, String> {
    if text == "none" {
        return Ok(PeerArg(None));
    }
    let name: SystemName = text.parse().map_err(|e| format!("{e}"))?;
    match name.name.starts_with("kernel-") {
        true => Ok(PeerArg(Some(name))),
        false => Err(format!(
            "'{text}' is not a kernel peer: give kernel-zswap[:COMP], kernel-swap or none"
        )),
    }
}

/// Whether a kernel side can run here; else one line saying why, and what to do.
pub(crate) fn check_peer(system: &System, euid: u32, zswap: &Path, cgroup: &Path) -> Result<()> {
    let none = "or give --peer none to run uzswap alone";
    if euid != 0 {
        bail!(
            "--peer {system} needs root (it sets up a swap file, a memory cgroup and zswap \
             parameters): run as root, {none}"
        );
    }
    if !zswap.exists() {
        bail!(
            "--peer {system} needs the kernel's zswap, and {} is missing: {none}",
            zswap.display()
        );
    }
    if !cgroup.join("cgroup.procs").exists() {
        bail!(
            "--peer {system} needs a cgroup v1 memory controller at {}: {none}",
            cgroup.display()
        );
    }
    Ok(())
}

/// `uzswap run`'s options for the uzswap side under `limit`.
fn run_args(a: &ProgramArgs, limit: u64) -> crate::run::RunArgs {
    crate::run::RunArgs {
        memory_high: limit,
        memory_max: None,
        on_limit: region::OnLimit::Kill,
        force: false,
        max_heap: a.max_heap,
        compressor: a.compressor.clone(),
        max_pool_percent: a.uzswap_max_pool_percent,
        folio_size: a.folio_size,
        swap_dir: None,
        swap_to: None,
        swap_format: region::SwapFormat::Segments,
        no_encrypt: false,
        writeback_compressor: zswap::params::WritebackCompressor::Same,
        writethrough: region::Writethrough::Off,
        user_mode_only: a.user_mode_only,
        in_thread_faults: a.in_thread_faults,
        no_workingset: a.uzswap_no_workingset,
        referenced_writes: false,
        inactive_list: false,
        no_adaptive_swapin: false,
        register_at_start: false,
        fixed_pool_share: false,
        stats: Some(crate::run::StatsForm::Full),
        stats_file: None,
        program: a.program.clone(),
    }
}

/// uzswap's limit for what the kernel side held: the same, to a whole page.
pub(crate) fn equal_memory(held: u64) -> u64 {
    held.div_ceil(PAGE_SIZE as u64) * PAGE_SIZE as u64
}

/// How a program ended, for a message: "exited with status 1", "was killed by signal 9".
fn ended(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(s)) => format!("was killed by signal {s}"),
        _ => format!("ended ({status})"),
    }
}

/// The program's output of one run, on stderr (above any progress bar).
fn show_output(what: &str, e: &Exited) {
    for (name, bytes) in [("stdout", &e.stdout), ("stderr", &e.stderr)] {
        progress::line(&format!("--- {what}: {name} ({} bytes) ---", bytes.len()));
        let text = String::from_utf8_lossy(bytes);
        let text = text.strip_suffix('\n').unwrap_or(&text);
        if !text.is_empty() {
            progress::line(text);
        }
    }
}

/// What to add to a kernel side's failure after `oom_waits` waits at its cgroup's limit.
pub(crate) fn limit_hint(oom_waits: u64) -> String {
    match oom_waits {
        0 => String::new(),
        n => format!(
            "; it waited at its cgroup's limit {n} times, where a v1 cgroup with the OOM killer \
             off fails the kernel's own accesses to its memory (a system call's buffer, the \
             rseq area: SIGSEGV): give it a larger --memory-high"
        ),
    }
}

/// A run that must have exited with status 0: else its output is shown and the bench fails
/// (`hint` added to the message).
pub(crate) fn check_exit(
    what: &str,
    program: &str,
    e: &Exited,
    show: bool,
    hint: &str,
) -> Result<()> {
    if peer::interrupted() {
        bail!("interrupted");
    }
    if show || !e.status.success() {
        show_output(what, e);
    }
    if !e.status.success() {
        bail!(
            "{what}: {program} {} (its output is above); both sides must exit with status \
             0{hint}",
            ended(e.status)
        );
    }
    Ok(())
}

/// Run `uzswap bench run`.
pub fn run(a: &ProgramArgs) -> Result<()> {
    // A kernel system: lzo unless named (uzswap's compressor and pool do not apply).
    let kernel: Option<System> = a.peer.0.as_ref().map(|n| n.resolve("lz4", "lzo", 20, None));
    if let Some(s) = &kernel {
        check_peer(
            s,
            rustix::process::geteuid().as_raw(),
            Path::new(peer::ZSWAP_PARAMS),
            Path::new(peer::CGROUP_V1_MEMORY),
        )?;
    }
    // Before any thread starts: the signal thread kills the running program on SIGINT or
    // SIGTERM, and the guards below restore what they changed.
    peer::install_interrupt_handler()?;
    // The program, the preload and the options, checked before the machine is set up.
    crate::run::check(&run_args(a, a.memory_high)).map_err(|(_, line)| anyhow::anyhow!(line))?;
    let program = a.program[0].to_string_lossy().into_owned();
    let mut machine = match &kernel {
        Some(s) => {
            let m = PeerMachine::new(PeerOptions {
                swap_dir: a.swap_dir.clone(),
                swap_bytes: a.swap_size,
                page_cluster: Some(a.page_cluster),
                max_pool_percent: a.max_pool_percent,
                reclaim: Reclaim::Limit,
                swappiness: None,
                worker_exe: std::env::current_exe()?,
            })?;
            m.check(s)?;
            Some(m)
        }
        None => None,
    };
    let sides = 1 + kernel.is_some() as usize;
    let progress = Progress::new((sides * a.runs) as u64, "runs", !a.json);
    let mut kernel_runs: Vec<KernelRun> = Vec::new();
    let mut uzswap_runs: Vec<UzswapRun> = Vec::new();
    for i in 1..=a.runs {
        let mut limit = a.memory_high;
        if let (Some(m), Some(s)) = (machine.as_mut(), &kernel) {
            let what = format!("{s}, run {i}");
            progress.start(&what);
            let k = m.run_program(s, &a.program, a.memory_high)?;
            let hint = limit_hint(k.oom_waits);
            check_exit(&what, &program, &k.exited, a.show_output, &hint)?;
            progress.done(&format!(
                "{what}: {:.3} s, held {:.1} MiB ({:.1} charged + {:.1} pool)",
                k.exited.wall.as_secs_f64(),
                mib(k.held),
                mib(k.max_charged),
                mib(k.max_pool)
            ));
            limit = equal_memory(k.held);
            kernel_runs.push(k);
        }
        let what = format!("uzswap, run {i}");
        progress.start(&format!("{what} under {:.1} MiB", mib(limit)));
        let u = uzswap::run(&run_args(a, limit))?;
        check_exit(&what, &program, &u.exited, a.show_output, "")?;
        progress.done(&format!(
            "{what}: {:.3} s under {:.1} MiB",
            u.exited.wall.as_secs_f64(),
            mib(limit)
        ));
        uzswap_runs.push(u);
    }
    drop(progress);
    let mut settings = machine
        .as_ref()
        .map(|m| m.settings().clone())
        .unwrap_or_default();
    drop(machine.take()); // restore the machine before printing
    settings.insert("uzswap_folio_size".into(), fmt_size(a.folio_size));
    settings.insert(
        "uzswap_max_pool_percent".into(),
        a.uzswap_max_pool_percent.to_string(),
    );
    settings.insert(
        "uzswap_compressor".into(),
        a.compressor.clone().unwrap_or_else(|| "default".into()),
    );
    if let (Some(System::KernelZswap { compressor }), false) = (&kernel, kernel_runs.is_empty()) {
        settings.insert("zswap_compressor".into(), compressor.clone());
    }
    let summary = Summary {
        a,
        kernel: kernel.as_ref().map(|s| (s, kernel_runs.as_slice())),
        uzswap: &uzswap_runs,
        settings,
    };
    match a.json {
        true => summary.print_json(),
        false => summary.print(),
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

/// Everything the runs gave, to print.
struct Summary<'a> {
    a: &'a ProgramArgs,
    kernel: Option<(&'a System, &'a [KernelRun])>,
    uzswap: &'a [UzswapRun],
    settings: BTreeMap<String, String>,
}

impl Summary<'_> {
    /// Each run's name and stdout, in the order they ran.
    fn outputs(&self) -> Vec<(String, &[u8])> {
        let mut out = Vec::new();
        for (i, u) in self.uzswap.iter().enumerate() {
            if let Some((s, k)) = self.kernel {
                out.push((format!("{s} run {}", i + 1), k[i].exited.stdout.as_slice()));
            }
            out.push((format!("uzswap run {}", i + 1), u.exited.stdout.as_slice()));
        }
        out
    }

    /// Kernel wall time over uzswap's, medians.
    fn ratio(&self) -> Option<f64> {
        let (_, k) = self.kernel?;
        let kt = report::median_of(&report::kernel_figures(k), "wall s");
        let ut = report::median_of(&report::uzswap_figures(self.uzswap), "wall s");
        Some(kt / ut)
    }

    fn title(&self) -> String {
        let runs = match (self.a.runs, self.kernel.is_some()) {
            (1, false) => "1 run".to_string(),
            (n, false) => format!("{n} runs"),
            (1, true) => "1 run of each side, the kernel first".to_string(),
            (n, true) => format!("{n} runs of each side, alternating, the kernel first"),
        };
        format!(
            "bench run: {} under {}, {runs}",
            report::command_line(&self.a.program),
            fmt_size(self.a.memory_high)
        )
    }

    fn print(&self) -> Result<()> {
        let mut out = crate::report::stdout();
        writeln!(out, "{}", self.title())?;
        let s: Vec<String> = self
            .settings
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        writeln!(out, "settings: {}", s.join(" "))?;
        if let Some((system, runs)) = self.kernel {
            writeln!(
                out,
                "{system}: memory.limit_in_bytes {}; held = its cgroup's charge + the zswap \
                 pool (a v1 cgroup does not charge it), sampled together; charged and pool \
                 are each one's peak",
                fmt_size(self.a.memory_high)
            )?;
            for l in report::table(&report::kernel_figures(runs)) {
                writeln!(out, "{l}")?;
            }
        }
        let limit = match self.kernel {
            Some((s, _)) => format!("limit = what {s} held in the run before it"),
            None => format!("limit {}", fmt_size(self.a.memory_high)),
        };
        writeln!(
            out,
            "uzswap: {limit}; peak RSS = the whole process's (VmHWM); region and pool at the \
             program's exit (region = resident + staged + pool + metadata, what its limit \
             holds)"
        )?;
        for l in report::table(&report::uzswap_figures(self.uzswap)) {
            writeln!(out, "{l}")?;
        }
        if let (Some(r), Some((s, k))) = (self.ratio(), self.kernel) {
            let kt = report::median_of(&report::kernel_figures(k), "wall s");
            let ut = report::median_of(&report::uzswap_figures(self.uzswap), "wall s");
            let faster = match r >= 1.0 {
                true => "uzswap faster",
                false => "uzswap slower",
            };
            writeln!(
                out,
                "wall time {s} / uzswap: {r:.2} ({kt:.3} s / {ut:.3} s, medians; {faster})"
            )?;
        }
        writeln!(out, "{}", report::stdout_verdict(&self.outputs()).1)?;
        Ok(())
    }

    fn print_json(&self) -> Result<()> {
        let (same, _) = report::stdout_verdict(&self.outputs());
        let kernel = self.kernel.map(|(s, runs)| {
            let mut v = report::figures_json(&report::kernel_figures(runs));
            v["system"] = json!(s.to_string());
            v["limit_bytes"] = json!(self.a.memory_high);
            v["vmstat"] = json!(runs.iter().map(|r| &r.stats).collect::<Vec<_>>());
            v["oom_waits"] = json!(runs.iter().map(|r| r.oom_waits).collect::<Vec<_>>());
            v
        });
        let mut uzswap = report::figures_json(&report::uzswap_figures(self.uzswap));
        uzswap["system"] = json!("uzswap");
        uzswap["stats"] = json!(self.uzswap.iter().map(|u| &u.stats).collect::<Vec<_>>());
        let out = json!({
            "command": "run",
            "program": self.a.program.iter().map(|p| p.to_string_lossy()).collect::<Vec<_>>(),
            "memory_high": self.a.memory_high,
            "runs": self.a.runs,
            "settings": self.settings,
            "kernel": kernel,
            "uzswap": uzswap,
            "wall_ratio_kernel_over_uzswap": self.ratio(),
            "stdout_identical": same,
        });
        writeln!(crate::report::stdout(), "{out}")?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_parse() {
        assert_eq!(peer_arg("none").unwrap(), PeerArg(None));
        let k = peer_arg("kernel-zswap:deflate").unwrap().0.unwrap();
        assert_eq!(
            k.resolve("lz4", "lzo", 20, None),
            System::KernelZswap {
                compressor: "deflate".into()
            }
        );
        assert_eq!(
            peer_arg("kernel-zswap")
                .unwrap()
                .0
                .unwrap()
                .resolve("lz4", "lzo", 20, None),
            System::KernelZswap {
                compressor: "lzo".into()
            }
        );
        assert!(peer_arg("uzswap")
            .unwrap_err()
            .contains("not a kernel peer"));
        assert!(peer_arg("bogus").is_err());
    }

    #[test]
    fn a_kernel_side_that_cannot_run_is_one_line() {
        let s = System::KernelZswap {
            compressor: "lzo".into(),
        };
        let root = Path::new("/");
        let e = check_peer(&s, 1000, root, root).unwrap_err().to_string();
        assert!(e.contains("needs root") && e.contains("--peer none"), "{e}");
        assert!(!e.contains('\n'));
        let missing = Path::new("/no/such/zswap");
        let e = check_peer(&s, 0, missing, root).unwrap_err().to_string();
        assert!(e.contains("/no/such/zswap is missing"), "{e}");
        let e = check_peer(&s, 0, root, missing).unwrap_err().to_string();
        assert!(e.contains("cgroup v1"), "{e}");
    }

    #[test]
    fn uzswap_gets_what_the_kernel_held_to_a_page() {
        assert_eq!(equal_memory(1), 4096);
        assert_eq!(equal_memory(8192), 8192);
        assert_eq!(equal_memory(100 << 20 | 5), (100 << 20) + 4096);
    }

    #[test]
    fn an_ending_is_said_plainly() {
        use std::os::unix::process::ExitStatusExt;
        let s = std::process::ExitStatus::from_raw;
        assert_eq!(ended(s(1 << 8)), "exited with status 1");
        assert_eq!(ended(s(9)), "was killed by signal 9");
        assert_eq!(limit_hint(0), "");
        assert!(limit_hint(3).starts_with("; it waited at its cgroup's limit 3 times"));
    }
}
