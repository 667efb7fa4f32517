//! What the cluster client holds in the process's memory, charged to the limit
//! (`SegmentDevice::memory_bytes`) as the kernel charges zswap's entries to the cgroup:
//! - its connections, each about `CONNECTION_BYTES` (the slot map, a socket to each node
//!   talked to and its buffers);
//! - while a pipeline is sent and answered, the client's copies of it: a write's values
//!   `WRITE_COPIES` times (the command's arguments, the pipeline cut per node, the packed
//!   bytes), a read's `READ_COPIES` times (the reply as read and as parsed);
//! - the set of live segment ids the lease thread renews.
//!
//! The client's allocations are redis-rs's, out of our sight: these are its sizes as
//! measured against a 3-primary cluster (tests/memory.rs checks them with a counting
//! allocator), not a count of its bytes. Left out, as small or brief: the lease thread's
//! copy of the live ids while it renews them, a connection's growth past 32 KiB with many
//! nodes; and a pipeline stays charged through the pauses between its retries.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A cluster connection's bytes.
pub(crate) const CONNECTION_BYTES: u64 = 32 << 10;
/// Copies of a write's values the client holds while it sends them.
pub(crate) const WRITE_COPIES: u64 = 3;
/// Copies of a read's bytes the client holds while it receives them.
pub(crate) const READ_COPIES: u64 = 2;
/// A command's own bytes in the client beside its values (its key, its other arguments).
pub(crate) const COMMAND_BYTES: u64 = 128;

/// The client's bytes, by kind.
#[derive(Debug, Default)]
pub(crate) struct ClientMemory {
    connections: AtomicU64,
    in_flight: AtomicU64,
    live_ids: AtomicU64,
    /// The most `bytes` was since `take_peak`.
    peak: AtomicU64,
}

impl ClientMemory {
    pub(crate) fn bytes(&self) -> u64 {
        self.connections.load(Relaxed) * CONNECTION_BYTES
            + self.in_flight.load(Relaxed)
            + self.live_ids.load(Relaxed)
    }

    pub(crate) fn connection_made(&self) {
        self.connections.fetch_add(1, Relaxed);
        self.peak.fetch_max(self.bytes(), Relaxed);
    }

    /// The most the client held since the last call, and start again from now.
    pub(crate) fn take_peak(&self) -> u64 {
        self.peak.swap(self.bytes(), Relaxed).max(self.bytes())
    }

    pub(crate) fn connection_dropped(&self) {
        self.connections.fetch_sub(1, Relaxed);
    }

    /// Charge a pipeline of `commands` commands writing `values` bytes until the guard goes.
    pub(crate) fn write(&self, commands: usize, values: usize) -> InFlight<'_> {
        self.hold(commands as u64 * COMMAND_BYTES + values as u64 * WRITE_COPIES)
    }

    /// Charge a pipeline of `commands` commands reading `values` bytes until the guard goes.
    pub(crate) fn read(&self, commands: usize, values: usize) -> InFlight<'_> {
        self.hold(commands as u64 * COMMAND_BYTES + values as u64 * READ_COPIES)
    }

    fn hold(&self, bytes: u64) -> InFlight<'_> {
        self.in_flight.fetch_add(bytes, Relaxed);
        self.peak.fetch_max(self.bytes(), Relaxed);
        InFlight {
            memory: self,
            bytes,
        }
    }

    /// The live set's table now holds room for `capacity` ids (a hash set of u64: 8 bytes a
    /// bucket and a control byte, buckets a power of two over 8/7 of the capacity).
    pub(crate) fn live_set(&self, capacity: usize) {
        let buckets = (capacity * 8 / 7).next_power_of_two() as u64;
        self.live_ids
            .store(if capacity == 0 { 0 } else { buckets * 9 }, Relaxed);
    }
}

/// Bytes charged while a pipeline is under way.
pub(crate) struct InFlight<'a> {
    memory: &'a ClientMemory,
    bytes: u64,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.memory.in_flight.fetch_sub(self.bytes, Relaxed);
    }
}
