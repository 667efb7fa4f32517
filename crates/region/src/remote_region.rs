//! A region of another program's memory, served from this process: the program loads nothing
//! of uzswap's (a static binary, a Go program), and the engine, its pool and the region's
//! threads live here (uffd::remote). It is a `Region` over a range of the program, with the
//! parts that act on memory pointed there (memory.rs): the program's userfaultfd, its page
//! tables and memory read through `/proc/PID`, staging in the program. Faults are served by
//! handler threads (not in the program's threads, which run nothing of ours).
//!
//! The program's own `munmap`, `madvise(MADV_DONTNEED)` and `mremap` of the range reach the
//! region as events, as they do for a region of this process.

use std::ops::Range;
use std::sync::Arc;

use uffd::remote::RemoteProcess;
use uffd::{Features, UffdError};
use zswap::{Zswap, ZswapGroup, PAGE_SIZE};

use crate::charge::Usage;
use crate::config::{ConfigError, RegionConfig};
use crate::error::RegionError;
use crate::memory::Memory;
use crate::region::{Region, UsageProbe};
use crate::stats::RegionStatsSnapshot;

/// A `RemoteRegion` made safe to fork (`RemoteRegion::prepare_fork`): dropping it lets
/// reclaim go on and stops the range from being inherited again.
pub struct RemoteForkGuard<'a> {
    region: &'a RemoteRegion,
    _held_off: crate::lock_order::RwLockWriteGuard<'a, ()>,
}

impl Drop for RemoteForkGuard<'_> {
    fn drop(&mut self) {
        let range = self.region.range();
        let _ = self
            .region
            .process()
            .madvise(range.start, range.len(), libc::MADV_DONTFORK);
    }
}

/// A region over a range of a program served from this process. Dropping it kills the
/// program: its pages moved out could not come back, and once nothing serves the range its
/// faults would read zeros.
pub struct RemoteRegion(Region);

impl Drop for RemoteRegion {
    fn drop(&mut self) {
        self.0.process().kill();
    }
}

impl std::fmt::Debug for RemoteRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl RemoteRegion {
    /// The features the program's userfaultfd must be made with (`RemoteProcess::spawn`)
    /// for a region under `config`: what a region of this process gets from the kernel.
    pub fn features(config: &RegionConfig) -> Result<Features, RegionError> {
        Ok(Region::uffd_builder(config).create()?.features())
    }

    /// A region over `range` of `process`: private anonymous memory, mapped, page aligned and
    /// a whole number of folios long, that nothing serves yet. From here on the program's
    /// faults there are served by this region.
    pub fn new(
        process: Arc<RemoteProcess>,
        range: Range<usize>,
        config: RegionConfig,
    ) -> Result<RemoteRegion, RegionError> {
        if config.in_thread_faults {
            return Err(ConfigError {
                field: "in_thread_faults",
                reason: "the threads of a program served from outside run nothing of uzswap's"
                    .into(),
            }
            .into());
        }
        let len = range.len();
        if !range.start.is_multiple_of(PAGE_SIZE) || !len.is_multiple_of(config.folio_size) {
            return Err(ConfigError {
                field: "size",
                reason: format!(
                    "{range:#x?} is not page aligned and a whole number of {}-byte folios",
                    config.folio_size
                ),
            }
            .into());
        }
        config.validate(len)?;
        // Base pages only, as `Region::new` keeps its own (a huge page under a folio would
        // be split by every move that evicts part of it).
        process
            .madvise(range.start, len, libc::MADV_NOHUGEPAGE)
            .map_err(|source| UffdError::Os {
                op: "madvise(MADV_NOHUGEPAGE) in the program",
                source,
            })?;
        let uffd = process.uffd().try_clone()?;
        let wanted = Self::features(&config)?;
        if !uffd.features().contains(wanted) {
            return Err(UffdError::MissingFeatures {
                missing: wanted.difference(uffd.features()),
            }
            .into());
        }
        Region::over(Memory::Program { process, range }, len, uffd, config).map(RemoteRegion)
    }

    /// The range, in the program.
    pub fn range(&self) -> Range<usize> {
        let start = self.0.as_ptr() as usize;
        start..start + self.0.len()
    }

    /// `mprotect` of `len` bytes at `offset` of the range in the program, as
    /// `Region::protect`: pages under another protection than read-write stay resident,
    /// off reclaim's queue.
    pub fn protect(&self, offset: usize, len: usize, prot: i32) -> std::io::Result<()> {
        let addr = self.range().start + offset;
        self.0.protect_with(offset, len, prot, || {
            self.process().mprotect(addr, len, prot)
        })
    }

    /// Whether the region holds nothing for the `len` bytes at `offset` (`Region::holds_nothing`):
    /// they read as zero. A hint, read without locks.
    pub fn holds_nothing(&self, offset: usize, len: usize) -> bool {
        self.0.holds_nothing(offset, len)
    }

    /// Make the range safe for the program to fork, as `Region::prepare_fork` does: reclaim
    /// is held off and every evicted page brought back, and the range is inherited by a
    /// child (a plain copy: its pages as they were at the fork), until the guard drops. Call
    /// it while the fork waits (its system call stopped for this process to answer) and
    /// drop the guard once the child is made.
    pub fn prepare_fork(&self) -> std::io::Result<RemoteForkGuard<'_>> {
        let held_off = self.0.bring_all_back_for_fork();
        let range = self.range();
        self.process()
            .madvise(range.start, range.len(), libc::MADV_DOFORK)?;
        Ok(RemoteForkGuard {
            region: self,
            _held_off: held_off,
        })
    }

    /// The program.
    pub fn process(&self) -> &Arc<RemoteProcess> {
        self.0.process()
    }

    /// The statistics as `uzswap stat` reads them (`Region::stats_text`).
    pub fn stats_text(&self, usage: &Usage, memory_high: u64, memory_max: u64) -> String {
        self.0.stats_text(usage, memory_high, memory_max)
    }

    /// The memory limit in bytes.
    pub fn limit(&self) -> u64 {
        self.0.limit()
    }

    /// Change the memory limit and the hard limit (`Region::set_limits`).
    pub fn set_limits(&self, limit: u64, memory_max: Option<u64>) {
        self.0.set_limits(limit, memory_max);
    }

    /// Bytes held in memory now, by kind: the program's resident pages in the range, and
    /// what this process holds for it.
    pub fn usage(&self) -> Usage {
        self.0.usage()
    }

    /// A handle that reads `usage` from another thread.
    pub fn usage_probe(&self) -> UsageProbe {
        self.0.usage_probe()
    }

    /// The engine, for its tunables and kernel-named statistics.
    pub fn zswap(&self) -> &Zswap {
        self.0.zswap()
    }

    /// The engine group of this region.
    pub fn group(&self) -> &ZswapGroup {
        self.0.group()
    }

    /// A copy of the region's own statistics.
    pub fn stats(&self) -> RegionStatsSnapshot {
        self.0.stats()
    }

    /// Reclaim until the region holds at most `target` bytes (`Region::reclaim_to`).
    pub fn reclaim_to(&self, target: u64) {
        self.0.reclaim_to(target);
    }

    /// Check where every page is against the region's counts (`Region::audit`). Call it with
    /// the program stopped.
    #[cfg(feature = "test-hooks")]
    pub fn audit(&self) -> Result<(), String> {
        self.0.audit()
    }
}
