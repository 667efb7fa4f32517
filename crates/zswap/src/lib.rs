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

/// Make this thread's thread-locals with destructors now, without using any (nothing is
/// charged for them): their first use registers the destructor with glibc, which takes the
/// loader's lock, and a thread that serves faults must never wait for that lock, which a
/// program thread may hold while it faults (dlopen allocates under it). A region runs this
/// first on each of its threads.
pub fn touch_thread_locals() {
    crate::swap::file::touch_thread_locals();
    crate::swap::segments::touch_thread_locals();
    crate::zswap::touch_thread_locals();
    crate::compress::touch_thread_locals();
}

/// The page size everything here works in: uffd's, the one page size of uzswap.
pub use uffd::PAGE_SIZE;
