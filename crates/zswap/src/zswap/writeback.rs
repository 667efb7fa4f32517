//! Writeback: move a folio's pool pages to the backing device and free their pool objects
//! (`zswap_writeback_entry`). Also the direct path a failed store takes to the device
//! (`swap_writepage`).
//!
//! The folio is owned by the caller (its lock is the kernel's swap-cache folio), so no load
//! or invalidate can run on it meanwhile. Pages are decompressed first, written together
//! (one write to contiguous slots when the whole folio goes), and only after the write
//! succeeded are the pool objects freed (invariant 2). A failed write changes nothing: the
//! pages stay in the pool and the error is counted (invariant 8).
//!
//! A page that was written through at store time already has its disk copy: evicting it is a
//! free, with no decompression and no write.
//!
//! With segments (swap/segments), pages go compressed, as the pool holds them or re-encoded
//! with the `writeback_compressor`, and the shrinker hands over many folios at once
//! (`writeback_folios`) so that their objects fill a segment. A page written back
//! compressed keeps its compressor in use (its entry names it, `ON_DISK_COMPRESSED`) until
//! the page is freed.

use std::cell::RefCell;
use std::sync::atomic::Ordering::Relaxed;

use crate::stats::Stats;
use crate::swap::cache::{FolioLock, Kind, PageState};
use crate::swap::segments::{Object, SEGMENT_BYTES};
use crate::swap::slots::SwapSlot;
use crate::swap::swap_info::SwapWriteError;
use crate::zsmalloc::Handle;
use crate::PAGE_SIZE;

use super::shrinker::Cold;
use super::ZswapGroup;

/// Why a folio was not written back.
#[derive(Debug, thiserror::Error)]
pub enum WritebackError {
    /// The group's `writeback` is off, or there is no backing device.
    #[error("writeback is off for this group, or there is no backing device")]
    NotAllowed,
    /// No slot was free, or the device failed the write.
    #[error("writing to the backing device failed: {0}")]
    Write(#[from] SwapWriteError),
}

/// `PageState::payload` of an on-disk page: bit 0 set where its object is compressed (it
/// then holds a use of its compressor, `PageState::codec`), clear for a page on disk as a
/// whole page; the other 31 bits, the group's writeback clock when the page left for the
/// device (`ZswapGroup::writeback_distance`).
const ON_DISK_COMPRESSED: u32 = 1;

/// An on-disk page's payload: whether its object is compressed, and the writeback clock.
pub(crate) fn on_disk_payload(compressed: bool, written_back_at: u32) -> u32 {
    (written_back_at << 1) | u32::from(compressed)
}

/// Whether an on-disk page's object is compressed (holds a use of its codec).
pub(crate) fn on_disk_compressed(payload: u32) -> bool {
    payload & ON_DISK_COMPRESSED != 0
}

/// The writeback clock an on-disk page's payload was stamped with (31 bits).
pub(crate) fn written_back_at(payload: u32) -> u32 {
    payload >> 1
}

thread_local! {
    static FOLIO_BUF: RefCell<(Vec<u8>, Vec<u32>, Vec<SwapSlot>)> =
        const { RefCell::new((Vec::new(), Vec::new(), Vec::new())) };
}

pub(crate) fn touch_thread_locals() {
    FOLIO_BUF.with(|_| ());
}

/// A pool object copied out for a segment: its folio (index in the batch), page, codec,
/// the codec of the bytes written (`written`: the pool's, or the `writeback_compressor`
/// whose use it then holds), what identifies the entry (generation and handle), and its
/// bytes in the arena.
struct Copied {
    folio: usize,
    offset: u32,
    codec: u8,
    written: u8,
    shadow: u32,
    handle: u32,
    at: usize,
    len: usize,
}

/// A batch's pool objects, copied out.
#[derive(Default)]
struct Copies {
    arena: Vec<u8>,
    pages: Vec<Copied>,
}

impl ZswapGroup {
    /// Write the folio's pool pages to the backing device and free them from the pool.
    /// Returns how many pages left the pool.
    pub fn writeback(&self, folio: &FolioLock) -> Result<u32, WritebackError> {
        let (written, result) = self.writeback_folios(std::slice::from_ref(folio));
        result.map(|()| written)
    }

    /// Write back the pool pages of several folios, all held by the caller: with segments,
    /// their objects in one batch (as few segments as they fit); with pages, folio by folio
    /// until one fails. Returns the pages that left the pool, and the error that stopped it.
    pub fn writeback_folios(&self, folios: &[FolioLock]) -> (u32, Result<(), WritebackError>) {
        for folio in folios {
            self.check(folio);
        }
        if !self.writeback_allowed() {
            return (0, Err(WritebackError::NotAllowed));
        }
        let swap = self
            .shared
            .swap
            .as_ref()
            .expect("writeback_allowed implies a device");
        if swap.segments().is_some() {
            return self.writeback_objects(folios);
        }
        let mut written = 0;
        for folio in folios {
            match self.writeback_pages(folio) {
                Ok(n) => written += n,
                Err(e) => return (written, Err(e)),
            }
        }
        (written, Ok(()))
    }

    /// Pages: decompress the folio's pool pages and write them whole.
    fn writeback_pages(&self, folio: &FolioLock) -> Result<u32, WritebackError> {
        let s = &self.shared;
        let swap = s.swap.as_ref().expect("writeback_allowed implies a device");
        crate::scratch::with(&FOLIO_BUF, Default::default, |bufs| {
            let (buf, offsets, slots) = &mut *bufs.borrow_mut();
            // Page-aligned, so the write needs no bounce buffer (direct I/O).
            let nr = folio.nr_pages() as usize;
            let pages = crate::swap::file::page_aligned(buf, nr * PAGE_SIZE);
            let mut used = 0;
            offsets.clear();
            let mut evicted = 0;
            for offset in folio.offsets() {
                let st = folio.state(offset);
                if st.kind != Kind::Stored {
                    continue;
                }
                if self.evict_written_through(folio, offset, st) {
                    evicted += 1;
                    continue;
                }
                let out = &mut pages[used * PAGE_SIZE..(used + 1) * PAGE_SIZE];
                if self.read_page(folio, offset, out).is_err() {
                    // Counted as decompress_fail; the page stays (its load will fail too,
                    // and poison it, rather than hand out anything else).
                    continue;
                }
                used += 1;
                offsets.push(offset);
            }
            if offsets.is_empty() {
                return Ok(evicted);
            }
            if let Err(e) = swap.write(&pages[..used * PAGE_SIZE], slots) {
                Stats::inc(&s.stats.swap_write_fail);
                Stats::inc(&s.stats.reject_reclaim_fail);
                return Err(e.into());
            }
            for (&offset, &slot) in offsets.iter().zip(slots.iter()) {
                let st = folio.state(offset);
                self.free_stored(st);
                self.set_on_disk(folio, offset, st, slot);
            }
            self.count_written(
                std::iter::once((folio, offsets.len() as u32)),
                offsets.len(),
            );
            Ok(evicted + offsets.len() as u32)
        })
    }

    /// Segments: the folios' pool objects (re-encoded if `writeback_compressor` says so), in
    /// one batch, the folios held
    /// throughout.
    fn writeback_objects(&self, folios: &[FolioLock]) -> (u32, Result<(), WritebackError>) {
        let (mut copies, evicted) = self.copy_objects(folios);
        if copies.pages.is_empty() {
            return (evicted, Ok(()));
        }
        self.recode(&mut copies);
        let slots = match self.write_copies(&copies) {
            Ok(slots) => slots,
            Err(e) => return (evicted, Err(e)),
        };
        let mut pages_of = vec![0u32; folios.len()];
        for (c, &slot) in copies.pages.iter().zip(&slots) {
            self.move_to_slot(&folios[c.folio], c, slot);
            pages_of[c.folio] += 1;
        }
        self.count_written(folios.iter().zip(pages_of), slots.len());
        (evicted + slots.len() as u32, Ok(()))
    }

    /// Segments, for the shrinker: copy the batch's pool objects, let the folios go while
    /// their segments are written (a fault on one meanwhile loads it from the pool: served
    /// from memory, without waiting for the write), then move each page to its slot only
    /// if it still holds the object that was written and nobody holds it now. A page that
    /// changed, or that a fault is bringing in, keeps its pool copy; its written copy is
    /// freed (garbage in its segment until compaction).
    pub(crate) fn writeback_released(
        &self,
        folios: Vec<FolioLock>,
    ) -> (u32, Result<(), WritebackError>) {
        for folio in &folios {
            self.check(folio);
        }
        let (mut copies, evicted) = self.copy_objects(&folios);
        let shapes: Vec<(u8, u32)> = folios.iter().map(|f| (f.order(), f.nr_pages())).collect();
        drop(folios);
        if copies.pages.is_empty() {
            return (evicted, Ok(()));
        }
        self.recode(&mut copies);
        let slots = match self.write_copies(&copies) {
            Ok(slots) => slots,
            Err(e) => return (evicted, Err(e)),
        };
        (
            evicted + self.move_released(&copies, &slots, &shapes),
            Ok(()),
        )
    }

    /// The copies of released folios (of `shapes`: order and pages) are on the device at
    /// `slots`: move each page to its slot if it still holds the object written and nobody
    /// holds it now; else free the slot. Returns the pages moved.
    fn move_released(&self, copies: &Copies, slots: &[SwapSlot], shapes: &[(u8, u32)]) -> u32 {
        let swap = self.shared.swap.as_ref().expect("a device");
        let mut pages_of = vec![0u32; shapes.len()];
        let mut moved = 0;
        for (c, &slot) in copies.pages.iter().zip(slots) {
            let Ok(folio) = self.cache.try_lock_page(c.offset) else {
                swap.free(slot);
                self.release_recoded(c);
                continue;
            };
            let st = folio.state(c.offset);
            let same = st.kind == Kind::Stored
                && st.codec == c.codec
                && st.shadow == c.shadow
                && st.payload == c.handle
                && folio.slot(c.offset).is_none();
            if !same {
                swap.free(slot);
                self.release_recoded(c);
                continue;
            }
            self.move_to_slot(&folio, c, slot);
            pages_of[c.folio] += 1;
            moved += 1;
        }
        let whole = shapes
            .iter()
            .zip(pages_of)
            .map(|(&(order, nr), pages)| (order, nr, pages));
        self.count_pages_written(moved as usize);
        self.count_orders(whole);
        moved
    }

    /// Under the folios' locks: evict what was written through at store time (a free), and
    /// copy the other pool objects out, with what identifies each (its generation and
    /// handle) for a later check.
    fn copy_objects(&self, folios: &[FolioLock]) -> (Copies, u32) {
        let s = &self.shared;
        let mut copies = Copies::default();
        let mut evicted = 0;
        let mut scratch = vec![0u8; PAGE_SIZE];
        for (f, folio) in folios.iter().enumerate() {
            for offset in folio.offsets() {
                let st = folio.state(offset);
                if st.kind != Kind::Stored {
                    continue;
                }
                if self.evict_written_through(folio, offset, st) {
                    evicted += 1;
                    continue;
                }
                let at = copies.arena.len();
                s.pool
                    .with_object(Handle::from_raw(st.payload), &mut scratch, |bytes| {
                        copies.arena.extend_from_slice(bytes)
                    });
                copies.pages.push(Copied {
                    folio: f,
                    offset,
                    codec: st.codec,
                    written: st.codec,
                    shadow: st.shadow,
                    handle: st.payload,
                    at,
                    len: copies.arena.len() - at,
                });
            }
        }
        (copies, evicted)
    }

    /// Re-encode the copies' compressed objects with the `writeback_compressor` where that
    /// makes them smaller (a raw page stays raw: incompressible is decided at store time).
    /// Each re-encoded copy holds a use of that codec from here until its page moves to its
    /// slot or the copy is dropped (`release_recoded`). The work is done outside the pool
    /// and, for the shrinker and a direct write's cold objects, with the folios let go.
    fn recode(&self, copies: &mut Copies) {
        let s = &self.shared;
        let recoder = s.params.writeback_compressor().codec().and_then(|spec| {
            let nr = copies.pages.iter().filter(|c| c.len < PAGE_SIZE).count() as u64;
            // None when every codec index is taken: the objects then go as they are.
            (nr > 0)
                .then(|| s.compressors.acquire(spec, nr))
                .flatten()
                .map(|(id, c)| (id, c, nr))
        });
        let Some((id, compressor, nr)) = recoder else {
            return;
        };
        let before = copies.arena.len();
        let mut used = 0;
        let mut page = vec![0u8; PAGE_SIZE];
        let mut arena = Vec::with_capacity(copies.arena.len());
        for c in &mut copies.pages {
            let bytes = &copies.arena[c.at..c.at + c.len];
            let at = arena.len();
            if c.len < PAGE_SIZE && c.codec != id && self.decompress(c.codec, bytes, &mut page) {
                arena.resize(at + c.len - 1, 0);
                if let Ok(n) = compressor.compress(&page, &mut arena[at..]) {
                    arena.truncate(at + n);
                    (c.at, c.len, c.written) = (at, n, id);
                    used += 1;
                    continue;
                }
                arena.truncate(at);
            }
            arena.extend_from_slice(bytes);
            c.at = at;
        }
        // What re-encoding made of the pool's bytes, for the next batch's size.
        let ratio = (arena.len() * 1000 / before.max(1)).clamp(10, 1000) as u32;
        let old = self.recoded_permille.load(Relaxed);
        self.recoded_permille.store((old + ratio) / 2, Relaxed);
        copies.arena = arena;
        s.compressors.release(id, nr - used);
    }

    /// Pool bytes whose objects are expected to take `room` bytes in segments once
    /// re-encoded, by the ratio of recent batches, aiming at nine tenths of it: a batch that
    /// re-encodes a little worse than the last ones still fits.
    pub(crate) fn pool_bytes_for(&self, room: usize) -> usize {
        if self.shared.params.writeback_compressor().codec().is_none() {
            return room;
        }
        let permille = self.recoded_permille.load(Relaxed).max(1) as usize;
        (room * 900 / permille).max(room)
    }

    /// Keep the copies that fit in the `room` bytes a write leaves in its last segment, in
    /// order; the rest are not written (their pages stay in the pool). Returns the batch
    /// index of the first folio left out, if any.
    fn fit(&self, copies: &mut Copies, room: usize) -> Option<usize> {
        let mut bytes = 0;
        let keep = copies
            .pages
            .iter()
            .take_while(|c| {
                bytes += c.len;
                bytes <= room
            })
            .count();
        let first = copies.pages.get(keep).map(|c| c.folio);
        for c in copies.pages.drain(keep..) {
            self.release_recoded(&c);
        }
        first
    }

    /// A copy that will not take its slot gives back the use `recode` took for it.
    fn release_recoded(&self, c: &Copied) {
        if c.written != c.codec {
            self.shared.compressors.release(c.written, 1);
        }
    }

    /// Write the copies as objects; their slots, in order.
    fn write_copies(&self, copies: &Copies) -> Result<Vec<SwapSlot>, WritebackError> {
        let s = &self.shared;
        let swap = s.swap.as_ref().expect("writeback_allowed implies a device");
        let objects: Vec<Object> = copies
            .pages
            .iter()
            .map(|c| Object {
                codec: c.written,
                bytes: &copies.arena[c.at..c.at + c.len],
            })
            .collect();
        let mut slots = Vec::with_capacity(objects.len());
        if let Err(e) = swap.write_objects(&objects, &mut slots) {
            Stats::inc(&s.stats.swap_write_fail);
            Stats::inc(&s.stats.reject_reclaim_fail);
            copies.pages.iter().for_each(|c| self.release_recoded(c));
            return Err(e.into());
        }
        Ok(slots)
    }

    /// The page's object is on the device at `slot`: free its pool copy and make the page
    /// on-disk. If it went compressed, the page holds a use of the codec it was written with:
    /// the pool's object's, or, re-encoded, the writeback codec's (taken by `recode`), the
    /// pool's then given back.
    fn move_to_slot(&self, folio: &FolioLock, c: &Copied, slot: SwapSlot) {
        let st = folio.state(c.offset);
        let at = self.writebacks.fetch_add(1, Relaxed);
        self.written_back_shadow.store(st.shadow, Relaxed);
        let compressed = c.len < PAGE_SIZE;
        self.free_object(st);
        if c.written != c.codec {
            self.shared.compressors.release(c.codec, 1);
        }
        folio.set_slot(c.offset, Some(slot));
        folio.set_state(
            c.offset,
            PageState {
                kind: Kind::OnDisk,
                referenced: false,
                codec: if compressed { c.written } else { 0 },
                payload: on_disk_payload(compressed, at),
                ..st
            },
        );
    }

    fn count_written<'a>(&self, folios: impl Iterator<Item = (&'a FolioLock<'a>, u32)>, n: usize) {
        self.count_pages_written(n);
        self.count_orders(folios.map(|(f, pages)| (f.order(), f.nr_pages(), pages)));
    }

    /// `n` pages went from the pool to the device.
    fn count_pages_written(&self, n: usize) {
        let stats = &self.shared.stats;
        Stats::add(&stats.zswpwb, n as u64);
        Stats::add(&stats.written_back_pages, n as u64);
        Stats::add(&stats.pswpout, n as u64);
    }

    /// A folio of `order` (`nr` pages) all of whose pages went out is one swap-out of its order.
    fn count_orders(&self, folios: impl Iterator<Item = (u8, u32, u32)>) {
        for (order, nr, pages) in folios {
            if pages == nr {
                Stats::count_order(&self.shared.stats.order_swpout, order, 1);
            }
        }
    }

    /// A pool page written through at store time already has its copy on the device:
    /// evicting it is a free. False if it has none.
    fn evict_written_through(&self, folio: &FolioLock, offset: u32, st: PageState) -> bool {
        let Some(slot) = folio.slot(offset) else {
            return false;
        };
        self.free_stored(st);
        self.set_on_disk(folio, offset, st, slot);
        Stats::inc(&self.shared.stats.writethrough_evictions);
        true
    }

    fn set_on_disk(&self, folio: &FolioLock, offset: u32, was: PageState, slot: SwapSlot) {
        let at = self.writebacks.fetch_add(1, Relaxed);
        self.written_back_shadow.store(was.shadow, Relaxed);
        folio.set_slot(offset, Some(slot));
        folio.set_state(
            offset,
            PageState {
                kind: Kind::OnDisk,
                referenced: false,
                codec: 0,
                payload: on_disk_payload(false, at),
                ..was
            },
        );
    }

    /// Write the folio straight to the backing device (the kernel's `__swap_writepage`),
    /// replacing whatever its pages held. Zero pages are still only marked. With segments,
    /// each page goes compressed (with the `writeback_compressor`, else the current
    /// compressor; as-is if it does not compress): the store that failed compressed nothing, since the pool's limit is
    /// checked first.
    pub fn swap_writepage(&self, folio: &FolioLock, data: &[u8]) -> Result<(), WritebackError> {
        self.check(folio);
        assert_eq!(data.len(), folio.nr_pages() as usize * PAGE_SIZE);
        if !self.writeback_allowed() {
            return Err(WritebackError::NotAllowed);
        }
        let s = &self.shared;
        let swap = s.swap.as_ref().expect("writeback_allowed implies a device");
        let mut slots = Vec::with_capacity(folio.nr_pages() as usize);
        // Per page: the codec its object holds a use of, if it went compressed.
        let mut codecs: Vec<Option<u8>> = vec![None; folio.nr_pages() as usize];
        let written = match swap.segments() {
            None => swap.write(data, &mut slots),
            Some(_) => self.write_compressed(data, &mut slots, &mut codecs),
        };
        if let Err(e) = written {
            Stats::inc(&s.stats.swap_write_fail);
            return Err(e.into());
        }
        let first_shadow = self.evictions.fetch_add(folio.nr_pages(), Relaxed);
        let at = self.writebacks.fetch_add(folio.nr_pages(), Relaxed);
        let mut zero = 0u32;
        for (i, (offset, page)) in folio
            .offsets()
            .zip(data.chunks_exact(PAGE_SIZE))
            .enumerate()
        {
            self.erase(folio, offset);
            let shadow = first_shadow.wrapping_add(i as u32);
            if let Some(v) = super::store::same_filled(page) {
                swap.free(slots[i]);
                if let Some(codec) = codecs[i] {
                    s.compressors.release(codec, 1);
                }
                zero += 1;
                folio.set_state(
                    offset,
                    PageState {
                        kind: Kind::Zero,
                        shadow,
                        payload: v,
                        ..PageState::EMPTY
                    },
                );
                continue;
            }
            let st = PageState {
                shadow,
                codec: codecs[i].unwrap_or(0),
                payload: on_disk_payload(codecs[i].is_some(), at.wrapping_add(i as u32)),
                ..PageState::EMPTY
            };
            folio.set_slot(offset, Some(slots[i]));
            folio.set_state(
                offset,
                PageState {
                    kind: Kind::OnDisk,
                    ..st
                },
            );
        }
        Stats::add(&s.stats.same_filled_pages, zero.into());
        Stats::add(&s.stats.swpout_zero, zero.into());
        Stats::add(&s.stats.pswpout, u64::from(folio.nr_pages() - zero));
        Stats::count_order(&s.stats.order_swpout, folio.order(), 1);
        Ok(())
    }

    /// Segments: compress each page of `data` and write the objects, a page's slot each;
    /// `codecs[i]` is the codec whose use page `i`'s object holds, if it is compressed.
    fn write_compressed(
        &self,
        data: &[u8],
        slots: &mut Vec<SwapSlot>,
        codecs: &mut [Option<u8>],
    ) -> Result<(), SwapWriteError> {
        // The objects are gathered in the thread's writeback folio buffer (kept, and charged
        // with its scratch), not in a buffer of their own for each write.
        crate::scratch::with(&FOLIO_BUF, Default::default, |bufs| {
            let mut bufs = bufs.borrow_mut();
            self.write_compressed_in(data, slots, codecs, &mut bufs.0)
        })
    }

    fn write_compressed_in(
        &self,
        data: &[u8],
        slots: &mut Vec<SwapSlot>,
        codecs: &mut [Option<u8>],
        arena: &mut Vec<u8>,
    ) -> Result<(), SwapWriteError> {
        let s = &self.shared;
        let swap = s.swap.as_ref().expect("a device");
        let nr = codecs.len() as u64;
        // Straight to the device: encoded once, with the codec for what lies below the pool.
        let (codec, compressor) = s
            .params
            .writeback_compressor()
            .codec()
            .and_then(|spec| s.compressors.acquire(spec, nr))
            .unwrap_or_else(|| s.compressors.acquire_current(nr));
        arena.clear();
        arena.resize(data.len(), 0);
        let mut spans = Vec::with_capacity(codecs.len());
        let mut at = 0;
        for (i, page) in data.chunks_exact(PAGE_SIZE).enumerate() {
            let out = &mut arena[at..at + PAGE_SIZE - 1];
            match compressor.compress(page, out) {
                Ok(n) if n < PAGE_SIZE => {
                    codecs[i] = Some(codec);
                    spans.push((at, n));
                    at += n;
                }
                _ => {
                    arena[at..at + PAGE_SIZE].copy_from_slice(page);
                    spans.push((at, PAGE_SIZE));
                    at += PAGE_SIZE;
                }
            }
        }
        let used = codecs.iter().flatten().count() as u64;
        s.compressors.release(codec, nr - used);
        let mut objects: Vec<Object> = spans
            .iter()
            .zip(codecs.iter())
            .map(|(&(at, n), c)| Object {
                codec: c.unwrap_or(0),
                bytes: &arena[at..at + n],
            })
            .collect();
        // The pool's coldest objects fill the rest of the last segment: one full segment
        // written, not a few pages padded to a page. The store came here because the pool
        // is full, so they are what writeback takes next anyway.
        let room = (SEGMENT_BYTES - at % SEGMENT_BYTES) % SEGMENT_BYTES;
        // Let go during the write, as the shrinker's batches are (`writeback_released`): a
        // fault on one meanwhile is served from the pool.
        let cold = self.cold_folios(self.pool_bytes_for(room));
        let (mut copies, _) = self.copy_objects(&cold);
        let shapes: Vec<(u8, u32)> = cold.iter().map(|f| (f.order(), f.nr_pages())).collect();
        let starts: Vec<u32> = cold.iter().map(|f| f.start()).collect();
        drop(cold);
        self.recode(&mut copies);
        if let Some(first) = self.fit(&mut copies, room) {
            // What did not fit keeps its turn: the shrinker's next pass starts there.
            *self.hand.lock() = starts[first];
        }
        objects.extend(copies.pages.iter().map(|c| Object {
            codec: c.written,
            bytes: &copies.arena[c.at..c.at + c.len],
        }));
        let result = swap.write_objects(&objects, slots);
        if result.is_err() {
            s.compressors.release(codec, used);
            codecs.fill(None);
            copies.pages.iter().for_each(|c| self.release_recoded(c));
            return result;
        }
        self.move_released(&copies, &slots[codecs.len()..], &shapes);
        slots.truncate(codecs.len());
        Ok(())
    }

    /// The group's coldest pool folios, locked, whose objects together take at most `room`
    /// bytes. The shrinker's hand is held only while it moves (never across a write), and
    /// folios are taken with try_lock: holding our folio, we wait for no one who could
    /// wait for us.
    fn cold_folios(&self, room: usize) -> Vec<FolioLock<'_>> {
        let mut folios = Vec::new();
        if room == 0 || self.zswapped.load(std::sync::atomic::Ordering::Relaxed) == 0 {
            return folios;
        }
        let mut hand = self.hand.lock();
        let (mut scanned, mut bytes) = (0u64, 0usize);
        // Two turns, as the shrinker's: the first may only clear referenced bits.
        let limit = 2 * u64::from(self.nr_pages());
        while let Cold::Folio(folio) = self.next_cold(&mut hand, &mut scanned, limit) {
            bytes += self.stored_length(&folio) as usize;
            if bytes > room {
                // The hand stays on it: the shrinker's next pass starts there.
                *hand = folio.start();
                break;
            }
            folios.push(folio);
        }
        folios
    }
}
