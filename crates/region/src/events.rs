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
//! pages is freed, a staged copy of their folio is dropped (never moved back: the engine
//! holds a stored copy of every staged folio), and the pages count as missing. So nothing the
//! program writes after its `madvise` returns can be processed away with the discard, and
//! after `madvise` returns the program reads zeros, as the kernel promises. (Serving a pending
//! page with zeros before processing, as this once did, let a write made after `madvise`
//! returned be evicted and then freed by the late processing: the discard stress test with a
//! large pool found it.)

use std::sync::atomic::Ordering::Relaxed;

use uffd::{Event, UffdError};
use zswap::PAGE_SIZE;

use crate::region::Inner;

/// Read events under the exclusive gate, recording discards as pending before anyone can
/// act on the state they change.
pub(crate) fn read_events(inner: &Inner, out: &mut Vec<Event>) -> Result<usize, UffdError> {
    let _gate = inner.event_gate.write();
    let n = inner.uffd.read_events(out)?;
    let mut pending = inner.pending.lock();
    for ev in out.iter() {
        if let Event::Remove { start, end } | Event::Unmap { start, end } = *ev {
            if let Some(range) = page_range(inner, start, end) {
                pending.push(range);
            }
        }
    }
    Ok(n)
}

/// The region pages `[first, last)` that `[start, end)` covers.
fn page_range(inner: &Inner, start: usize, end: usize) -> Option<(u32, u32)> {
    let base = inner.base();
    let (start, end) = (start.max(base), end.min(base + inner.len));
    (start < end).then(|| {
        (
            ((start - base) / PAGE_SIZE) as u32,
            (end - base).div_ceil(PAGE_SIZE) as u32,
        )
    })
}

/// For the pages `[first, last)`: which have a discard pending (None if none does). Call with
/// the event gate held shared.
pub(crate) fn pending_mask(inner: &Inner, first: u32, last: u32) -> Option<Vec<bool>> {
    let pending = inner.pending.lock();
    if !pending.iter().any(|&(a, b)| a < last && first < b) {
        return None;
    }
    Some(
        (first..last)
            .map(|p| pending.iter().any(|&(a, b)| (a..b).contains(&p)))
            .collect(),
    )
}

/// Free what uzswap holds for the discarded pages `[start, end)`.
pub(crate) fn discard(inner: &Inner, start: usize, end: usize) {
    let Some((first, last)) = page_range(inner, start, end) else {
        return;
    };
    let fp = inner.folio_pages;
    let mut fstart = first & !(fp - 1);
    while fstart < last {
        let folio = inner.group.lock_folio(fstart, inner.folio_order);
        for p in folio.offsets().filter(|p| (first..last).contains(p)) {
            if inner.is_resident(p) {
                wait_for_zap(inner, p);
            }
        }
        // Never moved back: that could land after the kernel's zap. The engine has it all.
        drop(inner.swapcache.take(fstart));
        for p in folio.offsets().filter(|p| (first..last).contains(p)) {
            inner.group.invalidate_page(&folio, p);
            inner.set_resident(p, false);
            inner.stats.discarded_pages.fetch_add(1, Relaxed);
        }
        fstart += fp;
    }
    let mut pending = inner.pending.lock();
    if let Some(i) = pending.iter().position(|&r| r == (first, last)) {
        pending.swap_remove(i);
    }
}

/// Wait until the kernel has zapped the discarded page `p` (it zaps right after the event is
/// read, in the discarding thread). Nothing maps a pending page meanwhile, and its folio lock
/// keeps reclaim from moving it out, so a page still mapped has not been zapped yet. Bounded:
/// a `madvise` that failed after its event zaps nothing, and then the page keeps its data
/// (counted missing while it is mapped, until an install over it finds it present).
fn wait_for_zap(inner: &Inner, p: u32) {
    let addr = inner.base() + p as usize * PAGE_SIZE;
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(200);
    while uffd::page_mapped(addr).unwrap_or(false) && std::time::Instant::now() < deadline {
        std::thread::yield_now();
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
