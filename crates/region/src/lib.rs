//! Managed memory regions: memory that behaves like ordinary memory while the zswap engine
//! holds its cold pages. A region joins a userfaultfd (the `uffd` crate, whose unsafe code
//! wraps the system calls) to a zswap group (the `zswap` crate).
//!
//! The parts, each owning its state (inner.rs holds them; lock_order.rs gives the order of
//! their locks):
//! - the range and every userfaultfd call on it (mapping.rs);
//! - actions: the handler threads (handler.rs), or the faulting threads themselves
//!   (in_thread.rs), hand faults to fault.rs, which swaps folios in
//!   (swapin.rs); reclaim moves them out to a memory limit (reclaim.rs); events.rs reads
//!   events and processes discards;
//! - state: page flags (page_flags.rs), the LRU (lru.rs), staged folios (staged.rs),
//!   discards (discards.rs), deferred events (deferred.rs), read failures
//!   (read_failures.rs), reclaim's waits (reclaim_wait.rs), the spare handler (spare.rs),
//!   the threads started once needed (lazy_threads.rs), the in-thread servers' reclaim slots
//!   and scratch (serving_threads.rs), what the region charges as it goes (charge.rs);
//! - policies, which decide and never touch the mapping: clean folios (clean.rs),
//!   incompressible folios (incompressible.rs), readahead and drop-behind (readahead.rs), the
//!   working set's refault detection (workingset.rs), how much of a folio a fault brings
//!   (swapin_window.rs);
//! - the limit past reclaim: the policy, the hard limit and its events (over_limit.rs), and
//!   a fault's throttling or kill (throttle.rs).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "test-hooks")]
mod audit;
mod busy_poll;
mod charge;
mod clean;
mod config;
mod deferred;
mod discards;
mod events;
mod fault;
mod folio_buf;
mod folio_queue;
mod fork;
mod handler;
mod in_thread;
mod incompressible;
mod inner;
mod lazy_threads;
mod lock_order;
mod lru;
mod mapping;
mod memory;
mod over_limit;
mod page_flags;
mod pool_share;
mod read_failures;
mod readahead;
mod reclaim;
mod reclaim_wait;
mod region;
#[cfg(target_arch = "x86_64")]
mod remote_region;
mod serving_threads;
mod spare;
mod staged;
mod stats;
mod swapin;
mod swapin_window;
mod threads;
mod throttle;
mod unevictable;
mod workingset;

pub use config::{ConfigError, Policies, RegionConfig, SwapFormat};
pub use inner::Usage;
pub use over_limit::{OnLimit, OverLimit, SharedLimit};
pub use region::{ForkGuard, Region, RegionError, UsageProbe};
#[cfg(target_arch = "x86_64")]
pub use remote_region::{RemoteForkGuard, RemoteRegion};
pub use stats::RegionStatsSnapshot;
pub use zswap::params::Writethrough;
