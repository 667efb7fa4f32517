//! Sequential scans of swapped-out memory: readahead in front of the scan, drop-behind
//! behind it.
//!
//! A fault that swapped a whole folio in (from the region's swap cache, the pool or the swap
//! file) looks for a recent swap-in a little before it (one per stream: several threads may
//! scan at once). Finding one, it is part of a sequential scan, and:
//! - **readahead**: the folios after it are queued, and readahead threads bring in those that
//!   are wholly out of memory and wholly on disk, under their folio locks, as a read fault
//!   would (clean, so reclaiming them unwritten costs nothing). The disk's latency overlaps
//!   with the program's work, as with the kernel's swap readahead. Faults never wait for
//!   readahead: a fault on a queued folio serves itself, and the readahead finds it resident
//!   and skips it.
//! - **drop-behind**: the folios the scan has passed since its last swap-in become the next
//!   to be reclaimed (reclaim.rs), ahead of the oldest folios. A scan of more memory than the
//!   limit otherwise evicts, oldest first, exactly the pages it is about to reach, and misses
//!   on every folio; with drop-behind the pages it has not reached yet stay resident and hit.
//!   The folios behind a scan that came from disk are still clean, so they leave without a
//!   store. (The page cache drops behind a sequential read in the same way, and MRU order is
//!   the known answer for cyclic scans larger than memory.)

use std::collections::VecDeque;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use zswap::swap::Kind;
use zswap::PAGE_SIZE;

use crate::events::pending_mask;
use crate::region::Inner;

/// How far ahead: 512 KiB, at least one folio, at most 16.
fn window_folios(inner: &Inner) -> u32 {
    ((512 << 10) / inner.folio_bytes() as u32).clamp(1, 16)
}

/// Streams remembered (a thread scanning each).
const STREAMS: usize = 8;

#[derive(Debug, Default)]
pub(crate) struct Readahead {
    /// Folio starts to read ahead, oldest first.
    queue: Mutex<VecDeque<u32>>,
    wake: Condvar,
    /// The last swap-in fault of each recent stream (folio start + 1; 0: empty).
    streams: Mutex<[u32; STREAMS]>,
}

/// The stream (index in `streams`) whose last swap-in lies at most a window (plus one)
/// before `start`: the folios between were read ahead, or were resident.
fn stream_before(inner: &Inner, streams: &[u32; STREAMS], start: u32) -> Option<usize> {
    let reach = (window_folios(inner) + 1) * inner.folio_pages;
    streams
        .iter()
        .position(|&s| s != 0 && s - 1 < start && start - (s - 1) <= reach)
}

/// Whether swapping in the folio at `start` would continue a sequential scan, which drops it
/// behind soon after (with drop-behind on): such a folio keeps its pool copy (clean.rs).
pub(crate) fn dropped_behind_soon(inner: &Inner, start: u32) -> bool {
    inner.drop_behind && stream_before(inner, &inner.readahead.streams.lock(), start).is_some()
}

/// A fault swapped in the whole folio at `start`.
pub(crate) fn after_swapin(inner: &Inner, start: u32) {
    let fp = inner.folio_pages;
    let window = window_folios(inner);
    let previous = {
        let mut streams = inner.readahead.streams.lock();
        let found = stream_before(inner, &streams, start);
        let slot = found.unwrap_or_else(|| {
            // A new stream replaces the oldest (entries move up as they are used).
            streams.rotate_right(1);
            0
        });
        let previous = found.map(|i| streams[i] - 1);
        streams[slot] = start + 1;
        previous
    };
    let Some(previous) = previous else {
        return;
    };
    if inner.drop_behind {
        crate::reclaim::drop_behind(inner, (previous..start).step_by(fp as usize));
    }
    let nr_pages = (inner.mapping.len() / PAGE_SIZE) as u32;
    let mut queue = inner.readahead.queue.lock();
    for k in 1..=window {
        let next = start + k * fp;
        if next >= nr_pages {
            break;
        }
        if !queue.contains(&next) {
            queue.push_back(next);
        }
    }
    // Bounded: a stale backlog is worse than none.
    while queue.len() > 4 * window as usize {
        queue.pop_front();
    }
    drop(queue);
    inner.readahead.wake.notify_one();
}

pub(crate) fn readahead_loop(inner: &Inner) {
    while !inner.stop.load(Relaxed) {
        let next = {
            let mut queue = inner.readahead.queue.lock();
            if queue.is_empty() {
                inner
                    .readahead
                    .wake
                    .wait_for(&mut queue, Duration::from_millis(100));
            }
            queue.pop_front()
        };
        if let Some(start) = next {
            read_ahead(inner, start);
        }
    }
}

/// Bring in the folio at `start` if it is wholly out and wholly on disk.
fn read_ahead(inner: &Inner, start: u32) {
    crate::reclaim::throttle(inner);
    let folio = inner.group.lock_folio(start, inner.folio_order);
    let out_on_disk = folio
        .offsets()
        .all(|p| !inner.is_resident(p) && folio.state(p).kind == Kind::OnDisk);
    if !out_on_disk || inner.swapcache.contains(start) {
        return;
    }
    let mut gate = inner.mapping.gate();
    if pending_mask(inner, folio.start(), folio.end()).is_some() {
        return; // a discard is on its way: leave the folio to it
    }
    inner.queue_for_reclaim(start);
    let done = crate::fault::with_folio_buf(folio.nr_pages() as usize, |buf| {
        crate::fault::load_whole(inner, &folio, false, buf, &mut gate)
    });
    drop(gate);
    drop(folio);
    // On a stop (events pending, range gone) what went in is settled; the rest stays out.
    if let Ok(true) = done {
        inner.stats.readahead_folios.fetch_add(1, Relaxed);
    }
    // Threads that faulted on the folio before it went in resume now, rather than when a
    // handler reads their fault and finds the folio present.
    inner
        .mapping
        .wake(inner.mapping.page_addr(start), inner.folio_bytes());
}
