//! The C example in README.md (between `<!-- c-example -->` and `<!-- /c-example -->`),
//! compiled with `cc` against include/uzswap.h and the built library, shared and static, and
//! run: it exits 0 and prints what the README says it does.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// target/<profile>: the test binary is target/<profile>/deps/c_example-<hash>.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps")
        .to_path_buf()
}

/// libuzswap.so and libuzswap.a in target/<profile>, built now (a test run builds the crate's
/// tests, not necessarily its library; a build that is up to date costs nothing), once per
/// test process.
fn library_dir() -> PathBuf {
    static BUILT: std::sync::Once = std::sync::Once::new();
    let dir = profile_dir();
    BUILT.call_once(|| {
        let profile = match dir.file_name().and_then(|n| n.to_str()) {
            Some("release") => "release",
            // The test profile writes to target/debug.
            _ => "test",
        };
        // With the preload library, as the command's tests build it (crates/cli/tests/
        // common): one feature set for both, so whichever test builds first builds for both.
        let status = Command::new(env!("CARGO"))
            .args([
                "build",
                "-p",
                "uzswap-capi",
                "-p",
                "uzswap-preload",
                "--profile",
                profile,
            ])
            .status()
            .expect("run cargo");
        assert!(status.success(), "building libuzswap failed");
    });
    dir
}

/// The README's C example.
fn example_source() -> String {
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let readme = std::fs::read_to_string(readme).expect("README.md");
    let marked = readme
        .split_once("<!-- c-example -->")
        .and_then(|(_, rest)| rest.split_once("<!-- /c-example -->"))
        .expect("README.md marks its C example with <!-- c-example --> ... <!-- /c-example -->")
        .0;
    marked
        .trim()
        .strip_prefix("```c\n")
        .and_then(|code| code.strip_suffix("```"))
        .expect("the marked example is one ```c block")
        .to_string()
}

/// Compile the example into `dir`/`name` (a directory of its own, made now), with `link`
/// after the source.
fn compile(dir: &Path, name: &str, link: &[&str]) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let source = dir.join("example.c");
    std::fs::write(&source, example_source()).unwrap();
    let exe = dir.join(name);
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("include");
    let o = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-I"])
        .arg(include)
        .arg(&source)
        .args(link)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("run cc (a C compiler is needed)");
    assert!(
        o.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    exe
}

/// The example ran to its end: status 0, every byte verified under the limit, pages
/// compressed and brought back.
fn assert_ran(o: &Output) {
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    let mut lines = out.lines();
    assert_eq!(
        lines.next(),
        Some("67108864 bytes verified under a 16777216-byte limit")
    );
    let stat = |name: &str| -> u64 {
        out.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in:\n{out}"))
    };
    assert!(stat("zswpout") > 0, "{out}");
    assert!(stat("zswpin") > 0, "{out}");
    assert!(stat("faults") > 0, "{out}");
    stat("written_back_pages");
}

/// A directory of this process's own for `what`.
fn scratch(what: &str) -> PathBuf {
    std::env::temp_dir().join(format!("uzswap-c-example-{}-{what}", std::process::id()))
}

#[test]
fn the_readme_c_example_runs_against_the_shared_library() {
    let lib = library_dir();
    let dir = scratch("shared");
    let exe = compile(&dir, "example", &["-L", lib.to_str().unwrap(), "-luzswap"]);
    let o = Command::new(&exe)
        .env("LD_LIBRARY_PATH", &lib)
        .output()
        .unwrap();
    assert_ran(&o);
    std::fs::remove_dir_all(dir).unwrap();
}

/// Linked with libuzswap.a, which holds uzswap and every Rust library it uses; the system
/// libraries it needs are the ones rustc lists for a static library on Linux.
#[test]
fn the_readme_c_example_runs_linked_statically() {
    let lib = library_dir().join("libuzswap.a");
    let dir = scratch("static");
    let exe = compile(
        &dir,
        "example",
        &[
            lib.to_str().unwrap(),
            "-lgcc_s",
            "-lutil",
            "-lrt",
            "-lpthread",
            "-lm",
            "-ldl",
            "-lc",
        ],
    );
    assert_ran(&Command::new(&exe).output().unwrap());
    std::fs::remove_dir_all(dir).unwrap();
}
