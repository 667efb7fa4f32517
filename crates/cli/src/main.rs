//! The `uzswap` command. It holds no logic of its own: it parses arguments, calls the library,
//! and ends through `uzswap_cli::report`: any error, clap's usage errors included, is one line on
//! stderr and exit status 2, so scripts see one code for "this run did not happen".
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "uzswap",
    version,
    about = "zswap, the kernel's compressed swap cache, in userspace"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Benchmarks.
    #[command(subcommand)]
    Bench(Bench),
    /// Page files of real memory.
    #[command(subcommand)]
    Corpus(Corpus),
    /// Run a program with its heap held under a memory limit (exit status: the program's;
    /// 125 when uzswap fails, 126 when the program cannot run, 127 when it is not found).
    Run(uzswap_cli::run::RunArgs),
    /// The statistics of a program under `uzswap run`, while it runs (exit status 1 when
    /// there are none: not under uzswap run, or another user's).
    ///
    /// Every statistic is described in docs/STATISTICS.md. Those of any process of the
    /// program's tree end with the whole tree's: `tree_processes`, `tree_charged_bytes`,
    /// `tree_peak_charged_bytes`, then `tree/PID/NAME` lines for each process.
    Stat(uzswap_cli::stat::StatArgs),
    /// The engine's tunables of a program under `uzswap run`, read or changed while it runs,
    /// as /sys/module/zswap/parameters (exit status 1 when the program cannot be reached,
    /// refuses, or rejects the name or value).
    Param(uzswap_cli::param::ParamArgs),
}

#[derive(Debug, Subcommand)]
enum Corpus {
    /// Read a process's anonymous memory into a page file (PROG: start it, capture, kill it).
    Capture(uzswap_cli::corpus::capture_command::CaptureArgs),
}

#[derive(Debug, Subcommand)]
enum Bench {
    /// Compress and decompress speed and ratio of each codec on page files.
    Codecs(uzswap_cli::bench::codecs::CodecsArgs),
    /// Store and load page files through the engine: throughput, ratio, pool density.
    Engine(uzswap_cli::bench::engine::EngineArgs),
    /// vm-scalability's usemem: N workers write SIZE each, re-read and check it; KB/s.
    Usemem(uzswap_cli::bench::workload_args::UsememArgs),
    /// SeongJae Park's eval_zswap mix: two compressible areas, one random; accesses/s.
    Mix(uzswap_cli::bench::workload_args::MixArgs),
    /// Heap sizes 75%..175% of the limit, random accesses: the writethrough patch's table.
    Sweep(uzswap_cli::bench::workload_args::SweepArgs),
    /// Your own program under the kernel's zswap (in a memory cgroup, needs root) and under
    /// uzswap, side by side at equal memory: wall time, memory held, statistics.
    Run(uzswap_cli::bench::program::ProgramArgs),
    /// Ten unmodified programs of different shapes, each at two pressures, under the
    /// kernel's zswap and under uzswap with its limit at what the kernel held, uzswap's
    /// defaults beside a grid of other settings (needs root).
    Suite(uzswap_cli::bench::suite::SuiteArgs),
    /// One workload on plain memory for a kernel peer (started by the commands above).
    #[command(hide = true)]
    Worker(uzswap_cli::bench::workload_args::WorkerArgs),
    /// One workload on a uzswap region, in a child process (started by the commands above).
    #[command(hide = true)]
    UzswapWorker(uzswap_cli::bench::workload_args::UzswapWorkerArgs),
}

/// The library's warnings (`log`), as `uzswap: warning: ...` lines on stderr; `RUST_LOG`
/// changes the level.
fn init_logging() {
    use std::io::Write;
    env_logger::Builder::new()
        .filter_level(log::LevelFilter::Warn)
        .parse_default_env()
        .format(|out, record| {
            let level = record.level().as_str().to_ascii_lowercase();
            writeln!(out, "uzswap: {level}: {}", record.args())
        })
        .init();
}

fn main() -> ExitCode {
    init_logging();
    // `uzswap run` fails as timeout(1) does, with 125, so that its own failures are told
    // apart from the program's exit status.
    let status = match std::env::args_os().nth(1).is_some_and(|a| a == "run") {
        true => uzswap_cli::run::FAILED,
        false => uzswap_cli::report::FAILED,
    };
    let cli = match uzswap_cli::report::parse_failing_with::<Cli>(status) {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let result = match &cli.command {
        Command::Bench(Bench::Codecs(args)) => {
            uzswap_cli::bench::codecs::run(args).map_err(Into::into)
        }
        Command::Bench(Bench::Engine(args)) => {
            uzswap_cli::bench::engine::run(args).map_err(Into::into)
        }
        Command::Bench(Bench::Usemem(args)) => uzswap_cli::bench::workload_commands::usemem(args),
        Command::Bench(Bench::Mix(args)) => uzswap_cli::bench::workload_commands::mix(args),
        Command::Bench(Bench::Sweep(args)) => uzswap_cli::bench::workload_commands::sweep(args),
        Command::Bench(Bench::Run(args)) => uzswap_cli::bench::program::run(args),
        Command::Bench(Bench::Suite(args)) => uzswap_cli::bench::suite::run(args),
        Command::Bench(Bench::Worker(args)) => uzswap_cli::bench::workload_commands::worker(args),
        Command::Bench(Bench::UzswapWorker(args)) => {
            uzswap_cli::bench::workload_commands::uzswap_worker(args)
        }
        Command::Corpus(Corpus::Capture(args)) => {
            uzswap_cli::corpus::capture_command::capture(args)
        }
        Command::Run(args) => return uzswap_cli::run::run(args),
        Command::Stat(args) => return uzswap_cli::stat::run(args),
        Command::Param(args) => return uzswap_cli::param::run(args),
    };
    uzswap_cli::report::exit(result)
}
