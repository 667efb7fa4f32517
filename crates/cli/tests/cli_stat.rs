//! `uzswap stat PID` on a program under `uzswap run` while it runs: `name value` lines, JSON
//! and the Prometheus text format; another user refused in one line; a process without
//! uzswap one line and status 1. And `uzswap run --stats` at exit names the same statistics.
//! `uzswap param PID` reads and changes its tunables through the same channel.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Output, Stdio};

use common::{compile, ensure_preload, stderr, stdout};

/// A program (tests/programs/hold.c) under `uzswap run`, holding its heap until its stdin
/// closes.
struct Held {
    run: Child,
    /// The program's own process ID.
    pid: u32,
    stdout: BufReader<ChildStdout>,
}

/// Start `hold MIB` under `uzswap run RUN_ARGS`, as the user `uid` if given (root only), and
/// wait until it has filled its heap.
fn hold(program: &std::path::Path, run_args: &[&str], mib: u32, uid: Option<u32>) -> Held {
    ensure_preload();
    let uzswap = env!("CARGO_BIN_EXE_uzswap");
    let mut command = match uid {
        Some(uid) => {
            let mut c = Command::new("setpriv");
            c.args(as_user(uid)).arg(uzswap);
            c
        }
        None => Command::new(uzswap),
    };
    command
        .arg("run")
        .args(run_args)
        .arg("--")
        .arg(program)
        .arg(mib.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut run = command.spawn().expect("start uzswap run");
    let mut stdout = BufReader::new(run.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let Some(pid) = line
        .strip_prefix("ready ")
        .and_then(|p| p.trim().parse().ok())
    else {
        let _ = run.kill();
        let o = run.wait_with_output().unwrap();
        panic!("the program did not start: {line:?} {}", stderr(&o))
    };
    Held { run, pid, stdout }
}

impl Held {
    /// `finish`, then check that the program ended well and said its sum, and remove
    /// `program`.
    fn finish_well(self, program: &std::path::Path) -> Output {
        let o = self.finish();
        let _ = std::fs::remove_file(program);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert!(stdout(&o).starts_with("sum "), "{}", stdout(&o));
        o
    }

    /// Close the program's stdin and wait: `uzswap run`'s output, the program's first line
    /// (read already) aside.
    fn finish(mut self) -> Output {
        drop(self.run.stdin.take());
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut self.stdout, &mut rest).unwrap();
        let mut o = self.run.wait_with_output().unwrap();
        o.stdout = rest.into_bytes();
        o
    }
}

/// setpriv's arguments to run as user and group `id`, without supplementary groups.
fn as_user(id: u32) -> [String; 3] {
    [
        format!("--reuid={id}"),
        format!("--regid={id}"),
        "--clear-groups".into(),
    ]
}

/// `uzswap stat ARGS`, as the user `uid` if given.
fn stat(args: &[&str], uid: Option<u32>) -> Output {
    match uid {
        Some(uid) => Command::new("setpriv")
            .args(as_user(uid))
            .arg(env!("CARGO_BIN_EXE_uzswap"))
            .arg("stat")
            .args(args)
            .output()
            .expect("run setpriv"),
        None => {
            let mut all = vec!["stat"];
            all.extend_from_slice(args);
            common::uzswap(&all)
        }
    }
}

/// `uzswap param ARGS`, as the user `uid` if given.
fn param(args: &[&str], uid: Option<u32>) -> Output {
    let mut command = match uid {
        Some(uid) => {
            let mut c = Command::new("setpriv");
            c.args(as_user(uid)).arg(env!("CARGO_BIN_EXE_uzswap"));
            c
        }
        None => Command::new(env!("CARGO_BIN_EXE_uzswap")),
    };
    command
        .arg("param")
        .args(args)
        .output()
        .expect("run uzswap param")
}

/// A `name value` line's value.
fn value(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

/// A refusal or a missing program: status 1, one `uzswap: ` line holding `needle`, no stdout.
fn assert_unavailable(o: &Output, needle: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{err}{}", stdout(o));
    assert_eq!(err.lines().count(), 1, "{err:?}");
    assert!(
        err.starts_with("uzswap: ") && err.contains(needle),
        "{err:?}"
    );
    assert!(o.stdout.is_empty(), "{}", stdout(o));
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Names both the live statistics and `--stats` at exit hold: the engine's kernel-named
/// ones, fault latency, and where the memory is.
const NAMES: &[&str] = &[
    "zswpout",
    "zswpin",
    "zswpwb",
    "pswpin",
    "pswpout",
    "stored_pages",
    "pool_total_size",
    "hugepages-16kB/stats/zswpout",
    "hugepages-16kB/stats/swpin",
    "faults",
    "fault_latency_p50_ns",
    "fault_latency_p99_ns",
    "fault_latency_max_ns",
    "region_resident_bytes",
    "region_pool_bytes",
    "memory_limit_bytes",
    "swap_file_bytes",
    "peak_rss_bytes",
    "rss_bytes",
    "outside_bytes",
];

/// 48 MiB filled under a 16 MiB limit, read three ways while the program waits; another user
/// (nobody, when the test runs as root) refused; `--stats` at exit.
#[test]
fn stat_prints_a_running_programs_statistics_three_ways() {
    let program = compile("hold");
    let held = hold(
        &program,
        &["--memory-high", "16M", "--stats=full"],
        48,
        None,
    );
    let pid = held.pid.to_string();

    let o = stat(&[&pid], None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    for name in NAMES {
        value(&text, name);
    }
    assert!(value(&text, "zswpout") > 0, "nothing evicted: {text}");
    assert_eq!(value(&text, "memory_limit_bytes"), 16 << 20);

    let o = stat(&[&pid, "--json"], None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(json["zswpout"].as_u64().unwrap() > 0, "{json}");
    assert_eq!(json["memory_limit_bytes"], 16 << 20);
    let rss = json["rss_bytes"].as_u64().unwrap();
    assert!(rss >= json["region_resident_bytes"].as_u64().unwrap());
    assert!(json["outside_bytes"].as_u64().unwrap() < rss);
    assert!(json["pages_per_fault"].as_f64().unwrap() >= 1.0);

    let o = stat(&[&pid, "--prometheus"], None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let prom = stdout(&o);
    for line in [
        "# TYPE uzswap_zswpout_total counter",
        "# TYPE uzswap_stored_pages gauge",
        "# TYPE uzswap_pool_total_size_bytes gauge",
        "# TYPE uzswap_hugepages_zswpout_total counter",
        "# TYPE uzswap_fault_latency_p99_seconds gauge",
        "# TYPE uzswap_peak_rss_bytes gauge",
        "# TYPE uzswap_outside_bytes gauge",
        "uzswap_memory_limit_bytes 16777216",
    ] {
        assert!(prom.lines().any(|l| l == line), "{line:?} missing:\n{prom}");
    }
    assert_prometheus_format(&prom);

    if is_root() {
        assert_unavailable(&stat(&[&pid], Some(65534)), "refused");
    } else {
        eprintln!("not root: another user's refusal is not tested");
    }

    let o = held.finish_well(&program);
    let at_exit = stderr(&o);
    for name in NAMES {
        value(&at_exit, name);
    }
    assert!(
        value(&at_exit, "zswpin") > 0,
        "nothing brought back: {at_exit}"
    );
    assert_unavailable(&stat(&[&pid], None), "no");
}

/// Every line is a `# HELP`, a `# TYPE` (counter or gauge, each family once, before its
/// samples) or a sample `name{labels} value` of the family last typed; counters end in
/// `_total`; every name starts with `uzswap_` and uses `[a-zA-Z0-9_]` only.
fn assert_prometheus_format(prom: &str) {
    let mut typed: Vec<&str> = Vec::new();
    let mut helped: Vec<&str> = Vec::new();
    for line in prom.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap();
            assert!(!help.is_empty() && !helped.contains(&name), "{line}");
            helped.push(name);
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(
                helped.last() == Some(&name),
                "TYPE without HELP before: {line}"
            );
            assert!(!typed.contains(&name), "{name} typed twice");
            match kind {
                "counter" => assert!(name.ends_with("_total"), "{line}"),
                "gauge" => assert!(!name.ends_with("_total"), "{line}"),
                _ => panic!("{line}: neither counter nor gauge"),
            }
            assert!(name.starts_with("uzswap_"), "{line}");
            assert!(
                name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "{line}"
            );
            typed.push(name);
        } else {
            let (series, value) = line.rsplit_once(' ').unwrap();
            let name = series.split('{').next().unwrap();
            assert_eq!(
                typed.last(),
                Some(&name),
                "a sample out of its family: {line}"
            );
            assert!(value.parse::<f64>().is_ok(), "{line}");
            if let Some(labels) = series.strip_prefix(name).filter(|l| !l.is_empty()) {
                let size = labels.starts_with("{size=\"") && labels.ends_with("kB\"}");
                let process = labels.starts_with("{pid=\"") && labels.ends_with("\"}");
                assert!(size || process, "{line}");
            }
        }
    }
    assert!(typed.len() > 60, "{} families", typed.len());
}

/// The program runs as nobody (user-mode faults only: nobody may not have the kernel's
/// served): nobody and root read its statistics, another user is refused.
#[test]
fn only_the_programs_own_user_and_root_read_its_statistics() {
    assert!(
        is_root(),
        "this test runs the program as another user: run it as root (CI does)"
    );
    let program = compile("hold");
    let held = hold(
        &program,
        &["--memory-high", "16M", "--user-mode-only"],
        24,
        Some(65534),
    );
    let pid = held.pid.to_string();
    for uid in [Some(65534), None] {
        let o = stat(&[&pid], uid);
        assert_eq!(o.status.code(), Some(0), "as {uid:?}: {}", stderr(&o));
        assert!(value(&stdout(&o), "zswpout") > 0, "{}", stdout(&o));
    }
    assert_unavailable(&stat(&[&pid, "--json"], Some(65533)), "refused");
    let o = held.finish();
    let _ = std::fs::remove_file(&program);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// A process without uzswap and one that does not exist: one line each, status 1. `uzswap
/// run` itself, given for its program, answers with its program's statistics.
#[test]
fn stat_without_a_program_under_uzswap_is_one_line_and_status_1() {
    let own = std::process::id().to_string();
    assert_unavailable(&stat(&[&own], None), "does not run under uzswap run");
    // Past the largest pid_max (2^22): no such process.
    assert_unavailable(&stat(&["4194305"], None), "no process 4194305");
    let program = compile("hold");
    let held = hold(&program, &["--memory-high", "64M"], 1, None);
    let run = held.run.id().to_string();
    let o = stat(&[&run], None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("memory_limit_bytes 67108864"),
        "{}",
        stdout(&o)
    );
    let o = held.finish();
    let _ = std::fs::remove_file(&program);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// A forked child that outlives its parent (CPython's `os.fork`) closes the statistics socket
/// it inherited: `uzswap stat PARENT` then says at once that there is no such process, instead
/// of connecting to a socket nobody serves and waiting for an answer.
#[test]
fn a_forked_child_does_not_keep_its_parents_statistics_socket() {
    ensure_preload();
    let script = r#"
import os, time
pid = os.fork()
if pid == 0:
    null = os.open("/dev/null", os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    time.sleep(3)
    os._exit(0)
print(os.getpid(), pid)
"#;
    let o = common::uzswap(&["run", "--memory-high", "64M", "--", "python3", "-c", script]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let (parent, child) = out.trim().split_once(' ').unwrap();
    let start = std::time::Instant::now();
    assert_unavailable(&stat(&[parent], None), &format!("no process {parent}"));
    assert!(start.elapsed() < std::time::Duration::from_secs(2));
    assert_unavailable(&stat(&[child], None), "does not run under uzswap run");
}

/// A running program's tunables, read and changed as sysfs reads and writes the kernel's:
/// all of them (`uzswap run --writethrough auto` among them), one of them, a new value read
/// back; a bad value and an unknown name refused in one line, status 1, nothing changed;
/// another user refused.
#[test]
fn param_reads_and_changes_a_running_programs_tunables() {
    let program = compile("hold");
    let held = hold(
        &program,
        &["--memory-high", "16M", "--writethrough", "auto"],
        24,
        None,
    );
    let pid = held.pid.to_string();

    let o = param(&[&pid], None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let all = stdout(&o);
    for line in ["enabled Y", "max_pool_percent 60", "writethrough auto"] {
        assert!(all.lines().any(|l| l == line), "{line:?} missing:\n{all}");
    }

    let o = param(&[&pid, "writethrough", "Y"], None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(o.stdout.is_empty() && o.stderr.is_empty(), "{}", stderr(&o));
    let o = param(&[&pid, "writethrough"], None);
    assert_eq!((o.status.code(), stdout(&o)), (Some(0), "Y\n".into()));

    assert_unavailable(
        &param(&[&pid, "max_pool_percent", "150"], None),
        "max_pool_percent",
    );
    assert_unavailable(&param(&[&pid, "swappiness", "1"], None), "unknown tunable");
    assert_unavailable(&param(&[&pid, "swappiness"], None), "unknown tunable");
    let o = param(&[&pid, "max_pool_percent"], None);
    assert_eq!(stdout(&o), "60\n", "a refused value changed it");

    if is_root() {
        assert_unavailable(&param(&[&pid, "writethrough", "N"], Some(65534)), "refused");
        assert_eq!(stdout(&param(&[&pid, "writethrough"], None)), "Y\n");
    } else {
        eprintln!("not root: another user's refusal is not tested");
    }

    held.finish_well(&program);
}

/// 200 connections that send nothing (any local user may open them) keep neither the
/// program's user nor root waiting, while they are open and after they close; a request
/// longer than any the server takes is answered with an error, not a reset connection.
#[test]
fn idle_connections_and_long_requests_starve_no_one() {
    use std::os::linux::net::SocketAddrExt;
    let program = compile("hold");
    let held = hold(&program, &["--memory-high", "16M"], 8, None);
    let name = format!("uzswap-stat-{}", held.pid);
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name).unwrap();
    let idle: Vec<_> = (0..200)
        .map(|_| std::os::unix::net::UnixStream::connect_addr(&addr).unwrap())
        .collect();
    let t = std::time::Instant::now();
    let o = stat(&[&held.pid.to_string()], None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(value(&stdout(&o), "memory_limit_bytes") > 0);
    assert!(
        t.elapsed() < std::time::Duration::from_secs(3),
        "answered after {:?} behind 200 idle connections",
        t.elapsed()
    );
    drop(idle);
    let o = stat(&[&held.pid.to_string()], None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let long = "9".repeat(300);
    let o = param(&[&held.pid.to_string(), "max_pool_percent", &long], None);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(!stderr(&o).contains("reset"), "{}", stderr(&o));
    assert!(stderr(&o).contains("max_pool_percent"), "{}", stderr(&o));
    let long = "9".repeat(5000);
    let o = param(&[&held.pid.to_string(), "max_pool_percent", &long], None);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("more than 4096 bytes"),
        "{}",
        stderr(&o)
    );
    held.finish_well(&program);
}
