//! Tunables, with the kernel's names and defaults (`/sys/module/zswap/parameters`), changeable
//! at runtime from any thread. Per-group tunables (`writeback`, `zswap_max`, like
//! `memory.zswap.writeback` and `memory.zswap.max`) live on the group.
//!
//! Nothing on the load path reads a tunable (DESIGN invariant 5): stored data describes its
//! own format, so any change here, in any order, can never corrupt a page.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering::Relaxed};

use parking_lot::RwLock;

use crate::compress::CompressorSpec;

/// A tunable name or value that was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    /// No tunable has this name.
    #[error("unknown tunable '{0}': known are {known}", known = Params::NAMES.join(", "))]
    Unknown(String),
    /// The tunable exists but the value is not one it takes.
    #[error("bad value '{value}' for {name}: {why}")]
    BadValue {
        /// The tunable's kernel name.
        name: &'static str,
        /// The value as given.
        value: String,
        /// Why it was refused.
        why: String,
    },
}

/// `writethrough` (ours, not the kernel's): whether a stored page is also written to the
/// backing device at once, so that it leaves the pool later without a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Writethrough {
    /// Never (`N`, the default): a page is written when the pool is full and it is the
    /// coldest (writeback).
    #[default]
    Off,
    /// Always (`Y`).
    On,
    /// By how full the pool is and where its pages go (`auto`): written through while the
    /// pool is above its accept threshold, where each store pushes an older page out and a
    /// page written at store time leaves without a write, as the writethrough patch proposed
    /// ("changing from writeback to writethrough based on the zswap % full"), and while its
    /// pages have been leaving for the disk (at least half as many as were stored, over the
    /// last 4 MiB stored: zswap/adaptive.rs); written back otherwise, where most pages come
    /// back or never leave the pool and writing them would be wasted.
    Auto,
}

impl Writethrough {
    const ALL: [Writethrough; 3] = [Writethrough::Off, Writethrough::On, Writethrough::Auto];

    fn from_u8(v: u8) -> Self {
        Self::ALL[v as usize]
    }

    /// Its sysfs spelling: `N`, `Y` or `auto`.
    pub fn as_str(self) -> &'static str {
        match self {
            Writethrough::Off => "N",
            Writethrough::On => "Y",
            Writethrough::Auto => "auto",
        }
    }
}

/// `auto`, or a boolean in any of the kernel's spellings (`Y`, `1`, `off`, ...).
impl std::str::FromStr for Writethrough {
    type Err = ParamError;

    fn from_str(value: &str) -> Result<Self, ParamError> {
        if value.trim() == "auto" {
            return Ok(Writethrough::Auto);
        }
        match parse_bool("writethrough", value) {
            Ok(true) => Ok(Writethrough::On),
            Ok(false) => Ok(Writethrough::Off),
            Err(_) => Err(ParamError::BadValue {
                name: "writethrough",
                value: value.to_string(),
                why: "give Y, N or auto".into(),
            }),
        }
    }
}

/// `compress_threads` at most: the storing thread and the helpers (parallel.rs).
pub const MAX_COMPRESS_THREADS: u32 = 8;

/// `compress_threads` by default.
const DEFAULT_COMPRESS_THREADS: u32 = 1;

/// `writeback_compressor` (ours, not the kernel's): the codec a compressed page is encoded
/// with when it goes below the pool in segments, where it is read rarely and its bytes cost a
/// write, disk space or another machine's memory. An object is re-encoded only where that
/// makes it smaller; a raw page stays raw. Loads never read it: each object names its codec.
///
/// A trade of CPU for bytes, so not the default: zstd:-1 makes lz4's objects 1.2-3.6x
/// smaller, and on a 2-CPU machine costs about a third of the throughput of workloads bound
/// by the tier (DESIGN.md section 7). For a cold set that must fit a cluster's memory, or a
/// slow link, the bytes are what counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WritebackCompressor {
    /// `same` (the default): as the pool holds them.
    #[default]
    Same,
    /// This codec.
    Codec(CompressorSpec),
}

impl WritebackCompressor {
    /// The codec to re-encode with; None: as the pool holds them.
    pub fn codec(self) -> Option<CompressorSpec> {
        match self {
            WritebackCompressor::Same => None,
            WritebackCompressor::Codec(c) => Some(c),
        }
    }
}

impl std::fmt::Display for WritebackCompressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WritebackCompressor::Same => f.write_str("same"),
            WritebackCompressor::Codec(c) => write!(f, "{c}"),
        }
    }
}

/// `same`, or a codec as `CompressorSpec` parses it.
impl std::str::FromStr for WritebackCompressor {
    type Err = ParamError;

    fn from_str(value: &str) -> Result<Self, ParamError> {
        match value.trim() {
            "same" => Ok(WritebackCompressor::Same),
            codec => codec.parse().map(WritebackCompressor::Codec).map_err(
                |e: crate::compress::UnknownCompressor| ParamError::BadValue {
                    name: "writeback_compressor",
                    value: value.to_string(),
                    why: format!("give same, or a codec: {e}"),
                },
            ),
        }
    }
}

/// The global tunables of one zswap instance.
#[derive(Debug)]
pub struct Params {
    enabled: AtomicBool,
    compressor: RwLock<CompressorSpec>,
    max_pool_percent: AtomicU32,
    accept_threshold_percent: AtomicU32,
    shrinker_enabled: AtomicBool,
    /// A `Writethrough`, as its index in `Writethrough::ALL`.
    writethrough: AtomicU8,
    compress_threads: AtomicU32,
    writeback_compressor: RwLock<WritebackCompressor>,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            enabled: AtomicBool::new(true),
            compressor: RwLock::new("lz4".parse().expect("lz4 is always built")),
            max_pool_percent: AtomicU32::new(20),
            accept_threshold_percent: AtomicU32::new(90),
            shrinker_enabled: AtomicBool::new(false),
            writethrough: AtomicU8::new(Writethrough::Off as u8),
            compress_threads: AtomicU32::new(DEFAULT_COMPRESS_THREADS),
            writeback_compressor: RwLock::new(WritebackCompressor::Same),
        }
    }
}

fn parse_bool(name: &'static str, value: &str) -> Result<bool, ParamError> {
    // The kernel's param_set_bool accepts these spellings.
    match value.trim() {
        "1" | "Y" | "y" | "true" | "on" => Ok(true),
        "0" | "N" | "n" | "false" | "off" => Ok(false),
        _ => Err(ParamError::BadValue {
            name,
            value: value.to_string(),
            why: "expected Y/N, 1/0, true/false or on/off".into(),
        }),
    }
}

fn parse_percent(name: &'static str, value: &str, min: u32) -> Result<u32, ParamError> {
    parse_in(name, value, min, 100)
}

/// A whole number from `min` to `max`.
fn parse_in(name: &'static str, value: &str, min: u32, max: u32) -> Result<u32, ParamError> {
    let bad = |why: String| ParamError::BadValue {
        name,
        value: value.to_string(),
        why,
    };
    let v: u32 = value
        .trim()
        .parse()
        .map_err(|_| bad("expected a whole number".into()))?;
    if !(min..=max).contains(&v) {
        return Err(bad(format!("must be between {min} and {max}")));
    }
    Ok(v)
}

impl Params {
    /// Every tunable name `set` and `get` take.
    pub const NAMES: &'static [&'static str] = &[
        "enabled",
        "compressor",
        "max_pool_percent",
        "accept_threshold_percent",
        "shrinker_enabled",
        "writethrough",
        "compress_threads",
        "writeback_compressor",
    ];

    /// `enabled`: whether stores go to the pool at all (default on). Loads and invalidations of
    /// pages already stored go on while it is off.
    pub fn enabled(&self) -> bool {
        self.enabled.load(Relaxed)
    }
    /// Set `enabled`.
    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Relaxed)
    }
    /// `compressor`: the codec new stores use (default `lz4` at its default level).
    pub fn compressor(&self) -> CompressorSpec {
        *self.compressor.read()
    }
    pub(crate) fn set_compressor_spec(&self, spec: CompressorSpec) {
        *self.compressor.write() = spec;
    }
    /// `max_pool_percent`: the pool's maximum size, in percent of the configured total memory
    /// (default 20).
    pub fn max_pool_percent(&self) -> u32 {
        self.max_pool_percent.load(Relaxed)
    }
    /// Set `max_pool_percent` (0 to 100).
    pub fn set_max_pool_percent(&self, percent: u32) -> Result<(), ParamError> {
        let v = parse_percent("max_pool_percent", &percent.to_string(), 0)?;
        self.max_pool_percent.store(v, Relaxed);
        Ok(())
    }
    /// `accept_threshold_percent`: once the pool has hit its maximum, stores are refused until it
    /// shrinks to this percentage of the maximum (default 90).
    pub fn accept_threshold_percent(&self) -> u32 {
        self.accept_threshold_percent.load(Relaxed)
    }
    /// Set `accept_threshold_percent` (0 to 100).
    pub fn set_accept_threshold_percent(&self, percent: u32) -> Result<(), ParamError> {
        let v = parse_percent("accept_threshold_percent", &percent.to_string(), 0)?;
        self.accept_threshold_percent.store(v, Relaxed);
        Ok(())
    }
    /// `shrinker_enabled`: whether the memory-pressure shrinker (`Zswap::shrinker_scan`) writes
    /// pages back (default off).
    pub fn shrinker_enabled(&self) -> bool {
        self.shrinker_enabled.load(Relaxed)
    }
    /// Set `shrinker_enabled`.
    pub fn set_shrinker_enabled(&self, on: bool) {
        self.shrinker_enabled.store(on, Relaxed)
    }
    /// `writethrough` (ours, not the kernel's): whether a stored page is also written to the
    /// backing device at once, so that evicting it later costs no write: never (the
    /// default), always, or by how full the pool is (`Writethrough`).
    pub fn writethrough(&self) -> Writethrough {
        Writethrough::from_u8(self.writethrough.load(Relaxed))
    }
    /// Set `writethrough` to always (true) or never (false).
    pub fn set_writethrough(&self, on: bool) {
        self.set_writethrough_mode(if on {
            Writethrough::On
        } else {
            Writethrough::Off
        })
    }
    /// Set `writethrough`.
    pub fn set_writethrough_mode(&self, mode: Writethrough) {
        self.writethrough.store(mode as u8, Relaxed)
    }

    /// `compress_threads` (ours, not the kernel's): how many threads may compress one large
    /// folio's pages at once, the storing thread included (parallel.rs); 1 compresses each
    /// folio in its storing thread alone. Only folios of at least 16 pages are cut, in parts of
    /// at least 8.
    pub fn compress_threads(&self) -> u32 {
        self.compress_threads.load(Relaxed)
    }
    /// Set `compress_threads` (1 to `MAX_COMPRESS_THREADS`).
    pub fn set_compress_threads(&self, n: u32) -> Result<(), ParamError> {
        self.set_plain("compress_threads", &n.to_string())
    }

    /// `writeback_compressor` (ours, not the kernel's): what a compressed page is encoded
    /// with when it goes below the pool in segments ([`WritebackCompressor`]; default
    /// `same`).
    pub fn writeback_compressor(&self) -> WritebackCompressor {
        *self.writeback_compressor.read()
    }
    /// Set `writeback_compressor`.
    pub fn set_writeback_compressor(&self, value: WritebackCompressor) {
        *self.writeback_compressor.write() = value;
    }

    /// Set a tunable by its kernel name from its sysfs spelling. `compressor` goes through
    /// `Zswap::set_param`, which also makes the new compressor current.
    pub(crate) fn set_plain(&self, name: &str, value: &str) -> Result<(), ParamError> {
        match name {
            "enabled" => self.set_enabled(parse_bool("enabled", value)?),
            "max_pool_percent" => self
                .max_pool_percent
                .store(parse_percent("max_pool_percent", value, 0)?, Relaxed),
            "accept_threshold_percent" => self.accept_threshold_percent.store(
                parse_percent("accept_threshold_percent", value, 0)?,
                Relaxed,
            ),
            "shrinker_enabled" => self.set_shrinker_enabled(parse_bool("shrinker_enabled", value)?),
            "compress_threads" => self.compress_threads.store(
                parse_in("compress_threads", value, 1, MAX_COMPRESS_THREADS)?,
                Relaxed,
            ),
            "writethrough" => self.set_writethrough_mode(value.parse()?),
            "writeback_compressor" => self.set_writeback_compressor(value.parse()?),
            _ => return Err(ParamError::Unknown(name.to_string())),
        }
        Ok(())
    }

    /// A tunable's value in its sysfs spelling.
    pub fn get(&self, name: &str) -> Result<String, ParamError> {
        let yn = |b: bool| if b { "Y" } else { "N" }.to_string();
        Ok(match name {
            "enabled" => yn(self.enabled()),
            "compressor" => self.compressor().to_string(),
            "max_pool_percent" => self.max_pool_percent().to_string(),
            "accept_threshold_percent" => self.accept_threshold_percent().to_string(),
            "shrinker_enabled" => yn(self.shrinker_enabled()),
            "writethrough" => self.writethrough().as_str().to_string(),
            "compress_threads" => self.compress_threads().to_string(),
            "writeback_compressor" => self.writeback_compressor().to_string(),
            _ => return Err(ParamError::Unknown(name.to_string())),
        })
    }

    /// Every tunable as `(name, value)`.
    pub fn list(&self) -> Vec<(&'static str, String)> {
        Self::NAMES
            .iter()
            .map(|n| (*n, self.get(n).expect("listed names are known")))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_kernels() {
        let p = Params::default();
        assert_eq!(p.get("enabled").unwrap(), "Y");
        assert_eq!(p.get("max_pool_percent").unwrap(), "20");
        assert_eq!(p.get("accept_threshold_percent").unwrap(), "90");
        assert_eq!(p.get("shrinker_enabled").unwrap(), "N");
        assert_eq!(p.get("writethrough").unwrap(), "N");
    }

    #[test]
    fn bad_values_are_refused_with_the_reason() {
        let p = Params::default();
        let e = p.set_plain("max_pool_percent", "101").unwrap_err();
        assert!(e.to_string().contains("between 0 and 100"), "{e}");
        assert!(p.set_plain("enabled", "maybe").is_err());
        let e = p.set_plain("zpool", "zbud").unwrap_err();
        assert!(e.to_string().contains("known are"), "{e}");
        assert_eq!(p.max_pool_percent(), 20);
    }

    #[test]
    fn sysfs_spellings_are_accepted() {
        let p = Params::default();
        p.set_plain("enabled", "N").unwrap();
        assert!(!p.enabled());
        p.set_plain("enabled", "1").unwrap();
        assert!(p.enabled());
        p.set_plain("accept_threshold_percent", "100").unwrap();
        assert_eq!(p.accept_threshold_percent(), 100);
    }

    #[test]
    fn writeback_compressor_is_same_or_a_codec() {
        let p = Params::default();
        assert_eq!(p.get("writeback_compressor").unwrap(), "same");
        assert_eq!(p.writeback_compressor().codec(), None);
        p.set_plain("writeback_compressor", "zstd:-1").unwrap();
        assert_eq!(
            p.writeback_compressor().codec(),
            Some("zstd:-1".parse().unwrap())
        );
        p.set_plain("writeback_compressor", "same").unwrap();
        assert_eq!(p.writeback_compressor().codec(), None);
        p.set_plain("writeback_compressor", "zstd:3").unwrap();
        assert_eq!(p.get("writeback_compressor").unwrap(), "zstd:3");
        let e = p.set_plain("writeback_compressor", "zip").unwrap_err();
        assert!(e.to_string().contains("give same"), "{e}");
        assert_eq!(p.get("writeback_compressor").unwrap(), "zstd:3");
    }
}
