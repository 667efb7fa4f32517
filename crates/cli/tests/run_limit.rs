//! `uzswap run` when the limit cannot be kept: a swap directory with no room (a 1 MiB tmpfs)
//! under a heap that keeps growing. uzswap says so on stderr as it happens (the failing swap
//! file, the throttling), holds the program near the limit by throttling it, and at
//! `--memory-max` kills it with the reason (the default) or lets it grow (`--on-limit
//! exceed`), nothing corrupted. Mounting the tmpfs needs root, as CI has.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{stderr, stdout};

/// A 1 MiB tmpfs for the swap file, unmounted when dropped.
struct FullSwapDir(std::path::PathBuf);

impl FullSwapDir {
    fn mount(name: &str) -> FullSwapDir {
        let dir = std::env::temp_dir().join(format!("uzswap-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1M", "tmpfs"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            mounted,
            "this test mounts a 1 MiB tmpfs as a full swap directory: run it as root (CI does)"
        );
        FullSwapDir(dir)
    }
}

impl Drop for FullSwapDir {
    fn drop(&mut self) {
        // Lazily: a program a failed test left running may still hold its swap file there.
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// CPython building `mib` MiB of half-random data (about 2:1 for lz4, so the pool's 20% of
/// the limit cannot hold it), printing its PID first and a checksum of it all last.
const HEAP: &str = r#"
import os, sys, hashlib
print(os.getpid(), flush=True)
chunks = []
for i in range(int(sys.argv[1])):
    b = bytearray()
    for j in range(256):
        b += os.urandom(1024) + bytes([i % 251]) * 3072
    chunks.append(b)
h = hashlib.sha256()
for c in chunks:
    h.update(c)
print(len(chunks), h.hexdigest() == hashlib.sha256(b"".join(chunks)).hexdigest())
"#;

struct Ran {
    status: std::process::ExitStatus,
    stdout: String,
    stderr: String,
    /// The program's largest resident memory, sampled every 10 ms while it ran.
    peak_rss: u64,
}

fn run_heap(args: &[&str], mib: u32) -> Ran {
    common::ensure_preload();
    let mut child = Command::new(env!("CARGO_BIN_EXE_uzswap"))
        .arg("run")
        .args(args)
        .args(["--", "python3", "-c", HEAP, &mib.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let err = child.stderr.take().unwrap();
    let err = std::thread::spawn(move || std::io::read_to_string(err).unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    let pid: u32 = first.trim().parse().unwrap();
    let rest = std::thread::spawn(move || std::io::read_to_string(out).unwrap());
    let status_file = format!("/proc/{pid}/status");
    let mut peak_rss = 0;
    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the program ran for 5 minutes");
        }
        if let Ok(s) = std::fs::read_to_string(&status_file) {
            let rss = s
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
            peak_rss = peak_rss.max(rss.unwrap_or(0) << 10);
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Ran {
        status,
        stdout: rest.join().unwrap(),
        stderr: err.join().unwrap(),
        peak_rss,
    }
}

/// What lies outside the heap's limit: the interpreter, its libraries, uzswap's threads and
/// staging (as cli_run.rs allows CPython).
const OUTSIDE: u64 = 48 << 20;

#[test]
fn a_full_swap_directory_throttles_then_kills_at_memory_max_saying_why() {
    let dir = FullSwapDir::mount("full-swap-kill");
    let ran = run_heap(
        &[
            "--memory-high",
            "40M",
            "--memory-max",
            "44M",
            "--swap-dir",
            dir.0.to_str().unwrap(),
            "--stats",
        ],
        200,
    );
    let err = &ran.stderr;
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&ran.status).or(ran.status.code()),
        Some(137),
        "{err}"
    );
    for said in [
        "uzswap: writes to the swap file fail",
        "over --memory-high 40 MiB, and nothing more can be reclaimed",
        "throttling the program's allocations",
        "over --memory-max 44 MiB",
        "killing the program (--on-limit kill",
        "no statistics: the program was killed by signal 9",
    ] {
        assert!(err.contains(said), "{said:?} not said:\n{err}");
    }
    assert!(ran.stdout.is_empty(), "{}", ran.stdout);
    // The heap was held within a folio of --memory-max until the kill: the line says what it
    // would have come to.
    let would_hold: f64 = err
        .split("would hold ")
        .filter_map(|rest| rest.split(" MiB, over --memory-max").next()?.parse().ok())
        .last()
        .unwrap_or_else(|| panic!("no figure in the kill line:\n{err}"));
    assert!(would_hold <= 44.5, "{would_hold} MiB at the kill:\n{err}");
    assert!(
        ran.peak_rss <= (44 << 20) + OUTSIDE,
        "peak RSS {} MiB past --memory-max 44 MiB and {} MiB outside",
        ran.peak_rss >> 20,
        OUTSIDE >> 20
    );
}

#[test]
fn with_on_limit_exceed_the_program_runs_on_past_memory_max_and_loses_nothing() {
    let dir = FullSwapDir::mount("full-swap-exceed");
    let plain = Command::new("python3")
        .args(["-c", HEAP, "120"])
        .output()
        .unwrap();
    let plain_out = stdout(&plain);
    let plain_out = plain_out.split_once('\n').unwrap().1;
    let ran = run_heap(
        &[
            "--memory-high",
            "40M",
            "--memory-max",
            "44M",
            "--on-limit",
            "exceed",
            "--swap-dir",
            dir.0.to_str().unwrap(),
            "--stats=full",
        ],
        120,
    );
    let err = &ran.stderr;
    assert_eq!(ran.status.code(), Some(0), "{err}");
    assert_eq!(ran.stdout, plain_out, "{err}");
    assert_eq!(ran.stdout, "120 True\n");
    for said in [
        "throttling the program's allocations",
        "letting it grow unthrottled (--on-limit exceed)",
    ] {
        assert!(err.contains(said), "{said:?} not said:\n{err}");
    }
    let stat = |name: &str| -> u64 {
        err.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {err}"))
    };
    assert!(stat("high") > 0 && stat("max") > 0, "{err}");
    assert_eq!((stat("oom"), stat("oom_kill")), (0, 0));
    assert!(stat("swap_write_fail") > 0);
    assert_eq!(stat("poisoned"), 0);
    let _ = stderr;
}

/// Each silent loss of the limit is a line: allocations past the heap's address space
/// (`--max-heap`), which go outside the limit rather than fail as they would not without
/// uzswap, and memory outside the limit past a quarter of it (a shared mapping, which the
/// limit does not hold), split by kind.
#[test]
fn the_heaps_address_space_running_out_and_memory_outside_the_limit_are_said() {
    common::ensure_preload();
    let o = common::uzswap(&[
        "run",
        "--memory-high",
        "64M",
        "--max-heap",
        "256M",
        "--",
        "python3",
        "-c",
        "import time\nl = []\nfor i in range(48): l.append(bytearray(8 << 20))\ntime.sleep(2.5)\nprint(len(l), sum(len(b) for b in l) >> 20)",
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(stdout(&o), "48 384\n");
    assert!(
        err.contains(
            "uzswap: the heap's address space (--max-heap, 256 MiB) is used up or too small \
             for a request: what it has no room for is allocated outside the limit"
        ),
        "{err}"
    );
    // Said as memory outside the limit, counted with the anonymous memory past uzswap, not
    // as uzswap's own.
    let line = err
        .lines()
        .find(|l| l.contains("of this process's memory is outside the limit"))
        .unwrap_or_else(|| panic!("memory outside the limit not said: {err}"));
    let mib_before = |what: &str| -> u64 {
        line.split(what)
            .next()
            .and_then(|head| head.rsplit(", ").next()?.split(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("no {what:?} in {line}"))
    };
    assert!(
        mib_before(" MiB of anonymous memory the program mapped past uzswap") >= 64,
        "{line}"
    );
    assert!(mib_before(" MiB of uzswap's own") < 32, "{line}");
    let o = common::uzswap(&[
        "run",
        "--memory-high",
        "64M",
        "--",
        "python3",
        "-c",
        "import mmap, time\nm = mmap.mmap(-1, 96 << 20)\nfor i in range(0, 96 << 20, 4096): m[i] = 1\ntime.sleep(2.5)\nprint(sum(m[i] for i in range(0, 96 << 20, 4096)))",
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(stdout(&o), format!("{}\n", (96 << 20) / 4096));
    assert!(
        err.contains("of this process's memory is outside the limit, more than a quarter of --memory-high 64 MiB"),
        "{err}"
    );
    // The line says what kind of memory that is: the shared mapping, 96 MiB.
    let shared: u64 = err
        .split(" MiB shared,")
        .next()
        .and_then(|head| head.rsplit(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no shared part in {err}"));
    assert!((90..=97).contains(&shared), "{err}");
}

/// `kill -9` of `uzswap run` leaves nothing in the temp directory: its statistics and the
/// tree's ledger are memfds, gone with it (the program, left running, writes nowhere).
#[test]
fn a_killed_uzswap_run_leaves_nothing_behind() {
    common::ensure_preload();
    let entries = || -> Vec<String> {
        std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.starts_with("uzswap-run") || n.starts_with("uzswap-stats"))
            .collect()
    };
    let before = entries();
    let mut run = Command::new(env!("CARGO_BIN_EXE_uzswap"))
        .args(["run", "--memory-high", "32M", "--stats", "--", "sleep", "2"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    run.kill().unwrap();
    run.wait().unwrap();
    // The program (sleep) ends on its own after its parent's death, and exits normally.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(entries(), before);
}
