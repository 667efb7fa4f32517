//! `writethrough=auto`: whether a store writes its pages through, by how full the pool is and
//! by where the pool's pages go.
//!
//! Writing a page through at store time spends a write that the page may never need: one
//! loaded or invalidated before the pool pushes it out leaves without a write in writeback
//! mode. The write pays only for a page the pool pushes out to the disk: there it is already
//! done, and the page is dropped without one, off the path of the store that needs the room.
//! So auto writes through while both hold:
//! - the pool is above its accept threshold, or full: each store now pushes an older page
//!   out (`Shared::writes_through`);
//! - over the last epoch (`EPOCH_PAGES` pages stored), at least half as many pages left the
//!   pool for the disk as were stored: written back (`zswpwb`) or dropped with their
//!   writethrough copy (`writethrough_evictions`). Where pages come back from the pool before
//!   it pushes them out (a working set that fits the pool), the share stays low and stores
//!   write nothing through, however full the pool is.
//!
//! The share is measured in either mode, so auto needs no probing to change its mind.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use parking_lot::Mutex;

use crate::stats::Stats;

/// Pages stored between two decisions: 4 MiB.
pub(crate) const EPOCH_PAGES: u64 = 1024;

/// The measure behind auto's second condition.
#[derive(Debug, Default)]
pub(crate) struct DiskShare {
    /// Pages stored and pages that left the pool for the disk, as counted when the epoch
    /// began.
    epoch_start: Mutex<(u64, u64)>,
    /// In the last epoch, at least half as many pages left for the disk as were stored.
    disk_bound: AtomicBool,
}

impl DiskShare {
    /// Whether the pool's pages have been going to the disk.
    pub(crate) fn disk_bound(&self) -> bool {
        self.disk_bound.load(Relaxed)
    }

    /// After a store: once `EPOCH_PAGES` pages have been stored since the epoch began,
    /// decide from the counters and begin the next. One thread decides; the others go on.
    pub(crate) fn stored(&self, stats: &Stats) {
        let Some(mut start) = self.epoch_start.try_lock() else {
            return;
        };
        let stored = stats.zswpout.load(Relaxed);
        if stored.saturating_sub(start.0) < EPOCH_PAGES {
            return;
        }
        let to_disk = stats.zswpwb.load(Relaxed) + stats.writethrough_evictions.load(Relaxed);
        self.disk_bound.store(
            2 * to_disk.saturating_sub(start.1) >= stored - start.0,
            Relaxed,
        );
        *start = (stored, to_disk);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_the_stores_gone_to_disk_makes_it_disk_bound() {
        let stats = Stats::default();
        let share = DiskShare::default();
        let epoch = |stored: u64, written: u64, dropped: u64| {
            Stats::add(&stats.zswpout, stored);
            Stats::add(&stats.zswpwb, written);
            Stats::add(&stats.writethrough_evictions, dropped);
            share.stored(&stats);
        };
        assert!(!share.disk_bound());
        epoch(EPOCH_PAGES - 1, EPOCH_PAGES, 0);
        assert!(!share.disk_bound(), "decided before the epoch was over");
        epoch(1, 0, 0);
        assert!(share.disk_bound());
        epoch(EPOCH_PAGES, EPOCH_PAGES / 4, EPOCH_PAGES / 4);
        assert!(
            share.disk_bound(),
            "written back and dropped count together"
        );
        epoch(EPOCH_PAGES, EPOCH_PAGES / 2 - 1, 0);
        assert!(!share.disk_bound());
    }
}
