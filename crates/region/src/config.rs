//! How a region is set up: its memory limit, folio size, compressor, writeback or
//! writethrough, pool limit and swap file directory.

use std::path::PathBuf;
use std::sync::Arc;

use zswap::compress::CompressorSpec;
use zswap::swap::BackingDevice;

/// The configuration of a [`Region`](crate::Region). `RegionConfig::new(limit)` gives the
/// defaults; the builder methods change one field each.
#[derive(Debug, Clone)]
pub struct RegionConfig {
    /// Bytes the region may hold in memory: resident pages + swap cache + pool (like
    /// memory.high, with the pool charged as cgroup v2 does).
    pub memory_limit: u64,
    /// The unit of reclaim and swap-in: a power of two from 4 KiB to 2 MiB.
    pub folio_size: usize,
    pub compressor: CompressorSpec,
    /// memory.zswap.writeback: whether pages may go to the swap file.
    pub writeback: bool,
    /// Write every stored page to the swap file at store time too.
    pub writethrough: bool,
    /// Pool limit, percent of `memory_limit`.
    pub max_pool_percent: u32,
    /// Directory of the (unnamed) swap file; the system temp directory if None.
    pub swap_dir: Option<PathBuf>,
    /// Capacity of the swap file; the region's size if None.
    pub swap_size: Option<u64>,
    /// Threads serving faults.
    pub fault_threads: usize,
    /// Background reclaim threads. More than one, because an eviction that goes to the swap
    /// file waits for the disk (direct I/O): measured on `bench usemem` 2x512M, 4 threads
    /// wrote 690-780 MB/s where 1 wrote 600-660.
    pub kswapd_threads: usize,
    /// Force user-mode-only userfaultfd (as an unprivileged process gets).
    pub user_mode_only: bool,
    /// A backing device to use instead of a swap file (tests inject faults with it).
    pub device: Option<Arc<dyn BackingDevice>>,
    /// Keep folios read back from the swap file clean (write-protected, with their disk copy)
    /// so that reclaiming them unwritten costs no store (clean.rs). On by default.
    pub keep_clean: bool,
    /// Reclaim the folios a sequential scan has passed before the oldest ones (drop-behind,
    /// readahead.rs), so a scan larger than the limit keeps hitting what it has not reached.
    /// On by default.
    pub drop_behind: bool,
    /// Give freed swap storage back to the file system, a whole cluster at a time (the
    /// kernel's `swapon --discard`). Off by default, as in the kernel: punching holes made
    /// every later write into them allocate blocks again.
    pub swap_discard: bool,
    /// Leave folios whose last store found them incompressible resident while compressible
    /// ones can go (incompressible.rs): with the pool charged to the limit, evicting them
    /// frees nothing. On by default.
    pub keep_incompressible: bool,
    /// With 4 KiB folios, evict a cold folio's cold neighbours with it, up to 64 KiB with one
    /// move and one TLB flush (reclaim.rs, `with_neighbours`). On by default.
    pub batch_eviction: bool,
}

impl RegionConfig {
    pub fn new(memory_limit: u64) -> Self {
        RegionConfig {
            memory_limit,
            folio_size: 64 << 10,
            compressor: CompressorSpec::default(),
            writeback: true,
            writethrough: false,
            max_pool_percent: 20,
            swap_dir: None,
            swap_size: None,
            fault_threads: 2,
            kswapd_threads: 4,
            user_mode_only: false,
            device: None,
            keep_clean: true,
            drop_behind: true,
            swap_discard: false,
            keep_incompressible: true,
            batch_eviction: true,
        }
    }

    pub fn kswapd_threads(mut self, n: usize) -> Self {
        self.kswapd_threads = n;
        self
    }

    pub fn keep_clean(mut self, on: bool) -> Self {
        self.keep_clean = on;
        self
    }

    pub fn drop_behind(mut self, on: bool) -> Self {
        self.drop_behind = on;
        self
    }

    pub fn swap_discard(mut self, on: bool) -> Self {
        self.swap_discard = on;
        self
    }

    pub fn keep_incompressible(mut self, on: bool) -> Self {
        self.keep_incompressible = on;
        self
    }

    pub fn batch_eviction(mut self, on: bool) -> Self {
        self.batch_eviction = on;
        self
    }

    pub fn folio_size(mut self, bytes: usize) -> Self {
        self.folio_size = bytes;
        self
    }
    pub fn compressor(mut self, spec: CompressorSpec) -> Self {
        self.compressor = spec;
        self
    }
    pub fn writeback(mut self, on: bool) -> Self {
        self.writeback = on;
        self
    }
    pub fn writethrough(mut self, on: bool) -> Self {
        self.writethrough = on;
        self
    }
    pub fn max_pool_percent(mut self, percent: u32) -> Self {
        self.max_pool_percent = percent;
        self
    }
    pub fn swap_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.swap_dir = Some(dir.into());
        self
    }
    pub fn fault_threads(mut self, n: usize) -> Self {
        self.fault_threads = n;
        self
    }
    pub fn user_mode_only(mut self, on: bool) -> Self {
        self.user_mode_only = on;
        self
    }
    pub fn device(mut self, device: Arc<dyn BackingDevice>) -> Self {
        self.device = Some(device);
        self
    }
}
