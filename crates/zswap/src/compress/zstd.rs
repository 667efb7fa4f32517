//! zstd through zstd-safe (one-shot frames, as the kernel's zstd does). Levels are the
//! library's whole range, negative ("fast") levels included.
//!
//! Contexts are shared by the process's threads rather than kept by each: a context is
//! 72-94 KiB (DESIGN.md section 6), and zstd is what writeback re-encodes with and every
//! fault on a written-back page decodes, so a region's dozen threads each keeping one of each
//! would hold 2 MiB where two CPUs use two at a time. A thread takes a context for one unit and puts it
//! back; finding none free, it makes one (never waits: a thread may hold one when a fault
//! it serves itself needs another), and at most `KEPT` of each kind are kept, none larger
//! than `KEPT_BYTES_MAX`. What the contexts alive take is `context_bytes`, charged by the
//! regions that use them.

use std::ops::RangeInclusive;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::LazyLock;

use ::zstd::zstd_safe::{self, CCtx, CParameter, DCtx};
use parking_lot::Mutex;

use super::{Algorithm, CompressError, Compressor, CompressorSpec};

/// Level 1, like the kernel's zswap default for zstd: the fast end where zstd still
/// compresses pages clearly better than lz4.
pub(super) const DEFAULT_LEVEL: i32 = 1;

pub(super) fn levels() -> RangeInclusive<i32> {
    ::zstd::compression_level_range()
}

/// Contexts kept of each kind, free between uses: as many as the CPUs can use at once.
static KEPT: LazyLock<usize> =
    LazyLock::new(|| std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 16)));

/// Bytes of the contexts kept, and of those in use as they were when last put back (a
/// context made for a use counts once it is put back).
static BYTES: AtomicU64 = AtomicU64::new(0);

/// A compression context, its level and its size when last put back.
type Cctx = (CCtx<'static>, i32, u64);
/// A decompression context and its size when last put back.
type Dctx = (DCtx<'static>, u64);

static CCTXS: Mutex<Vec<Cctx>> = Mutex::new(Vec::new());
static DCTXS: Mutex<Vec<Dctx>> = Mutex::new(Vec::new());

/// Bytes of the zstd contexts alive in the process.
pub fn context_bytes() -> u64 {
    BYTES.load(Relaxed)
}

/// The largest context kept: a page's at the levels a pool or writeback uses. A high
/// level's tables (megabytes at 19 and above) are freed after each use.
const KEPT_BYTES_MAX: u64 = 256 << 10;

/// Put a context back (`size` it takes now, `was` when it was taken), or drop it if enough
/// are kept or it is too large to keep.
fn put_back<T>(shelf: &Mutex<Vec<T>>, ctx: T, size: u64, was: u64) {
    let mut free = shelf.lock();
    if free.len() < *KEPT && size <= KEPT_BYTES_MAX {
        free.push(ctx);
        BYTES.fetch_add(size, Relaxed);
        BYTES.fetch_sub(was, Relaxed);
    } else {
        drop(free);
        BYTES.fetch_sub(was, Relaxed);
    }
}

fn internal(code: usize) -> CompressError {
    CompressError::Corrupt(format!("zstd: {}", zstd_safe::get_error_name(code)))
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

impl Compressor for Zstd {
    fn spec(&self) -> CompressorSpec {
        CompressorSpec {
            algorithm: Algorithm::Zstd,
            level: self.level,
        }
    }

    fn compress(&self, src: &[u8], dst: &mut [u8]) -> Result<usize, CompressError> {
        let taken = CCTXS.lock().pop();
        // A new context is at zstd's default level (3) until set.
        let (mut cctx, mut level, was) = taken.unwrap_or_else(|| (CCtx::create(), 3, 0));
        let result = match level == self.level {
            true => Ok(()),
            false => cctx
                .set_parameter(CParameter::CompressionLevel(self.level))
                .map(|_| level = self.level)
                .map_err(internal),
        }
        .and_then(|()| {
            // With valid input the only way a one-shot compression fails is a destination
            // smaller than the frame (zstd's dstSize_tooSmall); anything else is internal.
            cctx.compress2(dst, src).map_err(|code| {
                if zstd_safe::get_error_name(code).contains("too small") {
                    CompressError::DoesNotFit(dst.len())
                } else {
                    internal(code)
                }
            })
        });
        let size = cctx.sizeof() as u64;
        put_back(&CCTXS, (cctx, level, size), size, was);
        result
    }

    fn decompress(&self, src: &[u8], dst: &mut [u8]) -> Result<usize, CompressError> {
        let taken = DCTXS.lock().pop();
        let (mut dctx, was) = taken.unwrap_or_else(|| (DCtx::create(), 0));
        let result = dctx.decompress(dst, src).map_err(internal);
        let size = dctx.sizeof() as u64;
        put_back(&DCTXS, (dctx, size), size, was);
        result
    }
}
