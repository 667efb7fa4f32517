//! The region's audit, for tests (the `test-hooks` feature): with reclaim held off, every
//! folio is locked in turn and where each of its pages is checked against the region's
//! counts, then the engine audits its own (`Zswap::audit`). It needs the region quiet: no
//! access of the program's under way.

use std::time::{Duration, Instant};

use zswap::swap::Kind;
use zswap::{Zswap, ZswapGroup, PAGE_SIZE};

use crate::charge::Meter;
use crate::deferred::DeferredEvents;
use crate::discards::Discards;
use crate::geometry::Geometry;
use crate::mapping::Mapping;
use crate::page_flags::PageFlags;
use crate::readahead::Readahead;
use crate::reclaim_wait::ReclaimWait;
use crate::staged::StagedFolios;

/// What the audit reads: every part that says where a page is.
#[derive(Clone, Copy)]
pub(crate) struct Audit<'a> {
    pub meter: Meter<'a>,
    pub mapping: &'a Mapping,
    pub zswap: &'a Zswap,
    pub group: &'a ZswapGroup,
    pub geometry: Geometry,
    pub pages: &'a PageFlags,
    pub staged: &'a StagedFolios,
    /// What must be done before it looks: discards, events and readahead pending.
    pub discards: &'a Discards,
    pub deferred: &'a DeferredEvents,
    pub readahead: &'a Readahead,
    /// Holds reclaim off while it looks.
    pub reclaim_wait: &'a ReclaimWait,
}

impl Audit<'_> {
    /// Check where every page is against the region's counts and the engine's entries; the
    /// first disagreement.
    pub(crate) fn audit(&self) -> Result<(), String> {
        // A readahead thread may be installing a folio it took off its queue: its count moves
        // meanwhile, and the audit looks again.
        for _ in 0..5 {
            let before = self.pages.nr_resident();
            let result = self.audit_once();
            if result.is_ok() || self.pages.nr_resident() == before {
                return result;
            }
        }
        Err("the resident count keeps moving with the region quiet".into())
    }

    fn audit_once(&self) -> Result<(), String> {
        // The handlers finish what they have read (a discard returns once its event is read,
        // before it is processed) and readahead what it has queued.
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.discards.any_pending() || self.deferred.any() || self.readahead.any_queued() {
            if Instant::now() > deadline {
                return Err("discards, events or readahead still pending after 5 s".into());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        // Evictions under way finish first, and none starts until the audit is done.
        let _held_off = self.reclaim_wait.hold_off();
        let fp = self.geometry.folio_pages;
        let (mut resident, mut staged) = (0u64, 0u64);
        for start in (0..self.geometry.nr_pages).step_by(fp as usize) {
            let folio = self.group.lock_folio(start, self.geometry.folio_order);
            let is_staged = self.staged.contains(start);
            if is_staged {
                staged += u64::from(fp);
            }
            for p in folio.offsets() {
                let kind = folio.state(p).kind;
                if !self.pages.is_resident(p) {
                    continue;
                }
                resident += 1;
                if is_staged {
                    return Err(format!("folio {start} is staged and its page {p} resident"));
                }
                if kind == Kind::Poisoned {
                    return Err(format!("page {p} is counted resident and poisoned"));
                }
                // A discard covered it lately: the kernel may have zapped it since (events.rs).
                if !self.pages.is_discarded(p) && self.mapping.in_mapping(p) == Some(false) {
                    return Err(format!(
                        "page {p} is counted resident but not in the mapping"
                    ));
                }
            }
        }
        if resident != self.pages.nr_resident() {
            return Err(format!(
                "{resident} pages resident, {} counted",
                self.pages.nr_resident()
            ));
        }
        if staged != self.staged.pages() {
            return Err(format!(
                "{staged} pages in staged folios, {} counted",
                self.staged.pages()
            ));
        }
        let in_flight = self
            .meter
            .in_flight
            .load(std::sync::atomic::Ordering::Relaxed);
        if in_flight != 0 {
            return Err(format!("{in_flight} bytes in flight with reclaim held off"));
        }
        debug_assert_eq!(self.meter.usage().resident, resident * PAGE_SIZE as u64);
        // The engine's shrink worker may be writing back a batch (its folios locked, its slots
        // taken before its entries say so): a disagreement must last to count.
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            match self.zswap.audit() {
                Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
                result => return result,
            }
        }
    }
}
