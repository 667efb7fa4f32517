//! `uzswap run` on real programs from the distribution, unmodified, their memory well past the
//! limit: the `sqlite3` shell building and querying a database larger than the limit, and
//! `redis-server` loaded past the limit, checked key by key, and saved through a fork
//! (BGSAVE), and Node.js with a large heap (V8 reserves its heap `PROT_NONE` and commits it
//! with `mprotect`), and JVMs: one stopping a busy thread at its safepoints, and a Java heap
//! held with two collectors. Each compares what the program gives with what it gives without
//! uzswap, and holds the process's peak resident memory to the limit plus what lies outside
//! the region.
//! `.ci/run` installs the programs.

mod common;

use std::process::{Command, Output, Stdio};

use common::{ensure_preload, stderr, stdout};

/// What lies outside the region, at most: the program's text and libraries, uzswap's threads
/// and staging, the glibc heap of uzswap's own bookkeeping (7 MiB for sqlite3 and 13 MiB for
/// Redis in BENCHMARKS.md, "real programs under a limit").
const OUTSIDE: u64 = 24 << 20;

/// `uzswap run --stats ARGS -- PROGRAM...`, its stdin from `input`.
fn run(args: &[&str], program: &[&str], input: &[u8]) -> Output {
    ensure_preload();
    let mut child = Command::new(env!("CARGO_BIN_EXE_uzswap"))
        .args(["run", "--stats=full"])
        .args(args)
        .arg("--")
        .args(program)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run uzswap");
    feed(&mut child, input);
    child.wait_with_output().unwrap()
}

fn feed(child: &mut std::process::Child, input: &[u8]) {
    use std::io::Write;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input).unwrap();
}

/// A statistic from `name value` lines.
fn stat(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

/// Peak resident memory within the limit plus the outside part.
fn assert_held(stats: &str) {
    assert_held_with(stats, OUTSIDE);
}

/// Peak resident memory within the limit plus `outside` bytes.
fn assert_held_with(stats: &str, outside: u64) {
    let (peak, limit) = (
        stat(stats, "peak_rss_bytes"),
        stat(stats, "memory_limit_bytes"),
    );
    assert!(
        peak <= limit + outside,
        "peak {} MiB over {} MiB + {} MiB outside",
        peak >> 20,
        limit >> 20,
        outside >> 20
    );
}

fn have(program: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success());
    let package = match program {
        "redis-server" => "redis-server",
        "redis-cli" => "redis-tools",
        "node" => "nodejs",
        "javac" | "java" => "openjdk-17-jdk-headless",
        other => other,
    };
    assert!(
        found,
        "this test runs {program}, which is not installed: apt-get install {package} (.ci/run does)"
    );
    found
}

/// The sqlite3 shell builds a 50 MiB database (400,000 rows and an index, its page cache
/// on the heap) under a 16 MiB limit and queries it: the same answers as without uzswap.
#[test]
fn sqlite3_builds_and_queries_a_database_larger_than_the_limit() {
    if !have("sqlite3") {
        return;
    }
    let script = b"PRAGMA cache_size=-200000;
CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT, v TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<400000)
INSERT INTO t SELECT x, 'key'||x, printf('%0100d', x*7919) FROM c;
CREATE INDEX ik ON t(k);
SELECT count(*), sum(length(v)), max(k) FROM t;
SELECT k, v FROM t WHERE id % 50000 = 0;
SELECT count(*), sum(id) FROM t WHERE k > 'key5' AND v LIKE '%99%';
";
    let dir = std::env::temp_dir().join(format!("uzswap-test-sqlite-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (plain_db, db) = (dir.join("plain.db"), dir.join("uzswap.db"));
    let mut plain = Command::new("sqlite3")
        .arg(&plain_db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    feed(&mut plain, script);
    let plain = plain.wait_with_output().unwrap();
    let o = run(
        &["--memory-high", "16M"],
        &["sqlite3", db.to_str().unwrap()],
        script,
    );
    let size = std::fs::metadata(&db).map_or(0, |m| m.len());
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(plain.status.success());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), stdout(&plain));
    assert!(size > 40 << 20, "{size}");
    let stats = stderr(&o);
    assert!(stat(&stats, "zswpout") > 0 && stat(&stats, "zswpin") > 0);
    assert_held(&stats);
}

/// The program `uzswap run` (process `run`) started.
fn program_pid(run: u32) -> String {
    let children = std::fs::read_to_string(format!("/proc/{run}/task/{run}/children")).unwrap();
    children.split_whitespace().next().unwrap().to_string()
}

/// A port nobody listens on now.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// `redis_keys.py PORT MODE N`: its one line.
fn redis_keys(port: u16, mode: &str, n: u32) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/programs/redis_keys.py");
    let o = Command::new("python3")
        .args([script, &port.to_string(), mode, &n.to_string()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o)
}

fn redis_cli(port: u16, args: &[&str]) -> String {
    let o = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(args)
        .output()
        .unwrap();
    stdout(&o)
}

/// A server the test started: killed if the test ends without shutting it down.
struct Server(Option<std::process::Child>);

impl Server {
    /// Wait for the server to exit (after a `shutdown`).
    fn wait(mut self) -> Output {
        self.0.take().unwrap().wait_with_output().unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Start `redis-server` (under `uzswap run` with `limit`, or plain) on a free port, with
/// `dir` for its dump; wait until it answers.
fn start_redis(limit: Option<&str>, dir: &std::path::Path) -> (Server, u16) {
    let port = free_port();
    let port_s = port.to_string();
    let server = [
        "redis-server",
        "--port",
        &port_s,
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        dir.to_str().unwrap(),
    ];
    let mut command = match limit {
        Some(limit) => {
            ensure_preload();
            let mut c = Command::new(env!("CARGO_BIN_EXE_uzswap"));
            c.args(["run", "--stats=full", "--memory-high", limit, "--"]);
            c.args(server);
            c
        }
        None => {
            let mut c = Command::new(server[0]);
            c.args(&server[1..]);
            c
        }
    };
    let server = Server(Some(
        command
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    for _ in 0..200 {
        if redis_cli(port, &["ping"]).trim() == "PONG" {
            return (server, port);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("redis-server on {port} does not answer");
}

/// redis-server (with the jemalloc built into Debian's) holds 100,000 keys, 24 MiB of them,
/// under a 12 MiB limit: every key reads back as written; its peak resident memory stays
/// within the limit and the outside part. Then a BGSAVE forks the server, and the dump its
/// child wrote, loaded by a plain redis-server, holds every key as written.
#[test]
fn redis_server_loaded_past_the_limit_keeps_every_key_through_a_bgsave() {
    if !have("redis-server") || !have("redis-cli") {
        return;
    }
    const KEYS: u32 = 100_000;
    let dir = std::env::temp_dir().join(format!("uzswap-test-redis-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (server, port) = start_redis(Some("12M"), &dir);
    assert_eq!(
        redis_keys(port, "fill", KEYS),
        format!("fill {KEYS} wrong 0\n")
    );
    assert_eq!(
        redis_keys(port, "check", KEYS),
        format!("check {KEYS} wrong 0\n")
    );
    let run_pid = server.0.as_ref().unwrap().id();
    let live = common::uzswap(&["stat", &program_pid(run_pid)]);
    let live = stdout(&live);
    assert!(stat(&live, "zswpout") > 0, "nothing evicted: {live}");
    assert_held(&live);

    // BGSAVE: the child writes the dump from the heap it got at the fork.
    assert!(redis_cli(port, &["bgsave"]).contains("Background saving started"));
    let saved = (0..400).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let info = redis_cli(port, &["info", "persistence"]);
        info.contains("rdb_bgsave_in_progress:0") && info.contains("rdb_last_bgsave_status:ok")
    });
    assert!(saved, "{}", redis_cli(port, &["info", "persistence"]));
    redis_cli(port, &["shutdown", "nosave"]);
    let o = server.wait();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    let (plain, port) = start_redis(None, &dir);
    let loaded = redis_keys(port, "check", KEYS);
    redis_cli(port, &["shutdown", "nosave"]);
    plain.wait();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(loaded, format!("check {KEYS} wrong 0\n"));
}

/// Node.js (V8's heap: 256 KiB pages reserved `PROT_NONE`, committed and decommitted with
/// `mprotect`) builds a Map of 200,000 objects (147 MB peak without a limit) under 48M: the
/// same output as without uzswap, pages evicted, and peak RSS within the limit plus the outside
/// part, which for node is larger: its 100 MB binary's text and ICU data (44 MiB in
/// BENCHMARKS.md, "real programs under a limit").
#[test]
fn node_builds_a_large_heap_under_the_limit() {
    if !have("node") {
        return;
    }
    let script = "const m = new Map();
for (let i = 0; i < 200000; i++) m.set('key' + i, {i, s: String(i).repeat(5), a: [i, i * 2]});
let h = 0;
for (const [k, v] of m) { h = (h * 31 + v.s.length + v.a[1] + k.length) % 1000000007; }
console.log(m.size, h);
";
    let plain = Command::new("node").args(["-e", script]).output().unwrap();
    assert!(plain.status.success(), "{}", stderr(&plain));
    let o = run(&["--memory-high", "48M"], &["node", "-e", script], b"");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), stdout(&plain));
    let stats = stderr(&o);
    assert!(stat(&stats, "zswpout") > 0, "nothing evicted: {stats}");
    assert_held_with(&stats, 64 << 20);
}

/// A JVM whose `System.gc()` must stop a thread busy in a loop: the thread stops at its next
/// safepoint poll, a read of a page the JVM protects `PROT_NONE` to make it trap. The same
/// output as without uzswap, within two minutes. Hung every time while that page, a small
/// `PROT_NONE` reservation, was a heap block whose protection was granted and not kept.
#[test]
fn a_jvm_stops_a_busy_thread_at_its_safepoints() {
    let source = r#"
public class Safepoint {
    static volatile long sink;
    public static void main(String[] args) throws Exception {
        Thread busy = new Thread(() -> { long x = 0; while (true) { x++; if ((x & 0xffffff) == 0) sink = x; } });
        busy.setDaemon(true);
        busy.start();
        byte[][] keep = new byte[64][];
        for (int i = 0; i < keep.length; i++) keep[i] = new byte[1 << 20];
        for (int i = 0; i < 3; i++) System.gc();
        System.out.println("gc done " + keep.length);
    }
}
"#;
    let class = JavaClass::new("Safepoint", source);
    let java = ["java", "-Xmx256m", "-cp", class.path(), "Safepoint"];
    let plain = Command::new(java[0]).args(&java[1..]).output().unwrap();
    assert!(plain.status.success(), "{}", stderr(&plain));
    ensure_preload();
    let o = Command::new("timeout")
        .args(["-s", "KILL", "120", env!("CARGO_BIN_EXE_uzswap"), "run"])
        .args(["--memory-high", "128M", "--"])
        .args(java)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), stdout(&plain));
}

/// A JVM's Java heap is held, with G1 and with the parallel collector: `-Xms` = `-Xmx`
/// (256 MiB, reserved `PROT_NONE` and committed with fixed mappings at start),
/// `-XX:+AlwaysPreTouch` (every page of it written at once), and bench/jvm/Heap.java: 160
/// MiB of arrays updated at random, a `System.gc()` after each round while a thread runs
/// busy; and G1 with `-Xmx3g`, a reservation larger than any block mimalloc makes. Under
/// 128M, less than half its plain peak (330 MB): the same output as without uzswap, pages
/// evicted, and peak RSS within the limit plus the outside part. Before, a reservation over
/// 64 MiB stayed with the kernel: the heap was outside the limit (peak 330 MB), and the
/// class-data archive's objects, which the JVM maps from a file into its heap, were refused
/// there.
#[test]
fn a_jvm_heap_is_held_with_g1_and_the_parallel_collector() {
    let source = include_str!("../../../bench/jvm/Heap.java");
    let class = JavaClass::new("Heap", source);
    let runs = [
        [
            "-XX:+UseG1GC",
            "-Xms256m",
            "-Xmx256m",
            "-XX:+AlwaysPreTouch",
        ],
        [
            "-XX:+UseParallelGC",
            "-Xms256m",
            "-Xmx256m",
            "-XX:+AlwaysPreTouch",
        ],
        // A 3 GiB reservation, larger than any block mimalloc makes: a large block.
        ["-XX:+UseG1GC", "-Xms64m", "-Xmx3g", "-XX:-AlwaysPreTouch"],
    ];
    for [collector, xms, xmx, pretouch] in runs {
        let java = [
            "java",
            collector,
            xms,
            xmx,
            pretouch,
            "-cp",
            class.path(),
            "Heap",
            "2500",
        ];
        let plain = Command::new(java[0]).args(&java[1..]).output().unwrap();
        assert!(plain.status.success(), "{}", stderr(&plain));
        let o = run(&["--memory-high", "128M"], &java, b"");
        assert_eq!(o.status.code(), Some(0), "{collector}: {}", stderr(&o));
        assert_eq!(stdout(&o), stdout(&plain), "{collector}");
        let stats = stderr(&o);
        assert!(stat(&stats, "zswpout") > 0, "{collector}: nothing evicted");
        // The JVM's code and files (33 MiB), its threads' stacks, uzswap's own.
        assert_held_with(&stats, 64 << 20);
    }
}

/// A Java class compiled with `javac` into a directory of its own, removed on drop.
struct JavaClass {
    dir: std::path::PathBuf,
}

impl JavaClass {
    fn new(name: &str, source: &str) -> Self {
        assert!(have("javac") && have("java"));
        let dir = std::env::temp_dir().join(format!("uzswap-test-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = format!("{name}.java");
        std::fs::write(dir.join(&file), source).unwrap();
        let javac = Command::new("javac")
            .arg(&file)
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(javac.status.success(), "{}", stderr(&javac));
        JavaClass { dir }
    }

    fn path(&self) -> &str {
        self.dir.to_str().unwrap()
    }
}

impl Drop for JavaClass {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
