//! Adoption: once a lazy region's range is registered (registration.rs), the pages the
//! kernel mapped in it before become the region's, as if each had been faulted in: counted
//! resident, and their folios queued for reclaim. Until then the region does not count them,
//! and they never fault.
//!
//! Each folio with a page present is adopted as an install is made: under its folio lock and
//! the event gate held shared, so that the presence read then is the truth until the gate
//! goes. A discard read and not processed yet is pending, and its pages are left (they are
//! zapped once it is read, and counted nowhere, as a discard's pages are); a discard read
//! after the gate goes waits for the zap and counts the pages missing; one processed before
//! has zapped its pages, or marks them (`PageFlags::went_in`) if its zap is late. A page a
//! fault brought in since the registration counts already; a page the engine holds is not
//! one the kernel mapped before (it left through reclaim) and is left as it is.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use zswap::swap::Kind;
use zswap::{ZswapGroup, PAGE_SIZE};

use crate::discards::Discards;
use crate::geometry::Geometry;
use crate::lru::Lru;
use crate::mapping::Mapping;
use crate::page_flags::PageFlags;

/// How much of the range one look at the page tables covers, to find the folios to adopt.
const LOOK_BYTES: usize = 64 << 20;

/// Adoption. What it may touch: the parts below.
#[derive(Clone, Copy)]
pub(crate) struct Adopt<'a> {
    pub mapping: &'a Mapping,
    pub group: &'a ZswapGroup,
    pub geometry: Geometry,
    pub pages: &'a PageFlags,
    pub discards: &'a Discards,
    pub lru: &'a Lru,
    /// The region is stopping: adoption ends.
    pub stop: &'a AtomicBool,
}

impl Adopt<'_> {
    /// Adopt every page present in the range; returns how many were.
    pub(crate) fn adopt_present(&self) -> u64 {
        let nr_pages = self.geometry.nr_pages;
        let fp = self.geometry.folio_pages;
        // A whole number of folios (at most 2 MiB each).
        let look = (LOOK_BYTES / PAGE_SIZE) as u32;
        let mut adopted = 0;
        let mut first = 0;
        while first < nr_pages && !self.stop.load(Relaxed) {
            let n = look.min(nr_pages - first);
            let Some(present) = self.mapping.present(first, n) else {
                break; // the range is gone
            };
            for (i, folio) in present.chunks(fp as usize).enumerate() {
                if folio.contains(&true) {
                    adopted += self.adopt_folio(first + i as u32 * fp);
                }
            }
            first += n;
        }
        adopted
    }

    /// Adopt the pages of the folio at `start` present now; returns how many were.
    fn adopt_folio(&self, start: u32) -> u64 {
        let folio = self.group.lock_folio(start, self.geometry.folio_order);
        let gate = self.mapping.gate();
        let Some(present) = self.mapping.present(start, folio.nr_pages()) else {
            return 0;
        };
        let pending = self.discards.pending_mask(start, folio.end());
        let adopt: Vec<u32> = folio
            .offsets()
            .filter(|&p| {
                let i = (p - start) as usize;
                present[i]
                    && !pending.as_ref().is_some_and(|m| m[i])
                    && !self.pages.is_resident(p)
                    && folio.state(p).kind == Kind::Empty
            })
            .collect();
        if adopt.is_empty() {
            return 0;
        }
        // Queued before its pages count, as a fault queues its folio; a folio a fault brought
        // partly in since is queued already.
        if !folio.offsets().any(|p| self.pages.is_resident(p)) {
            self.lru.queue(start);
        }
        for &p in &adopt {
            self.pages.set_resident(p, true);
            self.pages.went_in(p, p + 1, self.discards);
        }
        drop(gate);
        adopt.len() as u64
    }
}
