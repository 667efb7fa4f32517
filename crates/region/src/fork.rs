//! Fork. A child gets a copy of the region's mapping but not its userfaultfd registration,
//! nor the region's threads: a page that is not in the mapping at the fork reads as zero in
//! the child. So the mapping is not inherited at all (`MADV_DONTFORK`: a child that touches
//! it faults, it never reads zeros where data is), except across `Region::prepare_fork`:
//! reclaim is held off, every page the engine holds or staging keeps is brought back into
//! the mapping, and only then is the mapping inherited, until the guard drops. The child
//! then sees exactly its parent's data as it was at the fork, as plain memory of its own
//! (held under no limit), and its own writes after. The parent's pages are shared with the
//! child from then on, and kswapd unshares them to take the parent back under its limit
//! (shared_folios.rs).

use std::sync::atomic::Ordering::Relaxed;

use zswap::swap::Kind;

use crate::swapin::SwapIn;

impl<'a> SwapIn<'a> {
    /// `Region::prepare_fork` short of making the mapping inherited: reclaim held off (until
    /// the guard returned drops) and every evicted page brought back.
    pub(crate) fn bring_all_back_for_fork(&self) -> crate::lock_order::RwLockWriteGuard<'a, ()> {
        let held_off = self.reclaim_wait.hold_off();
        let before = self.meter.usage().resident;
        self.bring_all_back();
        // The pages the fork shares with the child cannot be moved out until kswapd has
        // unshared them (shared_folios.rs): until the region is back under its limit, it is
        // neither throttled nor killed for holding them (over_limit.rs).
        let brought_back = self.meter.usage().resident.saturating_sub(before);
        self.reclaim.shared.forked();
        self.over_limit
            .fork_allowance
            .fetch_max(brought_back, Relaxed);
        held_off
    }

    /// Bring every page the engine holds (pool, swap file, zero marks) or staging keeps back
    /// into the mapping. Reclaim is held off by the caller, so what comes back stays.
    fn bring_all_back(&self) {
        let fp = self.geometry.folio_pages;
        // A page held or staged has been locked, so its state word is allocated: the pages
        // outside `populated` are all missing or resident.
        let populated: Vec<_> = self.group.cache().populated().collect();
        for start in populated.into_iter().flat_map(|r| r.step_by(fp as usize)) {
            let out = |p: u32| !self.pages.is_resident(p) && self.group.peek(p).kind != Kind::Empty;
            if !(start..start + fp).any(out) && !self.staged.contains(start) {
                continue;
            }
            let folio = self.group.lock_folio(start, self.geometry.folio_order);
            self.swap_in(&folio, start, false, crate::swapin::Bring::All);
            drop(folio);
            // Threads that faulted on the folio meanwhile find it there.
            self.mapping
                .wake(self.mapping.page_addr(start), self.geometry.folio_bytes());
        }
    }
}
