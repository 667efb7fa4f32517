//! The kernel peer end to end: a tiny usemem run under kernel zswap, then every setting the
//! command touched must be back as before. Needs root (CI runs as root); as another user the
//! command must fail with the one-line root error instead.

mod common;

use std::path::Path;
use std::process::Command;

use uzswap_cli::bench::peer::{SavedSettings, CGROUP_V1_MEMORY};

/// The kernel settings are machine-wide: the tests that change them take turns.
static MACHINE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn uzswap() -> Command {
    Command::new(env!("CARGO_BIN_EXE_uzswap"))
}

/// Run `uzswap ARGS` (with `--json`), which must succeed, and parse what it prints.
fn json_of(args: &[&str]) -> serde_json::Value {
    let out = uzswap().args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap()
}

/// Root, a cgroup v1 memory controller and zswap: what a kernel peer needs (else says the
/// test is skipped).
fn can_run_kernel_peers() -> bool {
    let can = common::is_root()
        && Path::new(CGROUP_V1_MEMORY).exists()
        && Path::new("/sys/module/zswap").exists();
    if !can {
        panic!(
            "this test needs root, a cgroup v1 memory controller at {CGROUP_V1_MEMORY} and \
             zswap (/sys/module/zswap): run it as root on such a kernel (CI does)"
        );
    }
    can
}

/// Run a kernel peer's workload (`args`, with `--json`) with the machine to itself, where
/// kernel peers can run (None elsewhere): each of its `runs` must finish and verify, with
/// every wait at the hard stop ended within 2 s (a few of the controller's samples, 10 ms
/// apart), and every setting must be restored and no cgroup left. Returns what it printed.
fn kernel_peer_runs(args: &[&str], runs: usize) -> Option<serde_json::Value> {
    let _turn = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run_kernel_peers() {
        return None;
    }
    let before = SavedSettings::read().unwrap();
    let v = json_of(args);
    let sys = &v["systems"][0];
    assert_eq!(sys["failed_runs"], serde_json::json!([]), "{sys}");
    let all = sys["runs"].as_array().unwrap();
    assert_eq!(all.len(), runs, "{sys}");
    for run in all {
        assert!(run["output"]["verified"].as_bool().unwrap(), "{run}");
        let longest = run["stats"]["cgroup_longest_oom_wait_ms"].as_i64().unwrap();
        assert!(longest < 2_000, "{run}");
    }
    assert_eq!(SavedSettings::read().unwrap(), before);
    assert!(
        common::peer_cgroups().is_empty(),
        "cgroup left: {:?}",
        common::peer_cgroups()
    );
    Some(v)
}

#[test]
fn kernel_zswap_peer_runs_and_restores_everything() {
    let _turn = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let args = [
        "bench",
        "usemem",
        "--workers",
        "1",
        "--size",
        "64M",
        "--memory-high",
        "48M",
        "--system",
        "kernel-zswap",
        "--runs",
        "1",
        "--page-cluster",
        "0",
        "--json",
    ];
    if !common::is_root() {
        let out = uzswap().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("need root") && err.trim().lines().count() == 1,
            "{err}"
        );
        return;
    }
    if !Path::new(CGROUP_V1_MEMORY).exists() || !Path::new("/sys/module/zswap").exists() {
        panic!(
            "this test needs a cgroup v1 memory controller at {CGROUP_V1_MEMORY} and zswap \
             (/sys/module/zswap), as CI's machine has"
        );
    }
    let before = SavedSettings::read().unwrap();
    let swaps_before = common::active_swaps();
    let v = json_of(&args);
    let sys = &v["systems"][0];
    assert_eq!(sys["system"], "kernel-zswap:lzo");
    let run = &sys["runs"][0];
    assert!(run["stats"]["zswpout"].as_i64().unwrap() > 0, "{run}");
    // The re-read swaps pages back in: the worker's own major faults.
    assert!(run["stats"]["pgmajfault"].as_i64().unwrap() > 0, "{run}");
    assert!(run["output"]["verified"].as_bool().unwrap());
    assert_eq!(run["settings"]["page_cluster"], "0");
    assert!(run["cpu"]["sys_s"].as_f64().is_some());
    assert!(sys["median"]["write MiB/s (total)"].as_f64().unwrap() > 0.0);
    // The pool is not charged to a v1 cgroup: what the workload held is reported with it.
    assert!(run["max_memory_bytes"].as_u64().unwrap() > 0, "{run}");
    assert!(sys["median"]["max charged + pool MiB"].as_f64().unwrap() > 0.0);
    // Its RSS is counted from after the corpus loaded, as on the uzswap side: a 48 MiB
    // limit held by the controller (64 MiB of hard slack) stays well under 48 + 64 MiB.
    assert!(
        run["max_rss_bytes"].as_u64().unwrap() < (112 << 20),
        "{run}"
    );

    assert_eq!(
        SavedSettings::read().unwrap(),
        before,
        "settings not restored"
    );
    common::assert_peer_left_nothing(&swaps_before);
}

/// Beside a kernel peer, uzswap runs at equal memory by default: each round the peer runs
/// first, and uzswap's limit is what the peer held in that round (charge plus the uncharged
/// pool), exactly; `--same-limit` gives it the peer's limit instead. Both say which in the
/// JSON.
#[test]
fn beside_a_kernel_peer_uzswap_gets_what_the_kernel_held() {
    let args = |extra: &[&'static str]| {
        let mut a = vec![
            "bench",
            "usemem",
            "--workers",
            "1",
            "--size",
            "64M",
            "--memory-high",
            "40M",
            "--folio-size",
            "64K",
            "--system",
            "uzswap",
            "--peer",
            "kernel-zswap",
            "--runs",
            "2",
            "--page-cluster",
            "0",
            "--json",
        ];
        a.extend_from_slice(extra);
        a
    };
    let _turn = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run_kernel_peers() {
        return;
    }
    let v = json_of(&args(&[]));
    assert_eq!(v["uzswap_memory"], "equal", "{v}");
    let (uz, kernel) = (&v["systems"][0], &v["systems"][1]);
    assert_eq!(kernel["system"], "kernel-zswap:lzo");
    for round in 0..2 {
        let held = kernel["runs"][round]["max_memory_bytes"].as_u64().unwrap();
        let limit = uz["runs"][round]["limit_bytes"].as_u64().unwrap();
        assert_eq!(limit, held.next_multiple_of(4096), "round {round}: {v}");
        assert!(
            limit > 40 << 20,
            "the kernel held no more than its limit: {v}"
        );
    }
    let v = json_of(&args(&["--same-limit"]));
    assert_eq!(v["uzswap_memory"], "same-limit", "{v}");
    for run in v["systems"][0]["runs"].as_array().unwrap() {
        assert_eq!(run["limit_bytes"].as_u64(), Some(40 << 20), "{run}");
    }
}

/// Under the page-out controller the cgroup's OOM killer is off, and a worker whose charge
/// waits at the hard stop must be woken once the controller has made room: a v1 cgroup wakes
/// its OOM waiters when memory is freed or its limit raised, never when pages are swapped out,
/// which is all the controller does. With `memory.swappiness` 0 the cgroup's own reclaim never
/// swaps, so a writer of 512 MiB under a 48 MiB target (hard stop 112 MiB) waits at the hard
/// stop whenever it outruns the controller (several times in most runs; in about one run in
/// ten, not at all), and finishes only if every wait is ended.
#[test]
fn a_peer_worker_waiting_at_the_hard_stop_is_woken_by_the_controller() {
    let args = [
        "bench",
        "usemem",
        "--workers",
        "1",
        "--size",
        "512M",
        "--memory-high",
        "48M",
        "--system",
        "kernel-zswap",
        "--runs",
        "3",
        "--page-cluster",
        "0",
        "--peer-swappiness",
        "0",
        "--json",
    ];
    let Some(v) = kernel_peer_runs(&args, 3) else {
        return;
    };
    let sys = &v["systems"][0];
    let waits: i64 = sys["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| run["stats"]["cgroup_oom_waits"].as_i64().unwrap())
        .sum();
    assert_eq!(v["settings"]["cgroup_swappiness"], "0");
    // Whether a writer outruns the controller is up to the scheduler: about one run in ten
    // never waits. Three runs, every one finished, at least one that waited.
    assert!(waits > 0, "the writer never waited at the hard stop: {sys}");
}

/// Under `memory.limit_in_bytes` alone (`--peer-reclaim limit`), a random workload with zswap
/// on meets charges the cgroup's own reclaim cannot make room for. With the OOM killer off,
/// such a charge waits and the monitor wakes the worker to reclaim again: every run finishes,
/// none is OOM-killed.
#[test]
fn a_random_workload_under_the_limit_alone_is_not_oom_killed() {
    let args = [
        "bench",
        "mix",
        "--size",
        "300M",
        "--memory-high",
        "250M",
        "--seconds",
        "2",
        "--system",
        "kernel-zswap",
        "--runs",
        "2",
        "--peer-reclaim",
        "limit",
        "--corpus",
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../corpus"),
        "--json",
    ];
    let Some(v) = kernel_peer_runs(&args, 2) else {
        return;
    };
    assert_eq!(v["settings"]["reclaim"], "limit");
}

#[test]
fn a_refused_compressor_fails_and_restores() {
    let _turn = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    if !common::is_root() || !Path::new(CGROUP_V1_MEMORY).exists() {
        return;
    }
    let before = SavedSettings::read().unwrap();
    let out = uzswap()
        .args([
            "bench",
            "usemem",
            "--size",
            "8M",
            "--memory-high",
            "16M",
            "--runs",
            "1",
            "--folio-size",
            "64K",
            "--system",
            "uzswap",
            "--peer",
            "kernel-zswap:no-such-codec",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refused zswap compressor 'no-such-codec'"),
        "{err}"
    );
    // Found when the machine is set up, before the uzswap run that comes first.
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(SavedSettings::read().unwrap(), before);
    assert!(common::peer_cgroups().is_empty());
}

#[test]
fn cli_errors_are_one_line_exit_2() {
    for (args, want) in [
        (
            &[
                "bench",
                "usemem",
                "--size",
                "8M",
                "--memory-high",
                "16M",
                "--system",
                "bogus",
            ][..],
            "unknown system 'bogus'",
        ),
        (
            &[
                "bench",
                "usemem",
                "--size",
                "8M",
                "--memory-high",
                "64K",
                "--system",
                "kernel-swap",
            ][..],
            "--memory-high 64K is below 16M, the least a run takes",
        ),
        (
            &[
                "bench",
                "mix",
                "--size",
                "8M",
                "--memory-high",
                "16M",
                "--seconds",
                "0",
                "--system",
                "kernel-swap",
            ][..],
            "invalid value '0' for '--seconds <SECONDS>': give a number of seconds above 0",
        ),
        (
            &[
                "bench",
                "usemem",
                "--size",
                "8M",
                "--memory-high",
                "16M",
                "--uzswap-memory-high",
                "1M",
                "--folio-size",
                "4K",
            ][..],
            "--uzswap-memory-high 1M is below 16M, the least a run takes",
        ),
        (
            &[
                "bench",
                "sweep",
                "--memory-high",
                "16M",
                "--uzswap-memory-high",
                "32M",
            ][..],
            "--uzswap-memory-high is for usemem and mix",
        ),
        (
            // 2 MiB folios (usemem's default): about 57 MiB needed at the least.
            &["bench", "usemem", "--size", "64M", "--memory-high", "32M"][..],
            "the least this run takes: what a uzswap region of 2 MiB folios may charge",
        ),
        (
            &[
                "bench",
                "mix",
                "--size",
                "64M",
                "--memory-high",
                "48M",
                "--seconds",
                "1",
                "--uzswap-memory-high",
                "64M",
                "--system",
                "kernel-swap",
            ][..],
            "--uzswap-memory-high needs a uzswap system",
        ),
    ] {
        let out = uzswap().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

/// With `UZSWAP_BENCH_TRACE` set, the uzswap side prints where its memory is once a second
/// while the workload runs.
#[test]
fn the_trace_shows_the_uzswap_side_while_it_runs() {
    let out = uzswap()
        .args([
            "bench",
            "mix",
            "--size",
            "48M",
            "--memory-high",
            "40M",
            "--seconds",
            "2",
            "--runs",
            "1",
        ])
        .env("UZSWAP_BENCH_TRACE", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<_> = err.lines().filter(|l| l.starts_with("trace ")).collect();
    // The fill, two seconds of accesses and the verification: a line a second.
    assert!(lines.len() >= 2, "{err}");
    assert!(
        lines
            .iter()
            .all(|l| l.contains("resident") && l.contains("stored_pages")),
        "{err}"
    );
    assert!(
        lines.iter().any(|l| !l.contains("stored_pages 0,")),
        "nothing was ever stored: {err}"
    );
}

/// `--uzswap-memory-high` runs the uzswap side under its own limit (equal memory with a v1
/// peer, whose pool is outside its cgroup), says so in the settings, and holds that limit.
#[test]
fn uzswap_runs_under_its_own_limit_when_given_one() {
    let v = json_of(&[
        "bench",
        "usemem",
        "--size",
        "48M",
        "--memory-high",
        "24M",
        "--uzswap-memory-high",
        "32M",
        "--folio-size",
        "64K",
        "--runs",
        "1",
        "--json",
    ]);
    assert_eq!(v["settings"]["uzswap_memory_high"], "33554432");
    assert_eq!(v["uzswap_memory_high"].as_u64(), Some(32 << 20));
    let run = &v["systems"][0]["runs"][0];
    assert_eq!(run["limit_bytes"].as_u64(), Some(32 << 20), "{run}");
    assert!(run["output"]["verified"].as_bool().unwrap());
    // Past the peer's 24 MiB, within uzswap's 32 (a folio per thread in flight allowed).
    let held = run["max_memory_bytes"].as_u64().unwrap();
    assert!(held > 24 << 20 && held <= (32 << 20) + (1 << 20), "{run}");
}
