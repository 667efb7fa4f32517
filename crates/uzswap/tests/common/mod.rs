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
