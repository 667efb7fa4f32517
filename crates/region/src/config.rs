//! How a region is set up: its memory limit, folio size, compressor, writeback or
//! writethrough, pool limit and swap file directory.

use std::path::PathBuf;
use std::sync::Arc;

use zswap::compress::CompressorSpec;
use zswap::swap::BackingDevice;
use zswap::PAGE_SIZE;

use crate::charge::FixedCharge;

/// A configuration a region cannot honour: the field, and what it must be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct ConfigError {
    /// The `RegionConfig` field at fault (`size` for the region's size itself).
    pub field: &'static str,
    /// What is wrong and what the field accepts.
    pub reason: String,
}

fn invalid(field: &'static str, reason: String) -> ConfigError {
    ConfigError { field, reason }
}

/// The configuration of a [`Region`](crate::Region). `RegionConfig::new(limit)` gives the
/// defaults; the builder methods change one field each.
///
/// ```
/// use region::RegionConfig;
///
/// // At most 64 MiB in memory, 16 KiB folios, zstd, and nothing written to a swap file.
/// let config = RegionConfig::new(64 << 20)
///     .folio_size(16 << 10)
///     .compressor("zstd".parse().unwrap())
///     .writeback(false)
///     .max_pool_percent(50);
/// assert_eq!(config.fault_threads, 2);
/// assert!(config.validate(256 << 20).is_ok());
/// // A folio size that is not a power of two is refused, naming the field.
/// let err = config.folio_size(12 << 10).validate(256 << 20).unwrap_err();
/// assert_eq!(err.field, "folio_size");
/// ```
#[derive(Debug, Clone)]
pub struct RegionConfig {
    /// Bytes the region may hold in memory: resident pages + swap cache + pool (like
    /// memory.high, with the pool charged as cgroup v2 does).
    pub memory_limit: u64,
    /// The unit of reclaim and swap-in: a power of two from 4 KiB to 2 MiB.
    /// Default: 64 KiB.
    pub folio_size: usize,
    /// The codec the pool uses (the `compressor` tunable). Default: `lz4` at its default level.
    pub compressor: CompressorSpec,
    /// memory.zswap.writeback: whether pages may go to the swap file.
    /// Default: on.
    pub writeback: bool,
    /// Write every stored page to the swap file at store time too.
    /// Default: off.
    pub writethrough: bool,
    /// Pool limit, percent of `memory_limit`.
    /// Default: 20, as the kernel's `max_pool_percent`.
    pub max_pool_percent: u32,
    /// Directory of the (unnamed) swap file; the system temp directory if None.
    pub swap_dir: Option<PathBuf>,
    /// Capacity of the swap file; the region's size if None.
    /// In bytes; also the capacity taken for `device` when there is one.
    pub swap_size: Option<u64>,
    /// Threads serving faults.
    /// Default: 2.
    pub fault_threads: usize,
    /// Background reclaim threads. More than one, because an eviction that goes to the swap
    /// file waits for the disk (direct I/O): measured on `bench usemem` 2x512M, 4 threads
    /// wrote 690-780 MB/s where 1 wrote 600-660.
    /// Default: 4.
    pub kswapd_threads: usize,
    /// Force user-mode-only userfaultfd (as an unprivileged process gets).
    /// Default: off.
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
    /// The defaults for a region that may hold `memory_limit` bytes in memory (see each field).
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

    /// Check the configuration for a region of `size` bytes: the one place where a region's
    /// configuration is validated, before anything is made.
    pub fn validate(&self, size: usize) -> Result<(), ConfigError> {
        let fs = self.folio_size;
        if !(PAGE_SIZE..=2 << 20).contains(&fs) || !fs.is_power_of_two() {
            return Err(invalid(
                "folio_size",
                format!("{fs} bytes is not a power of two from 4 KiB to 2 MiB"),
            ));
        }
        if size == 0 {
            return Err(invalid("size", "a region needs a size above 0".into()));
        }
        let nr_pages = self.nr_pages(size).ok_or_else(|| {
            invalid(
                "size",
                format!("{size} bytes is too large a region (at most 16 TiB)"),
            )
        })?;
        if !(1..=64).contains(&self.fault_threads) {
            return Err(invalid(
                "fault_threads",
                format!("{} is not between 1 and 64", self.fault_threads),
            ));
        }
        if !(1..=64).contains(&self.kswapd_threads) {
            return Err(invalid(
                "kswapd_threads",
                format!("{} is not between 1 and 64", self.kswapd_threads),
            ));
        }
        if self.max_pool_percent > 100 {
            return Err(invalid(
                "max_pool_percent",
                format!("{} is not between 0 and 100", self.max_pool_percent),
            ));
        }
        if let Some(swap) = self.swap_size {
            if u32::try_from(swap / PAGE_SIZE as u64).is_err() {
                return Err(invalid(
                    "swap_size",
                    format!("{swap} bytes is too large a swap file (at most 16 TiB)"),
                ));
            }
        }
        // Charged from the start, whatever the program does: a limit that cannot hold it and
        // a few folios besides could only be exceeded.
        let fixed = FixedCharge::of(self, nr_pages);
        if self.memory_limit < fixed.bytes + 4 * fs as u64 {
            return Err(invalid(
                "memory_limit",
                format!(
                    "{} bytes is below the region's fixed charge ({} bytes: buffers and staging \
                     for its {} threads, bitmaps) plus four folios ({} bytes); raise the limit, \
                     or use smaller folios or fewer threads (or, with 4 KiB folios, turn \
                     batch_eviction off)",
                    self.memory_limit,
                    fixed.bytes,
                    fixed.threads,
                    4 * fs
                ),
            ));
        }
        Ok(())
    }

    /// Pages of a region of `size` bytes, rounded up to whole folios; None past what a page
    /// index holds.
    pub(crate) fn nr_pages(&self, size: usize) -> Option<u32> {
        let len = size.checked_next_multiple_of(self.folio_size)?;
        u32::try_from(len / PAGE_SIZE).ok()
    }

    /// Set `kswapd_threads`.
    pub fn kswapd_threads(mut self, n: usize) -> Self {
        self.kswapd_threads = n;
        self
    }

    /// Set `keep_clean`.
    pub fn keep_clean(mut self, on: bool) -> Self {
        self.keep_clean = on;
        self
    }

    /// Set `drop_behind`.
    pub fn drop_behind(mut self, on: bool) -> Self {
        self.drop_behind = on;
        self
    }

    /// Set `swap_discard`.
    pub fn swap_discard(mut self, on: bool) -> Self {
        self.swap_discard = on;
        self
    }

    /// Set `keep_incompressible`.
    pub fn keep_incompressible(mut self, on: bool) -> Self {
        self.keep_incompressible = on;
        self
    }

    /// Set `batch_eviction`.
    pub fn batch_eviction(mut self, on: bool) -> Self {
        self.batch_eviction = on;
        self
    }

    /// Set `folio_size`, in bytes.
    pub fn folio_size(mut self, bytes: usize) -> Self {
        self.folio_size = bytes;
        self
    }
    /// Set `compressor`.
    pub fn compressor(mut self, spec: CompressorSpec) -> Self {
        self.compressor = spec;
        self
    }
    /// Set `writeback`.
    pub fn writeback(mut self, on: bool) -> Self {
        self.writeback = on;
        self
    }
    /// Set `writethrough`.
    pub fn writethrough(mut self, on: bool) -> Self {
        self.writethrough = on;
        self
    }
    /// Set `max_pool_percent`.
    pub fn max_pool_percent(mut self, percent: u32) -> Self {
        self.max_pool_percent = percent;
        self
    }
    /// Set `swap_dir`.
    pub fn swap_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.swap_dir = Some(dir.into());
        self
    }
    /// Set `fault_threads`.
    pub fn fault_threads(mut self, n: usize) -> Self {
        self.fault_threads = n;
        self
    }
    /// Set `user_mode_only`.
    pub fn user_mode_only(mut self, on: bool) -> Self {
        self.user_mode_only = on;
        self
    }
    /// Set `device`.
    pub fn device(mut self, device: Arc<dyn BackingDevice>) -> Self {
        self.device = Some(device);
        self
    }
}
