//! A Redis Cluster of the test's own (scripts/redis-cluster): 3 primaries and 3 replicas on
//! loopback ports of its own, stopped when the test ends.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

pub struct Cluster {
    pub dir: PathBuf,
    pub ports: Vec<u16>,
    pub url: String,
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/redis-cluster")
}

fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .arg("-p")
        .arg(port.to_string())
        .args(args)
        .output()
        .expect("redis-cli (apt-get install redis-tools)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl Cluster {
    /// A cluster on ports `first..first + 6`, with append-only files if `persist`.
    pub fn start(first: u16, persist: bool) -> Cluster {
        assert!(
            Command::new("redis-server").arg("--version").output().is_ok(),
            "these tests need Debian's redis-server and redis-tools: apt-get install redis-server redis-tools"
        );
        let dir = std::env::temp_dir().join(format!("uzswap-test-cluster-{first}"));
        let out = Command::new(script())
            .arg("start")
            .arg(&dir)
            .arg(first.to_string())
            .env("UZSWAP_REDIS_PERSIST", if persist { "1" } else { "0" })
            .output()
            .expect("running scripts/redis-cluster");
        assert!(
            out.status.success(),
            "scripts/redis-cluster start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Cluster {
            dir,
            ports: (first..first + 6).collect(),
            url: String::from_utf8_lossy(&out.stdout).trim().to_string(),
        }
    }

    pub fn role(&self, port: u16) -> String {
        cli(port, &["role"])
            .lines()
            .next()
            .unwrap_or("")
            .to_string()
    }

    pub fn primaries(&self) -> Vec<u16> {
        self.ports
            .iter()
            .copied()
            .filter(|&p| self.role(p) == "master")
            .collect()
    }

    pub fn replicas(&self) -> Vec<u16> {
        self.ports
            .iter()
            .copied()
            .filter(|&p| self.role(p) == "slave")
            .collect()
    }

    pub fn pid(&self, port: u16) -> i32 {
        std::fs::read_to_string(self.dir.join(port.to_string()).join("pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// kill -9 the node on `port`.
    pub fn kill(&self, port: u16) {
        let pid = self.pid(port);
        Command::new("kill")
            .arg("-9")
            .arg(pid.to_string())
            .status()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while cli(port, &["ping"]).trim() == "PONG" && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Shut the node on `port` down (saving its append-only file, if it keeps one).
    pub fn shutdown(&self, port: u16) {
        cli(port, &["shutdown"]);
    }

    pub fn restart(&self, port: u16) {
        let out = Command::new(script())
            .arg("restart-node")
            .arg(&self.dir)
            .arg(port.to_string())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Wait until every live node says `cluster_state:ok` and every slot is served.
    pub fn wait_ok(&self, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let live: Vec<u16> = self
                .ports
                .iter()
                .copied()
                .filter(|&p| cli(p, &["ping"]).trim() == "PONG")
                .collect();
            if live
                .iter()
                .all(|&p| cli(p, &["cluster", "info"]).contains("cluster_state:ok"))
            {
                return;
            }
            assert!(Instant::now() < deadline, "the cluster did not recover");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Wait until a replica took over from the killed primary `victim`: three primaries
    /// answer again, and the cluster is ok.
    pub fn wait_failover(&self, victim: u16, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let primaries = self.primaries();
            if primaries.len() == 3 && !primaries.contains(&victim) {
                self.wait_ok(deadline.saturating_duration_since(Instant::now()));
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no replica took over from {victim}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Wait until the replica on `port` is in sync with its primary.
    pub fn wait_synced(&self, port: u16, within: Duration) {
        let deadline = Instant::now() + within;
        while !cli(port, &["info", "replication"]).contains("master_link_status:up") {
            assert!(Instant::now() < deadline, "the node on {port} never synced");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Keys of the cluster whose names start with `prefix`, counted on every primary.
    pub fn count_keys(&self, prefix: &str) -> usize {
        self.primaries()
            .into_iter()
            .map(|p| {
                cli(p, &["--scan", "--pattern", &format!("{prefix}*")])
                    .lines()
                    .filter(|l| !l.is_empty())
                    .count()
            })
            .sum()
    }

    /// The node that serves `key`'s slot as primary.
    pub fn primary_of(&self, key: &str) -> u16 {
        let slot: u16 = cli(self.ports[0], &["cluster", "keyslot", key])
            .trim()
            .parse()
            .unwrap();
        for p in self.primaries() {
            let nodes = cli(p, &["cluster", "nodes"]);
            for line in nodes.lines().filter(|l| l.contains("myself")) {
                for range in line.split_whitespace().skip(8) {
                    let (a, b) = range.split_once('-').unwrap_or((range, range));
                    if let (Ok(a), Ok(b)) = (a.parse::<u16>(), b.parse::<u16>()) {
                        if (a..=b).contains(&slot) {
                            return p;
                        }
                    }
                }
            }
        }
        panic!("no primary serves slot {slot}");
    }

    pub fn cli(&self, port: u16, args: &[&str]) -> String {
        cli(port, args)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(script()).arg("stop").arg(&self.dir).status();
    }
}
