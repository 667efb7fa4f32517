//! Compressors: the `Compressor` trait and the codecs behind the kernel's `compressor`
//! parameter names (`lz4`, `zstd`, `deflate`; `lzo` only with the opt-in `lzo` feature, since
//! all LZO code is GPL-2.0).
//!
//! A codec is chosen by a [`CompressorSpec`], written `NAME` or `NAME:LEVEL` (`zstd:-1`,
//! `deflate:6`). Each thread keeps one reusable context per codec and level, so a
//! `Compressor` is cheap to share across threads.

// Implemented in lz4.rs, zstd.rs, deflate.rs, lzo.rs.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// Why a compression or decompression did not produce what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompressError {
    /// The output would not fit in the destination buffer (for a page: it does not compress).
    #[error("output does not fit in {0} bytes")]
    DoesNotFit(usize),
    /// The input is not a valid stream for this codec (corrupt or truncated).
    #[error("corrupt or truncated input: {0}")]
    Corrupt(String),
}

/// A compressor. Implementations are stateless handles: per-thread contexts live inside.
pub trait Compressor: Send + Sync + fmt::Debug {
    /// The spec this compressor was built from.
    fn spec(&self) -> CompressorSpec;
    /// Compress all of `src` into `dst`. Returns the compressed length, or
    /// `DoesNotFit` when the output would be longer than `dst`.
    fn compress(&self, src: &[u8], dst: &mut [u8]) -> Result<usize, CompressError>;
    /// Decompress `src` into `dst`; returns the number of bytes written. Corrupt input is an
    /// error, never a panic, and never writes outside `dst`.
    fn decompress(&self, src: &[u8], dst: &mut [u8]) -> Result<usize, CompressError>;
}

/// Codec families, spelled as the kernel's `compressor` parameter spells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    Lz4,
    Zstd,
    Deflate,
    #[cfg(feature = "lzo")]
    Lzo,
}

/// A codec and its level. `Display` and `FromStr` round-trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CompressorSpec {
    pub algorithm: Algorithm,
    pub level: i32,
}

/// An unknown or malformed compressor name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown compressor '{given}': available are {available}")]
pub struct UnknownCompressor {
    pub given: String,
    pub available: String,
}

pub fn available() -> &'static [&'static str] {
    todo!()
}

impl FromStr for CompressorSpec {
    type Err = UnknownCompressor;
    fn from_str(_s: &str) -> Result<Self, Self::Err> {
        todo!()
    }
}

impl fmt::Display for CompressorSpec {
    fn fmt(&self, _f: &mut fmt::Formatter<'_>) -> fmt::Result {
        todo!()
    }
}

impl CompressorSpec {
    /// Build the compressor.
    pub fn build(self) -> Arc<dyn Compressor> {
        todo!()
    }
}
