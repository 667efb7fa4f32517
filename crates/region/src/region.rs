//! A managed region: memory that behaves like ordinary memory while uzswap keeps its cold
//! pages compressed. This file sets a region up and tears it down, and holds the state the
//! fault handlers (fault.rs), reclaim (reclaim.rs), the swap cache (swapcache.rs) and the
//! event handling (events.rs) share.
//!
//! Where a page is: present in the mapping (its bit in `resident`), staged in the swap cache
//! (moved out, uncompressed, still in memory), or held by the engine (pool, zero mark, swap
//! file); missing otherwise. All three change only under the page's folio lock in the engine's
//! swap cache, which is what makes concurrent faults, reclaim and discards agree.
//!
//! Memory accounting, like memory.high with the pool charged: resident + swap cache + pool
//! bytes. Reclaim keeps it under the limit; a fault that would pass it reclaims first.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};
use uffd::{RawRegion, RegisterMode, Staging, UffdBuilder};
use zswap::swap::{BackingDevice, FileDevice, FolioLock};
use zswap::{Zswap, ZswapConfig, ZswapGroup, PAGE_SIZE};

use crate::charge::{
    batching, discard_batch_slots, FixedCharge, BATCH_DISCARD_SLOTS, READAHEAD_THREADS,
};
use crate::config::{ConfigError, RegionConfig};
use crate::folio_queue::FolioQueue;
use crate::mapping::{Gate, Mapping, Stop};
use crate::stats::{RegionStats, RegionStatsSnapshot};
use crate::swapcache::SwapCacheMap;

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

/// Bytes the region holds in memory, by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Usage {
    /// Pages mapped in the region, in bytes.
    pub resident: u64,
    /// Folios in the region's swap cache (staged after their store, uncompressed), and freed
    /// staging slots not yet discarded beyond what the fixed charge holds for them, in bytes.
    pub swapcache: u64,
    /// The compressed pool's pages, the free ones it keeps for reuse included, in bytes.
    pub pool: u64,
    /// uzswap's own bookkeeping (the swap cache's state words and resident bits, the pool's
    /// handle table and span descriptors, the reclaim queue), charged like the kernel
    /// charges zswap's entries to the cgroup.
    pub metadata: u64,
}

impl Usage {
    /// All of it, in bytes: what the memory limit is compared with.
    pub fn total(&self) -> u64 {
        self.resident + self.swapcache + self.pool + self.metadata
    }
}

/// The state the region's threads share.
///
/// Lock order (a lock is taken only while holding none that comes after it), as the code
/// takes them:
///
/// ```text
/// folio lock (the engine's swap cache: one at a time, but reclaim's batch try-locks the
///   │         neighbours of the folio it holds, never waiting)
///   ├─> event gate (mapping.rs: shared around every userfaultfd call that changes the range,
///   │     │        exclusive to read events, which a thread may do holding its folio lock)
///   │     ├─> pending              (shared: the pending-discard check; exclusive: the
///   │     │                         discards just read are recorded)
///   │     ├─> lru, inactive, swapcache's map, read_failed, readahead.streams,
///   │     │   readahead.queue      (an install's bookkeeping)
///   │     └─> the engine's locks   (an install frees the engine's copies)
///   └─> lru, swapcache's map, read_failed, deferred, recent_discards, the engine's locks
///                                (outside the gate, or with it given up)
/// ```
///
/// The region's other locks are leaves, each held only for its own work (lru,
/// inactive, swapcache's map, read_failed, pending, deferred, left_by_spare, recent_discards,
/// the readahead locks, kswapd_wake, spares.lock, the latency histogram): `discard` lets
/// pending go before it takes each folio lock, reclaim lets lru go before it locks the folio
/// it named.
///
/// Events and madvise: an `madvise`, `munmap` or `mremap` of the registered range (the
/// program's, or `Region::discard`) returns only once a handler has read its event, and the
/// read takes the gate exclusively: so no thread makes such a call, or touches the range
/// (its fault waits for a handler, who may wait for the gate or a folio lock), while holding
/// the gate or a folio lock (reclaim's read of a folio where it is goes through `/proc`, which
/// fails on a missing page rather than waiting). A thread that must read events to go on (an
/// operation that got EAGAIN) gives the gate up first and keeps its folio lock
/// (`Mapping::retry`); a handler reads events holding nothing. The staging area
/// raises no events: its slots are discarded under any lock.
pub(crate) struct Inner {
    /// The range, its userfaultfd and the event gate: every userfaultfd call on the range.
    pub mapping: Mapping,
    pub staging: Arc<Staging>,
    pub batch_staging: Option<Arc<Staging>>,
    /// Per folio, when it was last queued for reclaim (`lru_seq` then).
    pub queued_at: Box<[AtomicU32]>,
    pub lru_seq: AtomicU32,
    pub zswap: Zswap,
    pub group: Arc<ZswapGroup>,
    pub limit: u64,
    /// Bytes of bookkeeping sized by the region: resident bits, staging in flight, the
    /// threads' I/O buffers, the drop-behind queue, freed staging slots waiting for their
    /// discard (`dirty_reserve`).
    pub fixed_metadata: u64,
    /// Bytes of freed staging slots that `fixed_metadata` covers: only dirty bytes past it
    /// count in the usage.
    pub dirty_reserve: u64,
    pub folio_pages: u32,
    pub folio_order: u8,
    /// One bit a page: present in the mapping. Changed under the page's folio lock.
    pub resident: Box<[AtomicU64]>,
    pub nr_resident: AtomicU64,
    /// Debug builds: per page, where its resident bit was last set and last cleared (the
    /// caller's file initial and line), for the report of a page we lost track of.
    #[cfg(debug_assertions)]
    pub resident_trail: Box<[[std::sync::atomic::AtomicU32; 2]]>,
    /// One bit a page: covered by a discard whose zap may still come, so the kernel may
    /// unmap it behind our back (events.rs: kept until the page leaves for the engine after
    /// `LATE_ZAP_WINDOW`). Changed under the page's folio lock.
    pub discarded: Box<[AtomicU64]>,
    /// Folios in the order they came in: reclaim takes the oldest (FIFO with the swap cache
    /// as second chance). Entries may be stale; reclaim checks under the folio lock.
    pub lru: Mutex<FolioQueue>,
    /// Folios a sequential scan has passed, reclaimed before those in `lru` (drop-behind,
    /// readahead.rs). Entries may be stale, as in `lru`.
    pub inactive: Mutex<std::collections::VecDeque<u32>>,
    pub drop_behind: bool,
    /// Folios whose last store found them incompressible (incompressible.rs).
    pub incompressible: crate::incompressible::IncompressibleFolios,
    pub keep_incompressible: bool,
    /// This process's memory, read where it is (reclaim's try of a folio's compression,
    /// reclaim.rs); None where `/proc` is not mounted: folios are then tried after they
    /// moved out.
    pub own_memory: Option<uffd::process::OwnMemory>,
    pub swapcache: SwapCacheMap,
    pub kswapd_wake: (Mutex<bool>, Condvar),
    pub stop: AtomicBool,
    pub stats: RegionStats,
    /// Events read by a handler that could not act on them at once (it held a folio).
    pub deferred: Mutex<Vec<uffd::Event>>,
    /// Faults the spare handler left to a regular one (spare.rs); `deferred_bell` is rung.
    pub left_by_spare: Mutex<Vec<uffd::Event>>,
    /// Rung when events are deferred, so a handler asleep on the userfaultfd takes them.
    pub deferred_bell: uffd::Doorbell,
    /// Discarded page ranges read but not yet processed.
    pub pending: Mutex<Vec<crate::events::PendingDiscard>>,
    /// Discarded page ranges processed lately, whose zap may still come (events.rs).
    pub recent_discards: Mutex<crate::events::RecentDiscards>,
    /// Folios read from disk kept clean (clean.rs).
    pub clean: crate::clean::CleanTracking,
    pub readahead: crate::readahead::Readahead,
    /// Regular fault handler threads, and the spare's state (spare.rs).
    pub fault_threads: usize,
    pub spares: crate::spare::SpareHandlers,
    /// Pages a fault could not read from the device once, left missing: poisoned if they
    /// fail again (fault.rs).
    pub read_failed: Mutex<std::collections::HashSet<u32>>,
}

impl Inner {
    /// `Mapping::retry`, reading the pending events as the region does
    /// (`events::read_pending_events`).
    pub fn retry<T>(&self, op: impl FnMut(&mut Gate<'_>) -> Result<T, Stop>) -> Option<T> {
        self.mapping
            .retry(|| crate::events::read_pending_events(self), op)
    }

    pub fn folio_bytes(&self) -> usize {
        self.folio_pages as usize * PAGE_SIZE
    }

    pub fn usage(&self) -> Usage {
        Usage {
            resident: self.nr_resident.load(Relaxed) * PAGE_SIZE as u64,
            // Staged folios, and freed staging slots not discarded yet beyond what the fixed
            // charge holds for them.
            swapcache: self.swapcache.pages() * PAGE_SIZE as u64
                + self
                    .staging_dirty_bytes()
                    .saturating_sub(self.dirty_reserve),
            // The pool's pages, and the freed ones it keeps for reuse: both are resident.
            pool: self.zswap.pool().charged_bytes(),
            metadata: self.fixed_metadata
                + self.group.cache().metadata_bytes()
                + self.zswap.pool().metadata_bytes()
                + self.lru.lock().bytes()
                + self.swapcache.queue_bytes(),
        }
    }

    /// Bytes that freed staging slots hold until their batch is discarded.
    fn staging_dirty_bytes(&self) -> u64 {
        let batch = self.batch_staging.as_ref().map_or(0, |b| b.dirty_bytes());
        (self.staging.dirty_bytes() + batch) as u64
    }

    /// Debug builds: where the page's resident bit was last cleared and last set.
    pub fn resident_trail(&self, page: u32) -> String {
        #[cfg(debug_assertions)]
        {
            let [off, on] = &self.resident_trail[page as usize];
            let at = |w: u32| format!("{}:{}", (w >> 24) as u8 as char, w & 0xff_ffff);
            format!(
                "cleared {} set {}",
                at(off.load(Relaxed)),
                at(on.load(Relaxed))
            )
        }
        #[cfg(not(debug_assertions))]
        {
            let _ = page;
            String::new()
        }
    }

    /// The folio's pages were read (or discarded): an earlier device read error on one of them
    /// no longer counts toward poisoning it (fault.rs).
    pub fn forget_read_failures(&self, folio: &FolioLock) {
        let mut failed = self.read_failed.lock();
        if !failed.is_empty() {
            for p in folio.offsets() {
                failed.remove(&p);
            }
        }
    }

    /// Queue the folio at `start` for reclaim, at the back (the youngest).
    pub fn queue_for_reclaim(&self, start: u32) {
        let mut lru = self.lru.lock();
        let seq = self.lru_seq.fetch_add(1, Relaxed);
        self.queued_at[(start / self.folio_pages) as usize].store(seq, Relaxed);
        // Compacting: only the newest entry of a folio stays (folio_queue.rs).
        lru.push_back(start, |_| true);
    }

    /// How long ago (in queueings) the folio at `start` was queued for reclaim. Zero for one
    /// queued again between the two loads (it would otherwise wrap and look oldest).
    pub fn queue_age(&self, start: u32) -> u32 {
        let now = self.lru_seq.load(Relaxed);
        let age =
            now.wrapping_sub(self.queued_at[(start / self.folio_pages) as usize].load(Relaxed));
        if age > i32::MAX as u32 {
            0
        } else {
            age
        }
    }

    pub fn is_resident(&self, page: u32) -> bool {
        self.resident[page as usize / 64].load(Relaxed) & (1 << (page % 64)) != 0
    }

    /// Mark a page present or not; the caller holds its folio lock.
    #[track_caller]
    pub fn set_resident(&self, page: u32, on: bool) {
        #[cfg(debug_assertions)]
        {
            let at = std::panic::Location::caller();
            let initial = at.file().rsplit('/').next().map_or(0, |f| f.as_bytes()[0]);
            self.resident_trail[page as usize][on as usize]
                .store(u32::from(initial) << 24 | at.line(), Relaxed);
        }
        let bit = 1u64 << (page % 64);
        let word = &self.resident[page as usize / 64];
        let was = if on {
            word.fetch_or(bit, Relaxed)
        } else {
            word.fetch_and(!bit, Relaxed)
        } & bit
            != 0;
        match (was, on) {
            (false, true) => {
                self.nr_resident.fetch_add(1, Relaxed);
            }
            (true, false) => {
                self.nr_resident.fetch_sub(1, Relaxed);
            }
            _ => {}
        }
    }

    pub fn is_discarded(&self, page: u32) -> bool {
        self.discarded[page as usize / 64].load(Relaxed) & (1 << (page % 64)) != 0
    }

    /// Mark a page covered by a discard, or not; the caller holds its folio lock.
    pub fn set_discarded(&self, page: u32, on: bool) {
        let bit = 1u64 << (page % 64);
        let word = &self.discarded[page as usize / 64];
        if on {
            word.fetch_or(bit, Relaxed);
        } else {
            word.fetch_and(!bit, Relaxed);
        }
    }

    pub fn wake_kswapd(&self) {
        let (m, c) = &self.kswapd_wake;
        *m.lock() = true;
        c.notify_all();
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
    /// The mapping. Only its address is shared with the handler threads; the memory itself
    /// is reached from Rust only through `as_mut_slice(&mut self)`. Dropped last, after the
    /// threads stopped and the range was unregistered.
    mem: RawRegion,
}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region")
            .field("addr", &self.inner.mapping.base())
            .field("len", &self.inner.mapping.len())
            .field("limit", &self.inner.limit)
            .finish()
    }
}

impl Region {
    /// The smallest memory limit a region of `size` bytes under `config` (its limit aside)
    /// accepts: what it charges from the start, plus four folios. None for a folio size or a
    /// size `new` refuses anyway.
    pub fn min_memory_limit(size: usize, config: &RegionConfig) -> Option<u64> {
        let mut config = config.clone();
        config.memory_limit = u64::MAX;
        config.validate(size).ok()?;
        let nr_pages = config.nr_pages(size)?;
        // The fixed charge grows with the limit (the discard batch, capped at 512 KiB): the
        // least limit that covers the charge at itself. From 0 the limit only rises, each
        // step by about 1/64 of the last rise (in whole folios), so a few steps reach it.
        config.memory_limit = 0;
        loop {
            let need = FixedCharge::of(&config, nr_pages).bytes + 4 * config.folio_size as u64;
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
    /// // 4 MiB of memory that may hold 8 MiB: resident pages, swap cache and pool together.
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
        let fs = config.folio_size;
        let nr_pages = config.nr_pages(size).expect("validated");
        let len = nr_pages as usize * PAGE_SIZE;
        let folio_pages = (fs / PAGE_SIZE) as u32;
        let fixed = FixedCharge::of(&config, nr_pages);

        let uffd = UffdBuilder::new()
            .user_mode_only(config.user_mode_only)
            .non_blocking(true)
            .create()?;
        if let Some(w) = uffd.mode_warning() {
            log::warn!("{w}");
        }
        let mem = RawRegion::new(len)?;
        // A child process must fault on the region rather than read zeros where our data is
        // (its copy of the mapping would not be served): it gets no mapping at all.
        mem.dont_fork()?;
        // Base pages only: a huge page collapsed by khugepaged under a folio would have to be
        // split by every UFFDIO_MOVE that evicts part of it (the kernel splits huge pages on
        // swap-out too), and it is the one path where MOVE met states we do not otherwise see.
        mem.no_huge_pages()?;

        let swap_pages = u32::try_from(config.swap_size.unwrap_or(len as u64) / PAGE_SIZE as u64)
            .expect("validated");
        let device: Arc<dyn BackingDevice> = match config.device.clone() {
            Some(d) => d,
            // Striped a folio at a time, so a folio's write is one write (swap/file.rs).
            None => Arc::new(FileDevice::create_with(
                config.swap_dir.as_deref(),
                swap_pages,
                folio_pages,
                true,
            )?),
        };
        let zswap = Zswap::new(
            ZswapConfig::new(config.memory_limit)
                .compressor(config.compressor)
                .device(device, swap_pages)
                .discard(config.swap_discard),
        );
        zswap
            .params()
            .set_max_pool_percent(config.max_pool_percent)
            .map_err(|e| {
                RegionError::Config(ConfigError {
                    field: "max_pool_percent",
                    reason: e.to_string(),
                })
            })?;
        zswap.params().set_writethrough(config.writethrough);
        let group = zswap.new_group(nr_pages);
        group.set_writeback_enabled(config.writeback);

        // The swap cache may hold 1/32 of the limit; staging needs room for that plus one
        // folio in flight per thread that evicts.
        let swapcache_budget =
            (config.memory_limit / 32 / PAGE_SIZE as u64).max(folio_pages as u64);
        // Freed staging slots are discarded in batches (`discard_batch_slots`), one TLB
        // flush a batch instead of one a folio; charged up front (`FixedCharge`).
        let batch_slots = discard_batch_slots(&config);
        let evicting = fixed.evicting as u64;
        let slots = u32::try_from(swapcache_budget / folio_pages as u64 + batch_slots + evicting)
            .map_err(|_| {
            RegionError::Config(ConfigError {
                field: "memory_limit",
                reason: format!("{} bytes is too large a limit", config.memory_limit),
            })
        })? + 4;
        fail::fail_point!("region::new::staging", |_| Err(injected("mmap staging")));
        let staging = Staging::new(slots, fs, batch_slots as usize)?;
        // Batch evictions (4 KiB folios) stage in slots of their own, one per evicting thread
        // (charged as in flight) and a few freed ones waiting for their batched discard
        // (charged in the fixed charge's `dirty_reserve`).
        let batch_staging = match batching(&config) {
            true => Some(Staging::new(
                (evicting as usize + BATCH_DISCARD_SLOTS) as u32,
                crate::reclaim::BATCH_PAGES * PAGE_SIZE,
                BATCH_DISCARD_SLOTS,
            )?),
            false => None,
        };
        // Write-protect faults too, where the kernel offers them: clean folios (clean.rs).
        let wp = uffd.features().contains(uffd::Features::PAGEFAULT_FLAG_WP);

        let incompressible =
            crate::incompressible::IncompressibleFolios::new(nr_pages, folio_pages);
        let nr_folios = nr_pages.div_ceil(folio_pages) as usize;
        let inner = Arc::new(Inner {
            mapping: Mapping::new(uffd, mem.addr(), len),
            staging,
            batch_staging,
            queued_at: (0..nr_pages.div_ceil(folio_pages))
                .map(|_| AtomicU32::new(0))
                .collect(),
            lru_seq: AtomicU32::new(0),
            zswap,
            group,
            limit: config.memory_limit,
            fixed_metadata: fixed.bytes,
            dirty_reserve: fixed.dirty_reserve,
            folio_pages,
            folio_order: folio_pages.trailing_zeros() as u8,
            resident: (0..nr_pages.div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
            nr_resident: AtomicU64::new(0),
            #[cfg(debug_assertions)]
            resident_trail: (0..nr_pages).map(|_| Default::default()).collect(),
            discarded: (0..nr_pages.div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
            lru: Mutex::new(FolioQueue::new(folio_pages, nr_folios)),
            inactive: Mutex::new(std::collections::VecDeque::with_capacity(
                crate::reclaim::INACTIVE_MAX,
            )),
            drop_behind: config.drop_behind,
            incompressible,
            keep_incompressible: config.keep_incompressible,
            own_memory: uffd::process::OwnMemory::open().ok(),
            swapcache: SwapCacheMap::new(swapcache_budget, folio_pages, nr_folios),
            kswapd_wake: (Mutex::new(false), Condvar::new()),
            stop: AtomicBool::new(false),
            stats: RegionStats::default(),
            deferred: Mutex::new(Vec::new()),
            left_by_spare: Mutex::new(Vec::new()),
            deferred_bell: uffd::Doorbell::new().map_err(RegionError::Uffd)?,
            pending: Mutex::new(Vec::new()),
            recent_discards: Default::default(),
            clean: crate::clean::CleanTracking::new(wp && config.keep_clean),
            readahead: Default::default(),
            fault_threads: config.fault_threads,
            spares: Default::default(),
            read_failed: Mutex::new(std::collections::HashSet::new()),
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
                crate::fault::handler_loop as fn(&Inner),
            ),
            (
                "fault-spare",
                crate::spare::SPARE_HANDLERS,
                crate::spare::spare_loop,
            ),
            (
                "readahead",
                READAHEAD_THREADS,
                crate::readahead::readahead_loop,
            ),
            ("kswapd", config.kswapd_threads, crate::reclaim::kswapd_loop),
        ];
        for (kind, count, run) in kinds {
            for i in 0..count {
                fail::fail_point!("region::new::spawn", |_| Err(RegionError::Spawn(
                    std::io::Error::other("injected")
                )));
                let inner = region.inner.clone();
                // On an error the region is dropped: that stops the threads spawned so far
                // and unregisters the range.
                let thread = spawn_critical(format!("uzswap-{kind}-{i}"), move || run(&inner))
                    .map_err(RegionError::Spawn)?;
                region.threads.push(thread);
            }
        }
        region.inner.zswap.start_shrink_worker();
        Ok(region)
    }

    /// The region's memory. Reading and writing it through this pointer is the caller's
    /// business (it is ordinary memory to the program).
    pub fn as_ptr(&self) -> *mut u8 {
        self.inner.mapping.base() as *mut u8
    }

    /// The region's memory as a byte slice.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        self.mem.as_managed_slice()
    }

    /// The shared state, for the crate's own tests.
    #[cfg(test)]
    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }

    /// The region's memory as atomic 64-bit words that any number of threads may share.
    pub fn as_atomic_words(&self) -> &[std::sync::atomic::AtomicU64] {
        self.mem.as_atomic_words()
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
        self.inner.limit
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
        !self.inner.mapping.user_mode_only()
    }

    /// A copy of the region's own statistics (the engine's are in `zswap().stats()`).
    pub fn stats(&self) -> RegionStatsSnapshot {
        self.inner.stats.snapshot()
    }

    /// Discard `len` bytes at `offset` (page aligned), as `madvise(MADV_DONTNEED)`: they read
    /// as zero afterwards, and whatever uzswap held for them is freed. Blocks until a fault
    /// handler has seen the discard.
    pub fn discard(&self, offset: usize, len: usize) -> Result<(), uffd::RawRegionError> {
        self.mem.discard(offset, len)
    }

    /// `madvise(MADV_FREE)` on `len` bytes at `offset`, as an allocator's lazy purge does:
    /// the pages read either as they were or as zeros. For tests: a test has no other way to
    /// call it on the region without unsafe code.
    #[cfg(feature = "test-hooks")]
    pub fn free_lazily(&self, offset: usize, len: usize) -> Result<(), uffd::RawRegionError> {
        self.mem.free_lazily(offset, len)
    }

    /// Reclaim until the region holds at most `target` bytes (or nothing more can go).
    /// kswapd may be evicting at the same time: a folio it holds, or just failed to store and
    /// queued again, is waited for a little rather than taken as the end.
    pub fn reclaim_to(&self, target: u64) {
        for _ in 0..100 {
            crate::reclaim::reclaim_to(&self.inner, target, crate::reclaim::KEPT_PER_CALL);
            let u = self.inner.usage();
            if u.total() <= target || (u.resident == 0 && u.swapcache == 0) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    /// Move the whole region to a new address with `mremap`, keeping its pages, as a
    /// program's `realloc` of a large block does; `as_ptr` and `as_mut_slice` give the new
    /// place. Blocks until a fault handler has read the move. For tests of the `Remap`
    /// handling: a test has no other way to mremap the region without unsafe code.
    #[cfg(feature = "test-hooks")]
    pub fn relocate(&mut self) -> Result<(), uffd::RawRegionError> {
        self.mem.relocate()
    }

    /// Serve a read fault on the page at `offset` as a handler serves one it has just read:
    /// for a page already there, as a stale event is (one whose fault another handler has
    /// served since). For tests of that path: a test cannot time a real stale event.
    #[cfg(feature = "test-hooks")]
    pub fn fault_again(&self, offset: usize) {
        crate::fault::serve_fault(&self.inner, self.inner.mapping.base() + offset, false);
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

/// Spawn a thread whose death would leave the program reading zeros where its data is: if it
/// panics, the process is stopped (invariant 9), saying why.
fn spawn_critical(
    name: String,
    f: impl FnOnce() + Send + 'static,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
                let why = panic
                    .downcast_ref::<&str>()
                    .copied()
                    .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                    .unwrap_or("a panic without a message");
                report(format_args!(
                    "uzswap: {name} died ({why}); stopping the process so it never reads lost data"
                ));
                std::process::abort();
            }
        })
}

/// Write a line to the process's standard error itself. `eprintln!` writes into a test
/// harness's capture buffer when one is set (spawned threads inherit it), and that buffer is
/// lost when the process is stopped right after: the one report that says why with it.
pub(crate) fn report(line: std::fmt::Arguments) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

impl Drop for Region {
    fn drop(&mut self) {
        self.inner.stop.store(true, Relaxed);
        self.inner.wake_kswapd();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        // Nothing serves the range any more: unregister it before the mapping goes (an
        // unmap of a registered range would wait for an event reader).
        let _ = self.inner.mapping.unregister();
        self.inner.swapcache.clear();
    }
}
