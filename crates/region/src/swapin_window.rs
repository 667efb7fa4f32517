//! How much of a folio a fault brings back from the engine: the whole folio, or the faulted
//! page alone.
//!
//! The kernel sizes its swap readahead from hits (mm/swap_state.c, `swapin_nr_pages`): a
//! page it read ahead that a later fault finds in the swap cache is a hit; with none, a fault
//! reads one page, and hits grow the window. In a region the folio (`folio_size`) is the unit
//! of allocation and reclaim, and every page of it the engine holds on its own, so a fault on
//! a folio the engine holds whole can bring any part of it. It brings:
//! - the whole folio when the fault continues a sequential scan (readahead.rs), or when the
//!   region's recent faults say that once one page of a folio is used, the rest is too;
//! - else the faulted page alone, and the folio is *partly in*. A later fault on another of
//!   its pages, while the page alone is still resident, is a **hit**: bringing the whole folio
//!   would have saved that fault; it brings the rest of the folio. Reclaim taking a partly-in
//!   folio with no such fault is a **miss**: the page alone was all the program used, and
//!   the other pages stayed out of memory.
//!
//! The cost model: a hit is one fault more than the whole folio would have cost; a miss
//! saves the folio's other pages the memory they would have held, which under a limit is as
//! many pages of someone else's kept in (a fault each, the next time they are used). So
//! whole folios are brought while hits are at least as many as misses (counts halved as they
//! grow, so the choice follows the program's phase). While whole folios are brought, one
//! fault in `PROBE_EVERY` still brings its page alone, so the counts go on being measured.
//!
//! A policy: it decides and counts; the fault brings the pages in (swapin.rs).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use zswap::sparse::SparseBitmap;

/// While whole folios are brought, one fault in this many brings its page alone.
const PROBE_EVERY: u64 = 32;
/// The counts are halved once hits and misses together pass this.
const DECAY_AFTER: u64 = 512;

/// The swap-in window of a region.
#[derive(Debug)]
pub(crate) struct SwapinWindow {
    /// `Policies::adaptive_swapin`: off, every fault brings its whole folio.
    enabled: bool,
    /// One bit a folio: brought in a page alone, no other page of it faulted since.
    partly_in: SparseBitmap<512>,
    hits: AtomicU64,
    misses: AtomicU64,
    probe: AtomicU64,
    folio_pages: u32,
}

impl SwapinWindow {
    /// The window of a region of `nr_folios` folios of `folio_pages` pages.
    pub fn new(enabled: bool, folio_pages: u32, nr_folios: usize) -> Self {
        SwapinWindow {
            enabled: enabled && folio_pages > 1,
            partly_in: SparseBitmap::new(nr_folios),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            probe: AtomicU64::new(0),
            folio_pages,
        }
    }

    fn folio(&self, start: u32) -> usize {
        (start / self.folio_pages) as usize
    }

    /// A fault on a folio the engine holds whole: whether it brings the faulted page alone
    /// rather than the folio. `continues_scan`: the fault continues a sequential scan.
    pub fn page_alone(&self, continues_scan: bool) -> bool {
        if !self.enabled || continues_scan {
            return false;
        }
        let (hits, misses) = (self.hits.load(Relaxed), self.misses.load(Relaxed));
        hits < misses || (hits == 0 && misses == 0) || self.probe()
    }

    fn probe(&self) -> bool {
        self.probe.fetch_add(1, Relaxed).is_multiple_of(PROBE_EVERY)
    }

    /// The fault brought the page alone into the folio at `start`: it is partly in.
    pub fn brought_page_alone(&self, start: u32) {
        self.partly_in.assign(self.folio(start), true);
    }

    /// A fault on a missing page of the folio at `start`: whether the folio was partly in
    /// (a hit, counted; the fault brings the rest of the folio).
    pub fn fault_on(&self, start: u32) -> bool {
        let hit = self.enabled && self.partly_in.assign(self.folio(start), false);
        if hit {
            self.count(&self.hits);
        }
        hit
    }

    /// Reclaim took the folio at `start`: whether it was partly in (a miss, counted).
    pub fn reclaimed(&self, start: u32) -> bool {
        let miss = self.enabled && self.partly_in.assign(self.folio(start), false);
        if miss {
            self.count(&self.misses);
        }
        miss
    }

    /// The folio at `start` was discarded: whatever comes next is not a hit or a miss.
    pub fn forget(&self, start: u32) {
        self.partly_in.assign(self.folio(start), false);
    }

    fn count(&self, outcome: &AtomicU64) {
        outcome.fetch_add(1, Relaxed);
        let (hits, misses) = (self.hits.load(Relaxed), self.misses.load(Relaxed));
        if hits + misses > DECAY_AFTER {
            // Racy halving is fine: the counts only steer a heuristic.
            self.hits.store(hits / 2, Relaxed);
            self.misses.store(misses / 2, Relaxed);
        }
    }

    /// Memory the partly-in bits hold.
    pub fn bytes(&self) -> u64 {
        self.partly_in.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alone_of(w: &SwapinWindow, n: u64) -> u64 {
        (0..n).filter(|_| w.page_alone(false)).count() as u64
    }

    #[test]
    fn with_no_hits_a_fault_brings_its_page_alone() {
        let w = SwapinWindow::new(true, 4, 64);
        assert!(w.page_alone(false), "nothing measured yet: the page alone");
        assert!(!w.page_alone(true), "a scan brings whole folios");
        w.brought_page_alone(0);
        assert!(
            w.reclaimed(0),
            "reclaimed with no other page faulted: a miss"
        );
        assert!(!w.reclaimed(0), "counted once");
        assert_eq!(alone_of(&w, 100), 100);
    }

    #[test]
    fn hits_grow_the_window_to_the_folio_and_misses_shrink_it() {
        let w = SwapinWindow::new(true, 4, 64);
        for f in 0..8 {
            w.brought_page_alone(f * 4);
            assert!(
                w.fault_on(f * 4),
                "another page of a partly-in folio: a hit"
            );
        }
        assert!(!w.fault_on(0), "the rest came in: no longer partly in");
        // Whole folios now, but for the probes that keep measuring.
        assert_eq!(alone_of(&w, 320), 320 / PROBE_EVERY);
        for f in 0..16 {
            w.brought_page_alone(f * 4);
            w.reclaimed(f * 4);
        }
        assert_eq!(alone_of(&w, 100), 100, "more misses than hits: pages alone");
    }

    #[test]
    fn a_discarded_folio_is_neither_hit_nor_miss() {
        let w = SwapinWindow::new(true, 4, 64);
        w.brought_page_alone(8);
        w.forget(8);
        assert!(!w.fault_on(8) && !w.reclaimed(8));
    }

    #[test]
    fn off_or_with_4k_folios_every_fault_brings_the_folio() {
        assert!(!SwapinWindow::new(false, 4, 64).page_alone(false));
        assert!(!SwapinWindow::new(true, 1, 64).page_alone(false));
    }

    #[test]
    fn the_counts_follow_the_phase() {
        let w = SwapinWindow::new(true, 4, 64);
        for _ in 0..10_000 {
            w.brought_page_alone(0);
            w.reclaimed(0);
        }
        assert!(w.misses.load(Relaxed) <= DECAY_AFTER + 1);
        // A phase of hits turns the choice within as many outcomes as the decay keeps.
        for _ in 0..DECAY_AFTER {
            w.brought_page_alone(0);
            w.fault_on(0);
        }
        assert_eq!(alone_of(&w, 64), 64 / PROBE_EVERY);
    }
}
