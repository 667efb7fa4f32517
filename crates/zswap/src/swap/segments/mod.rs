//! Segments: written-back pages kept as they are in the pool, compressed, packed into
//! segments of up to [`SEGMENT_BYTES`], log-structured (notes/tiers.md).
//!
//! - **One write a batch.** Writeback hands over the objects of many folios at once; they are
//!   sealed (seal.rs) and packed into segments, and each segment is one write to the device
//!   (a run of swap-file pages, or one value in a Redis Cluster).
//! - **The swap slot stays the name.** Each written-back page still has its swap slot (the
//!   swap cache keeps it; `pswpout` and `written_back_pages` keep their meaning); this table
//!   maps the slot to its place: (segment, offset, length, codec). Moving an object rewrites
//!   only its place here, never the swap cache.
//! - **Compaction.** A freed object lowers its segment's live share; a segment under
//!   [`COMPACT_BELOW_PERCENT`] is queued, and `compact` rewrites its live objects into a new
//!   segment and deletes it. A segment whose objects are all freed is deleted at once.
//! - **Reads pin.** A reader takes its places under the lock and pins their segments; a
//!   segment emptied or compacted meanwhile is deleted by its last reader.
//! - **Tags stay in memory.** Each sealed object's tag is kept in the table beside its place
//!   (16 bytes a page written back): on the device an object is exactly as long as it was
//!   handed to the log, so a segment never takes more pages than the pages it holds, and a slot map of
//!   the device's size always has room.
//!
//! Lock order: the table lock is a leaf; device I/O never happens under it.

mod device;
mod seal;
#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use parking_lot::Mutex;

pub use device::{PagedSegments, SegmentAddr, SegmentDevice, SegmentRead};
pub use seal::{SealedAt, Sealer, TAG_BYTES};

use crate::stats::Stats;
use crate::swap::device::DeviceError;
use crate::swap::slots::SwapSlot;
use crate::PAGE_SIZE;

/// The most bytes of one segment: one write, one round trip.
pub const SEGMENT_BYTES: usize = 64 << 10;
/// A segment whose live bytes fall under this share of it is compacted.
pub const COMPACT_BELOW_PERCENT: u64 = 50;

/// One page's data as the pool holds it: compressed with `codec`, or raw when `bytes` is a
/// whole page.
#[derive(Debug, Clone, Copy)]
pub struct Object<'a> {
    /// The compressor's index (meaningless for a raw page).
    pub codec: u8,
    /// The compressed bytes, or the page itself.
    pub bytes: &'a [u8],
}

/// Why objects could not be read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentReadError {
    /// The device failed the read.
    Device,
    /// The object failed authentication: changed, moved or replayed on the device.
    Unauthenticated,
    /// The caller refused the object's bytes (they did not decompress into a page).
    Corrupt,
}

/// A read of objects that failed at the `index`-th slot asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadFail {
    /// Which of the slots asked for.
    pub index: usize,
    /// What went wrong.
    pub kind: SegmentReadError,
}

/// What the segment log did, for the statistics.
#[derive(Debug, Default)]
pub struct SegmentStats {
    /// Segments written (writeback and compaction).
    pub segments_written: AtomicU64,
    /// Bytes handed to the device in segments, padding included.
    pub bytes_written: AtomicU64,
    /// Segments compacted (their live objects rewritten, the segment deleted).
    pub compactions: AtomicU64,
    /// Objects moved by compaction.
    pub compacted_objects: AtomicU64,
    /// Objects that failed authentication on a read.
    pub auth_fail: AtomicU64,
    /// Bytes read from the device for faults and compaction.
    pub bytes_read: AtomicU64,
}

/// Where a slot's object is. `segment == NONE`: the slot holds nothing here.
#[derive(Debug, Clone, Copy)]
struct Place {
    segment: u32,
    offset: u32,
    /// Bytes of the object before sealing (PAGE_SIZE: raw).
    len: u16,
    codec: u8,
    /// The object's index in its segment (part of its nonce).
    index: u16,
}

const NONE: u32 = u32::MAX;
const EMPTY: Place = Place {
    segment: NONE,
    offset: 0,
    len: 0,
    codec: 0,
    index: 0,
};

#[derive(Debug)]
struct Segment {
    id: u64,
    addr: SegmentAddr,
    bytes: u32,
    live_bytes: u32,
    live: u32,
    /// Readers in the middle of a read from it.
    pins: u32,
    /// Its objects' slots, by index.
    slots: Vec<SwapSlot>,
    /// Waiting in the compaction queue.
    queued: bool,
    /// All its objects are freed or moved: deleted by the last reader.
    dead: bool,
}

#[derive(Debug, Default)]
struct Table {
    /// By swap slot; grown to the highest slot used.
    places: Vec<Place>,
    /// By swap slot, when objects are sealed: each object's authentication tag.
    tags: Vec<[u8; TAG_BYTES]>,
    /// By segment number (an index, reused); the id inside is never reused.
    segments: Vec<Option<Segment>>,
    free_numbers: Vec<u32>,
    compact_queue: Vec<u32>,
    /// Bytes of the live segments' slot lists.
    slot_list_bytes: u64,
}

impl Table {
    /// Bytes the table takes: what its owner is charged for.
    fn bytes(&self) -> u64 {
        (self.places.capacity() * std::mem::size_of::<Place>()
            + self.tags.capacity() * TAG_BYTES
            + self.segments.capacity() * std::mem::size_of::<Option<Segment>>()
            + (self.free_numbers.capacity() + self.compact_queue.capacity()) * 4) as u64
            + self.slot_list_bytes
    }
}

/// The segment log of one swap space: the table of places, the segments, the device they
/// are on and the run's key.
#[derive(Debug)]
pub struct SegmentLog {
    device: Arc<dyn SegmentDevice>,
    sealer: Option<Sealer>,
    table: Mutex<Table>,
    /// `Table::bytes` as of its last change, read without the lock.
    table_bytes: AtomicU64,
    next_id: AtomicU64,
    stats: SegmentStats,
}

/// One object to pack: its slot, its bytes, and for compaction the place it must still have
/// for the move to count.
struct Packed<'a> {
    slot: SwapSlot,
    object: Object<'a>,
    moved_from: Option<(u32, u32)>,
}

thread_local! {
    static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `scratch::touch_thread_locals`, for this module's.
pub(crate) fn touch_thread_locals() {
    BUF.with(|_| ());
    device::touch_thread_locals();
}

/// Bytes this thread keeps for segments: the sealed batch (whose buffer a read's ranges
/// reuse) and its page-aligned copy, each up to a batch or a folio's objects. They are
/// kept for the thread's life, and only grow: its owner charges them (a region, as it
/// charges its threads' other scratch).
pub fn thread_scratch_bytes() -> u64 {
    let buf = BUF
        .try_with(|b| b.try_borrow().map_or(0, |b| b.capacity()))
        .unwrap_or(0);
    (buf + device::bounce_bytes()) as u64
}

fn is_enospc(e: &DeviceError) -> bool {
    matches!(e, DeviceError::Io(e) if e.raw_os_error() == Some(libc::ENOSPC))
}

impl SegmentLog {
    /// A log on `device`, sealing every object when `encrypt`.
    pub fn new(device: Arc<dyn SegmentDevice>, encrypt: bool) -> Self {
        SegmentLog {
            device,
            sealer: encrypt.then(Sealer::new),
            table: Mutex::new(Table::default()),
            table_bytes: AtomicU64::new(0),
            next_id: AtomicU64::new(0),
            stats: SegmentStats::default(),
        }
    }

    /// The device the segments are on.
    pub fn device(&self) -> &Arc<dyn SegmentDevice> {
        &self.device
    }

    /// Whether objects are sealed (encrypted and authenticated).
    pub fn encrypts(&self) -> bool {
        self.sealer.is_some()
    }

    /// What the log did.
    pub fn stats(&self) -> &SegmentStats {
        &self.stats
    }

    /// Bytes of memory the table of places, tags and segments takes (a page written back
    /// costs about 32 bytes here), and what the device holds (`SegmentDevice::memory_bytes`):
    /// charged to the region that owns the log.
    pub fn metadata_bytes(&self) -> u64 {
        self.table_bytes.load(Relaxed) + self.device.memory_bytes()
    }

    /// Segments held now.
    pub fn nr_segments(&self) -> u64 {
        let t = self.table.lock();
        (t.segments.len() - t.free_numbers.len()) as u64
    }

    /// Bytes of segments held now, and the live bytes in them.
    pub fn held_bytes(&self) -> (u64, u64) {
        let t = self.table.lock();
        t.segments.iter().flatten().fold((0, 0), |(b, l), s| {
            (b + u64::from(s.bytes), l + u64::from(s.live_bytes))
        })
    }

    /// Check the table against itself (tests; needs a quiet log): every segment's live
    /// count and bytes are what the places in it add up to, nobody holds a pin, and no
    /// segment is kept with nothing live. Returns the slots that hold an object.
    pub fn audit(&self) -> Result<u64, String> {
        let t = self.table.lock();
        let mut live = vec![(0u32, 0u32); t.segments.len()];
        let mut held = 0u64;
        for (slot, p) in t.places.iter().enumerate() {
            if p.segment == NONE {
                continue;
            }
            held += 1;
            let Some(Some(seg)) = t.segments.get(p.segment as usize) else {
                return Err(format!(
                    "slot {slot} is in segment {} that is gone",
                    p.segment
                ));
            };
            if seg.slots.get(usize::from(p.index)) != Some(&SwapSlot(slot as u32)) {
                return Err(format!(
                    "slot {slot} is not object {} of its segment",
                    p.index
                ));
            }
            let l = &mut live[p.segment as usize];
            l.0 += 1;
            l.1 += u32::from(p.len);
        }
        for (n, seg) in t.segments.iter().enumerate() {
            let Some(seg) = seg else { continue };
            if (seg.live, seg.live_bytes) != live[n] {
                return Err(format!(
                    "segment {n} counts {} live objects of {} bytes, its places {:?}",
                    seg.live, seg.live_bytes, live[n]
                ));
            }
            if seg.pins != 0 || seg.dead || seg.live == 0 {
                return Err(format!("segment {n}: {seg:?} (pinned, dead or empty)"));
            }
        }
        Ok(held)
    }

    /// Write `objects` as the data of `slots` (allocated by the caller, holding nothing here
    /// yet), packed into as few segments as fit. All or nothing: on an error no slot holds
    /// anything here.
    pub fn append(&self, slots: &[SwapSlot], objects: &[Object]) -> Result<(), DeviceError> {
        assert_eq!(slots.len(), objects.len());
        let packed: Vec<Packed> = slots
            .iter()
            .zip(objects)
            .map(|(&slot, &object)| Packed {
                slot,
                object,
                moved_from: None,
            })
            .collect();
        self.write_packed(&packed).inspect_err(|_| {
            for &slot in slots {
                self.free(slot);
            }
        })
    }

    /// Pack and write, all the segments of the batch in one `put_all`; on an error, what was
    /// committed stays (the caller frees it).
    fn write_packed(&self, packed: &[Packed]) -> Result<(), DeviceError> {
        let mut cuts = Vec::new();
        let mut start = 0;
        while start < packed.len() {
            let mut end = start;
            let mut bytes = 0;
            while end < packed.len()
                && (end == start || bytes + packed[end].object.bytes.len() <= SEGMENT_BYTES)
                && end - start < usize::from(u16::MAX)
            {
                bytes += packed[end].object.bytes.len();
                end += 1;
            }
            cuts.push(start..end);
            start = end;
        }
        match self.write_segments(packed, &cuts) {
            Err(e) if is_enospc(&e) => {
                for cut in cuts {
                    self.write_split(&packed[cut])?;
                }
                Ok(())
            }
            other => other,
        }
    }

    /// Write one segment; where the device has no room for it in one piece (its free space
    /// in pieces), write it as two halves, down to single objects, which always fit where
    /// a slot was free.
    fn write_split(&self, packed: &[Packed]) -> Result<(), DeviceError> {
        let whole = std::iter::once(0..packed.len()).collect::<Vec<_>>();
        match self.write_segments(packed, &whole) {
            Err(e) if is_enospc(&e) && packed.len() > 1 => {
                let (a, b) = packed.split_at(packed.len() / 2);
                self.write_split(a)?;
                self.write_split(b)
            }
            other => other,
        }
    }

    /// Seal the objects of each cut of `packed` into a segment, write them all, and record
    /// where each object now is.
    fn write_segments(
        &self,
        packed: &[Packed],
        cuts: &[std::ops::Range<usize>],
    ) -> Result<(), DeviceError> {
        let ids: Vec<u64> = cuts
            .iter()
            .map(|_| self.next_id.fetch_add(1, Relaxed))
            .collect();
        let mut tags = Vec::new();
        let (addrs, lens) = crate::scratch::with(&BUF, Vec::new, |buf| {
            let buf = &mut *buf.borrow_mut();
            buf.clear();
            let mut bounds = Vec::with_capacity(cuts.len());
            for (cut, &id) in cuts.iter().zip(&ids) {
                let first = buf.len();
                for (index, p) in packed[cut.clone()].iter().enumerate() {
                    let at = buf.len();
                    buf.extend_from_slice(p.object.bytes);
                    if let Some(sealer) = &self.sealer {
                        let sealed_at = SealedAt {
                            segment: id,
                            index: index as u32,
                            slot: p.slot,
                        };
                        tags.push(sealer.seal(sealed_at, &mut buf[at..]));
                    }
                }
                bounds.push(first..buf.len());
            }
            let segments: Vec<(u64, &[u8])> = ids
                .iter()
                .zip(&bounds)
                .map(|(&id, r)| (id, &buf[r.clone()]))
                .collect();
            let lens: Vec<usize> = bounds.iter().map(|r| r.len()).collect();
            self.device.put_all(&segments).map(|addrs| (addrs, lens))
        })?;
        for (k, cut) in cuts.iter().enumerate() {
            Stats::inc(&self.stats.segments_written);
            Stats::add(
                &self.stats.bytes_written,
                lens[k].next_multiple_of(PAGE_SIZE) as u64,
            );
            let tags = match self.sealer {
                Some(_) => &tags[cut.clone()],
                None => &[][..],
            };
            self.commit(&packed[cut.clone()], ids[k], addrs[k], lens[k], tags);
        }
        Ok(())
    }

    /// A segment is on the device: record it and where each of its objects is (a moved
    /// object only if its place did not change meanwhile).
    fn commit(
        &self,
        packed: &[Packed],
        id: u64,
        addr: SegmentAddr,
        bytes: usize,
        tags: &[[u8; TAG_BYTES]],
    ) {
        let mut t = self.table.lock();
        let number = match t.free_numbers.pop() {
            Some(n) => n,
            None => {
                t.segments.push(None);
                t.segments.len() as u32 - 1
            }
        };
        let mut seg = Segment {
            id,
            addr,
            bytes: bytes as u32,
            live_bytes: 0,
            live: 0,
            pins: 0,
            slots: Vec::with_capacity(packed.len()),
            queued: false,
            dead: false,
        };
        let mut offset = 0u32;
        let mut vacated = Vec::new();
        for (index, p) in packed.iter().enumerate() {
            let len = p.object.bytes.len() as u32;
            seg.slots.push(p.slot);
            let i = p.slot.0 as usize;
            if t.places.len() <= i {
                t.places.resize(i + 1, EMPTY);
            }
            let current = t.places[i];
            let takes = match p.moved_from {
                None => {
                    debug_assert_eq!(current.segment, NONE, "slot {} written twice", p.slot.0);
                    true
                }
                // A move counts only if the object was not freed (or freed and its slot
                // written again) while it was being copied.
                Some((from, at)) => current.segment == from && current.offset == at,
            };
            if takes {
                if let Some(from) = p.moved_from {
                    vacated.push((from.0, u32::from(current.len)));
                }
                t.places[i] = Place {
                    segment: number,
                    offset,
                    len: len as u16,
                    codec: p.object.codec,
                    index: index as u16,
                };
                if let Some(&tag) = tags.get(index) {
                    if t.tags.len() <= i {
                        t.tags.resize(i + 1, [0; TAG_BYTES]);
                    }
                    t.tags[i] = tag;
                }
                seg.live += 1;
                seg.live_bytes += len;
            }
            offset += len;
        }
        let empty = seg.live == 0;
        t.slot_list_bytes += (seg.slots.capacity() * 4) as u64;
        t.segments[number as usize] = Some(seg);
        let mut deletes = Vec::new();
        for (from, len) in vacated {
            deletes.extend(Self::drop_object(&mut t, from, len));
        }
        if empty {
            deletes.extend(Self::retire(&mut t, number));
        }
        self.table_bytes.store(t.bytes(), Relaxed);
        drop(t);
        self.delete_all(deletes);
    }

    /// The slot's object is freed: lower its segment's live share; delete a segment that has
    /// nothing live, queue one under the compaction threshold.
    pub fn free(&self, slot: SwapSlot) {
        let mut t = self.table.lock();
        let Some(place) = t.places.get(slot.0 as usize).copied() else {
            return;
        };
        if place.segment == NONE {
            return;
        }
        t.places[slot.0 as usize] = EMPTY;
        let delete = Self::drop_object(&mut t, place.segment, u32::from(place.len));
        self.table_bytes.store(t.bytes(), Relaxed);
        drop(t);
        self.delete_all(delete);
    }

    /// One live object of segment `number` left it (freed or moved).
    fn drop_object(t: &mut Table, number: u32, len: u32) -> Option<(u64, SegmentAddr)> {
        let seg = t.segments[number as usize]
            .as_mut()
            .expect("a place names a segment that exists");
        seg.live -= 1;
        seg.live_bytes -= len;
        if seg.live == 0 {
            return Self::retire(t, number);
        }
        if !seg.queued
            && u64::from(seg.live_bytes) * 100 < u64::from(seg.bytes) * COMPACT_BELOW_PERCENT
        {
            seg.queued = true;
            t.compact_queue.push(number);
        }
        None
    }

    /// Segment `number` holds nothing live: forget it now, or leave it to its last reader.
    /// Returns what to delete from the device.
    fn retire(t: &mut Table, number: u32) -> Option<(u64, SegmentAddr)> {
        let seg = t.segments[number as usize].as_mut().expect("exists");
        seg.dead = true;
        if seg.pins > 0 {
            return None;
        }
        let seg = t.segments[number as usize].take().expect("exists");
        t.slot_list_bytes -= (seg.slots.capacity() * 4) as u64;
        t.free_numbers.push(number);
        Some((seg.id, seg.addr))
    }

    fn delete_all(&self, deletes: impl IntoIterator<Item = (u64, SegmentAddr)>) {
        for (id, addr) in deletes {
            self.device.delete(id, addr);
        }
    }

    fn unpin(&self, numbers: &[u32]) {
        let mut t = self.table.lock();
        let mut deletes = Vec::new();
        for &n in numbers {
            let seg = t.segments[n as usize].as_mut().expect("pinned");
            seg.pins -= 1;
            if seg.pins == 0 && seg.dead {
                deletes.extend(Self::retire(&mut t, n));
            }
        }
        drop(t);
        self.delete_all(deletes);
    }

    /// Read the objects of `slots`, handing each to `each(i, codec, bytes)` (a raw page when
    /// `bytes` is a whole page), which returns whether it took them. Neighbouring objects of
    /// one segment are one range; all the ranges are one request to the device (one read
    /// where they are back to back on the file). Stops at the first failure.
    pub fn read(
        &self,
        slots: &[SwapSlot],
        mut each: impl FnMut(usize, u8, &[u8]) -> bool,
    ) -> Result<(), ReadFail> {
        let (places, tags, ids, pinned) = {
            let mut t = self.table.lock();
            let places: Vec<Place> = slots
                .iter()
                .map(|s| t.places.get(s.0 as usize).copied().unwrap_or(EMPTY))
                .collect();
            let tags: Vec<[u8; TAG_BYTES]> = match self.sealer {
                Some(_) => slots.iter().map(|s| t.tags[s.0 as usize]).collect(),
                None => Vec::new(),
            };
            let mut pinned: Vec<u32> = places.iter().map(|p| p.segment).collect();
            pinned.sort_unstable();
            pinned.dedup();
            assert!(
                pinned.last() != Some(&NONE),
                "a read of a slot that holds nothing in the segment log"
            );
            let mut ids = Vec::with_capacity(pinned.len());
            for &n in &pinned {
                let seg = t.segments[n as usize].as_mut().expect("a place's segment");
                seg.pins += 1;
                ids.push((n, seg.id, seg.addr));
            }
            (places, tags, ids, pinned)
        };
        // Runs: following objects of the same segment, back to back; one range read each,
        // all in one request to the device.
        let mut runs: Vec<(std::ops::Range<usize>, usize, usize)> = Vec::new();
        let mut i = 0;
        while i < places.len() {
            let first = places[i];
            let mut end = i + 1;
            let mut run_end = first.offset as usize + usize::from(first.len);
            while end < places.len()
                && places[end].segment == first.segment
                && places[end].offset as usize == run_end
            {
                run_end += usize::from(places[end].len);
                end += 1;
            }
            runs.push((
                i..end,
                first.offset as usize,
                run_end - first.offset as usize,
            ));
            i = end;
        }
        let id_of = |segment: u32| {
            let &(_, id, addr) = ids.iter().find(|(n, _, _)| *n == segment).expect("pinned");
            (id, addr)
        };
        let result = crate::scratch::with(&BUF, Vec::new, |buf| {
            let buf = &mut *buf.borrow_mut();
            buf.clear();
            buf.resize(runs.iter().map(|r| r.2).sum(), 0);
            let mut reads = Vec::with_capacity(runs.len());
            let mut rest = &mut buf[..];
            for (objects, offset, len) in &runs {
                let (out, after) = rest.split_at_mut(*len);
                rest = after;
                let (id, addr) = id_of(places[objects.start].segment);
                reads.push(SegmentRead {
                    id,
                    addr,
                    offset: *offset,
                    out,
                });
            }
            let read = self.device.get_all(&mut reads);
            drop(reads);
            // Runs before a failed read are done: their objects are handed over first.
            let done = match &read {
                Ok(()) => runs.len(),
                Err((k, _)) => *k,
            };
            let mut at = 0;
            for (objects, _, len) in &runs[..done] {
                let (id, _) = id_of(places[objects.start].segment);
                Stats::add(&self.stats.bytes_read, *len as u64);
                for k in objects.clone() {
                    let len = usize::from(places[k].len);
                    let object = &mut buf[at..at + len];
                    at += len;
                    if let Some(sealer) = &self.sealer {
                        let sealed_at = SealedAt {
                            segment: id,
                            index: u32::from(places[k].index),
                            slot: slots[k],
                        };
                        if !sealer.open(sealed_at, object, &tags[k]) {
                            Stats::inc(&self.stats.auth_fail);
                            return Err(ReadFail {
                                index: k,
                                kind: SegmentReadError::Unauthenticated,
                            });
                        }
                    }
                    if !each(k, places[k].codec, object) {
                        return Err(ReadFail {
                            index: k,
                            kind: SegmentReadError::Corrupt,
                        });
                    }
                }
            }
            match read {
                Ok(()) => Ok(()),
                Err((k, _)) => Err(ReadFail {
                    index: runs[k].0.start,
                    kind: SegmentReadError::Device,
                }),
            }
        });
        self.unpin(&pinned);
        result
    }

    /// Compact one queued segment, if one is still under the threshold: rewrite its live
    /// objects into a new segment and delete it. Returns whether a segment was compacted.
    pub fn compact(&self) -> Result<bool, DeviceError> {
        let (number, id, addr, bytes, live) = {
            let mut t = self.table.lock();
            loop {
                let Some(n) = t.compact_queue.pop() else {
                    return Ok(false);
                };
                let Some(seg) = t.segments[n as usize].as_mut() else {
                    continue;
                };
                seg.queued = false;
                if seg.dead
                    || u64::from(seg.live_bytes) * 100
                        >= u64::from(seg.bytes) * COMPACT_BELOW_PERCENT
                {
                    continue;
                }
                seg.pins += 1;
                let (id, addr, bytes) = (seg.id, seg.addr, seg.bytes);
                let slots = seg.slots.clone();
                // The live objects: those whose slot's place is still in this segment.
                let live: Vec<(SwapSlot, Place, [u8; TAG_BYTES])> = slots
                    .into_iter()
                    .filter_map(|s| {
                        let p = t.places[s.0 as usize];
                        let tag = t.tags.get(s.0 as usize).copied().unwrap_or_default();
                        (p.segment == n).then_some((s, p, tag))
                    })
                    .collect();
                break (n, id, addr, bytes, live);
            }
        };
        let mut whole = vec![0u8; bytes as usize];
        let read = self.device.get(id, addr, 0, &mut whole);
        if let Err(e) = read {
            self.unpin(&[number]);
            return Err(e);
        }
        Stats::add(&self.stats.bytes_read, u64::from(bytes));
        let mut packed = Vec::with_capacity(live.len());
        for &(slot, place, tag) in &live {
            let at = place.offset as usize;
            let len = usize::from(place.len);
            let object = &mut whole[at..at + len];
            if let Some(sealer) = &self.sealer {
                let sealed_at = SealedAt {
                    segment: id,
                    index: u32::from(place.index),
                    slot,
                };
                if !sealer.open(sealed_at, object, &tag) {
                    // Left where it is: its read fails and poisons the page.
                    Stats::inc(&self.stats.auth_fail);
                    continue;
                }
            }
            packed.push((slot, place, at, len));
        }
        let packed: Vec<Packed> = packed
            .iter()
            .map(|&(slot, place, at, len)| Packed {
                slot,
                object: Object {
                    codec: place.codec,
                    bytes: &whole[at..at + len],
                },
                moved_from: Some((number, place.offset)),
            })
            .collect();
        let result = self.write_packed(&packed);
        self.unpin(&[number]);
        result?;
        Stats::inc(&self.stats.compactions);
        Stats::add(&self.stats.compacted_objects, packed.len() as u64);
        Ok(true)
    }
}
