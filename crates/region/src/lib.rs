//! Managed memory regions: memory that behaves like ordinary memory while the zswap engine
//! holds its cold pages. A region joins a userfaultfd (the `uffd` crate, where all unsafe
//! code lives) to a zswap group (the `zswap` crate): the range and every userfaultfd call on
//! it (mapping.rs), fault handling (fault.rs), reclaim to a
//! memory limit (reclaim.rs), the region's swap cache of staged folios (swapcache.rs), clean
//! folios that keep their disk copy (clean.rs), incompressible folios left resident
//! (incompressible.rs), readahead and drop-behind for sequential
//! scans (readahead.rs), the spare handler that serves events while the others wait on the
//! disk (spare.rs) and the discard and move events (events.rs).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod charge;
mod clean;
mod config;
mod events;
mod fault;
mod folio_queue;
mod incompressible;
mod mapping;
mod readahead;
mod reclaim;
mod region;
mod spare;
mod stats;
mod swapcache;

pub use config::{ConfigError, RegionConfig};
pub use region::{Region, RegionError, Usage, UsageProbe};
pub use stats::RegionStatsSnapshot;
