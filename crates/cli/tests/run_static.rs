//! `uzswap run` of programs that load nothing of ours, held from outside (the agent,
//! crates/cli/src/run/agent.rs): C programs linked statically, the same sources the preload's
//! tests run, print what they print without uzswap, their heap through the pool under the
//! limit; a Go program's heap three times the limit is held, every block checked; exit
//! status and death by signal pass through; a forked child has its parent's whole heap.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{run_stat as stat, stderr, stdout};

/// `cc -static` of tests/programs/NAME.c, once a test run.
fn compile_static(name: &str) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/programs")
        .join(format!("{name}.c"));
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("static-{name}"));
    let status = Command::new("cc")
        .args(["-O2", "-pthread", "-static", "-o"])
        .arg(&out)
        .arg(&source)
        .status()
        .expect("this test needs a C compiler: apt-get install build-essential");
    assert!(
        status.success(),
        "cc -static {name}.c failed: static glibc is needed"
    );
    out
}

/// `uzswap run ARGS -- PROGRAM...`, killed after two minutes.
fn run(args: &[&str], program: &[&str]) -> Output {
    let mut all = vec!["timeout", "120", env!("CARGO_BIN_EXE_uzswap"), "run"];
    all.extend_from_slice(args);
    all.push("--");
    all.extend_from_slice(program);
    Command::new(all[0]).args(&all[1..]).output().unwrap()
}

/// The preload's test programs, linked statically, under a 24M limit: each prints what it
/// prints without uzswap and ends as it does. Between them: protections that trap, mremap
/// grown and shrunk, protections kept across mremap, fixed mappings over the heap, system
/// calls on evicted buffers, lazily freed memory, every alignment, descriptors the program
/// closes.
#[test]
fn static_programs_print_what_they_print_without_uzswap() {
    let programs = [
        "protections",
        "mremap_grow",
        "mremap_shrink",
        "mremap_protections",
        "fixed_mprotect",
        "syscalls",
        "madvise_free",
        "alignments",
        "descriptors",
        "short_reads",
        "threads",
    ];
    let mut evicted = 0;
    for name in programs {
        let program = compile_static(name);
        let alone = Command::new(&program).output().unwrap();
        let o = run(
            &["--memory-high", "24M", "--stats=full"],
            &[program.to_str().unwrap()],
        );
        assert_eq!(
            o.status.code(),
            alone.status.code(),
            "{name}: {}",
            stderr(&o)
        );
        assert_eq!(stdout(&o), stdout(&alone), "{name}: {}", stderr(&o));
        evicted += (stat(&o, "zswpout") > 0) as u32;
    }
    assert!(evicted >= 4, "only {evicted} programs had pages evicted");
}

/// A static C program whose heap (malloc, its break refused, so mapped) is four times the
/// limit: the checksum it prints without uzswap, pages through the pool and back, and its
/// peak resident memory within the limit and what lies outside the heap.
#[test]
fn a_static_programs_malloc_heap_is_held_under_the_limit() {
    let program = compile_static("mallocs");
    let args = ["2", "100000"];
    let alone = Command::new(&program).args(args).output().unwrap();
    let mut cmd = vec![program.to_str().unwrap()];
    cmd.extend_from_slice(&args);
    let o = run(&["--memory-high", "24M", "--stats=full"], &cmd);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), stdout(&alone));
    assert!(stat(&o, "zswpin") > 0, "{}", stderr(&o));
    let peak = stat(&o, "peak_rss_bytes");
    assert!(peak <= 28 << 20, "peak RSS {peak} under a 24M limit");
}

/// A static program that locks memory (mlock of a malloc'd block, mlockall of all it has)
/// and writes a heap three times the limit: it reads what it reads alone, its heap stays
/// under the limit (not locked, which is said), and the lock of all does not fault in the
/// whole reservation uzswap keeps for its heap.
#[test]
fn a_static_programs_memory_locks_leave_its_heap_under_the_limit() {
    let program = compile_static("mlocks");
    let alone = Command::new(&program).output().unwrap();
    assert_eq!(alone.status.code(), Some(0), "alone: {}", stderr(&alone));
    let o = run(
        &["--memory-high", "24M", "--stats=full"],
        &[program.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), stdout(&alone));
    assert!(stderr(&o).contains("locks memory"), "{}", stderr(&o));
    assert!(stat(&o, "zswpout") > 0, "{}", stderr(&o));
    let peak = stat(&o, "peak_rss_bytes");
    assert!(peak <= 28 << 20, "peak RSS {peak} under a 24M limit");
}

fn go() -> PathBuf {
    let local = PathBuf::from("/usr/local/go/bin/go");
    match local.exists() {
        true => local,
        false => PathBuf::from("go"),
    }
}

/// tests/programs/go_churn.go, built once.
fn go_churn() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
            let out = dir.join("go_churn");
            let status = Command::new(go())
                .args(["build", "-o"])
                .arg(&out)
                .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/go_churn.go"))
                .env("CGO_ENABLED", "0")
                .env("GOCACHE", dir.join("gocache"))
                .env("GO111MODULE", "off")
                .status()
                .expect("this test needs Go: apt-get install golang-go");
            assert!(status.success(), "go build failed");
            out
        })
        .clone()
}

/// A Go program whose heap is three times the limit (plain peak about 196 MB under 64M),
/// its blocks rewritten and checked while the collector frees the old ones: every block as
/// written, pages through the pool and back, and its peak resident memory within the limit
/// and 4 MiB (its binary and stacks). Go programs were refused before (exit 126).
#[test]
fn a_go_programs_heap_is_held_under_the_limit() {
    let out = go_churn();
    let o = run(
        &["--memory-high", "64M", "--stats=full"],
        &[out.to_str().unwrap(), "96", "2"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "bad 0\n");
    assert!(stat(&o, "zswpin") > 0, "{}", stderr(&o));
    let peak = stat(&o, "peak_rss_bytes");
    assert!(peak <= 68 << 20, "peak RSS {peak} under a 64M limit");
}

/// A static program's exit status passes through, and death by a signal is 128+N, as for a
/// dynamically linked one; the system's static `ldconfig` runs as it does alone.
#[test]
fn a_static_programs_exit_status_passes_through() {
    let o = run(&["--memory-high", "32M"], &["/sbin/ldconfig", "-p"]);
    let alone = Command::new("/sbin/ldconfig").arg("-p").output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), stdout(&alone));
    let status = |code: &str| {
        let source = format!(
            "#include <signal.h>\n#include <stdlib.h>\nint main(void) {{ {code}; return 0; }}\n"
        );
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        let c = dir.join("exit_status.c");
        std::fs::write(&c, source).unwrap();
        let bin = dir.join(format!("exit_status_{}", code.len()));
        let built = Command::new("cc")
            .args(["-static", "-o"])
            .arg(&bin)
            .arg(&c)
            .status()
            .unwrap();
        assert!(built.success());
        run(&["--memory-high", "32M"], &[bin.to_str().unwrap()])
            .status
            .code()
    };
    assert_eq!(status("exit(3)"), Some(3));
    assert_eq!(status("raise(SIGTERM)"), Some(128 + 15));
}

/// A static program that forks under pressure gives each child its whole heap, as it was,
/// byte for byte: a child that forks a grandchild, and forks while four threads allocate
/// (the heap brought back while the fork waits, `RemoteRegion::prepare_fork`). Before, the
/// child got SIGSEGV on the heap.
#[test]
fn a_forked_child_sees_its_parents_whole_heap() {
    let program = compile_static("forks");
    for (mode, says) in [
        ("nested", "child 0 parent 1\n"),
        ("threads", "bad children 0 parent 1\n"),
    ] {
        let o = run(
            &["--memory-high", "24M"],
            &[program.to_str().unwrap(), mode, "32"],
        );
        assert_eq!(o.status.code(), Some(0), "{mode}: {}", stderr(&o));
        assert_eq!(stdout(&o), says, "{mode}: {}", stderr(&o));
    }
}

/// `uzswap stat` and `uzswap param` reach a program held from outside while it runs, by
/// its process ID or by its `uzswap run`'s: the agent serves them.
#[test]
fn uzswap_stat_reaches_a_static_program_while_it_runs() {
    let mut run = Command::new(env!("CARGO_BIN_EXE_uzswap"))
        .args(["run", "--memory-high", "64M", "--"])
        .arg(go_churn())
        .args(["96", "6"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let uzswap = run.id();
    let children = format!("/proc/{uzswap}/task/{uzswap}/children");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let program = loop {
        let list = std::fs::read_to_string(&children).unwrap_or_default();
        if let Some(pid) = list.split_whitespace().next() {
            break pid.to_string();
        }
        assert!(std::time::Instant::now() < deadline, "no program started");
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    std::thread::sleep(std::time::Duration::from_millis(500));
    for pid in [program.clone(), uzswap.to_string()] {
        let o = common::uzswap(&["stat", &pid]);
        assert_eq!(o.status.code(), Some(0), "stat {pid}: {}", stderr(&o));
        let text = stdout(&o);
        assert!(
            text.lines().any(|l| l.starts_with("zswpout ")) && text.contains("memory_limit_bytes"),
            "{text}"
        );
    }
    let o = common::uzswap(&["param", &program, "max_pool_percent"]);
    assert_eq!(stdout(&o), "60\n", "{}", stderr(&o));
    assert!(run.wait().unwrap().success());
}

/// A child that outlives its static parent and `uzswap run` keeps the program's seccomp
/// filter: its calls are still answered (run as made) once uzswap has exited. Before, its
/// mmap failed with ENOSYS.
#[test]
fn a_child_that_outlives_uzswap_still_maps_memory() {
    let program = compile_static("outliving_child");
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("outliving_child.out");
    let _ = std::fs::remove_file(&out);
    let o = run(
        &["--memory-high", "32M"],
        &[program.to_str().unwrap(), out.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !out.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(
        std::fs::read_to_string(&out).unwrap_or_default(),
        "child ok\n"
    );
}
