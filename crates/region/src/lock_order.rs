//! The region's lock classes, in the order a thread takes them (zswap's `lock_order` checks
//! it in debug builds: waiting for a lock of a rank the thread holds, or an earlier one,
//! panics):
//!
//! ```text
//! reclaim hold-off (reclaim_wait.rs: shared by each eviction, exclusive across a fork)
//!   └─> folio lock (the engine's swap cache: one waited for at a time; reclaim's batch
//!         │         and fault-around try-lock the folios after the one they hold, in
//!         │         ascending order, never waiting)
//!         ├─> written bits' read (written_bits.rs: reclaim, across one chunk's read)
//!         │     └─> event gate (shared, for the read)
//!         ├─> event gate (mapping.rs: shared around every userfaultfd call that changes the
//!         │     │        range, exclusive to read events, which a thread may do holding its
//!         │     │        folio lock)
//!         │     ├─> discards (the pending check; the discards just read are recorded)
//!         │     ├─> lru, staged, read_failures, readahead (an install's bookkeeping)
//!         │     └─> the engine's locks (an install frees the engine's copies)
//!         └─> lru, staged, read_failures, deferred, discards, unevictable, the engine's
//!                            locks (outside the gate, or with it given up)
//! ```
//!
//! The parts' locks (discards, lru, staged, read_failures, readahead, deferred, ...) are
//! leaves: each is held only for its part's own work, and a part never calls another, nor
//! the engine, while holding one; they share one rank, so taking any lock under one panics
//! (but the LRU's active queue, locked under its FIFO).
//! `Events::discard` lets `discards` go before it takes each folio lock; reclaim lets `lru`
//! go before it locks the folio it named. The engine's own locks are not classed.
//!
//! Events and madvise: an `madvise`, `munmap` or `mremap` of the registered range (the
//! program's, or `Region::discard`) returns only once a handler has read its event, and the
//! read takes the gate exclusively: so no thread makes such a call, or touches the range
//! (its fault waits for a handler, who may wait for the gate or a folio lock), while holding
//! the gate or a folio lock (`lock_order::assert_none_held` before each such call of ours;
//! reclaim's read of a folio where it is goes through `/proc`, which fails on a missing page
//! rather than waiting). A thread that must read events to go on (an operation that got
//! EAGAIN) gives the gate up first and keeps its folio lock (`Mapping::under_gate`); a handler
//! reads events holding nothing; from its first stop until it is done, a program thread about
//! to discard waits for it (at most 20 ms, on a futex, not a lock: mmap_changing.rs), so such a
//! thread holds nothing of ours either. The staging area raises no events: its slots are
//! discarded under any lock.

use zswap::lock_order::Class;
pub(crate) use zswap::lock_order::{
    assert_none_held, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard,
};

/// Held shared by each eviction, exclusively while reclaim is held off (a fork).
pub(crate) static RECLAIM_HOLD_OFF: Class = Class::new("reclaim hold-off", 0);
// The engine's folio locks: rank 10 (`zswap::lock_order::FOLIO`).
/// A chunk's read of the written bits (written_bits.rs), under a folio lock, over the gate.
pub(crate) static WRITTEN_READ: Class = Class::new("written bits' read", 15);
/// The event gate (mapping.rs).
pub(crate) static EVENT_GATE: Class = Class::new("event gate", 20);

/// The rank every part's lock shares: leaves.
const PART: u8 = 30;
/// A part's lock taken under another of its own (the LRU's active queue, under its FIFO).
const PART_INNER: u8 = 31;
pub(crate) static DEFERRED: Class = Class::new("deferred events", PART);
pub(crate) static DISCARDS: Class = Class::new("discards", PART);
pub(crate) static LRU: Class = Class::new("lru", PART);
pub(crate) static LRU_ACTIVE: Class = Class::new("lru's active queue", PART_INNER);
pub(crate) static UNEVICTABLE: Class = Class::new("unevictable ranges", PART);
pub(crate) static STAGED: Class = Class::new("staged folios", PART);
pub(crate) static READ_FAILURES: Class = Class::new("read failures", PART);
pub(crate) static READAHEAD: Class = Class::new("readahead queue", PART);
pub(crate) static SPARE: Class = Class::new("spare handler", PART);
pub(crate) static KSWAPD_SLEEPING: Class = Class::new("kswapd sleep", PART);
pub(crate) static RECLAIM_FREED: Class = Class::new("reclaim freed count", PART);
pub(crate) static RECLAIM_SLOTS: Class = Class::new("direct reclaim slots", PART);
pub(crate) static IN_THREAD_REGIONS: Class = Class::new("in-thread regions", PART);
pub(crate) static THREAD_HANDLES: Class = Class::new("thread handles", PART);
pub(crate) static LATENCY: Class = Class::new("latency histogram", PART);
pub(crate) static SHARED_FOLIOS: Class = Class::new("shared folios", PART);
pub(crate) static REGISTRATION: Class = Class::new("registration", PART);
