//! lz4 through lz4_flex's block format, with its safe encoder and decoder (no unsafe code in
//! the codec either, and its decoder checks every offset and length against the buffers).

use std::cell::RefCell;
use std::ops::RangeInclusive;

use lz4_flex::block;

use super::{Algorithm, CompressError, Compressor, CompressorSpec};

/// lz4 (like the kernel's) has no levels: 0 is the only one, so `lz4:0` is `lz4`.
pub(super) const DEFAULT_LEVEL: i32 = 0;
pub(super) const LEVELS: RangeInclusive<i32> = 0..=0;

thread_local! {
    /// lz4_flex refuses to compress unless the output can hold the worst case
    /// (`get_maximum_output_size`, about 110% of the input), so we compress into this
    /// per-thread scratch buffer and copy out only what fits. Its hash table lives on the
    /// stack, so this buffer is lz4's whole per-thread context.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Lz4;

impl Compressor for Lz4 {
    fn spec(&self) -> CompressorSpec {
        Algorithm::Lz4.default_spec()
    }

    fn compress(&self, src: &[u8], dst: &mut [u8]) -> Result<usize, CompressError> {
        crate::scratch::with(&SCRATCH, Default::default, |scratch| {
            let mut scratch = scratch.borrow_mut();
            let bound = block::get_maximum_output_size(src.len());
            if scratch.len() < bound {
                scratch.resize(bound, 0);
            }
            let n = block::compress_into(src, &mut scratch[..bound])
                .map_err(|e| CompressError::Corrupt(format!("lz4: {e}")))?;
            let room = dst.len();
            let out = dst.get_mut(..n).ok_or(CompressError::DoesNotFit(room))?;
            out.copy_from_slice(&scratch[..n]);
            Ok(n)
        })
    }

    fn decompress(&self, src: &[u8], dst: &mut [u8]) -> Result<usize, CompressError> {
        block::decompress_into(src, dst).map_err(|e| CompressError::Corrupt(format!("lz4: {e}")))
    }
}
