//! Swap-in: bringing a locked folio's pages back into the mapping, for a fault (fault.rs)
//! or readahead, under the event gate (events.rs):
//! 1. the folio is staged: move it straight back;
//! 2. every page of it is held by the engine: load the whole folio and install it with one
//!    `UFFDIO_COPY`, one wake-up;
//! 3. otherwise its pages are in different places: each missing page comes back from where
//!    it is (zero-filled if nothing holds it), installed in runs. A missing page with a
//!    discard pending is not served until the discard is processed (events.rs): the faulting
//!    thread is woken to retry.
//!
//! The engine's reads (a decompression, a disk read) are done with the gate given up and the
//! folio lock kept: every handler that reads events waits for the gate alone, so it must not
//! wait for a disk. A discard read meanwhile makes the install start over.
//!
//! The engine's copy of a page is freed only once the page is installed (invariant 2). A page
//! that cannot be read back is poisoned: the program gets SIGBUS on it, never zeros
//! (invariant 7). An operation that finds events pending (EAGAIN) gives up the gate, reads
//! them, and the swap-in starts over under the same folio lock: nothing is lost, since pages
//! already installed are marked and their engine copies already freed.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

use uffd::{Filled, StagedFolio};
use zswap::swap::{FolioLock, Kind};
use zswap::zswap::LoadErrorKind;
use zswap::{ZswapGroup, PAGE_SIZE};

use crate::charge::{InFlight, Meter};
use crate::clean::CleanTracking;
use crate::discards::Discards;
use crate::events::Events;
use crate::folio_buf::with_folio_buf;
use crate::geometry::Geometry;
use crate::incompressible::IncompressibleFolios;
use crate::lru::Lru;
use crate::mapping::{Gate, Mapping, Source, Stop};
use crate::over_limit::OverLimitState;
use crate::page_flags::PageFlags;
use crate::read_failures::ReadFailures;
use crate::readahead::Readahead;
use crate::reclaim::Reclaim;
use crate::reclaim_wait::ReclaimWait;
use crate::spare::SpareHandlers;
use crate::staged::StagedFolios;
use crate::stats::RegionStats;
use crate::swapin_window::SwapinWindow;

/// Swap-in: a fault's, readahead's, and a fork's. What it may touch: the parts below.
#[derive(Clone, Copy)]
pub(crate) struct SwapIn<'a> {
    /// Installs wait on the gate, and read events where they find them pending.
    pub events: Events<'a>,
    /// Readahead makes room first.
    pub reclaim: Reclaim<'a>,
    pub meter: Meter<'a>,
    pub mapping: &'a Mapping,
    pub group: &'a ZswapGroup,
    pub geometry: Geometry,
    pub pages: &'a PageFlags,
    pub staged: &'a StagedFolios,
    pub discards: &'a Discards,
    /// Where a folio that comes in is queued, and what the policies learn from it.
    pub lru: &'a Lru,
    pub swapin_window: &'a SwapinWindow,
    pub readahead: &'a Readahead,
    pub incompressible: &'a IncompressibleFolios,
    pub clean: &'a CleanTracking,
    /// `Policies::workingset`: near refaults activate folios (workingset.rs).
    pub workingset: bool,
    pub read_failures: &'a ReadFailures,
    /// A disk read leaves the userfaultfd to the spare.
    pub spares: &'a SpareHandlers,
    /// A fork's bring-back holds reclaim off, and lets the region past its limit
    /// (fork.rs).
    pub reclaim_wait: &'a ReclaimWait,
    pub over_limit: &'a OverLimitState,
    pub stop: &'a AtomicBool,
    pub stats: &'a RegionStats,
}

/// What a swap-in brings back.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bring {
    /// What the fault on the page needs: the whole folio, or from a folio the engine holds
    /// whole maybe the page alone (swapin_window.rs).
    ForFault,
    /// Every missing page of the folio.
    All,
}

impl<'a> SwapIn<'a> {
    /// Bring the locked `folio`'s missing pages back (`page` is the one faulted on, served
    /// first), as a fault does: from staging, else from the engine. Returns the pages installed,
    /// and whether the folio was untouched before.
    pub(crate) fn swap_in(
        &self,
        folio: &FolioLock,
        page: u32,
        write: bool,
        bring: Bring,
    ) -> (u64, bool) {
        let start = folio.start();
        let mut staged = self.staged.take(start);
        // Out of the staged count and not resident yet: charged until it is (or is freed).
        let mut in_flight = InFlight::new(self.meter.in_flight);
        if let Some(s) = &staged {
            in_flight.add(s.len() as u64);
        }
        let first_touch = staged.is_none()
            && folio
                .offsets()
                .all(|p| !self.pages.is_resident(p) && folio.state(p).kind == Kind::Empty);
        // A fault on a folio the engine holds whole, or on another page of a partly-in one (a
        // hit), brings its page alone, unless it continues a scan (swapin_window.rs).
        let missing_page = bring == Bring::ForFault
            && staged.is_none()
            && !first_touch
            && !self.pages.is_resident(page);
        let hit = missing_page && self.swapin_window.fault_on(start);
        if hit {
            self.stats.page_alone_hits.fetch_add(1, Relaxed);
        }
        let page_alone = missing_page
            && (hit || self.held_whole(folio))
            && self.swapin_window.page_alone(
                self.readahead.continues_scan(start),
                self.next_to_one_in(folio, page),
            );
        // Queued for reclaim before anything goes in, so a thread that resumes on it finds it
        // reclaimable (a queue entry for a folio that ends up not coming in is skipped): in the
        // active queue if it comes back within the working set, or if a fault takes it back from
        // staging, unless a sequential scan brings it, which drops it behind instead
        // (readahead.rs).
        let activate = match &staged {
            Some(_) => bring == Bring::ForFault && self.staged_activates(start),
            None => !first_touch && self.refault_activates(folio, page),
        };
        if staged.is_none() && !first_touch && bring == Bring::ForFault {
            self.note_refault(folio, page);
        }
        match activate {
            true => self.lru.activate(start),
            false => self.lru.queue(start),
        }
        // Pages this fault found unreadable once: its own retries do not count as a second
        // failure (load_from_engine).
        let mut unread_here = Vec::new();
        let installed = self
            .events
            .under_gate(|gate| {
                let pending = self.discards.pending_mask(folio.start(), folio.end());
                let r = match staged.as_mut() {
                    Some(s) if pending.is_none() => self.move_back_staged(gate, folio, s),
                    Some(s) if !crate::clean::is_clean(folio) => {
                        // A discard touches this folio, and its slot holds the only copy.
                        self.move_back_staged_except(gate, folio, s, pending.as_deref())
                    }
                    _ => {
                        // A discard touches this folio: its staged copy must not come back (the
                        // engine holds every page of it: it is clean).
                        staged = None;
                        self.load_from_engine(
                            folio,
                            (page, page_alone),
                            write,
                            (gate, pending.as_deref()),
                            &mut unread_here,
                        )
                    }
                };
                if let Err(Stop::Gone) = r {
                    // Back on the list only whole: a slot with pages moved out of it would be
                    // stored with holes (the range is gone, so the rest goes with it).
                    if let Some(s) = staged.take() {
                        if (0..folio.nr_pages() as usize).all(|i| s.page_present(i)) {
                            self.staged.insert(start, s);
                        }
                    }
                }
                r
            })
            .unwrap_or(0);
        drop(staged);
        if page_alone && self.pages.is_resident(page) {
            self.swapin_window.brought_page_alone(start);
        }
        if folio.offsets().all(|p| self.pages.is_resident(p))
            && self.swapin_window.completed(start)
            && bring == Bring::ForFault
        {
            // The whole folio is in now, as if brought at once: a sequential scan goes on from it.
            self.swapped_in(start);
        }
        self.stats.pages_in.fetch_add(installed, Relaxed);
        if installed > 0 && !first_touch && self.incompressible.is_marked(start) {
            // Back from a store as-is (a kept folio never left): refault detection.
            self.incompressible.refaulted();
            self.stats.incompressible_refaults.fetch_add(1, Relaxed);
        }
        (installed, first_touch)
    }

    /// A page beside `page` in its folio is in.
    fn next_to_one_in(&self, folio: &FolioLock, page: u32) -> bool {
        let before = page > folio.start() && self.pages.is_resident(page - 1);
        let after = page + 1 < folio.end() && self.pages.is_resident(page + 1);
        before || after
    }

    /// Every page of the folio is out of the mapping and held by the engine.
    fn held_whole(&self, folio: &FolioLock) -> bool {
        folio
            .offsets()
            .all(|p| !self.pages.is_resident(p) && folio.state(p).kind != Kind::Empty)
    }

    /// A fault takes the folio back from staging: it was used while reclaim had it, so it is
    /// activated, as the kernel activates an anonymous folio reclaim finds referenced
    /// (`folio_check_references`); but not one a sequential scan passed, nor one stored as-is
    /// (as `refault_activates`).
    fn staged_activates(&self, start: u32) -> bool {
        let activate = self.workingset
            && !self.readahead.dropped_behind_soon(start)
            && !self.incompressible.is_marked(start);
        if activate {
            self.stats.staged_activate.fetch_add(1, Relaxed);
        }
        activate
    }

    /// The folio comes back from the engine (counted as a refault): whether it is activated
    /// (workingset.rs), by the refault distance read from the faulting page's shadow before the
    /// load replaces it. Not one a sequential scan brings, which drops it behind instead
    /// (readahead.rs), nor one stored as-is, which the incompressible policy keeps resident on
    /// its own terms (incompressible.rs).
    fn refault_activates(&self, folio: &FolioLock, page: u32) -> bool {
        let Some(distance) = self.group.refault_distance(folio, page) else {
            return false;
        };
        self.stats.workingset_refault.fetch_add(1, Relaxed);
        let activate =
            crate::workingset::activates(self.workingset, distance, self.pages.nr_resident())
                && !self.readahead.dropped_behind_soon(folio.start())
                && !self.incompressible.is_marked(folio.start());
        if activate {
            self.stats.workingset_activate.fetch_add(1, Relaxed);
        }
        activate
    }

    /// The folio comes back from the engine for a fault: the pool's share counts what a
    /// larger resident share or pool would have saved (pool_share.rs), by the refault
    /// distance and, from the disk, the writeback distance, read before the load.
    fn note_refault(&self, folio: &FolioLock, page: u32) {
        let Some(share) = self.reclaim.pool_share else {
            return;
        };
        let from_disk = match folio.state(page).kind {
            Kind::Stored => false,
            Kind::OnDisk => true,
            _ => return, // nothing to read back: a same-filled page, or nothing
        };
        let Some(distance) = self.group.refault_distance(folio, page) else {
            return;
        };
        let (near_resident, near_pool) = share.refaulted(crate::pool_share::Refault {
            from_disk,
            distance,
            writeback_distance: self.group.writeback_distance(folio, page),
        });
        if near_resident {
            self.stats.refaults_near_resident.fetch_add(1, Relaxed);
        }
        if near_pool {
            self.stats.refaults_near_pool.fetch_add(1, Relaxed);
        }
    }

    /// The folio is still staged: move it back. A clean one's engine copy is dropped, since the
    /// program may now write the page. Not a swap-in for readahead's streams: a folio found
    /// in use on the inactive list is a referenced check, and taken for a scan it would drop
    /// behind the folios between it and the last swap-in, the hot ones the list just kept.
    fn move_back_staged(
        &self,
        gate: &Gate,
        folio: &FolioLock,
        staged: &mut StagedFolio,
    ) -> Result<u64, Stop> {
        match self.mapping.move_back(gate, staged, folio.start()) {
            Ok(Filled::All) => {}
            Ok(Filled::PageExists { done }) => {
                // Nothing installs into a folio without its lock, which we hold: a present page
                // here means the bookkeeping is wrong, and dropping the staged pages behind it
                // would lose data. Stop (the process is stopped with us).
                panic!("page {done} bytes into a staged folio is already present");
            }
            Err((done, Stop::EventsPending)) => {
                // The pages moved before the stop are in the region, writable: settle them as
                // an install does. Left uncounted, with the engine's copies kept, they would stay
                // outside the limit, and a later install would count copies they have outgrown.
                // (The retry goes on after them: the staged folio keeps its progress, since a
                // move from the start again would find them present and stop there.)
                for p in folio.start()..folio.start() + (done / PAGE_SIZE) as u32 {
                    self.pages.set_resident(p, true);
                    self.group.invalidate_page(folio, p);
                }
                return Err(Stop::EventsPending);
            }
            Err((_, Stop::Gone)) => return Err(Stop::Gone),
        }
        for p in folio.offsets() {
            self.pages.set_resident(p, true);
        }
        self.group.invalidate(folio);
        self.stats.faults_staged.fetch_add(1, Relaxed);
        Ok(u64::from(folio.nr_pages()))
    }

    /// The staged folio, not stored, has pages with a discard pending (`pending`): move back
    /// the others, page by page. The pending ones stay in the slot, to go with it: moved back,
    /// they could land after the kernel's zap. (A faulting thread on one of them retries, and
    /// waits for the discard to be processed.) A stop leaves what moved settled, and the retry
    /// goes on with the pages still in the slot.
    fn move_back_staged_except(
        &self,
        gate: &Gate,
        folio: &FolioLock,
        staged: &mut StagedFolio,
        pending: Option<&[bool]>,
    ) -> Result<u64, Stop> {
        let mut moved = 0;
        for (i, p) in folio.offsets().enumerate() {
            if pending.is_some_and(|m| m[i]) || !staged.page_present(i) {
                continue;
            }
            // Writable once back: an engine copy kept (a folio partly clean) would be older
            // than the page (invariant 2), as in `move_back_staged`.
            if crate::clean::engine_has_copy(folio.state(p).kind) {
                self.group.invalidate_page(folio, p);
            }
            match self.mapping.move_back_page(gate, staged, p, i)? {
                Filled::All => {}
                Filled::PageExists { .. } => {
                    // As in `move_back_staged`: nothing installs without the folio lock.
                    panic!("page {p} of a staged folio is already present");
                }
            }
            self.pages.set_resident(p, true);
            moved += 1;
        }
        self.stats.faults_staged.fetch_add(1, Relaxed);
        Ok(moved)
    }

    /// Bring the folio's missing pages back from the engine, or with `page_alone` only the
    /// faulted `page`. `pending`: pages with a discard pending, read under `gate`; if any of them
    /// is missing, nothing is installed yet.
    fn load_from_engine(
        &self,
        folio: &FolioLock,
        (page, page_alone): (u32, bool),
        write: bool,
        (gate, pending): (&mut Gate, Option<&[bool]>),
        unread_here: &mut Vec<u32>,
    ) -> Result<u64, Stop> {
        let nr = folio.nr_pages() as usize;
        let is_pending = |p: u32| pending.is_some_and(|m| m[(p - folio.start()) as usize]);
        let mut missing: Vec<u32> = folio
            .offsets()
            .filter(|&p| !self.pages.is_resident(p) && (!page_alone || p == page))
            .collect();
        if missing.is_empty() {
            if is_pending(page) || self.mapping.in_mapping(page).unwrap_or(true) {
                // Installed meanwhile by someone who held the folio before us (or discarded, and
                // the discard is about to be processed), and maybe swapped out by the kernel
                // since: an access swaps it back in without a userfault.
                self.stats.redundant.fetch_add(1, Relaxed);
                self.mapping.wake(self.mapping.page_addr(page), PAGE_SIZE);
                return Ok(0);
            }
            self.lost_track(folio, page);
            missing.push(page);
        }
        if missing.iter().any(|&p| is_pending(p)) {
            // A discard of some of these pages is read but not processed yet. Installed now, a
            // page could land before the kernel's zap (and be zapped while counted resident) or
            // after it, and then be processed away with the discard: a write the program made
            // after its madvise returned would be lost. Wait for the processing (events.rs),
            // which waits for the zap; the faulting thread retries meanwhile.
            self.stats.redundant.fetch_add(1, Relaxed);
            self.mapping.wake(self.mapping.page_addr(page), PAGE_SIZE);
            return Ok(0);
        }
        let whole = pending.is_none()
            && missing.len() == nr
            && folio.offsets().all(|p| folio.state(p).kind != Kind::Empty);
        let first_touch = folio.offsets().all(|p| folio.state(p).kind == Kind::Empty);
        with_folio_buf(nr, |buf| {
            if whole && self.load_whole(folio, write, buf, gate)? {
                self.stats.faults_folio.fetch_add(1, Relaxed);
                self.swapped_in(folio.start());
                return Ok(nr as u64);
            }
            // Page by page: each missing page from wherever it is; runs installed together.
            let mut poisoned = Vec::new();
            let mut unread = 0;
            let mut ready = vec![false; nr];
            let mut reads = || {
                for &p in &missing {
                    let i = (p - folio.start()) as usize;
                    let out = &mut buf[i * PAGE_SIZE..(i + 1) * PAGE_SIZE];
                    match self.group.read_page(folio, p, out) {
                        Ok(Kind::Empty) => {
                            // A first touch installs from `ZEROS` (every run of it is a zero
                            // run): nothing to clear here.
                            if !first_touch {
                                out.fill(0);
                            }
                            ready[i] = true;
                        }
                        Ok(_) => {
                            ready[i] = true;
                            self.read_failures.forget(std::iter::once(p));
                        }
                        Err(e)
                            if e.kind == LoadErrorKind::ReadError
                                && (unread_here.contains(&p) || self.read_failures.first(p)) =>
                        {
                            // The first time the device fails this page, it is left missing
                            // rather than poisoned: a fault event can be stale (its thread was
                            // woken by an install since, and the page evicted again), and
                            // poisoning destroys what a transient error had only hidden. A
                            // thread still waiting is woken with the rest and faults again; then
                            // the page is poisoned. (This fault starting over, after events, is
                            // not a second fault.)
                            if !unread_here.contains(&p) {
                                unread_here.push(p);
                            }
                            unread += 1;
                        }
                        Err(_) => {
                            self.read_failures.forget(std::iter::once(p));
                            poisoned.push(p);
                        }
                    }
                }
            };
            let on_disk = missing.iter().any(|&p| folio.state(p).kind == Kind::OnDisk);
            Gate::unlocked(gate, || match on_disk {
                true => self.spares.blocking(&mut reads),
                false => reads(),
            });
            self.discard_read_meanwhile(folio, missing.iter().copied())?;
            let mut i = 0;
            while i < nr {
                if !ready[i] {
                    i += 1;
                    continue;
                }
                let mut j = i;
                while j < nr && ready[j] {
                    j += 1;
                }
                let first = folio.start() + i as u32;
                let zero_run = (i..j).all(|k| {
                    let p = folio.start() + k as u32;
                    let st = folio.state(p);
                    st.kind == Kind::Empty || (st.kind == Kind::Zero && st.payload == 0)
                });
                let mut present = Vec::new();
                // A zero run comes from zeros, whatever the buffer holds (a first touch leaves
                // it as it was).
                let src = match zero_run {
                    true => Source::Zeros {
                        len: (j - i) * PAGE_SIZE,
                        write,
                    },
                    false => Source::Data(&buf[i * PAGE_SIZE..j * PAGE_SIZE]),
                };
                // Read, it goes in write-protected where writes are tracked: a write later is
                // what reclaim sees (reclaim.rs, `referenced`).
                let protect = !write && self.mapping.tracks_writes();
                let r = self.install(gate, first, src, protect, &mut present);
                self.installed_run(folio, first, j - i, r, &present)?;
                i = j;
            }
            for &p in &poisoned {
                self.poison(gate, folio, p)?;
            }
            let counter = if first_touch {
                &self.stats.faults_first_touch
            } else if page_alone {
                &self.stats.faults_page_alone
            } else {
                &self.stats.faults_pages
            };
            counter.fetch_add(1, Relaxed);
            Ok((missing.len() - poisoned.len() - unread) as u64)
        })
    }

    /// Load the whole folio, every page of which the engine holds, and install it with one copy
    /// (the caller has queued it for reclaim). False when the load failed: the caller falls back
    /// to page by page, which finds and poisons the bad page.
    fn load_whole(
        &self,
        folio: &FolioLock,
        write: bool,
        buf: &mut [u8],
        gate: &mut Gate,
    ) -> Result<bool, Stop> {
        let nr = folio.nr_pages() as usize;
        let on_disk = folio.offsets().any(|p| folio.state(p).kind == Kind::OnDisk);
        let loaded = Gate::unlocked(gate, || match on_disk {
            true => self.spares.blocking(|| self.group.read_folio(folio, buf)),
            false => self.group.read_folio(folio, buf),
        });
        self.discard_read_meanwhile(folio, folio.offsets())?;
        let Ok(loaded) = loaded else {
            return Ok(false);
        };
        self.read_failures.forget(folio.offsets());
        let from_disk = loaded.disk == nr as u32;
        // Only read so far, and all of it from disk, or part of a scan that drops it behind
        // soon: keep the engine's copy (clean.rs).
        let clean = !write
            && (from_disk || self.readahead.dropped_behind_soon(folio.start()))
            && self.clean.keep();
        let mut present = Vec::new();
        let protect = clean || (!write && self.mapping.tracks_writes());
        let result = self.install(
            gate,
            folio.start(),
            Source::Data(buf),
            protect,
            &mut present,
        );
        if clean {
            self.installed_clean(folio, result, &present)?;
        } else {
            self.installed_run(folio, folio.start(), nr, result, &present)?;
        }
        Ok(true)
    }

    /// The engine reads a folio's pages with the gate given up (`Gate::unlocked`): a read from
    /// disk can take milliseconds, and every handler that reads events waits for the gate alone,
    /// so held across the read it would make every fault wait for the disk. The folio lock, held
    /// throughout, keeps reclaim, other faults and a discard's processing away from the folio; a
    /// discard *read* meanwhile is seen here, once the gate is held again, and the install
    /// starts over (it then waits for the processing, as any install does).
    fn discard_read_meanwhile(
        &self,
        folio: &FolioLock,
        mut to_install: impl Iterator<Item = u32>,
    ) -> Result<(), Stop> {
        match self.discards.pending_mask(folio.start(), folio.end()) {
            Some(m) if to_install.any(|p| m[(p - folio.start()) as usize]) => {
                Err(Stop::EventsPending)
            }
            _ => Ok(()),
        }
    }

    /// The page faulted as missing, is not mapped, and yet is marked resident: our bookkeeping
    /// lost track of it, and without this the faulting thread would be woken to fault again
    /// forever. If the engine holds the page, it is served from there; if nothing does, its data
    /// is gone, and the process is stopped rather than handed zeros (invariant 7).
    fn lost_track(&self, folio: &FolioLock, page: u32) {
        if self.events.zapped_late(folio, page) {
            return; // served as the zero page it now is
        }
        let held = folio.state(page).kind != Kind::Empty;
        self.stats.lost_track.fetch_add(1, Relaxed);
        // What the folio looks like, for the report: state, resident, mapped, page by page.
        let pages: Vec<String> = folio
            .offsets()
            .map(|p| {
                let mapped = self.mapping.is_mapped(p).unwrap_or(true);
                let (r, m) = (self.pages.is_resident(p) as u8, mapped as u8);
                format!(
                    "{p}:{:?}/r{r}/m{m}/{}",
                    folio.state(p).kind,
                    self.pages.trail(p)
                )
            })
            .collect();
        crate::threads::report(format_args!(
            "uzswap: bug: page {page} is marked resident but is not mapped; the engine {} it; \
            pagemap entry {}; folio {}; {:?}",
            if held { "holds" } else { "does not hold" },
            self.mapping.pagemap_entry(page),
            pages.join(" "),
            self.stats.snapshot(),
        ));
        assert!(
            held,
            "page {page} lost: stopping rather than handing out zeros"
        );
        self.pages.set_resident(page, false);
    }

    /// After an install of `n` pages from `first`: mark what went in as present and free the
    /// engine's copies of it (invariant 2: only now). On a stop, the pages that went in before it
    /// are settled the same way, so starting over never installs a page twice.
    fn installed_run(
        &self,
        folio: &FolioLock,
        first: u32,
        n: usize,
        result: Result<(), (usize, Stop)>,
        present: &[u32],
    ) -> Result<(), Stop> {
        let (done, stop) = match result {
            Ok(()) => (n, None),
            Err((done_bytes, stop)) => (done_bytes / PAGE_SIZE, Some(stop)),
        };
        self.count_swapins(folio, first, done, present);
        for p in first..first + done as u32 {
            if self.left_mapped(p, present) {
                continue;
            }
            self.pages.set_resident(p, true);
            self.group.invalidate_page(folio, p);
        }
        self.pages
            .went_in(first, first + done as u32, self.discards);
        match stop {
            None => Ok(()),
            Some(s) => Err(s),
        }
    }

    /// A folio installed write-protected with its disk copy kept: mark what went in as present
    /// and wake the faulting threads; the engine keeps every entry (clean.rs). On a stop, the
    /// pages that went in stay so (clean, protected) and the rest are served again.
    fn installed_clean(
        &self,
        folio: &FolioLock,
        result: Result<(), (usize, Stop)>,
        present: &[u32],
    ) -> Result<(), Stop> {
        let nr = folio.nr_pages() as usize;
        let (done, stop) = match result {
            Ok(()) => (nr, None),
            Err((done_bytes, stop)) => (done_bytes / PAGE_SIZE, Some(stop)),
        };
        self.count_swapins(folio, folio.start(), done, present);
        for p in folio.start()..folio.start() + done as u32 {
            if !self.left_mapped(p, present) {
                self.pages.set_resident(p, true);
            }
        }
        if done > 0 {
            self.stats.clean_installs.fetch_add(1, Relaxed);
            self.clean.installed();
        }
        match stop {
            None => Ok(()),
            Some(s) => Err(s),
        }
    }

    /// Count the swap-ins (zswpin, pswpin, swpin_zero) of the pages `first..first + done` of
    /// `folio` that an install put in (not those it found `present`), by where the engine held
    /// them: one swap-in of the folio's order when the engine held the whole folio and all of
    /// it went in at once, else one of order 0 a page. Counted here, once the install went
    /// through and before the entries go, not by the engine's load: a fault that starts over
    /// loads again, and would count its pages twice.
    fn count_swapins(&self, folio: &FolioLock, first: u32, done: usize, present: &[u32]) {
        let installed = || (first..first + done as u32).filter(|p| !present.contains(p));
        let whole = first == folio.start()
            && done == folio.nr_pages() as usize
            && present.is_empty()
            && installed().all(|p| folio.state(p).kind != Kind::Empty);
        let mut loaded = zswap::zswap::Loaded::default();
        for p in installed() {
            let kind = folio.state(p).kind;
            if whole {
                loaded.add(kind);
            } else if kind != Kind::Empty {
                let mut one = zswap::zswap::Loaded::default();
                one.add(kind);
                self.group.count_swapin(one, 0);
            }
        }
        if whole {
            self.group.count_swapin(loaded, folio.order());
        }
    }

    /// A page an install found present that a discard left mapped (events.rs: `MADV_FREE`, or a
    /// zap later than the wait) stays uncounted: counted resident, reclaim could move it out
    /// ahead of a late zap and bring its old data back after the program's `madvise` returned.
    /// Its mark may not be there yet: a lazy region's page the kernel mapped before the range
    /// was registered, never locked, is not marked by the discard's processing (adopt.rs).
    fn left_mapped(&self, p: u32, present: &[u32]) -> bool {
        present.contains(&p) && (self.pages.is_discarded(p) || self.discards.recently_covered(p))
    }

    /// Install `src` at page `first` of the region (`Mapping::install`), counting the pages it
    /// found present as redundant.
    fn install(
        &self,
        gate: &Gate,
        first: u32,
        src: Source,
        protect: bool,
        present: &mut Vec<u32>,
    ) -> Result<(), (usize, Stop)> {
        let before = present.len();
        let r = self.mapping.install(gate, first, src, protect, present);
        self.stats
            .redundant
            .fetch_add((present.len() - before) as u64, Relaxed);
        r
    }

    /// The page cannot be read back: the program gets SIGBUS on it, not zeros. A page poisoned
    /// already (a second fault on it was queued before its marker went in) gets the marker again
    /// (it is there: the ioctl finds it) and is not counted twice.
    fn poison(&self, gate: &Gate, folio: &FolioLock, page: u32) -> Result<(), Stop> {
        let again = folio.state(page).kind == Kind::Poisoned;
        self.mapping.poison(gate, page)?;
        if !again {
            self.group.mark_poisoned(folio, page);
            self.stats.poisoned.fetch_add(1, Relaxed);
            // Rare and final for the page's data: say which page, once.
            log::error!(
                "page {page} of the region cannot be read back: poisoned (SIGBUS on access)"
            );
        }
        Ok(())
    }

    /// A whole folio was swapped in at `start`: readahead decides whether a scan goes on
    /// (readahead.rs); the folios it passed are dropped behind. Worth reading ahead: a folio
    /// that `read_ahead` would bring in, as it looks without its lock.
    fn swapped_in(&self, start: u32) {
        let worth = |next: u32| {
            (next..next + self.geometry.folio_pages)
                .all(|p| !self.pages.is_resident(p) && self.group.peek(p).kind == Kind::OnDisk)
        };
        if let Some(passed) = self.readahead.swapped_in(start, worth) {
            self.lru.drop_behind(passed);
        }
    }

    /// A readahead thread: bring in the folios readahead queues.
    pub(crate) fn readahead_loop(&self) {
        while !self.stop.load(Relaxed) {
            if let Some(start) = self.readahead.next(Duration::from_millis(100)) {
                self.read_ahead(start);
                self.meter.thread_scratch.charge_this_thread();
            }
        }
    }

    /// Bring in the folio at `start` if it is wholly out and wholly on disk, as a read fault
    /// would (clean, so reclaiming it unwritten costs nothing). Faults never wait for readahead:
    /// a fault on a queued folio serves itself, and the readahead finds it resident and skips it.
    fn read_ahead(&self, start: u32) {
        // Read ahead only into room under the limit.
        if !self.reclaim.make_room() {
            return;
        }
        let folio = self.group.lock_folio(start, self.geometry.folio_order);
        let out_on_disk = folio
            .offsets()
            .all(|p| !self.pages.is_resident(p) && folio.state(p).kind == Kind::OnDisk);
        if !out_on_disk || self.staged.contains(start) {
            return;
        }
        let mut gate = self.mapping.gate();
        if self
            .discards
            .pending_mask(folio.start(), folio.end())
            .is_some()
        {
            return; // a discard is on its way: leave the folio to it
        }
        self.lru.queue(start);
        let done = with_folio_buf(folio.nr_pages() as usize, |buf| {
            self.load_whole(&folio, false, buf, &mut gate)
        });
        drop(gate);
        drop(folio);
        // On a stop (events pending, range gone) what went in is settled; the rest stays out.
        if let Ok(true) = done {
            self.stats.readahead_folios.fetch_add(1, Relaxed);
        }
        // Threads that faulted on the folio before it went in resume now, rather than when a
        // handler reads their fault and finds the folio present.
        self.mapping
            .wake(self.mapping.page_addr(start), self.geometry.folio_bytes());
    }
}
