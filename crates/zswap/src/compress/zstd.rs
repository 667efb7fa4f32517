//! zstd through the zstd crate's bulk API (one-shot frames, as the kernel's zstd does).
//! Levels are the library's whole range, negative ("fast") levels included.

use std::cell::RefCell;
use std::ops::RangeInclusive;

use ::zstd::bulk;

use super::{Algorithm, CompressError, Compressor, CompressorSpec};

/// Level 1, like the kernel's zswap default for zstd: the fast end where zstd still
/// compresses pages clearly better than lz4.
pub(super) const DEFAULT_LEVEL: i32 = 1;

pub(super) fn levels() -> RangeInclusive<i32> {
    ::zstd::compression_level_range()
}

thread_local! {
    /// One compression context per level used on this thread. A context is a few hundred
    /// KiB of tables; creating one per page would cost more than compressing the page. A
    /// thread rarely uses more than one or two levels, so a short list beats a map.
    static CCTXS: RefCell<Vec<(i32, bulk::Compressor<'static>)>> = const { RefCell::new(Vec::new()) };
    /// Decompression does not depend on the level: one context per thread.
    static DCTX: RefCell<Option<bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

pub(super) fn touch_thread_locals() {
    CCTXS.with(|_| ());
    DCTX.with(|_| ());
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Zstd {
    level: i32,
}

impl Zstd {
    pub(super) fn new(level: i32) -> Self {
        Zstd { level }
    }
}

fn internal(e: std::io::Error) -> CompressError {
    CompressError::Corrupt(format!("zstd: {e}"))
}

impl Compressor for Zstd {
    fn spec(&self) -> CompressorSpec {
        CompressorSpec {
            algorithm: Algorithm::Zstd,
            level: self.level,
        }
    }

    fn compress(&self, src: &[u8], dst: &mut [u8]) -> Result<usize, CompressError> {
        crate::scratch::with(&CCTXS, Default::default, |cctxs| {
            let mut cctxs = cctxs.borrow_mut();
            let idx = match cctxs.iter().position(|(l, _)| *l == self.level) {
                Some(i) => i,
                None => {
                    cctxs.push((
                        self.level,
                        bulk::Compressor::new(self.level).map_err(internal)?,
                    ));
                    cctxs.len() - 1
                }
            };
            let cctx = &mut cctxs[idx].1;
            // With valid input the only way a one-shot compression fails is a destination
            // smaller than the frame (zstd's dstSize_tooSmall); anything else is internal.
            cctx.compress_to_buffer(src, dst).map_err(|e| {
                if e.to_string().contains("too small") {
                    CompressError::DoesNotFit(dst.len())
                } else {
                    internal(e)
                }
            })
        })
    }

    fn decompress(&self, src: &[u8], dst: &mut [u8]) -> Result<usize, CompressError> {
        crate::scratch::with(&DCTX, Default::default, |dctx| {
            let mut dctx = dctx.borrow_mut();
            let dctx = match &mut *dctx {
                Some(d) => d,
                empty => empty.insert(bulk::Decompressor::new().map_err(internal)?),
            };
            dctx.decompress_to_buffer(src, dst).map_err(internal)
        })
    }
}
