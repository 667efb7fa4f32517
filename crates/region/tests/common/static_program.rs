//! The tests' static C programs (tests/programs/NAME.c), each built once per test binary:
//! programs that load nothing of ours, whose memory a `RemoteRegion` serves from outside.
//! Included by path from the tests that use it (not from common/, which the fuzz target
//! includes too, where there is no target directory for tests).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// tests/programs/`name`.c, linked statically.
pub fn built(name: &str) -> PathBuf {
    static BUILT: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);
    let mut built = BUILT.lock().unwrap();
    let built = built.get_or_insert_with(HashMap::new);
    if let Some(path) = built.get(name) {
        return path.clone();
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/programs")
        .join(format!("{name}.c"));
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let status = Command::new("cc")
        .args(["-O2", "-static", "-pthread", "-o"])
        .arg(&out)
        .arg(src)
        .status()
        .expect("this test needs a C compiler: apt-get install build-essential");
    assert!(
        status.success(),
        "cc -static {name}.c failed: static glibc is needed (apt-get install libc6-dev)"
    );
    built.insert(name.to_string(), out.clone());
    out
}
