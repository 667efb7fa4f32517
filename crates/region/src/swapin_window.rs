//! How much of a folio a fault brings back from the engine: the whole folio, or the faulted
//! page alone.
//!
//! In a region the folio (`folio_size`) is the unit of allocation and reclaim, but the engine
//! holds every page of it on its own, so a fault can bring any part of it. A fault on a
//! missing page brings:
//! - the whole folio when it continues a sequential scan across folios (readahead.rs), or
//!   when a page next to it in its folio is already in: a scan within the folio (a program
//!   reading an object from its start);
//! - the whole folio too while most folios brought a page alone are hit again within the
//!   next few page-alone swap-ins (quick hits: a scan over objects spread over many places at
//!   once, which the readahead's streams do not see, as CPython freeing a list in allocation
//!   order through several size classes' pages: the page alone only doubled its faults); one
//!   fault in `SAMPLE_EVERY` still brings its page alone, to see when that stops;
//! - else the faulted page alone, and the folio is *partly in*, until its last page comes in
//!   or reclaim takes it.
//!
//! Why the page alone by default, where the kernel's zswap brings a large folio whole: a
//! page brought and not used soon costs its decompression (and its compression when it
//! leaves again written) and, under a limit, the room of a page of other data, which then
//! faults. Counting only the faults a whole folio saves misses that second cost: on a heap
//! updated at scattered places (a Java server's, a JavaScript map), whole 16 KiB folios took
//! as many faults as pages alone, the neighbours used later paid for by the pages they
//! pushed out, and three times the pages through the codec. Where the neighbours are used
//! at once, the scan tests above see it from the first fault after the page alone.
//!
//! Counted for `--stats`: a fault on another page of a partly-in folio is a **hit** (a fault
//! the whole folio would have saved); reclaim taking a folio with only its page alone in is
//! a **miss** (what the page alone saved: the rest of the folio never came in).
//!
//! A policy: it decides and counts; the fault brings the pages in (swapin.rs).

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

use zswap::sparse::SparseBitmap;

/// The folios brought a page alone most recently: a hit on one of them comes within the
/// scan that brought it (a quick hit).
const RECENT: usize = 8;
/// Page-alone swap-ins over which quick hits are weighed (then both counts halve).
const PERIOD: u32 = 256;
/// Page-alone swap-ins before quick hits are weighed at all.
const MIN_WEIGHED: u32 = 16;
/// While page-alone swap-in does not pay, one fault in this many still takes it.
const SAMPLE_EVERY: u32 = 16;

/// The swap-in window of a region.
#[derive(Debug)]
pub(crate) struct SwapinWindow {
    /// `Policies::adaptive_swapin`: off, every fault brings its whole folio.
    enabled: bool,
    /// One bit a folio: brought in a page at a time, and some page of it still out.
    partly_in: SparseBitmap<512>,
    folio_pages: u32,
    /// Folio starts (+ 1; 0: empty) of the last `RECENT` page-alone swap-ins, a ring.
    recent: [AtomicU32; RECENT],
    next_recent: AtomicU32,
    /// Page-alone swap-ins and the quick hits on them (one at most a swap-in), halved every
    /// `PERIOD` swap-ins.
    alone: AtomicU32,
    quick_hits: AtomicU32,
    sampled: AtomicU32,
}

impl SwapinWindow {
    /// The window of a region of `nr_folios` folios of `folio_pages` pages.
    pub fn new(enabled: bool, folio_pages: u32, nr_folios: usize) -> Self {
        SwapinWindow {
            enabled: enabled && folio_pages > 1,
            partly_in: SparseBitmap::new(nr_folios),
            folio_pages,
            recent: [const { AtomicU32::new(0) }; RECENT],
            next_recent: AtomicU32::new(0),
            alone: AtomicU32::new(0),
            quick_hits: AtomicU32::new(0),
            sampled: AtomicU32::new(0),
        }
    }

    fn folio(&self, start: u32) -> usize {
        (start / self.folio_pages) as usize
    }

    /// A fault on a missing page of a folio the engine holds whole, or of a partly-in one:
    /// whether it brings the page alone rather than the rest of the folio.
    /// `continues_scan`: the fault continues a scan across folios; `next_to_one_in`: a page
    /// beside it in its folio is in.
    pub fn page_alone(&self, continues_scan: bool, next_to_one_in: bool) -> bool {
        self.enabled && !continues_scan && !next_to_one_in && !self.scans_within_folios()
    }

    /// Most folios brought a page alone are hit again within the scan that brought them
    /// (a program walking objects spread over many places at once, as CPython freeing a
    /// list in allocation order does through several size classes' pages): the page alone
    /// only doubles their faults. Weighed once `MIN_WEIGHED` folios came a page alone; one
    /// fault in `SAMPLE_EVERY` still brings its page alone, to see when that stops.
    fn scans_within_folios(&self) -> bool {
        let alone = self.alone.load(Relaxed);
        alone >= MIN_WEIGHED
            && 2 * self.quick_hits.load(Relaxed) > alone
            && !self
                .sampled
                .fetch_add(1, Relaxed)
                .is_multiple_of(SAMPLE_EVERY)
    }

    /// The fault brought the page alone into the folio at `start`: it is partly in.
    pub fn brought_page_alone(&self, start: u32) {
        self.partly_in.assign(self.folio(start), true);
        let slot = self.next_recent.fetch_add(1, Relaxed) as usize % RECENT;
        self.recent[slot].store(start + 1, Relaxed);
        // The swap-in that makes the count `PERIOD` halves both; the others' counts stay.
        if self.alone.fetch_add(1, Relaxed) + 1 == PERIOD {
            self.alone.fetch_sub(PERIOD / 2, Relaxed);
            let _ = self
                .quick_hits
                .fetch_update(Relaxed, Relaxed, |hits| Some(hits / 2));
        }
    }

    /// A fault on a missing page of the folio at `start`: whether the folio is partly in (a
    /// hit; it stays partly in until its last page is in). The first hit on a recent
    /// page-alone swap-in is quick; it leaves the ring, so each counts once.
    pub fn fault_on(&self, start: u32) -> bool {
        let hit = self.enabled && self.partly_in.test(self.folio(start));
        let taken = |r: &AtomicU32| r.compare_exchange(start + 1, 0, Relaxed, Relaxed).is_ok();
        if hit && self.recent.iter().any(taken) {
            self.quick_hits.fetch_add(1, Relaxed);
        }
        hit
    }

    /// Every page of the folio at `start` is in: it is no longer partly in. Whether it was.
    pub fn completed(&self, start: u32) -> bool {
        self.enabled && self.partly_in.assign(self.folio(start), false)
    }

    /// Reclaim took the folio at `start` with `present` pages in: whether it was partly in
    /// with its page alone (a miss).
    pub fn reclaimed(&self, start: u32, present: u32) -> bool {
        let was = self.enabled && self.partly_in.assign(self.folio(start), false);
        was && present <= 1
    }

    /// The folio at `start` was discarded: it is not partly in.
    pub fn forget(&self, start: u32) {
        self.partly_in.assign(self.folio(start), false);
    }

    /// Memory the partly-in bits hold.
    pub fn bytes(&self) -> u64 {
        self.partly_in.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_hits_on_most_folios_brought_a_page_alone_bring_folios_whole() {
        let w = SwapinWindow::new(true, 4, 1024);
        for f in 0..64 {
            w.brought_page_alone(f * 4);
            assert!(w.fault_on(f * 4), "the next fault, on the same folio");
        }
        let alone = (0..4 * SAMPLE_EVERY)
            .filter(|_| w.page_alone(false, false))
            .count();
        assert_eq!(alone, 4, "whole folios, but for one fault in SAMPLE_EVERY");
        // Hits that come after RECENT other folios were brought alone are not quick.
        let w = SwapinWindow::new(true, 4, 1024);
        for f in 0..64 {
            w.brought_page_alone(f * 4);
        }
        for f in 0..(64 - RECENT as u32) {
            assert!(w.fault_on(f * 4));
        }
        assert!(
            w.page_alone(false, false),
            "late hits: the page alone still pays"
        );
    }

    #[test]
    fn a_page_alone_swap_in_counts_one_quick_hit_however_many_faults_follow() {
        let w = SwapinWindow::new(true, 4, 1024);
        // Half the folios brought alone are hit at once, three times each: not most.
        for f in 0..64 {
            w.brought_page_alone(f * 4);
            if f % 2 == 0 {
                for _ in 0..3 {
                    assert!(w.fault_on(f * 4));
                }
            }
        }
        assert!(
            w.page_alone(false, false),
            "one quick hit a folio: half of them"
        );
    }

    #[test]
    fn a_fault_brings_its_page_alone_unless_it_continues_a_scan() {
        let w = SwapinWindow::new(true, 4, 64);
        assert!(w.page_alone(false, false), "a random fault: the page alone");
        assert!(
            !w.page_alone(true, false),
            "a scan across folios: the folio"
        );
        assert!(
            !w.page_alone(false, true),
            "a scan within the folio: the rest"
        );
    }

    #[test]
    fn a_partly_in_folio_counts_its_hits_until_complete_and_a_miss_if_reclaimed_alone() {
        let w = SwapinWindow::new(true, 4, 64);
        w.brought_page_alone(8);
        assert!(w.fault_on(8), "another page of a partly-in folio: a hit");
        assert!(w.fault_on(8), "still partly in");
        assert!(w.completed(8), "every page in");
        assert!(!w.fault_on(8) && !w.completed(8), "no longer partly in");
        w.brought_page_alone(8);
        assert!(!w.reclaimed(8, 2), "two pages in: not a miss");
        w.brought_page_alone(8);
        assert!(w.reclaimed(8, 1), "its page alone: a miss");
        assert!(!w.reclaimed(8, 1), "counted once");
        w.brought_page_alone(8);
        w.forget(8);
        assert!(!w.fault_on(8) && !w.reclaimed(8, 1), "discarded");
    }

    #[test]
    fn off_or_with_4k_folios_every_fault_brings_the_folio() {
        assert!(!SwapinWindow::new(false, 4, 64).page_alone(false, false));
        assert!(!SwapinWindow::new(true, 1, 64).page_alone(false, false));
        assert!(!SwapinWindow::new(false, 4, 64).fault_on(0));
    }
}
