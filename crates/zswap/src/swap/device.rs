//! The backing-device trait: where written-back pages live. Addressed in whole pages by
//! swap slot; the slot allocator (`slots.rs`) decides which slots are in use, a device only
//! stores bytes. Errors from the OS are turned into [`DeviceError`] here, at the edge.

use std::path::PathBuf;

use super::slots::SwapSlot;
use crate::PAGE_SIZE;

/// A backing device's failure, as the swap layer reports it.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// An error from the OS.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// Only part of a write reached the device: the OS stopped making progress without an
    /// error (or `FaultyDevice` tore the write).
    #[error("short write: {written} of {expected} bytes")]
    ShortWrite {
        /// Bytes written before the OS stopped.
        written: usize,
        /// Bytes the write was for.
        expected: usize,
    },
    /// The file ended before the read did: the device lost data it held.
    #[error("short read: {read} of {expected} bytes")]
    ShortRead {
        /// Bytes read before the end of the file.
        read: usize,
        /// Bytes the read was for.
        expected: usize,
    },
    /// The swap file could not be created in `dir` (missing, not a directory, no permission,
    /// or a filesystem without O_TMPFILE: we never fall back to a named file).
    #[error("cannot create an unnamed (O_TMPFILE) swap file in {}: {reason}", dir.display())]
    Create {
        /// The directory the file was to be in.
        dir: PathBuf,
        /// The errno in words, with what it usually means here.
        reason: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// An access past the end of the device.
    #[error("slots {slot}..+{nr_pages} are past the device's {capacity} pages")]
    OutOfRange {
        /// The first slot of the access.
        slot: u32,
        /// Pages in the access.
        nr_pages: u64,
        /// The device's size, in pages.
        capacity: u32,
    },
    /// A buffer that is not a positive multiple of the page size.
    #[error("buffer of {len} bytes is not a positive multiple of the page size")]
    BadLength {
        /// The buffer's length, in bytes.
        len: usize,
    },
}

impl DeviceError {
    /// The errno behind this error, if it came from (or imitates) the OS.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            DeviceError::Io(e) | DeviceError::Create { source: e, .. } => e.raw_os_error(),
            _ => None,
        }
    }
}

/// A device holding whole pages. `data.len()` is always a positive multiple of 4096.
pub trait BackingDevice: Send + Sync + std::fmt::Debug {
    /// Write pages starting at `slot`.
    fn write(&self, slot: SwapSlot, data: &[u8]) -> Result<(), DeviceError>;
    /// Read pages starting at `slot` into `out`.
    fn read(&self, slot: SwapSlot, out: &mut [u8]) -> Result<(), DeviceError>;
    /// The `nr_pages` slots from `slot` hold nothing any more: give their storage back
    /// (hole punching) so old bytes neither stay on disk nor reach a later reader.
    fn discard(&self, slot: SwapSlot, nr_pages: u32) -> Result<(), DeviceError>;
}

/// Check that `len` bytes at `slot` are whole pages inside a device of `capacity` pages, and
/// return the number of pages. Shared by the devices so they all refuse the same things.
pub(crate) fn check_range(slot: SwapSlot, len: usize, capacity: u32) -> Result<u32, DeviceError> {
    // A mask, not `is_multiple_of`: that needs Rust 1.87 and the workspace says 1.80.
    if len == 0 || len & (PAGE_SIZE - 1) != 0 {
        return Err(DeviceError::BadLength { len });
    }
    check_pages(slot, (len / PAGE_SIZE) as u64, capacity)
}

/// Check that `nr_pages` pages from `slot` lie inside a device of `capacity` pages.
pub(crate) fn check_pages(
    slot: SwapSlot,
    nr_pages: u64,
    capacity: u32,
) -> Result<u32, DeviceError> {
    if u64::from(slot.0) + nr_pages > u64::from(capacity) {
        return Err(DeviceError::OutOfRange {
            slot: slot.0,
            nr_pages,
            capacity,
        });
    }
    Ok(nr_pages as u32)
}
