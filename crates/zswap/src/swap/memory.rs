//! A RAM-backed device for tests: the same semantics as the swap file (fixed capacity, slots
//! never written or discarded read as zeros, the same range checks) without touching disk,
//! so engine tests stay fast and deterministic.

use std::collections::HashMap;

use parking_lot::Mutex;

use super::device::{check_pages, check_range, BackingDevice, DeviceError};
use super::slots::SwapSlot;
use crate::PAGE_SIZE;

type Page = Box<[u8; PAGE_SIZE]>;

/// A backing device in RAM with the swap file's semantics, for tests.
#[derive(Debug)]
pub struct MemoryDevice {
    capacity: u32,
    /// Only pages written since their last discard are held, as in a sparse file.
    pages: Mutex<HashMap<u32, Page>>,
}

impl MemoryDevice {
    /// A device of `capacity_pages` pages, every one reading as zeros.
    pub fn new(capacity_pages: u32) -> Self {
        MemoryDevice {
            capacity: capacity_pages,
            pages: Mutex::new(HashMap::new()),
        }
    }

    /// The device's size, in pages.
    pub fn capacity_pages(&self) -> u32 {
        self.capacity
    }

    /// Pages that hold data (the analogue of a file's allocated blocks).
    pub fn pages_held(&self) -> usize {
        self.pages.lock().len()
    }
}

impl BackingDevice for MemoryDevice {
    fn write(&self, slot: SwapSlot, data: &[u8]) -> Result<(), DeviceError> {
        check_range(slot, data.len(), self.capacity)?;
        let mut pages = self.pages.lock();
        for (i, chunk) in data.chunks_exact(PAGE_SIZE).enumerate() {
            let page = pages
                .entry(slot.0 + i as u32)
                .or_insert_with(|| Box::new([0; PAGE_SIZE]));
            page.copy_from_slice(chunk);
        }
        Ok(())
    }

    fn read(&self, slot: SwapSlot, out: &mut [u8]) -> Result<(), DeviceError> {
        check_range(slot, out.len(), self.capacity)?;
        let pages = self.pages.lock();
        for (i, chunk) in out.chunks_exact_mut(PAGE_SIZE).enumerate() {
            match pages.get(&(slot.0 + i as u32)) {
                Some(page) => chunk.copy_from_slice(&page[..]),
                None => chunk.fill(0),
            }
        }
        Ok(())
    }

    fn discard(&self, slot: SwapSlot, nr_pages: u32) -> Result<(), DeviceError> {
        check_pages(slot, u64::from(nr_pages), self.capacity)?;
        let mut pages = self.pages.lock();
        for s in slot.0..slot.0 + nr_pages {
            pages.remove(&s);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_zeros() {
        let dev = MemoryDevice::new(8);
        let data: Vec<u8> = (0..3 * PAGE_SIZE).map(|i| (i % 251) as u8).collect();
        dev.write(SwapSlot(2), &data).unwrap();
        let mut out = vec![0xffu8; 3 * PAGE_SIZE];
        dev.read(SwapSlot(2), &mut out).unwrap();
        assert_eq!(out, data);
        let mut out = vec![0xffu8; 2 * PAGE_SIZE];
        dev.read(SwapSlot(6), &mut out).unwrap();
        assert!(
            out.iter().all(|&b| b == 0),
            "never-written slots read as zeros"
        );
        assert_eq!(dev.pages_held(), 3);
    }

    #[test]
    fn discard_drops_pages_and_reads_zeros() {
        let dev = MemoryDevice::new(4);
        dev.write(SwapSlot(0), &vec![7u8; 4 * PAGE_SIZE]).unwrap();
        dev.discard(SwapSlot(1), 2).unwrap();
        assert_eq!(dev.pages_held(), 2);
        let mut out = vec![0u8; 4 * PAGE_SIZE];
        dev.read(SwapSlot(0), &mut out).unwrap();
        assert!(out[..PAGE_SIZE].iter().all(|&b| b == 7));
        assert!(out[PAGE_SIZE..3 * PAGE_SIZE].iter().all(|&b| b == 0));
        assert!(out[3 * PAGE_SIZE..].iter().all(|&b| b == 7));
    }

    #[test]
    fn refuses_what_the_file_refuses() {
        let dev = MemoryDevice::new(2);
        assert!(matches!(
            dev.write(SwapSlot(2), &[0u8; PAGE_SIZE]),
            Err(DeviceError::OutOfRange { .. })
        ));
        assert!(matches!(
            dev.write(SwapSlot(0), &[0u8; 10]),
            Err(DeviceError::BadLength { len: 10 })
        ));
        assert!(matches!(
            dev.discard(SwapSlot(1), 2),
            Err(DeviceError::OutOfRange { .. })
        ));
    }
}
