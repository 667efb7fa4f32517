//! Compressors: the `Compressor` trait and the codecs behind the kernel's `compressor`
//! parameter names (`lz4`, `zstd`, `deflate`; `lzo` only with the opt-in `lzo` feature, since
//! all LZO code is GPL-2.0).
//!
//! A codec is chosen by a [`CompressorSpec`], written `NAME` or `NAME:LEVEL` (`zstd:-1`,
//! `deflate:6`). Each thread keeps one reusable context per codec and level, so a
//! `Compressor` is cheap to share across threads.
//!
//! The contract every codec keeps, because the engine relies on it:
//! - `compress` into a buffer that is too small is `DoesNotFit`, never a truncated stream (the
//!   engine compresses a page into 4095 bytes and stores it raw when it does not fit);
//! - `decompress` of any input, however corrupt, is a result, never a panic, and writes only
//!   inside `dst` (the engine then checks that it got exactly one page).

mod deflate;
mod lz4;
#[cfg(feature = "lzo")]
mod lzo;
mod zstd;

use std::fmt;
use std::ops::RangeInclusive;
use std::str::FromStr;
use std::sync::Arc;

/// Why a compression or decompression did not produce what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompressError {
    /// The output would not fit in the destination buffer (for a page: it does not compress).
    #[error("output does not fit in {0} bytes")]
    DoesNotFit(usize),
    /// The input is not a valid stream for this codec (corrupt or truncated). A codec's own
    /// internal failure while compressing (which valid levels make practically impossible)
    /// is reported here too, so that callers have one "this did not work" case to count.
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
    ///
    /// `lzo` only succeeds when the output fills `dst` exactly (its decoder checks the length
    /// it was told); the engine always decompresses a page into exactly one page.
    fn decompress(&self, src: &[u8], dst: &mut [u8]) -> Result<usize, CompressError>;
}

/// Codec families, spelled as the kernel's `compressor` parameter spells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// LZ4, the default (`lz4`).
    Lz4,
    /// Zstandard (`zstd`).
    Zstd,
    /// Raw deflate, the kernel's `deflate` format (libdeflate).
    Deflate,
    /// LZO (`lzo`), built with the `lzo` feature.
    #[cfg(feature = "lzo")]
    Lzo,
}

impl Algorithm {
    /// Every codec this build has, in the order `available()` lists them.
    pub const ALL: &'static [Algorithm] = &[
        Algorithm::Lz4,
        Algorithm::Zstd,
        Algorithm::Deflate,
        #[cfg(feature = "lzo")]
        Algorithm::Lzo,
    ];

    /// The kernel's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Lz4 => "lz4",
            Algorithm::Zstd => "zstd",
            Algorithm::Deflate => "deflate",
            #[cfg(feature = "lzo")]
            Algorithm::Lzo => "lzo",
        }
    }

    /// The level used when a spec names none: the fast end, as zswap wants (a page is
    /// compressed on the reclaim path, where latency matters more than the last few percent).
    pub fn default_level(self) -> i32 {
        match self {
            Algorithm::Lz4 => lz4::DEFAULT_LEVEL,
            Algorithm::Zstd => zstd::DEFAULT_LEVEL,
            Algorithm::Deflate => deflate::DEFAULT_LEVEL,
            #[cfg(feature = "lzo")]
            Algorithm::Lzo => lzo::DEFAULT_LEVEL,
        }
    }

    /// The levels the codec accepts (lz4 has only its default, 0).
    pub fn levels(self) -> RangeInclusive<i32> {
        match self {
            Algorithm::Lz4 => lz4::LEVELS,
            Algorithm::Zstd => zstd::levels(),
            Algorithm::Deflate => deflate::LEVELS,
            #[cfg(feature = "lzo")]
            Algorithm::Lzo => lzo::LEVELS,
        }
    }

    /// The spec of this codec at its default level.
    pub fn default_spec(self) -> CompressorSpec {
        CompressorSpec {
            algorithm: self,
            level: self.default_level(),
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A codec and its level. `Display` and `FromStr` round-trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CompressorSpec {
    /// The codec.
    pub algorithm: Algorithm,
    /// The codec's level; `Algorithm::levels` gives the range it accepts.
    pub level: i32,
}

/// An unknown or malformed compressor name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown compressor '{given}': available are {available}")]
pub struct UnknownCompressor {
    /// The name as given.
    pub given: String,
    /// The compressors this build has, with their level ranges, as a readable list.
    pub available: String,
}

impl UnknownCompressor {
    fn new(given: &str) -> Self {
        UnknownCompressor {
            given: given.to_string(),
            available: available_description(),
        }
    }
}

/// The names of the codecs this build has, as the kernel spells them.
pub fn available() -> &'static [&'static str] {
    &[
        "lz4",
        "zstd",
        "deflate",
        #[cfg(feature = "lzo")]
        "lzo",
    ]
}

/// "lz4, zstd, deflate (levels: zstd -131072..=22, deflate 0..=12)": the names first, since a
/// typo in the name is the common mistake, then the level ranges for the codecs that have them.
fn available_description() -> String {
    let names = available().join(", ");
    let levels: Vec<String> = Algorithm::ALL
        .iter()
        .filter(|a| a.levels().start() != a.levels().end())
        .map(|a| {
            let r = a.levels();
            format!(
                "{} {}..={} default {}",
                a.name(),
                r.start(),
                r.end(),
                a.default_level()
            )
        })
        .collect();
    format!("{names} (levels: {})", levels.join(", "))
}

impl FromStr for CompressorSpec {
    type Err = UnknownCompressor;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // Tolerate surrounding whitespace: a value echoed into a parameter file carries a
        // newline, and the kernel strips it too.
        let trimmed = s.trim();
        let (name, level) = match trimmed.split_once(':') {
            Some((name, level)) => (name, Some(level)),
            None => (trimmed, None),
        };
        let algorithm = Algorithm::ALL
            .iter()
            .copied()
            .find(|a| a.name() == name)
            .ok_or_else(|| UnknownCompressor::new(s))?;
        let level = match level {
            None => algorithm.default_level(),
            Some(text) => text
                .parse::<i32>()
                .ok()
                .filter(|l| algorithm.levels().contains(l))
                .ok_or_else(|| UnknownCompressor::new(s))?,
        };
        Ok(CompressorSpec { algorithm, level })
    }
}

impl fmt::Display for CompressorSpec {
    /// The canonical form: the bare name at the default level (what the kernel's parameter
    /// shows), `NAME:LEVEL` otherwise.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.level == self.algorithm.default_level() {
            write!(f, "{}", self.algorithm)
        } else {
            write!(f, "{}:{}", self.algorithm, self.level)
        }
    }
}

impl CompressorSpec {
    /// A spec with a checked level.
    pub fn new(algorithm: Algorithm, level: i32) -> Result<Self, UnknownCompressor> {
        if algorithm.levels().contains(&level) {
            Ok(CompressorSpec { algorithm, level })
        } else {
            Err(UnknownCompressor::new(&format!("{}:{level}", algorithm)))
        }
    }

    /// Bytes a thread keeps for this codec's contexts once it has compressed and
    /// decompressed pages with it (kept for the thread's life). zstd's are shared by the
    /// process's threads instead ([`shared_context_bytes`]).
    pub fn thread_context_bytes(self) -> u64 {
        match self.algorithm {
            Algorithm::Zstd => 0,
            Algorithm::Deflate => 256 << 10,
            _ => 16 << 10,
        }
    }

    /// Build the compressor. The fields are public, so a hand-built spec can carry a level
    /// the codec does not have; it is clamped into the codec's range (`FromStr` and `new`
    /// reject such levels instead), because building has no error to report it with.
    pub fn build(self) -> Arc<dyn Compressor> {
        let range = self.algorithm.levels();
        let level = self.level.clamp(*range.start(), *range.end());
        match self.algorithm {
            Algorithm::Lz4 => Arc::new(lz4::Lz4),
            Algorithm::Zstd => Arc::new(zstd::Zstd::new(level)),
            Algorithm::Deflate => Arc::new(deflate::Deflate::new(level)),
            #[cfg(feature = "lzo")]
            Algorithm::Lzo => Arc::new(lzo::Lzo::new(level)),
        }
    }
}

impl Default for CompressorSpec {
    /// lz4: the fastest codec every build has (the kernel's own build default, lzo, is
    /// opt-in here because of its license).
    fn default() -> Self {
        Algorithm::Lz4.default_spec()
    }
}

/// Bytes of the codec contexts the process's threads share (zstd's), alive now: charged to
/// each region that uses them.
pub fn shared_context_bytes() -> u64 {
    zstd::context_bytes()
}

/// `scratch::touch_thread_locals`, for the codecs' contexts.
pub(crate) fn touch_thread_locals() {
    deflate::touch_thread_locals();
}

#[cfg(test)]
mod tests;
