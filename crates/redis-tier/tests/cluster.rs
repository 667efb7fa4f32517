//! The Redis Cluster tier against a real cluster (scripts/redis-cluster, Debian's
//! redis-server): every object back, through a primary killed and then a replica, through
//! the whole cluster shut down and started again; a changed byte fails exactly its object;
//! a run leaves no key behind, even killed.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Cluster;
use parking_lot::Mutex;
use redis_tier::{delete_run, RedisSegments, TierOptions};
use zswap::swap::segments::{Object, ReadFail, SegmentReadError};
use zswap::swap::{SegmentLog, SwapSlot};

/// Object `i`: 200..3200 bytes of a pattern of its own.
fn object(i: u32) -> Vec<u8> {
    let len = 200 + (i as usize * 131) % 3000;
    (0..len).map(|b| (b as u32 * 29 + i * 13) as u8).collect()
}

fn log_on(cluster: &Cluster, run: &str, options: TierOptions) -> (SegmentLog, Arc<RedisSegments>) {
    let store = Arc::new(RedisSegments::connect(&cluster.url, run, options).unwrap());
    (SegmentLog::new(store.clone(), true), store)
}

fn append(log: &SegmentLog, slots: std::ops::Range<u32>) -> Result<(), zswap::swap::DeviceError> {
    let data: Vec<Vec<u8>> = slots.clone().map(object).collect();
    let objects: Vec<Object> = data.iter().map(|d| Object { codec: 1, bytes: d }).collect();
    let slots: Vec<SwapSlot> = slots.map(SwapSlot).collect();
    log.append(&slots, &objects)
}

fn read(log: &SegmentLog, slot: u32) -> Result<Vec<u8>, ReadFail> {
    let mut got = Vec::new();
    log.read(&[SwapSlot(slot)], |_, _, bytes| {
        got = bytes.to_vec();
        true
    })?;
    Ok(got)
}

fn check_all(log: &SegmentLog, slots: impl IntoIterator<Item = u32>) {
    for i in slots {
        assert_eq!(read(log, i).unwrap(), object(i), "slot {i}");
    }
}

#[test]
fn objects_come_back_and_a_run_leaves_no_key() {
    let cluster = Cluster::start(7200, false);
    let (log, store) = log_on(&cluster, "t-roundtrip", TierOptions::default());
    append(&log, 0..3000).unwrap();
    assert!(cluster.count_keys("uzswap:t-roundtrip:") > 10);
    // Every key carries its lease.
    let key = store.key(0);
    let ttl: i64 = cluster
        .cli(cluster.primary_of(&key), &["pttl", &key])
        .trim()
        .parse()
        .unwrap();
    assert!(ttl > 0 && ttl <= 60_000, "pttl {ttl}");
    check_all(&log, 0..3000);
    // Free three in four, compact, and read again.
    for i in (0..3000).filter(|i| i % 4 != 0) {
        log.free(SwapSlot(i));
    }
    while log.compact().unwrap() {}
    check_all(&log, (0..3000).step_by(4));
    assert_eq!(log.audit().unwrap(), 750);
    drop(log);
    drop(store);
    assert_eq!(
        cluster.count_keys("uzswap:t-roundtrip:"),
        0,
        "keys left behind"
    );
}

#[test]
fn a_changed_byte_in_the_cluster_fails_exactly_its_object() {
    let cluster = Cluster::start(7210, false);
    let (log, store) = log_on(&cluster, "t-flip", TierOptions::default());
    append(&log, 0..10).unwrap();
    assert_eq!(store.nr_live(), 1, "ten small objects are one segment");
    // Object 4 starts after objects 0..4; change a byte in its middle.
    let at: usize = (0..4).map(|i| object(i).len()).sum::<usize>() + 50;
    let key = store.key(0);
    let port = cluster.primary_of(&key);
    let byte = cluster.cli(port, &["getrange", &key, &at.to_string(), &at.to_string()]);
    let flipped = if byte.trim() == "A" { "B" } else { "A" };
    cluster.cli(port, &["setrange", &key, &at.to_string(), flipped]);
    for i in 0..10 {
        match read(&log, i) {
            Err(e) => {
                assert_eq!(i, 4, "slot {i} failed: {e:?}");
                assert_eq!(e.kind, SegmentReadError::Unauthenticated);
            }
            Ok(bytes) => {
                assert_ne!(i, 4, "the changed object was handed back");
                assert_eq!(bytes, object(i));
            }
        }
    }
}

/// Writers append while a primary is killed, the killed node started again (it rejoins
/// as a replica), and then a replica of another shard is killed: every append that
/// returned Ok reads back, before and after.
#[test]
fn a_primary_killed_then_a_replica_loses_nothing() {
    let cluster = Cluster::start(7220, false);
    let options = TierOptions {
        retry_for: Duration::from_secs(8),
        ..TierOptions::default()
    };
    let (log, _store) = log_on(&cluster, "t-failover", options);
    let log = Arc::new(log);
    let next = AtomicU32::new(0);
    let stored = Mutex::new(Vec::new());
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                while !stop.load(Relaxed) {
                    let first = next.fetch_add(20, Relaxed);
                    if append(&log, first..first + 20).is_ok() {
                        stored.lock().push(first..first + 20);
                    }
                }
            });
        }
        s.spawn(|| {
            // Readers of what is stored, all through.
            while !stop.load(Relaxed) {
                let ranges: Vec<_> = stored.lock().clone();
                for r in ranges.iter().rev().take(5) {
                    check_all(&log, r.clone());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        // Whatever happens below, the writers and the reader stop.
        struct StopOnDrop<'a>(&'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Relaxed);
            }
        }
        let _stop = StopOnDrop(&stop);
        std::thread::sleep(Duration::from_millis(500));
        let victim = cluster.primaries()[0];
        cluster.kill(victim);
        let t = Instant::now();
        cluster.wait_failover(victim, Duration::from_secs(30));
        eprintln!("a replica took over after {:?}", t.elapsed());
        std::thread::sleep(Duration::from_millis(500));
        cluster.restart(victim);
        cluster.wait_synced(victim, Duration::from_secs(30));
        let replica = cluster
            .replicas()
            .into_iter()
            .find(|&p| p != victim)
            .expect("a replica");
        cluster.kill(replica);
        std::thread::sleep(Duration::from_secs(1));
    });
    let ranges = stored.into_inner();
    let total: usize = ranges.iter().map(|r| r.len()).sum();
    eprintln!("{} appends of 20 stored", ranges.len());
    assert!(
        ranges.len() > 10,
        "too few appends went through: {}",
        ranges.len()
    );
    for r in &ranges {
        check_all(&log, r.clone());
    }
    assert_eq!(log.audit().unwrap() as usize, total);
}

/// Every node shut down (each keeps an append-only file) and started again while a writer
/// waits: what was stored before reads back after, and writing goes on.
#[test]
fn the_cluster_shut_down_and_started_again_loses_nothing() {
    let cluster = Cluster::start(7230, true);
    let (log, _store) = log_on(&cluster, "t-restart", TierOptions::default());
    append(&log, 0..500).unwrap();
    for &p in &cluster.ports {
        cluster.shutdown(p);
    }
    let log = Arc::new(log);
    let writer = {
        let log = log.clone();
        std::thread::spawn(move || append(&log, 500..600))
    };
    std::thread::sleep(Duration::from_secs(2));
    for &p in &cluster.ports {
        cluster.restart(p);
    }
    cluster.wait_ok(Duration::from_secs(30));
    writer
        .join()
        .unwrap()
        .expect("the append made while the cluster was down");
    check_all(&log, 0..600);
}

/// A run killed with kill -9 leaves its keys for one lease at most; `delete_run` (what
/// `uzswap run` does after its program) takes them at once.
#[test]
fn a_killed_run_leaves_its_keys_for_one_lease() {
    if let Ok(url) = std::env::var("REDIS_TIER_CHILD") {
        let options = TierOptions {
            ttl: Duration::from_secs(2),
            renew_every: Duration::from_millis(300),
            ..TierOptions::default()
        };
        let store = Arc::new(RedisSegments::connect(&url, "t-killed", options).unwrap());
        let log = SegmentLog::new(store, true);
        append(&log, 0..500).unwrap();
        println!("written");
        std::thread::sleep(Duration::from_secs(600));
        return;
    }
    let cluster = Cluster::start(7240, false);
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_killed_run_leaves_its_keys_for_one_lease",
            "--nocapture",
        ])
        .env("REDIS_TIER_CHILD", &cluster.url)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while cluster.count_keys("uzswap:t-killed:") == 0 {
        assert!(Instant::now() < deadline, "the child wrote nothing");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Renewed past the first lease while the run lives.
    std::thread::sleep(Duration::from_secs(3));
    let held = cluster.count_keys("uzswap:t-killed:");
    assert!(held > 0, "keys expired while their run lived");
    child.kill().unwrap();
    child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(
        cluster.count_keys("uzswap:t-killed:"),
        0,
        "keys outlived their lease"
    );

    // And deleted at once from outside.
    let (log, store) = log_on(&cluster, "t-outside-1", TierOptions::default());
    append(&log, 0..300).unwrap();
    assert!(cluster.count_keys("uzswap:t-outside") > 0);
    std::mem::forget(log);
    std::mem::forget(store);
    assert!(delete_run(&cluster.url, "t-outside").unwrap() > 0);
    assert_eq!(cluster.count_keys("uzswap:t-outside"), 0);
}

#[test]
fn bad_addresses_are_refused_with_what_to_give() {
    for bad in [
        "redis://",
        "http://127.0.0.1:7000",
        "redis://host",
        "redis://:1",
        "redis://h:99999",
    ] {
        let e = RedisSegments::connect(bad, "x", TierOptions::default()).unwrap_err();
        assert!(e.to_string().contains("redis://HOST:PORT"), "{bad}: {e}");
    }
    let e = RedisSegments::connect("redis://127.0.0.1:1", "x", TierOptions::default()).unwrap_err();
    assert!(e.to_string().contains("cannot be used"), "{e}");
}
