//! Managed memory regions: memory that behaves like ordinary memory while the zswap engine
//! holds its cold pages. A region joins a userfaultfd (the `uffd` crate, whose unsafe code
//! wraps the system calls) to a zswap group (the `zswap` crate).
//!
//! The parts, each owning its state (inner.rs assembles them and is the only file that
//! sees them all; lock_order.rs gives the order of their locks):
//! - the range and every userfaultfd call on it (mapping.rs), and when it is registered
//!   (registration.rs: at once, or lazily, the pages present then adopted: adopt.rs);
//! - actions, each a type that borrows the parts it uses (a view, built by inner.rs): the
//!   handler threads (`Handler`, handler.rs), or the faulting threads themselves
//!   (in_thread.rs), hand faults to `Faults` (fault.rs), which swaps folios in (`SwapIn`,
//!   swapin.rs, and fork.rs); `Reclaim` moves them out to a memory limit (reclaim.rs);
//!   `Events` reads events and processes discards (events.rs); `Throttle` acts over the
//!   limit (throttle.rs); `Audit` checks the bookkeeping for tests (audit.rs);
//! - state: page flags (page_flags.rs), the LRU (lru.rs), staged folios (staged.rs),
//!   discards (discards.rs), deferred events (deferred.rs), read failures
//!   (read_failures.rs), reclaim's waits (reclaim_wait.rs), the spare handler (spare.rs),
//!   the threads started once needed (lazy_threads.rs), the in-thread servers' reclaim slots
//!   and scratch (serving_threads.rs), the charge against the limit (`Meter`, charge.rs),
//!   the folio size (geometry.rs);
//! - policies, which decide and never touch the mapping: clean folios (clean.rs),
//!   incompressible folios (incompressible.rs), readahead and drop-behind (readahead.rs), the
//!   working set's refault detection (workingset.rs), how much of a folio a fault brings
//!   (swapin_window.rs);
//! - the limit past reclaim: the policy, the hard limit and its events (over_limit.rs).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod adopt;
#[cfg(feature = "test-hooks")]
mod audit;
mod busy_poll;
mod charge;
mod clean;
mod config;
mod deferred;
mod discards;
mod error;
mod events;
mod fault;
mod folio_buf;
mod folio_queue;
mod fork;
mod geometry;
mod handler;
mod in_thread;
mod incompressible;
mod inner;
mod lazy_threads;
mod lock_order;
mod lru;
mod mapping;
mod memory;
mod mmap_changing;
mod over_limit;
mod page_flags;
mod pool_share;
mod read_failures;
mod readahead;
mod reclaim;
mod reclaim_wait;
mod region;
mod registration;
#[cfg(target_arch = "x86_64")]
mod remote_region;
mod serving_threads;
mod shared_folios;
mod spare;
mod staged;
mod stats;
mod swapin;
mod swapin_window;
mod threads;
mod throttle;
mod unevictable;
mod workingset;
mod written_bits;

pub use charge::Usage;
pub use config::{ConfigError, Policies, RegionConfig, SwapFormat};
pub use error::RegionError;
pub use over_limit::{OnLimit, OverLimit, SharedLimit};
pub use region::{ForkGuard, Region, UsageProbe, STATS_HEADER};
#[cfg(target_arch = "x86_64")]
pub use remote_region::{RemoteForkGuard, RemoteRegion};
pub use stats::RegionStatsSnapshot;
pub use zswap::params::Writethrough;
