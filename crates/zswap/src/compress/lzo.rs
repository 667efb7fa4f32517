//! lzo (LZO1X-1, the kernel's default zswap compressor) through the `lzo1x` crate: a safe
//! Rust port (`#![forbid(unsafe_code)]`) of LZO1X, maintained, with compressor and decoder.
//!
//! License: `lzo1x` is GPL-2.0, like all LZO code (liblzo2 and the kernel's lib/lzo). That is
//! why this codec is behind the opt-in `lzo` cargo feature: a build with it is GPL-2.0 as a
//! whole, the default build stays MIT OR Apache-2.0.

use std::ops::RangeInclusive;

use lzo1x::CompressLevel;

use super::{Algorithm, CompressError, Compressor, CompressorSpec};

/// lzo1x's level 3 is LZO1X-1 with a 2^14-entry dictionary, liblzo2's `lzo1x_1`; levels 1..=4
/// are LZO1X-1 with smaller or larger dictionaries, 5..=13 the slow LZO1X-999.
pub(super) const DEFAULT_LEVEL: i32 = 3;
pub(super) const LEVELS: RangeInclusive<i32> = 1..=13;

#[derive(Debug, Clone, Copy)]
pub(super) struct Lzo {
    level: i32,
}

impl Lzo {
    pub(super) fn new(level: i32) -> Self {
        Lzo { level }
    }
}

impl Compressor for Lzo {
    fn spec(&self) -> CompressorSpec {
        CompressorSpec {
            algorithm: Algorithm::Lzo,
            level: self.level,
        }
    }

    fn compress(&self, src: &[u8], dst: &mut [u8]) -> Result<usize, CompressError> {
        // lzo1x only offers an allocating compressor (its work memory and output buffer are
        // allocated per call): there is no context to keep per thread. The level is in 1..=13
        // (checked by the spec), so the conversion cannot fail.
        let level = CompressLevel::new(u8::try_from(self.level).unwrap_or(3));
        let out = lzo1x::compress(src, level);
        let room = dst.len();
        let dst = dst
            .get_mut(..out.len())
            .ok_or(CompressError::DoesNotFit(room))?;
        dst.copy_from_slice(&out);
        Ok(out.len())
    }

    fn decompress(&self, src: &[u8], dst: &mut [u8]) -> Result<usize, CompressError> {
        // lzo1x's decoder demands that the output fill `dst` exactly; LZO streams carry no
        // length, and the engine always knows it (one page).
        lzo1x::decompress(src, dst)
            .map(|()| dst.len())
            .map_err(|e| CompressError::Corrupt(format!("lzo: {e}")))
    }
}
