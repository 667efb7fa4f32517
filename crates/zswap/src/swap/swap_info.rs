//! A backing device with its slot map: the kernel's `swap_info_struct`. Written-back pages
//! get slots here; a large folio gets contiguous slots when there are some, so it goes out in
//! one write. A freed slot is never read before it is written again, so its old bytes are
//! never seen.
//!
//! What is behind the slots is one of two stores:
//! - **pages**: each slot is a page of the device, written decompressed (the kernel's
//!   writeback);
//! - **segments**: each slot is an object in the segment log (segments/), written as the
//!   pool holds it, compressed, sealed and packed with the others of its batch.
//!
//! With discard on (the kernel's `swapon --discard`; off by default, as there), freed storage
//! is discarded (hole punching) a whole cluster at a time, once every slot of a cluster
//! written to is free (slots.rs): its storage goes back to the file system. Off, a freed
//! slot keeps its blocks for the next write: on `bench usemem` that write is then a plain
//! overwrite, where writing into a punched hole made the file system allocate blocks again
//! (and convert them at completion) on every reuse. Segments discard their own runs.

use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use super::device::{BackingDevice, DeviceError};
use super::segments::{Object, ReadFail, SegmentLog, SegmentReadError};
use super::slots::{SlotAllocator, SwapSlot};
use crate::PAGE_SIZE;

/// Why a write to the backing device did not happen.
#[derive(Debug, thiserror::Error)]
pub enum SwapWriteError {
    /// Every slot of the device is in use (the swap space is full).
    #[error("no free swap slot")]
    NoSlot,
    /// The device failed the write.
    #[error(transparent)]
    Device(#[from] DeviceError),
}

/// What holds the data of the slots.
#[derive(Debug)]
enum Store {
    /// A page of the device a slot.
    Pages(Arc<dyn BackingDevice>),
    /// An object in the segment log a slot.
    Segments(Box<SegmentLog>),
}

/// A backing device and the map of its slots in use: the kernel's `swap_info_struct`.
#[derive(Debug)]
pub struct SwapInfo {
    store: Store,
    slots: Mutex<SlotAllocator>,
    /// Give wholly free clusters' storage back (`swapon --discard`).
    discard: bool,
    /// Notified when a discarded cluster is given back: a write that found no free slot
    /// while clusters were being discarded waits for them.
    discarded: Condvar,
}

impl SwapInfo {
    /// A swap space of `capacity_pages` slots on `device`, all free; `discard` gives wholly
    /// free clusters' storage back to the file system (`swapon --discard`).
    pub fn new(device: Arc<dyn BackingDevice>, capacity_pages: u32, discard: bool) -> Self {
        SwapInfo {
            store: Store::Pages(device),
            slots: Mutex::new(SlotAllocator::new(capacity_pages)),
            discard,
            discarded: Condvar::new(),
        }
    }

    /// A swap space of `capacity_pages` slots whose data is in the segment `log`.
    pub fn with_segments(log: SegmentLog, capacity_pages: u32) -> Self {
        SwapInfo {
            store: Store::Segments(Box::new(log)),
            slots: Mutex::new(SlotAllocator::new(capacity_pages)),
            discard: false,
            discarded: Condvar::new(),
        }
    }

    /// Bytes of memory the segment log's table takes (it grows with what is written back).
    /// The slot map is not counted: it is sized to the whole swap space up front, most of it
    /// never touched.
    pub fn metadata_bytes(&self) -> u64 {
        self.segments().map_or(0, SegmentLog::metadata_bytes)
    }

    /// The segment log, when slots hold objects in segments.
    pub fn segments(&self) -> Option<&SegmentLog> {
        match &self.store {
            Store::Segments(log) => Some(log),
            Store::Pages(_) => None,
        }
    }

    /// Slots in use.
    pub fn used(&self) -> u32 {
        self.slots.lock().used()
    }

    /// Write whole pages to newly allocated slots: contiguous ones when there are, one write
    /// per run. Returns each page's slot. On error nothing stays allocated.
    pub fn write(&self, data: &[u8], slots_out: &mut Vec<SwapSlot>) -> Result<(), SwapWriteError> {
        let nr = (data.len() / PAGE_SIZE) as u32;
        debug_assert!(nr > 0 && data.len().is_multiple_of(PAGE_SIZE));
        let device = match &self.store {
            Store::Pages(device) => device,
            Store::Segments(_) => {
                let raw: Vec<Object> = data
                    .chunks_exact(PAGE_SIZE)
                    .map(|bytes| Object { codec: 0, bytes })
                    .collect();
                return self.write_objects(&raw, slots_out);
            }
        };
        slots_out.clear();
        let contiguous = if nr.is_power_of_two() {
            self.slots.lock().alloc(nr)
        } else {
            None
        };
        if let Some(first) = contiguous {
            if let Err(e) = device.write(first, data) {
                self.slots.lock().free(first, nr);
                return Err(e.into());
            }
            slots_out.extend((0..nr).map(|i| SwapSlot(first.0 + i)));
            return Ok(());
        }
        // Fragmented: page by page.
        for page in data.chunks_exact(PAGE_SIZE) {
            let slot = self.alloc_page();
            let result = match slot {
                None => Err(SwapWriteError::NoSlot),
                Some(slot) => device.write(slot, page).map_err(|e| {
                    self.slots.lock().free(slot, 1);
                    SwapWriteError::from(e)
                }),
            };
            if let Err(e) = result {
                for s in slots_out.drain(..) {
                    self.free(s);
                }
                return Err(e);
            }
            slots_out.push(slot.expect("checked above"));
        }
        Ok(())
    }

    /// Write objects as the pool holds them (segments only): each gets a slot, and the batch
    /// is packed into segments. On error nothing stays allocated.
    pub fn write_objects(
        &self,
        objects: &[Object],
        slots_out: &mut Vec<SwapSlot>,
    ) -> Result<(), SwapWriteError> {
        let Store::Segments(log) = &self.store else {
            panic!("objects are written only to segments");
        };
        slots_out.clear();
        for _ in objects {
            match self.alloc_page() {
                Some(slot) => slots_out.push(slot),
                None => {
                    let mut slots = self.slots.lock();
                    for s in slots_out.drain(..) {
                        slots.free(s, 1);
                    }
                    return Err(SwapWriteError::NoSlot);
                }
            }
        }
        if let Err(e) = log.append(slots_out, objects) {
            let mut slots = self.slots.lock();
            for s in slots_out.drain(..) {
                slots.free(s, 1);
            }
            return Err(e.into());
        }
        Ok(())
    }

    /// Read the pages of `slots` into `out` (a page each, in order): pages are read in runs
    /// of contiguous slots; objects are opened and handed to `decompress(codec, bytes, page)`
    /// unless raw. Stops at the first page that fails.
    pub fn read_pages(
        &self,
        slots: &[SwapSlot],
        out: &mut [u8],
        decompress: impl Fn(u8, &[u8], &mut [u8]) -> bool,
    ) -> Result<(), ReadFail> {
        debug_assert_eq!(out.len(), slots.len() * PAGE_SIZE);
        match &self.store {
            Store::Segments(log) => log.read(slots, |i, codec, bytes| {
                let page = &mut out[i * PAGE_SIZE..(i + 1) * PAGE_SIZE];
                if bytes.len() == PAGE_SIZE {
                    page.copy_from_slice(bytes);
                    return true;
                }
                decompress(codec, bytes, page)
            }),
            Store::Pages(device) => {
                let mut i = 0;
                while i < slots.len() {
                    let mut n = 1;
                    while i + n < slots.len() && slots[i + n].0 == slots[i].0 + n as u32 {
                        n += 1;
                    }
                    let run = &mut out[i * PAGE_SIZE..(i + n) * PAGE_SIZE];
                    if device.read(slots[i], run).is_err() {
                        return Err(ReadFail {
                            index: i,
                            kind: SegmentReadError::Device,
                        });
                    }
                    i += n;
                }
                Ok(())
            }
        }
    }

    /// Compact one segment under the threshold, if any (segments only). Returns whether one
    /// was compacted.
    pub fn compact(&self) -> Result<bool, DeviceError> {
        match &self.store {
            Store::Segments(log) => log.compact(),
            Store::Pages(_) => Ok(false),
        }
    }

    /// One free slot. With none free while clusters are being discarded, wait for those
    /// discards rather than fail: their slots are free the moment each ends (the kernel's
    /// allocator runs the discards itself then).
    fn alloc_page(&self) -> Option<SwapSlot> {
        let mut slots = self.slots.lock();
        loop {
            if let Some(slot) = slots.alloc(1) {
                return Some(slot);
            }
            if slots.discarding() == 0 {
                return None;
            }
            self.discarded.wait(&mut slots);
        }
    }

    /// Read whole pages from their slots, from `slot` on (pages only; `read_pages` reads
    /// either store).
    pub fn read(&self, slot: SwapSlot, out: &mut [u8]) -> Result<(), DeviceError> {
        match &self.store {
            Store::Pages(device) => device.read(slot, out),
            Store::Segments(_) => panic!("segments are read with read_pages"),
        }
    }

    /// Free a slot and give its storage back. A failed discard leaks no data (the slot is
    /// overwritten before anyone reads it again) so it is not an error for the caller.
    pub fn free(&self, slot: SwapSlot) {
        self.free_run(slot, 1);
    }

    /// Free `nr` consecutive slots; with discard on, clusters this leaves wholly free are
    /// discarded.
    pub fn free_run(&self, slot: SwapSlot, nr: u32) {
        let device = match &self.store {
            Store::Pages(device) => device,
            Store::Segments(log) => {
                for s in slot.0..slot.0 + nr {
                    log.free(SwapSlot(s));
                }
                self.slots.lock().free(slot, nr);
                return;
            }
        };
        let clusters = {
            let mut slots = self.slots.lock();
            slots.free(slot, nr);
            if !self.discard {
                return;
            }
            slots.take_dirty_free_clusters()
        };
        for (start, n) in clusters {
            // Reserved meanwhile: nothing is written there while the hole is punched.
            let _ = device.discard(start, n);
            self.slots.lock().free_discarded(start, n);
            self.discarded.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::swap::FileDevice;
    use crate::PAGE_SIZE;

    #[test]
    fn storage_goes_back_once_a_whole_cluster_is_free() {
        let dev = Arc::new(FileDevice::create(None, 1024).unwrap());
        let swap = SwapInfo::new(dev.clone(), 1024, true);
        let mut slots = Vec::new();
        swap.write(&vec![7u8; 512 * PAGE_SIZE], &mut slots).unwrap();
        let written = dev.disk_blocks();
        assert!(written >= 512 * 8, "st_blocks {written}");
        for s in &slots[..511] {
            swap.free(*s);
        }
        assert_eq!(
            dev.disk_blocks(),
            written,
            "a slot of the cluster is still in use"
        );
        swap.free(slots[511]);
        assert!(
            dev.disk_blocks() < written / 4,
            "st_blocks {written} -> {}",
            dev.disk_blocks()
        );
        assert_eq!(swap.used(), 0);
        // The cluster is usable again, and reads back what is written next.
        swap.write(&vec![9u8; PAGE_SIZE], &mut slots).unwrap();
        let mut out = vec![0u8; PAGE_SIZE];
        swap.read(slots[0], &mut out).unwrap();
        assert!(out.iter().all(|&b| b == 9));
    }

    #[test]
    fn without_discard_freed_storage_is_kept_for_reuse() {
        let dev = Arc::new(FileDevice::create(None, 1024).unwrap());
        let swap = SwapInfo::new(dev.clone(), 1024, false);
        let mut slots = Vec::new();
        swap.write(&vec![7u8; 512 * PAGE_SIZE], &mut slots).unwrap();
        let written = dev.disk_blocks();
        for s in &slots {
            swap.free(*s);
        }
        assert_eq!(swap.used(), 0);
        assert_eq!(dev.disk_blocks(), written, "freed storage was given back");
        // Written again into the same blocks: the file does not grow.
        swap.write(&vec![9u8; 512 * PAGE_SIZE], &mut slots).unwrap();
        assert_eq!(dev.disk_blocks(), written);
        let mut out = vec![0u8; 512 * PAGE_SIZE];
        swap.read(slots[0], &mut out).unwrap();
        assert!(out.iter().all(|&b| b == 9));
    }
}
