//! When the region's range is registered with userfaultfd. A region is registered as it is
//! made, unless it is lazy (`RegionConfig::lazy_registration`: the heap of a program under
//! `uzswap run`). A lazy region's pages are the kernel's alone while its process is far from
//! its limit: a first touch, a discard or a fork then costs what it costs without uzswap,
//! where a registered range pays a handler's round trip for each first touch and a wait for
//! an event reader for each discard. kswapd reads the process's anonymous memory before each
//! pass (RssAnon and VmSwap, `LateRegistration::anon_bytes`: for a heap, at least what its
//! pages take), which is charged meanwhile as the region's resident pages, and registers the
//! range once it reaches half the limit (`due`); then the pages the kernel mapped meanwhile
//! are adopted (adopt.rs), counted and queued for reclaim as if faulted in. From then on the
//! region is what a region registered at once is.
//!
//! Why half the limit, and at once under the least limit: a CPU filling fresh memory maps it
//! at the kernel's zero-fill speed, 1.3-2 GB/s on the development machine (4 KiB pages), so
//! 256 MiB left below the limit for each CPU the process may run on is 130-200 ms: six or
//! more of kswapd's 20 ms passes, the registration and adoption included, before the limit
//! could be reached. A limit under twice that margin (1 GiB at least) leaves too little, and
//! a region under one registers at once (a limit lowered below it, by `set_limits` or a
//! process tree's share, registers at kswapd's next pass).

use crate::lock_order::{self, Mutex};
use crate::memory::LateRegistration;
use std::sync::atomic::{
    AtomicU64, AtomicU8,
    Ordering::{Acquire, Relaxed, Release},
};

/// The margin below the limit kept for each CPU (see above).
const MARGIN_PER_CPU: u64 = 256 << 20;
/// The least limit a region is lazy under: two CPUs' margins, at least.
const LEAST_LIMIT: u64 = 1 << 30;

/// Not registered yet: the kernel's alone.
const PENDING: u8 = 0;
/// Registered, the pages present before not all adopted yet.
const ADOPTING: u8 = 1;
/// Registered, and every page present counted: the region's bookkeeping is complete.
const COMPLETE: u8 = 2;
/// The late registration failed (said): the kernel's alone for good.
const FAILED: u8 = 3;
/// Registered and adopted, but for pages left (a discard's zap that may still come, page
/// tables that could not be read): adopted again later (`PARTIAL_RETRY`).
const PARTIAL: u8 = 4;

/// How long a partial adoption waits before it looks again: the window in which a
/// discard's zap may come late (events.rs `LATE_ZAP_WINDOW`), and a little more.
pub(crate) const PARTIAL_RETRY: std::time::Duration = std::time::Duration::from_secs(11);

/// The region's registration.
pub(crate) struct Registration {
    state: AtomicU8,
    /// The registration to make, while pending.
    late: Mutex<Option<LateRegistration>>,
    /// Pending: the anonymous memory kswapd's last pass read, charged as resident.
    estimate: AtomicU64,
    /// Adopting: the pages adopted so far (the estimate less them is charged meanwhile).
    adopted: AtomicU64,
    /// Partial: when the last adoption ended.
    partial_since: Mutex<Option<std::time::Instant>>,
    /// The least limit the region is lazy under, for the CPUs the process may run on.
    least_limit: u64,
}

impl Registration {
    /// A region registered as it is made (`late` None), or by `late` once due: at once
    /// too under `limit` if that is below the least limit.
    pub fn new(late: Option<LateRegistration>, limit: u64) -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
        let least_limit = Self::least_limit(cpus);
        let late = late.filter(|_| limit >= least_limit);
        Registration {
            state: AtomicU8::new(if late.is_some() { PENDING } else { COMPLETE }),
            late: Mutex::new(&lock_order::REGISTRATION, late),
            estimate: AtomicU64::new(0),
            adopted: AtomicU64::new(0),
            partial_since: Mutex::new(&lock_order::REGISTRATION, None),
            least_limit,
        }
    }

    /// Whether the region, under `limit` in a process holding `anon` bytes of anonymous
    /// memory, is to be registered now: at half the limit, or at once under the least limit.
    pub fn due(&self, anon: u64, limit: u64) -> bool {
        limit < self.least_limit || anon >= limit / 2
    }

    /// The least limit a region is lazy under, on `cpus` CPUs: a margin for each CPU, twice.
    fn least_limit(cpus: u64) -> u64 {
        (2 * MARGIN_PER_CPU * cpus).max(LEAST_LIMIT)
    }

    /// While the range is not registered yet: read the anonymous memory its process holds
    /// (charged from now on as the region's resident pages), and return it; `u64::MAX` when
    /// it cannot be read.
    pub fn watch(&self) -> Option<u64> {
        if self.state.load(Acquire) != PENDING {
            return None;
        }
        let late = self.late.lock();
        let anon = late.as_ref()?.anon_bytes();
        if let Some(anon) = anon {
            self.estimate.store(anon, Relaxed);
        }
        Some(anon.unwrap_or(u64::MAX))
    }

    /// Bytes charged as resident for pages the region does not count itself: the estimate
    /// while the range is not registered, and what adoption has not counted yet while it
    /// goes on.
    pub fn uncounted(&self) -> u64 {
        let estimate = self.estimate.load(Relaxed);
        match self.state.load(Acquire) {
            PENDING => estimate,
            ADOPTING => {
                estimate.saturating_sub(self.adopted.load(Relaxed) * zswap::PAGE_SIZE as u64)
            }
            _ => 0,
        }
    }

    /// Adopting: `n` more pages adopted.
    pub fn adopting(&self, n: u64) {
        self.adopted.fetch_add(n, Relaxed);
    }

    /// Partial, and `PARTIAL_RETRY` since the last adoption: true for the one caller that is
    /// to adopt again now.
    pub fn retry_due(&self) -> bool {
        if self.state.load(Acquire) != PARTIAL {
            return false;
        }
        let mut since = self.partial_since.lock();
        let due = since.is_some_and(|t| t.elapsed() >= PARTIAL_RETRY);
        if due {
            *since = None;
            self.state.store(ADOPTING, Release);
        }
        due
    }

    /// The adoption left pages it could not count: the region is adopted again later, and
    /// until then does not count every page.
    pub fn partial(&self) {
        // Every page adopted counts itself: nothing is charged for the rest.
        self.estimate.store(0, Relaxed);
        *self.partial_since.lock() = Some(std::time::Instant::now());
        self.state.store(PARTIAL, Release);
    }

    /// Wait while another thread adopts the pages present (`reclaim_to` then finds them all).
    pub fn wait_adopted(&self) {
        while self.state.load(Acquire) == ADOPTING {
            std::thread::sleep(std::time::Duration::from_millis(1));
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

    /// The registration failed: the range stays the kernel's, and charges nothing.
    pub fn failed(&self) {
        self.state.store(FAILED, Release);
    }

    /// Every page in the mapping when the range was registered is counted now.
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
        let on = |cpus| Registration {
            least_limit: Registration::least_limit(cpus),
            ..Registration::new(None, 0)
        };
        let r = on(2);
        assert!(!r.due(0, 4 * g));
        assert!(!r.due(2 * g - 1, 4 * g));
        assert!(r.due(2 * g, 4 * g));
        assert!(!r.due(g / 2 - 1, g));
        assert!(r.due(0, g - 1), "under the least limit: at once");
        assert!(r.due(u64::MAX, 4 * g), "unreadable: at once");
        assert!(on(16).due(0, 4 * g), "16 CPUs: 8 GiB at least");
        assert!(!on(16).due(0, 8 * g));
    }

    #[test]
    fn the_estimate_is_charged_until_the_range_is_registered_and_taken_once() {
        let memory = crate::memory::Memory::Own(uffd::RawRegion::new(4096).unwrap());
        let r = Registration::new(Some(memory.late_registration()), 1 << 40);
        assert!(!r.complete());
        let anon = r.watch().expect("pending");
        assert!(
            anon > 0 && anon < u64::MAX,
            "this process's anonymous memory: {anon}"
        );
        assert_eq!(r.uncounted(), anon);
        assert!(r.begin().is_some());
        assert!(r.begin().is_none(), "one caller registers");
        assert!(r.watch().is_none());
        assert!(!r.complete(), "adopting");
        r.estimate.store(5 << 20, Relaxed);
        assert_eq!(r.uncounted(), 5 << 20, "charged until adopted");
        r.adopting(256);
        assert_eq!(r.uncounted(), 4 << 20, "what is not adopted yet is charged");
        r.adopted();
        assert_eq!(r.uncounted(), 0);
        assert!(r.complete());
        r.partial();
        assert!(
            !r.complete() && !r.retry_due(),
            "partial: adopted again later"
        );
        *r.partial_since.lock() = Some(std::time::Instant::now() - PARTIAL_RETRY);
        assert!(r.retry_due() && !r.retry_due(), "one caller adopts again");
        r.adopted();
        assert!(r.complete());
        assert!(Registration::new(None, 1 << 40).complete());
        let small = Registration::new(Some(memory.late_registration()), 64 << 20);
        assert!(
            small.complete(),
            "under the least limit: registered as it is made"
        );
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
