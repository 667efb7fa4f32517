//! Faults: a program's access to a page of the region that is not there (missing), or a
//! write to a page installed write-protected (clean.rs) or protected by reclaim (lru.rs).
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

use zswap::swap::Kind;
use zswap::PAGE_SIZE;

use crate::inner::Inner;
use crate::mapping::Stop;
use crate::stats::FaultSource;
use crate::swapin;

/// The page a faulting `addr` falls in and the start of its folio. None for an address that
/// is not the region's (an mremap moved the region under a pending fault): the faulting
/// thread is woken to retry.
pub(crate) fn faulting_folio(inner: &Inner, addr: usize) -> Option<(u32, u32)> {
    let Some(page) = inner.mapping.page_of(addr) else {
        inner.mapping.wake(addr & !(PAGE_SIZE - 1), PAGE_SIZE);
        return None;
    };
    Some((page, page & !(inner.folio_pages - 1)))
}

/// Bring back the folio holding `addr`. False if left undone, for a regular handler: the spare
/// found the folio held (spare.rs), or the region over its limit with throttling on.
pub(crate) fn serve_fault(inner: &Inner, addr: usize, write: bool) -> bool {
    let t0 = Instant::now();
    let base_at_fault = inner.mapping.base();
    let Some((page, start)) = faulting_folio(inner, addr) else {
        return true;
    };
    if spare_leaves(inner, start) {
        return false;
    }
    if !crate::reclaim::make_room(inner) {
        let enforced = inner.over_limit_config.throttle
            || inner.memory_max.load(std::sync::atomic::Ordering::Relaxed) != u64::MAX;
        if crate::spare::is_spare() && enforced {
            // The spare keeps the userfaultfd served; a fault that may sleep or wait for
            // reclaim over the limit waits for a regular handler.
            return false;
        }
        crate::throttle::handle_over_limit(inner, inner.folio_bytes() as u64);
    }
    let folio = inner.lock_folio_for_event(start);
    inner.stats.faults.fetch_add(1, Relaxed);
    let kinds = || folio.offsets().map(|p| folio.state(p).kind);
    let source = if kinds().any(|k| k == Kind::OnDisk) {
        FaultSource::Device
    } else if kinds().any(|k| k == Kind::Stored) {
        FaultSource::Pool
    } else {
        FaultSource::Other
    };
    let (installed, first_touch) =
        swapin::swap_in(inner, &folio, page, write, swapin::Bring::ForFault);
    drop(folio);
    // The faulting threads are woken only now, with the folio lock and the event gate given
    // up: the scheduler often runs a woken thread on the waker's CPU at once, and a handler
    // preempted while holding them would stall every other fault and the event reader.
    inner
        .mapping
        .wake(inner.mapping.page_addr(start), inner.folio_bytes());
    if inner.mapping.base() != base_at_fault {
        // The region moved (mremap) since this thread faulted at its old place: it waits on
        // that address, and only a wake there releases it (to fault again where it is now).
        inner.mapping.wake(addr & !(PAGE_SIZE - 1), PAGE_SIZE);
    }
    if first_touch && installed > 0 {
        fault_around(inner, start + inner.folio_pages, write);
    }
    inner.stats.record_latency(t0.elapsed(), source);
    if inner.usage().total() > inner.limit().saturating_sub(inner.folio_bytes() as u64 * 4) {
        inner.reclaim_wait.wake_kswapd();
    }
    true
}

/// How far past a first touch untouched memory is mapped at once.
const FAULT_AROUND_BYTES: usize = 256 << 10;

/// After a first-touch fault: the next untouched folios are mapped too, while the limit has
/// room for them, so a program filling fresh memory faults once per 256 KiB instead of once
/// per folio (the kernel spares anonymous first touches the same way with fault-around and
/// THP). After a write they get zero-filled pages, writable at once (the zero page would cost
/// a copy-on-write fault, and a TLB flush, for every page written); after a read, the zero
/// page, which costs no memory until written. They count as resident from now on, so the limit
/// holds however the program uses them. Stops at the first folio that is not untouched, or
/// that has a page under another protection than read-write (a reservation not committed:
/// zeroes there would stay resident, and unevictable).
fn fault_around(inner: &Inner, from: u32, write: bool) {
    let folio_bytes = inner.folio_bytes();
    let window = (FAULT_AROUND_BYTES / folio_bytes) as u32;
    let room = inner.limit().saturating_sub(inner.limit() / 64);
    if window == 0 || inner.usage().total() + (FAULT_AROUND_BYTES as u64) > room {
        return;
    }
    let nr_pages = (inner.mapping.len() / PAGE_SIZE) as u32;
    let untouched = |p: u32| !inner.pages.is_resident(p) && inner.group.peek(p).kind == Kind::Empty;
    for k in 0..window {
        let start = from + k * inner.folio_pages;
        if start + inner.folio_pages > nr_pages
            || inner
                .unevictable
                .any_protected(start, start + inner.folio_pages)
            || inner.group.cache().is_locked(start)
            || !(start..start + inner.folio_pages).all(untouched)
        {
            return;
        }
        let folio = inner.group.lock_folio(start, inner.folio_order);
        let still = folio
            .offsets()
            .all(|p| !inner.pages.is_resident(p) && folio.state(p).kind == Kind::Empty);
        if !still || inner.staged.contains(start) {
            return;
        }
        let gate = inner.mapping.gate();
        if inner
            .discards
            .pending_mask(folio.start(), folio.end())
            .is_some()
        {
            return;
        }
        // Queued before anything goes in, as a fault does (a stale entry is skipped).
        inner.lru.queue(start);
        // Present already (not ours to know of), or the mapping is changing: leave the rest
        // to faults; what went in before the stop is settled.
        let (done, go_on) = match inner.mapping.map_zeros(&gate, start, folio_bytes, write) {
            Ok(()) => (folio_bytes, true),
            Err(done) => (done, false),
        };
        for p in start..start + (done / PAGE_SIZE) as u32 {
            inner.pages.set_resident(p, true);
        }
        if done > 0 {
            // Brought in by the fault that triggered it: counted in its pages per fault.
            inner
                .stats
                .pages_in
                .fetch_add((done / PAGE_SIZE) as u64, Relaxed);
            inner.stats.fault_around.fetch_add(1, Relaxed);
        }
        if !go_on {
            return;
        }
    }
}

/// A write hit a write-protected page of the region at `addr`. False if left undone, as
/// `serve_fault`.
pub(crate) fn serve_wp_fault(inner: &Inner, addr: usize) -> bool {
    let Some((_, start)) = faulting_folio(inner, addr) else {
        return true;
    };
    if spare_leaves(inner, start) {
        return false;
    }
    let folio = inner.lock_folio_for_event(start);
    inner.stats.wp_faults.fetch_add(1, Relaxed);
    // Written while going round the LRU write-protected: active again (lru.rs).
    if inner.lru.written(start) {
        inner.stats.written_round.fetch_add(1, Relaxed);
    }
    // The folio's pages are one unit: the engine's copies of all of them go, so reclaim
    // stores the folio whole next time.
    let mut dropped = false;
    for p in folio.offsets() {
        if inner.pages.is_resident(p) && crate::clean::engine_has_copy(folio.state(p).kind) {
            inner.group.invalidate_page(&folio, p);
            dropped = true;
        }
    }
    if dropped {
        inner.clean.dirtied();
    }
    let len = folio.nr_pages() as usize * PAGE_SIZE;
    // Lifts the protection of whatever is present and wakes the writers; a page moved out
    // meanwhile faults again as missing. A gone range ends it too: the writers are woken where
    // it was.
    let unprotected = crate::events::under_gate(inner, |gate| {
        // Under the gate: an `mremap` of the region is applied as it is read (events.rs).
        let folio_addr = inner.mapping.page_addr(start);
        match inner.mapping.write_unprotect(gate, folio_addr, len) {
            Ok(()) | Err(Stop::Gone) => Ok(folio_addr),
            Err(Stop::EventsPending) => Err(Stop::EventsPending),
        }
    });
    if let Some(folio_addr) = unprotected {
        inner.mapping.wake(folio_addr, len);
    }
    true
}

/// This thread is the spare and the fault's folio at `start` is held: the fault is left to
/// a regular handler (only they may wait for a folio, spare.rs). A holder that comes between
/// this check and the lock is waited for, as any handler would.
fn spare_leaves(inner: &Inner, start: u32) -> bool {
    let leave = crate::spare::is_spare() && inner.group.is_locked(start);
    if leave {
        inner.stats.spare_deferred.fetch_add(1, Relaxed);
    }
    leave
}
