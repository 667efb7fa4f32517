//! Where sealed segments are kept: the [`SegmentDevice`] trait, and [`PagedSegments`], the
//! segments of the swap file (any [`BackingDevice`]), each in a run of its pages.
//!
//! A device stores whole segments by id and reads any byte range of one back: a fault reads
//! only the objects it needs, a compaction the whole segment.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::swap::device::{BackingDevice, DeviceError};
use crate::swap::file::page_aligned;
use crate::swap::slots::{SlotAllocator, SwapSlot};
use crate::PAGE_SIZE;

/// Where a device put a segment: its own address, handed back on reads and on delete.
pub type SegmentAddr = u64;

/// A store of segments. `put` returns only once the segment is durable as the device
/// understands it (written to the file; acknowledged by a primary and a replica), so the
/// caller may then drop the memory copy of what it holds.
pub trait SegmentDevice: Send + Sync + std::fmt::Debug {
    /// Store segment `id` (`bytes`, at most [`super::SEGMENT_BYTES`]); returns its address.
    fn put(&self, id: u64, bytes: &[u8]) -> Result<SegmentAddr, DeviceError>;
    /// Store several segments, as one write or round trip where the device can; their
    /// addresses in order. All or nothing: on an error none of them is stored.
    fn put_all(&self, segments: &[(u64, &[u8])]) -> Result<Vec<SegmentAddr>, DeviceError> {
        put_each(self, segments)
    }
    /// Read `out.len()` bytes from `offset` of segment `id` at `addr`.
    fn get(
        &self,
        id: u64,
        addr: SegmentAddr,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), DeviceError>;
    /// Read several ranges, as one read or round trip where the device can. On an error,
    /// the index of the first read that failed (those before it are done).
    fn get_all(&self, reads: &mut [SegmentRead<'_>]) -> Result<(), (usize, DeviceError)> {
        for (k, r) in reads.iter_mut().enumerate() {
            self.get(r.id, r.addr, r.offset, r.out)
                .map_err(|e| (k, e))?;
        }
        Ok(())
    }
    /// Segment `id` holds nothing any more: give its storage back.
    fn delete(&self, id: u64, addr: SegmentAddr);
    /// Bytes of this process's memory the device holds beyond the caller's buffers (a
    /// client's connections, and its copies of what it sends and receives while it does):
    /// the log charges them with its table, as a region charges its metadata.
    fn memory_bytes(&self) -> u64 {
        0
    }
}

/// One range of a segment to read: `out.len()` bytes from `offset` of segment `id` at `addr`.
#[derive(Debug)]
pub struct SegmentRead<'a> {
    /// The segment.
    pub id: u64,
    /// Where the device put it.
    pub addr: SegmentAddr,
    /// The first byte to read.
    pub offset: usize,
    /// Where the bytes go.
    pub out: &'a mut [u8],
}

/// The most bytes `PagedSegments::get_all` joins into one read (a 2 MiB folio's objects at
/// 2:1): the bounce buffer a reader keeps.
const MAX_READ: usize = 1 << 20;
/// The most pages `PagedSegments::get_all` reads through between two ranges it joins.
const HOLE_PAGES: usize = 4;

/// `put_all` a segment at a time: all or nothing, the ones stored deleted on an error.
pub fn put_each<D: SegmentDevice + ?Sized>(
    device: &D,
    segments: &[(u64, &[u8])],
) -> Result<Vec<SegmentAddr>, DeviceError> {
    let mut addrs = Vec::with_capacity(segments.len());
    for &(id, bytes) in segments {
        match device.put(id, bytes) {
            Ok(addr) => addrs.push(addr),
            Err(e) => {
                for (&(id, _), &addr) in segments.iter().zip(&addrs) {
                    device.delete(id, addr);
                }
                return Err(e);
            }
        }
    }
    Ok(addrs)
}

/// Segments on a page-addressed device (the swap file): each segment in a run of pages
/// from its own slot map, written padded to whole pages (direct I/O writes whole pages),
/// read by the pages that cover the range asked for. An address is the run's first page,
/// with its length in pages above bit 32.
#[derive(Debug)]
pub struct PagedSegments {
    device: Arc<dyn BackingDevice>,
    pages: Mutex<SlotAllocator>,
    /// Punch freed runs out of the file (`swapon --discard`).
    discard: bool,
}

thread_local! {
    static BOUNCE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `scratch::touch_thread_locals`, for this module's.
pub(crate) fn touch_thread_locals() {
    BOUNCE.with(|_| ());
}

/// Bytes of this thread's bounce buffer.
pub(crate) fn bounce_bytes() -> usize {
    BOUNCE
        .try_with(|b| b.try_borrow().map_or(0, |b| b.capacity()))
        .unwrap_or(0)
}

impl PagedSegments {
    /// Segments on `device`, of `capacity_pages` pages.
    pub fn new(device: Arc<dyn BackingDevice>, capacity_pages: u32, discard: bool) -> Self {
        PagedSegments {
            device,
            pages: Mutex::new(SlotAllocator::new(capacity_pages)),
            discard,
        }
    }

    /// The page device underneath.
    pub fn device(&self) -> &Arc<dyn BackingDevice> {
        &self.device
    }

    /// Pages of the device that segments hold now.
    pub fn pages_used(&self) -> u32 {
        self.pages.lock().used()
    }
}

fn run_of(addr: SegmentAddr) -> (SwapSlot, u32) {
    (SwapSlot(addr as u32), (addr >> 32) as u32)
}

impl SegmentDevice for PagedSegments {
    fn put(&self, _id: u64, bytes: &[u8]) -> Result<SegmentAddr, DeviceError> {
        let pages = bytes.len().div_ceil(PAGE_SIZE).max(1) as u32;
        let first = {
            let mut map = self.pages.lock();
            // Runs come in powers of two: take one and give its tail back at once.
            let run = pages.next_power_of_two();
            let first = map
                .alloc(run)
                .ok_or_else(|| DeviceError::Io(std::io::Error::from_raw_os_error(libc::ENOSPC)))?;
            if run > pages {
                map.free(SwapSlot(first.0 + pages), run - pages);
            }
            first
        };
        let written = pages as usize * PAGE_SIZE;
        let result = crate::scratch::with(&BOUNCE, Vec::new, |buf| {
            let buf = &mut *buf.borrow_mut();
            let page_bytes = page_aligned(buf, written);
            page_bytes[..bytes.len()].copy_from_slice(bytes);
            page_bytes[bytes.len()..].fill(0);
            self.device.write(first, page_bytes)
        });
        if let Err(e) = result {
            self.pages.lock().free(first, pages);
            return Err(e);
        }
        Ok(u64::from(first.0) | u64::from(pages) << 32)
    }

    /// One run for all of them, each segment from a page boundary, one write.
    fn put_all(&self, segments: &[(u64, &[u8])]) -> Result<Vec<SegmentAddr>, DeviceError> {
        if segments.len() == 1 {
            return self.put(segments[0].0, segments[0].1).map(|a| vec![a]);
        }
        let pages_of = |b: &[u8]| b.len().div_ceil(PAGE_SIZE).max(1) as u32;
        let pages: u32 = segments.iter().map(|(_, b)| pages_of(b)).sum();
        let run = pages.next_power_of_two();
        let first = {
            let mut map = self.pages.lock();
            let Some(first) = (run <= crate::swap::slots::MAX_RUN)
                .then(|| map.alloc(run))
                .flatten()
            else {
                drop(map);
                // No run that long: a write each, where room may be found in pieces.
                return put_each(self, segments);
            };
            if run > pages {
                map.free(SwapSlot(first.0 + pages), run - pages);
            }
            first
        };
        let result = crate::scratch::with(&BOUNCE, Vec::new, |buf| {
            let buf = &mut *buf.borrow_mut();
            let all = page_aligned(buf, pages as usize * PAGE_SIZE);
            let mut at = 0;
            for (_, bytes) in segments {
                let n = pages_of(bytes) as usize * PAGE_SIZE;
                all[at..at + bytes.len()].copy_from_slice(bytes);
                all[at + bytes.len()..at + n].fill(0);
                at += n;
            }
            self.device.write(first, all)
        });
        if let Err(e) = result {
            self.pages.lock().free(first, pages);
            return Err(e);
        }
        let mut page = first.0;
        Ok(segments
            .iter()
            .map(|(_, bytes)| {
                let n = pages_of(bytes);
                let addr = u64::from(page) | u64::from(n) << 32;
                page += n;
                addr
            })
            .collect())
    }

    fn get(
        &self,
        _id: u64,
        addr: SegmentAddr,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), DeviceError> {
        let first_page = offset / PAGE_SIZE;
        let end_page = (offset + out.len()).div_ceil(PAGE_SIZE);
        let slot = SwapSlot(run_of(addr).0 .0 + first_page as u32);
        crate::scratch::with(&BOUNCE, Vec::new, |buf| {
            let buf = &mut *buf.borrow_mut();
            let pages = page_aligned(buf, (end_page - first_page) * PAGE_SIZE);
            self.device.read(slot, pages)?;
            let skip = offset - first_page * PAGE_SIZE;
            out.copy_from_slice(&pages[skip..skip + out.len()]);
            Ok(())
        })
    }

    /// Reads whose pages follow one another on the file, or nearly (a folio's segments,
    /// written in one batch, are back to back), are one read.
    fn get_all(&self, reads: &mut [SegmentRead<'_>]) -> Result<(), (usize, DeviceError)> {
        let pages_of = |r: &SegmentRead| {
            let run = run_of(r.addr).0 .0 as usize;
            let first = run + r.offset / PAGE_SIZE;
            (first, run + (r.offset + r.out.len()).div_ceil(PAGE_SIZE))
        };
        let mut i = 0;
        while i < reads.len() {
            let (first, mut end) = pages_of(&reads[i]);
            let mut j = i + 1;
            while j < reads.len() {
                let (f, e) = pages_of(&reads[j]);
                // The next read starts on the page this one ends on, or a short hole after it
                // (cheaper read through than read apart).
                if f + 1 < end
                    || f > end + HOLE_PAGES
                    || (e.max(end) - first) * PAGE_SIZE > MAX_READ
                {
                    break;
                }
                end = e.max(end);
                j += 1;
            }
            crate::scratch::with(&BOUNCE, Vec::new, |buf| {
                let buf = &mut *buf.borrow_mut();
                let pages = page_aligned(buf, (end - first) * PAGE_SIZE);
                self.device.read(SwapSlot(first as u32), pages)?;
                for r in &mut reads[i..j] {
                    let (f, _) = pages_of(r);
                    let at = (f - first) * PAGE_SIZE + r.offset % PAGE_SIZE;
                    let len = r.out.len();
                    r.out.copy_from_slice(&pages[at..at + len]);
                }
                Ok(())
            })
            .map_err(|e| (i, e))?;
            i = j;
        }
        Ok(())
    }

    fn delete(&self, _id: u64, addr: SegmentAddr) {
        let (first, pages) = run_of(addr);
        if self.discard {
            let _ = self.device.discard(first, pages);
        }
        self.pages.lock().free(first, pages);
    }
}
