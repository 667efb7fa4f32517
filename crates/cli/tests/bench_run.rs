//! `uzswap bench run`: a real program (CPython building a dict of small objects, about 70 MiB)
//! under uzswap alone (`--peer none`), and beside the kernel's zswap (`--peer kernel-zswap`,
//! which needs root, zswap and a cgroup v1 memory controller: CI runs as root on such a
//! machine), its figures and output checked; after the kernel side every setting must be
//! back as it was, no swap file on and no cgroup left.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{stderr, stdout};
use uzswap_cli::bench::peer::{SavedSettings, CGROUP_V1_MEMORY, ZSWAP_PARAMS};

/// One benchmark at a time on the machine.
static MACHINE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// About 70 MiB at its peak; its last line is the same however its memory was held. Under
/// 40-50 MiB a run takes seconds (under 32 MiB, where its sorted walk through the dict
/// thrashes, 30 s).
const SCRIPT: &str = r#"
import hashlib
d = {f"key{i}": (i, str(i) * 3, [i, i + 1]) for i in range(150000)}
h = hashlib.sha256()
for k in sorted(d):
    h.update(repr(d[k]).encode())
print(len(d), h.hexdigest())
"#;

/// `uzswap bench run ARGS -- PROGRAM...`, the machine to itself.
fn bench_run(args: &[&str], program: &[&str]) -> Output {
    common::ensure_preload();
    let mut all = vec!["bench", "run"];
    all.extend_from_slice(args);
    all.push("--");
    all.extend_from_slice(program);
    common::uzswap(&all)
}

fn json(o: &Output) -> serde_json::Value {
    assert_eq!(o.status.code(), Some(0), "{}", stderr(o));
    serde_json::from_str(stdout(o).trim()).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)))
}

fn plain_output() -> String {
    let o = Command::new("python3")
        .args(["-c", SCRIPT])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o)
}

fn figure(side: &serde_json::Value, run: usize, name: &str) -> f64 {
    side["runs"][run][name]
        .as_f64()
        .unwrap_or_else(|| panic!("no {name} in run {run}: {side}"))
}

#[test]
fn uzswap_alone_runs_the_program_under_the_limit_and_reports_it() {
    let _turn = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let o = bench_run(
        &[
            "--peer",
            "none",
            "--memory-high",
            "48M",
            "--runs",
            "2",
            "--json",
            "--show-output",
        ],
        &["python3", "-c", SCRIPT],
    );
    let v = json(&o);
    assert!(v["kernel"].is_null(), "{v}");
    assert_eq!(v["stdout_identical"], true);
    let u = &v["uzswap"];
    for run in 0..2 {
        assert_eq!(figure(u, run, "limit MiB"), 48.0);
        assert!(figure(u, run, "zswpout") > 0.0, "nothing evicted: {u}");
        assert!(figure(u, run, "wall s") > 0.0);
        // The whole process: the interpreter and its libraries too, outside the region.
        assert!(figure(u, run, "peak RSS MiB") > 16.0, "{u}");
        assert!(u["stats"][run]["faults"].as_f64().unwrap() > 0.0);
    }
    assert!(u["median"]["wall s"].as_f64().unwrap() > 0.0);
    // --show-output: the program's own output, on stderr, as it prints it without uzswap.
    let err = stderr(&o);
    assert!(err.contains(&plain_output()), "{err}");
    assert!(err.contains("--- uzswap, run 2: stdout"), "{err}");
}

/// A statically linked program (held from outside: `uzswap run` runs it, agent.rs) is run
/// and reported as any other: the C mallocs workload, its heap four times the limit.
#[test]
fn a_static_program_runs_under_the_limit_and_is_reported() {
    let _turn = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/mallocs.c");
    let program =
        std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-static-mallocs");
    let built = Command::new("cc")
        .args(["-O2", "-static", "-o"])
        .arg(&program)
        .arg(&source)
        .status()
        .unwrap();
    assert!(built.success(), "cc -static failed: static glibc is needed");
    let o = bench_run(
        &[
            "--peer",
            "none",
            "--memory-high",
            "24M",
            "--runs",
            "1",
            "--json",
        ],
        &[program.to_str().unwrap(), "2", "100000"],
    );
    let v = json(&o);
    let u = &v["uzswap"];
    assert_eq!(figure(u, 0, "limit MiB"), 24.0);
    assert!(figure(u, 0, "zswpout") > 0.0, "nothing evicted: {u}");
    assert!(u["stats"][0]["faults"].as_f64().unwrap() > 0.0, "{u}");
}

#[test]
fn the_text_report_has_a_row_per_run_and_the_medians() {
    let _turn = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let o = bench_run(
        &["--peer", "none", "--memory-high", "32M", "--runs", "3"],
        &["sh", "-c", "echo same"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0], "bench run: sh -c 'echo same' under 32M, 3 runs",
        "{out}"
    );
    assert!(lines[1].starts_with("settings: "), "{out}");
    assert!(lines[2].starts_with("uzswap: limit 32M;"), "{out}");
    let header: Vec<&str> = lines[3].split_whitespace().collect();
    for name in [
        "wall", "limit", "zswpout", "zswpin", "zswpwb", "pswpout", "pswpin",
    ] {
        assert!(header.contains(&name), "{name} missing: {}", lines[3]);
    }
    for (i, row) in ["1", "2", "3", "median"].iter().enumerate() {
        assert_eq!(lines[4 + i].split_whitespace().next(), Some(*row), "{out}");
    }
    assert_eq!(
        lines[8], "stdout: identical in all 3 runs (5 bytes)",
        "{out}"
    );
    assert_eq!(lines.len(), 9, "{out}");
    // The program's output is printed only when asked for, or on a failure.
    assert!(!stderr(&o).contains("same"), "{}", stderr(&o));
}

#[test]
fn a_program_that_fails_fails_the_bench_and_its_output_is_shown() {
    let _turn = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let o = bench_run(
        &["--peer", "none", "--memory-high", "32M"],
        &["sh", "-c", "echo partial; echo broken >&2; exit 3"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty());
    let err = stderr(&o);
    assert!(err.contains("partial") && err.contains("broken"), "{err}");
    let last = err.lines().last().unwrap();
    assert_eq!(
        last,
        "uzswap: uzswap, run 1: sh exited with status 3 (its output is above); both sides \
         must exit with status 0"
    );
    let o = bench_run(
        &["--peer", "none", "--memory-high", "32M"],
        &["no-such-program-x"],
    );
    common::assert_one_line_error(&o, "no-such-program-x: command not found");
}

#[test]
fn beside_the_kernels_zswap_uzswap_gets_what_the_kernel_held() {
    let _turn = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let args = [
        "--peer",
        "kernel-zswap",
        "--memory-high",
        "40M",
        "--runs",
        "1",
        "--json",
    ];
    if !common::is_root() {
        let o = bench_run(&args, &["python3", "-c", SCRIPT]);
        common::assert_one_line_error(&o, "--peer kernel-zswap:lzo needs root");
        eprintln!(
            "\n*** NOT RUN: the kernel-zswap side of bench run needs root; only its refusal \
             was checked ***\n"
        );
        return;
    }
    if !Path::new(ZSWAP_PARAMS).exists() || !Path::new(CGROUP_V1_MEMORY).exists() {
        eprintln!(
            "\n*** SKIPPED: bench run --peer kernel-zswap needs the kernel's zswap ({ZSWAP_PARAMS}) \
             and a cgroup v1 memory controller ({CGROUP_V1_MEMORY}); this machine lacks one: \
             the kernel side was NOT tested ***\n"
        );
        return;
    }
    let before = SavedSettings::read().unwrap();
    let swaps_before = common::active_swaps();
    let o = bench_run(&args, &["python3", "-c", SCRIPT]);
    let after = SavedSettings::read().unwrap();
    assert_eq!(after, before, "settings not restored");
    common::assert_peer_left_nothing(&swaps_before);

    let v = json(&o);
    let k = &v["kernel"];
    assert_eq!(k["system"], "kernel-zswap:lzo", "{v}");
    assert!(figure(k, 0, "zswpout") > 0.0, "nothing went to zswap: {k}");
    // Its pool is not charged to its cgroup: it held more than its limit.
    let held = figure(k, 0, "held MiB");
    assert!(figure(k, 0, "charged MiB") <= 40.0 + 0.1, "{k}");
    assert!(figure(k, 0, "pool MiB") > 0.0, "{k}");
    assert!(held > 40.0, "{k}");
    // uzswap ran under what the kernel held, to a page.
    let u = &v["uzswap"];
    let limit = figure(u, 0, "limit MiB");
    assert!(limit >= held && limit - held < 0.01, "{limit} vs {held}");
    assert!(figure(u, 0, "zswpout") > 0.0, "{u}");
    assert_eq!(v["stdout_identical"], true, "{v}");
    assert!(v["wall_ratio_kernel_over_uzswap"].as_f64().unwrap() > 0.0);
    // Without readahead unless told otherwise (see `bench run --help`).
    assert_eq!(v["settings"]["page_cluster"], "0");
    assert_eq!(v["settings"]["reclaim"], "limit");
}

/// The kernel side's program does not see its cgroup's limit, as uzswap's sees none: a
/// program that sizes itself to it (a JVM choosing its collector, node its heap) runs the
/// same on both sides. The program reads the limit of its own cgroup as such a program does
/// (`/proc/self/cgroup`) and says whether it is under 1 GiB.
#[test]
fn the_kernel_sides_program_does_not_see_its_cgroups_limit() {
    let _turn = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    assert!(
        common::is_root()
            && Path::new(ZSWAP_PARAMS).exists()
            && Path::new(CGROUP_V1_MEMORY).exists(),
        "bench run --peer kernel-zswap needs root, the kernel's zswap ({ZSWAP_PARAMS}) and a \
         cgroup v1 memory controller ({CGROUP_V1_MEMORY}): run the tests as root on such a \
         machine (README)"
    );
    const SEES_A_LIMIT: &str = r#"
x = [str(i) * 20 for i in range(600_000)]
path = [l.split(":")[2] for l in open("/proc/self/cgroup").read().splitlines()
        if l.split(":")[1] == "memory"][0].rstrip("/")
limit = int(open("/sys/fs/cgroup/memory" + path + "/memory.limit_in_bytes").read())
print(len(x), "limited" if limit < (1 << 30) else "unlimited")
"#;
    let o = bench_run(
        &[
            "--peer",
            "kernel-zswap",
            "--memory-high",
            "40M",
            "--runs",
            "1",
            "--json",
        ],
        &["python3", "-c", SEES_A_LIMIT],
    );
    let v = json(&o);
    assert_eq!(v["stdout_identical"], true, "{v}");
}

/// `bench suite` with one of its programs (sqlite3, about 180 MiB at its peak) at one
/// pressure and its defaults alone: the kernel side under two thirds of the plain peak,
/// uzswap under what the kernel held, both printing what the plain run printed (the suite
/// fails otherwise), the machine restored. An unknown program is one line.
#[test]
fn the_suite_runs_a_program_beside_the_kernel_at_equal_memory() {
    let _turn = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let o = common::uzswap(&["bench", "suite", "--programs", "java"]);
    common::assert_one_line_error(&o, "no suite program 'java'");
    assert!(
        common::is_root()
            && Path::new(ZSWAP_PARAMS).exists()
            && Path::new(CGROUP_V1_MEMORY).exists(),
        "bench suite's test needs root, the kernel's zswap ({ZSWAP_PARAMS}) and a cgroup v1 \
         memory controller ({CGROUP_V1_MEMORY}): run the tests as root on such a machine (README)"
    );
    common::ensure_preload();
    let before = SavedSettings::read().unwrap();
    let swaps_before = common::active_swaps();
    let o = common::uzswap(&[
        "bench",
        "suite",
        "--programs",
        "sqlite3",
        "--pressures",
        "1.5",
        "--grid",
        "none",
        "--json",
    ]);
    assert_eq!(
        SavedSettings::read().unwrap(),
        before,
        "settings not restored"
    );
    common::assert_peer_left_nothing(&swaps_before);
    let v = json(&o);
    let row = &v["rows"][0];
    assert_eq!(row["program"], "sqlite3", "{v}");
    let limit = row["kernel_limit_bytes"].as_f64().unwrap();
    let held = row["kernel"]["held_bytes"].as_f64().unwrap();
    assert!(held > limit, "the kernel's pool is not charged: {row}");
    let defaults = &row["uzswap"]["defaults"];
    let uzswap_limit = defaults["limit_bytes"][0].as_f64().unwrap();
    assert!((uzswap_limit - held).abs() <= 4096.0, "{row}");
    assert!(
        defaults["stats"][0]["zswpout"].as_f64().unwrap() > 0.0,
        "{row}"
    );
    assert!(
        row["kernel_over_uzswap_defaults"].as_f64().unwrap() > 0.0,
        "{row}"
    );
}
