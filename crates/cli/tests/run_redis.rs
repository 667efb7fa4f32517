//! `uzswap run --swap-to redis://...`: a real program's cold pages in a real Redis Cluster
//! (scripts/redis-cluster: Debian's redis-server, 3 primaries and 3 replicas on loopback),
//! the program printing exactly what it prints plainly, and no key of the run left once it
//! ends, however it ends. A cluster that cannot be used stops the run before the program.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{ensure_preload, stderr, stdout, uzswap};

struct Cluster {
    dir: PathBuf,
    ports: Vec<u16>,
    url: String,
    /// Started here (and stopped when dropped), not CI's.
    ours: bool,
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/redis-cluster")
}

impl Cluster {
    fn start(first: u16) -> Cluster {
        let dir = std::env::temp_dir().join(format!("uzswap-run-cluster-{first}"));
        let out = Command::new(script())
            .arg("start")
            .arg(&dir)
            .arg(first.to_string())
            .output()
            .expect("running scripts/redis-cluster");
        assert!(
            out.status.success(),
            "scripts/redis-cluster start (needs Debian's redis-server and redis-tools): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Cluster {
            dir,
            ports: (first..first + 6).collect(),
            url: String::from_utf8_lossy(&out.stdout).trim().to_string(),
            ours: true,
        }
    }

    /// The cluster `.ci/run` started (`UZSWAP_TEST_REDIS_CLUSTER`), or one of our own.
    fn shared_or_start(first: u16) -> Cluster {
        match std::env::var("UZSWAP_TEST_REDIS_CLUSTER") {
            Ok(url) => Cluster {
                dir: PathBuf::new(),
                ports: redis_ports(&url),
                url,
                ours: false,
            },
            Err(_) => Cluster::start(first),
        }
    }

    /// Keys held on all nodes (replicas count their copies too).
    fn keys(&self) -> u64 {
        self.ports
            .iter()
            .map(|p| {
                let out = Command::new("redis-cli")
                    .args(["-p", &p.to_string(), "dbsize"])
                    .output()
                    .unwrap();
                String::from_utf8_lossy(&out.stdout)
                    .trim()
                    .parse::<u64>()
                    .unwrap_or(0)
            })
            .sum()
    }
}

fn redis_ports(url: &str) -> Vec<u16> {
    url.trim_start_matches("redis://")
        .split(',')
        .filter_map(|n| n.rsplit_once(':')?.1.parse().ok())
        .collect()
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.ours {
            let _ = Command::new(script()).arg("stop").arg(&self.dir).status();
        }
    }
}

/// CPython building ~120 MiB of strings (plain peak RSS ~130 MiB) and printing a digest of
/// them; under 48M most of it is written back.
const PROGRAM: &str = r#"
import hashlib
x = [str(i) * 50 for i in range(1_200_000)]
print(len(x), hashlib.sha256("".join(x[::97]).encode()).hexdigest())
"#;

#[test]
fn a_program_under_the_cluster_tier_prints_what_it_prints_plainly_and_leaves_no_key() {
    ensure_preload();
    let cluster = Cluster::shared_or_start(7260);
    let plain = Command::new("python3")
        .args(["-c", PROGRAM])
        .output()
        .unwrap();
    assert!(plain.status.success());
    let o = uzswap(&[
        "run",
        "--memory-high",
        "48M",
        "--swap-to",
        &cluster.url,
        "--stats=full",
        "--",
        "python3",
        "-c",
        PROGRAM,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), String::from_utf8_lossy(&plain.stdout));
    let err = stderr(&o);
    let stat = |name: &str| -> u64 {
        err.lines()
            .find_map(|l| {
                l.strip_prefix("uzswap: ")
                    .unwrap_or(l)
                    .strip_prefix(&format!("{name} "))
            })
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {err}"))
    };
    assert!(stat("pswpout") > 5_000, "little went to the cluster: {err}");
    assert!(stat("swap_segments_written") > 100, "{err}");
    assert_eq!(stat("swap_auth_fail"), 0);
    // The client's connections are charged to the limit, with the region's metadata.
    assert!(stat("swap_device_memory_bytes") >= 32 << 10, "{err}");
    assert_eq!(cluster.keys(), 0, "keys of the run left in the cluster");
}

#[test]
fn a_killed_program_leaves_no_key() {
    ensure_preload();
    let cluster = Cluster::start(7270);
    let mut child = Command::new(env!("CARGO_BIN_EXE_uzswap"))
        .args(["run", "--memory-high", "32M", "--swap-to", &cluster.url, "--"])
        .args([
            "python3",
            "-c",
            "x = [str(i) * 50 for i in range(1_000_000)]\nimport time\nprint('built', flush=True)\ntime.sleep(600)",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    use std::io::BufRead;
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "built");
    assert!(cluster.keys() > 0, "nothing went to the cluster");
    // The program (uzswap run's child) killed: uzswap run deletes its keys at once.
    let pids = Command::new("pgrep")
        .args(["-P", &child.id().to_string()])
        .output()
        .unwrap();
    for pid in String::from_utf8_lossy(&pids.stdout).split_whitespace() {
        Command::new("kill").args(["-9", pid]).status().unwrap();
    }
    let status = child.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(137),
        "the program's SIGKILL as its status"
    );
    assert_eq!(
        cluster.keys(),
        0,
        "keys of the killed run left in the cluster"
    );
}

#[test]
fn a_cluster_that_cannot_be_used_stops_the_run_before_the_program() {
    ensure_preload();
    for (url, needle) in [
        ("redis://127.0.0.1:1", "cannot be used"),
        ("redis://nohost", "redis://HOST:PORT"),
    ] {
        let o = uzswap(&[
            "run",
            "--memory-high",
            "32M",
            "--swap-to",
            url,
            "--",
            "sh",
            "-c",
            "echo ran",
        ]);
        assert!(!o.status.success(), "{url}: {}", stdout(&o));
        assert!(!stdout(&o).contains("ran"), "the program ran");
        assert!(stderr(&o).contains(needle), "{url}: {}", stderr(&o));
        assert!(stderr(&o).lines().count() <= 2, "{}", stderr(&o));
    }
}
