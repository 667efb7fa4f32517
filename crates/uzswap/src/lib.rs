//! uzswap: zswap, the Linux kernel's compressed swap cache, in userspace.
//!
//! This crate is what a program depends on. A [`Region`] is memory that behaves like ordinary
//! memory under a limit: past it, cold pages are compressed into an in-RAM pool, and when the
//! pool is full the coldest are written back to an unnamed swap file; an access faults
//! through userfaultfd and the page comes back.
//!
//! ```
//! use uzswap::{Region, RegionConfig};
//!
//! // 32 MiB of memory held in at most 8 MiB.
//! let mut region = Region::new(32 << 20, RegionConfig::new(8 << 20))?;
//! let memory = region.as_mut_slice();
//! memory.fill(7);
//! assert!(memory.iter().all(|&b| b == 7));
//! println!("{}", region.zswap().stats()); // zswpout, zswpin, ... as /proc/vmstat lines
//! println!("{}", region.stats()); // the region's faults, evictions, fault latency
//! # Ok::<(), uzswap::RegionError>(())
//! ```
//!
//! The engine alone, without userfaultfd, is [`Zswap`]. The `uzswap` command (`uzswap run`,
//! `uzswap stat`, the benchmarks) is the `uzswap-cli` crate; this one carries none of it.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub use region::{
    ConfigError, Region, RegionConfig, RegionError, RegionStatsSnapshot, Usage, UsageProbe,
};
pub use zswap::compress::CompressorSpec;
pub use zswap::params::Params as ZswapParams;
pub use zswap::stats::StatsSnapshot as ZswapStats;
pub use zswap::{Zswap, ZswapConfig, ZswapGroup, PAGE_SIZE};
