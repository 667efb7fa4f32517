//! Clean pages: a folio read back whole from the swap file keeps its slots, so reclaiming it
//! again before it is written costs neither a compression nor a write (the kernel's clean
//! swap cache pages do the same). A folio a sequential scan brings back from the pool keeps
//! its pool objects the same way: the scan drops it behind soon (readahead.rs), and it then
//! leaves with no compression. (Elsewhere a pool copy is not kept: it would stay charged to
//! the limit beside the resident folio for as long as the folio stays.)
//!
//! Such a folio is installed write-protected (`UFFDIO_COPY` with `MODE_WP`; the region is
//! registered for write-protect faults as well as missing ones). While its pages are
//! resident and the engine still holds a copy of each, it is clean by construction: nothing
//! could have written it. The first write raises a write-protect fault: under the folio lock
//! the engine's copies are freed (invariant 2 is kept: the page in the mapping is the newer
//! copy) and only then is the protection lifted and the writer woken. Reclaim that finds
//! every page of a folio resident with an engine copy drops the pages after moving them out,
//! with no store. A resident page has an engine copy only while it is clean: every path that
//! makes it writable otherwise (a move back into the region) drops the copy first.
//!
//! A write fault installs without protection (the copy would be dropped at once), and when
//! most clean folios are written soon after they come in (read-modify-write, as in a random
//! update workload), the extra fault costs more than it saves: then folios stop being kept
//! clean, except one in 16 that keeps measuring.
//!
//! This part decides and counts; the fault installs (swapin.rs) and serves the write-protect
//! fault (fault.rs), and reclaim evicts without a store.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use zswap::swap::{FolioLock, Kind};

/// Whether folios read from disk are kept clean, from how often they were written.
#[derive(Debug)]
pub(crate) struct CleanTracking {
    /// The region is registered for write-protect faults.
    pub enabled: bool,
    /// Folios installed clean, and those of them written later (decayed together).
    installs: AtomicU64,
    dirtied: AtomicU64,
    probe: AtomicU64,
}

/// Counts are halved past this many installs, so the decision follows the workload's phase.
const DECAY_AFTER: u64 = 4096;

impl CleanTracking {
    pub fn new(enabled: bool) -> Self {
        CleanTracking {
            enabled,
            installs: AtomicU64::new(0),
            dirtied: AtomicU64::new(0),
            probe: AtomicU64::new(0),
        }
    }

    /// Keep the folio about to be installed from disk by a read fault clean?
    pub fn keep(&self) -> bool {
        if !self.enabled {
            return false;
        }
        let (installs, dirtied) = (self.installs.load(Relaxed), self.dirtied.load(Relaxed));
        dirtied * 2 <= installs || self.probe.fetch_add(1, Relaxed).is_multiple_of(16)
    }

    pub fn installed(&self) {
        if self.installs.fetch_add(1, Relaxed) >= DECAY_AFTER {
            // Racy halving is fine: the counts only steer a heuristic.
            self.installs.store(DECAY_AFTER / 2, Relaxed);
            let d = self.dirtied.load(Relaxed);
            self.dirtied.store(d / 2, Relaxed);
        }
    }

    /// A folio installed clean was written.
    pub fn dirtied(&self) {
        self.dirtied.fetch_add(1, Relaxed);
    }
}

/// Whether the engine holds a readable copy of the page: in the pool, on disk or as a zero
/// mark. For a resident page, that it is clean.
pub(crate) fn engine_has_copy(kind: Kind) -> bool {
    matches!(kind, Kind::Stored | Kind::OnDisk | Kind::Zero)
}

/// Every page of the locked folio is resident (the caller checked) and the engine still has
/// a copy of it: it has not been written since it came in.
pub(crate) fn is_clean(folio: &FolioLock) -> bool {
    folio
        .offsets()
        .all(|p| engine_has_copy(folio.state(p).kind))
}
