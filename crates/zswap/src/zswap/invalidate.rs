//! Invalidate: free whatever holds a page (pool object, disk slot, zero mark, poison) and
//! leave it empty. Store uses the same path to drop stale entries, and it runs whether zswap
//! is enabled or not: turning zswap off never skips an invalidation (invariant 6; the kernel
//! bug "invalidate duplicate entry when !zswap_enabled").

use crate::stats::Stats;
use crate::swap::cache::{FolioLock, Kind, PageState};
use crate::PAGE_SIZE;

use super::ZswapGroup;

impl ZswapGroup {
    /// Free everything the folio's pages hold. Disk slots go back in contiguous runs, one
    /// discard (hole punch) per run rather than per page.
    pub fn invalidate(&self, folio: &FolioLock) {
        self.check(folio);
        let mut slots: Vec<u32> = Vec::new();
        for offset in folio.offsets() {
            if let Some(slot) = folio.slot(offset) {
                slots.push(slot.0);
                folio.set_slot(offset, None);
            }
            self.erase(folio, offset);
        }
        if slots.is_empty() {
            return;
        }
        let swap = self
            .shared
            .swap
            .as_ref()
            .expect("a page has a slot only where there is a device");
        slots.sort_unstable();
        let mut i = 0;
        while i < slots.len() {
            let mut n = 1;
            while i + n < slots.len() && slots[i + n] == slots[i] + n as u32 {
                n += 1;
            }
            swap.free_run(crate::swap::SwapSlot(slots[i]), n as u32);
            i += n;
        }
    }

    /// Free what one page of a held folio holds (a discard of part of a folio).
    pub fn invalidate_page(&self, folio: &FolioLock, offset: u32) {
        self.check(folio);
        self.erase(folio, offset);
    }

    /// Free what one page holds and leave it empty; uncharges exactly what its store charged.
    pub(crate) fn erase(&self, folio: &FolioLock, offset: u32) {
        let st = folio.state(offset);
        let s = &self.shared;
        match st.kind {
            Kind::Empty => return,
            Kind::Zero => Stats::sub(&s.stats.same_filled_pages, 1),
            Kind::Stored => self.free_stored(st),
            Kind::OnDisk if super::writeback::on_disk_compressed(st.payload) => {
                s.compressors.release(st.codec, 1)
            }
            Kind::OnDisk | Kind::Poisoned => {}
        }
        if let Some(slot) = folio.slot(offset) {
            s.swap
                .as_ref()
                .expect("a page has a slot only where there is a device")
                .free(slot);
            folio.set_slot(offset, None);
        }
        folio.set_state(offset, PageState::EMPTY);
    }

    /// Free the pool object of a Stored entry and undo its charge and gauges.
    pub(crate) fn free_stored(&self, st: PageState) {
        if self.free_object(st) < PAGE_SIZE as u64 {
            self.shared.compressors.release(st.codec, 1);
        }
    }

    /// As `free_stored`, but the compressor's use stays with the entry (its object went to
    /// a segment as it was). Returns the object's length.
    pub(crate) fn free_object(&self, st: PageState) -> u64 {
        let s = &self.shared;
        let handle = crate::zsmalloc::Handle::from_raw(st.payload);
        let len = s.pool.free(handle) as u64;
        self.charged
            .fetch_sub(len, std::sync::atomic::Ordering::Relaxed);
        Stats::sub(&self.zswapped, 1);
        Stats::sub(&s.stats.stored_pages, 1);
        if len == PAGE_SIZE as u64 {
            Stats::sub(&s.stats.stored_incompressible_pages, 1);
        }
        len
    }
}
