//! A managed region: memory that behaves like ordinary memory while uzswap keeps its cold
//! pages compressed. This file is the public face: it sets a region up (its parts, inner.rs,
//! and its threads) and tears it down.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;

use uffd::{RawRegion, RegisterMode, Uffd, UffdBuilder};
use zswap::swap::{BackingDevice, FileDevice};
use zswap::{Zswap, ZswapConfig, ZswapGroup, PAGE_SIZE};

use crate::charge::ThreadScratch;
use crate::clean::CleanTracking;
use crate::config::{
    batching, discard_batch_slots, ConfigError, FixedCharge, RegionConfig, SwapFormat,
    BATCH_DISCARD_SLOTS,
};
use crate::deferred::DeferredEvents;
use crate::incompressible::IncompressibleFolios;
use crate::inner::{Inner, Usage};
use crate::lazy_threads::{LazyKind, LazyThreads};
use crate::lru::Lru;
use crate::mapping::Mapping;
use crate::memory::Memory;
use crate::page_flags::PageFlags;
use crate::readahead::Readahead;
use crate::spare::SpareHandlers;
use crate::staged::StagedFolios;
use crate::stats::{RegionStats, RegionStatsSnapshot};
use crate::threads::spawn_critical;
use crate::unevictable::Unevictable;

/// Why a region could not be made.
#[derive(Debug, thiserror::Error)]
pub enum RegionError {
    /// A field of the configuration that the region cannot honour.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The userfaultfd could not be made or set up.
    #[error("userfaultfd")]
    Uffd(#[from] uffd::UffdError),
    /// The region's memory could not be mapped or registered.
    #[error("mapping the region")]
    Map(#[from] uffd::RawRegionError),
    /// The swap file could not be created.
    #[error("swap file")]
    SwapFile(#[from] zswap::swap::DeviceError),
    /// A handler or reclaim thread could not be started.
    #[error("starting the region's threads")]
    Spawn(#[source] std::io::Error),
}

impl RegionError {
    /// The error and its sources on one line, joined by ": " (a source whose message the
    /// line already holds is not repeated).
    pub fn chain(&self) -> String {
        let mut line = self.to_string();
        let mut source = std::error::Error::source(self);
        while let Some(e) = source {
            let text = e.to_string();
            if !line.contains(&text) {
                line.push_str(": ");
                line.push_str(&text);
            }
            source = e.source();
        }
        line
    }
}

/// Reads a region's usage from any thread.
#[derive(Clone)]
pub struct UsageProbe(Arc<Inner>);

impl UsageProbe {
    /// Bytes the region holds in memory now, by kind.
    pub fn usage(&self) -> Usage {
        self.0.usage()
    }
}

/// A managed memory region. Its memory is `len()` bytes at `as_ptr()`; any thread may read and
/// write it, and so may the kernel on the program's behalf (when the userfaultfd is not
/// user-mode-only). Dropping it frees everything; the memory must not be used after that.
pub struct Region {
    inner: Arc<Inner>,
    threads: Vec<JoinHandle<()>>,
    /// The memory. Dropped last, after the threads stopped and the range was unregistered.
    mem: Memory,
}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region")
            .field("addr", &self.inner.mapping.base())
            .field("len", &self.inner.mapping.len())
            .field("limit", &self.inner.limit())
            .finish()
    }
}

impl Region {
    /// The smallest memory limit a region of `size` bytes under `config` (its limit aside)
    /// accepts: the most it charges for itself (its threads' buffers and folios in flight
    /// all in use) and for its pages once all are touched, plus four folios. None for a folio
    /// size or a size `new` refuses anyway.
    pub fn min_memory_limit(size: usize, config: &RegionConfig) -> Option<u64> {
        let mut config = config.clone();
        config.memory_limit = u64::MAX;
        config.over_limit.memory_max = None;
        config.validate(size).ok()?;
        let nr_pages = config.nr_pages(size)?;
        // The fixed charge grows with the limit (the discard batch, capped at 512 KiB): the
        // least limit that covers the charge at itself. From 0 the limit only rises, each
        // step by about 1/64 of the last rise (in whole folios), so a few steps reach it.
        config.memory_limit = 0;
        loop {
            let fixed = FixedCharge::of(&config, nr_pages);
            let need = fixed.most() + 4 * config.folio_size as u64;
            if need <= config.memory_limit {
                return Some(config.memory_limit);
            }
            config.memory_limit = need;
        }
    }

    /// A region of `size` bytes (rounded up to whole folios) managed under `config`.
    ///
    /// On any error nothing is left behind: no thread, no mapping, no swap file.
    ///
    /// A region is served through userfaultfd. Without root, `CAP_SYS_PTRACE` or access to
    /// `/dev/userfaultfd` its faults are user-mode-only (see `kernel_faults_served`).
    ///
    /// ```
    /// use region::{Region, RegionConfig};
    ///
    /// // 4 MiB of memory that may hold 8 MiB: resident pages, staged folios and pool together.
    /// let mut r = Region::new(4 << 20, RegionConfig::new(8 << 20)).unwrap();
    /// for (i, page) in r.as_mut_slice().chunks_mut(4096).enumerate() {
    ///     page.iter_mut().enumerate().for_each(|(j, b)| *b = (i + j / 512) as u8);
    /// }
    /// // Evict every folio into the pool; reading faults them back in.
    /// r.reclaim_to(0);
    /// assert_eq!(r.usage().resident, 0);
    /// assert_eq!(r.zswap().stats().get("zswpout"), 1024);
    /// let mem = r.as_mut_slice();
    /// assert!((0..1024).all(|i| mem[i * 4096 + 4095] == (i + 7) as u8));
    /// assert!(r.stats().faults > 0);
    /// ```
    pub fn new(size: usize, config: RegionConfig) -> Result<Region, RegionError> {
        config.validate(size)?;
        let len = config.nr_pages(size).expect("validated") as usize * PAGE_SIZE;
        let uffd = Self::uffd_builder(&config).create()?;
        if let Some(w) = uffd.mode_warning() {
            log::warn!("{w}");
        }
        let mem = RawRegion::new(len)?;
        // A child process must fault on the region rather than read zeros where our data is
        // (its copy of the mapping would not be served): it gets no mapping at all.
        mem.dont_fork()?;
        // Base pages only: a huge page collapsed by khugepaged under a folio would have to be
        // split by every UFFDIO_MOVE that evicts part of it (the kernel splits huge pages on
        // swap-out too), and that split is the one path where MOVE meets states we do not
        // otherwise see.
        mem.no_huge_pages()?;
        Self::over(Memory::Own(mem), len, uffd, config)
    }

    /// How the region's userfaultfd is made under `config` (`RemoteRegion::features` asks
    /// for what this gets).
    pub(crate) fn uffd_builder(config: &RegionConfig) -> UffdBuilder {
        UffdBuilder::new()
            .user_mode_only(config.user_mode_only)
            .non_blocking(true)
            .sigbus(config.in_thread_faults)
    }

    /// The region over `len` bytes of `mem`, served through `uffd`, with `config` validated
    /// for that length.
    pub(crate) fn over(
        mem: Memory,
        len: usize,
        uffd: Uffd,
        config: RegionConfig,
    ) -> Result<Region, RegionError> {
        let fs = config.folio_size;
        let nr_pages = (len / PAGE_SIZE) as u32;
        let folio_pages = (fs / PAGE_SIZE) as u32;
        let fixed = FixedCharge::of(&config, nr_pages);
        let program_tasks = mem.tasks_dir();

        let swap_pages = u32::try_from(config.swap_size.unwrap_or(len as u64) / PAGE_SIZE as u64)
            .expect("validated");
        let mut zswap_config = ZswapConfig::new(config.memory_limit)
            .compressor(config.compressor)
            .writeback_compressor(config.writeback_compressor)
            .discard(config.swap_discard);
        zswap_config = match (&config.segment_device, config.swap_format) {
            (Some(store), _) => {
                zswap_config.segment_device(store.clone(), swap_pages, config.encrypt)
            }
            (None, format) => {
                let device: Arc<dyn BackingDevice> = match config.device.clone() {
                    Some(d) => d,
                    // Striped a folio at a time, so a folio's write is one write
                    // (swap/file.rs); a segment is at most 64 KiB, the least stripe.
                    None => Arc::new(FileDevice::create_with(
                        config.swap_dir.as_deref(),
                        swap_pages,
                        folio_pages,
                        true,
                    )?),
                };
                let with_pages = zswap_config.device(device, swap_pages);
                match format {
                    SwapFormat::Segments => with_pages.segments(config.encrypt),
                    SwapFormat::Pages => with_pages,
                }
            }
        };
        let zswap = Zswap::new(zswap_config);
        zswap
            .params()
            .set_max_pool_percent(config.max_pool_percent)
            .map_err(|e| {
                RegionError::Config(ConfigError {
                    field: "max_pool_percent",
                    reason: e.to_string(),
                })
            })?;
        zswap.params().set_writethrough_mode(config.writethrough);
        // Sized by the program's CPU time, read from /proc: fixed where it cannot be read.
        let pool_share = (config.policies.auto_pool_share
            && crate::pool_share::program_cpu_ns(&program_tasks).is_some())
        .then(crate::pool_share::PoolShare::default);
        if let Some(share) = &pool_share {
            zswap.set_pool_share_percent(share.percent());
        }
        zswap
            .params()
            .set_compress_threads(config.compress_threads)
            .map_err(|e| {
                RegionError::Config(ConfigError {
                    field: "compress_threads",
                    reason: e.to_string(),
                })
            })?;
        let group = zswap.new_group(nr_pages);
        group.set_writeback_enabled(config.writeback);

        // Staged folios may hold 1/32 of the limit; staging needs room for that plus one
        // folio in flight per thread that evicts.
        let staged_budget = (config.memory_limit / 32 / PAGE_SIZE as u64).max(folio_pages as u64);
        // Freed staging slots are discarded in batches (`discard_batch_slots`), one TLB
        // flush a batch instead of one a folio; charged up front (`FixedCharge`).
        let batch_slots = discard_batch_slots(&config);
        let evicting = fixed.evicting as u64;
        let slots = u32::try_from(staged_budget / folio_pages as u64 + batch_slots + evicting)
            .map_err(|_| {
                RegionError::Config(ConfigError {
                    field: "memory_limit",
                    reason: format!("{} bytes is too large a limit", config.memory_limit),
                })
            })?
            + 4;
        fail::fail_point!("region::new::staging", |_| Err(injected("mmap staging")));
        let staging = mem.staging(slots, fs, batch_slots as usize)?;
        // Batch evictions (4 KiB folios) stage in slots of their own, one per evicting thread
        // (charged as in flight) and a few freed ones waiting for their batched discard
        // (charged in the fixed charge's `dirty_reserve`).
        let batch_staging = match batching(&config) {
            true => Some(mem.staging(
                (evicting as usize + BATCH_DISCARD_SLOTS) as u32,
                crate::config::BATCH_PAGES * PAGE_SIZE,
                BATCH_DISCARD_SLOTS,
            )?),
            false => None,
        };
        // Write-protect faults too, where the kernel offers them: clean folios (clean.rs).
        let wp = uffd.features().contains(uffd::Features::PAGEFAULT_FLAG_WP);
        // Where the kernel's own accesses are not served, a system call that writes into a
        // folio going round write-protected would fail with EFAULT: reclaim does not see
        // writes there.
        let referenced_writes = wp
            && config.policies.referenced_writes
            && !uffd.user_mode_only()
            && !config.in_thread_faults;

        let nr_folios = nr_pages.div_ceil(folio_pages) as usize;
        let deferred = DeferredEvents::new()?;
        let tables = mem.page_tables().map_err(|source| uffd::UffdError::Os {
            op: "opening the program's pagemap",
            source,
        })?;
        let kswapd_threads = config.kswapd_threads;
        let thread_start = config.thread_start;
        let inner = Arc::new_cyclic(|me| Inner {
            lazy_threads: LazyThreads::new(
                me.clone(),
                LazyKind::new(
                    "uzswap-kswapd",
                    1..kswapd_threads,
                    crate::reclaim::kswapd_loop,
                ),
                LazyKind::new(
                    "uzswap-readahead",
                    0..crate::config::READAHEAD_THREADS,
                    crate::swapin::readahead_loop,
                ),
                thread_start,
            ),
            mapping: Mapping::new(uffd, tables, mem.addr(), len),
            zswap,
            group,
            staging,
            batch_staging,
            limit: AtomicU64::new(config.memory_limit),
            memory_max: AtomicU64::new(config.over_limit.memory_max.unwrap_or(u64::MAX)),
            fixed_metadata: fixed.bytes,
            in_flight: AtomicU64::new(0),
            thread_scratch: ThreadScratch::new(fixed.per_thread, fixed.bounce),
            dirty_reserve: fixed.dirty_reserve,
            folio_pages,
            folio_order: folio_pages.trailing_zeros() as u8,
            pages: PageFlags::new(nr_pages),
            lru: Lru::with_write_tests(
                folio_pages,
                nr_folios,
                config.pinned.div_ceil(fs) as u32,
                referenced_writes,
            ),
            staged: StagedFolios::new(staged_budget, folio_pages, nr_folios),
            discards: Default::default(),
            deferred,
            read_failures: Default::default(),
            incompressible: IncompressibleFolios::new(nr_pages, folio_pages),
            unevictable: Unevictable::new(nr_pages, folio_pages),
            keep_incompressible: config.policies.keep_incompressible,
            clean: CleanTracking::new(wp && config.policies.keep_clean),
            readahead: Readahead::new(folio_pages, nr_pages, config.policies.drop_behind),
            workingset: config.policies.workingset,
            referenced_writes,
            swapin_window: crate::swapin_window::SwapinWindow::new(
                config.policies.adaptive_swapin,
                folio_pages,
                nr_folios,
            ),
            spares: SpareHandlers::new(config.fault_threads),
            pool_share,
            busy_poll: Default::default(),
            program_memory: mem.process_memory(),
            program_tasks,
            program_pid: mem.program_pid(),
            // The handlers serve no faults then: program threads reclaim in their places.
            in_thread: config.in_thread_faults.then(|| {
                crate::serving_threads::InThreadFaults::new(
                    config.fault_threads + crate::spare::SPARE_HANDLERS,
                    fs,
                    &config.codecs(),
                )
            }),
            reclaim_wait: Default::default(),
            stop: AtomicBool::new(false),
            stats: RegionStats::default(),
            over_limit_config: config.over_limit,
            shared_limit: config.shared_limit.clone(),
            over_limit: Default::default(),
        });

        // Registered last. From here on an unmap of the range waits until a handler reads its
        // event, so every later failure must go through `Region`'s drop, which stops the
        // threads and unregisters the range before the mapping goes.
        let mode = match wp {
            true => RegisterMode::MISSING_WP,
            false => RegisterMode::MISSING,
        };
        fail::fail_point!("region::new::register", |_| Err(injected("register")));
        inner.mapping.register(&mem, mode)?;
        let mut region = Region {
            inner,
            threads: Vec::new(),
            mem,
        };
        let kinds = [
            (
                "fault",
                config.fault_threads,
                crate::handler::handler_loop as fn(&Inner),
            ),
            (
                "fault-spare",
                crate::spare::SPARE_HANDLERS,
                crate::handler::spare_loop,
            ),
            // The other kswapd threads and the readahead threads start once they have work
            // (lazy_threads.rs).
            ("kswapd", 1, crate::reclaim::kswapd_loop),
        ];
        for (kind, count, run) in kinds {
            for i in 0..count {
                fail::fail_point!("region::new::spawn", |_| Err(RegionError::Spawn(
                    std::io::Error::other("injected")
                )));
                let inner = region.inner.clone();
                // On an error the region is dropped: that stops the threads spawned so far
                // and unregisters the range.
                let thread =
                    spawn_critical(format!("uzswap-{kind}-{i}"), thread_start, move || {
                        run(&inner)
                    })
                    .map_err(RegionError::Spawn)?;
                region.threads.push(thread);
            }
        }
        region.inner.zswap.start_shrink_worker();
        if config.in_thread_faults {
            crate::in_thread::register(&region.inner).map_err(|e| {
                RegionError::Uffd(uffd::UffdError::Os {
                    op: "installing the SIGBUS handler",
                    source: e,
                })
            })?;
        }
        Ok(region)
    }

    /// The region's memory. Reading and writing it through this pointer is the caller's
    /// business (it is ordinary memory to the program).
    pub fn as_ptr(&self) -> *mut u8 {
        self.inner.mapping.base() as *mut u8
    }

    /// The region's memory as a byte slice.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        self.mem.own_mut().as_managed_slice()
    }

    /// The program a region in a program is in (`RemoteRegion`).
    #[cfg(target_arch = "x86_64")]
    pub(crate) fn process(&self) -> &Arc<uffd::remote::RemoteProcess> {
        match &self.mem {
            Memory::Program { process, .. } => process,
            Memory::Own(_) => unreachable!("a region of this process is in no other"),
        }
    }

    /// The shared state, for the crate's own tests.
    #[cfg(test)]
    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }

    /// The region's memory as atomic 64-bit words that any number of threads may share.
    pub fn as_atomic_words(&self) -> &[std::sync::atomic::AtomicU64] {
        self.mem.own().as_atomic_words()
    }

    /// The region's size in bytes: the size it was made with, rounded up to whole folios.
    pub fn len(&self) -> usize {
        self.inner.mapping.len()
    }

    /// Always false: a region has at least one folio.
    pub fn is_empty(&self) -> bool {
        self.inner.mapping.len() == 0
    }

    /// The memory limit in bytes.
    pub fn limit(&self) -> u64 {
        self.inner.limit()
    }

    /// Change the memory limit and the hard limit (None: no hard limit), as a cgroup's
    /// memory.high and memory.max may be changed while its tasks run: reclaim works towards
    /// the new limit from now on. `uzswap run` gives each region of a process tree its share
    /// of the tree's limits this way. A limit below `min_memory_limit` can only be exceeded.
    pub fn set_limits(&self, limit: u64, memory_max: Option<u64>) {
        self.inner.set_limits(limit, memory_max);
    }

    /// The most of the limit the pool may take now, in percent: `max_pool_percent`, or the
    /// share under it that the pool has been given by what it costs the program
    /// (`Policies::auto_pool_share`).
    pub fn pool_share_percent(&self) -> u32 {
        let zswap = &self.inner.zswap;
        zswap
            .params()
            .max_pool_percent()
            .min(zswap.pool_share_percent())
    }

    /// What the region does over its limit with nothing to reclaim (`RegionConfig::over_limit`).
    pub fn over_limit(&self) -> crate::OverLimit {
        self.inner.over_limit_config
    }

    /// Bytes held in memory now, by kind.
    pub fn usage(&self) -> Usage {
        self.inner.usage()
    }

    /// A handle that reads `usage` from another thread while the memory is borrowed.
    pub fn usage_probe(&self) -> UsageProbe {
        UsageProbe(self.inner.clone())
    }

    /// The engine, for its tunables and kernel-named statistics.
    pub fn zswap(&self) -> &Zswap {
        &self.inner.zswap
    }

    /// The engine group of this region (its `zswap_max`, `writeback`, memory.stat).
    pub fn group(&self) -> &ZswapGroup {
        &self.inner.group
    }

    /// Whether kernel-mode faults (the kernel touching the region for a system call) are
    /// served. When not, such a system call fails with EFAULT on an evicted page.
    pub fn kernel_faults_served(&self) -> bool {
        !self.inner.mapping.user_mode_only() && self.inner.in_thread.is_none()
    }

    /// A copy of the region's own statistics (the engine's are in `zswap().stats()`).
    pub fn stats(&self) -> RegionStatsSnapshot {
        self.inner.stats.snapshot()
    }

    /// Discard `len` bytes at `offset` (page aligned), as `madvise(MADV_DONTNEED)`: they read
    /// as zero afterwards, and whatever uzswap held for them is freed. Blocks until a fault
    /// handler has seen the discard.
    pub fn discard(&self, offset: usize, len: usize) -> Result<(), uffd::RawRegionError> {
        // It returns once a handler has read its event: see lock_order.rs.
        crate::lock_order::assert_none_held("a discard of the range");
        self.mem.own().discard(offset, len)
    }

    /// Change the protection of `len` bytes at `offset` (page aligned) to `prot` (`PROT_*`
    /// bits), as `mprotect`: an access it forbids gets SIGSEGV. Resident pages under another
    /// protection than read-write stay in memory, off reclaim's queue until they are
    /// read-write again (unevictable.rs); pages evicted before come back through faults as
    /// ever.
    pub fn protect(
        &self,
        offset: usize,
        len: usize,
        prot: i32,
    ) -> Result<(), uffd::RawRegionError> {
        let mem = self.mem.own();
        self.protect_with(offset, len, prot, || mem.protect(offset, len, prot))
    }

    /// `protect`, the change itself made by `apply` (for a region in a program, there).
    pub(crate) fn protect_with<E>(
        &self,
        offset: usize,
        len: usize,
        prot: i32,
        apply: impl FnOnce() -> Result<(), E>,
    ) -> Result<(), E> {
        let inner = &self.inner;
        let first = (offset / PAGE_SIZE) as u32;
        let end = (offset + len).div_ceil(PAGE_SIZE) as u32;
        let read_write = prot == libc::PROT_READ | libc::PROT_WRITE;
        if !read_write {
            // Before the change: reclaim, seeing the mark, no longer tries to move them.
            let end = end.min(inner.nr_pages());
            inner.unevictable.set_protected(first.min(end), end, true);
            return apply();
        }
        apply()?;
        for f in inner.unevictable.rescue(first, end.min(inner.nr_pages())) {
            let resident = (f..f + inner.folio_pages)
                .filter(|&p| inner.pages.is_resident(p))
                .count();
            inner.lru.queue(f);
            inner
                .stats
                .unevictable_pgs_rescued
                .fetch_add(resident as u64, Relaxed);
        }
        Ok(())
    }

    /// Whether the region holds nothing for the `len` bytes at `offset` (page aligned): no
    /// page of them present, staged or held by the engine, and none locked, so that they read
    /// as zero and a discard of them would free nothing; or a discard of them already read
    /// and not yet processed. A hint, read without locks: a page
    /// brought in meanwhile (a thread touching the range, readahead) may be missed. For
    /// memory the program has let go of and never reads again, which a missed page only
    /// keeps resident (and counted) until reclaim takes it: an allocator's trimmed
    /// reservation, whose discard would cost a wait for a fault handler for nothing.
    pub fn holds_nothing(&self, offset: usize, len: usize) -> bool {
        let inner = &self.inner;
        let first = (offset / PAGE_SIZE) as u32;
        let end = (offset + len)
            .div_ceil(PAGE_SIZE)
            .min(inner.mapping.len() / PAGE_SIZE) as u32;
        let fp = inner.folio_pages;
        // A page a discard read but not yet processed covers is being let go of: its zap
        // and the drop of what the engine holds for it are on their way. The gate, held
        // shared, waits out a read of events, so a discard whose `madvise` has returned is
        // seen pending or processed.
        let gate = inner.mapping.gate();
        let discarding = inner.discards.pending_mask(first, end);
        drop(gate);
        (first..end).all(|p| {
            let being_discarded = discarding.as_ref().is_some_and(|d| d[(p - first) as usize]);
            let kept = inner.pages.is_resident(p)
                || inner.group.peek(p).kind != zswap::swap::Kind::Empty
                || inner.group.is_locked(p)
                || inner.staged.contains(p & !(fp - 1));
            being_discarded || !kept
        })
    }

    /// `madvise(MADV_FREE)` on `len` bytes at `offset`, as an allocator's lazy purge does:
    /// the pages read either as they were or as zeros. For tests: a test has no other way to
    /// call it on the region without unsafe code.
    #[cfg(feature = "test-hooks")]
    pub fn free_lazily(&self, offset: usize, len: usize) -> Result<(), uffd::RawRegionError> {
        // It returns once a handler has read its event: see lock_order.rs.
        crate::lock_order::assert_none_held("an madvise(MADV_FREE) of the range");
        self.mem.own().free_lazily(offset, len)
    }

    /// Reclaim until the region holds at most `target` bytes (or nothing more can go).
    /// kswapd may be evicting at the same time: while it frees something, this goes on.
    pub fn reclaim_to(&self, target: u64) {
        crate::reclaim::wait_for_reclaim(&self.inner, target);
    }

    /// Make the region's memory safe to fork until the guard drops: reclaim is held off,
    /// every evicted page is brought back (the region may pass its limit meanwhile), and
    /// the mapping is inherited by a child (otherwise it is not: fork.rs). Call it just
    /// before `fork` (a `pthread_atfork` prepare handler) and drop the guard in the parent
    /// just after; in the child, forget it (`std::mem::forget`): the child's copy is plain
    /// memory, and nothing of the region runs there.
    pub fn prepare_fork(&self) -> Result<ForkGuard<'_>, uffd::RawRegionError> {
        let held_off = self.bring_all_back_for_fork();
        self.mem.own().do_fork()?;
        Ok(ForkGuard {
            region: self,
            _held_off: held_off,
        })
    }

    /// `prepare_fork` but making the mapping inherited: reclaim held off (until the guard
    /// returned drops) and every evicted page back.
    pub(crate) fn bring_all_back_for_fork(&self) -> crate::lock_order::RwLockWriteGuard<'_, ()> {
        let held_off = self.inner.reclaim_wait.hold_off();
        let before = self.inner.usage().resident;
        crate::fork::bring_all_back(&self.inner);
        // The pages the fork shares with the child cannot be moved out again (the kernel
        // moves only pages a process holds alone): from now on the region is neither
        // throttled nor killed over its limit (over_limit.rs).
        let brought_back = self.inner.usage().resident.saturating_sub(before);
        self.inner
            .over_limit
            .fork_allowance
            .fetch_max(brought_back, Relaxed);
        held_off
    }

    /// Move the whole region to a new address with `mremap`, keeping its pages, as a
    /// program's `realloc` of a large block does; `as_ptr` and `as_mut_slice` give the new
    /// place. Blocks until a fault handler has read the move. For tests of the `Remap`
    /// handling: a test has no other way to mremap the region without unsafe code.
    #[cfg(feature = "test-hooks")]
    pub fn relocate(&mut self) -> Result<(), uffd::RawRegionError> {
        // It returns once a handler has read its event: see lock_order.rs.
        crate::lock_order::assert_none_held("an mremap of the range");
        self.mem.own_mut().relocate()
    }

    /// Check where every page is against the region's counts and the engine's entries, with
    /// reclaim held off (`audit.rs`); the first disagreement. Call it with the region quiet.
    #[cfg(feature = "test-hooks")]
    pub fn audit(&self) -> Result<(), String> {
        crate::audit::audit(&self.inner)
    }

    /// Serve a read fault on the page at `offset` as a handler serves one it has just read:
    /// for a page already there, as a stale event is (one whose fault another handler has
    /// served since). For tests of that path: a test cannot time a real stale event.
    #[cfg(feature = "test-hooks")]
    pub fn fault_again(&self, offset: usize) {
        crate::fault::serve_fault(&self.inner, self.inner.mapping.base() + offset, false);
    }
}

/// A region made safe to fork (`Region::prepare_fork`): dropping it lets reclaim go on and
/// stops the mapping from being inherited again.
pub struct ForkGuard<'a> {
    region: &'a Region,
    _held_off: crate::lock_order::RwLockWriteGuard<'a, ()>,
}

impl Drop for ForkGuard<'_> {
    fn drop(&mut self) {
        let _ = self.region.mem.own().dont_fork();
    }
}

/// An error injected at a fail point (the `test-hooks` feature).
#[cfg(feature = "test-hooks")]
fn injected(op: &'static str) -> RegionError {
    RegionError::Uffd(uffd::UffdError::Os {
        op,
        source: std::io::Error::other("injected"),
    })
}

impl Drop for Region {
    fn drop(&mut self) {
        crate::in_thread::unregister(&self.inner);
        self.inner.stop.store(true, Relaxed);
        self.inner.reclaim_wait.wake_kswapd();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        // The threads started once needed: none starts after this.
        self.inner.lazy_threads.join_all();
        // Nothing serves the range any more: unregister it before the mapping goes (an
        // unmap of a registered range would wait for an event reader).
        let _ = self.inner.mapping.unregister();
        self.inner.staged.clear();
    }
}
