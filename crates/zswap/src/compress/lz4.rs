//! lz4 through the reference C library (the `lz4` crate's block API): `LZ4_compress_default`
//! writes straight into the caller's buffer and returns nothing that does not fit, and
//! `LZ4_decompress_safe` checks every offset and length against both buffers (the variant
//! meant for untrusted input, and what the fuzz target drives). On the corpus it compresses
//! 1.29x and decompresses 1.40x as fast as lz4_flex's safe encoder and decoder
//! (`bench codecs`, BENCHMARKS.md), in the same block format.

use std::ops::RangeInclusive;

use super::{Algorithm, CompressError, Compressor, CompressorSpec};

/// lz4 (like the kernel's) has no levels: 0 is the only one, so `lz4:0` is `lz4`.
pub(super) const DEFAULT_LEVEL: i32 = 0;
pub(super) const LEVELS: RangeInclusive<i32> = 0..=0;

#[derive(Debug, Clone, Copy)]
pub(super) struct Lz4;

impl Compressor for Lz4 {
    fn spec(&self) -> CompressorSpec {
        Algorithm::Lz4.default_spec()
    }

    fn compress(&self, src: &[u8], dst: &mut [u8]) -> Result<usize, CompressError> {
        // The library returns 0, which the crate reports as an error, when the output does
        // not fit in `dst`: the only way it fails on an input of a page.
        lz4::block::compress_to_buffer(src, None, false, dst)
            .map_err(|_| CompressError::DoesNotFit(dst.len()))
    }

    fn decompress(&self, src: &[u8], dst: &mut [u8]) -> Result<usize, CompressError> {
        let capacity = i32::try_from(dst.len())
            .map_err(|_| CompressError::Corrupt(format!("lz4: {} bytes of output", dst.len())))?;
        lz4::block::decompress_to_buffer(src, Some(capacity), dst)
            .map_err(|e| CompressError::Corrupt(format!("lz4: {e}")))
    }
}
