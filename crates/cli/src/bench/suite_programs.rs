//! The programs of `bench suite`: unmodified programs of different shapes, each a file of
//! bench/suite/ built into the binary, written out (and compiled, for C, Go and Java) in a
//! directory of the run's own before it starts, so the suite runs from anywhere.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

/// One program of the suite.
pub struct SuiteProgram {
    /// Its name on the command line and in the table.
    pub name: &'static str,
    /// What shape of memory use it stands for.
    pub shape: &'static str,
    /// The executables it needs on the PATH.
    pub needs: &'static [&'static str],
    /// Its file in bench/suite/, and the file's text.
    pub file: (&'static str, &'static str),
    /// Its command line, given the directory its file was written to.
    pub command: fn(&Path) -> Vec<OsString>,
}

fn path(dir: &Path, name: &str) -> OsString {
    dir.join(name).into_os_string()
}

/// Every program of the suite, in the order it runs them.
pub const PROGRAMS: &[SuiteProgram] = &[
    SuiteProgram {
        name: "python-objects",
        shape: "an interpreter's many small objects, read back in key order",
        needs: &["python3"],
        file: (
            "objects.py",
            include_str!("../../../../bench/suite/objects.py"),
        ),
        command: |d| vec!["python3".into(), path(d, "objects.py")],
    },
    SuiteProgram {
        name: "node-map",
        shape: "a JavaScript heap under V8's collector, read with a skew",
        needs: &["node"],
        file: ("map.js", include_str!("../../../../bench/suite/map.js")),
        command: |d| vec!["node".into(), path(d, "map.js")],
    },
    SuiteProgram {
        name: "jvm-cache",
        shape: "a Java service's cache under G1: Zipf reads and replacements, collected",
        needs: &["java", "javac"],
        file: (
            "Cache.java",
            include_str!("../../../../bench/suite/Cache.java"),
        ),
        command: |d| {
            vec![
                "java".into(),
                // The same collector and machine on both sides: in the kernel side's cgroup
                // the JVM would otherwise size itself to the limit (and pick Serial).
                "-XX:+UseG1GC".into(),
                "-XX:-UseContainerSupport".into(),
                "-Xmx320m".into(),
                "-cp".into(),
                d.as_os_str().to_owned(),
                "Cache".into(),
            ]
        },
    },
    SuiteProgram {
        name: "sqlite3",
        shape: "a database's page cache and sort buffers: an index built, aggregates",
        needs: &["sqlite3", "sh"],
        file: (
            "sqlite.sql",
            include_str!("../../../../bench/suite/sqlite.sql"),
        ),
        command: |d| {
            let sql = d.join("sqlite.sql");
            vec![
                "sh".into(),
                "-c".into(),
                "exec sqlite3 :memory: < \"$0\"".into(),
                sql.into_os_string(),
            ]
        },
    },
    SuiteProgram {
        name: "redis-ycsb",
        shape: "redis-server under a YCSB-A-like read/update mix with a skew",
        needs: &["python3", "redis-server"],
        file: (
            "redis_ycsb.py",
            include_str!("../../../../bench/suite/redis_ycsb.py"),
        ),
        command: |d| vec!["python3".into(), path(d, "redis_ycsb.py")],
    },
    SuiteProgram {
        name: "sort",
        shape: "sort(1) of a large file in one buffer",
        needs: &["bash", "awk", "sort", "md5sum"],
        file: ("sort.sh", include_str!("../../../../bench/suite/sort.sh")),
        command: |d| vec!["bash".into(), path(d, "sort.sh")],
    },
    SuiteProgram {
        name: "java-like-heap",
        shape: "a Java server's heap in C: Zipf updates, garbage, full marks",
        needs: &["cc"],
        file: (
            "java_like_heap.c",
            include_str!("../../../../bench/suite/java_like_heap.c"),
        ),
        command: |d| vec![path(d, "java_like_heap")],
    },
    SuiteProgram {
        name: "c-mallocs",
        shape: "malloc and free of random sizes in rounds, every block checked",
        needs: &["cc"],
        file: (
            "mallocs.c",
            include_str!("../../../../crates/cli/tests/programs/mallocs.c"),
        ),
        command: |d| vec![path(d, "mallocs")],
    },
    SuiteProgram {
        name: "go-churn",
        shape: "a Go program's collected heap: blocks replaced at random, read and checked",
        needs: &["go"],
        file: (
            "go_churn.go",
            include_str!("../../../../crates/cli/tests/programs/go_churn.go"),
        ),
        command: |d| vec![path(d, "go_churn"), "96".into(), "2".into()],
    },
    SuiteProgram {
        name: "gcc",
        shape: "a compiler's collected heap of trees: one large file at -O2",
        needs: &["bash", "awk", "gcc", "md5sum"],
        file: ("cc.sh", include_str!("../../../../bench/suite/cc.sh")),
        command: |d| vec!["bash".into(), path(d, "cc.sh")],
    },
];

/// The programs named in `names` (all for none), in the suite's order; an unknown name is
/// an error that lists the known ones.
pub fn select(names: &[String]) -> Result<Vec<&'static SuiteProgram>> {
    if let Some(bad) = names
        .iter()
        .find(|n| !PROGRAMS.iter().any(|p| p.name == n.as_str()))
    {
        let known: Vec<&str> = PROGRAMS.iter().map(|p| p.name).collect();
        bail!(
            "no suite program '{bad}': the programs are {}",
            known.join(", ")
        );
    }
    Ok(PROGRAMS
        .iter()
        .filter(|p| names.is_empty() || names.iter().any(|n| n == p.name))
        .collect())
}

/// Where `exe` is: on the PATH, or for Go where its tarball installs it.
fn find(exe: &str) -> Option<std::path::PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(exe))
            .find(|f| f.is_file())
    });
    let go = Path::new("/usr/local/go/bin/go");
    on_path.or_else(|| (exe == "go" && go.is_file()).then(|| go.to_path_buf()))
}

impl SuiteProgram {
    /// Write its file into `dir` (compiling a C, Go or Java file there), checking first that
    /// what it needs is installed.
    pub fn prepare(&self, dir: &Path) -> Result<()> {
        if let Some(missing) = self.needs.iter().find(|e| find(e).is_none()) {
            bail!(
                "suite program {} needs {missing}, which is not on the PATH: install it, or \
                 leave the program out with --programs",
                self.name
            );
        }
        let (name, text) = self.file;
        let file = dir.join(name);
        std::fs::write(&file, text).with_context(|| format!("writing {}", file.display()))?;
        if let Some(stem) = name.strip_suffix(".go") {
            // Statically linked (no cgo): `uzswap run` holds it from outside.
            let mut go = Command::new(find("go").context("go")?);
            go.args(["build", "-o"])
                .arg(dir.join(stem))
                .arg(&file)
                .env("CGO_ENABLED", "0")
                .env("GO111MODULE", "off")
                .env("GOCACHE", dir.join("gocache"));
            build(go, "go", name)?;
        }
        if name.ends_with(".java") {
            let mut javac = Command::new("javac");
            javac.arg("-d").arg(dir).arg(&file);
            build(javac, "javac", name)?;
        }
        if let Some(stem) = name.strip_suffix(".c") {
            let mut cc = Command::new("cc");
            cc.args(["-O2", "-o"])
                .arg(dir.join(stem))
                .arg(&file)
                .arg("-lm");
            build(cc, "cc", name)?;
        }
        Ok(())
    }
}

/// Run `compiler` (named `what`) on the program's file `name`; its stderr is the error if it
/// fails.
fn build(mut compiler: Command, what: &str, name: &str) -> Result<()> {
    let out = compiler
        .output()
        .with_context(|| format!("running {what}"))?;
    if !out.status.success() {
        bail!(
            "{what} could not build {name}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_selected_by_name_in_the_suites_order() {
        assert_eq!(select(&[]).unwrap().len(), PROGRAMS.len());
        let two = select(&["sort".into(), "python-objects".into()]).unwrap();
        let names: Vec<&str> = two.iter().map(|p| p.name).collect();
        assert_eq!(names, ["python-objects", "sort"]);
        let e = select(&["java".into()]).err().unwrap().to_string();
        assert!(
            e.contains("no suite program 'java'") && e.contains("gcc"),
            "{e}"
        );
    }

    #[test]
    fn there_are_ten_programs_with_distinct_names() {
        let mut names: Vec<&str> = PROGRAMS.iter().map(|p| p.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 10);
    }
}
