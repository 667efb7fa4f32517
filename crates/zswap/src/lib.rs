//! The uzswap engine: the Linux kernel's zswap, rebuilt in safe Rust and testable without
//! userfaultfd. It owns the codecs (`compress`), the compressed pool (`zsmalloc`), the swap
//! layer (`swap`: swap cache, slots, backing devices) and the zswap logic itself
//! (`zswap`: store, load, invalidate, writeback, shrinker, limits), with the kernel's names
//! for every tunable (`params`) and statistic (`stats`).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod compress;
pub mod lock_order;
pub mod params;
pub mod scratch;
pub mod sparse;
pub mod stats;
pub mod swap;
pub mod zsmalloc;
pub mod zswap;

pub use crate::zswap::{Zswap, ZswapConfig, ZswapGroup};

/// The page size everything here works in: uffd's, the one page size of uzswap.
pub use uffd::PAGE_SIZE;
