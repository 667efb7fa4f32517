//! The region's LRU, the order reclaim takes folios in: the oldest first (FIFO, `fifo`),
//! except folios a sequential scan has passed, which go before them (drop-behind, `inactive`;
//! readahead.rs), and before those, folios reclaim met at the FIFO's head shared with a
//! forked child and has made the region's own since (`next`, shared_folios.rs). Folios activated by a near refault (workingset.rs) or by a fault that took
//! them back from staging (swapin.rs) wait in an active queue of their own, which reclaim does
//! not take from: it is kept no longer than the FIFO by moving its oldest folios to the FIFO's
//! young end (as mm keeps its active list from outgrowing the inactive one), where they have
//! one more trip before they can go. The queues name a folio by its start and may hold stale
//! entries (a folio queued again, or gone since): reclaim checks what it pops under the folio
//! lock.
//!
//! Whether a folio at the FIFO's head was written since reclaim last asked, the LRU keeps
//! from the page tables (written_bits.rs); reclaim asks (reclaim.rs, `referenced`).

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

use crate::lock_order::{self, Mutex};

use zswap::sparse::{SparseArray, SparseBitmap};

use crate::folio_queue::FolioQueue;
use crate::written_bits::WrittenBits;

/// Most folios queued for drop-behind at once: 16 MiB of 64 KiB folios. Past it the oldest
/// are forgotten (they stay in the FIFO); the queue is charged as metadata (charge.rs).
pub(crate) const INACTIVE_MAX: usize = 256;

/// Most folios queued to be tried next at once (`reclaim_next`); past it the oldest are
/// forgotten (they stay in the FIFO). Charged with the drop-behind queue.
pub(crate) const NEXT_MAX: usize = 256;

/// The LRU of a region.
pub(crate) struct Lru {
    /// Folios in the order they came in.
    fifo: Mutex<FolioQueue>,
    /// Folios a sequential scan has passed, taken before those in `fifo`.
    inactive: Mutex<VecDeque<u32>>,
    /// Folios reclaim could not take for a reason gone since (shared with a forked child,
    /// unshared since: `reclaim_next`), each with `seq` when it was named: taken before all
    /// others, as the kernel rotates a folio it marked for reclaim to its inactive list's
    /// tail once its writeback is done.
    next: Mutex<VecDeque<(u32, u32)>>,
    /// Active folios, oldest first (locked after `fifo`).
    active: Mutex<FolioQueue>,
    /// One bit a folio: it is active (its entries in `fifo` and `inactive` are stale).
    is_active: SparseBitmap<512>,
    /// Per folio, when it was last queued in `fifo` (`seq` then).
    queued_at: SparseArray<AtomicU32, 4096>,
    seq: AtomicU32,
    folio_pages: u32,
    /// Folios before this start are pinned (`RegionConfig::pinned`): never queued.
    pinned_end: u32,
    /// Which folios were written since reclaim last asked (`Policies::referenced_writes`).
    written: WrittenBits,
}

/// A folio `Lru::pop_coldest` names.
pub(crate) struct Coldest {
    pub start: u32,
    /// From the drop-behind queue.
    pub behind: bool,
    /// From the queue of folios to try next (`reclaim_next`): old, whatever its queue time.
    pub next: bool,
    /// Entries left in the queues behind it, the active one's included (0 for one from the
    /// drop-behind queue or the queue to try next).
    pub queued: usize,
}

impl Lru {
    /// Empty queues for a region of `nr_folios` folios of `folio_pages` pages, the first
    /// `pinned_folios` of which are never reclaimed.
    pub fn new(folio_pages: u32, nr_folios: usize, pinned_folios: u32) -> Self {
        Lru {
            fifo: Mutex::new(&lock_order::LRU, FolioQueue::new(folio_pages, nr_folios)),
            inactive: Mutex::new(&lock_order::LRU, VecDeque::with_capacity(INACTIVE_MAX)),
            next: Mutex::new(&lock_order::LRU, VecDeque::with_capacity(NEXT_MAX)),
            active: Mutex::new(
                &lock_order::LRU_ACTIVE,
                FolioQueue::new(folio_pages, nr_folios),
            ),
            is_active: SparseBitmap::new(nr_folios),
            queued_at: SparseArray::new(nr_folios),
            seq: AtomicU32::new(0),
            folio_pages,
            pinned_end: pinned_folios * folio_pages,
            written: WrittenBits::new(folio_pages, nr_folios),
        }
    }

    fn folio(&self, start: u32) -> usize {
        (start / self.folio_pages) as usize
    }

    /// Queue the folio at `start` at the back of the FIFO (the youngest), or of the active
    /// queue if it is active.
    pub fn queue(&self, start: u32) {
        if start < self.pinned_end {
            return;
        }
        let mut fifo = self.fifo.lock();
        if self.is_active.test(self.folio(start)) {
            let mut active = self.active.lock();
            active.push_back(start, |s| self.is_active.test(self.folio(s)));
            return;
        }
        let seq = self.seq.fetch_add(1, Relaxed);
        self.queued_at.entry(self.folio(start)).store(seq, Relaxed);
        // Compacting: only the newest entry of a folio stays (folio_queue.rs).
        fifo.push_back(start, |_| true);
    }

    /// How long ago (in queueings) the folio at `start` was queued in the FIFO: how cold it
    /// is. Zero for an active folio, which is out of reclaim's reach (batch eviction takes
    /// neighbours by their age), and for one queued again between the two loads (it would
    /// otherwise wrap and look oldest).
    pub fn age(&self, start: u32) -> u32 {
        if self.is_active.test(self.folio(start)) {
            return 0;
        }
        let now = self.seq.load(Relaxed);
        let queued_at = self
            .queued_at
            .get(self.folio(start))
            .map_or(0, |q| q.load(Relaxed));
        let age = now.wrapping_sub(queued_at);
        if age > i32::MAX as u32 {
            0
        } else {
            age
        }
    }

    /// A point in the FIFO's time (folios queued so far), for `queued_since`.
    pub fn now(&self) -> u32 {
        self.seq.load(Relaxed)
    }

    /// Whether the folio at `start` was last queued in the FIFO at or after `since` (a
    /// `now`).
    pub fn queued_since(&self, start: u32, since: u32) -> bool {
        let queued_at = self
            .queued_at
            .get(self.folio(start))
            .map_or(0, |q| q.load(Relaxed));
        queued_at.wrapping_sub(since) <= i32::MAX as u32
    }

    /// Whether the folio at `start` (locked, named by `pop_coldest`) was written since
    /// reclaim last asked (written_bits.rs); `read` reads a chunk's written runs.
    /// Pinned folios are left out of the reads: their pages are never re-armed.
    pub fn take_written(&self, start: u32, read: impl FnOnce(u32, u32) -> Vec<Range<u32>>) -> bool {
        let pinned_end = self.pinned_end;
        let unpinned = |first: u32, n: u32| {
            let from = first.max(pinned_end);
            match from < first + n {
                true => read(from, first + n - from),
                false => Vec::new(),
            }
        };
        self.written
            .take(start, self.age(start), self.now(), unpinned)
    }

    /// Put the folio at `start`, which `pop_coldest` named, back at the FIFO's young end as
    /// it was, its queue time kept: kswapd found it too young to take (reclaim.rs).
    pub fn put_back(&self, start: u32) {
        let mut fifo = self.fifo.lock();
        if !self.is_active.test(self.folio(start)) {
            fifo.push_back(start, |_| true);
        }
    }

    /// Whether the folio at `start` is active (out of reclaim's reach: an entry that named it
    /// in the FIFO is stale).
    pub fn is_active(&self, start: u32) -> bool {
        self.is_active.test(self.folio(start))
    }

    /// The folio at `start` came back within the working set (workingset.rs): it moves to
    /// the active queue, out of reclaim's reach until the queue's aging moves it back.
    pub fn activate(&self, start: u32) {
        if start < self.pinned_end {
            return;
        }
        let _fifo = self.fifo.lock();
        let mut active = self.active.lock();
        self.is_active.assign(self.folio(start), true);
        active.push_back(start, |s| self.is_active.test(self.folio(s)));
    }

    /// The folio at `start` was discarded: it is not active any more (its entries go stale),
    /// nor written.
    pub fn forget(&self, start: u32) {
        self.is_active.assign(self.folio(start), false);
        self.written.forget(start);
    }

    /// Keep the active queue no longer than the FIFO: its oldest folios move to the FIFO's
    /// young end, no longer active. Both locks held.
    fn age_active(&self, fifo: &mut FolioQueue, active: &mut FolioQueue) {
        while active.len() > fifo.len() {
            let Some(start) = active.pop_front() else {
                return;
            };
            if self.is_active.assign(self.folio(start), false) {
                let seq = self.seq.fetch_add(1, Relaxed);
                self.queued_at.entry(self.folio(start)).store(seq, Relaxed);
                fifo.push_back(start, |_| true);
            }
        }
    }

    /// A sequential scan has passed these folios: they go before the oldest ones.
    pub fn drop_behind(&self, starts: impl Iterator<Item = u32>) {
        let mut inactive = self.inactive.lock();
        for start in starts.filter(|&s| s >= self.pinned_end) {
            if inactive.len() == INACTIVE_MAX {
                inactive.pop_front();
            }
            inactive.push_back(start);
        }
    }

    /// Reclaim could not take the folios holding these pages (shared with a forked child,
    /// since made the region's own: shared_folios.rs): they are tried before all others,
    /// unless one is queued again meanwhile (it left and came back in: that entry is stale).
    pub fn reclaim_next(&self, pages: impl Iterator<Item = u32>) {
        let now = self.seq.load(Relaxed);
        let mut next = self.next.lock();
        for start in pages.map(|p| p - p % self.folio_pages) {
            // (Pages of one folio found one by one name it once.)
            if start < self.pinned_end || next.back().is_some_and(|&(s, _)| s == start) {
                continue;
            }
            if next.len() == NEXT_MAX {
                next.pop_front();
            }
            next.push_back((start, now));
        }
    }

    /// How many more folios `reclaim_next` can queue before it forgets the oldest.
    pub fn next_room(&self) -> usize {
        NEXT_MAX - self.next.lock().len()
    }

    /// The next folio to try: one to try next (`reclaim_next`) first, then one from the
    /// drop-behind queue, else the oldest in `fifo`. An active folio is never named (its
    /// entries here are stale).
    pub fn pop_coldest(&self) -> Option<Coldest> {
        loop {
            let Some((start, named)) = self.next.lock().pop_front() else {
                break;
            };
            if !self.is_active.test(self.folio(start)) && !self.queued_since(start, named) {
                return Some(Coldest {
                    start,
                    behind: false,
                    next: true,
                    queued: 0,
                });
            }
        }
        loop {
            let Some(start) = self.inactive.lock().pop_front() else {
                break;
            };
            if !self.is_active.test(self.folio(start)) {
                return Some(Coldest {
                    start,
                    behind: true,
                    next: false,
                    queued: 0,
                });
            }
        }
        let mut fifo = self.fifo.lock();
        let mut active = self.active.lock();
        loop {
            self.age_active(&mut fifo, &mut active);
            let start = match fifo.pop_front() {
                Some(s) => s,
                // Only active folios are left: the oldest of them goes back.
                None => {
                    let s = active.pop_front()?;
                    self.is_active.assign(self.folio(s), false);
                    s
                }
            };
            if !self.is_active.test(self.folio(start)) {
                return Some(Coldest {
                    start,
                    behind: false,
                    next: false,
                    queued: fifo.len() + active.len(),
                });
            }
        }
    }

    /// Memory the FIFO and the queue times hold (the drop-behind queue and the queue to try
    /// next are in the fixed charge).
    pub fn bytes(&self) -> u64 {
        self.fifo.lock().bytes()
            + self.active.lock().bytes()
            + self.is_active.bytes()
            + self.queued_at.bytes()
            + self.written.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropped_behind_folios_go_first_then_the_oldest() {
        let q = Lru::new(16, 8, 0);
        q.queue(0);
        q.queue(16);
        q.drop_behind([32u32, 48].into_iter());
        let order: Vec<(u32, bool)> = std::iter::from_fn(|| q.pop_coldest())
            .map(|c| (c.start, c.behind))
            .collect();
        assert_eq!(order, [(32, true), (48, true), (0, false), (16, false)]);
    }

    #[test]
    fn folios_to_try_next_go_before_all_others_but_active_or_requeued_ones() {
        let q = Lru::new(16, 8, 1);
        q.queue(16);
        q.queue(32);
        q.drop_behind([48u32].into_iter());
        // A pinned folio is never named; an active one's entry is stale. As reclaim does:
        // the folio requeued, then named (fresh). Pages name their folios, once; one queued
        // again since it was named is stale.
        q.queue(64);
        q.reclaim_next([0u32, 64 + 5, 64 + 6, 80, 96].into_iter());
        q.activate(80);
        q.queue(96);
        let order: Vec<(u32, bool, bool)> = std::iter::from_fn(|| q.pop_coldest())
            .map(|c| (c.start, c.next, c.behind))
            .collect();
        assert_eq!(
            order,
            [
                (64, true, false),
                (48, false, true),
                (16, false, false),
                (32, false, false),
                (64, false, false),
                (96, false, false),
                (80, false, false)
            ]
        );
    }

    #[test]
    fn a_folio_put_back_keeps_its_queue_time() {
        let q = Lru::new(1, 8, 0);
        q.queue(0);
        let horizon = q.now();
        q.queue(1);
        assert!(!q.queued_since(0, horizon));
        assert!(q.queued_since(1, horizon));
        // Named and put back (as kswapd puts back a folio too young for it): it goes behind
        // folio 1 in the queue, but it is as old as it was.
        let coldest = q.pop_coldest().unwrap().start;
        assert_eq!(coldest, 0);
        q.put_back(coldest);
        assert!(!q.queued_since(0, horizon) && q.queued_since(1, horizon));
        let order: Vec<u32> = std::iter::from_fn(|| q.pop_coldest())
            .map(|c| c.start)
            .collect();
        assert_eq!(order, [1, 0]);
    }

    #[test]
    fn pinned_folios_are_never_queued() {
        let q = Lru::new(16, 8, 2);
        q.queue(0);
        q.queue(16);
        q.queue(32);
        q.drop_behind([16u32, 48].into_iter());
        let order: Vec<u32> = std::iter::from_fn(|| q.pop_coldest())
            .map(|c| c.start)
            .collect();
        assert_eq!(order, [48, 32]);
    }

    #[test]
    fn an_active_folio_goes_last_once_aged_into_the_fifo() {
        let q = Lru::new(1, 8, 0);
        for s in 0..4 {
            q.queue(s);
        }
        q.activate(0);
        // Queued again while active: it stays in the active queue.
        q.queue(0);
        let order: Vec<u32> = std::iter::from_fn(|| q.pop_coldest())
            .map(|c| c.start)
            .collect();
        assert_eq!(order, [1, 2, 3, 0]);
        // A discarded folio is active no more.
        q.queue(5);
        q.activate(4);
        q.forget(4);
        q.queue(4);
        let order: Vec<u32> = std::iter::from_fn(|| q.pop_coldest())
            .map(|c| c.start)
            .collect();
        assert_eq!(order, [5, 4]);
    }

    #[test]
    fn age_counts_queueings_since() {
        let q = Lru::new(1, 4, 0);
        q.queue(0);
        q.queue(1);
        q.queue(2);
        assert_eq!((q.age(0), q.age(1), q.age(2)), (3, 2, 1));
        // Activated, the oldest is not cold any more: batch eviction does not take it as a
        // cold neighbour.
        q.activate(0);
        assert_eq!(q.age(0), 0);
    }
}
