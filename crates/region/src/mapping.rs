//! The region's range as userfaultfd sees it: the one part of the crate that calls
//! userfaultfd on it (installs, moves out and back, write-protection, poison, wake-ups, event
//! reads), and the event gate every such call on the range holds (events.rs says why).
//!
//! It knows addresses, not pages' states: where the range is now (an `mremap` moves it), and
//! how a call on it can end (`Stop`): EAGAIN means events are pending, which the caller reads
//! with the gate given up before it starts over (`Mapping::under_gate`); a range or process gone
//! ends the operation; any other error is a bug, and stops the process. The calls that change
//! the range take the shared gate's guard as the proof that it is held. The bookkeeping of
//! what went in stays with the callers.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use crate::lock_order::{self, RwLock, RwLockReadGuard};
use crate::memory::{LateRegistration, Memory};
use crate::mmap_changing::MmapChanging;
use uffd::{
    CopyMode, Doorbell, Event, Filled, PageTables, RegisterMode, StageError, StagedFolio, Staging,
    Uffd, UffdError, WrittenPages,
};
use zswap::PAGE_SIZE;

/// Why an operation on the range stopped.
pub(crate) enum Stop {
    /// Events are pending (EAGAIN): read them, then start over.
    EventsPending,
    /// The range is gone (unmapped, or moved away): leave everything as it is.
    Gone,
}

/// The event gate held shared: what every call that changes the range holds (events.rs).
pub(crate) type Gate<'a> = RwLockReadGuard<'a, ()>;

const MOVE_BACK_FAILED: &str = "moving a staged folio back into the region failed";

/// The region's range and its userfaultfd.
pub(crate) struct Mapping {
    uffd: Uffd,
    /// The page tables of the process the range is in, for the probes below.
    tables: PageTables,
    /// Where the region is mapped now (an mremap moves it).
    base: AtomicUsize,
    len: usize,
    /// Held exclusively to read events, shared by every install into the region: see
    /// events.rs for why.
    gate: RwLock<()>,
    /// Faults raise SIGBUS in the faulting thread (in_thread.rs) rather than events.
    sigbus: bool,
    /// Operations starting over after a stop for pending events, which discarders wait for.
    mmap_changing: MmapChanging,
    /// The range's written pages, where its userfaultfd has `WP_ASYNC` (`take_written`).
    written: Option<WrittenPages>,
}

impl Mapping {
    /// The range of `len` bytes at `base` in the process whose page tables are `tables`,
    /// served through `uffd` (registered later: `register`).
    pub fn new(
        uffd: Uffd,
        tables: PageTables,
        written: Option<WrittenPages>,
        base: usize,
        len: usize,
    ) -> Self {
        Mapping {
            written,
            sigbus: uffd.features().contains(uffd::Features::SIGBUS),
            uffd,
            tables,
            base: AtomicUsize::new(base),
            len,
            gate: RwLock::new(&lock_order::EVENT_GATE, ()),
            mmap_changing: MmapChanging::default(),
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

    /// The page of the region `addr` falls in now; None for an address outside it.
    pub fn page_of(&self, addr: usize) -> Option<u32> {
        let base = self.base();
        (base..base + self.len)
            .contains(&addr)
            .then(|| ((addr - base) / PAGE_SIZE) as u32)
    }

    /// The region pages `[first, last)` that `[start, end)` covers now; None for none.
    pub fn pages_in(&self, start: usize, end: usize) -> Option<(u32, u32)> {
        let base = self.base();
        let (start, end) = (start.max(base), end.min(base + self.len));
        (start < end).then(|| {
            (
                ((start - base) / PAGE_SIZE) as u32,
                (end - base).div_ceil(PAGE_SIZE) as u32,
            )
        })
    }

    /// Whether page `page` is mapped now, as the kernel's page tables say (`mincore`); None
    /// when they cannot be read (the range gone).
    pub fn is_mapped(&self, page: u32) -> Option<bool> {
        self.tables.mapped(self.page_addr(page)).ok()
    }

    /// Whether page `page` is in the mapping: mapped, or swapped out by the kernel (uffd's
    /// `page_in_mapping`); None when that cannot be told.
    pub fn in_mapping(&self, page: u32) -> Option<bool> {
        self.tables.in_mapping(self.page_addr(page)).ok()
    }

    /// Whether every page of `nr_pages` from `page` is in memory (present, or in the kernel's
    /// swap cache: `mincore`); None when that cannot be told.
    pub fn in_core(&self, page: u32, nr_pages: u32) -> Option<bool> {
        self.tables
            .in_core(self.page_addr(page), nr_pages as usize * PAGE_SIZE)
            .ok()
    }

    /// Which of the `nr_pages` pages from `page` are present, one entry a page (cheaper than
    /// `in_mapping_pages`, which sees swapped-out pages too); None when that cannot be told.
    pub fn present_pages(&self, page: u32, nr_pages: u32) -> Option<Vec<bool>> {
        self.tables
            .present(self.page_addr(page), nr_pages as usize)
            .ok()
    }

    /// Which of the `nr_pages` pages from `page` are in the mapping (present, or swapped out
    /// by the kernel), one entry a page; None when that cannot be told.
    pub fn in_mapping_pages(&self, page: u32, nr_pages: u32) -> Option<Vec<bool>> {
        self.tables
            .in_mapping_pages(self.page_addr(page), nr_pages as usize)
            .ok()
    }

    /// The kernel's pagemap entry of page `page` (present, swap or migration entry, or
    /// nothing), in hex, or why it could not be read: for a report of a lost page.
    pub fn pagemap_entry(&self, page: u32) -> String {
        match self.tables.entry(self.page_addr(page)) {
            Ok(e) => format!("{e:#018x}"),
            Err(err) => err.to_string(),
        }
    }

    /// The event gate, held shared (every call that changes the range holds it).
    pub fn gate(&self) -> Gate<'_> {
        self.gate.read()
    }

    /// Wake the threads that faulted in `len` bytes at `addr`; an error (the range gone)
    /// leaves nothing to wake. Nothing to do where faults raise SIGBUS: no thread waits in
    /// the kernel then.
    pub fn wake(&self, addr: usize, len: usize) {
        if !self.sigbus {
            let _ = self.uffd.wake(addr, len);
        }
    }

    /// Run `op` under the gate (shared) until it is done, or the range is gone (None). On
    /// `Stop::EventsPending` the gate is given up before `read_events` reads the pending events
    /// (`Events::read_pending_events`, which takes the gate exclusively), and `op` starts
    /// over under the gate taken anew. What the caller holds besides (its folio lock) stays
    /// held throughout. From its first stop for pending events (EAGAIN, or a discard read
    /// meanwhile) until it is done, threads about to discard wait for it (mmap_changing.rs).
    pub fn under_gate<T>(
        &self,
        mut read_events: impl FnMut(),
        mut op: impl FnMut(&mut Gate<'_>) -> Result<T, Stop>,
    ) -> Option<T> {
        let mut retrying = None;
        loop {
            let mut gate = self.gate();
            match op(&mut gate) {
                Ok(t) => return Some(t),
                Err(Stop::Gone) => return None,
                Err(Stop::EventsPending) => {
                    drop(gate);
                    retrying.get_or_insert_with(|| self.mmap_changing.retrying());
                    read_events();
                }
            }
        }
    }

    /// A thread is about to raise an event on the range (a discard): wait first for the
    /// operations earlier events held off (mmap_changing.rs). Returns how long it waited, if
    /// it did.
    pub fn wait_for_retries(&self) -> Option<Duration> {
        self.mmap_changing.wait_for_retries()
    }

    /// `gate` is this range's (the calls below take it as the proof that it is held).
    fn check_gate(&self, gate: &Gate) {
        debug_assert!(
            RwLockReadGuard::is_of(gate, &self.gate),
            "another region's event gate"
        );
    }

    /// Install `src` at page `first`: one `UFFDIO_COPY` (or zero pages, for zeros a read
    /// fault asked for), skipping pages that turn out present (added to `present`, and their
    /// faulting threads woken to look again); write-protected with `protect`. A range the
    /// kernel refuses whole (it spans mappings of different protections, `mprotect` having
    /// cut the region's: `ENOENT`) goes in a page at a time. Installed
    /// without waking: the caller wakes the faulting threads once the pages' bookkeeping is
    /// done and the folio unlocked, so what they do next (another fault, a reclaim) never sees
    /// a present page counted as missing. On a stop, says how many bytes went in before it.
    pub fn install(
        &self,
        gate: &Gate,
        first: u32,
        src: Source,
        protect: bool,
        present: &mut Vec<u32>,
    ) -> Result<(), (usize, Stop)> {
        self.check_gate(gate);
        let len = src.len();
        let mode = CopyMode {
            dont_wake: true,
            write_protect: protect,
        };
        let mut done = 0usize;
        let mut page_at_a_time = false;
        while done < len {
            let dst = self.page_addr(first) + done;
            let end = match page_at_a_time {
                true => done + PAGE_SIZE,
                false => len,
            };
            let r = match src {
                Source::Zeros { write: false, .. } => self.uffd.zeropage(dst, end - done, true),
                Source::Zeros { write: true, .. } => {
                    self.uffd.copy(dst, &ZEROS[..end - done], mode)
                }
                Source::Data(data) => self.uffd.copy(dst, &data[done..end], mode),
            };
            match r {
                Ok(Filled::All) if end == len => return Ok(()),
                Ok(Filled::All) => done = end,
                Ok(Filled::PageExists { done: d }) => {
                    // Present already: it keeps what it has (it may be a page whose discard
                    // has not landed yet); the faulting thread is woken to look again.
                    self.wake(dst + d, PAGE_SIZE);
                    done += d + PAGE_SIZE;
                    present.push(first + (done / PAGE_SIZE) as u32 - 1);
                }
                Err(UffdError::RangeGone { .. }) if !page_at_a_time && end - done > PAGE_SIZE => {
                    page_at_a_time = true;
                }
                Err(UffdError::MappingChanging { done: d, .. }) => {
                    return Err((done + d, Stop::EventsPending))
                }
                Err(UffdError::RangeGone { .. }) | Err(UffdError::ProcessGone { .. }) => {
                    return Err((done, Stop::Gone))
                }
                Err(e) => panic!("installing pages failed: {e}"),
            }
        }
        Ok(())
    }

    /// Map `len` bytes of untouched memory at page `page`, waking nobody (the caller wakes
    /// whoever faulted there once the pages are counted): for a write, zero-filled pages,
    /// writable at once; for a read, the zero page (a page at a
    /// time where the range spans mappings of different protections). Err with the
    /// bytes that went in when it stopped short: a page present already, the mapping changing
    /// (the caller leaves the rest to faults), or any other error (nothing went in).
    pub fn map_zeros(&self, gate: &Gate, page: u32, len: usize, write: bool) -> Result<(), usize> {
        self.check_gate(gate);
        let addr = self.page_addr(page);
        let fill = |addr: usize, len: usize| match write {
            true => {
                let mode = CopyMode {
                    dont_wake: true,
                    ..CopyMode::default()
                };
                self.uffd.copy(addr, &ZEROS[..len], mode)
            }
            false => self.uffd.zeropage(addr, len, true),
        };
        let mut r = fill(addr, len);
        if matches!(r, Err(UffdError::RangeGone { .. })) && len > PAGE_SIZE {
            // Refused whole: the range spans mappings of different protections (`install`).
            r = Ok(Filled::All);
            for done in (0..len).step_by(PAGE_SIZE) {
                match fill(addr + done, PAGE_SIZE) {
                    Ok(Filled::All) => {}
                    Ok(Filled::PageExists { .. }) | Err(_) => return Err(done),
                }
            }
        }
        match r {
            Ok(Filled::All) => Ok(()),
            Ok(Filled::PageExists { done }) | Err(UffdError::MappingChanging { done, .. }) => {
                Err(done)
            }
            Err(_) => Err(0),
        }
    }

    /// Poison the page `page`: an access gets SIGBUS.
    pub fn poison(&self, gate: &Gate, page: u32) -> Result<(), Stop> {
        self.check_gate(gate);
        match self.uffd.poison(self.page_addr(page), PAGE_SIZE, false) {
            Ok(_) => Ok(()),
            Err(e) => Err(Stop::of(&e).unwrap_or_else(|| {
                panic!("poisoning a page that cannot be read back failed: {e}")
            })),
        }
    }

    /// The runs of present pages among the `n` from page `first` written since this last
    /// asked (or since they were installed write-protected), as page numbers; those pages are
    /// write-protected again (`WrittenPages::take`). Empty where writes are not tracked, and on
    /// a failure (the range changing or gone; said once): the answer only decides which
    /// folios are kept.
    pub fn take_written(&self, gate: &Gate, first: u32, n: u32) -> Vec<std::ops::Range<u32>> {
        self.check_gate(gate);
        let Some(written) = &self.written else {
            return Vec::new();
        };
        let base = self.base();
        match written.take(base + first as usize * PAGE_SIZE, n as usize * PAGE_SIZE) {
            Ok(runs) => runs
                .into_iter()
                .map(|r| ((r.start - base) / PAGE_SIZE) as u32..((r.end - base) / PAGE_SIZE) as u32)
                .collect(),
            Err(e) => {
                static SAID: std::sync::Once = std::sync::Once::new();
                SAID.call_once(|| log::warn!("reading the region's written pages failed: {e}"));
                Vec::new()
            }
        }
    }

    /// Writes are tracked with no fault (`WP_ASYNC`): `take_written` answers.
    pub fn tracks_writes(&self) -> bool {
        self.written.is_some()
    }

    /// Lift the write protection of `len` bytes at `addr`, waking the writers.
    pub fn write_unprotect(&self, gate: &Gate, addr: usize, len: usize) -> Result<(), Stop> {
        self.check_gate(gate);
        self.uffd.write_unprotect(addr, len, false).map_err(|e| {
            Stop::of(&e).unwrap_or_else(|| panic!("lifting write protection failed: {e}"))
        })
    }

    /// Move the staged folio back to page `page` and on (`StagedFolio::move_back`), without
    /// waking. On a stop, how far the move got (from the folio's start) where the kernel says
    /// (`Stop::EventsPending`; 0 for `Stop::Gone`): the same call goes on after it.
    pub fn move_back(
        &self,
        gate: &Gate,
        staged: &mut StagedFolio,
        page: u32,
    ) -> Result<Filled, (usize, Stop)> {
        self.check_gate(gate);
        staged
            .move_back(&self.uffd, self.page_addr(page))
            .map_err(|e| match e {
                UffdError::MappingChanging { done, .. } => (done, Stop::EventsPending),
                e => (
                    0,
                    Stop::of(&e).unwrap_or_else(|| panic!("{}: {e}", MOVE_BACK_FAILED)),
                ),
            })
    }

    /// Move page `index` of the staged folio back to page `page` of the range
    /// (`StagedFolio::move_back_page`), without waking.
    pub fn move_back_page(
        &self,
        gate: &Gate,
        staged: &mut StagedFolio,
        page: u32,
        index: usize,
    ) -> Result<Filled, Stop> {
        self.check_gate(gate);
        staged
            .move_back_page(&self.uffd, self.page_addr(page), index)
            .map_err(|e| Stop::of(&e).unwrap_or_else(|| panic!("{}: {e}", MOVE_BACK_FAILED)))
    }

    /// Move `len` bytes at page `page` out of the range into a slot of `staging`.
    pub fn stage(
        &self,
        gate: &Gate,
        staging: &Arc<Staging>,
        page: u32,
        len: usize,
    ) -> Result<StagedFolio, StageError> {
        self.check_gate(gate);
        staging.stage(self.page_addr(page), len)
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
    /// them still under it: whatever they change (pending discards, a move of the range,
    /// `Reading::moved`) is in place before any install can act on it (events.rs).
    pub fn read_events(
        &self,
        out: &mut Vec<Event>,
        apply: impl FnOnce(&[Event], &Reading),
    ) -> Result<usize, UffdError> {
        let _gate = self.gate.write();
        let n = self.uffd.read_events(out)?;
        apply(out, &Reading(self));
        Ok(n)
    }

    /// Register the range, `mem`, for `mode` faults.
    pub fn register(&self, mem: &Memory, mode: RegisterMode) -> Result<(), UffdError> {
        mem.register(&self.uffd, mode)
    }

    /// Register the range later, through `late` (registration.rs), for `mode` faults.
    pub fn register_late(
        &self,
        late: &LateRegistration,
        mode: RegisterMode,
    ) -> Result<(), UffdError> {
        late.register(&self.uffd, mode)
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

impl Stop {
    /// What a userfaultfd error on the range means for the operation that got it: None for
    /// an error nothing explains (the caller stops the process, saying what failed).
    fn of(e: &UffdError) -> Option<Stop> {
        match e {
            UffdError::MappingChanging { .. } => Some(Stop::EventsPending),
            UffdError::RangeGone { .. } | UffdError::ProcessGone { .. } => Some(Stop::Gone),
            _ => None,
        }
    }
}

/// Zeros to install untouched memory from, as large as the largest folio. Allocated zeroed
/// (fresh anonymous memory) and never written, so its pages are the kernel's shared zero page:
/// a copy from it reads the same cache-hot 4 KiB over and over, nothing is zeroed first, and
/// it adds nothing to the process's RSS. (A zeroed `static` array would sit in the binary's
/// read-only data: 512 distinct file pages, resident once read.)
static ZEROS: std::sync::LazyLock<Box<[u8]>> =
    std::sync::LazyLock::new(|| vec![0u8; 2 << 20].into_boxed_slice());

/// Where an install's bytes come from.
#[derive(Clone, Copy)]
pub(crate) enum Source<'a> {
    /// These bytes.
    Data(&'a [u8]),
    /// Zeros, this many bytes: copied from `ZEROS` for a write fault, the zero page for a
    /// read fault.
    Zeros { len: usize, write: bool },
}

impl Source<'_> {
    fn len(&self) -> usize {
        match *self {
            Source::Data(data) => data.len(),
            Source::Zeros { len, .. } => len,
        }
    }
}

/// The range while events are read, under the exclusive gate (`Mapping::read_events`): the
/// one place a move of it is applied.
pub(crate) struct Reading<'a>(&'a Mapping);

/// What an `mremap` did to the region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Moved {
    /// The whole region moved: it is served at its new place from now on.
    Whole,
    /// Part of it moved, which is not supported: its pages are served where they were.
    Part,
    /// Another mapping moved.
    Elsewhere,
}

impl Reading<'_> {
    /// An `mremap` moved `len` bytes from `from` to `to`: if that is the whole region, its
    /// base is `to` from now on.
    pub fn moved(&self, from: usize, to: usize, len: usize) -> Moved {
        let m = self.0;
        if from == m.base() && len == m.len {
            m.base.store(to, Relaxed);
            Moved::Whole
        } else if from < m.base() + m.len && from + len > m.base() {
            Moved::Part
        } else {
            Moved::Elsewhere
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mapping of `pages` pages said to be at `base` (nothing is registered: these tests
    /// make no call on the range).
    fn mapping(base: usize, pages: usize) -> Mapping {
        let uffd = uffd::UffdBuilder::new()
            .user_mode_only(true)
            .non_blocking(true)
            .create()
            .expect("a userfaultfd");
        Mapping::new(uffd, PageTables::Own, None, base, pages * PAGE_SIZE)
    }

    const BASE: usize = 0x7f00_0000_0000;

    #[test]
    fn addresses_fall_in_the_pages_of_the_range_where_it_is_now() {
        let m = mapping(BASE, 4);
        assert_eq!(m.page_of(BASE - 1), None);
        assert_eq!(m.page_of(BASE), Some(0));
        assert_eq!(m.page_of(BASE + 4 * PAGE_SIZE - 1), Some(3));
        assert_eq!(m.page_of(BASE + 4 * PAGE_SIZE), None);
        // A range is clamped to the region, and a partly covered page counts.
        assert_eq!(m.pages_in(0, usize::MAX), Some((0, 4)));
        assert_eq!(
            m.pages_in(BASE + PAGE_SIZE + 1, BASE + 2 * PAGE_SIZE + 1),
            Some((1, 3))
        );
        assert_eq!(m.pages_in(BASE - PAGE_SIZE, BASE), None);
        assert_eq!(m.pages_in(BASE + 4 * PAGE_SIZE, usize::MAX), None);
    }

    #[test]
    fn only_a_move_of_the_whole_range_moves_it() {
        let m = mapping(BASE, 4);
        let len = 4 * PAGE_SIZE;
        let to = BASE + (1 << 30);
        let reading = Reading(&m);
        assert_eq!(reading.moved(BASE + PAGE_SIZE, to, PAGE_SIZE), Moved::Part);
        assert_eq!(reading.moved(BASE, to, 2 * len), Moved::Part);
        assert_eq!(reading.moved(BASE + len, to, len), Moved::Elsewhere);
        assert_eq!(m.base(), BASE, "nothing moved yet");
        assert_eq!(reading.moved(BASE, to, len), Moved::Whole);
        assert_eq!((m.base(), m.page_addr(1)), (to, to + PAGE_SIZE));
        assert_eq!(m.page_of(BASE), None);
    }

    /// `Stop::EventsPending` gives the gate up before the events are read (reading takes it
    /// exclusively), and the operation starts over under it; `Stop::Gone` ends it.
    #[test]
    fn retry_reads_events_with_the_gate_given_up_and_starts_over() {
        let m = mapping(BASE, 1);
        let (mut tries, mut reads) = (0, 0);
        let done = m.under_gate(
            || {
                assert!(m.gate.try_write().is_some(), "the gate is given up");
                reads += 1;
            },
            |gate| {
                m.check_gate(gate);
                assert!(m.gate.try_write().is_none(), "the gate is held");
                tries += 1;
                match tries {
                    1 | 2 => Err(Stop::EventsPending),
                    _ => Ok(tries),
                }
            },
        );
        assert_eq!((done, tries, reads), (Some(3), 3, 2));
        let gone: Option<()> = m.under_gate(|| panic!("no events to read"), |_| Err(Stop::Gone));
        assert_eq!(gone, None);
    }
}
