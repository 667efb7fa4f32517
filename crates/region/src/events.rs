//! The region's non-fault events: discards (`MADV_DONTNEED`/`MADV_REMOVE` raise REMOVE,
//! `munmap` raises UNMAP) and moves (`mremap` raises REMAP).
//!
//! A discard frees what the engine holds for those pages, so a later read gives zeros, as
//! the kernel promises. The event is read before the kernel zaps the pages; until the zap,
//! the pages stay as they were. A folio still staged in the swap cache is moved back first,
//! so its pages outside the discarded range keep their data.

use std::sync::atomic::Ordering::Relaxed;

use uffd::Filled;
use zswap::PAGE_SIZE;

use crate::fault::defer_pending_events;
use crate::region::Inner;

pub(crate) fn discard(inner: &Inner, start: usize, end: usize, unmapped: bool) {
    let base = inner.base();
    let (start, end) = (start.max(base), end.min(base + inner.len));
    if start >= end {
        return;
    }
    let first = ((start - base) / PAGE_SIZE) as u32;
    let last = (end - base).div_ceil(PAGE_SIZE) as u32;
    let fp = inner.folio_pages;
    let mut fstart = first & !(fp - 1);
    while fstart < last {
        let folio = inner.group.lock_folio(fstart, inner.folio_order);
        if let Some(mut staged) = inner.swapcache.take(fstart) {
            if unmapped {
                drop(staged); // the mapping is gone: nothing to keep
            } else {
                let dst = base + fstart as usize * PAGE_SIZE;
                loop {
                    match staged.move_back(&inner.uffd, dst) {
                        Ok(Filled::All) => break,
                        Ok(Filled::PageExists { done }) => {
                            panic!("page {done} bytes into a staged folio is already present")
                        }
                        Err(e) if e.is_retry() => defer_pending_events(inner),
                        Err(e) => panic!("moving a staged folio back failed: {e}"),
                    }
                }
                for p in folio.offsets() {
                    inner.set_resident(p, true);
                }
                inner.group.invalidate(&folio);
                inner.lru.lock().push_back(fstart);
            }
        }
        for p in folio.offsets().filter(|p| (first..last).contains(p)) {
            inner.group.invalidate_page(&folio, p);
            inner.set_resident(p, false);
            inner.stats.discarded_pages.fetch_add(1, Relaxed);
        }
        fstart += fp;
    }
}

pub(crate) fn remap(inner: &Inner, from: usize, to: usize, len: usize) {
    if from == inner.base() && len == inner.len {
        inner.base.store(to, Relaxed);
        inner.stats.remaps.fetch_add(1, Relaxed);
    } else if from < inner.base() + inner.len && from + len > inner.base() {
        // Part of the region moved: its pages would no longer be where we serve them.
        eprintln!(
            "uzswap: warning: mremap of part of a managed region ({len} bytes at {from:#x}) \
             is not supported; pages there will be served as they were"
        );
    }
}
