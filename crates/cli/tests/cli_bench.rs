//! The `uzswap` command as a new user meets it: every bad input is one line on stderr and
//! exit status 2, found before any run starts; a closed stdout ends it quietly; a workload
//! benchmark ends with a verdict, in named units, and tells its progress one line a run.

use std::ffi::OsStr;
use std::fmt::Debug;
use std::process::{Command, Stdio};

mod common;
use common::{stderr, stdout, uzswap};

/// A refused input: status 2, one `uzswap: ` line on stderr holding every needle, nothing on
/// stdout, and no run begun (a run says "run 1/...").
fn assert_refused(args: &[impl AsRef<OsStr> + Debug], needles: &[&str]) -> String {
    let o = uzswap(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: {err:?}");
    assert!(err.starts_with("uzswap: "), "{args:?}: {err:?}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: {err:?} lacks {n:?}");
    }
    assert!(o.stdout.is_empty(), "{args:?}: {}", stdout(&o));
    err
}

const USEMEM: [&str; 6] = ["bench", "usemem", "--size", "64M", "--memory-high", "64M"];

fn usemem_with(extra: &[&str]) -> Vec<String> {
    USEMEM.iter().chain(extra).map(|s| s.to_string()).collect()
}

#[test]
fn usage_errors_are_one_line_naming_where_help_is() {
    assert_refused(
        &usemem_with(&["--bogus"]),
        &[
            "unexpected argument '--bogus'",
            "(see 'uzswap bench usemem --help')",
        ],
    );
    assert_refused(
        &["bench", "usemem", "--size", "64M"],
        &["--memory-high <SIZE>", "not provided"],
    );
    assert_refused(
        &["bench"],
        &["'uzswap bench' needs a command: one of codecs, engine, usemem, mix, sweep, run"],
    );
    assert_refused(&[] as &[&str], &["'uzswap' needs a command: one of bench"]);
}

#[test]
fn help_and_version_print_and_exit_0() {
    for args in [
        &["--help"][..],
        &["--version"],
        &["bench", "usemem", "--help"],
    ] {
        let o = uzswap(args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        assert!(!o.stdout.is_empty() && o.stderr.is_empty(), "{args:?}");
    }
}

#[test]
fn bad_options_name_the_option_and_the_accepted_range() {
    assert_refused(
        &usemem_with(&["--compressor", "foo"]),
        &["'--compressor <COMPRESSOR>'", "unknown compressor 'foo'"],
    );
    assert_refused(
        &usemem_with(&["--compressor", "zstd:99"]),
        &[
            "'--compressor <COMPRESSOR>'",
            "zstd's levels are -131072..=22",
        ],
    );
    assert_refused(
        &usemem_with(&["--system", "uzswap:zstd:99"]),
        &["'--system <SYSTEM>'", "zstd's levels are"],
    );
    assert_refused(
        &usemem_with(&["--system", "bogus"]),
        &["unknown system 'bogus'"],
    );
    assert_refused(
        &usemem_with(&["--workers", "0"]),
        &["'--workers <WORKERS>'", "from 1 to 1024"],
    );
    assert_refused(
        &usemem_with(&["--runs", "0"]),
        &["'--runs <RUNS>'", "from 1 to 1000"],
    );
    assert_refused(
        &usemem_with(&["--page-cluster", "40"]),
        &["'--page-cluster <N>'", "0..=31"],
    );
    assert_refused(
        &["bench", "usemem", "--size", "100T", "--memory-high", "64M"],
        &["--size 100T x 1 worker", "100T", "above 16T"],
    );
    assert_refused(
        &["bench", "engine", "--pages", "x.pages", "--threads", "0"],
        &["'--threads <THREADS>'", "from 1 to 256"],
    );
}

/// The least limit of a run is said at once, whatever the limit given below it.
#[test]
fn a_limit_too_small_is_answered_with_the_real_minimum() {
    let least = |limit: &str| {
        let err = assert_refused(
            &["bench", "usemem", "--size", "64M", "--memory-high", limit],
            &[
                &format!("--memory-high {limit} is below "),
                "what a uzswap region of 2 MiB folios may charge for itself",
                "with --folio-size 64K it takes",
            ],
        );
        let after = err.split(" is below ").nth(1).unwrap();
        after.split(',').next().unwrap().to_string()
    };
    let (a, b) = (least("1M"), least("32M"));
    assert_eq!(a, b, "the minimum moved: {a} then {b}");
    assert!(a.ends_with('M') && a.trim_end_matches('M').parse::<u64>().unwrap() > 32);
    // Kernel peers alone: the floor of every run.
    assert_refused(
        &[
            "bench",
            "usemem",
            "--size",
            "64M",
            "--memory-high",
            "1M",
            "--system",
            "kernel-swap",
        ],
        &["--memory-high 1M is below 16M"],
    );
}

#[test]
fn a_limit_above_the_machines_memory_is_refused() {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let total_kb: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap();
    let above = format!("{}G", (total_kb >> 20) + 2);
    assert_refused(
        &[
            "bench",
            "usemem",
            "--size",
            "64M",
            "--memory-high",
            &above,
            "--system",
            "kernel-swap",
        ],
        &[
            &format!("--memory-high {above} is above this machine's memory"),
            "MemTotal",
        ],
    );
}

const MIX: [&str; 10] = [
    "bench",
    "mix",
    "--size",
    "48M",
    "--memory-high",
    "40M",
    "--seconds",
    "1",
    "--runs",
    "1",
];

/// A `--corpus` directory that cannot be read is refused before any run.
#[test]
fn a_bad_corpus_directory_is_refused_before_any_run() {
    let args: Vec<&str> = MIX
        .iter()
        .copied()
        .chain(["--corpus", "/nonexistent/corpus"])
        .collect();
    assert_refused(&args, &["uzswap: corpus directory /nonexistent/corpus"]);
}

/// A failure inside the uzswap worker (its swap file cannot be made) is told once, by the
/// parent, with the system it ran.
#[test]
fn a_worker_failure_is_one_line() {
    let o = Command::new(env!("CARGO_BIN_EXE_uzswap"))
        .args(MIX)
        .env("TMPDIR", "/nonexistent")
        .output()
        .expect("run uzswap");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err:?}");
    assert!(
        err.starts_with("uzswap: uzswap:lz4: creating the uzswap region: swap file: ")
            && err.contains("/nonexistent"),
        "{err:?}"
    );
}

/// Output into a pipe its reader has closed (`| head` done) ends the command with the
/// status of a tool SIGPIPE stopped, and nothing on stderr.
#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    let pages = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../corpus/python-objects.pages"
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_uzswap"))
        .args([
            "bench",
            "codecs",
            "--pages",
            pages,
            "--compressor",
            "lz4",
            "--seconds",
            "0.001",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The read end closed before the first write.
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(141), "{}", stderr(&o));
    assert!(o.stderr.is_empty(), "{}", stderr(&o));
}

/// A small usemem run: the title says one run (nothing alternates), figures carry their
/// units (no bytes, no KB/s), the memory figure over the limit is marked and explained,
/// the 2 MiB folio under a 64 MiB limit gets the hint, and the verdict comes last.
#[test]
fn a_usemem_run_ends_with_its_verdict() {
    let o = uzswap(&usemem_with(&["--runs", "1"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0], "usemem: 1 worker x 64 MiB under 64 MiB, 1 run",
        "{out}"
    );
    assert!(
        !out.contains("alternating") && !out.contains("KB/s"),
        "{out}"
    );
    assert!(lines[2].starts_with("figure (median of 1 run)"), "{out}");
    for l in &lines[3..] {
        let name = l.split("  ").next().unwrap();
        assert!(!name.contains("_bytes"), "a figure in bytes: {l}");
    }
    assert!(out.contains("\nwrite MiB/s (total) "), "{out}");
    let charged = lines
        .iter()
        .find(|l| l.starts_with("max charged MiB "))
        .unwrap();
    let value: f64 = charged
        .split_whitespace()
        .last()
        .unwrap()
        .trim_end_matches('*')
        .parse()
        .unwrap();
    if value > 64.0 {
        assert!(charged.ends_with('*'), "{out}");
        assert!(out.contains("\n* uzswap:lz4 held up to "), "{out}");
    }
    assert!(
        out.contains("\nhint: 2 MiB folios leave ") && out.contains("--folio-size 64K leaves"),
        "{out}"
    );
    let verdict = lines.last().unwrap();
    assert!(
        verdict.starts_with(
            "verified: every byte of 1 worker x 64 MiB read back correctly (1 run); uzswap:lz4 \
             write "
        ),
        "{out}"
    );
    assert!(verdict.contains(" MiB/s, reread "), "{out}");
    // Not a terminal: one plain line for the run.
    let err = stderr(&o);
    assert!(err.starts_with("run 1/1 uzswap:lz4: write "), "{err}");
}

/// The sweep names the cell of each run in its progress, and ends with its verdict.
#[test]
fn the_sweep_names_its_cells() {
    let o = uzswap(&[
        "bench",
        "sweep",
        "--memory-high",
        "16M",
        "--seconds",
        "0.1",
        "--runs",
        "1",
        "--system",
        "uzswap",
        "--corpus",
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../corpus"),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    let runs: Vec<&str> = err.lines().filter(|l| l.starts_with("cell ")).collect();
    assert_eq!(runs.len(), 9, "{err}");
    assert!(
        runs[0].starts_with("cell 75% (12 MiB heap), run 1/1 uzswap:lz4: "),
        "{err}"
    );
    assert!(runs[8].starts_with("cell 175% (28 MiB heap), "), "{err}");
    let out = stdout(&o);
    let verdict = out.lines().last().unwrap();
    assert!(
        verdict.starts_with(
            "verified: every heap read back correctly after its accesses (9 cells x 1 system x \
             1 run)"
        ),
        "{out}"
    );
}
