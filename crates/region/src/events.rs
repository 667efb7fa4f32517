//! The region's non-fault events: discards (`MADV_DONTNEED`/`MADV_REMOVE` raise REMOVE,
//! `munmap` raises UNMAP) and moves (`mremap` raises REMAP).
//!
//! The kernel zaps a discarded range as soon as a handler has *read* the REMOVE event, not
//! when the handler is done with it. So a discard is recorded as pending at the moment it is
//! read, under an exclusive gate; every install into the region (a fault's copy, a staged
//! folio's move back) holds the gate shared and never puts data into a pending page: an
//! install either completes before the event is read (and the zap then clears it), or finds
//! the page pending and waits (the faulting thread retries) until the discard is processed.
//!
//! Processing waits for the zap: each page of the range still mapped is waited for until the
//! kernel has cleared it. Only then is the range processed: what the engine holds for those
//! pages is freed, a staged folio's pages outside the range go back into the mapping (the
//! slot holds the only copy of a folio not yet stored; those in the range are dropped with
//! the slot, never moved back), and the pages count as missing. So nothing the
//! program writes after its `madvise` returns can be processed away with the discard, and
//! after `madvise` returns the program reads zeros, as the kernel promises.
//!
//! The wait is bounded (`ZAP_WAIT` without progress), because some zaps never come and some
//! come late. `MADV_FREE` raises the same event but leaves its pages mapped, with their
//! contents, until the kernel needs the memory. A page still mapped at the end of the wait is
//! counted missing all the same: counted resident, reclaim could move it out before a zap
//! that is merely late, and bring its old data back after the `madvise` returned. So an
//! `MADV_FREE`d page the program keeps using stays mapped and uncounted until it faults again
//! (the limit does not see it: a known gap).
//!
//! And a page that was not mapped when the event was read can be faulted in (zero-filled)
//! after processing and before the discarding thread's zap, which then clears it while we
//! count it resident. So every page of a processed range is marked discarded (a page no folio
//! lock ever covered is skipped by the processing, and marked when it goes in within
//! `LATE_ZAP_WINDOW`: `PageFlags::went_in`): a marked page found unmapped while counted
//! resident (by a fault, or by reclaim moving it) reads zero, as the discard promised, and
//! counts as missing. An unmarked one is a bug, and the process is stopped (swapin.rs,
//! `lost_track`). The zap also clears a page evicted and brought back before it comes (a failed store puts it back, a fault moves it back from staging, or the
//! pool serves it), so leaving for the engine ends the mark only once the discard was
//! processed more than `LATE_ZAP_WINDOW` ago: a guess at how long a zap can be put off, past
//! which a late zap stops the process. A page that leaves within the window keeps its mark
//! until it leaves again after it; meanwhile its `lost_track` check reads as a late zap.
//!
//! The discards themselves (pending and recent) are discards.rs's state; this file reads
//! events and processes discards.

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use uffd::{Event, UffdError};
use zswap::swap::FolioLock;
use zswap::{ZswapGroup, PAGE_SIZE};

use crate::deferred::DeferredEvents;
use crate::discards::Discards;
use crate::geometry::Geometry;
use crate::incompressible::IncompressibleFolios;
use crate::lru::Lru;
use crate::mapping::{Gate, Mapping, Moved, Reading, Stop};
use crate::page_flags::PageFlags;
use crate::read_failures::ReadFailures;
use crate::reclaim_wait::ReclaimWait;
use crate::spare::SpareHandlers;
use crate::staged::StagedFolios;
use crate::stats::RegionStats;
use crate::swapin_window::SwapinWindow;

/// The event reader: reads the region's events, and processes discards. What it may
/// touch: the parts below.
#[derive(Clone, Copy)]
pub(crate) struct Events<'a> {
    pub mapping: &'a Mapping,
    pub group: &'a ZswapGroup,
    pub geometry: Geometry,
    pub pages: &'a PageFlags,
    pub discards: &'a Discards,
    pub deferred: &'a DeferredEvents,
    /// What a processed discard drops: a staged copy, and what each policy knows of the
    /// folio.
    pub staged: &'a StagedFolios,
    pub read_failures: &'a ReadFailures,
    pub incompressible: &'a IncompressibleFolios,
    pub lru: &'a Lru,
    pub swapin_window: &'a SwapinWindow,
    /// Told when a discard has freed something.
    pub reclaim_wait: &'a ReclaimWait,
    /// A handler that waits for a folio lock leaves the userfaultfd to the spare.
    pub spares: &'a SpareHandlers,
    pub stats: &'a RegionStats,
}

impl<'a> Events<'a> {
    /// Lock the folio at `start` for an event a handler serves: a folio someone holds (a
    /// fault or readahead reading it from disk, reclaim storing or writing it) may keep the
    /// handler as long as a disk read, a `SpareHandlers::blocking` wait.
    pub(crate) fn lock_folio_for_event(&self, start: u32) -> FolioLock<'a> {
        if !self.group.is_locked(start) {
            return self.group.lock_folio(start, self.geometry.folio_order);
        }
        self.stats.folio_lock_waits.fetch_add(1, Relaxed);
        self.spares
            .blocking(|| self.group.lock_folio(start, self.geometry.folio_order))
    }

    /// `Region::holds_nothing`: nothing present, staged, held or locked for the `len`
    /// bytes at `offset`, or a discard of them read and not yet processed.
    pub(crate) fn holds_nothing(&self, offset: usize, len: usize) -> bool {
        let first = (offset / PAGE_SIZE) as u32;
        let end = (offset + len)
            .div_ceil(PAGE_SIZE)
            .min(self.mapping.len() / PAGE_SIZE) as u32;
        // A page a discard read but not yet processed covers is being let go of: its zap
        // and the drop of what the engine holds for it are on their way. The gate, held
        // shared, waits out a read of events, so a discard whose `madvise` has returned is
        // seen pending or processed.
        let gate = self.mapping.gate();
        let discarding = self.discards.pending_mask(first, end);
        drop(gate);
        (first..end).all(|p| {
            let being_discarded = discarding.as_ref().is_some_and(|d| d[(p - first) as usize]);
            let kept = self.pages.is_resident(p)
                || self.group.peek(p).kind != zswap::swap::Kind::Empty
                || self.group.is_locked(p)
                || self.staged.contains(self.geometry.folio_start(p));
            being_discarded || !kept
        })
    }

    /// Run `op` under the event gate until it is done, or the range is gone (None); on
    /// `Stop::EventsPending` the pending events are read with the gate given up
    /// (`Mapping::under_gate`).
    pub(crate) fn under_gate<T>(
        &self,
        op: impl FnMut(&mut Gate<'_>) -> Result<T, Stop>,
    ) -> Option<T> {
        self.mapping.under_gate(|| self.read_pending_events(), op)
    }

    /// Read events under the exclusive gate, recording discards as pending and applying moves
    /// before anyone can act on the state they change.
    ///
    /// A move (`mremap` of the whole region) is applied here, not when a handler gets to it: the
    /// addresses of every event read after it are in the new place, and every install computes
    /// its address under the gate, so none can use the old base once the kernel has moved the
    /// pages (until the event is read, any `UFFDIO_*` on the region fails with EAGAIN and its
    /// caller comes here). A discard's pages are taken with the base of the moment it is read,
    /// and processed as those pages, whatever moves come between.
    pub(crate) fn read_events(&self, out: &mut Vec<Event>) -> Result<usize, UffdError> {
        self.mapping.read_events(out, |events, reading| {
            for ev in events {
                match *ev {
                    Event::Remove { start, end } | Event::Unmap { start, end } => {
                        if let Some((first, last)) = self.mapping.pages_in(start, end) {
                            self.discards.read(start, end, first, last);
                        }
                    }
                    Event::Remap { from, to, len } => self.remap(reading, from, to, len),
                    _ => {}
                }
            }
        })
    }

    /// Events are pending and we hold no gate: read them for a handler to serve. The discards
    /// among them are recorded as pending at once. With none there yet (another thread read
    /// them first, and the kernel has not seen it yet), yield: the caller retries its operation.
    fn read_pending_events(&self) {
        let mut evs = Vec::new();
        let _ = self.read_events(&mut evs);
        if evs.is_empty() {
            std::thread::yield_now();
            return;
        }
        self.deferred.defer(evs);
    }

    /// Free what uzswap holds for the pages the discard of `[start, end)` covered when it was
    /// read (nothing if it missed the region).
    pub(crate) fn discard(&self, start: usize, end: usize) {
        let Some(claimed) = self.discards.claim(start, end) else {
            return;
        };
        let (first, last) = (claimed.first, claimed.last);
        let fp = self.geometry.folio_pages;
        let mut fstart = self.geometry.folio_start(first);
        let mut deadline = Instant::now() + ZAP_WAIT;
        while fstart < last {
            // Pages no folio lock ever covered (outside the swap cache's populated leaves) hold
            // nothing: an install locks its folio first, and one that locks it after this
            // discard was read finds the discard pending until it is processed, and its pages
            // marked after (`PageFlags::went_in`). So a discard costs what the program touched
            // in its range, not the range's length (a runtime's reservations).
            match self.group.cache().next_populated(fstart) {
                Some(p) if p < last => fstart = fstart.max(self.geometry.folio_start(p)),
                _ => break,
            }
            let folio = self.lock_folio_for_event(fstart);
            // A staged folio not stored yet is held by its slot alone: the pages the discard
            // does not cover go back into the mapping, and those it covers (pending, as is
            // every discard read and not processed) never do, which could land after the
            // kernel's zap. A clean one is dropped: the engine holds every page of it.
            let staged = self.staged.take(fstart);
            let put_back = match staged {
                Some(mut s) if !crate::clean::is_clean(&folio) => {
                    self.put_back(&folio, &mut s, 0, PutBack::All);
                    true
                }
                _ => false,
            };
            self.read_failures.forget(folio.offsets());
            // Whatever the program puts here next is new data: judged on its own next store.
            self.incompressible.forget(fstart);
            self.lru.forget(fstart);
            self.swapin_window.forget(fstart);
            if put_back && folio.offsets().any(|p| self.pages.is_resident(p)) {
                // Off every queue while it was staged: reclaim's again.
                self.lru.queue(fstart);
            }
            for p in folio.offsets().filter(|p| (first..last).contains(p)) {
                let mapped = self.pages.is_resident(p) && {
                    let gone = self.zapped(p, deadline);
                    if gone {
                        // The zap is under way: give it as long again for the rest of the range.
                        deadline = Instant::now() + ZAP_WAIT;
                    }
                    !gone
                };
                self.group.invalidate_page(&folio, p);
                self.pages.set_resident(p, false);
                self.pages.set_discarded(p, true);
                if mapped {
                    self.stats.discards_not_zapped.fetch_add(1, Relaxed);
                }
            }
            fstart += fp;
        }
        self.stats
            .discarded_pages
            .fetch_add(u64::from(last - first), Relaxed);
        self.discards.processed(claimed);
        self.reclaim_wait.freed();
    }

    /// Wait until the kernel has zapped the discarded page `p`, or `deadline` passes; true once
    /// it is not mapped. Nothing maps a pending page meanwhile, and its folio lock keeps reclaim
    /// from moving it out, so a page still mapped has not been zapped yet. A page that stays
    /// mapped (`MADV_FREE`, a `madvise` that failed after its event, a zap still to come) keeps
    /// its data, uncounted even when an install around it finds it present (swapin.rs,
    /// `left_mapped`), until it is unmapped and faults again. Polled: the kernel raises no event
    /// when it zaps.
    fn zapped(&self, p: u32, deadline: Instant) -> bool {
        loop {
            if !self.mapping.is_mapped(p).unwrap_or(false) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::yield_now();
        }
    }

    /// A page of the locked `folio` we count resident is not mapped: if it is marked (a discard
    /// covered it lately, see above), the kernel unmapped it after we processed the discard, and
    /// it reads zero now. Count it missing, drop the clean copy the engine may keep of it (one
    /// brought back clean since: it holds data from before the zap), and say so; false when
    /// nothing explains it.
    pub(crate) fn zapped_late(&self, folio: &FolioLock, p: u32) -> bool {
        if !self.pages.is_discarded(p) {
            return false;
        }
        self.group.invalidate_page(folio, p);
        self.pages.set_resident(p, false);
        self.stats.late_zaps.fetch_add(1, Relaxed);
        true
    }

    /// Apply a move of the region (under the exclusive gate, as it is read).
    fn remap(&self, reading: &Reading, from: usize, to: usize, len: usize) {
        match reading.moved(from, to, len) {
            Moved::Whole => {
                self.stats.remaps.fetch_add(1, Relaxed);
            }
            Moved::Part => {
                // Part of the region moved: its pages would no longer be where we serve them.
                log::warn!(
                    "mremap of part of a managed region ({len} bytes at {from:#x}) \
                    is not supported; pages there will be served as they were"
                );
            }
            Moved::Elsewhere => {}
        }
    }

    /// Return a staged folio's pages to the region, except pages with a discard pending (they
    /// are gone for the program: the next access reads zero), holding the event gate shared as
    /// every install does. The folio's first page is page `slot_page` of the slot
    /// (a batch slot holds several folios). After `PutBack::All` the pages' resident bits are
    /// set again; pending ones stay clear.
    pub(crate) fn put_back(
        &self,
        folio: &FolioLock,
        staged: &mut uffd::StagedFolio,
        slot_page: usize,
        how: PutBack,
    ) {
        let whole = slot_page == 0 && staged.len() == folio.nr_pages() as usize * PAGE_SIZE;
        // A clean folio (clean.rs) is resident with the engine's copies kept, kept honest by
        // write protection. Pages moved back come back writable (`UFFDIO_MOVE` does not carry the
        // protection), so a write would land unseen and a later clean eviction would bring the
        // old copy back: drop the copies first. We hold the folio lock, so nothing takes the
        // folio for clean in between; the folio is simply stored on its next eviction. (After a
        // failed store, `PutBack::All`, the store has left no entry already.)
        for p in folio.offsets() {
            if crate::clean::engine_has_copy(folio.state(p).kind) {
                self.group.invalidate_page(folio, p);
            }
        }
        self.under_gate(|gate| {
            // Under the gate, each time: an `mremap` read meanwhile moved the region.
            let addr = self.mapping.page_addr(folio.start());
            let pending = self.discards.pending_mask(folio.start(), folio.end());
            let result = match (&pending, how) {
                (None, PutBack::All) if whole => self
                    .mapping
                    .move_back(gate, staged, folio.start())
                    .map(all_moved)
                    .map_err(|(_, stop)| stop),
                _ => (|| {
                    for i in 0..folio.nr_pages() as usize {
                        if pending.as_ref().is_some_and(|m| m[i]) {
                            continue;
                        }
                        let s = slot_page + i;
                        let page = folio.start() + i as u32;
                        let moved = self.mapping.move_back_page(gate, staged, page, s)?;
                        // Found present only in the region, the page moved back on an earlier
                        // try of this loop (the kernel reports the present destination before
                        // the source hole), or, for `WhatMoved`, never moved.
                        if moved != uffd::Filled::All && staged.page_present(s) {
                            if how == PutBack::All {
                                all_moved(moved); // present on both sides: stops
                            }
                            // Present on both sides: the region's page never moved, yet one
                            // sits in the slot.
                            self.stats.stray_staged_pages.fetch_add(1, Relaxed);
                        }
                    }
                    Ok(())
                })(),
            };
            result?;
            if how == PutBack::All {
                for (i, p) in folio.offsets().enumerate() {
                    let gone = pending.as_ref().is_some_and(|m| m[i]);
                    self.pages.set_resident(p, !gone);
                }
            }
            // Threads that faulted on the folio while it was out wait for this.
            self.mapping
                .wake(addr, folio.nr_pages() as usize * PAGE_SIZE);
            Ok(())
        });
    }
}

/// How long processing waits for the kernel to zap a discarded range, from the start or from
/// the last page seen zapped: the kernel zaps right after the event is read, in the
/// discarding thread, once that thread runs again, in address order. Per range, not per
/// page: an `MADV_FREE` zaps nothing, and must not hold a handler for each of its pages.
const ZAP_WAIT: Duration = Duration::from_millis(20);

#[cfg(test)]
mod tests {
    use crate::{Region, RegionConfig};
    use zswap::PAGE_SIZE;

    /// The kernel's zap of page 0 coming late, behind our back: moved out of the mapping
    /// (and thrown away) while we count it resident, as only a zap does.
    fn zap_late(r: &Region) {
        let reclaim = r.inner().reclaim();
        let folio = reclaim.group.lock_folio(0, 0);
        drop(
            reclaim
                .staging
                .stage(reclaim.mapping.page_addr(0), PAGE_SIZE)
                .unwrap(),
        );
        drop(folio);
    }

    fn one_page_region() -> Region {
        let config = RegionConfig::new(8 << 20).folio_size(PAGE_SIZE);
        Region::new(16 * PAGE_SIZE, config).unwrap()
    }

    /// A page written after its discard was processed, then evicted and brought back before
    /// the discard's zap comes: the late zap leaves it reading zero, and the process goes on.
    /// Would stop the process (a lost page) if leaving for the engine ended the mark.
    #[test]
    fn a_late_zap_after_an_eviction_and_back_reads_zero() {
        let mut r = one_page_region();
        r.as_mut_slice()[..PAGE_SIZE].fill(0x11);
        r.discard(0, PAGE_SIZE).unwrap();
        r.as_mut_slice()[..PAGE_SIZE].fill(0x22);
        r.reclaim_to(0);
        assert!(!r.inner().reclaim().pages.is_resident(0), "evicted");
        assert_eq!(r.as_mut_slice()[100], 0x22, "brought back");
        zap_late(&r);
        assert!(r.as_mut_slice()[..PAGE_SIZE].iter().all(|&b| b == 0));
        let s = r.stats();
        assert_eq!((s.late_zaps, s.lost_track), (1, 0));
    }

    /// A page discarded before anything was ever there (its processing skips it: no folio
    /// lock ever covered it), then first touched before the discard's zap comes: it is marked
    /// when it goes in, so the late zap leaves it reading zero and the process goes on (a mark
    /// that lasts, where the recent discards are forgotten after `LATE_ZAP_WINDOW`). Would stop
    /// the process as a lost page without the mark.
    #[test]
    fn a_page_first_touched_after_its_discard_is_marked_for_a_late_zap() {
        let mut r = one_page_region();
        r.discard(0, PAGE_SIZE).unwrap();
        // The touch waits for the discard's processing (swapin.rs: a pending page).
        r.as_mut_slice()[..PAGE_SIZE].fill(0x44);
        assert!(
            r.inner().reclaim().pages.is_discarded(0),
            "marked as it went in"
        );
        zap_late(&r);
        assert!(r.as_mut_slice()[..PAGE_SIZE].iter().all(|&b| b == 0));
        let s = r.stats();
        assert_eq!((s.late_zaps, s.lost_track), (1, 0));
    }

    /// A page the engine keeps a clean copy of (as of a folio brought back clean), covered by
    /// a discard whose zap comes late: it reads zero, not the copy from before the zap.
    #[test]
    fn a_late_zap_of_a_page_kept_clean_drops_the_copy() {
        let mut r = one_page_region();
        r.as_mut_slice()[..PAGE_SIZE].fill(0x33);
        let region = r.inner().clone();
        {
            let reclaim = region.reclaim();
            let folio = reclaim.group.lock_folio(0, 0);
            reclaim.group.swap_out(&folio, &[0x33; PAGE_SIZE]).unwrap();
            reclaim.pages.set_discarded(0, true);
        }
        zap_late(&r);
        assert!(r.as_mut_slice()[..PAGE_SIZE].iter().all(|&b| b == 0));
        let s = r.stats();
        assert_eq!((s.late_zaps, s.lost_track), (1, 0));
        assert_eq!(
            r.zswap().stats().get("stored_pages"),
            0,
            "the copy is dropped"
        );
    }
}

/// Nothing installs into a folio without its lock, which we hold: a present page where a
/// staged one returns means the bookkeeping is wrong, and the staged pages behind it would be
/// lost with the slot. Stop (the process is stopped with us).
fn all_moved(f: uffd::Filled) {
    if let uffd::Filled::PageExists { done } = f {
        panic!("page {done} bytes into a staged folio is already present");
    }
}

/// What `put_back` returns.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum PutBack {
    /// The whole folio had left (its resident bits were cleared): all of it comes back, and
    /// a page found present in its place is a bookkeeping error (the process is stopped).
    All,
    /// A move out that failed part way (resident bits never cleared): whatever moved comes
    /// back, page by page; a page present on both sides (a stray page in the slot, the
    /// region's page never moved) stays where it is, and the stray goes with the slot.
    WhatMoved,
}
