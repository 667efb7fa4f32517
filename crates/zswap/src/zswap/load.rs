//! Load: bring a folio's pages back into a caller's buffer (`zswap_load`, with the swap-in
//! of large folios the kernel does not have yet).
//!
//! Loads are exclusive, as in the kernel since 6.9, but in two steps so the caller can keep
//! invariant 2: `load` copies the data out and leaves every entry in place; once the caller
//! has installed the pages it calls `finish_load`, which frees them. A caller that fails to
//! install simply does not call it, and nothing is lost.
//!
//! The format of each page comes from its entry alone: a zero mark, a pool object whose
//! length is PAGE_SIZE (raw) or less (compressed, with the codec the entry names), or a
//! disk slot. No tunable is read here (invariant 5). Decompression must produce exactly one
//! page; anything else is `decompress_fail` and an error, never zeros (invariant 7).

use std::cell::RefCell;

use crate::stats::Stats;
use crate::swap::cache::{FolioLock, Kind};
use crate::swap::segments::SegmentReadError;
use crate::swap::slots::SwapSlot;
use crate::zsmalloc::Handle;
use crate::PAGE_SIZE;

use super::ZswapGroup;

/// What a load brought back, by source.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Loaded {
    /// Pages with no entry (resident, never written, or discarded): left untouched in the
    /// buffer.
    pub empty: u32,
    /// Same-filled pages, filled in from their fill value.
    pub zero: u32,
    /// Pages read from the compressed pool.
    pub pool: u32,
    /// Pages read from the backing device.
    pub disk: u32,
}

impl Loaded {
    /// Count one more page that held `kind`.
    pub fn add(&mut self, kind: Kind) {
        match kind {
            Kind::Empty => self.empty += 1,
            Kind::Zero => self.zero += 1,
            Kind::Stored => self.pool += 1,
            Kind::OnDisk => self.disk += 1,
            Kind::Poisoned => unreachable!("poisoned pages are errors"),
        }
    }
}

/// Why a page cannot be read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadErrorKind {
    /// The stored data did not decompress into exactly one page.
    Corrupt,
    /// The backing device failed to read it.
    ReadError,
    /// The page was poisoned earlier.
    Poisoned,
    /// Its object on the device failed authentication: changed, moved or replayed.
    Unauthenticated,
}

/// A page that cannot be read back. Its entry is left as it was; the caller poisons the page
/// (SIGBUS for the program) and then calls `mark_poisoned`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("page {offset} cannot be read back: {kind:?}")]
pub struct LoadError {
    /// The page's offset in the group.
    pub offset: u32,
    /// What went wrong.
    pub kind: LoadErrorKind,
}

/// Pages of a folio already read from disk in runs (at most a few runs per folio).
#[derive(Default)]
struct DiskRuns(Vec<(u32, u32)>);

impl DiskRuns {
    fn add(&mut self, start: u32, n: u32) {
        match self.0.last_mut() {
            Some((s, m)) if *s + *m == start => *m += n,
            _ => self.0.push((start, n)),
        }
    }
    fn contains(&self, o: u32) -> bool {
        self.0.iter().any(|&(s, n)| (s..s + n).contains(&o))
    }
}

thread_local! {
    static OBJECT: RefCell<Vec<u8>> = RefCell::new(vec![0; PAGE_SIZE]);
}

pub(crate) fn touch_thread_locals() {
    OBJECT.with(|_| ());
}

impl ZswapGroup {
    /// Copy the folio's pages into `out` (`nr_pages * PAGE_SIZE` bytes). Entries stay until
    /// `finish_load`. Counts the swap-ins (`count_swapin`).
    pub fn load(&self, folio: &FolioLock, out: &mut [u8]) -> Result<Loaded, LoadError> {
        let loaded = self.read_folio(folio, out)?;
        self.count_swapin(loaded, folio.order());
        Ok(loaded)
    }

    /// As `load`, counting nothing: for a caller that may load a folio again after an
    /// install that did not go through, and counts what it installs itself, once.
    pub fn read_folio(&self, folio: &FolioLock, out: &mut [u8]) -> Result<Loaded, LoadError> {
        self.check(folio);
        assert_eq!(out.len(), folio.nr_pages() as usize * PAGE_SIZE);
        let mut loaded = Loaded::default();
        let disk_run = self.read_disk_runs(folio, out)?;
        for (offset, page) in folio.offsets().zip(out.chunks_exact_mut(PAGE_SIZE)) {
            if disk_run.contains(offset) {
                loaded.disk += 1;
                continue;
            }
            loaded.add(self.load_one(folio, offset, page)?);
        }
        Ok(loaded)
    }

    /// Count the swap-ins of `loaded`'s pages, by where they came from, and one swap-in of
    /// a folio of `order` (pages brought back one by one: each one of order 0), unless none
    /// of them came from the engine.
    pub fn count_swapin(&self, loaded: Loaded, order: u8) {
        let stats = &self.shared.stats;
        Stats::add(&stats.zswpin, loaded.pool.into());
        Stats::add(&stats.swpin_zero, loaded.zero.into());
        Stats::add(&stats.pswpin, loaded.disk.into());
        if loaded.zero + loaded.pool + loaded.disk > 0 {
            Stats::count_order(&stats.order_swpin, order, 1);
        }
    }

    /// Read the folio's on-disk pages together: a run of contiguous slots (pages) or of
    /// neighbouring objects of a segment is one device read. Returns the pages read; on a
    /// failure none, and the page-by-page path finds and reports the failing page.
    fn read_disk_runs(&self, folio: &FolioLock, out: &mut [u8]) -> Result<DiskRuns, LoadError> {
        let mut done = DiskRuns::default();
        let Some(swap) = self.shared.swap.as_ref() else {
            return Ok(done);
        };
        if folio.nr_pages() == 1 {
            return Ok(done); // nothing to batch
        }
        let on_disk: Vec<(u32, SwapSlot)> = folio
            .offsets()
            .filter(|&o| folio.state(o).kind == Kind::OnDisk)
            .filter_map(|o| folio.slot(o).map(|slot| (o, slot)))
            .collect();
        if on_disk.len() < 2 {
            return Ok(done);
        }
        let slots: Vec<SwapSlot> = on_disk.iter().map(|&(_, slot)| slot).collect();
        let decompress = |codec, bytes: &[u8], page: &mut [u8]| self.decompress(codec, bytes, page);
        if slots.len() == folio.nr_pages() as usize {
            // The whole folio is on disk: straight into place.
            if swap.read_pages(&slots, out, decompress).is_ok() {
                done.add(folio.start(), folio.nr_pages());
            }
            return Ok(done);
        }
        let mut pages = vec![0u8; slots.len() * PAGE_SIZE];
        if swap.read_pages(&slots, &mut pages, decompress).is_err() {
            return Ok(done);
        }
        for (&(o, _), page) in on_disk.iter().zip(pages.chunks_exact(PAGE_SIZE)) {
            let i = (o - folio.start()) as usize * PAGE_SIZE;
            out[i..i + PAGE_SIZE].copy_from_slice(page);
            done.add(o, 1);
        }
        Ok(done)
    }

    /// Decompress one object into a page; false unless it made exactly one page.
    pub(super) fn decompress(&self, codec: u8, bytes: &[u8], page: &mut [u8]) -> bool {
        self.shared
            .compressors
            .with(codec, |c| c.decompress(bytes, page))
            == Ok(PAGE_SIZE)
    }

    /// Copy one page of a held folio into `out` without counting or freeing anything: what a
    /// page holds now, for checks and for the region's single-page fallback.
    pub fn read_page(
        &self,
        folio: &FolioLock,
        offset: u32,
        out: &mut [u8],
    ) -> Result<Kind, LoadError> {
        self.check(folio);
        self.load_one(folio, offset, out)
    }

    fn load_one(&self, folio: &FolioLock, offset: u32, page: &mut [u8]) -> Result<Kind, LoadError> {
        let s = &self.shared;
        let st = folio.state(offset);
        let fail = |kind| LoadError { offset, kind };
        match st.kind {
            Kind::Empty => {}
            Kind::Zero => {
                for w in page.chunks_exact_mut(4) {
                    w.copy_from_slice(&st.payload.to_ne_bytes());
                }
            }
            Kind::Stored => crate::scratch::with(
                &OBJECT,
                || vec![0; PAGE_SIZE],
                |obj| {
                    let obj = &mut *obj.borrow_mut();
                    let handle = Handle::from_raw(st.payload);
                    let ok = s.pool.with_object(handle, obj, |bytes| {
                        if bytes.len() == PAGE_SIZE {
                            page.copy_from_slice(bytes);
                            return true;
                        }
                        self.decompress(st.codec, bytes, page)
                    });
                    if ok {
                        Ok(())
                    } else {
                        Stats::inc(&s.stats.decompress_fail);
                        Err(fail(LoadErrorKind::Corrupt))
                    }
                },
            )?,
            Kind::OnDisk => {
                let slot = folio.slot(offset).expect("an on-disk page has a slot");
                let swap = s.swap.as_ref().expect("an on-disk page implies a device");
                let read = swap.read_pages(&[slot], page, |codec, bytes, page| {
                    self.decompress(codec, bytes, page)
                });
                match read.map_err(|f| f.kind) {
                    Ok(()) => {}
                    Err(SegmentReadError::Device) => {
                        Stats::inc(&s.stats.swap_read_fail);
                        return Err(fail(LoadErrorKind::ReadError));
                    }
                    Err(SegmentReadError::Unauthenticated) => {
                        return Err(fail(LoadErrorKind::Unauthenticated));
                    }
                    Err(SegmentReadError::Corrupt) => {
                        Stats::inc(&s.stats.decompress_fail);
                        return Err(fail(LoadErrorKind::Corrupt));
                    }
                }
            }
            Kind::Poisoned => return Err(fail(LoadErrorKind::Poisoned)),
        }
        Ok(st.kind)
    }

    /// The caller installed the loaded pages: drop the stored copies (exclusive load).
    pub fn finish_load(&self, folio: &FolioLock) {
        self.invalidate(folio);
    }

    /// The page could not be read back and the caller poisoned it: free what it held and
    /// remember it as poisoned until it is invalidated.
    pub fn mark_poisoned(&self, folio: &FolioLock, offset: u32) {
        self.check(folio);
        self.erase(folio, offset);
        folio.set_state(
            offset,
            crate::swap::PageState {
                kind: Kind::Poisoned,
                ..crate::swap::PageState::EMPTY
            },
        );
    }
}
