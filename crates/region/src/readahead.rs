//! Sequential scans of swapped-out memory: readahead in front of the scan, drop-behind
//! behind it.
//!
//! A fault that swapped a whole folio in (staged, from the pool or from the swap
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
//!
//! This part decides; swapin.rs reads ahead (`readahead_loop`) and the LRU drops behind.

use std::collections::VecDeque;
use std::iter::StepBy;
use std::ops::Range;
use std::time::Duration;

use parking_lot::Condvar;

use crate::lock_order::{self, Mutex};
use zswap::PAGE_SIZE;

/// Streams remembered (a thread scanning each).
const STREAMS: usize = 8;

/// How far ahead: 512 KiB, at least one folio, at most 16.
const WINDOW_BYTES: usize = 512 << 10;
const WINDOW_MAX_FOLIOS: u32 = 16;

#[derive(Debug)]
pub(crate) struct Readahead {
    /// Folio starts to read ahead, oldest first.
    queue: Mutex<VecDeque<u32>>,
    wake: Condvar,
    /// The last swap-in fault of each recent stream (folio start + 1; 0: empty).
    streams: Mutex<[u32; STREAMS]>,
    folio_pages: u32,
    nr_pages: u32,
    /// Folios a scan has passed are dropped behind (`Policies::drop_behind`).
    drop_behind: bool,
}

impl Readahead {
    /// Readahead for a region of `nr_pages` pages in folios of `folio_pages`.
    pub fn new(folio_pages: u32, nr_pages: u32, drop_behind: bool) -> Self {
        Readahead {
            queue: Mutex::new(&lock_order::READAHEAD, VecDeque::new()),
            wake: Condvar::new(),
            streams: Mutex::new(&lock_order::READAHEAD, [0; STREAMS]),
            folio_pages,
            nr_pages,
            drop_behind,
        }
    }

    /// The window, in folios.
    fn window(&self) -> u32 {
        (WINDOW_BYTES as u32 / (self.folio_pages * PAGE_SIZE as u32)).clamp(1, WINDOW_MAX_FOLIOS)
    }

    /// The stream (index in `streams`) whose last swap-in lies at most a window (plus one)
    /// before `start`: the folios between were read ahead, or were resident.
    fn stream_before(&self, streams: &[u32; STREAMS], start: u32) -> Option<usize> {
        let reach = (self.window() + 1) * self.folio_pages;
        streams
            .iter()
            .position(|&s| s != 0 && s - 1 < start && start - (s - 1) <= reach)
    }

    /// Whether swapping in the folio at `start` would continue a sequential scan.
    pub fn continues_scan(&self, start: u32) -> bool {
        self.stream_before(&self.streams.lock(), start).is_some()
    }

    /// Whether swapping in the folio at `start` would continue a sequential scan, which drops
    /// it behind soon after (with drop-behind on): such a folio keeps its pool copy
    /// (clean.rs).
    pub fn dropped_behind_soon(&self, start: u32) -> bool {
        self.drop_behind && self.continues_scan(start)
    }

    /// A fault swapped in the whole folio at `start`. If that continues a scan, the folios
    /// ahead of it that are `worth` reading ahead are queued for readahead (a readahead
    /// thread is woken only for those: a wake-up costs the faulting thread a few
    /// microseconds, and most folios ahead of a scan are resident or in the pool), and the
    /// folios the scan has passed since its last swap-in are returned, to be dropped behind
    /// (None with drop-behind off).
    pub fn swapped_in(
        &self,
        start: u32,
        worth: impl Fn(u32) -> bool,
    ) -> Option<StepBy<Range<u32>>> {
        let fp = self.folio_pages;
        let window = self.window();
        let previous = {
            let mut streams = self.streams.lock();
            let found = self.stream_before(&streams, start);
            let slot = found.unwrap_or_else(|| {
                // A new stream replaces the oldest (entries move up as they are used).
                streams.rotate_right(1);
                0
            });
            let previous = found.map(|i| streams[i] - 1);
            streams[slot] = start + 1;
            previous
        }?;
        let ahead: Vec<u32> = (1..=window)
            .map(|k| start + k * fp)
            .take_while(|&next| next < self.nr_pages)
            .filter(|&next| worth(next))
            .collect();
        if !ahead.is_empty() {
            let mut queue = self.queue.lock();
            for next in ahead {
                if !queue.contains(&next) {
                    queue.push_back(next);
                }
            }
            // Bounded: a stale backlog is worse than none.
            while queue.len() > 4 * window as usize {
                queue.pop_front();
            }
            drop(queue);
            self.wake.notify_one();
        }
        self.drop_behind
            .then(|| (previous..start).step_by(fp as usize))
    }

    /// Whether a folio waits to be read ahead.
    pub fn any_queued(&self) -> bool {
        !self.queue.lock().is_empty()
    }

    /// Wake every thread waiting in `next` (to see that it must stop).
    pub fn wake_all(&self) {
        let _queue = self.queue.lock();
        self.wake.notify_all();
    }

    /// The next folio to read ahead, waiting up to `timeout` for one.
    pub fn next(&self, timeout: Duration) -> Option<u32> {
        let mut queue = self.queue.lock();
        if queue.is_empty() {
            self.wake.wait_for(queue.parking_lot(), timeout);
        }
        queue.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scan_reads_ahead_and_drops_behind() {
        // 64 KiB folios: a window of 8.
        let ra = Readahead::new(16, 16 * 64, true);
        assert!(ra.swapped_in(0, |_| true).is_none(), "a new stream");
        assert!(ra.dropped_behind_soon(32));
        let passed: Vec<u32> = ra.swapped_in(32, |_| true).unwrap().collect();
        assert_eq!(passed, [0, 16]);
        let ahead: Vec<u32> = std::iter::from_fn(|| ra.next(Duration::ZERO)).collect();
        assert_eq!(ahead, (1..=8).map(|k| 32 + k * 16).collect::<Vec<_>>());
        assert!(!ra.dropped_behind_soon(32 + 10 * 16), "past the window");
    }

    #[test]
    fn without_drop_behind_nothing_is_passed() {
        let ra = Readahead::new(16, 16 * 64, false);
        ra.swapped_in(0, |_| true);
        assert!(ra.swapped_in(16, |_| true).is_none());
        assert!(!ra.dropped_behind_soon(32));
        assert_eq!(ra.next(Duration::ZERO), Some(32));
    }

    #[test]
    fn only_folios_worth_reading_are_queued() {
        let ra = Readahead::new(16, 16 * 64, true);
        ra.swapped_in(0, |_| true);
        ra.swapped_in(16, |next| next == 64 || next == 96);
        let ahead: Vec<u32> = std::iter::from_fn(|| ra.next(Duration::ZERO)).collect();
        assert_eq!(ahead, [64, 96]);
    }
}
