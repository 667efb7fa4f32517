//! The backing-device trait: where written-back pages live. Addressed in whole pages by
//! swap slot. (Interface.)

use super::slots::SwapSlot;

#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("short write: {written} of {expected} bytes")]
    ShortWrite { written: usize, expected: usize },
    #[error("short read: {read} of {expected} bytes")]
    ShortRead { read: usize, expected: usize },
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
