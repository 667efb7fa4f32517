//! Helpers shared by the command's tests: run the built `uzswap` binary, read its output.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::process::{Command, Output};

/// Run the built binary with `args` and wait for it.
pub fn uzswap(args: &[impl AsRef<OsStr>]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_uzswap"))
        .args(args)
        .output()
        .expect("run uzswap")
}

/// What the run printed on stderr.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A statistic from `uzswap run --stats=full` output (on stderr).
pub fn run_stat(o: &Output, name: &str) -> u64 {
    stderr(o)
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {}", stderr(o)))
}

/// What the run printed on stdout.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A failed run: status 2, exactly one line on stderr, starting with `uzswap: ` and holding
/// `needle`, and nothing on stdout.
pub fn assert_one_line_error(o: &Output, needle: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert_eq!(err.lines().count(), 1, "stderr: {err:?}");
    assert!(err.starts_with("uzswap: "), "{err:?}");
    assert!(err.contains(needle), "{err:?} lacks {needle:?}");
    assert!(
        o.stdout.is_empty(),
        "stdout: {}",
        String::from_utf8_lossy(&o.stdout)
    );
}

/// The preload library next to the `uzswap` binary, built now (a test run builds the
/// command's package, not the workspace's other libraries; a build that is up to date costs
/// nothing), once per test process.
pub fn ensure_preload() {
    static BUILT: std::sync::Once = std::sync::Once::new();
    BUILT.call_once(build_preload);
}

fn build_preload() {
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_uzswap"));
    let profile = exe.parent().and_then(|d| d.file_name()).unwrap();
    let mut build = Command::new(env!("CARGO"));
    // With the C API's library, as its tests build it (crates/capi/tests/c_example.rs):
    // one feature set for both, so whichever test builds first builds for both.
    build.args([
        "build",
        "-p",
        "uzswap-preload",
        "-p",
        "uzswap-capi",
        "--profile",
    ]);
    // The test profile writes to target/debug, beside the binary, and optimizes the region
    // enough for a real program to run under it in seconds.
    build.arg(if profile == "release" {
        "release"
    } else {
        "test"
    });
    let status = build.status().expect("run cargo");
    assert!(status.success(), "building the preload library failed");
}

/// Compile `tests/programs/NAME.c` with the system's C compiler into the temp directory, a
/// file of its own for each call (tests run at once, and each removes its program).
pub fn compile(name: &str) -> std::path::PathBuf {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/programs")
        .join(format!("{name}.c"));
    let out =
        std::env::temp_dir().join(format!("uzswap-test-{name}-{}-{call}", std::process::id()));
    let status = Command::new("cc")
        .args(["-O2", "-pthread", "-o"])
        .arg(&out)
        .arg(&source)
        .status()
        .expect("run cc");
    assert!(status.success(), "compiling {name}.c failed");
    out
}

/// Whether the tests run as root (the kernel peers need it).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The swap areas on now, as /proc/swaps lists them (the kernel peers' are to be gone when
/// a bench ends).
pub fn active_swaps() -> Vec<String> {
    std::fs::read_to_string("/proc/swaps")
        .unwrap()
        .lines()
        .skip(1)
        .map(String::from)
        .collect()
}

/// The kernel peers' memory cgroups that exist now.
pub fn peer_cgroups() -> Vec<String> {
    std::fs::read_dir(uzswap_cli::bench::peer::CGROUP_V1_MEMORY)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("uzswap-peer-"))
                .collect()
        })
        .unwrap_or_default()
}

/// A kernel peer left nothing behind: the swap areas as they were (`swaps_before`), no cgroup
/// of its own, no swap file in /var/tmp.
pub fn assert_peer_left_nothing(swaps_before: &[String]) {
    assert_eq!(active_swaps(), swaps_before, "swap left on");
    assert!(
        peer_cgroups().is_empty(),
        "cgroup left: {:?}",
        peer_cgroups()
    );
    let leftovers: Vec<_> = std::fs::read_dir("/var/tmp")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("uzswap-peer-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
