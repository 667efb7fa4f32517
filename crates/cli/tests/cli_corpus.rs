//! `uzswap corpus capture` as a user runs it: the built binary on a real program (python3,
//! skipped with a message where there is none).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use zswap::PAGE_SIZE;

mod common;
use common::{assert_one_line_error, stderr, uzswap};

const BLOCK: usize = 16 * PAGE_SIZE;
/// What the script puts in memory, many times over.
const MARKER: &[u8] = b"uzswap-capture-test-";
/// A dict of 100,000 distinct strings holding the marker, then a stop for the capture.
const SCRIPT: &str = "import os, signal\n\
    d = {i: 'uzswap-capture-test-%08d' % i for i in range(100000)}\n\
    l = [[i, float(i), str(i)] for i in range(50000)]\n\
    os.kill(os.getpid(), signal.SIGSTOP)\n";

fn have_python() -> bool {
    let ok = Command::new("python3")
        .arg("-c")
        .arg("pass")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "this test captures a python3 process: install python3 (apt-get install python3; .ci/run does)"
    );
    ok
}

/// A path of this test's own (tests run in parallel), removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn new(test: &str) -> TempFile {
        TempFile(std::env::temp_dir().join(format!(
            "uzswap-cli-corpus-{}-{test}.pages",
            std::process::id()
        )))
    }

    fn arg(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn zero_pages(data: &[u8]) -> usize {
    data.chunks_exact(PAGE_SIZE)
        .filter(|p| p.iter().all(|&b| b == 0))
        .count()
}

fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

/// Starting the program: the file is whole 64 KiB blocks of real, mostly non-zero pages that
/// hold what the program built, and the program is gone afterwards.
#[test]
fn captures_a_program_that_stops_itself() {
    if !have_python() {
        return;
    }
    let out = TempFile::new("program");
    let started = Instant::now();
    // --pages far above the program's memory: every resident block is taken.
    let o = uzswap(&[
        "corpus",
        "capture",
        "--out",
        out.arg(),
        "--pages",
        "65536",
        "--after",
        "60",
        "--",
        "python3",
        "-c",
        SCRIPT,
    ]);
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    // It stopped itself: the capture did not wait the whole --after.
    assert!(started.elapsed() < Duration::from_secs(30));
    let data = std::fs::read(&out.0).unwrap();
    assert!(
        !data.is_empty() && data.len().is_multiple_of(BLOCK),
        "{} bytes",
        data.len()
    );
    let pages = data.len() / PAGE_SIZE;
    assert!(pages >= 256, "only {pages} pages");
    assert!(
        zero_pages(&data) * 4 < pages,
        "{} of {pages} pages zero",
        zero_pages(&data)
    );
    let markers = data.windows(MARKER.len()).filter(|w| *w == MARKER).count();
    assert!(markers >= 50_000, "{markers} markers of 100,000 captured");

    let line = String::from_utf8(o.stdout).unwrap();
    assert_eq!(line.lines().count(), 1, "{line}");
    assert!(line.contains(&format!("{pages} pages")), "{line}");
    // "... of python3 (pid N), ...": the program was killed and reaped.
    let pid: u32 = line
        .split("(pid ")
        .nth(1)
        .unwrap()
        .split(')')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(process_state(pid), None, "pid {pid} still there");
}

/// A running process by pid: the pages asked for, sampled, and the process left as it was.
#[test]
fn captures_a_process_by_pid_and_leaves_it() {
    if !have_python() {
        return;
    }
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(SCRIPT)
        .spawn()
        .unwrap();
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(60);
    while process_state(pid) != Some('T') {
        assert!(Instant::now() < deadline, "python3 did not stop itself");
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = TempFile::new("pid");
    let o = uzswap(&[
        "corpus",
        "capture",
        "--pid",
        &pid.to_string(),
        "--out",
        out.arg(),
        "--pages",
        "40",
    ]);
    let state = process_state(pid);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    assert_eq!(state, Some('T'), "the process was not left as it was");
    // 40 pages asked: two whole blocks.
    let data = std::fs::read(&out.0).unwrap();
    assert_eq!(data.len(), 2 * BLOCK);
    assert!(zero_pages(&data) < 32);
}

#[test]
fn bad_input_is_one_line_and_status_2() {
    let out = TempFile::new("bad");
    // Above the largest pid the kernel gives (2^22).
    let o = uzswap(&["corpus", "capture", "--pid", "4194305", "--out", out.arg()]);
    assert_one_line_error(&o, "no process 4194305");
    let o = uzswap(&["corpus", "capture", "--out", out.arg(), "--", "true"]);
    assert_one_line_error(&o, "before the capture");
    let o = uzswap(&[
        "corpus",
        "capture",
        "--out",
        out.arg(),
        "--",
        "/nonexistent/prog",
    ]);
    assert_one_line_error(&o, "cannot start /nonexistent/prog");
    assert!(!out.0.exists(), "a failed capture wrote a file");
    // Usage errors: neither or both of --pid and a program, fewer pages than a block.
    for args in [
        &["corpus", "capture", "--out", out.arg()][..],
        &[
            "corpus",
            "capture",
            "--out",
            out.arg(),
            "--pid",
            "1",
            "--",
            "true",
        ],
        &[
            "corpus",
            "capture",
            "--out",
            out.arg(),
            "--pages",
            "15",
            "--pid",
            "1",
        ],
    ] {
        let o = uzswap(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
}
