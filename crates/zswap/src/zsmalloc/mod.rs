//! zsmalloc: the size-class allocator for compressed objects of 1..=4096 bytes.
//!
//! The pool's memory is 4 KiB pages from an arena of anonymous mappings (`pages`). Objects live
//! in spans (the kernel's zspages, `span`): *class spans* of fixed slots, one of 255 size classes
//! each (`class`), kept in fullness groups (`fullness`); and *packed spans*, our addition, where
//! objects whose class has no free slot are appended back to back. Objects of 4081..=4096 bytes
//! take a page each (the huge class). A `Handle` indexes the handle table (`handle`), so
//! compaction (`compact`) can move objects without the caller noticing. `pool` holds the state
//! and the malloc/free/read paths.
//!
//! Why packed spans: with one partial span per class and ~130 classes in use, plain zsmalloc
//! wastes most of a span per class on small pools (density 0.30-0.43 on a 2048-page corpus
//! file); appending to a shared span and compacting into full class spans later gives ~0.99.
//!
//! Locking: one reader-writer lock over the whole state; every method takes it once, except
//! compaction, which takes it for one bounded step at a time. It is std's lock, whose waiter
//! spins briefly and then sleeps until the release wakes it. (parking_lot's waiter calls
//! `sched_yield` several times before it sleeps: with more runnable threads than CPUs, each
//! yield gives a faulting thread's CPU to a compressing thread for a time slice; BENCHMARKS.md,
//! `bench run`.) `read` copies the object out under it, so no caller ever holds a reference into
//! pool memory that compaction could move.
//! The sizes an owner polls (`total_size`, `charged_bytes`, `metadata_bytes`) are published
//! to atomics by every change before it gives the lock up, and read without it.

mod class;
mod compact;
mod fullness;
mod handle;
mod pages;
mod pool;
mod span;
#[cfg(test)]
pub(crate) mod tests;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use pool::PoolState;

/// Slack a pool keeps uncompacted past its proportional share (`ZsPool::compact_if_fragmented`),
/// by default and for a pool serving 256 MiB or more.
const SLACK_FLOOR: u64 = 1 << 20;
/// The least of it, however small the memory served: a pool is not compacted after every
/// free.
const SLACK_FLOOR_MIN: u64 = 64 << 10;

/// An opaque object handle. Stable for the object's life: compaction moves objects but never
/// changes their handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Handle(u32);

impl Handle {
    /// The handle as a plain number, to keep in a page's state word.
    pub fn to_raw(self) -> u32 {
        self.0
    }
    /// The handle whose `to_raw` gave `raw`.
    pub fn from_raw(raw: u32) -> Self {
        Handle(raw)
    }
}

/// Why an object could not be allocated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    /// The object is empty or larger than a page (bytes).
    #[error("object size {0} is outside 1..=4096")]
    BadSize(usize),
    /// The pool is at the page cap `set_max_pages` set.
    #[error("the pool is at its page limit")]
    PoolFull,
    /// Mapping more memory for the pool's arena failed (the OS's message).
    #[error("the pool could not get memory: {0}")]
    NoMemory(String),
}

/// What one compaction did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactStats {
    /// Objects copied to another place in the pool.
    pub objects_moved: u64,
    /// Net pages the pool holds fewer after the compaction than before.
    pub pages_freed: u64,
}

/// The compressed pool: zsmalloc's size-class allocator (see the module documentation).
#[derive(Debug)]
pub struct ZsPool {
    /// Readers (loads) share it and may decompress straight from the pool's pages; anything
    /// that changes the pool (malloc, free, compaction, which moves objects) takes it alone.
    state: RwLock<PoolState>,
    /// The sizes as the last change left them. A region reads them for its limit on every
    /// fault and reclaim step, and the limits on every store: read under the lock, they would
    /// wait behind every store and compaction step, on every fault (DESIGN.md section 6).
    sizes: Sizes,
}

#[derive(Debug, Default)]
struct Sizes {
    total: AtomicU64,
    charged: AtomicU64,
    metadata: AtomicU64,
}

impl Default for ZsPool {
    fn default() -> Self {
        let pool = ZsPool {
            state: RwLock::new(PoolState::default()),
            sizes: Sizes::default(),
        };
        pool.publish(&pool.shared());
        pool
    }
}

impl ZsPool {
    /// The state, shared. (Poisoning is ignored: a panic in the pool is a bug, not a state
    /// to recover from.)
    pub(crate) fn shared(&self) -> RwLockReadGuard<'_, PoolState> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }
    /// The state, alone.
    pub(crate) fn exclusive(&self) -> RwLockWriteGuard<'_, PoolState> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }
    /// An empty pool, without a page cap.
    pub fn new() -> Self {
        Self::default()
    }
    /// Publish the sizes of `state`, held write-locked by a change (or read-locked: the
    /// sizes cannot change meanwhile).
    fn publish(&self, state: &PoolState) {
        let total = state.total_size();
        let reserved =
            (state.reserved_pages() + state.compact_headroom()) * crate::PAGE_SIZE as u64;
        self.sizes.total.store(total, Relaxed);
        self.sizes.charged.store(total + reserved, Relaxed);
        self.sizes.metadata.store(state.metadata_bytes(), Relaxed);
    }
    /// Allocate an object of `data.len()` bytes (1..=4096) and copy `data` into it.
    pub fn malloc(&self, data: &[u8]) -> Result<Handle, AllocError> {
        let mut state = self.exclusive();
        let r = state.malloc(data).map(Handle);
        self.publish(&state);
        r
    }
    /// `malloc` of each object in turn under one taking of the lock (a store's pages: one
    /// lock a batch rather than a page), the handles pushed to `handles` in order. The first
    /// failure stops it and is returned; the objects allocated before it stay allocated, their
    /// handles in `handles`.
    pub fn malloc_many<'a>(
        &self,
        objects: impl IntoIterator<Item = &'a [u8]>,
        handles: &mut Vec<Handle>,
    ) -> Result<(), AllocError> {
        let mut state = self.exclusive();
        let r = objects
            .into_iter()
            .try_for_each(|data| state.malloc(data).map(|h| handles.push(Handle(h))));
        self.publish(&state);
        r
    }
    /// Copy the object into `out` (at least 4096 bytes); returns its length.
    ///
    /// Panics if `handle` is not allocated or `out` is shorter than the object.
    pub fn read(&self, handle: Handle, out: &mut [u8]) -> usize {
        self.shared().read(handle.0, out)
    }
    /// Run `f` on the object's bytes: in place when they lie in one page (no copy), else
    /// copied into `scratch` (at least 4096 bytes). The pool is read-locked meanwhile, so the
    /// object cannot move or go.
    pub fn with_object<R>(
        &self,
        handle: Handle,
        scratch: &mut [u8],
        f: impl FnOnce(&[u8]) -> R,
    ) -> R {
        let state = self.shared();
        match state.object_in_place(handle.0) {
            Some(bytes) => f(bytes),
            None => {
                let n = state.read(handle.0, scratch);
                f(&scratch[..n])
            }
        }
    }
    /// Length of the object in bytes.
    pub fn obj_len(&self, handle: Handle) -> usize {
        self.shared().obj_len(handle.0)
    }
    /// Free the object; returns its length. Panics if `handle` is not allocated (a double
    /// free).
    pub fn free(&self, handle: Handle) -> usize {
        let mut state = self.exclusive();
        let n = state.free(handle.0);
        self.publish(&state);
        n
    }
    /// One compaction step, the sizes published after it (tests that step by hand).
    #[cfg(test)]
    pub(crate) fn compact_step(&self, budget: u64) -> (u64, bool) {
        let mut state = self.exclusive();
        let r = state.compact_step(budget);
        self.publish(&state);
        r
    }
    /// Compact the pool, in steps of a bounded number of moves with the lock given up in
    /// between (and a yield, to let any waiting load or store in), as the kernel's zs_compact
    /// gives up its lock between zspages.
    pub fn compact(&self) -> CompactStats {
        let mut state = self.exclusive();
        let pages_before = state.arena.nr_used();
        // Under churn there is always more to do (every free may leave its class a span too
        // many): stop after about as many moves as the pool holds objects, what one pass over
        // a still pool moves at most.
        let max_steps = state.nr_objects / compact::STEP_BUDGET + 2;
        let mut objects_moved = 0;
        for step in 1..=max_steps {
            let (moved, done) = state.compact_step(compact::STEP_BUDGET);
            objects_moved += moved;
            if done {
                break;
            }
            if step == max_steps {
                // Not done (churn), but ended all the same.
                state.compact_end(false);
                break;
            }
            self.publish(&state);
            // The lock is not handed over on release: taken straight back, it would keep
            // waiting loads out for the whole compaction. The yield lets them in first.
            drop(state);
            std::thread::yield_now();
            state = self.exclusive();
        }
        self.publish(&state);
        CompactStats {
            objects_moved,
            pages_freed: pages_before.saturating_sub(state.arena.nr_used()),
        }
    }
    /// Compact if the pool's pages hold much more than its objects: more than an eighth
    /// over, and more (in proportion) than the slack the last finished compaction could not
    /// remove, by 1 MiB or the served memory's share (`set_served_memory`; without such a
    /// floor, a pool whose slack compaction cannot take would be scanned again after every
    /// free).
    /// Returns what the compaction did, if it ran.
    pub fn compact_if_fragmented(&self) -> Option<CompactStats> {
        let fragmented = {
            let state = self.shared();
            let slack = state.total_size().saturating_sub(state.stored_bytes);
            let per_mille = state.slack_after_compaction.max(125);
            slack > state.stored_bytes * per_mille / 1000 + state.slack_floor
        };
        fragmented.then(|| self.compact())
    }
    /// Give back the pages the pool keeps beyond its objects' (the reserve of freed pages, an
    /// empty open span), and with them the compaction headroom of a pool left empty; true if
    /// its charge went down. Moves no object: cheap where `compact` would scan the pool, for
    /// an owner over its limit with nothing else to free.
    pub fn give_back_kept(&self) -> bool {
        let mut state = self.exclusive();
        let before = self.sizes.charged.load(Relaxed);
        state.give_back_kept();
        self.publish(&state);
        self.sizes.charged.load(Relaxed) < before
    }
    /// Bytes of memory the pool holds (pages in spans × 4096): the kernel's pool_total_size.
    pub fn total_size(&self) -> u64 {
        self.sizes.total.load(Relaxed)
    }
    /// Bytes beyond `total_size` the pool may hold resident, for its owner to charge: the
    /// freed pages it keeps for reuse (given back by `compact`), and the headroom a
    /// compaction step may run into before the spans it empties are freed (compact.rs:
    /// up to 128 KiB, less for a pool of fewer pages, none for an empty one).
    pub fn reserved_bytes(&self) -> u64 {
        let state = self.shared();
        (state.reserved_pages() + state.compact_headroom()) * crate::PAGE_SIZE as u64
    }
    /// `total_size() + reserved_bytes()` as the last change left them: what an owner charges.
    pub fn charged_bytes(&self) -> u64 {
        self.sizes.charged.load(Relaxed)
    }
    /// Sum of the lengths of the live objects.
    pub fn stored_bytes(&self) -> u64 {
        self.shared().stored_bytes
    }
    /// Number of live objects.
    pub fn nr_objects(&self) -> u64 {
        self.shared().nr_objects
    }
    /// Bytes of heap metadata the pool keeps (handle table, span descriptors, class lists,
    /// chunk table).
    pub fn metadata_bytes(&self) -> u64 {
        self.sizes.metadata.load(Relaxed)
    }
    /// Size the pool's allowances to the memory it serves (its owner's limit), since its owner
    /// charges them: the freed pages kept resident for reuse (`reserved_bytes`) and the slack
    /// left uncompacted (`compact_if_fragmented`) are each 1/256 of it, at most 4 MiB and
    /// 1 MiB (and the slack at least 64 KiB). A pool of a 128 MiB region keeps 512 KiB of each, not 4 and 1: pages
    /// the region's data could use (churn in a smaller pool is smaller too). Those past the
    /// new reserve are given back now.
    pub fn set_served_memory(&self, bytes: u64) {
        let share = bytes / 256;
        let mut state = self.exclusive();
        state.set_reserve_max(
            usize::try_from(share / crate::PAGE_SIZE as u64).unwrap_or(usize::MAX),
        );
        state.slack_floor = share.clamp(SLACK_FLOOR_MIN, SLACK_FLOOR);
        self.publish(&state);
    }
    /// Cap the pool at this many pages (None: no cap). Allocation past it fails with PoolFull.
    /// Lowering the cap below what the pool holds frees nothing; it only stops growth.
    pub fn set_max_pages(&self, max: Option<u64>) {
        let mut state = self.exclusive();
        state.set_max_pages(max);
        self.publish(&state);
    }
    /// Check the pool's internal invariants (every page, span, slot and handle accounted for
    /// exactly once); returns a description of the first one broken. For tests and debugging.
    pub fn check_consistency(&self) -> Result<(), String> {
        self.shared().check_consistency()
    }
}
