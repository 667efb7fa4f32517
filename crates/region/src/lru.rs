//! The region's LRU, the order reclaim takes folios in: the oldest first (FIFO, `fifo`),
//! except folios a sequential scan has passed, which go before them (drop-behind,
//! `inactive`; readahead.rs).
//! Both name a folio by its start and may hold stale entries (a folio queued again, or gone
//! since): reclaim checks what it pops under the folio lock.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

use parking_lot::Mutex;

use zswap::sparse::SparseArray;

use crate::folio_queue::FolioQueue;

/// Most folios queued for drop-behind at once: 16 MiB of 64 KiB folios. Past it the oldest
/// are forgotten (they stay in the FIFO); the queue is charged as metadata (charge.rs).
pub(crate) const INACTIVE_MAX: usize = 256;

/// The LRU of a region.
pub(crate) struct Lru {
    /// Folios in the order they came in.
    fifo: Mutex<FolioQueue>,
    /// Folios a sequential scan has passed, taken before those in `fifo`.
    inactive: Mutex<VecDeque<u32>>,
    /// Per folio, when it was last queued in `fifo` (`seq` then).
    queued_at: SparseArray<AtomicU32, 4096>,
    seq: AtomicU32,
    folio_pages: u32,
    /// Folios before this start are pinned (`RegionConfig::pinned`): never queued.
    pinned_end: u32,
}

/// A folio `Lru::pop_coldest` names.
pub(crate) struct Coldest {
    pub start: u32,
    /// From the drop-behind queue.
    pub behind: bool,
    /// Entries left in `fifo` behind it (0 for one from the drop-behind queue).
    pub queued: usize,
}

impl Lru {
    /// Empty queues for a region of `nr_folios` folios of `folio_pages` pages, the first
    /// `pinned_folios` of which are never reclaimed.
    pub fn new(folio_pages: u32, nr_folios: usize, pinned_folios: u32) -> Self {
        Lru {
            fifo: Mutex::new(FolioQueue::new(folio_pages, nr_folios)),
            inactive: Mutex::new(VecDeque::with_capacity(INACTIVE_MAX)),
            queued_at: SparseArray::new(nr_folios),
            seq: AtomicU32::new(0),
            folio_pages,
            pinned_end: pinned_folios * folio_pages,
        }
    }

    /// Queue the folio at `start` at the back of the FIFO (the youngest).
    pub fn queue(&self, start: u32) {
        if start < self.pinned_end {
            return;
        }
        let mut fifo = self.fifo.lock();
        let seq = self.seq.fetch_add(1, Relaxed);
        self.queued_at
            .entry((start / self.folio_pages) as usize)
            .store(seq, Relaxed);
        // Compacting: only the newest entry of a folio stays (folio_queue.rs).
        fifo.push_back(start, |_| true);
    }

    /// How long ago (in queueings) the folio at `start` was queued. Zero for one queued
    /// again between the two loads (it would otherwise wrap and look oldest).
    pub fn age(&self, start: u32) -> u32 {
        let now = self.seq.load(Relaxed);
        let queued_at = self
            .queued_at
            .get((start / self.folio_pages) as usize)
            .map_or(0, |q| q.load(Relaxed));
        let age = now.wrapping_sub(queued_at);
        if age > i32::MAX as u32 {
            0
        } else {
            age
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

    /// The next folio to try: from the drop-behind queue first, else the oldest in `fifo`.
    pub fn pop_coldest(&self) -> Option<Coldest> {
        if let Some(start) = self.inactive.lock().pop_front() {
            return Some(Coldest {
                start,
                behind: true,
                queued: 0,
            });
        }
        let mut fifo = self.fifo.lock();
        let start = fifo.pop_front()?;
        Some(Coldest {
            start,
            behind: false,
            queued: fifo.len(),
        })
    }

    /// Memory the FIFO and the queue times hold (the drop-behind queue is in the fixed
    /// charge).
    pub fn bytes(&self) -> u64 {
        self.fifo.lock().bytes() + self.queued_at.bytes()
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
    fn age_counts_queueings_since() {
        let q = Lru::new(1, 4, 0);
        q.queue(0);
        q.queue(1);
        q.queue(2);
        assert_eq!((q.age(0), q.age(1), q.age(2)), (3, 2, 1));
    }
}
