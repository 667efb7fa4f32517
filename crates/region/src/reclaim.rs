//! Reclaim: keeps a region's resident + staged + pool bytes under its limit, in folios.
//!
//! A kswapd thread works in the background down to a low watermark below the limit; a fault
//! that would take the region past the limit reclaims first (direct reclaim), before it takes
//! its own folio lock, so it never holds one folio while waiting for another.
//!
//! The coldest folio is the one that came in longest ago (FIFO), except that folios a
//! sequential scan has passed go first (drop-behind, readahead.rs), folios met shared with
//! a forked child and unshared since go before them (shared_folios.rs), and folios found
//! incompressible that came back in are passed over (incompressible.rs). With the inactive
//! list (`Policies::inactive_list`), reclaim has two hands, as the kernel's LRU has an active
//! and an inactive list:
//! 1. deactivate: the coldest resident folio, locked in the engine's swap cache (waiting for a
//!    fault that owns it), is moved out of the mapping with one `UFFDIO_MOVE` into staging,
//!    uncompressed (staged.rs, reclaim's inactive list, kept at its target). From here a
//!    program access faults, waits for the lock, and moves the folio straight back, activated:
//!    the referenced check, reads included, that the kernel makes with the accessed bit;
//! 2. evict: the oldest staged folio, untouched for the whole list, is locked and stored
//!    (compressed, or written to the swap file); its staging slot is freed. If nothing took
//!    it, it is moved back: it stays resident and nothing is lost.
//!
//! Only the second frees memory. Folios a scan has passed, those stored as-is, and the
//! batches below are stored at once, with no trip through staging; and every folio, without
//! the list.
//!
//! With `Policies::referenced_writes`, a folio at the FIFO's head written since reclaim last
//! asked goes to the active queue instead (`referenced`): the kernel's referenced check, for
//! writes, read from the page tables with no fault (written_bits.rs). Reads are not
//! seen there (no unprivileged interface reads a page's accessed bit); the inactive list
//! sees them, at a fault each.
//!
//! With 4 KiB folios, a cold folio's cold neighbours go with it: one move of up to 64 KiB,
//! one TLB flush, each page then stored on its own (`with_neighbours`, `evict_batch`).

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use uffd::process::ProcessMemory;
use uffd::{StageError, Staging};
use zswap::swap::FolioLock;
use zswap::zswap::{StoreError, SwapOutResult};
use zswap::{Zswap, ZswapGroup, PAGE_SIZE};

use crate::charge::{InFlight, Meter};
use crate::config::BATCH_PAGES;
use crate::discards::Discards;
use crate::events::{Events, PutBack};
use crate::geometry::Geometry;
use crate::incompressible::IncompressibleFolios;
use crate::lazy_threads::{Lazy, StartLazy};
use crate::lru::{Coldest, Lru};
use crate::mapping::Mapping;
use crate::over_limit::{OverLimit, OverLimitState, SharedLimit};
use crate::page_flags::PageFlags;
use crate::pool_share::PoolShare;
use crate::readahead::Readahead;
use crate::reclaim_wait::ReclaimWait;
use crate::serving_threads::InThreadFaults;
use crate::shared_folios::SharedFolios;
use crate::staged::StagedFolios;
use crate::stats::RegionStats;
use crate::swapin_window::SwapinWindow;
use crate::unevictable::Unevictable;

/// Reclaim: kswapd's loop and direct reclaim, and the evictions both do. What it may
/// touch: the parts below.
#[derive(Clone, Copy)]
pub(crate) struct Reclaim<'a> {
    /// The charge it keeps under the limit.
    pub meter: Meter<'a>,
    /// Events read while an eviction or a put-back waits on the gate.
    pub events: Events<'a>,
    pub mapping: &'a Mapping,
    pub zswap: &'a Zswap,
    pub group: &'a ZswapGroup,
    pub geometry: Geometry,
    pub pages: &'a PageFlags,
    pub lru: &'a Lru,
    pub discards: &'a Discards,
    pub unevictable: &'a Unevictable,
    /// Folios a fork left shared, which kswapd unshares (shared_folios.rs).
    pub shared: &'a SharedFolios,
    /// Where folios are moved out to (one folio a slot); batch evictions of 4 KiB folios
    /// have slots of their own.
    pub staging: &'a Arc<Staging>,
    pub batch_staging: Option<&'a Arc<Staging>>,
    /// Folios moved out and not yet stored: reclaim's inactive list (staged.rs).
    pub staged: &'a StagedFolios,
    /// Policies that decide what goes (incompressible.rs, readahead.rs' drop-behind,
    /// swapin_window.rs), and `Policies::keep_incompressible`.
    pub incompressible: &'a IncompressibleFolios,
    pub keep_incompressible: bool,
    pub readahead: &'a Readahead,
    pub swapin_window: &'a SwapinWindow,
    /// The pool's share of the limit (pool_share.rs): None where it is fixed.
    pub pool_share: Option<&'a PoolShare>,
    /// The program's memory, read where it is (a folio's compression tried in place).
    pub program_memory: Option<&'a ProcessMemory>,
    /// Over the limit: the policy, the episodes under way, and a limit shared with others.
    pub over_limit_config: OverLimit,
    pub over_limit: &'a OverLimitState,
    pub shared_limit: Option<&'a dyn SharedLimit>,
    /// A program thread serving its own fault reclaims in a handler's place.
    pub in_thread: Option<&'a InThreadFaults>,
    /// kswapd's wake-ups, and reclaim's progress for those who wait on it.
    pub reclaim_wait: &'a ReclaimWait,
    pub lazy_threads: &'a dyn StartLazy,
    pub stop: &'a AtomicBool,
    pub stats: &'a RegionStats,
}

impl<'a> Reclaim<'a> {
    /// Pages `first..end` are about to lose read-write: reclaim no longer tries to move
    /// them (unevictable.rs).
    pub(crate) fn mark_protected(&self, first: u32, end: u32) {
        let end = end.min(self.geometry.nr_pages);
        self.unevictable.set_protected(first.min(end), end, true);
    }

    /// Pages `first..end` are read-write again: their folios go back on reclaim's queue.
    pub(crate) fn rescue_unprotected(&self, first: u32, end: u32) {
        let fp = self.geometry.folio_pages;
        for f in self
            .unevictable
            .rescue(first, end.min(self.geometry.nr_pages))
        {
            let resident = (f..f + fp).filter(|&p| self.pages.is_resident(p)).count();
            self.lru.queue(f);
            self.stats
                .unevictable_pgs_rescued
                .fetch_add(resident as u64, Relaxed);
        }
    }

    /// kswapd's part in sizing the pool (pool_share.rs): the engine's figures and the
    /// refaults' costs at an epoch's end, and the share handed to the engine when it moves.
    fn size_pool(&self, share: &PoolShare) {
        let ceiling = self.zswap.params().max_pool_percent();
        let moved = share.tick(
            std::time::Instant::now(),
            ceiling,
            || {
                let stats = self.zswap.stats();
                crate::pool_share::Sample {
                    swapins: stats.get("zswpin") + stats.get("pswpin"),
                    limit_bytes: self.meter.limit(),
                    pool_bytes: stats.get("pool_total_size"),
                    stored_pages: stats.get("stored_pages"),
                    pool_span: self.group.pool_span(),
                    resident_pages: self.pages.nr_resident(),
                }
            },
            || self.stats.refault_costs(),
        );
        if let Some(percent) = moved {
            self.zswap.set_pool_share_percent(percent);
        }
    }

    /// How far below the limit kswapd brings the region: four folios, or 1/64 of the limit.
    fn margin(&self) -> u64 {
        (self.geometry.folio_bytes() as u64 * 4).max(self.meter.limit() / 64)
    }

    /// kswapd: a pass every `KSWAPD_PERIOD`, or when woken; `registration` first (a lazy
    /// region's, registration.rs).
    pub(crate) fn kswapd_loop(&self, registration: &dyn Fn()) {
        let mut horizon = self.lru.now();
        loop {
            self.reclaim_wait.kswapd_sleep(KSWAPD_PERIOD);
            if self.stop.load(Relaxed) {
                return;
            }
            registration();
            // Tests: a pass that touches the region's memory, as the unsharing does.
            fail::fail_point!("kswapd::pass");
            let pass = self.lru.now();
            let reclaiming =
                self.meter.usage().total() > self.meter.limit().saturating_sub(self.margin() / 2);
            if reclaiming {
                self.reclaim_to(
                    self.meter.limit().saturating_sub(self.margin()),
                    Reclaimer::Kswapd { horizon },
                );
                self.meter.thread_scratch.charge_this_thread();
            }
            // (A region in a program does not unshare: its allowance stays, as reclaim may
            // meet shared folios whenever it is over its limit again.) Looked at as reclaim
            // is (held off by a fork): a fork's allowance is never ended by a look at the
            // usage from before its pages came back.
            if self.shared.unshares() {
                let _reclaiming = self.reclaim_wait.reclaiming();
                if self.meter.usage().total() <= self.meter.limit() {
                    fail::fail_point!("kswapd::fork_reclaimed");
                    self.over_limit.fork_reclaimed();
                }
            }
            if reclaiming {
                self.lazy_threads.start(Lazy::Kswapd);
            }
            if self.readahead.any_queued() {
                self.lazy_threads.start(Lazy::Readahead);
            }
            horizon = pass;
            if let Some(share) = &self.pool_share {
                self.size_pool(share);
            }
            self.over_limit.watch_device(&self.over_limit_config, || {
                self.zswap.stats().get("swap_write_fail")
            });
            // Freed staging slots left over from the last batch: discard them while idle.
            self.staging.flush();
            if let Some(batch) = &self.batch_staging {
                batch.flush();
            }
            // Exclusive loads and writeback leave holes in the pool: give the pages back.
            self.zswap.pool().compact_if_fragmented();
        }
    }

    /// A fault (or readahead) is about to bring in a folio: make room for it first. False when
    /// nothing more could go (everything is in flight, or the pool is at its share with nowhere
    /// to write back) and the folio would take the region past its limit: over_limit.rs decides
    /// what then.
    pub(crate) fn make_room(&self) -> bool {
        let need = self.geometry.folio_bytes() as u64;
        let total = self.meter.usage().total();
        self.stats.peak_charged_bytes.fetch_max(total, Relaxed);
        if let Some(shared) = &self.shared_limit {
            let (limit, max) = shared.share(total);
            self.meter.set_limits(limit, max);
        }
        if total + need <= self.meter.limit() {
            self.over_limit.back_under();
            return true;
        }
        // A program thread that serves its own fault reclaims in one of the handlers' places.
        let _slot = self.in_thread.as_ref().map(|t| t.reclaim_slot());
        while self.meter.usage().total() + need > self.meter.limit() {
            self.stats.direct_reclaim.fetch_add(1, Relaxed);
            if !self.reclaim_one(Reclaimer::Direct) {
                return false;
            }
        }
        self.over_limit.back_under();
        true
    }

    /// Reclaim until the region holds at most `target` bytes, or nothing more can go. kswapd
    /// makes the folios it found shared with a forked child its own and goes on (a
    /// direct reclaimer may hold a folio lock, under which a page discarded meanwhile could
    /// not fault: it leaves them to kswapd).
    pub(crate) fn reclaim_to(&self, target: u64, who: Reclaimer) {
        let mut failures = 0;
        let mut unshares = 0;
        while self.meter.usage().total() > target && failures < 8 {
            if self.reclaim_one(who) {
                continue;
            }
            if matches!(who, Reclaimer::Kswapd { .. })
                && unshares < MAX_UNSHARES_A_PASS
                && self.shared.settled()
            {
                let unshared = self
                    .shared
                    .unshare_found(self.lru.next_room(), |start, pages| {
                        let resident = (start..start + pages).all(|p| self.pages.is_resident(p));
                        let mapped = self.mapping.in_core(start, pages) == Some(true);
                        (resident && mapped && !self.staged.contains(start))
                            .then(|| self.mapping.page_addr(start))
                    });
                // Tried next: each copy made while the child lives leaves as it is made,
                // rather than after a trip through the FIFO (the heap held twice meanwhile).
                self.lru
                    .reclaim_next(unshared.iter().map(|&(start, _)| start));
                let pages: u64 = unshared.iter().map(|&(_, pages)| u64::from(pages)).sum();
                if pages > 0 {
                    self.stats.fork_unshared.fetch_add(pages, Relaxed);
                    unshares += 1;
                    continue;
                }
            }
            failures += 1;
        }
    }

    /// Reclaim until the region holds at most `target` bytes, or nothing resident or staged is
    /// left, for a caller that asked for it (`Region::reclaim_to`). kswapd may be evicting at the
    /// same time: a folio it has in flight, or has just failed to store and queued again, is not
    /// the end. While another reclaimer (or a discard) frees something, the caller tries again;
    /// it stops once nothing was freed for `RECLAIM_PATIENCE` after its own attempt.
    pub(crate) fn wait_for_reclaim(&self, target: u64) {
        let done = || {
            let u = self.meter.usage();
            u.total() <= target || (u.resident == 0 && u.staged == 0)
        };
        for _ in 0..100 {
            let seen = self.reclaim_wait.freed_count();
            self.reclaim_to(target, Reclaimer::Direct);
            if done() {
                return;
            }
            let deadline = std::time::Instant::now() + RECLAIM_PATIENCE;
            if !self.reclaim_wait.wait_freed(seen, deadline) {
                return;
            }
        }
    }

    /// Evict the coldest folio (or, with none left, drop the oldest staged folio). False
    /// when nothing could be freed. After `who.kept_max()` folios found incompressible and kept,
    /// the next is stored whatever it is. What is freed wakes those who wait for it
    /// (`wait_for_reclaim`).
    fn reclaim_one(&self, who: Reclaimer) -> bool {
        let _reclaiming = self.reclaim_wait.reclaiming();
        let freed = self.free_one(who);
        if freed {
            self.reclaim_wait.freed();
        }
        freed
    }

    fn free_one(&self, who: Reclaimer) -> bool {
        // A folio found incompressible and kept is marked: the next candidates are other folios.
        // After `kept_max` of them the next is stored whatever it is: reclaim never leaves a
        // fault short of room for want of compressible folios.
        let kept_max = who.kept_max();
        let mut kept = 0;
        // The inactive list first, filled from the LRU's cold end a few folios a call, so a
        // fault waiting for room does not wait for the whole list to fill.
        let mut staged = 0;
        while staged < STAGE_PER_CALL && self.staged.wants(self.geometry.folio_pages) {
            match self.evict_coldest(kept >= kept_max, who, true) {
                // Stored at once: one a scan passed, a batch, or one only partly present.
                Eviction::Freed => return true,
                Eviction::Staged => staged += 1,
                Eviction::KeptIncompressible => kept += 1,
                Eviction::Failed | Eviction::NothingLeft => break,
            }
        }
        match self.evict_staged(&mut kept, kept_max) {
            Eviction::Freed => return true,
            Eviction::NothingLeft => {}
            _ => return false,
        }
        // Nothing staged: the coldest resident folio is stored at once.
        loop {
            match self.evict_coldest(kept >= kept_max, who, false) {
                Eviction::Freed => return true,
                Eviction::Failed | Eviction::Staged => return false,
                Eviction::NothingLeft => return self.write_back_pool(),
                Eviction::KeptIncompressible => kept += 1,
            }
        }
    }

    /// Store the oldest staged folio, which nothing used while it went through the list, and
    /// free its slot (a clean one is dropped: the engine holds it). One found incompressible
    /// and kept goes back resident and the next is tried, `kept` counting them against
    /// `kept_max` (then one is stored as-is). NothingLeft when nothing is staged.
    fn evict_staged(&self, kept: &mut usize, kept_max: usize) -> Eviction {
        while let Some(start) = self.staged.pop_oldest() {
            let folio = self.group.lock_folio(start, self.geometry.folio_order);
            // Bound before the slot, so that the slot is freed before the guard drops.
            let mut in_flight = InFlight::new(self.meter.in_flight);
            // Taken by a fault or a discard between the pop and the lock.
            let Some(mut staged) = self.staged.take(start) else {
                continue;
            };
            in_flight.add(staged.len() as u64);
            let refuse_as_is = *kept < kept_max && self.refuses_as_is(&folio);
            match self.store_staged(&folio, &mut staged, true, refuse_as_is) {
                Eviction::KeptIncompressible => *kept += 1,
                result => {
                    if result == Eviction::Freed {
                        self.stats.staged_dropped.fetch_add(1, Relaxed);
                    }
                    return result;
                }
            }
        }
        Eviction::NothingLeft
    }

    /// A folio with nothing known of it (no store since it was new or discarded; one whose
    /// last store compressed is not tried), while the region's incompressible data keeps
    /// coming back in: if it does not compress, it is kept resident (incompressible.rs).
    /// (Not a clean folio: it leaves with no store at all.)
    fn refuses_as_is(&self, folio: &FolioLock) -> bool {
        self.keep_incompressible
            && !self.incompressible.is_marked(folio.start())
            && !self.incompressible.is_compressible(folio.start())
            && !crate::clean::is_clean(folio)
            && self.incompressible.try_in_place()
    }

    /// Nothing resident or staged is left, and the region is still over its target: the pool
    /// holds it there (its share of the limit, `max_pool_percent` or pool_share.rs's, is more
    /// than what the fixed charge leaves). Write the coldest pool pages back, as a memory cgroup
    /// at its limit makes zswap write back, and give the emptied pool pages back. With nothing
    /// written (writeback off, an empty pool, a failing device), the pages the pool keeps for
    /// reuse go back instead: they are charged too, and a pool emptied by faults keeps some.
    /// False when neither freed anything.
    fn write_back_pool(&self) -> bool {
        let pool = self.zswap.pool();
        if self.group.shrink(POOL_WRITEBACK_BATCH).written == 0 {
            return pool.give_back_kept();
        }
        // Freed objects keep their pool pages (and their charge) until a compaction.
        pool.compact();
        true
    }

    /// Take the coldest resident folio: onto the inactive list (`stage`: Staged), or stored at
    /// once (Freed). `as_is`: stored even if it does not compress.
    fn evict_coldest(&self, as_is: bool, who: Reclaimer, stage: bool) -> Eviction {
        // The queue names a folio again each time it comes back in, so it holds stale entries
        // (folios that left since): skip them here, so a caller's count of attempts means work.
        let mut written_checks = 0;
        let (folio, present, behind, next, queued) = loop {
            let Some(Coldest {
                start,
                behind,
                next,
                queued,
            }) = self.lru.pop_coldest()
            else {
                return Eviction::NothingLeft;
            };
            // Checked under the folio's lock: a fault queues its folio before installing it, and
            // an unlocked look could take it for stale mid-install and lose it from the queue.
            let folio = self.group.lock_folio(start, self.geometry.folio_order);
            // Activated between the pop and the lock (a near refault, workingset.rs): the
            // active queue holds it now.
            if self.lru.is_active(start) {
                continue;
            }
            let present = folio
                .offsets()
                .filter(|&p| self.pages.is_resident(p))
                .count() as u32;
            if present == 0 {
                continue;
            }
            if self.unevictable.cull(folio.start()) {
                // Off the queue until its pages are read-write again (unevictable.rs).
                self.stats
                    .unevictable_pgs_culled
                    .fetch_add(u64::from(present), Relaxed);
                continue;
            }
            // (A folio a scan has passed was touched: the scan went on past it. One to try
            // next was at the FIFO's head when it was found, its queue time since renewed.)
            if !behind && !next && who.too_young(self.lru, start) {
                self.lru.put_back(start);
                drop(folio);
                return Eviction::Failed;
            }
            if !behind
                && !next
                && self.keep_resident(&folio, present)
                && self.incompressible.pass_over(queued)
            {
                drop(folio);
                self.lru.queue(start);
                self.stats.incompressible_skipped.fetch_add(1, Relaxed);
                continue;
            }
            // Written since it was last looked at: active again (the kernel's referenced
            // bit, for writes), looked at again when it next comes round.
            if !behind
                && !next
                && written_checks < who.written_checks_max()
                && self.referenced(&folio)
            {
                written_checks += 1;
                self.lru.activate(start);
                self.stats.written_activated.fetch_add(1, Relaxed);
                continue;
            }
            break (folio, present, behind, next, queued);
        };
        if behind {
            self.stats.dropped_behind.fetch_add(1, Relaxed);
        }
        let start = folio.start();
        let marked = self.incompressible.is_marked(start);
        // A cold 4 KiB folio takes its cold neighbours along: one move, one TLB flush. (Not
        // one named out of the FIFO's order: its queue says nothing of its neighbours.)
        let single = as_is || behind || next || marked;
        let folio = match self.with_neighbours(folio, present, queued, single, who) {
            Ok(batch) => return self.evict_batch(batch),
            Err(folio) => folio,
        };
        // One tried next was unshared since it was met shared: still busy, it is pinned (or
        // shared by a fork since), and is left to meet again in the FIFO, not unshared and
        // tried next again at once.
        let record_shared = !next;
        let result = if present == folio.nr_pages() {
            // A scan has passed it: it goes now, whatever it holds. One tried next is stored
            // at once too: its copy is what the unsharing added.
            let how = match stage && !as_is && !behind && !next {
                true => Leave::Stage,
                false => Leave::Store {
                    as_is: as_is || behind,
                },
            };
            self.evict(&folio, how, record_shared)
        } else {
            // Partly present (part of it was discarded): evict what is there, page by page.
            let mut any = false;
            for page in folio.split() {
                if self.pages.is_resident(page.start()) {
                    let result = self.evict(&page, Leave::StorePage, record_shared);
                    any |= result == Eviction::Freed;
                }
            }
            match any {
                true => Eviction::Freed,
                false => Eviction::Failed,
            }
        };
        if matches!(result, Eviction::Freed | Eviction::Staged) {
            self.incompressible.evicted(marked);
            if self.swapin_window.reclaimed(start, present) {
                self.stats.page_alone_misses.fetch_add(1, Relaxed);
            }
        }
        result
    }

    /// The folios after the cold 4 KiB folio `head` (locked, all `present`, taken from the reclaim
    /// queue with `queued` entries left behind it) that go with it in one batch, or `head` alone
    /// (Err) when none does or batching does not apply (`single`: it is stored as-is or dropped
    /// behind, or marked incompressible).
    ///
    /// Each eviction's `UFFDIO_MOVE` flushes the TLB of every CPU running the program, an IPI
    /// each: on a random workload of 4 KiB folios, one move a folio is the largest single cost
    /// of reclaim (`perf`, `bench mix`: 15% of all CPU). Neighbours move with one flush. A
    /// neighbour goes only if it would go soon anyway and costs nothing to find out about:
    /// resident and unlocked (a try, never a wait: we hold `head`), its last store compressed
    /// (so it is stored, not tried or kept: incompressible.rs), not clean, not staged, and in the
    /// older half of the reclaim queue (queued at least half as long ago as `head`), so a folio
    /// in use is not taken for its place, nor one too young for `who`. The first that fails
    /// ends the run. A head that
    /// was queued again since the entry that named it (a stale entry: the queue names a folio
    /// each time it comes in) is young, and goes alone: its age says nothing of its neighbours'.
    fn with_neighbours(
        &self,
        head: FolioLock<'a>,
        present: u32,
        queued: usize,
        single: bool,
        who: Reclaimer,
    ) -> Result<Vec<FolioLock<'a>>, FolioLock<'a>> {
        let head_age = self.lru.age(head.start());
        if self.batch_staging.is_none()
            || single
            || present != 1
            || (head_age as usize) < queued / 2
            || !self.incompressible.is_compressible(head.start())
            || crate::clean::is_clean(&head)
        {
            return Err(head);
        }
        let half_age = head_age / 2;
        let nr_pages = self.geometry.nr_pages;
        let mut batch = vec![head];
        while batch.len() < BATCH_PAGES {
            let next = batch[batch.len() - 1].start() + 1;
            if next >= nr_pages
                || !self.pages.is_resident(next)
                || !self.incompressible.is_compressible(next)
                || self.unevictable.any_protected(next, next + 1)
                || self.lru.age(next) < half_age
                || who.too_young(self.lru, next)
            {
                break;
            }
            let Ok(folio) = self.group.cache().try_lock_page(next) else {
                break;
            };
            // Checked again under the lock: a fault or a discard may have got there first.
            if folio.nr_pages() != 1
                || !self.pages.is_resident(next)
                || self.incompressible.is_marked(next)
                || crate::clean::is_clean(&folio)
                || self.staged.contains(next)
            {
                break;
            }
            batch.push(folio);
        }
        match batch.len() {
            1 => Err(batch.pop().expect("the head")),
            _ => Ok(batch),
        }
    }

    /// Evict `batch` (consecutive 4 KiB folios, locked and resident, from `with_neighbours`)
    /// with one move into a batch slot, then store each page. The pages are not kept staged: the
    /// slot is one, freed whole once every page is stored. A page that cannot be stored comes
    /// back, as in `evict`.
    fn evict_batch(&self, batch: Vec<FolioLock>) -> Eviction {
        let n = batch.len();
        let first = batch[0].start();
        let slots = self.batch_staging.expect("batching is on");
        let staged = {
            // As in `evict`: held from the pending check through the move.
            let gate = self.mapping.gate();
            if self
                .discards
                .pending_mask(first, first + n as u32)
                .is_some()
            {
                drop(gate);
                self.give_up(&batch[0]);
                return Eviction::Failed;
            }
            let staged = self.mapping.stage(&gate, slots, first, n * PAGE_SIZE);
            drop(gate);
            staged
        };
        let staged = match staged {
            Ok(s) => s,
            Err(StageError::NoSlot) => {
                // Every batch slot in flight (they are one per evicting thread, and then some).
                return self.evict_head_alone(batch);
            }
            Err(StageError::Partial {
                folio: mut partial, ..
            }) => {
                // As in `evict`: what moved comes back; resident bits were never cleared.
                for (i, folio) in batch.iter().enumerate() {
                    self.events
                        .put_back(folio, &mut partial, i, PutBack::WhatMoved);
                    let p = folio.start();
                    if self.pages.is_resident(p) && !self.mapping.in_mapping(p).unwrap_or(true) {
                        self.events.zapped_late(folio, p);
                    }
                }
                // One page of the run could not move (pinned, zapped late, the mapping
                // changing). (`evict` finds out for itself whether the head can.)
                return self.evict_head_alone(batch);
            }
        };
        // Charged until every page is stored or put back: bound before the slot, so that the
        // slot is freed (and counted dirty) before the guard drops.
        let mut in_flight = InFlight::new(self.meter.in_flight);
        let mut staged = staged;
        let mut any = false;
        // Moved back only once no page of the slot is read any more: `bytes` may only be taken
        // while every page of it is there.
        let mut unstored = Vec::new();
        for (i, folio) in batch.iter().enumerate() {
            let p = folio.start();
            in_flight.add_page();
            self.pages.set_resident(p, false);
            self.pages.left_for_the_engine(p, self.discards);
            let bytes = &staged.bytes()[i * PAGE_SIZE..(i + 1) * PAGE_SIZE];
            match self.group.swap_out(folio, bytes) {
                Ok(result) => {
                    if let SwapOutResult::Stored = result {
                        let length = self.group.stored_length(folio);
                        let poor = crate::incompressible::saved_too_little(length, 1);
                        self.incompressible.set(p, poor);
                        if poor {
                            self.incompressible.stored_as_is();
                        }
                    }
                    self.stats.folios_evicted.fetch_add(1, Relaxed);
                    self.incompressible.evicted(false);
                    any = true;
                }
                Err(e) => {
                    // Neither the pool nor the swap file took it (as in `evict`): it stays.
                    if matches!(e, StoreError::CompressPoor(_)) {
                        self.incompressible.set(p, true);
                    }
                    unstored.push(i);
                }
            }
        }
        for i in unstored {
            self.events
                .put_back(&batch[i], &mut staged, i, PutBack::All);
            self.give_up(&batch[i]);
        }
        if !any {
            return Eviction::Failed;
        }
        self.stats.batch_evictions.fetch_add(1, Relaxed);
        Eviction::Freed
    }

    /// A batch that could not go together: its head goes alone, as it would have without
    /// neighbours (unlocked here), who keep their places in the queue.
    fn evict_head_alone(&self, batch: Vec<FolioLock>) -> Eviction {
        let head = batch.into_iter().next().expect("the head");
        let result = self.evict(&head, Leave::Store { as_is: false }, true);
        if result == Eviction::Freed {
            self.incompressible.evicted(false);
        }
        result
    }

    /// An incompressible folio that came back in or was kept (incompressible.rs) stays while
    /// the region's incompressible data is in use, unless it is clean: then evicting it costs
    /// no store and frees it.
    fn keep_resident(&self, folio: &FolioLock, present: u32) -> bool {
        self.keep_incompressible
            && self.incompressible.is_marked(folio.start())
            && !(present == folio.nr_pages() && crate::clean::is_clean(folio))
            && self.incompressible.keep_marked()
    }

    /// Whether a page of the locked folio was written since reclaim last asked (where writes
    /// are tracked with no fault: the LRU's written bits, read from the page tables a chunk
    /// at a time, written_bits.rs).
    fn referenced(&self, folio: &FolioLock) -> bool {
        if !self.mapping.tracks_writes() {
            return false;
        }
        self.stats.written_checks.fetch_add(1, Relaxed);
        self.lru.take_written(folio.start(), |first, n| {
            self.stats.written_scans.fetch_add(1, Relaxed);
            let n = n.min(self.geometry.nr_pages - first);
            self.mapping.take_written(&self.mapping.gate(), first, n)
        })
    }

    /// Move the locked, fully present pages of `folio` out, onto the inactive list or to be
    /// stored now (`how`).
    fn evict(&self, folio: &FolioLock, how: Leave, record_shared: bool) -> Eviction {
        let bytes = folio.nr_pages() as usize * PAGE_SIZE;
        let (whole, as_is) = match how {
            Leave::Stage => (true, false),
            Leave::Store { as_is } => (true, as_is),
            Leave::StorePage => (false, true),
        };
        let mut refuse_as_is = !as_is && whole && self.refuses_as_is(folio);
        if refuse_as_is {
            // Tried where it is, not moved out and back (two page-table walks and TLB flushes,
            // most of what finding a region's random data would cost); and outside the event
            // gate, which a handler waits on to read its fault while any reclaim holds it (the
            // read and the compression would be most of the time reclaim holds it). Only a
            // guess, so a race is harmless: a discard or `mremap` meanwhile makes the read fail
            // (the store decides) or read what is going away (a folio kept that had gone anyway,
            // whose mark the discard, waiting for our folio lock, clears).
            if self.compresses_in_place(folio.start(), bytes) == Some(false) {
                if self.incompressible.keep_found() {
                    self.incompressible.set(folio.start(), true);
                    self.incompressible.kept();
                    self.stats.incompressible_kept.fetch_add(1, Relaxed);
                    self.requeue(folio);
                    return Eviction::KeptIncompressible;
                }
                // A probe: stored as-is, to measure whether such folios come back.
                refuse_as_is = false;
            }
        }
        let staged = {
            // Held from the pending check through the move: a discard read after the check waits
            // for the move, and then finds the pages out of the mapping (a fault on them waits
            // for its processing, events.rs).
            let gate = self.mapping.gate();
            if self
                .discards
                .pending_mask(folio.start(), folio.end())
                .is_some()
            {
                // A discard of these pages is read but not processed. `MADV_FREE` leaves them
                // mapped, so the program may have written them since its `madvise` returned;
                // moved out now, that write would be freed with the discard.
                drop(gate);
                self.give_up(folio);
                return Eviction::Failed;
            }
            // Under the gate: an `mremap` of the region is applied as it is read (events.rs).
            let staged = self
                .mapping
                .stage(&gate, self.staging, folio.start(), bytes);
            drop(gate);
            staged
        };
        let mut staged = match staged {
            Ok(s) => s,
            Err(StageError::NoSlot) => {
                // Every slot staged or in flight (there is one a thread that evicts beyond the
                // list's target): this folio stays for now.
                self.give_up(folio);
                return Eviction::Failed;
            }
            Err(StageError::Partial {
                folio: mut partial,
                source,
            }) => {
                // A page not present (a discard we have not processed), shared with a forked
                // child or pinned (EBUSY), or the mapping changing: put back what moved and
                // leave this folio for now. Its resident bits were never cleared.
                self.events
                    .put_back(folio, &mut partial, 0, PutBack::WhatMoved);
                // A page the kernel unmapped after its discard was processed is not there to
                // move: it reads zero now (events.rs).
                for p in folio.offsets() {
                    if self.pages.is_resident(p) && !self.mapping.in_mapping(p).unwrap_or(true) {
                        self.events.zapped_late(folio, p);
                    }
                }
                self.give_up(folio);
                // Recorded after its requeue: kswapd may unshare it and name it to try next
                // at once, and a requeue after that would make the entry look stale (lru.rs).
                if record_shared && matches!(source, uffd::UffdError::Busy { .. }) {
                    self.shared.found(folio.start(), folio.nr_pages());
                }
                return Eviction::Failed;
            }
        };
        // Charged until the folio is staged, freed or put back; dropped after the slot, so
        // that a freed slot is counted dirty before the guard drops.
        let mut in_flight = InFlight::new(self.meter.in_flight);
        for p in folio.offsets() {
            in_flight.add_page();
            self.pages.set_resident(p, false);
            self.pages.left_for_the_engine(p, self.discards);
        }
        if how == Leave::Stage {
            self.staged.insert(folio.start(), staged);
            self.stats.pgdeactivate.fetch_add(1, Relaxed);
            return Eviction::Staged;
        }
        let result = self.store_staged(folio, &mut staged, whole, refuse_as_is);
        drop(staged);
        drop(in_flight);
        result
    }

    /// Store the locked `folio`, moved out to `staged` (its resident bits cleared), or drop it
    /// if it is clean (`whole`: the whole folio; else one page of a split one, stored as it
    /// is). Freed: the caller frees the slot. Otherwise the folio is moved back, resident.
    /// `refuse_as_is`: one that does not compress is kept resident (KeptIncompressible), but for
    /// the probes (incompressible.rs).
    fn store_staged(
        &self,
        folio: &FolioLock,
        staged: &mut uffd::StagedFolio,
        whole: bool,
        refuse_as_is: bool,
    ) -> Eviction {
        // Read back from disk and not written since (clean.rs): the disk copy stands.
        if whole && crate::clean::is_clean(folio) {
            self.stats.clean_evictions.fetch_add(1, Relaxed);
            self.stats.folios_evicted.fetch_add(1, Relaxed);
            return Eviction::Freed;
        }
        let stored = if refuse_as_is {
            self.group
                .swap_out_unless_poor(folio, staged.bytes(), &|| self.incompressible.keep_found())
        } else {
            self.group.swap_out(folio, staged.bytes())
        };
        match stored {
            Ok(SwapOutResult::Stored) if whole => {
                let length = self.group.stored_length(folio);
                let poor = crate::incompressible::saved_too_little(length, folio.nr_pages());
                self.incompressible.set(folio.start(), poor);
                if poor {
                    self.incompressible.stored_as_is();
                }
            }
            Ok(_) => {}
            Err(e) => {
                // Neither the pool nor the swap file took it (writeback off, and the pool
                // full or the folio incompressible; or refused as incompressible): it stays
                // resident.
                let poor = matches!(e, StoreError::CompressPoor(_));
                if whole && poor {
                    self.incompressible.set(folio.start(), true);
                }
                self.events.put_back(folio, staged, 0, PutBack::All);
                if refuse_as_is && poor {
                    self.incompressible.kept();
                    self.stats.incompressible_kept.fetch_add(1, Relaxed);
                    self.requeue(folio);
                    return Eviction::KeptIncompressible;
                }
                self.give_up(folio);
                return Eviction::Failed;
            }
        }
        self.stats.folios_evicted.fetch_add(1, Relaxed);
        Eviction::Freed
    }

    /// Whether the folio's `bytes` from page `start`, read where they are, would be stored
    /// compressed enough not to count as incompressible (`incompressible::saved_too_little`).
    /// None for a folio that cannot be read: it is moved out and its store decides. Called with
    /// the folio locked: the read must not wait on a fault handler (who would wait for that
    /// lock), and `ProcessMemory` fails on a missing page instead of waiting; nor on the disk
    /// (reclaim would stall), so a folio with a page in system swap is not tried.
    fn compresses_in_place(&self, start: u32, bytes: usize) -> Option<bool> {
        let mem = self.program_memory.as_ref()?;
        let nr_pages = bytes / PAGE_SIZE;
        if !self
            .mapping
            .in_core(start, nr_pages as u32)
            .unwrap_or(false)
        {
            return None;
        }
        let addr = self.mapping.page_addr(start);
        crate::folio_buf::with_folio_buf(nr_pages, |buf| match mem.read(addr, buf) {
            Ok(n) if n == bytes => {
                let length = self.group.stored_length_estimate(buf);
                Some(!crate::incompressible::saved_too_little(
                    length,
                    nr_pages as u32,
                ))
            }
            _ => None,
        })
    }

    /// The folio stays resident, having failed to go: queue it again. `folio` may be one page of
    /// a split folio (evicted page by page): the queue holds whole folios' starts, which reclaim
    /// locks at the region's folio order.
    fn give_up(&self, folio: &FolioLock) {
        self.stats.evict_failed.fetch_add(1, Relaxed);
        self.requeue(folio);
    }

    /// Queue the folio for reclaim again, at the back.
    fn requeue(&self, folio: &FolioLock) {
        let start = self.geometry.folio_start(folio.start());
        self.lru.queue(start);
    }
}

/// The most times a kswapd pass unshares what it found shared before it counts a failure
/// (a pinned page stays busy however often it is unshared).
const MAX_UNSHARES_A_PASS: u32 = 1024;

/// How often kswapd looks at the region unwoken: it also gives back freed staging slots and
/// compacts the pool while idle.
const KSWAPD_PERIOD: Duration = Duration::from_millis(20);

/// Who reclaims, which decides what it may take.
#[derive(Clone, Copy)]
pub(crate) enum Reclaimer {
    /// kswapd takes only folios queued before its previous pass began. A fault queues its
    /// folio, installs it and wakes the faulting thread, which may not have run yet when the
    /// same fault's wake starts a pass; taking its folio then makes it fault again. In a
    /// region that cannot get within its target (the pool alone over it, device writes
    /// failing) every pass would find that folio, and the program would fault on it forever.
    Kswapd { horizon: u32 },
    /// A caller that waits for the room: a fault (before it takes its own folio) or
    /// `Region::reclaim_to`.
    Direct,
}

impl Reclaimer {
    /// Folios found incompressible and kept before one is stored as-is (`free_one`).
    fn kept_max(self) -> usize {
        match self {
            Reclaimer::Kswapd { .. } => KEPT_PER_CALL_KSWAPD,
            Reclaimer::Direct => KEPT_PER_CALL,
        }
    }

    /// Folios one `evict_coldest` finds written and activates before it takes the next
    /// whatever it is: a fault waiting for the room should not wait behind many (each may
    /// read its chunk's bits: a system call and a TLB flush).
    fn written_checks_max(self) -> usize {
        match self {
            Reclaimer::Kswapd { .. } => 64,
            Reclaimer::Direct => 8,
        }
    }

    /// Whether the folio at `start` came in too recently for this reclaimer to take.
    fn too_young(self, lru: &Lru, start: u32) -> bool {
        match self {
            Reclaimer::Kswapd { horizon } => lru.queued_since(start, horizon),
            Reclaimer::Direct => false,
        }
    }
}

/// How long `wait_for_reclaim` waits for another reclaimer to free something.
const RECLAIM_PATIENCE: Duration = Duration::from_millis(200);

/// Folios one `reclaim_one` moves onto the inactive list at most before it stores one.
const STAGE_PER_CALL: usize = 2;

/// Pool pages written back at a time when the pool alone holds the region over its limit.
const POOL_WRITEBACK_BATCH: u32 = 32;

/// Folios one `reclaim_one` may find incompressible and keep before it stores one as-is,
/// where a fault waits for the room (direct reclaim) or the program asked for it
/// (`Region::reclaim_to`).
pub(crate) const KEPT_PER_CALL: usize = 16;
/// The same for kswapd, which no fault waits on. Reclaim meets each incompressible folio
/// that was never evicted once, and keeps it; at 16 a call, a run of them in the queue (in
/// `bench mix`, the random third in the order it was filled) would send one in 17 to the
/// pool as-is: about 7,000 random pages in a second, all of which come back within five.
const KEPT_PER_CALL_KSWAPD: usize = 1024;

/// Where `evict` sends a folio.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Leave {
    /// Onto the inactive list (staged.rs): stored once it reaches the end untouched.
    Stage,
    /// Stored now; `as_is`: even if it does not compress (else a first store of an
    /// incompressible folio may keep it).
    Store { as_is: bool },
    /// One page of a folio only partly present, stored now as it is.
    StorePage,
}

/// What an attempt to evict came to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Eviction {
    Freed,
    /// Moved onto the inactive list: nothing freed yet.
    Staged,
    /// Nothing freed: the folio stays.
    Failed,
    /// Nothing resident or staged is left to take.
    NothingLeft,
    /// Found incompressible while the region's incompressible data is in use: it stays,
    /// marked (incompressible.rs).
    KeptIncompressible,
}
