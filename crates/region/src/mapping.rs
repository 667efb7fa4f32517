//! The region's range as userfaultfd sees it: the one part of the crate that calls
//! userfaultfd on it (installs, moves out and back, write-protection, poison, wake-ups, event
//! reads), and the event gate every such call on the range holds (events.rs says why).
//!
//! It knows addresses, not pages' states: where the range is now (an `mremap` moves it), and
//! how a call on it can end. The bookkeeping of what went in stays with the callers.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{RwLock, RwLockReadGuard};
use uffd::{
    CopyMode, Doorbell, Event, Filled, RawRegion, RegisterMode, StageError, StagedFolio, Staging,
    Uffd, UffdError,
};
use zswap::PAGE_SIZE;

/// Why an operation on the range stopped.
pub(crate) enum Stop {
    /// Events are pending (EAGAIN): read them, then start over.
    Again,
    /// The range is gone (unmapped, or moved away): leave everything as it is.
    Gone,
}

/// The event gate held shared: what every call that changes the range holds (events.rs).
pub(crate) type Gate<'a> = RwLockReadGuard<'a, ()>;

/// The region's range and its userfaultfd.
pub(crate) struct Mapping {
    uffd: Uffd,
    /// Where the region is mapped now (an mremap moves it).
    base: AtomicUsize,
    len: usize,
    /// Held exclusively to read events, shared by every install into the region: see
    /// events.rs for why.
    gate: RwLock<()>,
}

impl Mapping {
    /// The range of `len` bytes at `base`, served through `uffd` (registered later:
    /// `register`).
    pub fn new(uffd: Uffd, base: usize, len: usize) -> Self {
        Mapping {
            uffd,
            base: AtomicUsize::new(base),
            len,
            gate: RwLock::new(()),
        }
    }

    /// Where the region is mapped now.
    pub fn base(&self) -> usize {
        self.base.load(Relaxed)
    }

    /// The region's size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Where page `page` of the region is mapped now (after any `mremap`, events.rs).
    pub fn page_addr(&self, page: u32) -> usize {
        self.base() + page as usize * PAGE_SIZE
    }

    /// The event gate, held shared (every call that changes the range holds it).
    pub fn gate(&self) -> Gate<'_> {
        self.gate.read()
    }

    /// Wake the threads that faulted in `len` bytes at `addr`; an error (the range gone)
    /// leaves nothing to wake.
    pub fn wake(&self, addr: usize, len: usize) {
        let _ = self.uffd.wake(addr, len);
    }

    /// `UFFDIO_COPY` of `src` to `dst`.
    pub fn copy(&self, dst: usize, src: &[u8], mode: CopyMode) -> Result<Filled, UffdError> {
        self.uffd.copy(dst, src, mode)
    }

    /// `UFFDIO_ZEROPAGE` of `len` bytes at `start`.
    pub fn zeropage(&self, start: usize, len: usize, dont_wake: bool) -> Result<Filled, UffdError> {
        self.uffd.zeropage(start, len, dont_wake)
    }

    /// `UFFDIO_POISON` of `len` bytes at `start`.
    pub fn poison(&self, start: usize, len: usize, dont_wake: bool) -> Result<Filled, UffdError> {
        self.uffd.poison(start, len, dont_wake)
    }

    /// Lift the write protection of `len` bytes at `start`.
    pub fn write_unprotect(
        &self,
        start: usize,
        len: usize,
        dont_wake: bool,
    ) -> Result<(), UffdError> {
        self.uffd.write_unprotect(start, len, dont_wake)
    }

    /// Move the staged folio back to `dst` (`StagedFolio::move_back`).
    pub fn move_back(&self, staged: &mut StagedFolio, dst: usize) -> Result<Filled, UffdError> {
        staged.move_back(&self.uffd, dst)
    }

    /// Move page `index` of the staged folio back to `dst` (`StagedFolio::move_back_page`).
    pub fn move_back_page(
        &self,
        staged: &mut StagedFolio,
        dst: usize,
        index: usize,
    ) -> Result<Filled, UffdError> {
        staged.move_back_page(&self.uffd, dst, index)
    }

    /// Move `len` bytes at `addr` out of the range into a slot of `staging`.
    pub fn stage(
        &self,
        staging: &Arc<Staging>,
        addr: usize,
        len: usize,
    ) -> Result<StagedFolio, StageError> {
        staging.stage(addr, len)
    }

    /// Wait up to `timeout` for events, or for `bell` to be rung.
    pub fn wait_readable_or_rung(
        &self,
        bell: &Doorbell,
        timeout: Option<Duration>,
    ) -> Result<bool, UffdError> {
        self.uffd.wait_readable_or_rung(bell, timeout)
    }

    /// Read the pending events into `out` under the exclusive gate, and run `apply` on
    /// them still under it: whatever they change (pending discards, a move of the range)
    /// is in place before any install can act on it (events.rs).
    pub fn read_events(
        &self,
        out: &mut Vec<Event>,
        apply: impl FnOnce(&[Event]),
    ) -> Result<usize, UffdError> {
        let _gate = self.gate.write();
        let n = self.uffd.read_events(out)?;
        apply(out);
        Ok(n)
    }

    /// The range moved to `to` (called with the exclusive gate held, from `read_events`'s
    /// `apply`).
    pub fn moved_to(&self, to: usize) {
        self.base.store(to, Relaxed);
    }

    /// Register the range for `mode` faults.
    pub fn register(&self, mem: &RawRegion, mode: RegisterMode) -> Result<(), UffdError> {
        self.uffd.register(mem, 0, self.len, mode).map(|_| ())
    }

    /// Unregister the range where it is now: nothing serves it any more.
    pub fn unregister(&self) -> Result<(), UffdError> {
        self.uffd.unregister(self.base(), self.len)
    }

    /// Whether only user-mode faults are served.
    pub fn user_mode_only(&self) -> bool {
        self.uffd.user_mode_only()
    }
}
