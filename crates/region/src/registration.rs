//! When the region's range is registered with userfaultfd. A region is registered as it is
//! made, unless it is lazy (`RegionConfig::lazy_registration`: the heap of a program under
//! `uzswap run`). A lazy region's pages are the kernel's alone while its process is far from
//! its limit: a first touch, a discard or a fork then costs what it costs without uzswap,
//! where a registered range pays a handler's round trip for each first touch and a wait for
//! an event reader for each discard. kswapd reads the process's anonymous resident memory
//! before each pass (RssAnon, `Memory::anon_resident_bytes`: for a heap, at least its pages
//! present), which is charged meanwhile as the region's resident pages, and registers the
//! range once it reaches half the limit (`due`); then the pages the kernel mapped meanwhile
//! are adopted (adopt.rs), counted and queued for reclaim as if faulted in. From then on the
//! region is what a region registered at once is.
//!
//! Why half the limit, and at once under `LAZY_LEAST_LIMIT`: a thread filling fresh memory
//! maps it at the kernel's zero-fill speed, about 2 GB/s on this machine, so 512 MiB left
//! below the limit is about 250 ms for one thread and 125 ms for two: six or more of
//! kswapd's 20 ms passes, the registration and adoption included, before the limit could be
//! reached. A smaller limit leaves too small a margin, and a region under one registers at
//! once (a limit lowered below it, by `set_limits`, registers at kswapd's next pass).

use crate::lock_order::{self, Mutex};
use crate::memory::LateRegistration;
use std::sync::atomic::{
    AtomicU64, AtomicU8,
    Ordering::{Acquire, Relaxed, Release},
};

/// Limits below this register at once (see above).
pub(crate) const LAZY_LEAST_LIMIT: u64 = 1 << 30;

/// Not registered yet: the kernel's alone.
const PENDING: u8 = 0;
/// Registered, the pages present before not all adopted yet.
const ADOPTING: u8 = 1;
/// Registered, and every page present counted: the region's bookkeeping is complete.
const COMPLETE: u8 = 2;
/// The late registration failed (said): the kernel's alone for good.
const FAILED: u8 = 3;

/// The region's registration.
pub(crate) struct Registration {
    state: AtomicU8,
    /// The registration to make, while pending.
    late: Mutex<Option<LateRegistration>>,
    /// Pending: RssAnon as kswapd's last pass read it, charged as resident.
    estimate: AtomicU64,
}

impl Registration {
    /// A region registered as it is made.
    pub fn at_once() -> Self {
        Registration {
            state: AtomicU8::new(COMPLETE),
            late: Mutex::new(&lock_order::REGISTRATION, None),
            estimate: AtomicU64::new(0),
        }
    }

    /// A lazy region, registered by `late` once due.
    pub fn lazy(late: LateRegistration) -> Self {
        Registration {
            state: AtomicU8::new(PENDING),
            late: Mutex::new(&lock_order::REGISTRATION, Some(late)),
            estimate: AtomicU64::new(0),
        }
    }

    /// Whether a region under `limit`, in a process holding `anon` bytes of anonymous memory,
    /// is to be registered now.
    pub fn due(anon: u64, limit: u64) -> bool {
        limit < LAZY_LEAST_LIMIT || anon >= limit / 2
    }

    /// While the range is not registered yet: read the anonymous memory its process holds
    /// (charged from now on as the region's resident pages), and return it; `u64::MAX` when
    /// it cannot be read.
    pub fn watch(&self) -> Option<u64> {
        if self.state.load(Acquire) != PENDING {
            return None;
        }
        let late = self.late.lock();
        let anon = late.as_ref()?.anon_resident_bytes();
        if let Some(anon) = anon {
            self.estimate.store(anon, Relaxed);
        }
        Some(anon.unwrap_or(u64::MAX))
    }

    /// Bytes charged as resident for pages the region does not count itself: the estimate
    /// while the range is not registered.
    pub fn uncounted(&self) -> u64 {
        match self.state.load(Acquire) {
            PENDING | FAILED => self.estimate.load(Relaxed),
            _ => 0,
        }
    }

    /// Take the registration on: the registration to make, for the one caller that is to
    /// make it now.
    pub fn begin(&self) -> Option<LateRegistration> {
        let late = self.late.lock().take();
        if late.is_some() {
            self.state.store(ADOPTING, Release);
        }
        late
    }

    /// The registration failed: the range stays the kernel's.
    pub fn failed(&self) {
        self.state.store(FAILED, Release);
    }

    /// Every page present when the range was registered is counted now.
    pub fn adopted(&self) {
        self.state.store(COMPLETE, Release);
    }

    /// Whether the region counts every page present in its range: a page it does not count
    /// as resident (nor holds) then reads as zero.
    pub fn complete(&self) -> bool {
        self.state.load(Acquire) == COMPLETE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lazy_region_is_due_at_half_its_limit_and_at_once_under_the_least_limit() {
        let g = 1u64 << 30;
        assert!(!Registration::due(0, 4 * g));
        assert!(!Registration::due(2 * g - 1, 4 * g));
        assert!(Registration::due(2 * g, 4 * g));
        assert!(!Registration::due(g / 2 - 1, g));
        assert!(
            Registration::due(0, g - 1),
            "under the least limit: at once"
        );
        assert!(Registration::due(u64::MAX, 4 * g), "unreadable: at once");
    }

    #[test]
    fn the_estimate_is_charged_until_the_range_is_registered_and_taken_once() {
        let memory = crate::memory::Memory::Own(uffd::RawRegion::new(4096).unwrap());
        let r = Registration::lazy(memory.late_registration());
        assert!(!r.complete());
        let anon = r.watch().expect("pending");
        assert!(
            anon > 0 && anon < u64::MAX,
            "this process's RssAnon: {anon}"
        );
        assert_eq!(r.uncounted(), anon);
        assert!(r.begin().is_some());
        assert!(r.begin().is_none(), "one caller registers");
        assert!(r.watch().is_none());
        assert_eq!(r.uncounted(), 0, "the pages count themselves from here");
        assert!(!r.complete(), "adopting");
        r.adopted();
        assert!(r.complete());
        assert!(Registration::at_once().complete());
    }

    #[test]
    fn a_late_registration_of_a_region_gone_is_refused() {
        let uffd = uffd::UffdBuilder::new()
            .user_mode_only(true)
            .create()
            .unwrap();
        let memory = crate::memory::Memory::Own(uffd::RawRegion::new(4096).unwrap());
        let late = memory.late_registration();
        drop(memory);
        assert!(late.register(&uffd, uffd::RegisterMode::MISSING).is_err());
    }
}
