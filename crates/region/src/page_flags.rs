//! Two bits a page of the region, kept beside the engine's state word: whether the page is
//! present in the mapping (resident), and whether a discard covered it lately (discarded,
//! events.rs). Both change only under the page's folio lock. The bitmaps are sparse
//! (zswap::sparse): their memory comes with the first bit set in each 128 MiB of the
//! region, so a reservation costs what the program touches.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use zswap::sparse::SparseBitmap;

use crate::discards::Discards;

/// Words of a bitmap leaf: 4 KiB, the bits of 128 MiB of pages.
const BITMAP_LEAF: usize = 512;

/// The region's per-page flags.
pub(crate) struct PageFlags {
    /// One bit a page: present in the mapping.
    resident: SparseBitmap<BITMAP_LEAF>,
    /// Pages with their resident bit set.
    nr_resident: AtomicU64,
    /// One bit a page: covered by a discard whose zap may still come, so the kernel may unmap
    /// the page behind our back (events.rs).
    discarded: SparseBitmap<BITMAP_LEAF>,
    /// Debug builds: per page, where its resident bit was last cleared and last set (the
    /// caller's file initial and line), for the report of a page we lost track of; each
    /// word two halves: cleared at (high) and set at (low).
    #[cfg(debug_assertions)]
    trail: zswap::sparse::SparseArray<AtomicU64, 4096>,
}

impl PageFlags {
    /// Flags for `nr_pages` pages, all clear.
    pub fn new(nr_pages: u32) -> Self {
        PageFlags {
            resident: SparseBitmap::new(nr_pages as usize),
            nr_resident: AtomicU64::new(0),
            discarded: SparseBitmap::new(nr_pages as usize),
            #[cfg(debug_assertions)]
            trail: zswap::sparse::SparseArray::new(nr_pages as usize),
        }
    }

    /// Page `page` left the mapping for the engine (reclaim moved it out): its discarded
    /// mark goes, unless the discard that set it was processed so lately that its zap may
    /// still come. The caller holds its folio lock.
    pub fn left_for_the_engine(&self, page: u32, discards: &Discards) {
        if self.is_discarded(page) && !discards.recently_covered(page) {
            self.set_discarded(page, false);
        }
    }

    /// Pages `first..end` just went into the mapping: those a discard processed lately covered
    /// are marked, as its processing marks every page it meets; it does not meet pages no folio
    /// lock ever covered (events.rs), and a zap of one coming only now must read as late, not
    /// as a page lost. The caller holds their folio locks.
    pub fn went_in(&self, first: u32, end: u32, discards: &Discards) {
        for (a, b) in discards.recently_covered_within(first, end) {
            for p in a..b {
                self.set_discarded(p, true);
            }
        }
    }

    /// Pages present in the mapping.
    pub fn nr_resident(&self) -> u64 {
        self.nr_resident.load(Relaxed)
    }

    pub fn is_resident(&self, page: u32) -> bool {
        self.resident.test(page as usize)
    }

    /// Mark a page present or not; the caller holds its folio lock.
    #[track_caller]
    pub fn set_resident(&self, page: u32, on: bool) {
        #[cfg(debug_assertions)]
        {
            let at = std::panic::Location::caller();
            let initial = at.file().rsplit('/').next().map_or(0, |f| f.as_bytes()[0]);
            let mark = u64::from(u32::from(initial) << 24 | at.line());
            let shift = if on { 0 } else { 32 };
            let word = self.trail.entry(page as usize);
            let _ = word.fetch_update(Relaxed, Relaxed, |w| {
                Some(w & !(0xffff_ffff << shift) | mark << shift)
            });
        }
        match (self.resident.assign(page as usize, on), on) {
            (false, true) => {
                self.nr_resident.fetch_add(1, Relaxed);
            }
            (true, false) => {
                self.nr_resident.fetch_sub(1, Relaxed);
            }
            _ => {}
        }
    }

    pub fn is_discarded(&self, page: u32) -> bool {
        self.discarded.test(page as usize)
    }

    /// Mark a page covered by a discard, or not; the caller holds its folio lock.
    pub fn set_discarded(&self, page: u32, on: bool) {
        self.discarded.assign(page as usize, on);
    }

    /// Bytes the bitmaps hold (charged as metadata; the debug builds' trail is not, so
    /// that a region reclaims alike in both).
    pub fn bytes(&self) -> u64 {
        self.resident.bytes() + self.discarded.bytes()
    }

    /// Debug builds: where the page's resident bit was last cleared and last set.
    pub fn trail(&self, page: u32) -> String {
        #[cfg(debug_assertions)]
        {
            let w = self.trail.get(page as usize).map_or(0, |w| w.load(Relaxed));
            let at = |w: u32| format!("{}:{}", (w >> 24) as u8 as char, w & 0xff_ffff);
            format!("cleared {} set {}", at((w >> 32) as u32), at(w as u32))
        }
        #[cfg(not(debug_assertions))]
        {
            let _ = page;
            String::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resident_count_follows_the_bits() {
        let f = PageFlags::new(130);
        f.set_resident(129, true);
        f.set_resident(129, true);
        f.set_resident(0, true);
        assert_eq!(f.nr_resident(), 2);
        f.set_resident(129, false);
        f.set_resident(129, false);
        assert_eq!(f.nr_resident(), 1);
        assert!(f.is_resident(0) && !f.is_resident(129) && !f.is_discarded(0));
        f.set_discarded(64, true);
        assert!(f.is_discarded(64) && !f.is_resident(64));
    }
}
