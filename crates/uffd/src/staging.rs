//! Staging: private memory that reclaim moves folios into with `UFFDIO_MOVE`, so a folio
//! leaves the program's mapping atomically before it is compressed (a write racing with the
//! eviction either lands before the move, and is in the staged copy, or faults after it and
//! waits). A staged folio is also the swap cache's uncompressed copy: a fault that finds it
//! moves it straight back, with no decompression.
//!
//! `UFFDIO_MOVE` needs its destination registered with the userfaultfd that issues it, so the
//! staging area is registered with a userfaultfd of its own, created without events: freeing a
//! slot with `MADV_DONTNEED` then raises no REMOVE event and never waits for an event reader.
//! Nobody reads its faults either: an empty page of it fails at once (`SIGBUS` to an access,
//! `EFAULT` to a system call) where it would otherwise wait forever, for a program that reads
//! every anonymous mapping of its process (redis-server's memory test after a panic does).
//!
//! Freed slots are discarded in batches: each `MADV_DONTNEED` of a slot would flush the TLB of
//! every CPU running the program (an IPI each), so a freed slot that may hold pages waits on a
//! dirty list until a batch of them is discarded with one `process_madvise` call, one flush for
//! the batch (Linux 6.16 batches its TLB flushes; older kernels get one `madvise` per slot).
//! [`Staging::dirty_bytes`] says how much memory the dirty slots may still hold.
//!
//! Soundness rests on one rule, kept by this type: a slot's memory is touched only through the
//! [`StagedFolio`] that owns it, and the bytes are only handed out while every page of the slot
//! is present (after a complete move in), so a reference never sees a missing page (which would
//! block forever, nobody serving this userfaultfd) or a change.
//!
//! The staging area of a program served from outside ([`Staging::in_program`], remote/) lies
//! in that program: a folio moves out into a slot there (on its parasite), and its bytes are
//! copied here at once, the slot freed for the next batched discard. The copy is the staged
//! folio: its bytes are handed out from here, and moving it back is a `UFFDIO_COPY` (which
//! works from outside, where a move does not).

use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use crate::error::UffdError;
use crate::features::{Features, RegisterMode};
use crate::raw_region::{page_size, Advice, RawRegion};
use crate::userfaultfd::{CopyMode, Filled, MoveMode, Uffd};
use crate::UffdBuilder;

#[cfg(target_arch = "x86_64")]
mod program;

/// Fixed-size slots of private memory to stage folios in.
#[derive(Debug)]
pub struct Staging {
    area: Area,
    slot_bytes: usize,
    slots: Mutex<Slots>,
    /// Bytes of the dirty slots, until their discard has completed.
    dirty_bytes: AtomicUsize,
    /// Dirty slots that make a batch.
    batch_slots: usize,
}

/// Where the slots are.
#[derive(Debug)]
enum Area {
    /// In this process.
    Own {
        region: RawRegion,
        uffd: Uffd,
        /// This process, for `process_madvise`; None where pidfds are not available.
        self_pidfd: Option<OwnedFd>,
        /// Cleared once `process_madvise` refuses `MADV_DONTNEED` (kernels before 6.13).
        batched_discard: AtomicBool,
    },
    /// In a program served from here.
    #[cfg(target_arch = "x86_64")]
    Program(program::ProgramArea),
}

#[derive(Debug, Default)]
struct Slots {
    /// Empty slots, ready for a move in.
    free: Vec<u32>,
    /// Freed slots that may still hold pages: discarded in batches.
    dirty: Vec<u32>,
}

/// A folio moved out of a managed mapping into a staging slot. Dropping it frees the slot.
#[derive(Debug)]
pub struct StagedFolio {
    staging: Arc<Staging>,
    slot: u32,
    /// In a program's staging area: the slot's pages copied here when it moved in (the
    /// slot itself freed then), and which of them there were.
    #[cfg(target_arch = "x86_64")]
    copy: Option<program::Copied>,
    len: usize,
    /// Bytes from the start already moved back by a `move_back` that stopped part way: the
    /// next call goes on from here (the kernel checks the destination before the source, so
    /// a page moved back already would meet `EEXIST` rather than be skipped as a hole).
    moved_back: usize,
    /// The slot may hold pages (false only once every page moved back out).
    needs_discard: bool,
    /// A page was copied back rather than moved (`copy_back_page`): its copy stays in the slot.
    copied_back: bool,
}

/// Why a folio could not be staged.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    /// Every slot is in use.
    #[error("no free staging slot")]
    NoSlot,
    /// The move failed part way (a page not present, a pinned page, a changing mapping, a
    /// page already in the slot). `folio` covers the whole slot: the caller moves back, page
    /// by page, every page that moved, leaving in place any page present on both sides.
    #[error("moving the folio out failed: {source}")]
    Partial {
        /// The slot, with the pages that moved.
        folio: Box<StagedFolio>,
        /// Why the move stopped.
        source: UffdError,
    },
}

impl Staging {
    /// `nr_slots` slots of `slot_bytes` each (a multiple of the page size); freed slots are
    /// discarded `batch_slots` at a time (at least 1).
    pub fn new(
        nr_slots: u32,
        slot_bytes: usize,
        batch_slots: usize,
    ) -> Result<Arc<Self>, UffdError> {
        assert!(slot_bytes > 0 && slot_bytes.is_multiple_of(page_size()));
        let region = RawRegion::new(nr_slots as usize * slot_bytes).map_err(|e| UffdError::Os {
            op: "mmap staging",
            source: std::io::Error::other(e.to_string()),
        })?;
        let uffd = UffdBuilder::new()
            .without(Features::EVENT_REMOVE | Features::EVENT_UNMAP | Features::EVENT_REMAP)
            .require(Features::MOVE)
            .request(Features::SIGBUS)
            .allow_user_mode_fallback(true)
            .create()?;
        uffd.register(&region, 0, region.len(), RegisterMode::MISSING)?;
        // The pages must stay exclusive to this process for MOVE (a fork would share them),
        // and stay base pages: a huge page collapsed over several slots would put pages where
        // a slot must be empty.
        for r in [region.dont_fork(), region.no_huge_pages()] {
            r.map_err(|e| UffdError::Os {
                op: "madvise staging",
                source: std::io::Error::other(e.to_string()),
            })?;
        }
        let area = Area::Own {
            region,
            uffd,
            self_pidfd: open_self_pidfd(),
            batched_discard: AtomicBool::new(true),
        };
        Ok(Self::with_area(area, nr_slots, slot_bytes, batch_slots))
    }

    /// As `new`, with the slots in `process`, a program served from here (module doc).
    #[cfg(target_arch = "x86_64")]
    pub fn in_program(
        process: Arc<crate::remote::RemoteProcess>,
        nr_slots: u32,
        slot_bytes: usize,
        batch_slots: usize,
    ) -> Result<Arc<Self>, UffdError> {
        assert!(slot_bytes > 0 && slot_bytes.is_multiple_of(page_size()));
        let os = |op| move |source| UffdError::Os { op, source };
        let memory = crate::process::ProcessMemory::of(process.pid())
            .map_err(os("opening the program's memory"))?;
        let range = process
            .map_staging(nr_slots as usize * slot_bytes)
            .map_err(os("mmap staging in the program"))?;
        let tables =
            crate::PageTables::of(process.pid()).map_err(os("opening the program's pagemap"))?;
        let area = Area::Program(program::ProgramArea {
            process,
            memory,
            tables,
            range,
        });
        Ok(Self::with_area(area, nr_slots, slot_bytes, batch_slots))
    }

    fn with_area(area: Area, nr_slots: u32, slot_bytes: usize, batch_slots: usize) -> Arc<Self> {
        Arc::new(Staging {
            area,
            slot_bytes,
            slots: Mutex::new(Slots {
                free: (0..nr_slots).rev().collect(),
                dirty: Vec::new(),
            }),
            dirty_bytes: AtomicUsize::new(0),
            batch_slots: batch_slots.max(1),
        })
    }

    /// The size of a slot, in bytes: the largest folio it stages.
    pub fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    /// Slots not in use (free, or freed and waiting for their discard).
    pub fn free_slots(&self) -> usize {
        let slots = self.slots.lock().expect("never poisoned");
        slots.free.len() + slots.dirty.len()
    }

    /// Bytes that freed slots may still hold until their batch is discarded: memory the
    /// owner of the staging area counts as its own.
    pub fn dirty_bytes(&self) -> usize {
        self.dirty_bytes.load(Relaxed)
    }

    /// Discard every freed slot now (one TLB flush for all of them).
    pub fn flush(&self) {
        let batch = std::mem::take(&mut self.slots.lock().expect("never poisoned").dirty);
        if batch.is_empty() {
            return;
        }
        self.discard(&batch);
        let mut slots = self.slots.lock().expect("never poisoned");
        slots.free.extend_from_slice(&batch);
        self.dirty_bytes
            .fetch_sub(batch.len() * self.slot_bytes, Relaxed);
    }

    /// A `StagedFolio` let its slot go.
    fn release(&self, slot: u32, needs_discard: bool) {
        let mut slots = self.slots.lock().expect("never poisoned");
        if !needs_discard {
            slots.free.push(slot);
            return;
        }
        slots.dirty.push(slot);
        self.dirty_bytes.fetch_add(self.slot_bytes, Relaxed);
        let full = slots.dirty.len() >= self.batch_slots;
        drop(slots);
        if full {
            self.flush();
        }
    }

    /// Empty these slots, which nobody owns (their `StagedFolio`s are gone, or hold copies).
    fn discard(&self, batch: &[u32]) {
        let ranges: Vec<(usize, usize)> = batch
            .iter()
            .map(|&s| (self.slot_addr(s), self.slot_bytes))
            .collect();
        match &self.area {
            Area::Own {
                self_pidfd,
                batched_discard,
                ..
            } => {
                if let Some(pidfd) = self_pidfd {
                    if batched_discard.load(Relaxed) {
                        // SAFETY: every range is a slot of our own mapping that no
                        // StagedFolio owns, so no reference into it exists and nothing
                        // relies on its contents.
                        match unsafe { crate::raw_region::discard_ranges(pidfd, &ranges) } {
                            Ok(()) => return,
                            Err(_) => batched_discard.store(false, Relaxed),
                        }
                    }
                }
                for (addr, len) in ranges {
                    // SAFETY: as above.
                    let _ = unsafe { crate::raw_region::madvise(addr, len, Advice::DontNeed) };
                }
            }
            // A program gone has no slots left to empty.
            #[cfg(target_arch = "x86_64")]
            Area::Program(area) => {
                let _ = area.process.discard_staging(&ranges);
            }
        }
    }

    /// The staging mapping's addresses (in the program, for `in_program`).
    pub fn range(&self) -> std::ops::Range<usize> {
        match &self.area {
            Area::Own { region, .. } => region.range(),
            #[cfg(target_arch = "x86_64")]
            Area::Program(area) => area.range.clone(),
        }
    }

    fn slot_addr(&self, slot: u32) -> usize {
        self.range().start + slot as usize * self.slot_bytes
    }

    /// Move `len` bytes of pages at `src` (page aligned, in a managed mapping)
    /// into a free slot. Every page must be present; if the move fails part way, the pages that
    /// moved come back in `StageError::Partial` for the caller to return.
    ///
    /// The caller must own these pages in its page-state table (so no other eviction or fault
    /// handling of them runs meanwhile) and must not hold Rust references into them.
    pub fn stage(self: &Arc<Self>, src: usize, len: usize) -> Result<StagedFolio, StageError> {
        assert!(len > 0 && len <= self.slot_bytes && len.is_multiple_of(page_size()));
        let mut slot = self.slots.lock().expect("never poisoned").free.pop();
        if slot.is_none() {
            self.flush();
            slot = self.slots.lock().expect("never poisoned").free.pop();
        }
        let slot = slot.ok_or(StageError::NoSlot)?;
        // Owns the slot from here: dropping it on any early return frees the slot. Its len
        // is the whole folio, so a drop discards every page that may be in the slot.
        let folio = StagedFolio {
            staging: self.clone(),
            slot,
            #[cfg(target_arch = "x86_64")]
            copy: None,
            len,
            moved_back: 0,
            needs_discard: true,
            copied_back: false,
        };
        let dst = self.slot_addr(slot);
        let uffd = match &self.area {
            Area::Own { uffd, .. } => uffd,
            #[cfg(target_arch = "x86_64")]
            Area::Program(area) => return program::stage(area, folio, src),
        };
        // SAFETY: `src..src+len` is managed memory registered with a userfaultfd; its owner
        // never hands out references into it across evictions (the program sees only raw
        // memory, and moving a page out and back later leaves every byte it can observe as it
        // was). The destination slot is owned by `folio` and all its pages are missing (a slot
        // is freed only with every page discarded).
        //
        // A page found present in the slot (`PageExists`) is never discarded here, not even
        // at offset 0 where the kernel reports that nothing moved: Linux 6.18's `move_pages`
        // keeps an `EAGAIN` from one batch in `err` while the next batch moves pages, then
        // meets those very pages in the slot and reports `EEXIST` with a short count. The
        // "stray" pages are the program's, just moved; the caller moves back whatever the
        // slot holds (discarding it here would lose them whenever page migration races a move).
        let moved = unsafe { uffd.move_pages(dst, src, len, MoveMode::default()) };
        match moved {
            Ok(Filled::All) => Ok(folio),
            Ok(Filled::PageExists { done }) => {
                // The slot was not empty `done` bytes in. Hand back the whole slot: the
                // caller moves it back page by page and leaves in place what it finds present
                // on either side (a stray page here stays and is discarded with the slot),
                // so a page that moved is never dropped, even if the kernel's count of what
                // moved fell short.
                Err(StageError::Partial {
                    folio: Box::new(folio),
                    source: UffdError::Os {
                        op: "UFFDIO_MOVE into a staging slot",
                        source: std::io::Error::other(format!(
                            "a page {done} bytes into the slot was present"
                        )),
                    },
                })
            }
            Err(e) => {
                // Some pages may have moved before the error. Hand them to the caller, who
                // must move them back (`move_back` skips the holes) once it can: if the
                // region has events pending it must read them first, which only it can do.
                Err(StageError::Partial {
                    folio: Box::new(folio),
                    source: e,
                })
            }
        }
    }
}

impl StagedFolio {
    /// Bytes staged: the folio's length (whole pages), 0 once `move_back` moved it all out.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether `move_back` has moved the whole folio out.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The staged bytes.
    pub fn bytes(&self) -> &[u8] {
        #[cfg(target_arch = "x86_64")]
        if let Some(copy) = &self.copy {
            return &copy.bytes[..self.len];
        }
        let addr = self.staging.slot_addr(self.slot);
        // SAFETY: the slot's `len` bytes were all moved in (present) and belong to this
        // StagedFolio alone: nothing else moves into, out of, or writes the slot while it
        // lives, and the shared borrow of self keeps `move_back` (which takes &mut self) away. The
        // mapping lives as long as `staging`, which self keeps alive.
        unsafe { std::slice::from_raw_parts(addr as *const u8, self.len) }
    }

    /// Move the pages back to `dst` (in a mapping registered with `dst_uffd`) without waking
    /// the threads waiting there: the caller wakes them (`Uffd::wake`) once its own
    /// bookkeeping says the pages are back. A page of `dst` already present stays as it is
    /// (`PageExists`, counted from the folio's start). After an error that stopped part way
    /// (`MappingChanging`: read the pending events; `Busy`) the same call can simply be made
    /// again: it goes on after the pages already moved (their `done` is counted from the
    /// folio's start too). Source holes are allowed. Once it returns `Ok(Filled::All)`, the
    /// folio is empty and dropping it only frees the slot.
    pub fn move_back(&mut self, dst_uffd: &Uffd, dst: usize) -> Result<Filled, UffdError> {
        if self.len == 0 {
            return Ok(Filled::All); // nothing moved in
        }
        #[cfg(target_arch = "x86_64")]
        if self.copy.is_some() {
            return program::move_back(self, dst_uffd, dst);
        }
        let src = self.staging.slot_addr(self.slot);
        let mode = MoveMode {
            allow_src_holes: true,
            dont_wake: true,
        };
        let ps = page_size();
        // Progress is counted from the folio's start, across calls.
        let r = loop {
            let from = self.moved_back;
            if from >= self.len {
                break Filled::All;
            }
            // SAFETY: `&mut self` means no slice from `bytes` is alive; the slot belongs to
            // this StagedFolio; its pages are private to this process (DONTFORK). The
            // destination is argued as for `Uffd::copy`.
            let r = unsafe { dst_uffd.move_pages(dst + from, src + from, self.len - from, mode) };
            match r {
                Ok(Filled::PageExists { done }) => {
                    let at = from + done;
                    if self.page_present(at / ps) {
                        // Present on both sides: the caller's to judge.
                        self.moved_back = at;
                        break Filled::PageExists { done: at };
                    }
                    // Gone from the slot, so it did move: Linux 6.18 can report EEXIST for a
                    // page its own retry moved (see `Staging::stage`). Go on after it.
                    self.moved_back = at + ps;
                }
                Ok(Filled::All) => break Filled::All,
                Err(UffdError::MappingChanging { op, done }) => {
                    self.moved_back = from + done;
                    return Err(UffdError::MappingChanging {
                        op,
                        done: self.moved_back,
                    });
                }
                Err(UffdError::Busy { op, done }) => {
                    self.moved_back = from + done;
                    return Err(UffdError::Busy {
                        op,
                        done: self.moved_back,
                    });
                }
                // The destination is not one mapping of the slot's protection any more (the
                // program gave part of it another since the move out): a page at a time.
                Err(UffdError::InvalidArgument { .. }) => {
                    break self.page_at_a_time(dst_uffd, dst)?;
                }
                Err(e) => return Err(e),
            }
        };
        if r == Filled::All {
            if self.len == self.staging.slot_bytes && !self.copied_back {
                // Every page of the slot moved out: nothing is left to discard. (A shorter
                // folio may have met a stray page past its end: that one is discarded; pages
                // copied back are left in the slot.)
                self.needs_discard = false;
            }
            self.len = 0;
            self.moved_back = 0;
        }
        Ok(r)
    }
}

impl StagedFolio {
    /// Move back only the page at `index` (in pages) to `dst` (that page's address), as
    /// `move_back` does for the whole folio. For folios some of whose pages must not return.
    pub fn move_back_page(
        &mut self,
        dst_uffd: &Uffd,
        dst: usize,
        index: usize,
    ) -> Result<Filled, UffdError> {
        let ps = page_size();
        if (index + 1) * ps > self.len {
            return Ok(Filled::All); // that page never moved in
        }
        #[cfg(target_arch = "x86_64")]
        if self.copy.is_some() {
            return program::move_back_page(self, dst_uffd, dst, index);
        }
        let src = self.staging.slot_addr(self.slot) + index * ps;
        let mode = MoveMode {
            allow_src_holes: true,
            dont_wake: true,
        };
        // SAFETY: as for `move_back`: `&mut self` rules out live slices, the slot is ours.
        match unsafe { dst_uffd.move_pages(dst, src, ps, mode) } {
            Err(UffdError::InvalidArgument { .. }) => self.copy_back_page(dst_uffd, dst, index),
            r => r,
        }
    }

    /// `move_back` from `moved_back` on, a page at a time, for a destination that spans
    /// mappings of different protections.
    fn page_at_a_time(&mut self, dst_uffd: &Uffd, dst: usize) -> Result<Filled, UffdError> {
        let ps = page_size();
        while self.moved_back < self.len {
            let at = self.moved_back;
            match self.move_back_page(dst_uffd, dst + at, at / ps) {
                Ok(Filled::PageExists { .. }) if self.page_present(at / ps) => {
                    return Ok(Filled::PageExists { done: at });
                }
                Ok(_) => self.moved_back = at + ps,
                Err(UffdError::MappingChanging { op, .. }) => {
                    return Err(UffdError::MappingChanging { op, done: at })
                }
                Err(UffdError::Busy { op, .. }) => return Err(UffdError::Busy { op, done: at }),
                Err(e) => return Err(e),
            }
        }
        Ok(Filled::All)
    }

    /// Copy the page at `index` back to `dst` (`UFFDIO_COPY`), where a move cannot go: the
    /// kernel moves pages only between mappings of one protection, and the program gave the
    /// destination another since the move out (a copy goes into any). A hole (a page that
    /// never moved in) is skipped, as a move skips it. The slot's copy is discarded with it.
    fn copy_back_page(
        &mut self,
        dst_uffd: &Uffd,
        dst: usize,
        index: usize,
    ) -> Result<Filled, UffdError> {
        if !self.page_present(index) {
            return Ok(Filled::All);
        }
        self.copied_back = true;
        let ps = page_size();
        let src = self.staging.slot_addr(self.slot) + index * ps;
        // SAFETY: the page lies in this StagedFolio's slot, which it owns and nobody writes
        // (`&mut self`, and the slot is never handed out); it is present (checked just above, and
        // nothing takes a page out of an owned slot), so the read cannot fault on the staging
        // area's own userfaultfd.
        let page = unsafe { std::slice::from_raw_parts(src as *const u8, ps) };
        dst_uffd.copy(
            dst,
            page,
            CopyMode {
                dont_wake: true,
                write_protect: false,
            },
        )
    }
}

impl StagedFolio {
    /// Whether the page at `index` (in pages) of the slot holds a page: after a move back
    /// that found its destination present, tells a page that never moved in (nothing here)
    /// from one present on both sides.
    pub fn page_present(&self, index: usize) -> bool {
        #[cfg(target_arch = "x86_64")]
        if let Some(copy) = &self.copy {
            return copy.present.get(index).copied().unwrap_or(false);
        }
        let addr = self.staging.slot_addr(self.slot) + index * page_size();
        // The slot lies inside the staging mapping, which self keeps alive: mincore cannot
        // fail on it; if it did, say present, the case that is counted and looked into.
        crate::raw_region::page_mapped(addr).unwrap_or(true)
    }
}

impl Drop for StagedFolio {
    fn drop(&mut self) {
        // A copy's slot was freed when its pages were copied.
        #[cfg(target_arch = "x86_64")]
        if self.copy.is_some() {
            return;
        }
        // Whatever is left in the slot is discarded with the next batch; until then the
        // slot is neither free nor counted as anyone's but the staging area's.
        self.staging.release(self.slot, self.needs_discard);
    }
}

/// A pidfd of this process, for `process_madvise` on its own memory.
fn open_self_pidfd() -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1; nothing is read
    // from or written to our memory.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: the kernel just returned this fd to us, and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    Some(crate::descriptors::out_of_reach(fd))
}
