//! Far memory on a Redis Cluster (or Valkey, which speaks the same protocol): a
//! [`SegmentDevice`] whose segments are values in the cluster.
//!
//! - **Keys.** `uzswap:RUN:SEGMENT`, RUN a per-run id (two programs never collide), spread
//!   over the cluster's hash slots by their CRC16 like any key. redis-rs follows the slot map,
//!   MOVED and ASK, reconnects and failovers.
//! - **Durable before it leaves memory.** `put` returns once the primary has the segment
//!   and at least one replica acknowledged it (`WAIT 1`): the caller frees the pool's copy only
//!   then, so a primary killed at any moment loses nothing. A write that no replica took is
//!   written again until one does, or fails after `TierOptions::retry_for`.
//! - **Leased.** Every key carries a TTL (`TierOptions::ttl`) that a thread renews while the
//!   run lives;
//!   the run deletes its keys when it ends (`Drop`, and `uzswap run` after its program), and a
//!   run killed with nothing to delete them leaves them for one lease at most.
//! - **Reads** are `GETRANGE`s of only the objects a fault needs, from the key's primary (a
//!   replica may lag, or be dead and still in the slot map); retried through a failover.
//!   A segment that is gone (lost with its primary and every replica, or its lease run out)
//!   fails the read, and the engine poisons its pages.
#![forbid(unsafe_code)]

mod cleanup;
mod memory;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use redis::cluster::{ClusterClient, ClusterConnection};
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, Slot, SlotAddr};
use redis::Value;
use zswap::swap::segments::{SegmentAddr, SegmentRead};
use zswap::swap::{DeviceError, SegmentDevice};

pub use cleanup::delete_run;

use memory::ClientMemory;

/// How long `WAIT` waits for a replica's acknowledgement before the write is tried again.
const WAIT_MS: u64 = 1000;

/// The tier's time scales, and its threads' start.
#[derive(Debug, Clone, Copy)]
pub struct TierOptions {
    /// The TTL each key is written with and renewed to: the longest a key outlives a run
    /// that could not delete it.
    pub ttl: Duration,
    /// How often the lease thread renews every live key.
    pub renew_every: Duration,
    /// How long an operation is retried (a node down, a failover) before it fails.
    pub retry_for: Duration,
    /// Run first on the lease thread (`uzswap run` marks it as uzswap's own).
    pub thread_start: Option<fn()>,
}

impl Default for TierOptions {
    /// A lease of 60 s renewed every 15 s; operations retried for 30 s, longer than a
    /// failover takes with the cluster's default `cluster-node-timeout` of 15 s.
    fn default() -> Self {
        TierOptions {
            ttl: Duration::from_secs(60),
            renew_every: Duration::from_secs(15),
            retry_for: Duration::from_secs(30),
            thread_start: None,
        }
    }
}

/// Why the cluster could not be used.
#[derive(Debug, thiserror::Error)]
pub enum RedisTierError {
    /// An address that is not `redis://HOST:PORT[,HOST:PORT...]`.
    #[error("{0:?} is not redis://HOST:PORT[,HOST:PORT...]")]
    BadAddress(String),
    /// No node answered, or the cluster refused.
    #[error("the Redis Cluster at {nodes} cannot be used: {source}")]
    Unreachable {
        /// The nodes as given.
        nodes: String,
        /// What the client said.
        #[source]
        source: redis::RedisError,
    },
}

/// What the tier did, for the statistics.
#[derive(Debug, Default)]
pub struct RedisStats {
    /// Segments written (acknowledged by a replica).
    pub puts: AtomicU64,
    /// Reads (GETRANGE).
    pub gets: AtomicU64,
    /// Operations tried again: a node down, a failover, no replica's acknowledgement.
    pub retries: AtomicU64,
    /// Keys deleted.
    pub deletes: AtomicU64,
    /// Lease renewals (keys renewed).
    pub renewals: AtomicU64,
}

/// Segments as values in a Redis Cluster.
pub struct RedisSegments {
    shared: Arc<Shared>,
    renewer: Option<std::thread::JoinHandle<()>>,
}

struct Shared {
    client: ClusterClient,
    nodes: String,
    /// Idle connections: each caller takes one for its operation (a connection is not
    /// shared between threads), and gives it back.
    idle: Mutex<Vec<Connection>>,
    /// What the client holds in memory (memory.rs).
    memory: Arc<ClientMemory>,
    prefix: String,
    options: TierOptions,
    /// Segments in the cluster now: renewed, and deleted at the end.
    live: Mutex<HashSet<u64>>,
    stop: Mutex<bool>,
    wake: Condvar,
    stats: RedisStats,
    /// A connection failed for good: said once.
    said: AtomicBool,
}

/// A cluster connection, counted in the client's memory while it lives.
struct Connection {
    conn: ClusterConnection,
    memory: Arc<ClientMemory>,
}

impl Connection {
    fn new(client: &ClusterClient, memory: &Arc<ClientMemory>) -> redis::RedisResult<Self> {
        let conn = client.get_connection()?;
        memory.connection_made();
        Ok(Connection {
            conn,
            memory: memory.clone(),
        })
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.memory.connection_dropped();
    }
}

impl std::fmt::Debug for RedisSegments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisSegments")
            .field("nodes", &self.shared.nodes)
            .field("prefix", &self.shared.prefix)
            .finish()
    }
}

/// A run id no other run has: this process's id and the time in nanoseconds, in hex.
pub fn new_run_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{:x}-{nanos:x}", std::process::id())
}

/// A cluster client for `address` (`redis://HOST:PORT[,HOST:PORT...]`): 2 s to connect,
/// 5 s for a reply.
pub(crate) fn cluster_client(address: &str) -> Result<ClusterClient, RedisTierError> {
    ClusterClient::builder(parse_nodes(address)?)
        .connection_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(5))
        .build()
        .map_err(|source| RedisTierError::Unreachable {
            nodes: address.to_string(),
            source,
        })
}

/// The nodes of `redis://HOST:PORT[,HOST:PORT...]`, each as its own URL.
pub fn parse_nodes(address: &str) -> Result<Vec<String>, RedisTierError> {
    let bad = || RedisTierError::BadAddress(address.to_string());
    let rest = address.strip_prefix("redis://").ok_or_else(bad)?;
    let nodes: Vec<String> = rest
        .trim_end_matches('/')
        .split(',')
        .map(|n| n.trim_start_matches("redis://").trim_end_matches('/'))
        .map(|n| match n.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
                Ok(format!("redis://{n}/"))
            }
            _ => Err(bad()),
        })
        .collect::<Result<_, _>>()?;
    if nodes.is_empty() {
        return Err(bad());
    }
    Ok(nodes)
}

impl RedisSegments {
    /// Connect to the cluster at `address` (`redis://HOST:PORT[,HOST:PORT...]`, any of its
    /// nodes) for the run `run` (its keys are `uzswap:RUN:*`).
    pub fn connect(address: &str, run: &str, options: TierOptions) -> Result<Self, RedisTierError> {
        let client = cluster_client(address)?;
        let unreachable = |source| RedisTierError::Unreachable {
            nodes: address.to_string(),
            source,
        };
        let memory = Arc::new(ClientMemory::default());
        let mut first = Connection::new(&client, &memory).map_err(unreachable)?;
        redis::cmd("PING")
            .query::<String>(&mut first.conn)
            .map_err(unreachable)?;
        let shared = Arc::new(Shared {
            client,
            nodes: address.to_string(),
            idle: Mutex::new(vec![first]),
            memory,
            prefix: format!("uzswap:{run}:"),
            options,
            live: Mutex::new(HashSet::new()),
            stop: Mutex::new(false),
            wake: Condvar::new(),
            stats: RedisStats::default(),
            said: AtomicBool::new(false),
        });
        let renewer = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("uzswap-lease".into())
                .spawn(move || {
                    if let Some(start) = options.thread_start {
                        start();
                    }
                    shared.renew_loop();
                })
                .expect("starting the lease thread")
        };
        Ok(RedisSegments {
            shared,
            renewer: Some(renewer),
        })
    }

    /// What the tier did.
    pub fn stats(&self) -> &RedisStats {
        &self.shared.stats
    }

    /// The key of segment `id`.
    pub fn key(&self, id: u64) -> String {
        self.shared.key(id)
    }

    /// The prefix of every key of this run.
    pub fn prefix(&self) -> &str {
        &self.shared.prefix
    }

    /// Segments held in the cluster now.
    pub fn nr_live(&self) -> usize {
        self.shared.live.lock().len()
    }

    /// What the client holds in this process's memory now (memory.rs), in bytes.
    pub fn client_bytes(&self) -> u64 {
        self.shared.memory.bytes()
    }

    /// The most the client held in this process's memory since the last call, in bytes.
    pub fn take_client_peak(&self) -> u64 {
        self.shared.memory.take_peak()
    }
}

impl Shared {
    fn key(&self, id: u64) -> String {
        format!("{}{id:x}", self.prefix)
    }

    /// Change the set of live segments, and charge its table as it is now.
    fn live_changed(&self, change: impl FnOnce(&mut HashSet<u64>)) {
        let mut live = self.live.lock();
        change(&mut live);
        self.memory.live_set(live.capacity());
    }

    /// Run `op` on a connection, retrying what a failover or a lost node makes fail, for
    /// up to `retry_for`. `op` returns Ok(None) for "try again" (no replica acknowledged).
    fn with_retries<T>(
        &self,
        what: &str,
        mut op: impl FnMut(&mut ClusterConnection) -> redis::RedisResult<Option<T>>,
    ) -> Result<T, DeviceError> {
        let deadline = Instant::now() + self.options.retry_for;
        let mut pause = Duration::from_millis(10);
        loop {
            let conn = self.idle.lock().pop();
            let mut conn = match conn {
                Some(c) => c,
                None => match Connection::new(&self.client, &self.memory) {
                    Ok(c) => c,
                    Err(e) => {
                        if Instant::now() >= deadline {
                            return Err(self.failed(what, &e));
                        }
                        Stats::inc(&self.stats.retries);
                        std::thread::sleep(pause);
                        pause = (pause * 2).min(Duration::from_millis(500));
                        continue;
                    }
                },
            };
            let result = op(&mut conn.conn);
            match result {
                Ok(Some(v)) => {
                    self.idle.lock().push(conn);
                    return Ok(v);
                }
                Ok(None) => {
                    self.idle.lock().push(conn);
                    if Instant::now() >= deadline {
                        let e = redis::RedisError::from((
                            redis::ErrorKind::Io,
                            "no replica acknowledged the write",
                        ));
                        return Err(self.failed(what, &e));
                    }
                }
                // A connection that failed is dropped: the next try makes a new one,
                // which reads the slot map afresh.
                Err(e) if Instant::now() >= deadline => return Err(self.failed(what, &e)),
                Err(_) => {}
            }
            Stats::inc(&self.stats.retries);
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(500));
        }
    }

    fn failed(&self, what: &str, e: &redis::RedisError) -> DeviceError {
        if !self.said.swap(true, Relaxed) {
            log::error!(
                "uzswap: the Redis Cluster at {} failed a {what} for {} s: {e}",
                self.nodes,
                self.options.retry_for.as_secs()
            );
        }
        DeviceError::Io(std::io::Error::other(format!("redis {what}: {e}")))
    }

    fn renew_loop(&self) {
        let mut stop = self.stop.lock();
        loop {
            let timed_out = self
                .wake
                .wait_for(&mut stop, self.options.renew_every)
                .timed_out();
            if *stop {
                return;
            }
            if !timed_out {
                continue;
            }
            drop(stop);
            self.renew();
            stop = self.stop.lock();
        }
    }

    /// Renew every live key's lease, a pipeline per thousand keys.
    fn renew(&self) {
        let ids: Vec<u64> = self.live.lock().iter().copied().collect();
        let ttl = self.options.ttl.as_millis() as u64;
        for chunk in ids.chunks(1000) {
            let _in_flight = self.memory.write(chunk.len(), 0);
            let result = self.with_retries("lease renewal", |conn| {
                let mut pipe = redis::cluster::cluster_pipe();
                for &id in chunk {
                    pipe.cmd("PEXPIRE").arg(self.key(id)).arg(ttl).ignore();
                }
                pipe.query::<()>(conn).map(Some)
            });
            if result.is_ok() {
                Stats::add(&self.stats.renewals, chunk.len() as u64);
            }
        }
    }
}

/// Whether a replica of `key`'s primary has every write this connection made to it.
/// `WAIT` is asked of that primary alone: redis-rs would ask every primary and take the
/// least, so one shard without a replica would stop every write.
fn replicated(conn: &mut ClusterConnection, key: &str) -> redis::RedisResult<bool> {
    let primary = SingleNodeRoutingInfo::SpecificNode(Route::with_key(key, SlotAddr::Master));
    let acked = conn.route_command(
        redis::cmd("WAIT").arg(1).arg(WAIT_MS),
        RoutingInfo::SingleNode(primary),
    )?;
    Ok(matches!(acked, Value::Int(n) if n >= 1))
}

impl SegmentDevice for RedisSegments {
    fn put(&self, id: u64, bytes: &[u8]) -> Result<SegmentAddr, DeviceError> {
        let s = &self.shared;
        let key = s.key(id);
        let ttl = s.options.ttl.as_millis() as u64;
        let _in_flight = s.memory.write(2, bytes.len());
        s.with_retries("write", |conn| {
            redis::cmd("SET")
                .arg(&key)
                .arg(bytes)
                .arg("PX")
                .arg(ttl)
                .query::<()>(conn)?;
            Ok(replicated(conn, &key)?.then_some(()))
        })?;
        s.live_changed(|live| {
            live.insert(id);
        });
        Stats::inc(&s.stats.puts);
        Ok(0)
    }

    /// One pipeline of SETs (redis-rs sends each node its part), then a WAIT on each primary
    /// written to.
    fn put_all(&self, segments: &[(u64, &[u8])]) -> Result<Vec<SegmentAddr>, DeviceError> {
        if segments.len() == 1 {
            return self.put(segments[0].0, segments[0].1).map(|a| vec![a]);
        }
        let s = &self.shared;
        let keys: Vec<String> = segments.iter().map(|&(id, _)| s.key(id)).collect();
        let ttl = s.options.ttl.as_millis() as u64;
        let values = segments.iter().map(|(_, b)| b.len()).sum();
        let _in_flight = s.memory.write(2 * segments.len(), values);
        s.with_retries("write", |conn| {
            let mut pipe = redis::cluster::cluster_pipe();
            for (key, &(_, bytes)) in keys.iter().zip(segments) {
                pipe.cmd("SET")
                    .arg(key)
                    .arg(bytes)
                    .arg("PX")
                    .arg(ttl)
                    .ignore();
            }
            pipe.query::<()>(conn)?;
            let mut waited = HashSet::new();
            for key in &keys {
                if !waited.insert(Slot::for_key(key)) {
                    continue;
                }
                if !replicated(conn, key)? {
                    return Ok(None);
                }
            }
            Ok(Some(()))
        })?;
        s.live_changed(|live| live.extend(segments.iter().map(|&(id, _)| id)));
        Stats::add(&s.stats.puts, segments.len() as u64);
        Ok(vec![0; segments.len()])
    }

    fn get(
        &self,
        id: u64,
        _addr: SegmentAddr,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), DeviceError> {
        let s = &self.shared;
        let key = s.key(id);
        let end = offset + out.len() - 1;
        let _in_flight = s.memory.read(1, out.len());
        let bytes: Vec<u8> = s.with_retries("read", |conn| {
            let v: Value = redis::cmd("GETRANGE")
                .arg(&key)
                .arg(offset)
                .arg(end)
                .query(conn)?;
            match v {
                Value::BulkString(b) => Ok(Some(b)),
                _ => Ok(Some(Vec::new())),
            }
        })?;
        Stats::inc(&s.stats.gets);
        if bytes.len() != out.len() {
            // The key is gone or shorter: lost with its nodes, or its lease ran out.
            return Err(DeviceError::ShortRead {
                read: bytes.len(),
                expected: out.len(),
            });
        }
        out.copy_from_slice(&bytes);
        Ok(())
    }

    /// One pipeline of `GETRANGE`s (redis-rs sends each node its part): one round trip.
    fn get_all(&self, reads: &mut [SegmentRead<'_>]) -> Result<(), (usize, DeviceError)> {
        if reads.len() == 1 {
            let r = &mut reads[0];
            return self.get(r.id, r.addr, r.offset, r.out).map_err(|e| (0, e));
        }
        let s = &self.shared;
        let _in_flight = s
            .memory
            .read(reads.len(), reads.iter().map(|r| r.out.len()).sum());
        let values: Vec<Value> = s
            .with_retries("read", |conn| {
                let mut pipe = redis::cluster::cluster_pipe();
                for r in reads.iter() {
                    pipe.cmd("GETRANGE")
                        .arg(s.key(r.id))
                        .arg(r.offset)
                        .arg(r.offset + r.out.len() - 1);
                }
                pipe.query::<Vec<Value>>(conn).map(Some)
            })
            .map_err(|e| (0, e))?;
        Stats::add(&s.stats.gets, reads.len() as u64);
        for (k, (r, v)) in reads.iter_mut().zip(values).enumerate() {
            let bytes = match v {
                Value::BulkString(b) => b,
                _ => Vec::new(),
            };
            if bytes.len() != r.out.len() {
                return Err((
                    k,
                    DeviceError::ShortRead {
                        read: bytes.len(),
                        expected: r.out.len(),
                    },
                ));
            }
            r.out.copy_from_slice(&bytes);
        }
        Ok(())
    }

    fn memory_bytes(&self) -> u64 {
        self.shared.memory.bytes()
    }

    fn delete(&self, id: u64, _addr: SegmentAddr) {
        let s = &self.shared;
        s.live_changed(|live| {
            live.remove(&id);
        });
        let key = s.key(id);
        let _in_flight = s.memory.write(1, 0);
        // Best effort: a key left behind goes with its lease.
        let _ = s.with_retries("delete", |conn| {
            redis::cmd("UNLINK").arg(&key).query::<()>(conn).map(Some)
        });
        Stats::inc(&s.stats.deletes);
    }
}

impl Drop for RedisSegments {
    /// The run's end: stop renewing, and delete every key still held.
    fn drop(&mut self) {
        *self.shared.stop.lock() = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.renewer.take() {
            let _ = t.join();
        }
        let ids: Vec<u64> = self.shared.live.lock().drain().collect();
        for chunk in ids.chunks(1000) {
            let _ = self.shared.with_retries("delete", |conn| {
                let mut pipe = redis::cluster::cluster_pipe();
                for &id in chunk {
                    pipe.cmd("UNLINK").arg(self.shared.key(id)).ignore();
                }
                pipe.query::<()>(conn).map(Some)
            });
        }
    }
}

struct Stats;

impl Stats {
    fn inc(c: &AtomicU64) {
        c.fetch_add(1, Relaxed);
    }
    fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Relaxed);
    }
}
