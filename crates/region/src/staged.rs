//! Staged folios: folios recently evicted, kept uncompressed in staging after their store,
//! for a while. A fault that finds its folio here moves it straight back, with
//! no decompression: the second chance that the kernel's referenced bit gives, and the only
//! access signal userspace gets for free. The engine holds a stored copy of every folio here,
//! so dropping an entry (oldest first, when the budget is reached or a slot is needed) loses
//! nothing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::lock_order::{self, Mutex};
use uffd::StagedFolio;
use zswap::PAGE_SIZE;

use crate::folio_queue::FolioQueue;

#[derive(Debug)]
pub(crate) struct StagedFolios {
    /// The staged folios, and the order to drop them in (with entries of folios taken
    /// since, skipped when popped).
    inner: Mutex<(HashMap<u32, StagedFolio>, FolioQueue)>,
    pages: AtomicU64,
    budget_pages: u64,
    queue_bytes: AtomicU64,
}

impl StagedFolios {
    /// Staged folios, at most `budget_pages` pages of them, for a region of `nr_folios`
    /// folios of `folio_pages` pages.
    pub fn new(budget_pages: u64, folio_pages: u32, nr_folios: usize) -> Self {
        let order = FolioQueue::new(folio_pages, nr_folios);
        StagedFolios {
            queue_bytes: AtomicU64::new(order.bytes()),
            inner: Mutex::new(&lock_order::STAGED, (HashMap::new(), order)),
            pages: AtomicU64::new(0),
            budget_pages,
        }
    }

    /// Pages held.
    pub fn pages(&self) -> u64 {
        self.pages.load(Relaxed)
    }

    /// Keep the staged copy of the folio at `start` (its stored copy is in the engine).
    /// Returns how many older entries were dropped to stay in budget.
    pub fn insert(&self, start: u32, folio: StagedFolio) -> u64 {
        // Dropped once the lock is given up: dropping a staged folio may discard a batch of
        // staging slots (a `madvise`), which every fault's `take` would otherwise wait for.
        let mut gone = Vec::new();
        let mut g = self.inner.lock();
        self.pages
            .fetch_add((folio.len() / PAGE_SIZE) as u64, Relaxed);
        if let Some(old) = g.0.insert(start, folio) {
            self.pages
                .fetch_sub((old.len() / PAGE_SIZE) as u64, Relaxed);
            gone.push(old);
        }
        let (held, order) = &mut *g;
        order.push_back(start, |s| held.contains_key(&s));
        self.queue_bytes.store(order.bytes(), Relaxed);
        let mut dropped = 0;
        while self.pages() > self.budget_pages {
            let Some(f) = Self::pop_oldest(&mut g, &self.pages) else {
                break;
            };
            gone.push(f);
            dropped += 1;
        }
        drop(g);
        drop(gone);
        dropped
    }

    /// Memory its queue of what to drop first holds (read without the lock: a region's
    /// usage is read at every fault).
    pub fn queue_bytes(&self) -> u64 {
        self.queue_bytes.load(Relaxed)
    }

    /// Whether the folio at `start` is staged here.
    pub fn contains(&self, start: u32) -> bool {
        self.inner.lock().0.contains_key(&start)
    }

    /// Take the staged copy of the folio at `start`, if there is one. The caller holds the
    /// folio's lock.
    pub fn take(&self, start: u32) -> Option<StagedFolio> {
        let mut g = self.inner.lock();
        let f = g.0.remove(&start)?;
        self.pages.fetch_sub((f.len() / PAGE_SIZE) as u64, Relaxed);
        Some(f)
    }

    /// Drop the oldest entry; false when empty.
    pub fn drop_oldest(&self) -> bool {
        // Dropped after the lock is given up (see `insert`).
        let oldest = Self::pop_oldest(&mut self.inner.lock(), &self.pages);
        oldest.is_some()
    }

    fn pop_oldest(
        g: &mut (HashMap<u32, StagedFolio>, FolioQueue),
        pages: &AtomicU64,
    ) -> Option<StagedFolio> {
        while let Some(start) = g.1.pop_front() {
            // The queue may name folios taken since; skip those.
            if let Some(f) = g.0.remove(&start) {
                pages.fetch_sub((f.len() / PAGE_SIZE) as u64, Relaxed);
                return Some(f);
            }
        }
        None
    }

    pub fn clear(&self) {
        let all = {
            let mut g = self.inner.lock();
            g.1.clear();
            self.pages.store(0, Relaxed);
            std::mem::take(&mut g.0)
        };
        drop(all);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Region, RegionConfig};

    /// Folios evicted and taken back, over and over, within the budget (a working set just
    /// over the limit, coming back while still staged): the queue of what to drop first
    /// stays bounded. Would fail if the queue kept an entry for every folio ever inserted.
    #[test]
    fn folios_taken_back_leave_no_entries_behind() {
        let pages = 1000;
        let mut r = Region::new(
            pages * PAGE_SIZE,
            RegionConfig::new(64 << 20).folio_size(PAGE_SIZE),
        )
        .unwrap();
        r.as_mut_slice().fill(1);
        let reclaim = r.inner().reclaim();
        let map = StagedFolios::new(pages as u64, 1, pages);
        for p in 0..pages as u32 {
            // Moved out behind the region's back, as reclaim does (never read here again),
            // and no longer counted resident: a fault event left over from the fill (its
            // page mapped by fault-around meanwhile), served after the move, must find the
            // page out, not a resident page gone from the mapping (which stops the process).
            let folio = reclaim.group.lock_folio(p, 0);
            reclaim.pages.set_resident(p, false);
            map.insert(
                p,
                reclaim
                    .staging
                    .stage(reclaim.mapping.page_addr(p), PAGE_SIZE)
                    .unwrap(),
            );
            drop(map.take(p));
            drop(folio);
        }
        let queued = map.inner.lock().1.len();
        assert!(
            queued <= 64 + 1,
            "{queued} entries queued with nothing staged"
        );
    }
}
