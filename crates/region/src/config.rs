//! How a region is set up: its memory limit, folio size, compressor, writeback or
//! writethrough, pool limit, swap file, threads and policies, validated in one place
//! (`RegionConfig::validate`) before anything is made.
//!
//! What is fixed rather than configured, and why (each is documented where it is defined):
//!
//! | constant | value | why fixed |
//! |---|---|---|
//! | `READAHEAD_THREADS` (config.rs) | 4 | enough disk reads in flight to hide a scan's latency on this class of disk; each is charged once it has read; started once readahead first has work (lazy_threads.rs) |
//! | `BATCH_PAGES`, `BATCH_DISCARD_SLOTS` (config.rs) | 16, 4 | a 64 KiB batch move is one TLB flush; larger batches take folios still in use |
//! | `SPARE_HANDLERS` (spare.rs) | 1 | one poller while every handler waits on the disk; each poller costs every fault a wake-up |
//! | `POLL_MAX`, `POLL_GROW_START` (busy_poll.rs) | 200 us, 50 us | haltpoll's `guest_halt_poll_ns` and `guest_halt_poll_grow_start`: a few cross-CPU wake-ups' worth of polling at most |
//! | `FAULT_AROUND_BYTES` (fault.rs) | 256 KiB | the kernel's fault-around order of magnitude; only first touches, only with room under the limit |
//! | `KSWAPD_PERIOD`, `RECLAIM_PATIENCE` (reclaim.rs) | 20 ms, 200 ms | kswapd's idle housekeeping; how long `reclaim_to` waits for another reclaimer |
//! | `KEPT_PER_CALL`, `KEPT_PER_CALL_KSWAPD` (reclaim.rs) | 16, 1,024 | bound the incompressible folios skipped before one is stored, so reclaim never fails for want of compressible ones |
//! | `POOL_WRITEBACK_BATCH` (reclaim.rs) | 32 | pages written back at once when the pool alone holds the region over its limit |
//! | `INACTIVE_MAX` (lru.rs) | 256 | drop-behind queue length, charged as metadata |
//! | `NEXT_MAX` (lru.rs) | 256 | folios to try next (unshared after a fork), charged as metadata |
//! | `WINDOW_BYTES`, `WINDOW_MAX_FOLIOS`, `STREAMS` (readahead.rs) | 512 KiB, 16, 8 | the kernel's swap readahead scale; streams as threads that scan at once |
//! | `EPOCH`, `MIN_EVIDENCE`, `PROBE_EVERY`, `FOLIOS_PER_PROBE` (incompressible.rs) | 4 s, 32, 8, 256 | the refault detector's time scale and the evidence it needs |
//! | `DECAY_AFTER` (clean.rs) | 4,096 | how fast the clean-folio decision follows a workload's phase |
//! | `ZAP_WAIT`, `LATE_ZAP_WINDOW`, `RECENT_MAX` (events.rs, discards.rs) | 20 ms, 10 s, 1,024 | how long the kernel's zap of a discard is waited for and looked for: correctness margins, not tunables |
//! | `SLACK` (folio_queue.rs) | 64 | queue compaction slack |
//!
//! They are internal margins and time scales: none changes what a program reads, and none has
//! a value a user could choose better from outside than a measurement on the machine.

use std::path::PathBuf;
use std::sync::Arc;

use zswap::compress::CompressorSpec;
use zswap::params::{WritebackCompressor, Writethrough};
use zswap::swap::{BackingDevice, SegmentDevice};
use zswap::PAGE_SIZE;

use crate::over_limit::{OverLimit, SharedLimit};

/// How written-back pages are kept on the swap device (`RegionConfig::swap_format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwapFormat {
    /// Compressed, as the pool holds them, packed into segments of up to 64 KiB.
    Segments,
    /// Decompressed, a page a slot (the kernel's zswap writeback).
    Pages,
}

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
    /// Bytes the region may hold in memory: resident pages, staged folios, the pool and
    /// uzswap's metadata (like memory.high, with the pool charged as cgroup v2 does). No
    /// default: `RegionConfig::new` takes it.
    pub memory_limit: u64,
    /// The unit of reclaim and swap-in, in bytes: a power of two from 4 KiB to 2 MiB.
    /// Default: 64 KiB.
    pub folio_size: usize,
    /// The codec the pool uses (the `compressor` tunable). Default: `lz4` at its default level.
    pub compressor: CompressorSpec,
    /// What a compressed page is re-encoded with as it goes to segments (the engine's
    /// `writeback_compressor` tunable), where that makes it smaller. Default: `Same`, as
    /// the pool holds it (re-encoding trades CPU for bytes: `WritebackCompressor`).
    pub writeback_compressor: WritebackCompressor,
    /// memory.zswap.writeback: whether the pool may write its coldest pages to the swap file.
    /// Default: on.
    pub writeback: bool,
    /// The engine's `writethrough` tunable: never (`Off`, the default), every stored page
    /// written to the swap file at store time too (`On`: the pool's copy is then dropped
    /// without a write when the pool is full), or by how full the pool is and where its
    /// pages go (`Auto`, zswap/adaptive.rs). Changeable at runtime through `Region::zswap`.
    pub writethrough: Writethrough,
    /// The most of `memory_limit` the pool may take, in percent, 0 to 100: the kernel's
    /// `max_pool_percent`, a ceiling. Under it the pool's share moves with what the
    /// program's refaults cost (`Policies::auto_pool_share`); with that off, it is the share.
    /// Default: 60 (a
    /// memory cgroup's pool may take all of the cgroup's limit; the kernel's default of 20 is
    /// a share of the whole machine, and where the share starts here).
    pub max_pool_percent: u32,
    /// Threads that may compress one folio's pages at once, the evicting thread included,
    /// 1 to 8 (zswap's `compress_threads` tunable: a folio of at least 16 pages is cut in
    /// parts of at least 8; the helpers are shared by the process). Default: 1.
    pub compress_threads: u32,
    /// Directory of the (unnamed) swap file. Default: None, the system temp directory.
    pub swap_dir: Option<PathBuf>,
    /// Capacity of the swap file (or of `device`), in bytes, at most 16 TiB.
    /// Default: None, the region's size.
    pub swap_size: Option<u64>,
    /// Threads serving faults, 1 to 64 (a spare serves besides them while they all wait on
    /// the disk). Default: 2.
    pub fault_threads: usize,
    /// Background reclaim threads, 1 to 64. More than one, because an eviction that goes to
    /// the swap file waits for the disk (direct I/O), and others can compress meanwhile. The
    /// first starts with the region, the others once reclaim first has work
    /// (lazy_threads.rs). Default: 4.
    pub kswapd_threads: usize,
    /// Force user-mode-only userfaultfd (as an unprivileged process gets): a system call that
    /// touches an evicted page fails with EFAULT. Default: off.
    pub user_mode_only: bool,
    /// Serve each fault in the thread that faults, from a SIGBUS handler, instead of in a
    /// handler thread: no wake-up across CPUs, most of a handler's fault where idle CPUs halt
    /// (DESIGN.md section 6). The price: a system call that touches an evicted page (read(2) into it,
    /// write(2) from it) fails with EFAULT, so only for memory the program never hands to the
    /// kernel. x86-64 only; the process's SIGBUS handler becomes uzswap's (it passes on every
    /// SIGBUS that is not a fault on such a region). Default: off.
    pub in_thread_faults: bool,
    /// A backing device to use instead of a swap file (tests inject faults with it).
    /// Default: None, a swap file in `swap_dir`.
    pub device: Option<Arc<dyn BackingDevice>>,
    /// Give freed swap storage back to the file system, a whole cluster at a time (the
    /// kernel's `swapon --discard`). Default: off, as in the kernel: a punched hole makes
    /// every later write into it allocate blocks again.
    pub swap_discard: bool,
    /// How written-back pages are kept on the swap device: as the pool holds them,
    /// compressed and packed into segments (`Segments`), or decompressed a page a slot, as
    /// the kernel's zswap writes back (`Pages`). Default: `Segments`.
    pub swap_format: SwapFormat,
    /// Encrypt and authenticate every segment written to the swap device (AES-256-GCM,
    /// a key made per region in memory and never written): a page whose data was changed
    /// on the device is poisoned, never returned. Segments only. Default: on.
    pub encrypt: bool,
    /// A store of segments to use instead of the swap file (a Redis Cluster, or a test's).
    /// Needs `swap_format` `Segments`. Default: None, the swap file.
    pub segment_device: Option<Arc<dyn SegmentDevice>>,
    /// Bytes at the start of the region that are never reclaimed once touched, rounded up to
    /// whole folios: memory the region's own threads may read, such as an allocator's
    /// bookkeeping when the region is a program's heap (they must never fault on the memory
    /// they serve). Resident, so charged to the limit. Default: 0.
    pub pinned: usize,
    /// The reclaim and swap-in policies, each on by default.
    pub policies: Policies,
    /// What a fault does when the region is over `memory_limit` and nothing more can be
    /// reclaimed: throttled (memory.high), and past a hard limit killed or let through
    /// (memory.max). Default: neither; the region then grows past its limit, counted in
    /// `high`.
    pub over_limit: OverLimit,
    /// A limit shared with other regions: `memory_limit` and `over_limit.memory_max` are
    /// then the region's first share, and each fault that makes room takes its share anew.
    /// Default: None.
    pub shared_limit: Option<Arc<dyn SharedLimit>>,
    /// Run first on every thread the region starts, before anything else: the preload of
    /// `uzswap run` marks them as uzswap's own, whose allocations stay outside the region.
    /// Default: None.
    pub thread_start: Option<fn()>,
    /// Register the range with userfaultfd only once the process's anonymous memory (RssAnon
    /// and VmSwap) reaches half the limit, under a limit of 1 GiB or more, 512 MiB a CPU
    /// (registration.rs): until then the kernel alone serves its pages, which cost what they
    /// cost without uzswap, and that anonymous memory is charged as the region's resident
    /// pages. For a region that is its process's heap (`uzswap run`), whose anonymous memory
    /// is at least what it holds. Its swap file is made at its first write
    /// (`zswap::swap::LazyFileDevice`): the directory is the caller's to check. Default:
    /// off, registered as it is made.
    pub lazy_registration: bool,
}

impl RegionConfig {
    /// The defaults for a region that may hold `memory_limit` bytes in memory (see each field).
    pub fn new(memory_limit: u64) -> Self {
        RegionConfig {
            memory_limit,
            folio_size: 64 << 10,
            compressor: CompressorSpec::default(),
            writeback_compressor: WritebackCompressor::Same,
            writeback: true,
            writethrough: Writethrough::Off,
            max_pool_percent: 60,
            compress_threads: 1,
            swap_dir: None,
            swap_size: None,
            fault_threads: 2,
            kswapd_threads: 4,
            user_mode_only: false,
            in_thread_faults: false,
            device: None,
            swap_discard: false,
            swap_format: SwapFormat::Segments,
            encrypt: true,
            segment_device: None,
            pinned: 0,
            policies: Policies::default(),
            over_limit: OverLimit::default(),
            shared_limit: None,
            thread_start: None,
            lazy_registration: false,
        }
    }

    /// The codecs the region's threads encode and decode pages with: the pool's, and the
    /// one written-back pages are re-encoded with if segments have their own.
    pub fn codecs(&self) -> Vec<CompressorSpec> {
        let mut codecs = vec![self.compressor];
        if let (SwapFormat::Segments, Some(w)) =
            (self.swap_format, self.writeback_compressor.codec())
        {
            if w != self.compressor {
                codecs.push(w);
            }
        }
        codecs
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
        if self.swap_format == SwapFormat::Pages && self.segment_device.is_some() {
            return Err(invalid(
                "segment_device",
                "a store of segments needs swap_format Segments".into(),
            ));
        }
        if self.swap_format == SwapFormat::Pages && self.encrypt {
            return Err(invalid(
                "encrypt",
                "only segments are encrypted: with swap_format Pages, turn encrypt off".into(),
            ));
        }
        if self.in_thread_faults && !uffd::sigbus::SUPPORTED {
            return Err(invalid(
                "in_thread_faults",
                "in-thread faults need x86-64 Linux".into(),
            ));
        }
        if self.max_pool_percent > 100 {
            return Err(invalid(
                "max_pool_percent",
                format!("{} is not between 0 and 100", self.max_pool_percent),
            ));
        }
        if !(1..=zswap::params::MAX_COMPRESS_THREADS).contains(&self.compress_threads) {
            return Err(invalid(
                "compress_threads",
                format!(
                    "{} is not between 1 and {}",
                    self.compress_threads,
                    zswap::params::MAX_COMPRESS_THREADS
                ),
            ));
        }
        if self.pinned > size {
            return Err(invalid(
                "pinned",
                format!(
                    "{} bytes is more than the region ({size} bytes)",
                    self.pinned
                ),
            ));
        }
        if let Some(max) = self.over_limit.memory_max {
            if max < self.memory_limit {
                return Err(invalid(
                    "memory_max",
                    format!(
                        "{max} bytes is below the memory limit ({} bytes)",
                        self.memory_limit
                    ),
                ));
            }
        }
        if let Some(swap) = self.swap_size {
            if u32::try_from(swap / PAGE_SIZE as u64).is_err() {
                return Err(invalid(
                    "swap_size",
                    format!("{swap} bytes is too large a swap file (at most 16 TiB)"),
                ));
            }
        }
        // What the region charges for itself, all of it in use, and for every page the
        // program touches: a limit that cannot hold it all and a few folios besides could
        // only be exceeded.
        let fixed = FixedCharge::of(self, nr_pages);
        if self.memory_limit < fixed.most() + 4 * fs as u64 {
            return Err(invalid(
                "memory_limit",
                format!(
                    "{} bytes is below the region's fixed charge ({} bytes: buffers and staging \
                     for its {} threads; and {} bytes of metadata once every page of the \
                     {size}-byte region is touched) plus four folios ({} bytes); raise the \
                     limit, or use a smaller region, smaller folios or fewer threads (or, with \
                     4 KiB folios, turn batch_eviction off)",
                    self.memory_limit,
                    fixed.most() - fixed.per_page,
                    fixed.threads,
                    fixed.per_page,
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

    /// Set `policies.keep_clean`.
    pub fn keep_clean(mut self, on: bool) -> Self {
        self.policies.keep_clean = on;
        self
    }

    /// Set `policies.drop_behind`.
    pub fn drop_behind(mut self, on: bool) -> Self {
        self.policies.drop_behind = on;
        self
    }

    /// Set `swap_format`.
    pub fn swap_format(mut self, format: SwapFormat) -> Self {
        self.swap_format = format;
        self
    }

    /// Set `encrypt`.
    pub fn encrypt(mut self, on: bool) -> Self {
        self.encrypt = on;
        self
    }

    /// Set `segment_device` (and `swap_format` to `Segments`).
    pub fn segment_device(mut self, device: Arc<dyn SegmentDevice>) -> Self {
        self.segment_device = Some(device);
        self.swap_format = SwapFormat::Segments;
        self
    }

    /// Set `swap_discard`.
    pub fn swap_discard(mut self, on: bool) -> Self {
        self.swap_discard = on;
        self
    }

    /// Set `policies.keep_incompressible`.
    pub fn keep_incompressible(mut self, on: bool) -> Self {
        self.policies.keep_incompressible = on;
        self
    }

    /// Set `policies.batch_eviction`.
    pub fn batch_eviction(mut self, on: bool) -> Self {
        self.policies.batch_eviction = on;
        self
    }

    /// Set `policies.adaptive_swapin`.
    pub fn adaptive_swapin(mut self, on: bool) -> Self {
        self.policies.adaptive_swapin = on;
        self
    }

    /// Set `policies.auto_pool_share`.
    pub fn auto_pool_share(mut self, on: bool) -> Self {
        self.policies.auto_pool_share = on;
        self
    }

    /// Set `policies.referenced_writes`.
    pub fn referenced_writes(mut self, on: bool) -> Self {
        self.policies.referenced_writes = on;
        self
    }

    /// Set `policies.inactive_list`.
    pub fn inactive_list(mut self, on: bool) -> Self {
        self.policies.inactive_list = on;
        self
    }

    /// Set `policies.workingset`.
    pub fn workingset(mut self, on: bool) -> Self {
        self.policies.workingset = on;
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
    /// Set `writeback_compressor`.
    pub fn writeback_compressor(mut self, value: WritebackCompressor) -> Self {
        self.writeback_compressor = value;
        self
    }
    /// Set `writeback`.
    pub fn writeback(mut self, on: bool) -> Self {
        self.writeback = on;
        self
    }
    /// Set `writethrough`.
    pub fn writethrough(mut self, mode: Writethrough) -> Self {
        self.writethrough = mode;
        self
    }
    /// Set `compress_threads`.
    pub fn compress_threads(mut self, n: u32) -> Self {
        self.compress_threads = n;
        self
    }
    /// Set `max_pool_percent`.
    pub fn max_pool_percent(mut self, percent: u32) -> Self {
        self.max_pool_percent = percent;
        self
    }
    /// Set `lazy_registration`.
    pub fn lazy_registration(mut self, on: bool) -> Self {
        self.lazy_registration = on;
        self
    }

    /// Set `pinned`, in bytes.
    pub fn pinned(mut self, bytes: usize) -> Self {
        self.pinned = bytes;
        self
    }
    /// Set `swap_size`, in bytes.
    pub fn swap_size(mut self, bytes: u64) -> Self {
        self.swap_size = Some(bytes);
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
    /// Set `in_thread_faults`.
    pub fn in_thread_faults(mut self, on: bool) -> Self {
        self.in_thread_faults = on;
        self
    }
    /// Set `over_limit`.
    pub fn over_limit(mut self, over_limit: OverLimit) -> Self {
        self.over_limit = over_limit;
        self
    }
    /// Set `shared_limit`.
    pub fn shared_limit(mut self, shared: Arc<dyn SharedLimit>) -> Self {
        self.shared_limit = Some(shared);
        self
    }
    /// Set `device`.
    pub fn device(mut self, device: Arc<dyn BackingDevice>) -> Self {
        self.device = Some(device);
        self
    }
}

/// The region's reclaim and swap-in policies. Each decides something the kernel decides
/// otherwise or not at all; each can be turned on or off to measure what it brings, or where
/// a workload does worse with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policies {
    /// Keep folios read back whole from the swap file clean (write-protected, with their
    /// disk copy), so that reclaiming them unwritten costs no store (clean.rs). Needs
    /// write-protect faults (Linux 5.7); without them it is off, and off with
    /// `referenced_writes` (its write-protect faults are no longer delivered). Default: on.
    pub keep_clean: bool,
    /// Reclaim the folios a sequential scan has passed before the oldest ones (drop-behind,
    /// readahead.rs), so a scan larger than the limit keeps hitting what it has not reached.
    /// Default: on.
    pub drop_behind: bool,
    /// Leave folios whose last store found them incompressible resident while compressible
    /// ones can go, while such folios keep coming back (incompressible.rs): with the pool
    /// charged to the limit, evicting them frees nothing. Default: on.
    pub keep_incompressible: bool,
    /// With 4 KiB folios, evict a cold folio's cold neighbours with it, up to 64 KiB with one
    /// move and one TLB flush (reclaim.rs, `with_neighbours`). Default: on.
    pub batch_eviction: bool,
    /// Refault detection (workingset.rs, as mm/workingset.c): a folio that comes back from
    /// the engine within fewer evictions than the region holds resident is activated, out of
    /// reclaim's reach until the LRU's active queue ages it out (lru.rs), so pages used once
    /// go before a working set being thrashed. Default: on (CPython under a third of its
    /// peak ran 1.23x faster with it, BENCHMARKS.md; `bench mix` and `bench usemem` neither
    /// gain nor lose).
    pub workingset: bool,
    /// A fault on a page of a folio the engine holds brings that page alone unless it
    /// continues a sequential scan, across folios or within its folio (a page beside it
    /// in): swapin_window.rs. Off: every fault brings its whole folio. Default: on.
    pub adaptive_swapin: bool,
    /// The pool's share of the limit, under `max_pool_percent`, moves toward the side whose
    /// next step would have saved more refault time (pool_share.rs): a larger pool where
    /// pages come back from the disk soon after the pool wrote them back, a larger resident
    /// share where folios come back from the pool soon after they left. Off: the pool takes
    /// up to `max_pool_percent`, as in the kernel. Default: on.
    pub auto_pool_share: bool,
    /// Reclaim sees writes, as the kernel's LRU sees its accessed bit: a folio at the LRU's
    /// head written since reclaim last asked is activated, not taken (reclaim.rs,
    /// `referenced`). The page tables say it with no fault: the region's userfaultfd has
    /// `WP_ASYNC` (Linux 6.7), pages read back go in write-protected, the kernel lifts a
    /// page's protection itself at its first write, and `PAGEMAP_SCAN` reads and re-arms the
    /// bits of 2 MiB of the region at a time (written_bits.rs). Clean folios (`keep_clean`)
    /// are off with it: their write-protect faults would no longer be delivered. Where the
    /// kernel lacks `WP_ASYNC` this does nothing. Off by default: it removes 13-42% of the
    /// faults of four programs of seven (two of them measured on the build before), adds
    /// faults where nearly every access writes
    /// (CPython's reference counts), and the time moves no more than the machine's spread:
    /// folios read back from disk are written back again without `keep_clean`, and each
    /// write after a re-arm is a fault the kernel resolves (BENCHMARKS.md, "Reclaim that sees
    /// writes").
    pub referenced_writes: bool,
    /// Reclaim's inactive list (staged.rs): the coldest folios are moved out uncompressed
    /// first, 1/8 of the limit of them, and stored only when they reach the list's end
    /// untouched; a fault on one moves it back and activates it. The kernel's referenced
    /// check, reads included, made with a fault where the kernel reads the accessed bit.
    /// Off: the coldest folio is stored at once, and reclaim sees no access but refaults.
    /// Off by default: it halves the pages swapped in from the pool on a malloc churn and
    /// cuts a fifth on a Java-shaped heap, but each folio found in use costs a move back
    /// and a move out again (a TLB flush each), and no program of the suite ran faster
    /// for it (BENCHMARKS.md, "The inactive list").
    pub inactive_list: bool,
}

impl Default for Policies {
    fn default() -> Self {
        Policies {
            keep_clean: true,
            drop_behind: true,
            keep_incompressible: true,
            batch_eviction: true,
            workingset: true,
            adaptive_swapin: true,
            auto_pool_share: true,
            referenced_writes: false,
            inactive_list: false,
        }
    }
}

/// Readahead threads: each waits on the disk for one folio at a time.
pub(crate) const READAHEAD_THREADS: usize = 4;

/// Whether reclaim evicts neighbouring folios together (4 KiB folios only: a larger folio is
/// one move already).
pub(crate) fn batching(config: &RegionConfig) -> bool {
    config.policies.batch_eviction && config.folio_size == PAGE_SIZE
}

/// Freed staging slots discarded at once, one TLB flush for all: up to 512 KiB of them (1/64
/// of a small limit), at least one.
pub(crate) fn discard_batch_slots(config: &RegionConfig) -> u64 {
    ((config.memory_limit / 64).min(512 << 10) / config.folio_size as u64).max(1)
}

/// Pages a batch eviction of 4 KiB folios moves at once, at most (reclaim.rs,
/// `with_neighbours`).
pub(crate) const BATCH_PAGES: usize = 16;

/// Freed batch-eviction slots (64 KiB each) discarded at once.
pub(crate) const BATCH_DISCARD_SLOTS: usize = 4;

/// What a region charges to its limit besides the program's pages and the pool: some from the
/// start, the rest as it is used, up to the most `FixedCharge::most` says.
pub(crate) struct FixedCharge {
    /// Threads that hold buffers: fault handlers (the spare too), kswapd, readahead, the
    /// shrink worker.
    pub threads: usize,
    /// Threads that may evict at once: fault handlers and the spare (direct reclaim),
    /// kswapd, readahead (direct reclaim too), and the program's own `Region::reclaim_to`.
    pub evicting: usize,
    /// Freed staging slots wait for a batch to be discarded together; until then they hold
    /// pages. Charged up front, all but the slot that fills a batch (its release discards
    /// the batch at once), so that an eviction, which frees its slot, never adds to the
    /// usage on that account: counted as they come, each eviction into the pool would add a
    /// page until the next discard (a region of incompressible data some 250 KiB past its
    /// limit). Dirty bytes past this (two batches discarding at once) still count.
    pub dirty_reserve: u64,
    /// Charged from the start: the dirty reserve, the shrink worker's buffers, the
    /// compression helpers' scratch, the drop-behind queue.
    pub bytes: u64,
    /// The most bytes in flight to the engine at once: each evicting thread's folio (or
    /// batch) between its move out and its store. Charged while in flight
    /// (`Meter::in_flight`).
    pub in_flight: u64,
    /// What one of the region's own threads (a fault handler, kswapd, readahead) keeps once
    /// it has loaded or stored: a folio buffer and the store's batch buffer. Allocated on
    /// first use and kept, so charged from then on (`ThreadScratch`): a handler whose faults
    /// the program's threads serve themselves, or a readahead thread of a region that never
    /// writes to disk, charges nothing.
    pub per_thread: u64,
    /// A bounce buffer for direct I/O from an unaligned buffer (`BOUNCE_BYTES`), charged
    /// the same way once a thread has one.
    pub bounce: u64,
    /// The region's own threads (`per_thread`).
    pub region_threads: usize,
    /// What the region keeps per page and per folio once the program has touched every
    /// page: charged as pages are touched (`Meter::usage`), not from the start, but a limit
    /// that could not hold it with the rest could be exceeded by a program that uses its
    /// whole region. The engine's state word (8 bytes a page), the resident and discarded
    /// bits; a folio's queue time (4 bytes) and six bits (its active mark, its incompressible
    /// marks, and the compaction marks of the LRU's two queues and of the staged queue); the
    /// tables of leaves (zswap::sparse) aside, a few bytes per 16 MiB.
    pub per_page: u64,
}

impl FixedCharge {
    /// The charge of a region of `nr_pages` pages under `config`.
    pub fn of(config: &RegionConfig, nr_pages: u32) -> FixedCharge {
        let fs = config.folio_size as u64;
        // The fault handlers, the spare included (spare.rs).
        let handlers = config.fault_threads + crate::spare::SPARE_HANDLERS;
        let evicting = handlers + config.kswapd_threads + READAHEAD_THREADS + 1;
        // Each evicting thread has a folio in flight in staging, or a batch of them.
        let in_flight = match batching(config) {
            true => (BATCH_PAGES * PAGE_SIZE) as u64,
            false => fs,
        };
        let region_threads = handlers + config.kswapd_threads + READAHEAD_THREADS;
        let per_thread = fs + fs.min(zswap::zswap::STORE_SCRATCH_BYTES);
        let bounce = zswap::swap::file::BOUNCE_BYTES as u64;
        let dirty_reserve = (discard_batch_slots(config) - 1) * fs
            + match batching(config) {
                true => ((BATCH_DISCARD_SLOTS - 1) * BATCH_PAGES * PAGE_SIZE) as u64,
                false => 0,
            };
        // The helpers that compress parts of a folio (zswap's parallel.rs) keep scratch of
        // their own; shared by the process, charged to each region that uses them.
        let helpers = u64::from(config.compress_threads.saturating_sub(1))
            .min(zswap::zswap::parallel::helper_threads() as u64);
        let compress_helpers = helpers * zswap::zswap::parallel::HELPER_SCRATCH_BYTES;
        let nr_pages = u64::from(nr_pages);
        let nr_folios = nr_pages.div_ceil(fs / PAGE_SIZE as u64);
        FixedCharge {
            per_page: nr_pages * 8
                + 2 * nr_pages.div_ceil(8)
                + nr_folios * 4
                + 6 * nr_folios.div_ceil(8),
            threads: region_threads + 1,
            evicting,
            dirty_reserve,
            // The shrink worker (the engine's thread) writes back with buffers like a region
            // thread's (its buffers for segments are charged as they grow: `Meter::usage`).
            // What is kept per page or per folio is charged as it is allocated
            // (`Meter::usage`).
            bytes: dirty_reserve
                + per_thread
                + bounce
                + compress_helpers
                + crate::lru::INACTIVE_MAX as u64 * 4
                + crate::lru::NEXT_MAX as u64 * 8,
            in_flight: evicting as u64 * in_flight,
            per_thread,
            bounce,
            region_threads,
        }
    }

    /// The most the region charges besides the program's data and the pool: all of it in
    /// use at once, every page touched.
    pub fn most(&self) -> u64 {
        self.bytes
            + self.in_flight
            + self.region_threads as u64 * (self.per_thread + self.bounce)
            + self.per_page
    }
}
