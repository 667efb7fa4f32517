//! A backing device with its slot map: the kernel's `swap_info_struct`. Written-back pages
//! get slots here; a large folio gets contiguous slots when there are some, so it goes out in
//! one write. A freed slot is never read before it is written again, so its old bytes are
//! never seen.
//!
//! With discard on (the kernel's `swapon --discard`; off by default, as there), freed storage
//! is discarded (hole punching) a whole cluster at a time, once every slot of a cluster
//! written to is free (slots.rs): its storage goes back to the file system. Off, a freed
//! slot keeps its blocks for the next write: on `bench usemem` that write is then a plain
//! overwrite, where writing into a punched hole made the file system allocate blocks again
//! (and convert them at completion) on every reuse.

use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use super::device::{BackingDevice, DeviceError};
use super::slots::{SlotAllocator, SwapSlot};

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

/// A backing device and the map of its slots in use: the kernel's `swap_info_struct`.
#[derive(Debug)]
pub struct SwapInfo {
    device: Arc<dyn BackingDevice>,
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
            device,
            slots: Mutex::new(SlotAllocator::new(capacity_pages)),
            discard,
            discarded: Condvar::new(),
        }
    }

    /// The backing device.
    pub fn device(&self) -> &Arc<dyn BackingDevice> {
        &self.device
    }

    /// Slots in use.
    pub fn used(&self) -> u32 {
        self.slots.lock().used()
    }

    /// Write whole pages to newly allocated slots: contiguous ones when there are, one write
    /// per run. Returns each page's slot. On error nothing stays allocated.
    pub fn write(&self, data: &[u8], slots_out: &mut Vec<SwapSlot>) -> Result<(), SwapWriteError> {
        let nr = (data.len() / crate::PAGE_SIZE) as u32;
        debug_assert!(nr > 0 && data.len().is_multiple_of(crate::PAGE_SIZE));
        slots_out.clear();
        let contiguous = if nr.is_power_of_two() {
            self.slots.lock().alloc(nr)
        } else {
            None
        };
        if let Some(first) = contiguous {
            if let Err(e) = self.device.write(first, data) {
                self.slots.lock().free(first, nr);
                return Err(e.into());
            }
            slots_out.extend((0..nr).map(|i| SwapSlot(first.0 + i)));
            return Ok(());
        }
        // Fragmented: page by page.
        for page in data.chunks_exact(crate::PAGE_SIZE) {
            let slot = self.alloc_page();
            let result = match slot {
                None => Err(SwapWriteError::NoSlot),
                Some(slot) => self.device.write(slot, page).map_err(|e| {
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

    /// Read one page from its slot.
    pub fn read(&self, slot: SwapSlot, out: &mut [u8]) -> Result<(), DeviceError> {
        self.device.read(slot, out)
    }

    /// Free a slot and give its storage back. A failed discard leaks no data (the slot is
    /// overwritten before anyone reads it again) so it is not an error for the caller.
    pub fn free(&self, slot: SwapSlot) {
        self.free_run(slot, 1);
    }

    /// Free `nr` consecutive slots; with discard on, clusters this leaves wholly free are
    /// discarded.
    pub fn free_run(&self, slot: SwapSlot, nr: u32) {
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
            let _ = self.device.discard(start, n);
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
