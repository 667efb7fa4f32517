//! Adoption: once a lazy region's range is registered (registration.rs), the pages the
//! kernel mapped in it before become the region's, as if each had been faulted in: counted
//! resident, and their folios queued for reclaim. Until then the region does not count them,
//! and they never fault. A page is the kernel's if its page table has it present or swapped
//! out (the pagemap): a page the kernel swapped out comes back without a userfault, and
//! counts as resident as any of the region's would.
//!
//! Each folio with a page in the mapping is adopted as an install is made: under its folio
//! lock and the event gate held shared, so that the page tables read then are the truth
//! until the gate goes. A discard read after that waits for its zap and counts the pages
//! missing. Left for later, as an install leaves them (swapin.rs `left_mapped`): pages of a
//! discard read and not processed yet (pending: zapped once read), and pages a discard
//! covered lately (processed before its zap came, which the processing does not wait for on
//! a page it does not count: counted, reclaim could move the page's old data out ahead of
//! the zap, and a fault bring it back after the `madvise` returned). The adoption is then
//! partial: the region does not claim to count every page (`Region::holds_nothing` asks
//! the page tables) and adopts again once such a zap can no longer come
//! (registration.rs `PARTIAL_RETRY`). A page a discard marked and left mapped stays
//! uncounted, as in any region. A page a fault brought in since the registration counts
//! already; a page the engine holds is not one the kernel mapped before (it left through
//! reclaim).

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use zswap::swap::Kind;
use zswap::{ZswapGroup, PAGE_SIZE};

use crate::discards::Discards;
use crate::geometry::Geometry;
use crate::lru::Lru;
use crate::mapping::Mapping;
use crate::page_flags::PageFlags;
use crate::registration::Registration;

/// How much of the range one look at the page tables covers, to find the folios to adopt.
const LOOK_BYTES: usize = 64 << 20;
/// Reads of the page tables tried before adoption gives up.
const READ_TRIES: u32 = 10;

/// Adoption. What it may touch: the parts below.
#[derive(Clone, Copy)]
pub(crate) struct Adopt<'a> {
    pub mapping: &'a Mapping,
    pub group: &'a ZswapGroup,
    pub geometry: Geometry,
    pub pages: &'a PageFlags,
    pub discards: &'a Discards,
    pub lru: &'a Lru,
    /// Told of the pages adopted as they are (what is not adopted yet stays charged).
    pub registration: &'a Registration,
    /// The region is stopping: adoption ends.
    pub stop: &'a AtomicBool,
}

/// What an adoption did.
pub(crate) struct Adopted {
    /// Pages adopted.
    pub adopted: u64,
    /// Whether every page in the mapping is counted now: false if pages were left for a
    /// discard's zap that may still come, or the page tables could not be read, or the region
    /// is stopping.
    pub complete: bool,
}

impl Adopt<'_> {
    /// Adopt every page in the mapping the region does not count.
    pub(crate) fn adopt_in_mapping(&self) -> Adopted {
        let nr_pages = self.geometry.nr_pages;
        let fp = self.geometry.folio_pages;
        // A whole number of folios (at most 2 MiB each).
        let look = (LOOK_BYTES / PAGE_SIZE) as u32;
        let mut done = Adopted {
            adopted: 0,
            complete: true,
        };
        let mut first = 0;
        while first < nr_pages {
            let n = look.min(nr_pages - first);
            let in_mapping = match self.stop.load(Relaxed) {
                true => None,
                false => self.read_tables(first, n),
            };
            let Some(in_mapping) = in_mapping else {
                done.complete = false;
                break;
            };
            for (i, folio) in in_mapping.chunks(fp as usize).enumerate() {
                if folio.contains(&true) {
                    let (n, left) = self.adopt_folio(first + i as u32 * fp);
                    self.registration.adopting(n);
                    done.adopted += n;
                    done.complete &= !left;
                }
            }
            first += n;
        }
        done
    }

    /// Which of `n` pages from `first` are in the mapping; a failed read (the kernel short of
    /// memory for it) is tried again, a few times. Holding nothing.
    fn read_tables(&self, first: u32, n: u32) -> Option<Vec<bool>> {
        for _ in 0..READ_TRIES {
            if let Some(pages) = self.mapping.in_mapping_pages(first, n) {
                return Some(pages);
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        None
    }

    /// Adopt the pages of the folio at `start` in the mapping now; returns how many were, and
    /// whether any was left (a discard's zap that may still come, or page tables that could
    /// not be read: adopted again later).
    fn adopt_folio(&self, start: u32) -> (u64, bool) {
        let folio = self.group.lock_folio(start, self.geometry.folio_order);
        let gate = self.mapping.gate();
        let nr = folio.nr_pages();
        // One `mincore` for a folio all present (a heap's folios, mostly); the pagemap, which
        // sees swapped-out pages too, for the rest.
        let in_mapping = match self.mapping.present_pages(start, nr) {
            Some(present) if !present.contains(&false) => Some(present),
            _ => self.mapping.in_mapping_pages(start, nr),
        };
        let Some(in_mapping) = in_mapping else {
            return (0, true);
        };
        // A page a discard marked and left mapped stays uncounted, as it does in a region
        // registered at start (events.rs: `MADV_FREE`, a zap later than the wait).
        let candidate = |p: u32| {
            in_mapping[(p - start) as usize]
                && !self.pages.is_resident(p)
                && !self.pages.is_discarded(p)
                && folio.state(p).kind == Kind::Empty
        };
        if !folio.offsets().any(candidate) {
            return (0, false);
        }
        let pending = self.discards.pending_mask(start, folio.end());
        let recent = self.discards.recently_covered_within(start, folio.end());
        let discarding = |p: u32| {
            pending.as_ref().is_some_and(|m| m[(p - start) as usize])
                || recent.iter().any(|&(a, b)| (a..b).contains(&p))
        };
        let (adopt, left): (Vec<u32>, Vec<u32>) = folio
            .offsets()
            .filter(|&p| candidate(p))
            .partition(|&p| !discarding(p));
        if !adopt.is_empty() {
            // Queued before its pages count, as a fault queues its folio; a folio a fault
            // brought partly in since is queued already.
            if !folio.offsets().any(|p| self.pages.is_resident(p)) {
                self.lru.queue(start);
            }
            for &p in &adopt {
                self.pages.set_resident(p, true);
            }
        }
        drop(gate);
        (adopt.len() as u64, !left.is_empty())
    }
}
