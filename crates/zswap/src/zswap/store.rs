//! Store: put a folio of 1 to 512 pages into the pool, all of its pages or none
//! (`zswap_store`, with the large-folio series).
//!
//! Order of work, as in the kernel:
//! 1. With zswap off, or a limit hit, go straight to the failure path.
//! 2. The group's `zswap_max` and the global pool limit are checked once per folio, so a
//!    large folio may overshoot by its own size.
//! 3. Each page: a same-filled page is recorded by value; otherwise it is compressed into a
//!    buffer one byte short of a page. A page that does not fit is stored raw (a PAGE_SIZE
//!    object) when the group may write back, and refused when it may not
//!    (`reject_compress_poor`): a raw page in the pool keeps LRU order, but with writeback
//!    off it could never leave. The decision is made here only; load looks at the length.
//!    The pages' objects are allocated `STORE_BATCH` at a time, one taking of the pool's
//!    lock a batch.
//! 4. Only when every page has its new object are the entries published: each stale entry
//!    is freed as it is replaced, then charges and counters move.
//! 5. On any failure every new object is freed, every entry at the folio's offsets is
//!    erased (stale older versions included: they must never be written back over newer
//!    data) and nothing is charged or counted but the reject reason.

use std::cell::RefCell;
use std::sync::atomic::Ordering::Relaxed;

use crate::compress::{CompressError, Compressor};
use crate::stats::Stats;
use crate::swap::cache::{FolioLock, Kind, PageState};
use crate::swap::slots::SwapSlot;
use crate::zsmalloc::Handle;
use crate::PAGE_SIZE;

use super::{parallel, ZswapGroup};

/// Pages a store compresses before it allocates their objects, all under one taking of the
/// pool's lock: taken per page, the lock is contended by every thread that stores (kswapd
/// threads and the program's), each wait a sleep and a wake-up (DESIGN.md section 6).
pub const STORE_BATCH: usize = 8;

/// Bytes of scratch a thread that stores folios of a batch or more keeps (its batch's
/// compressed pages; less for smaller folios).
pub const STORE_SCRATCH_BYTES: u64 = (STORE_BATCH * PAGE_SIZE) as u64;

/// Why a folio was not stored. The folio's offsets hold nothing afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The `enabled` tunable is off.
    #[error("zswap is disabled")]
    Disabled,
    /// The group is at its `zswap_max` and writing some of it back freed nothing
    /// (`reject_reclaim_fail`).
    #[error("the group is at its zswap_max and reclaim freed nothing")]
    GroupLimit,
    /// The pool is at `max_pool_percent`, or has not yet shrunk back to
    /// `accept_threshold_percent` since it was (`pool_limit_hit`).
    #[error("the pool is at max_pool_percent")]
    PoolLimit,
    /// The page at this offset does not compress and may not be stored raw
    /// (`reject_compress_poor`).
    #[error("page {0} does not compress, and writeback is off or the caller refused it as-is")]
    CompressPoor(u32),
    /// The compressor failed on the page at this offset (`reject_compress_fail`).
    #[error("the compressor failed on page {0}")]
    CompressFail(u32),
    /// The pool could not allocate for the page at this offset (`reject_alloc_fail`).
    #[error("the pool could not allocate for page {0}")]
    AllocFail(u32),
}

/// Where `swap_out` put a folio.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwapOutResult {
    /// In zswap.
    Stored,
    /// Straight to the backing device, because the store failed.
    WrittenToDisk(StoreError),
}

/// When a page that does not compress is stored as-is (raw).
#[derive(Clone, Copy)]
enum AsIs<'a> {
    /// When writeback is possible (the kernel's rule: it keeps LRU order for writeback).
    WhenWritebackIsOn,
    /// As `WhenWritebackIsOn`, but a folio none of whose pages compress is refused if the
    /// caller says so, asked only then.
    UnlessRefused(&'a dyn Fn() -> bool),
}

/// A page's new entry before it is published.
#[derive(Clone, Copy)]
enum NewEntry {
    Zero(u32),
    Compressed(Handle, u32),
    Raw(Handle),
}

/// How a store encodes its pages: the compressor, and whether a page that does not compress
/// may be stored as-is (its group may write back).
#[derive(Clone, Copy)]
struct Encoding<'a> {
    compressor: &'a dyn Compressor,
    may_writeback: bool,
}

/// A storing thread's buffers for one batch of pages.
struct BatchBuffers {
    /// Page `i` of the batch compresses into `compressed[i * PAGE_SIZE..][..PAGE_SIZE - 1]`;
    /// grown to the largest batch this thread has stored.
    compressed: Vec<u8>,
    /// The batch's handles, in the order the pool gave them.
    handles: Vec<Handle>,
}

thread_local! {
    /// Per-thread batch buffers and new-entry list: no allocation per store.
    static SCRATCH: RefCell<(BatchBuffers, Vec<NewEntry>)> = RefCell::new(new_scratch());
}

pub(crate) fn touch_thread_locals() {
    SCRATCH.with(|_| ());
}

fn new_scratch() -> (BatchBuffers, Vec<NewEntry>) {
    let buffers = BatchBuffers {
        compressed: vec![0; PAGE_SIZE],
        handles: Vec::with_capacity(STORE_BATCH),
    };
    (buffers, Vec::with_capacity(512))
}

/// The page's fill value if all its 32-bit words are equal.
pub(crate) fn same_filled(page: &[u8]) -> Option<u32> {
    let first = u32::from_ne_bytes(page[..4].try_into().expect("4 bytes"));
    let pattern = u64::from(first) | (u64::from(first) << 32);
    page.chunks_exact(8)
        .all(|w| u64::from_ne_bytes(w.try_into().expect("8 bytes")) == pattern)
        .then_some(first)
}

impl ZswapGroup {
    /// Store the folio's pages (`data` is the folio: `nr_pages * PAGE_SIZE` bytes) in zswap.
    /// On error nothing is stored at any of its offsets.
    pub fn store(&self, folio: &FolioLock, data: &[u8]) -> Result<(), StoreError> {
        self.store_with(folio, data, AsIs::WhenWritebackIsOn)
    }

    fn store_with(&self, folio: &FolioLock, data: &[u8], as_is: AsIs) -> Result<(), StoreError> {
        self.check(folio);
        let nr = folio.nr_pages();
        assert_eq!(data.len(), nr as usize * PAGE_SIZE, "data is not the folio");
        let result = self.try_store(folio, data, as_is);
        if result.is_err() {
            // check_old: no stale entry may survive a failed store.
            self.invalidate(folio);
        }
        result
    }

    /// Store the folio in zswap, or, if that fails and this group may write back, write it
    /// to the backing device (the kernel's swap_writeout). Err when it went nowhere: the
    /// caller keeps the data (for a region: the folio stays resident).
    pub fn swap_out(&self, folio: &FolioLock, data: &[u8]) -> Result<SwapOutResult, StoreError> {
        self.swap_out_with(folio, data, AsIs::WhenWritebackIsOn)
    }

    /// `swap_out`, but a folio none of whose pages compress (zero pages aside) is refused if
    /// `refuse()` says so (`CompressPoor`, counted as `reject_compress_poor`), neither stored
    /// as-is nor written: for a caller that would rather keep such a folio (a region whose
    /// incompressible data keeps coming back in). `refuse` is asked only about such a folio,
    /// once its pages are compressed: a folio it does not refuse is stored as-is without
    /// being compressed again. A folio some of whose pages compress is stored as `swap_out`
    /// stores it, the rest as-is. `refuse` runs inside the store (this thread's scratch
    /// buffers borrowed, a compressor held): it must not call into the group.
    pub fn swap_out_unless_poor(
        &self,
        folio: &FolioLock,
        data: &[u8],
        refuse: &dyn Fn() -> bool,
    ) -> Result<SwapOutResult, StoreError> {
        self.swap_out_with(folio, data, AsIs::UnlessRefused(refuse))
    }

    /// The bytes `data` (a folio, or any whole pages) would take stored now: a zero page
    /// none, a page that compresses with the current compressor its compressed length, one
    /// that does not a page. Stores nothing and counts nothing: for a caller deciding whether
    /// to move a folio out at all.
    pub fn stored_length_estimate(&self, data: &[u8]) -> u64 {
        let s = &self.shared;
        let (codec, compressor) = s.compressors.acquire_current(0);
        let length = crate::scratch::with(&SCRATCH, new_scratch, |scratch| {
            let (buffers, _) = &mut *scratch.borrow_mut();
            let buf = &mut buffers.compressed[..PAGE_SIZE - 1];
            data.chunks_exact(PAGE_SIZE)
                .map(|page| match same_filled(page) {
                    Some(_) => 0,
                    None => compressor.compress(page, buf).unwrap_or(PAGE_SIZE) as u64,
                })
                .sum()
        });
        s.compressors.release(codec, 0);
        length
    }

    fn swap_out_with(
        &self,
        folio: &FolioLock,
        data: &[u8],
        as_is: AsIs,
    ) -> Result<SwapOutResult, StoreError> {
        match self.store_with(folio, data, as_is) {
            Ok(()) => Ok(SwapOutResult::Stored),
            Err(e @ StoreError::CompressPoor(_)) if matches!(as_is, AsIs::UnlessRefused(_)) => {
                Err(e)
            }
            Err(e) if self.writeback_allowed() => match self.swap_writepage(folio, data) {
                Ok(()) => Ok(SwapOutResult::WrittenToDisk(e)),
                Err(_) => Err(e),
            },
            Err(e) => Err(e),
        }
    }

    fn try_store(&self, folio: &FolioLock, data: &[u8], as_is: AsIs) -> Result<(), StoreError> {
        let s = &self.shared;
        let nr = folio.nr_pages();
        if !s.params.enabled() {
            return Err(StoreError::Disabled);
        }
        self.check_group_limit(nr)?;
        self.shared.check_pool_limit()?;
        let may_writeback = self.writeback_allowed();
        let (codec, compressor) = s.compressors.acquire_current(u64::from(nr));

        let parts = parallel::parts(nr, s.params.compress_threads());
        crate::scratch::with(&SCRATCH, new_scratch, |scratch| {
            let (buffers, new) = &mut *scratch.borrow_mut();
            new.clear();
            let encoding = Encoding {
                compressor: &*compressor,
                may_writeback,
            };
            let mut failed = if parts == 1 {
                self.compress_pages(folio.start(), data, encoding, buffers, new)
            } else {
                self.compress_in_parts(folio, data, parts, encoding, buffers, new)
            };
            if let Some(e) = failed {
                self.count_reject(e);
            }
            let compressed = new
                .iter()
                .filter(|e| matches!(e, NewEntry::Compressed(..)))
                .count() as u64;
            if let (None, AsIs::UnlessRefused(refuse), 0) = (failed, as_is, compressed) {
                if let Some(i) = new.iter().position(|e| matches!(e, NewEntry::Raw(_))) {
                    if refuse() {
                        Stats::inc(&s.stats.reject_compress_poor);
                        failed = Some(StoreError::CompressPoor(folio.start() + i as u32));
                    }
                }
            }
            if let Some(e) = failed {
                for entry in new.iter() {
                    if let NewEntry::Compressed(h, _) | NewEntry::Raw(h) = *entry {
                        s.pool.free(h);
                    }
                }
                s.compressors.release(codec, u64::from(nr));
                return Err(e);
            }
            s.compressors.release(codec, u64::from(nr) - compressed);
            let slots = self.write_through(data, new, may_writeback);
            self.publish(folio, codec, new, slots.as_deref());
            Ok(())
        })
    }

    /// Compress the pages of `data`, the first at `offset`, into new pool objects (a
    /// same-filled page is recorded by value), pushed to `new` in order, a batch at a time;
    /// the first failure stops it and is returned, not counted (what `new` holds then is the
    /// caller's to free).
    fn compress_pages(
        &self,
        offset: u32,
        data: &[u8],
        encoding: Encoding<'_>,
        buffers: &mut BatchBuffers,
        new: &mut Vec<NewEntry>,
    ) -> Option<StoreError> {
        data.chunks(STORE_BATCH * PAGE_SIZE)
            .zip((offset..).step_by(STORE_BATCH))
            .find_map(|(batch, at)| self.compress_batch(at, batch, encoding, buffers, new))
    }

    /// `compress_pages` of at most `STORE_BATCH` pages: each is compressed into its own part
    /// of `buffers.compressed` (or recorded by value), then the pool allocates all their
    /// objects at once.
    fn compress_batch(
        &self,
        offset: u32,
        pages: &[u8],
        encoding: Encoding<'_>,
        buffers: &mut BatchBuffers,
        new: &mut Vec<NewEntry>,
    ) -> Option<StoreError> {
        // Each page's length: 0 for a same-filled page (its value in `fill`), PAGE_SIZE for
        // one stored as-is, else its compressed length.
        let mut lengths = [0usize; STORE_BATCH];
        let mut fill = [0u32; STORE_BATCH];
        let nr = pages.len() / PAGE_SIZE;
        if buffers.compressed.len() < nr * PAGE_SIZE {
            buffers.compressed.resize(nr * PAGE_SIZE, 0);
        }
        let outputs = buffers.compressed.chunks_exact_mut(PAGE_SIZE);
        for (i, (page, out)) in pages.chunks_exact(PAGE_SIZE).zip(outputs).enumerate() {
            let at = offset + i as u32;
            if let Some(v) = same_filled(page) {
                fill[i] = v;
                continue;
            }
            lengths[i] = match encoding
                .compressor
                .compress(page, &mut out[..PAGE_SIZE - 1])
            {
                Ok(len) => len,
                Err(CompressError::DoesNotFit(_)) if encoding.may_writeback => PAGE_SIZE,
                Err(CompressError::DoesNotFit(_)) => return Some(StoreError::CompressPoor(at)),
                Err(CompressError::Corrupt(_)) => return Some(StoreError::CompressFail(at)),
            };
        }
        let object = |i: usize| match lengths[i] {
            PAGE_SIZE => &pages[i * PAGE_SIZE..][..PAGE_SIZE],
            len => &buffers.compressed[i * PAGE_SIZE..][..len],
        };
        buffers.handles.clear();
        // A failure leaves the objects before it allocated: the page without a handle below
        // is the one that failed. (PoolFull is the pool's own cap: the same refusal as
        // running out of memory.)
        let objects = (0..nr).filter(|&i| lengths[i] > 0).map(object);
        let _ = self.shared.pool.malloc_many(objects, &mut buffers.handles);
        let mut handles = buffers.handles.iter().copied();
        for (i, &length) in lengths[..nr].iter().enumerate() {
            if length == 0 {
                new.push(NewEntry::Zero(fill[i]));
                continue;
            }
            new.push(match (length, handles.next()) {
                (PAGE_SIZE, Some(h)) => NewEntry::Raw(h),
                (len, Some(h)) => NewEntry::Compressed(h, len as u32),
                (_, None) => return Some(StoreError::AllocFail(offset + i as u32)),
            });
        }
        None
    }

    /// `compress_pages` of the folio in `parts` parts at once (parallel.rs): this thread
    /// compresses the first with `buffers` into `new`, helpers the others; their entries follow
    /// in `new`, in page order, whatever failed (so that the caller frees them all). The
    /// first failure, in page order, is returned.
    fn compress_in_parts(
        &self,
        folio: &FolioLock,
        data: &[u8],
        parts: u32,
        encoding: Encoding<'_>,
        buffers: &mut BatchBuffers,
        new: &mut Vec<NewEntry>,
    ) -> Option<StoreError> {
        let (start, per_part) = (folio.start(), folio.nr_pages().div_ceil(parts));
        let part = |k: u32| {
            let from = (k * per_part) as usize * PAGE_SIZE;
            let to = (from + per_part as usize * PAGE_SIZE).min(data.len());
            (start + k * per_part, &data[from..to])
        };
        let (first, rest) = parallel::in_parts(
            parts,
            || {
                let (offset, pages) = part(0);
                self.compress_pages(offset, pages, encoding, buffers, new)
            },
            |k| {
                let (offset, pages) = part(k);
                let mut entries = Vec::with_capacity(per_part as usize);
                let failed = crate::scratch::with(&SCRATCH, new_scratch, |scratch| {
                    let (buffers, _) = &mut *scratch.borrow_mut();
                    self.compress_pages(offset, pages, encoding, buffers, &mut entries)
                });
                (entries, failed)
            },
        );
        Stats::inc(&self.shared.stats.folios_compressed_in_parts);
        let mut failed = first;
        for (entries, part_failed) in rest {
            new.extend(entries);
            failed = failed.or(part_failed);
        }
        failed
    }

    /// Count why a folio's pages could not all be compressed and allocated: once a folio.
    fn count_reject(&self, e: StoreError) {
        let stats = &self.shared.stats;
        match e {
            StoreError::AllocFail(_) => Stats::inc(&stats.reject_alloc_fail),
            StoreError::CompressPoor(_) => Stats::inc(&stats.reject_compress_poor),
            StoreError::CompressFail(_) => Stats::inc(&stats.reject_compress_fail),
            _ => {}
        }
    }

    /// Writethrough (always, or by pool fullness: `Shared::writes_through`): the pages that
    /// went to the pool are also written to the backing
    /// device now, so evicting them later is a free. A failed write loses nothing (the pool
    /// holds the page) and the page is simply not written through.
    fn write_through(
        &self,
        data: &[u8],
        new: &[NewEntry],
        may_writeback: bool,
    ) -> Option<Vec<SwapSlot>> {
        let s = &self.shared;
        if !(may_writeback && s.writes_through()) {
            return None;
        }
        let swap = s.swap.as_ref()?;
        if new.iter().all(|e| matches!(e, NewEntry::Zero(_))) {
            return None;
        }
        let mut slots = Vec::with_capacity(new.len());
        match swap.write(data, &mut slots) {
            Ok(()) => {
                Stats::add(&s.stats.pswpout, new.len() as u64);
                Stats::add(&s.stats.writethrough_pages, new.len() as u64);
                Some(slots)
            }
            Err(_) => {
                Stats::inc(&s.stats.swap_write_fail);
                None
            }
        }
    }

    /// Make the new entries visible, freeing the stale ones they replace, then charge and
    /// count.
    fn publish(&self, folio: &FolioLock, codec: u8, new: &[NewEntry], slots: Option<&[SwapSlot]>) {
        let s = &self.shared;
        let nr = folio.nr_pages();
        let first_shadow = self.evictions.fetch_add(nr, Relaxed);
        let (mut stored, mut raw, mut zero, mut bytes) = (0u64, 0u64, 0u64, 0u64);
        for (i, (offset, entry)) in folio.offsets().zip(new).enumerate() {
            self.erase(folio, offset);
            let (kind, codec, payload) = match *entry {
                NewEntry::Zero(v) => {
                    zero += 1;
                    (Kind::Zero, 0, v)
                }
                NewEntry::Compressed(h, len) => {
                    stored += 1;
                    bytes += u64::from(len);
                    (Kind::Stored, codec, h.to_raw())
                }
                NewEntry::Raw(h) => {
                    stored += 1;
                    raw += 1;
                    bytes += PAGE_SIZE as u64;
                    (Kind::Stored, 0, h.to_raw())
                }
            };
            // A page stored as-is takes as much pool as it took memory: it is in the pool
            // only to keep its place in line for writeback. It gets no second chance from
            // the shrinker's clock, so it goes to disk a turn before compressed pages: each
            // one written frees a whole page of pool and costs no decompression.
            let raw_page = matches!(entry, NewEntry::Raw(_));
            folio.set_state(
                offset,
                PageState {
                    kind,
                    referenced: !raw_page,
                    codec,
                    order: folio.order(),
                    shadow: first_shadow.wrapping_add(i as u32),
                    payload,
                },
            );
            if let Some(slots) = slots {
                if kind == Kind::Stored {
                    folio.set_slot(offset, Some(slots[i]));
                } else {
                    // A zero page needs no disk copy: give back the slot it was written to.
                    s.swap
                        .as_ref()
                        .expect("slots imply a device")
                        .free(slots[i]);
                }
            }
        }
        self.charged.fetch_add(bytes, Relaxed);
        Stats::add(&self.zswapped, stored);
        Stats::add(&s.stats.stored_pages, stored);
        Stats::add(&s.stats.stored_incompressible_pages, raw);
        Stats::add(&s.stats.same_filled_pages, zero);
        Stats::add(&s.stats.zswpout, stored);
        s.count_stored_for_auto();
        Stats::add(&s.stats.swpout_zero, zero);
        if stored > 0 {
            Stats::count_order(&s.stats.order_zswpout, folio.order(), 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::same_filled;
    use crate::swap::cache::FolioLock;
    use crate::swap::MemoryDevice;
    use crate::{Zswap, ZswapConfig, PAGE_SIZE};

    fn text_page() -> Vec<u8> {
        (0..PAGE_SIZE).map(|i| b"the swap cache "[i % 15]).collect()
    }

    fn random_page(seed: u64) -> Vec<u8> {
        crate::zsmalloc::tests::pattern(seed, PAGE_SIZE)
    }

    /// A folio of many batches comes back byte for byte, whatever its pages hold (same-filled,
    /// as-is, compressed). When the pool refuses a page of a later batch, the store fails
    /// with AllocFail at that page and leaves nothing: the earlier batches' objects are freed
    /// and no offset of the folio holds an entry. Would fail if a batch's objects were
    /// matched to the wrong pages, or if a failed batch leaked what was allocated before it.
    #[test]
    fn a_folio_is_stored_in_batches_all_or_nothing() {
        use super::STORE_BATCH;
        use crate::swap::Kind;
        const ORDER: u8 = 6;
        let nr = 1usize << ORDER;
        assert!(nr > 2 * STORE_BATCH);
        // A device, so that the random pages are stored as-is.
        let slots = 4 * nr as u32;
        let zswap = Zswap::new(
            ZswapConfig::new(64 << 20).device(Arc::new(MemoryDevice::new(slots)), slots),
        );
        let group = zswap.new_group(slots);
        let data: Vec<u8> = (0..nr)
            .flat_map(|i| match i % 3 {
                0 => text_page(),
                1 => random_page(i as u64),
                _ => vec![i as u8; PAGE_SIZE],
            })
            .collect();
        let folio = group.lock_folio(0, ORDER);
        group.store(&folio, &data).unwrap();
        let mut out = vec![0; data.len()];
        group.load(&folio, &mut out).unwrap();
        assert!(out == data, "a page came back other than it went in");
        drop(folio);

        // Room for the first batch's objects and a few more, not for the folio.
        let (objects, pages) = (zswap.pool().nr_objects(), zswap.pool().total_size());
        let pages_of_one_batch = (STORE_BATCH as u64) * 2 / 3;
        zswap
            .pool()
            .set_max_pages(Some(pages / PAGE_SIZE as u64 + pages_of_one_batch + 4));
        let folio = group.lock_folio(nr as u32, ORDER);
        let err = group.store(&folio, &data).unwrap_err();
        let at = match err {
            super::StoreError::AllocFail(at) => at,
            e => panic!("expected AllocFail, got {e:?}"),
        };
        assert!(
            at >= nr as u32 + STORE_BATCH as u32,
            "failed in the first batch: {at}"
        );
        assert_eq!(
            zswap.pool().nr_objects(),
            objects,
            "a failed store left objects"
        );
        assert!((nr..2 * nr).all(|o| group.peek(o as u32).kind == Kind::Empty));
        assert_eq!(zswap.stats().get("reject_alloc_fail"), 1);
        zswap.pool().check_consistency().unwrap();
    }

    /// A page stored as-is frees no pool by staying: the shrinker's clock gives it no second
    /// chance, so it is written back before a compressed page that the hand met first.
    /// The owner's pool share limits the pool under `max_pool_percent`: stores are refused
    /// (`pool_limit_hit`) once the pool reaches the lower of the two, and the share cannot
    /// raise the limit past `max_pool_percent`.
    #[test]
    fn the_pool_share_limits_the_pool_under_max_pool_percent() {
        let stored_until_full = |share: u32| {
            // A device, so that random pages are stored as-is: a page of pool each.
            let zswap = Zswap::new(
                ZswapConfig::new(4 << 20).device(Arc::new(MemoryDevice::new(4096)), 4096),
            );
            zswap.params().set_max_pool_percent(20).unwrap();
            zswap.set_pool_share_percent(share);
            let group = zswap.new_group(4096);
            let stored = (0..4096u32)
                .take_while(|&offset| {
                    let folio = group.lock_folio(offset, 0);
                    group.store(&folio, &random_page(u64::from(offset))).is_ok()
                })
                .count();
            assert_eq!(zswap.stats().get("pool_limit_hit"), 1);
            stored
        };
        let (five, twenty, above) = (
            stored_until_full(5),
            stored_until_full(20),
            stored_until_full(90),
        );
        // Random pages are stored as-is, a page each: 5% and 20% of 4 MiB, to a page or so.
        assert!((50..=54).contains(&five), "{five} pages under a 5% share");
        assert!(
            (204..=208).contains(&twenty),
            "{twenty} pages under a 20% share"
        );
        assert_eq!(
            above, twenty,
            "a share above max_pool_percent raised the limit"
        );
    }

    /// A page read back from the device says how many pages left the pool after it did:
    /// how much larger the pool would have had to be to keep it. Would fail if the clock
    /// were not stamped, or not counted, on each way to the device (writeback, a store gone
    /// straight to the device), or if the stamp broke the on-disk page's codec bit (the
    /// load would not decompress).
    #[test]
    fn an_on_disk_page_knows_its_writeback_distance() {
        let zswap =
            Zswap::new(ZswapConfig::new(64 << 20).device(Arc::new(MemoryDevice::new(64)), 64));
        let group = zswap.new_group(16);
        for offset in 0..6 {
            let folio = group.lock_folio(offset, 0);
            group.store(&folio, &text_page()).unwrap();
        }
        let distance = |o| {
            let folio = group.lock_folio(o, 0);
            group.writeback_distance(&folio, o)
        };
        assert_eq!(distance(0), None, "a pool page has no writeback distance");
        assert_eq!(group.shrink(3).written, 3);
        // Oldest first: pages 0, 1, 2 went, in that order; a pool one page larger would
        // have kept page 2.
        assert_eq!(
            (distance(0), distance(1), distance(2)),
            (Some(3), Some(2), Some(1))
        );
        let folio = group.lock_folio(8, 0);
        group.swap_writepage(&folio, &random_page(8)).unwrap();
        drop(folio);
        assert_eq!((distance(0), distance(8)), (Some(4), Some(1)));
        let folio = group.lock_folio(0, 0);
        let mut out = vec![0; PAGE_SIZE];
        group.load(&folio, &mut out).unwrap();
        assert!(
            out == text_page(),
            "the written-back page came back other than it went"
        );
    }

    #[test]
    fn pages_stored_as_is_are_written_back_first() {
        let zswap =
            Zswap::new(ZswapConfig::new(64 << 20).device(Arc::new(MemoryDevice::new(64)), 64));
        let group = zswap.new_group(16);
        for (offset, page) in [(0, text_page()), (1, random_page(1)), (2, text_page())] {
            let folio = group.lock_folio(offset, 0);
            group.store(&folio, &page).unwrap();
        }
        assert_eq!(group.shrink(1).written, 1);
        let kind = |o| group.peek(o).kind;
        assert_eq!(
            kind(1),
            crate::swap::Kind::OnDisk,
            "the raw page was not written first"
        );
        assert_eq!(
            (kind(0), kind(2)),
            (crate::swap::Kind::Stored, crate::swap::Kind::Stored)
        );
    }

    /// `writethrough=auto` writes nothing through while the pool is below its accept
    /// threshold. Above it, it writes stores through while the pool's pages leave for the
    /// disk (here each store pushes one out), and stops once they leave otherwise (here each
    /// page is invalidated before the pool pushes anything out), however full the pool is.
    /// Switching to `N` stops it. Would fail if auto were `Y`, `N`, or blind to where the
    /// pool's pages go (adaptive.rs).
    #[test]
    fn auto_writethrough_follows_the_pool_and_where_its_pages_go() {
        use crate::params::Writethrough;
        use crate::zswap::adaptive::EPOCH_PAGES;
        const PAGES: u32 = 8192;
        // A pool of at most 20% of 4 MiB: about 820 KiB, its accept threshold 90% of that.
        let zswap =
            Zswap::new(ZswapConfig::new(4 << 20).device(Arc::new(MemoryDevice::new(PAGES)), PAGES));
        zswap.set_param("writethrough", "auto").unwrap();
        assert_eq!(zswap.params().writethrough(), Writethrough::Auto);
        assert_eq!(zswap.params().get("writethrough").unwrap(), "auto");
        let group = zswap.new_group(PAGES);
        let pool = || zswap.pool().total_size();
        let through = || zswap.stats().get("writethrough_pages");
        let (max, threshold) = ((4u64 << 20) / 5, (4u64 << 20) / 5 * 9 / 10);
        let mut offset = 0;
        let mut store = |then: &dyn Fn(&FolioLock)| {
            let folio = group.lock_folio(offset, 0);
            group.store(&folio, &random_page(offset as u64)).unwrap();
            then(&folio);
            offset += 1;
        };
        while pool() + PAGE_SIZE as u64 <= threshold {
            store(&|_| {});
        }
        assert_eq!(through(), 0, "written through below the threshold");
        // Above the threshold, each store pushes the coldest page out to the disk.
        let push_out = |_: &FolioLock| {
            while pool() + PAGE_SIZE as u64 >= max {
                assert!(group.shrink(1).written > 0, "nothing left the pool");
            }
        };
        for _ in 0..2 * EPOCH_PAGES {
            store(&push_out);
        }
        let before = through();
        for _ in 0..EPOCH_PAGES {
            store(&push_out);
        }
        assert_eq!(
            through() - before,
            EPOCH_PAGES,
            "not every store written through while the pool's pages went to disk"
        );
        assert!(pool() > threshold);
        // Still above the threshold, but each page leaves before the pool pushes it out.
        let invalidate = |folio: &FolioLock| group.invalidate(folio);
        for _ in 0..2 * EPOCH_PAGES {
            store(&invalidate);
        }
        let before = through();
        for _ in 0..EPOCH_PAGES {
            store(&invalidate);
        }
        assert!(pool() > threshold);
        assert_eq!(
            through(),
            before,
            "written through while no page went to the disk"
        );
        zswap.set_param("writethrough", "N").unwrap();
        let before = through();
        store(&|_| {});
        assert_eq!(through(), before);
        assert!(zswap.set_param("writethrough", "sometimes").is_err());
    }

    /// A folio of `nr` pages of compressible text, each page its own (the page's number in
    /// it), with zero pages and random ones among them.
    fn mixed_folio(nr: usize) -> Vec<u8> {
        (0..nr)
            .flat_map(|i| match i % 7 {
                3 => vec![0u8; PAGE_SIZE],
                5 => random_page(i as u64),
                _ => {
                    let mut p = text_page();
                    p[..8].copy_from_slice(&(i as u64).to_le_bytes());
                    p
                }
            })
            .collect()
    }

    /// With `compress_threads` above 1, a 2 MiB folio is compressed in parts by more than one
    /// thread, and stored exactly as one thread stores it: the same objects, the same
    /// counters, every byte back.
    #[test]
    fn a_large_folio_compressed_in_parts_is_stored_as_one_thread_stores_it() {
        let data = mixed_folio(512);
        let store = |threads: &str| {
            let zswap = Zswap::new(
                ZswapConfig::new(64 << 20).device(Arc::new(MemoryDevice::new(1024)), 1024),
            );
            zswap.set_param("compress_threads", threads).unwrap();
            let group = zswap.new_group(1024);
            let folio = group.lock_folio(512, 9);
            group.store(&folio, &data).unwrap();
            let mut back = vec![1u8; data.len()];
            group.load(&folio, &mut back).unwrap();
            assert!(back == data, "a byte came back wrong");
            (zswap.stats(), zswap.pool().stored_bytes())
        };
        let (one, one_bytes) = store("1");
        let (parts, parts_bytes) = store("8");
        assert_eq!(one.get("folios_compressed_in_parts"), 0);
        if super::parallel::helper_threads() > 0 {
            assert_eq!(parts.get("folios_compressed_in_parts"), 1);
        }
        assert_eq!(one_bytes, parts_bytes);
        for stat in [
            "stored_pages",
            "stored_incompressible_pages",
            "same_filled_pages",
        ] {
            assert_eq!(one.get(stat), parts.get(stat), "{stat}");
        }
        assert!(Zswap::new(ZswapConfig::new(1 << 20))
            .set_param("compress_threads", "0")
            .is_err());
    }

    /// All or nothing across parts: a page that may not be stored in a part other than the
    /// first (incompressible, with writeback off) refuses the whole folio; the objects every
    /// part made are freed, and the folio counts as one rejection, however many parts failed.
    #[test]
    fn a_failure_in_any_part_stores_nothing_of_the_folio() {
        let zswap = Zswap::new(ZswapConfig::new(64 << 20));
        zswap.set_param("compress_threads", "8").unwrap();
        let group = zswap.new_group(1024);
        group.set_writeback_enabled(false);
        let mut data: Vec<u8> = (0..512).flat_map(|_| text_page()).collect();
        for page in [300, 500] {
            data[page * PAGE_SIZE..][..PAGE_SIZE].copy_from_slice(&random_page(page as u64));
        }
        let folio = group.lock_folio(0, 9);
        assert!(matches!(
            group.store(&folio, &data),
            Err(super::StoreError::CompressPoor(300))
        ));
        let stats = zswap.stats();
        assert_eq!(stats.get("reject_compress_poor"), 1);
        assert_eq!(stats.get("stored_pages"), 0);
        assert_eq!(zswap.pool().nr_objects(), 0, "a part's objects were kept");
        assert!(folio
            .offsets()
            .all(|o| group.peek(o).kind == crate::swap::Kind::Empty));
    }

    #[test]
    fn stored_length_counts_each_stored_object() {
        let zswap =
            Zswap::new(ZswapConfig::new(64 << 20).device(Arc::new(MemoryDevice::new(64)), 64));
        let group = zswap.new_group(16);
        // Page 0 zero, page 1 compressible text, pages 2-3 random (stored as-is).
        let data = [
            vec![0u8; PAGE_SIZE],
            text_page(),
            random_page(2),
            random_page(3),
        ]
        .concat();
        let folio = group.lock_folio(0, 2);
        group.store(&folio, &data).unwrap();
        let len = group.stored_length(&folio);
        assert!(
            len > 2 * PAGE_SIZE as u64 && len < 3 * PAGE_SIZE as u64,
            "{len}"
        );
        drop(folio);
        let page = group.lock_folio(8, 0);
        assert_eq!(group.stored_length(&page), 0, "nothing stored there");
    }

    /// `swap_out_unless_poor` refuses a folio none of whose pages compress when the caller
    /// says so: nothing is stored at any of its offsets and nothing is written, though
    /// writeback is on. Not refused, it is stored as-is, as `swap_out` stores it, and counts
    /// as no rejection. A folio with a page that compresses is stored, the rest as-is, and
    /// the caller is not asked.
    #[test]
    fn swap_out_unless_poor_refuses_what_does_not_compress() {
        use super::{StoreError, SwapOutResult};
        let zswap =
            Zswap::new(ZswapConfig::new(64 << 20).device(Arc::new(MemoryDevice::new(64)), 64));
        let group = zswap.new_group(16);
        // A zero page and three random ones.
        let random = [
            vec![0u8; PAGE_SIZE],
            random_page(4),
            random_page(5),
            random_page(6),
        ]
        .concat();
        let folio = group.lock_folio(0, 2);
        let asked = std::cell::Cell::new(0);
        let asked = &asked;
        let refuse = |answer: bool| {
            move || {
                asked.set(asked.get() + 1);
                answer
            }
        };
        assert_eq!(
            group.swap_out_unless_poor(&folio, &random, &refuse(true)),
            Err(StoreError::CompressPoor(1))
        );
        let stats = zswap.stats();
        assert_eq!(stats.get("reject_compress_poor"), 1);
        assert_eq!(stats.get("pswpout") + stats.get("stored_pages"), 0);
        for o in 0..4 {
            assert_eq!(group.peek(o).kind, crate::swap::Kind::Empty, "page {o}");
        }
        // Not refused (a probe): stored as-is, and not counted as a rejection.
        assert_eq!(
            group.swap_out_unless_poor(&folio, &random, &refuse(false)),
            Ok(SwapOutResult::Stored)
        );
        let stats = zswap.stats();
        assert_eq!(stats.get("stored_incompressible_pages"), 3);
        assert_eq!(stats.get("reject_compress_poor"), 1);
        assert_eq!(asked.get(), 2);

        // A folio with a page that compresses is stored without asking.
        drop(folio);
        let mixed = [text_page(), random_page(7)].concat();
        let folio = group.lock_folio(4, 1);
        assert_eq!(
            group.swap_out_unless_poor(&folio, &mixed, &refuse(true)),
            Ok(SwapOutResult::Stored)
        );
        assert_eq!(zswap.stats().get("stored_incompressible_pages"), 4);
        assert_eq!(asked.get(), 2);
    }

    #[test]
    fn same_filled_finds_repeated_words_only() {
        assert_eq!(same_filled(&[0u8; 4096]), Some(0));
        let page: Vec<u8> = std::iter::repeat_n([1u8, 2, 3, 4], 1024)
            .flatten()
            .collect();
        assert_eq!(same_filled(&page), Some(u32::from_ne_bytes([1, 2, 3, 4])));
        let mut page = vec![0u8; 4096];
        page[4095] = 1;
        assert_eq!(same_filled(&page), None);
    }
}
