//! Discards the region has read: those not processed yet (pending), and those processed
//! lately, whose zap may still come (recent). events.rs says what each is for.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::lock_order::{self, Mutex};

/// How long after its processing a discard's zap is still looked for: the discarding thread
/// zaps once it runs again after its event was read, which a loaded machine may put off for
/// a while.
const LATE_ZAP_WINDOW: Duration = Duration::from_secs(10);

/// Recent ranges kept at most; past that, every page counts as covered until the window has
/// passed since the last range that did not fit (a mark kept too long only turns
/// `lost_track`'s check of that page into a late zap).
const RECENT_MAX: usize = 1024;

/// A discard read but not processed yet: its addresses as the event gave them, and the
/// region pages `[first, last)` they covered when it was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PendingDiscard {
    start: usize,
    end: usize,
    pub first: u32,
    pub last: u32,
    /// A handler is processing it.
    claimed: bool,
}

/// Ranges processed less than `LATE_ZAP_WINDOW` ago, oldest first.
#[derive(Debug, Default)]
struct RecentDiscards {
    ranges: VecDeque<(u32, u32, Instant)>,
    overflow: Option<Instant>,
}

impl RecentDiscards {
    fn prune(&mut self, now: Instant) {
        let old = |at: Instant| now.saturating_duration_since(at) >= LATE_ZAP_WINDOW;
        while self.ranges.front().is_some_and(|&(_, _, at)| old(at)) {
            self.ranges.pop_front();
        }
        if self.overflow.is_some_and(old) {
            self.overflow = None;
        }
    }

    fn push(&mut self, first: u32, last: u32, now: Instant) {
        self.prune(now);
        if self.ranges.len() < RECENT_MAX {
            self.ranges.push_back((first, last, now));
        } else {
            self.overflow = Some(now);
        }
    }

    fn covers(&mut self, p: u32, now: Instant) -> bool {
        self.prune(now);
        self.overflow.is_some() || self.ranges.iter().any(|&(f, l, _)| (f..l).contains(&p))
    }
}

/// The region's discards, pending and recent.
#[derive(Debug)]
pub(crate) struct Discards {
    pending: Mutex<Vec<PendingDiscard>>,
    recent: Mutex<RecentDiscards>,
}

impl Default for Discards {
    fn default() -> Self {
        Discards {
            pending: Mutex::new(&lock_order::DISCARDS, Vec::new()),
            recent: Mutex::new(&lock_order::DISCARDS, RecentDiscards::default()),
        }
    }
}

impl Discards {
    /// A discard of `[start, end)`, covering the pages `[first, last)`, was read. Call under
    /// the exclusive event gate.
    pub fn read(&self, start: usize, end: usize, first: u32, last: u32) {
        self.pending.lock().push(PendingDiscard {
            start,
            end,
            first,
            last,
            claimed: false,
        });
    }

    /// For the pages `[first, last)`: which have a discard pending (None if none does). Call
    /// with the event gate held shared.
    pub fn pending_mask(&self, first: u32, last: u32) -> Option<Vec<bool>> {
        let pending = self.pending.lock();
        if !pending.iter().any(|d| d.first < last && first < d.last) {
            return None;
        }
        Some(
            (first..last)
                .map(|p| pending.iter().any(|d| (d.first..d.last).contains(&p)))
                .collect(),
        )
    }

    /// Take the pending discard of `[start, end)` to process it; None if no such discard is
    /// pending unclaimed (it missed the region).
    pub fn claim(&self, start: usize, end: usize) -> Option<PendingDiscard> {
        let mut pending = self.pending.lock();
        let d = pending
            .iter_mut()
            .find(|d| !d.claimed && (d.start, d.end) == (start, end))?;
        d.claimed = true;
        Some(*d)
    }

    /// The claimed discard is processed: its range becomes recent, then stops being pending
    /// (so a page an install may map from now on is covered).
    pub fn processed(&self, claimed: PendingDiscard) {
        self.recent
            .lock()
            .push(claimed.first, claimed.last, Instant::now());
        let mut pending = self.pending.lock();
        if let Some(i) = pending.iter().position(|d| *d == claimed) {
            pending.swap_remove(i);
        }
    }

    /// Whether any discard is read and not processed yet.
    #[cfg(feature = "test-hooks")]
    pub fn any_pending(&self) -> bool {
        !self.pending.lock().is_empty()
    }

    /// The parts of pages `first..end` that discards processed less than `LATE_ZAP_WINDOW`
    /// ago covered (all of them while the recent ranges overflow).
    pub fn recently_covered_within(&self, first: u32, end: u32) -> Vec<(u32, u32)> {
        let mut recent = self.recent.lock();
        recent.prune(Instant::now());
        if recent.overflow.is_some() {
            return vec![(first, end)];
        }
        recent
            .ranges
            .iter()
            .map(|&(f, l, _)| (f.max(first), l.min(end)))
            .filter(|&(a, b)| a < b)
            .collect()
    }

    /// Whether a discard processed less than `LATE_ZAP_WINDOW` ago covered page `p`.
    pub fn recently_covered(&self, p: u32) -> bool {
        self.recent.lock().covers(p, Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_discard_is_pending_from_its_read_until_processed_then_recent() {
        let d = Discards::default();
        assert_eq!(d.pending_mask(0, 4), None);
        d.read(0x1000, 0x3000, 1, 3);
        assert_eq!(d.pending_mask(0, 4), Some(vec![false, true, true, false]));
        assert!(d.claim(0x1000, 0x2000).is_none(), "another range");
        let c = d.claim(0x1000, 0x3000).unwrap();
        assert!(d.claim(0x1000, 0x3000).is_none(), "claimed once");
        assert!(d.pending_mask(2, 3).is_some(), "pending while processed");
        d.processed(c);
        assert_eq!(d.pending_mask(0, 4), None);
        assert!(d.recently_covered(2) && !d.recently_covered(3));
    }

    #[test]
    fn a_range_is_covered_for_the_window_and_no_longer() {
        let t0 = Instant::now();
        let mut r = RecentDiscards::default();
        r.push(10, 20, t0);
        assert!(r.covers(10, t0) && r.covers(19, t0));
        assert!(!r.covers(9, t0) && !r.covers(20, t0));
        let almost = t0 + LATE_ZAP_WINDOW - Duration::from_millis(1);
        assert!(r.covers(15, almost));
        assert!(!r.covers(15, t0 + LATE_ZAP_WINDOW), "the window has passed");
        assert!(r.ranges.is_empty());
    }

    /// Past `RECENT_MAX` ranges in one window, every page counts as covered (marks are kept)
    /// until a window has passed since the last range that did not fit.
    #[test]
    fn too_many_ranges_keep_every_mark_for_a_window() {
        let t0 = Instant::now();
        let mut r = RecentDiscards::default();
        for i in 0..RECENT_MAX as u32 {
            r.push(2 * i, 2 * i + 1, t0);
        }
        assert!(!r.covers(1, t0), "between ranges, and nothing overflowed");
        let t1 = t0 + Duration::from_secs(1);
        r.push(1_000_000, 1_000_001, t1);
        assert!(r.covers(1, t1), "overflowed: every mark kept");
        assert_eq!(r.ranges.len(), RECENT_MAX);
        // The ranges expire a window after t0, the overflow a window after t1.
        assert!(r.covers(1, t0 + LATE_ZAP_WINDOW));
        assert!(r.ranges.is_empty());
        assert!(!r.covers(1, t1 + LATE_ZAP_WINDOW));
    }
}
