//! The swap cache of a region: folios recently evicted, kept uncompressed in staging after
//! their store, for a while. A fault that finds its folio here moves it straight back, with
//! no decompression: the second chance that the kernel's referenced bit gives, and the only
//! access signal userspace gets for free. The engine holds a stored copy of every folio here,
//! so dropping an entry (oldest first, when the budget is reached or a slot is needed) loses
//! nothing.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use parking_lot::Mutex;
use uffd::StagedFolio;
use zswap::PAGE_SIZE;

#[derive(Debug)]
pub(crate) struct SwapCacheMap {
    inner: Mutex<(HashMap<u32, StagedFolio>, VecDeque<u32>)>,
    pages: AtomicU64,
    budget_pages: u64,
}

impl SwapCacheMap {
    pub fn new(budget_pages: u64) -> Self {
        SwapCacheMap {
            inner: Mutex::new((HashMap::new(), VecDeque::new())),
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
        g.1.push_back(start);
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
        g: &mut (HashMap<u32, StagedFolio>, VecDeque<u32>),
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
