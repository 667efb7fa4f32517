//! A swap file made at its first write. Most processes under `uzswap run` never come near
//! their limit and never write back; making the files up front (an inode and a truncate for
//! each of `NR_FILES`) was a sixth of what starting a process under `uzswap run` cost beyond
//! starting it plainly. The directory is taken as the device is made (an absolute path,
//! the system's temporary directory then if none is given: not whatever the program's
//! working directory or `TMPDIR` is at the first write) and checked once, where the run
//! starts: a write that cannot make the files fails as any write to the device fails (the
//! engine keeps the pages and counts `swap_write_fail`), and the next write tries again.

use std::path::PathBuf;
use std::sync::OnceLock;

use parking_lot::Mutex;

use super::device::{BackingDevice, DeviceError};
use super::file::FileDevice;
use super::slots::SwapSlot;

/// A [`FileDevice`] made when first written (or read: a slot never written reads as zeros).
#[derive(Debug)]
pub struct LazyFileDevice {
    dir: PathBuf,
    capacity_pages: u32,
    stripe_slots: u32,
    device: OnceLock<FileDevice>,
    /// Held while the files are made: one thread makes them, the others wait for it.
    making: Mutex<()>,
}

impl LazyFileDevice {
    /// `FileDevice::create_with(dir, capacity_pages, stripe_slots, true)`, when first needed;
    /// `dir` (the system's temporary directory if None) made absolute now.
    pub fn new(dir: Option<PathBuf>, capacity_pages: u32, stripe_slots: u32) -> Self {
        let dir = dir.unwrap_or_else(std::env::temp_dir);
        LazyFileDevice {
            dir: std::path::absolute(&dir).unwrap_or(dir),
            capacity_pages,
            stripe_slots,
            device: OnceLock::new(),
            making: Mutex::new(()),
        }
    }

    /// The files, made now if they are not yet.
    fn device(&self) -> Result<&FileDevice, DeviceError> {
        if let Some(device) = self.device.get() {
            return Ok(device);
        }
        let _making = self.making.lock();
        if let Some(device) = self.device.get() {
            return Ok(device);
        }
        let device = FileDevice::create_with(
            Some(&self.dir),
            self.capacity_pages,
            self.stripe_slots,
            true,
        )?;
        Ok(self.device.get_or_init(|| device))
    }

    /// Whether the files have been made.
    pub fn is_made(&self) -> bool {
        self.device.get().is_some()
    }
}

impl BackingDevice for LazyFileDevice {
    fn write(&self, slot: SwapSlot, data: &[u8]) -> Result<(), DeviceError> {
        self.device()?.write(slot, data)
    }

    fn read(&self, slot: SwapSlot, out: &mut [u8]) -> Result<(), DeviceError> {
        self.device()?.read(slot, out)
    }

    fn discard(&self, slot: SwapSlot, nr_pages: u32) -> Result<(), DeviceError> {
        // Nothing was ever written to files not made yet.
        match self.device.get() {
            Some(device) => device.discard(slot, nr_pages),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PAGE_SIZE;

    #[test]
    fn the_files_are_made_at_the_first_write_and_keep_what_it_wrote() {
        let dev = LazyFileDevice::new(None, 64, 16);
        assert!(!dev.is_made());
        dev.discard(SwapSlot(0), 4).unwrap();
        assert!(!dev.is_made(), "a discard made the files");
        let page = vec![7u8; PAGE_SIZE];
        dev.write(SwapSlot(3), &page).unwrap();
        assert!(dev.is_made());
        let mut out = vec![0u8; 2 * PAGE_SIZE];
        dev.read(SwapSlot(3), &mut out).unwrap();
        assert!(out[..PAGE_SIZE] == page[..] && out[PAGE_SIZE..].iter().all(|&b| b == 0));
        // Out of range is refused as by the device itself.
        assert!(dev.write(SwapSlot(64), &page).is_err());
    }

    #[test]
    fn a_directory_that_cannot_hold_them_fails_each_write_and_is_tried_again() {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        let dir = std::env::temp_dir().join(format!(
            "uzswap-lazy-{}-{}",
            std::process::id(),
            now.unwrap().as_nanos()
        ));
        let dev = LazyFileDevice::new(Some(dir.clone()), 64, 16);
        let page = vec![7u8; PAGE_SIZE];
        let err = dev.write(SwapSlot(0), &page).unwrap_err();
        assert!(matches!(err, DeviceError::Create { .. }), "{err}");
        assert!(!dev.is_made());
        std::fs::create_dir(&dir).unwrap();
        dev.write(SwapSlot(0), &page).unwrap();
        let mut out = vec![0u8; PAGE_SIZE];
        dev.read(SwapSlot(0), &mut out).unwrap();
        assert_eq!(out, page);
        std::fs::remove_dir(&dir).unwrap();
    }
}
