//! The shrinker: writes the coldest pool pages back to the backing device.
//!
//! Cold order is a CLOCK over each group's pages (the second-chance algorithm): a store sets
//! the page's referenced bit, the hand's first visit clears it, the second writes the folio
//! back. A page stored as-is gets no referenced bit (store.rs): it saves no memory by staying,
//! and writing it back frees a whole page of pool with no decompression. Because loads are exclusive, a page in the pool is never accessed while it is there,
//! so store order is LRU order and the clock gives every page between one and two turns of
//! the hand, with no list links to keep per page and no global LRU lock.
//!
//! Like the kernel's shrinker the hand stops when it meets a folio someone else owns (the
//! `-EEXIST` of `zswap_writeback_entry`: a fault is bringing it in, so the hand has reached
//! warm pages). What it reads without the lock is only a hint: under the folio's lock the
//! entry is checked again, generation (shadow) included, before anything is written.
//!
//! Three entry points, as in the kernel: `ZswapGroup::shrink` (a group over its
//! `zswap_max`), `Zswap::shrink_worker_run` (the pool over `max_pool_percent`, down to the
//! accept threshold) and `Zswap::shrinker_scan` (memory pressure, when `shrinker_enabled`).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use crate::stats::Stats;
use crate::swap::cache::{FolioLock, Kind};
use crate::swap::segments::SEGMENT_BYTES;

use super::{Shared, Zswap, ZswapGroup};

/// Failed rounds after which the shrink worker gives up (MAX_RECLAIM_RETRIES).
const MAX_RECLAIM_RETRIES: u32 = 16;
/// Pages a worker round asks of one group (SWAP_CLUSTER_MAX).
const SWAP_CLUSTER_MAX: u32 = 32;

/// What one shrink pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShrinkResult {
    /// Pages that left the pool.
    pub written: u32,
    /// The hand stopped at a folio someone else owns.
    pub busy: bool,
    /// A write to the backing device failed.
    pub write_error: bool,
}

/// Where the clock hand stopped.
pub(crate) enum Cold<'a> {
    /// A folio due for writeback, locked and checked: its pool pages are the group's coldest.
    Folio(FolioLock<'a>),
    /// A folio someone else owns (a fault is bringing it in): the hand has reached warm pages.
    Busy,
    /// The hand went as far as it was allowed.
    Done,
}

impl ZswapGroup {
    /// Move the clock `hand` on to the next folio due for writeback, `scanned` counting the
    /// pages passed, up to `limit`. A folio with a referenced page has its bits cleared and
    /// is passed (second chance); the one found is locked with try_lock and checked again
    /// under its lock (the same entry, generation included, still in the pool).
    pub(crate) fn next_cold(&self, hand: &mut u32, scanned: &mut u64, limit: u64) -> Cold<'_> {
        let nr_pages = self.nr_pages();
        while *scanned < limit {
            let at = *hand % nr_pages;
            // Pages whose words were never allocated are Empty: the hand passes them at once.
            let Some(off) = self.cache.next_populated(at) else {
                *scanned += u64::from(nr_pages - at);
                *hand = 0;
                continue;
            };
            *scanned += u64::from(off - at);
            let hint = self.cache.peek(off);
            let head = off & !((1u32 << hint.order) - 1);
            let next = head + (1u32 << hint.order);
            *hand = if next >= nr_pages { 0 } else { next };
            *scanned += u64::from(next - off);

            let mut candidate = None;
            let mut referenced = false;
            for p in head..next {
                let st = self.cache.peek(p);
                if st.kind == Kind::Stored {
                    if st.referenced {
                        referenced |= self.cache.clear_referenced(p);
                    } else if candidate.is_none() {
                        candidate = Some((p, st.shadow));
                    }
                }
            }
            if referenced {
                continue; // second chance for the whole folio
            }
            let Some((page, shadow)) = candidate else {
                continue;
            };
            let Ok(folio) = self.cache.try_lock_page(page) else {
                Stats::inc(&self.shared.stats.writeback_busy_stop);
                return Cold::Busy;
            };
            let st = folio.state(page);
            if st.kind == Kind::Stored && st.shadow == shadow {
                return Cold::Folio(folio);
            }
        }
        Cold::Done
    }

    /// Write back up to about `nr_to_write` of this group's coldest pool pages.
    pub fn shrink(&self, nr_to_write: u32) -> ShrinkResult {
        let mut result = ShrinkResult::default();
        let nr_pages = self.nr_pages();
        if !self.writeback_allowed() || nr_pages == 0 || self.zswapped.load(Relaxed) == 0 {
            return result;
        }
        let segments = self
            .shared
            .swap
            .as_ref()
            .is_some_and(|swap| swap.segments().is_some());
        // Folios held for one write: their locks are taken with try_lock only, so holding
        // several never waits on anyone.
        let mut batch: Vec<FolioLock> = Vec::new();
        let (mut batch_bytes, mut batch_pages) = (0usize, 0u32);
        let mut scanned = 0u64;
        // Two turns: the first may only clear referenced bits.
        let limit = 2 * u64::from(nr_pages);
        while result.written + batch_pages < nr_to_write {
            // The hand is held while it moves, never across a write: a store that found the
            // pool full takes folios from it meanwhile (writeback.rs, `cold_folios`).
            let cold = self.next_cold(&mut self.hand.lock(), &mut scanned, limit);
            let folio = match cold {
                Cold::Folio(folio) => folio,
                Cold::Busy => {
                    result.busy = true;
                    break;
                }
                Cold::Done => break,
            };
            let bytes = self.stored_length(&folio) as usize;
            // The pool bytes expected to fill a segment, as of the last batch written.
            let fill = self.pool_bytes_for(SEGMENT_BYTES);
            // Segments: a batch is what fills one segment without spilling into the next
            // (a folio that would spill starts the next batch), by the pool's bytes and, when
            // objects are re-encoded, what that made of recent batches: a batch that
            // re-encodes worse than those spills a little.
            if segments && !batch.is_empty() && batch_bytes + bytes > fill {
                if !self.write_batch(&mut batch, &mut result) {
                    break;
                }
                (batch_bytes, batch_pages) = (0, 0);
            }
            batch_bytes += bytes;
            batch_pages += folio.nr_pages();
            batch.push(folio);
            if !segments || batch_bytes >= fill || result.written + batch_pages >= nr_to_write {
                if !self.write_batch(&mut batch, &mut result) {
                    break;
                }
                (batch_bytes, batch_pages) = (0, 0);
            }
        }
        if !batch.is_empty() {
            self.write_batch(&mut batch, &mut result);
        }
        if segments && result.written > 0 {
            // What writeback freed in old segments is rewritten a segment a batch.
            let _ = self.shared.swap.as_ref().map(|swap| swap.compact());
        }
        result
    }

    /// Write back the held folios of `batch` and let them go (with segments, before the
    /// write: writeback.rs, `writeback_released`). False if the write failed.
    fn write_batch(&self, batch: &mut Vec<FolioLock>, result: &mut ShrinkResult) -> bool {
        let segments = self
            .shared
            .swap
            .as_ref()
            .is_some_and(|swap| swap.segments().is_some());
        let (written, outcome) = match segments {
            true => self.writeback_released(std::mem::take(batch)),
            false => {
                let r = self.writeback_folios(batch);
                batch.clear();
                r
            }
        };
        result.written += written;
        // Counted by writeback; retried on a later pass.
        result.write_error |= outcome.is_err();
        outcome.is_ok()
    }
}

impl Shared {
    pub(crate) fn live_groups(&self) -> Vec<Arc<ZswapGroup>> {
        self.groups
            .lock()
            .iter()
            .filter_map(|g| g.upgrade())
            .collect()
    }

    pub(crate) fn queue_shrink_work(&self) {
        if self.worker.started.load(Relaxed) {
            self.worker.state.lock().pending = true;
            self.worker.wake.notify_one();
        }
    }
}

impl Zswap {
    /// The shrink worker's job (`shrink_worker`): write back, group by group in turn, until
    /// the pool is at or below the accept threshold; give up after MAX_RECLAIM_RETRIES rounds
    /// that freed nothing. Then compact the pool. Returns pages written back.
    pub fn shrink_worker_run(&self) -> u64 {
        let s = self.shared();
        let mut written = 0u64;
        let mut failures = 0;
        while s.above_accept_threshold() && failures < MAX_RECLAIM_RETRIES {
            let groups = s.live_groups();
            if groups.is_empty() {
                break;
            }
            let g = &groups[s.next_group.fetch_add(1, Relaxed) % groups.len()];
            let r = g.shrink(SWAP_CLUSTER_MAX);
            written += u64::from(r.written);
            if r.written == 0 {
                failures += 1;
            }
            if r.written > 0 && !s.above_accept_threshold() {
                break;
            }
            // Writeback frees objects here and there; give the pages back.
            s.pool.compact_if_fragmented();
        }
        s.pool.compact();
        written
    }

    /// The memory-pressure shrinker ("mm-zswap"): write back up to `nr` pages, spread over
    /// the groups, if `shrinker_enabled`. Returns pages written back.
    pub fn shrinker_scan(&self, nr: u32) -> u64 {
        let s = self.shared();
        if !s.params.shrinker_enabled() {
            return 0;
        }
        let groups = s.live_groups();
        let mut written = 0u64;
        for _ in 0..groups.len() {
            if written >= u64::from(nr) {
                break;
            }
            let g = &groups[s.next_group.fetch_add(1, Relaxed) % groups.len()];
            written += u64::from(g.shrink(nr - written as u32).written);
        }
        written
    }

    /// Start the "zswap-shrink" worker thread: it runs `shrink_worker_run` whenever a store
    /// finds the pool full. It ends when the last handle to this zswap is dropped, which
    /// waits for it.
    pub fn start_shrink_worker(&self) {
        let s = self.shared();
        if s.worker.started.swap(true, Relaxed) {
            return;
        }
        let weak = Arc::downgrade(s);
        let work = s.worker.clone();
        let thread = std::thread::Builder::new()
            .name("zswap-shrink".into())
            .spawn(move || loop {
                {
                    let mut state = work.state.lock();
                    while !state.pending && !state.stopped {
                        work.wake.wait(&mut state);
                    }
                    if state.stopped {
                        return;
                    }
                    state.pending = false;
                }
                let Some(shared) = weak.upgrade() else { return };
                let zswap = Zswap { shared };
                zswap.shrink_worker_run();
                let scratch = crate::swap::segments::thread_scratch_bytes();
                work.segment_scratch.store(scratch, Relaxed);
            })
            .expect("spawning the shrink worker");
        *s.worker.thread.lock() = Some(thread);
    }

    /// Whether stores are refused for the pool limit right now.
    pub fn pool_full(&self) -> bool {
        self.shared().is_full()
    }
}
