//! Staged folios: reclaim's inactive list (`Policies::inactive_list`; empty when off). Reclaim moves the coldest folios out of the
//! mapping into staging, uncompressed, and stores them only when they reach the end of this
//! list untouched: a fault on a staged folio moves it straight back, with no decompression,
//! and activates it. This is the kernel's referenced check at the inactive list's tail, made
//! with a fault where the kernel reads the accessed bit: the only access signal, reads
//! included, that userspace gets without root. So a folio the program reads often is not
//! compressed and brought back on every trip through the FIFO, as it was when reads were
//! unseen.
//!
//! A staged folio is held here alone, except a clean one (clean.rs), of which the engine holds
//! a copy of every page: dropping a staged folio means storing it first (reclaim.rs,
//! `evict_staged`), under its folio lock. Reclaim keeps the list near `target_pages`; the
//! pages here count against the limit as the resident ones do.

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
    target_pages: u64,
    queue_bytes: AtomicU64,
}

impl StagedFolios {
    /// Staged folios, reclaim keeping about `target_pages` pages of them, for a region of
    /// `nr_folios` folios of `folio_pages` pages.
    pub fn new(target_pages: u64, folio_pages: u32, nr_folios: usize) -> Self {
        let order = FolioQueue::new(folio_pages, nr_folios);
        StagedFolios {
            queue_bytes: AtomicU64::new(order.bytes()),
            inner: Mutex::new(&lock_order::STAGED, (HashMap::new(), order)),
            pages: AtomicU64::new(0),
            target_pages,
        }
    }

    /// Pages held.
    pub fn pages(&self) -> u64 {
        self.pages.load(Relaxed)
    }

    /// Whether the list is short of its target by a folio of `folio_pages` or more.
    pub fn wants(&self, folio_pages: u32) -> bool {
        self.pages() + u64::from(folio_pages) <= self.target_pages
    }

    /// Keep the folio at `start`, moved out of the mapping, at the young end of the list.
    /// The caller holds the folio's lock.
    pub fn insert(&self, start: u32, folio: StagedFolio) {
        let mut g = self.inner.lock();
        self.pages
            .fetch_add((folio.len() / PAGE_SIZE) as u64, Relaxed);
        let old = g.0.insert(start, folio);
        assert!(old.is_none(), "folio {start} staged twice");
        let (held, order) = &mut *g;
        order.push_back(start, |s| held.contains_key(&s));
        self.queue_bytes.store(order.bytes(), Relaxed);
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

    /// The oldest folio of the list, taken off its order: the caller locks it and takes it
    /// (`take`), unless a fault or a discard took it first. None when the list is empty.
    pub fn pop_oldest(&self) -> Option<u32> {
        let mut g = self.inner.lock();
        let (held, order) = &mut *g;
        while let Some(start) = order.pop_front() {
            // The queue may name folios taken since; skip those.
            if held.contains_key(&start) {
                return Some(start);
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
