//! Faults: a program's access to a page of the region that is not there (missing), or a
//! write to a page installed write-protected (clean.rs).
//!
//! A fault locks its folio in the engine's swap cache: the first thread to fault a folio owns
//! it, and others (another fault, reclaim, a discard) wait on it there. Under the lock, and
//! holding the event gate shared (events.rs), the folio is brought back (swapin.rs). A fault
//! that would take the region past its limit reclaims first, before taking its lock, and is
//! throttled (over_limit.rs) when nothing could go. The
//! faulting threads are woken once the folio is unlocked.
//!
//! A first touch maps the untouched folios after it too (fault-around).

use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use zswap::swap::{FolioLock, Kind};
use zswap::{ZswapGroup, PAGE_SIZE};

use crate::charge::Meter;
use crate::clean::CleanTracking;
use crate::discards::Discards;
use crate::events::Events;
use crate::geometry::Geometry;
use crate::lru::Lru;
use crate::mapping::{Mapping, Stop};
use crate::over_limit::OverLimit;
use crate::page_flags::PageFlags;
use crate::reclaim::Reclaim;
use crate::reclaim_wait::ReclaimWait;
use crate::staged::StagedFolios;
use crate::stats::{FaultSource, RegionStats};
use crate::swapin::{Bring, SwapIn};
use crate::throttle::Throttle;
use crate::unevictable::Unevictable;

/// The fault path. What it may touch: the actions it calls on, and the parts below.
#[derive(Clone, Copy)]
pub(crate) struct Faults<'a> {
    pub events: Events<'a>,
    pub reclaim: Reclaim<'a>,
    pub swapin: SwapIn<'a>,
    pub throttle: Throttle<'a>,
    pub meter: Meter<'a>,
    pub mapping: &'a Mapping,
    pub group: &'a ZswapGroup,
    pub geometry: Geometry,
    pub pages: &'a PageFlags,
    pub staged: &'a StagedFolios,
    pub discards: &'a Discards,
    pub unevictable: &'a Unevictable,
    pub lru: &'a Lru,
    pub clean: &'a CleanTracking,
    pub over_limit_config: OverLimit,
    pub reclaim_wait: &'a ReclaimWait,
    pub stats: &'a RegionStats,
}

impl Faults<'_> {
    /// The page a faulting `addr` falls in and the start of its folio. None for an address that
    /// is not the region's (an mremap moved the region under a pending fault): the faulting
    /// thread is woken to retry.
    fn faulting_folio(&self, addr: usize) -> Option<(u32, u32)> {
        let Some(page) = self.mapping.page_of(addr) else {
            self.mapping.wake(addr & !(PAGE_SIZE - 1), PAGE_SIZE);
            return None;
        };
        Some((page, self.geometry.folio_start(page)))
    }

    /// Bring back the folio holding `addr`. False if left undone, for a regular handler: the spare
    /// found the folio held (spare.rs), or the region over its limit with throttling on.
    pub(crate) fn serve_fault(&self, addr: usize, write: bool) -> bool {
        let t0 = Instant::now();
        let base_at_fault = self.mapping.base();
        let Some((page, start)) = self.faulting_folio(addr) else {
            return true;
        };
        if self.spare_leaves(start) {
            return false;
        }
        if !self.reclaim.make_room() {
            let enforced = self.over_limit_config.throttle || self.meter.memory_max() != u64::MAX;
            if crate::spare::is_spare() && enforced {
                // The spare keeps the userfaultfd served; a fault that may sleep or wait for
                // reclaim over the limit waits for a regular handler.
                return false;
            }
            self.throttle
                .handle_over_limit(self.geometry.folio_bytes() as u64);
        }
        let folio = self.events.lock_folio_for_event(start);
        self.stats.faults.fetch_add(1, Relaxed);
        let kinds = || folio.offsets().map(|p| folio.state(p).kind);
        let source = if kinds().any(|k| k == Kind::OnDisk) {
            FaultSource::Device
        } else if kinds().any(|k| k == Kind::Stored) {
            FaultSource::Pool
        } else {
            FaultSource::Other
        };
        let (installed, first_touch) = self.swapin.swap_in(&folio, page, write, Bring::ForFault);
        drop(folio);
        // The faulting threads are woken only now, with the folio lock and the event gate given
        // up: the scheduler often runs a woken thread on the waker's CPU at once, and a handler
        // preempted while holding them would stall every other fault and the event reader.
        self.mapping
            .wake(self.mapping.page_addr(start), self.geometry.folio_bytes());
        if self.mapping.base() != base_at_fault {
            // The region moved (mremap) since this thread faulted at its old place: it waits on
            // that address, and only a wake there releases it (to fault again where it is now).
            self.mapping.wake(addr & !(PAGE_SIZE - 1), PAGE_SIZE);
        }
        if first_touch && installed > 0 {
            self.fault_around(start + self.geometry.folio_pages, write);
        }
        self.stats.record_latency(t0.elapsed(), source);
        if self.meter.usage().total()
            > self
                .meter
                .limit()
                .saturating_sub(self.geometry.folio_bytes() as u64 * 4)
        {
            self.reclaim_wait.wake_kswapd();
        }
        true
    }

    /// After a first-touch fault: the next untouched folios are mapped too, while the limit has
    /// room for them, so a program filling fresh memory faults once per window instead of once
    /// per folio (the kernel spares anonymous first touches the same way with fault-around and
    /// THP). The window is as long as the run already in just before the faulting folio, from
    /// 256 KiB to 2 MiB (a transparent huge page's size): a program filling memory upward (a
    /// runtime pre-touching its heap, an allocator growing its arena) is mapped ahead in ever
    /// larger steps, as readahead ramps up on a stream, while a touch on its own, or a short
    /// program's few, map 256 KiB. After a write they get zero-filled pages, writable at once
    /// (the zero page would cost a copy-on-write fault, and a TLB flush, for every page
    /// written); after a read, the zero page, which costs no memory until written. They count
    /// as resident from now on, so the limit holds however the program uses them. Stops at the
    /// first folio that is not untouched, or that has a page under another protection than
    /// read-write (a reservation not committed: zeroes there would stay resident, and
    /// unevictable).
    fn fault_around(&self, from: u32, write: bool) {
        let folio_bytes = self.geometry.folio_bytes();
        let fp = self.geometry.folio_pages;
        let faulted = from - fp;
        // The run in before it, by the last page of each folio.
        let max_pages = (FAULT_AROUND_MAX_BYTES / PAGE_SIZE) as u32;
        let mut before = 0;
        while before < max_pages && before < faulted && self.pages.is_resident(faulted - before - 1)
        {
            before += fp;
        }
        let bytes = (before as usize * PAGE_SIZE).clamp(FAULT_AROUND_BYTES, FAULT_AROUND_MAX_BYTES);
        let window = (bytes / folio_bytes) as u32;
        let room = self.meter.limit().saturating_sub(self.meter.limit() / 64);
        if window == 0 || self.meter.usage().total() + (bytes as u64) > room {
            return;
        }
        let nr_pages = (self.mapping.len() / PAGE_SIZE) as u32;
        let untouched =
            |p: u32| !self.pages.is_resident(p) && self.group.peek(p).kind == Kind::Empty;
        // The run of untouched folios, locked: the first waited for (nothing else held), the
        // rest only taken if free (lock_order.rs). Each checked again under its lock.
        let mut run: Vec<FolioLock> = Vec::new();
        for k in 0..window {
            let start = from + k * fp;
            if start + fp > nr_pages
                || self.unevictable.any_protected(start, start + fp)
                || self.group.cache().is_locked(start)
                || !(start..start + fp).all(untouched)
            {
                break;
            }
            let folio = match run.is_empty() {
                true => self.group.lock_folio(start, self.geometry.folio_order),
                false => match self.group.try_lock_folio(start, self.geometry.folio_order) {
                    Some(folio) => folio,
                    None => break,
                },
            };
            let still = folio
                .offsets()
                .all(|p| !self.pages.is_resident(p) && folio.state(p).kind == Kind::Empty);
            if !still || self.staged.contains(start) {
                break;
            }
            run.push(folio);
        }
        let Some(last) = run.last() else {
            return;
        };
        let (first, end) = (from, last.end());
        let gate = self.mapping.gate();
        if self.discards.pending_mask(first, end).is_some() {
            return;
        }
        // Queued before anything goes in, as a fault does (a stale entry is skipped).
        for folio in &run {
            self.lru.queue(folio.start());
        }
        // One call for the run. Present already (not ours to know of), or the mapping is
        // changing: what went in before the stop is settled, the rest left to faults.
        let len = (end - first) as usize * PAGE_SIZE;
        let addr = self.mapping.page_addr(first);
        let done = match self.mapping.map_zeros(&gate, first, len, write) {
            Ok(()) => len,
            Err(done) => done,
        };
        let done_pages = (done / PAGE_SIZE) as u32;
        for p in first..first + done_pages {
            self.pages.set_resident(p, true);
        }
        self.pages.went_in(first, first + done_pages, self.discards);
        // Brought in by the fault that triggered it: counted in its pages per fault.
        self.stats
            .pages_in
            .fetch_add(u64::from(done_pages), Relaxed);
        self.stats
            .fault_around
            .fetch_add(u64::from(done_pages.div_ceil(fp)), Relaxed);
        // Threads that faulted in the run meanwhile are woken only now, with the pages
        // counted and the locks given up (as `serve_fault` wakes its own).
        drop(gate);
        drop(run);
        self.mapping.wake(addr, len);
    }

    /// A write hit a write-protected page of the region at `addr`. False if left undone, as
    /// `serve_fault`.
    pub(crate) fn serve_wp_fault(&self, addr: usize) -> bool {
        let Some((_, start)) = self.faulting_folio(addr) else {
            return true;
        };
        if self.spare_leaves(start) {
            return false;
        }
        let folio = self.events.lock_folio_for_event(start);
        self.stats.wp_faults.fetch_add(1, Relaxed);
        // The folio's pages are one unit: the engine's copies of all of them go, so reclaim
        // stores the folio whole next time.
        let mut dropped = false;
        for p in folio.offsets() {
            if self.pages.is_resident(p) && crate::clean::engine_has_copy(folio.state(p).kind) {
                self.group.invalidate_page(&folio, p);
                dropped = true;
            }
        }
        if dropped {
            self.clean.dirtied();
        }
        let len = folio.nr_pages() as usize * PAGE_SIZE;
        // Lifts the protection of whatever is present and wakes the writers; a page moved out
        // meanwhile faults again as missing. A gone range ends it too: the writers are woken where
        // it was.
        let unprotected = self.events.under_gate(|gate| {
            // Under the gate: an `mremap` of the region is applied as it is read (events.rs).
            let folio_addr = self.mapping.page_addr(start);
            match self.mapping.write_unprotect(gate, folio_addr, len) {
                Ok(()) | Err(Stop::Gone) => Ok(folio_addr),
                Err(Stop::EventsPending) => Err(Stop::EventsPending),
            }
        });
        if let Some(folio_addr) = unprotected {
            self.mapping.wake(folio_addr, len);
        }
        true
    }

    /// This thread is the spare and the fault's folio at `start` is held: the fault is left to
    /// a regular handler (only they may wait for a folio, spare.rs). A holder that comes between
    /// this check and the lock is waited for, as any handler would.
    fn spare_leaves(&self, start: u32) -> bool {
        let leave = crate::spare::is_spare() && self.group.is_locked(start);
        if leave {
            self.stats.spare_deferred.fetch_add(1, Relaxed);
        }
        leave
    }
}

/// How far past a first touch untouched memory is mapped at once, at least.
const FAULT_AROUND_BYTES: usize = 256 << 10;
/// And at most, past a first touch that continues a long run in (`fault_around`): a
/// transparent huge page's size.
const FAULT_AROUND_MAX_BYTES: usize = 2 << 20;
