//! deflate through libdeflater (libdeflate): raw deflate, the format of the kernel's
//! `deflate` crypto compressor. libdeflate is whole-buffer only, which is all a page needs,
//! and much faster than zlib at the same ratio.

use std::cell::RefCell;
use std::ops::RangeInclusive;

use libdeflater::{CompressionError, CompressionLvl, Decompressor};

use super::{Algorithm, CompressError, Compressor, CompressorSpec};

/// Level 1: the fast end, as zswap wants on the reclaim path.
pub(super) const DEFAULT_LEVEL: i32 = 1;
/// libdeflate's range without its level 0, which only stores blocks uncompressed: every page
/// would be rejected as incompressible, which is never what someone picking deflate meant.
pub(super) const LEVELS: RangeInclusive<i32> = 1..=12;

thread_local! {
    /// One compressor per level used on this thread (libdeflate allocates its match finder
    /// per compressor, up to a few hundred KiB at the high levels).
    static COMPRESSORS: RefCell<Vec<(i32, libdeflater::Compressor)>> = const { RefCell::new(Vec::new()) };
    static DECOMPRESSOR: RefCell<Option<Decompressor>> = const { RefCell::new(None) };
}

pub(super) fn touch_thread_locals() {
    COMPRESSORS.with(|_| ());
    DECOMPRESSOR.with(|_| ());
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Deflate {
    level: i32,
}

impl Deflate {
    pub(super) fn new(level: i32) -> Self {
        Deflate { level }
    }
}

impl Compressor for Deflate {
    fn spec(&self) -> CompressorSpec {
        CompressorSpec {
            algorithm: Algorithm::Deflate,
            level: self.level,
        }
    }

    fn compress(&self, src: &[u8], dst: &mut [u8]) -> Result<usize, CompressError> {
        crate::scratch::with(&COMPRESSORS, Default::default, |comps| {
            let mut comps = comps.borrow_mut();
            let idx = match comps.iter().position(|(l, _)| *l == self.level) {
                Some(i) => i,
                None => {
                    let lvl = CompressionLvl::new(self.level)
                        .map_err(|e| CompressError::Corrupt(format!("deflate level: {e:?}")))?;
                    comps.push((self.level, libdeflater::Compressor::new(lvl)));
                    comps.len() - 1
                }
            };
            match comps[idx].1.deflate_compress(src, dst) {
                Ok(n) => Ok(n),
                Err(CompressionError::InsufficientSpace) => {
                    Err(CompressError::DoesNotFit(dst.len()))
                }
            }
        })
    }

    fn decompress(&self, src: &[u8], dst: &mut [u8]) -> Result<usize, CompressError> {
        crate::scratch::with(&DECOMPRESSOR, Default::default, |d| {
            let mut d = d.borrow_mut();
            d.get_or_insert_with(Decompressor::new)
                .deflate_decompress(src, dst)
                .map_err(|e| CompressError::Corrupt(format!("deflate: {e}")))
        })
    }
}
