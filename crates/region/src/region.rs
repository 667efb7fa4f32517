//! A managed region: memory that behaves like ordinary memory while uzswap keeps its cold
//! pages compressed. This file is the public face: it sets a region up (its parts, inner.rs,
//! and its threads) and tears it down.

use std::sync::Arc;
use std::thread::JoinHandle;

use uffd::{RawRegion, Uffd, UffdBuilder};
use zswap::{Zswap, ZswapGroup, PAGE_SIZE};

use crate::charge::Usage;
use crate::config::{FixedCharge, RegionConfig};
use crate::error::RegionError;
use crate::inner::Inner;
use crate::memory::Memory;
use crate::stats::RegionStatsSnapshot;
use crate::threads::spawn_critical;

/// The first line of a region's statistics text (`Region::stats_text`): its form and version.
pub const STATS_HEADER: &str = "uzswap-stats 1";

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
    /// The fault handlers and the spare.
    handlers: Vec<JoinHandle<()>>,
    /// The first kswapd (the others start once needed: lazy_threads.rs).
    kswapd: Vec<JoinHandle<()>>,
    /// The memory. Dropped last, after the threads stopped and the range was unregistered.
    mem: Memory,
}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region")
            .field("addr", &self.inner.mapping().base())
            .field("len", &self.inner.mapping().len())
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
            .request(match config.policies.referenced_writes {
                true => uffd::Features::WP_ASYNC,
                false => uffd::Features::empty(),
            })
    }

    /// The region over `len` bytes of `mem`, served through `uffd`, with `config` validated
    /// for that length.
    pub(crate) fn over(
        mem: Memory,
        len: usize,
        uffd: Uffd,
        config: RegionConfig,
    ) -> Result<Region, RegionError> {
        let inner = Inner::new(&mem, len, uffd, &config)?;

        // Registered last (a lazy region by kswapd, once due: registration.rs). From here on
        // an unmap of the range waits until a handler reads its event, so every later failure
        // must go through `Region`'s drop, which stops the threads and unregisters the range
        // before the mapping goes.
        fail::fail_point!("region::new::register", |_| Err(crate::error::injected(
            "register"
        )));
        if inner.registers_at_once() {
            inner.register(&mem)?;
        }
        let mut region = Region {
            inner,
            handlers: Vec::new(),
            kswapd: Vec::new(),
            mem,
        };
        let kinds = [
            (
                "fault",
                config.fault_threads,
                Inner::handler_loop as fn(&Inner),
                true,
            ),
            (
                "fault-spare",
                crate::spare::SPARE_HANDLERS,
                Inner::spare_loop,
                true,
            ),
            // The other kswapd threads and the readahead threads start once they have work
            // (lazy_threads.rs).
            ("kswapd", 1, Inner::kswapd_loop, false),
        ];
        for (kind, count, run, serves_faults) in kinds {
            for i in 0..count {
                fail::fail_point!("region::new::spawn", |_| Err(RegionError::Spawn(
                    std::io::Error::other("injected")
                )));
                let inner = region.inner.clone();
                // On an error the region is dropped: that stops the threads spawned so far
                // and unregisters the range.
                let thread = spawn_critical(
                    format!("uzswap-{kind}-{i}"),
                    config.thread_start,
                    move || run(&inner),
                )
                .map_err(RegionError::Spawn)?;
                match serves_faults {
                    true => region.handlers.push(thread),
                    false => region.kswapd.push(thread),
                }
            }
        }
        region.inner.start_shrink_worker();
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
        self.inner.mapping().base() as *mut u8
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
        self.inner.mapping().len()
    }

    /// Always false: a region has at least one folio.
    pub fn is_empty(&self) -> bool {
        self.inner.mapping().len() == 0
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
        let zswap = self.inner.zswap();
        zswap
            .params()
            .max_pool_percent()
            .min(zswap.pool_share_percent())
    }

    /// What the region does over its limit with nothing to reclaim (`RegionConfig::over_limit`).
    pub fn over_limit(&self) -> crate::OverLimit {
        self.inner.over_limit_config()
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
        self.inner.zswap()
    }

    /// The engine group of this region (its `zswap_max`, `writeback`, memory.stat).
    pub fn group(&self) -> &ZswapGroup {
        self.inner.group()
    }

    /// Whether kernel-mode faults (the kernel touching the region for a system call) are
    /// served. When not, such a system call fails with EFAULT on an evicted page.
    pub fn kernel_faults_served(&self) -> bool {
        !self.inner.mapping().user_mode_only() && !self.inner.serves_in_thread()
    }

    /// Whether the region counts its pages itself: registered with userfaultfd, and every
    /// page the kernel mapped before adopted. False for a lazy region before that
    /// (`RegionConfig::lazy_registration`): its usage's resident part is then its process's
    /// anonymous memory.
    pub fn registered(&self) -> bool {
        self.inner.counts_every_page()
    }

    /// A copy of the region's own statistics (the engine's are in `zswap().stats()`).
    pub fn stats(&self) -> RegionStatsSnapshot {
        self.inner.stats().snapshot()
    }

    /// The statistics as `uzswap stat` reads them, for a program held under `memory_high`
    /// and `memory_max` (0 for none): `STATS_HEADER`, the engine's counters, the region's,
    /// then `usage` (read by the caller, who may derive more from the same sample), the
    /// limits, the pool's share and the swap file as `name value` lines. The caller adds what
    /// it knows of the process (its RSS, what lies outside the region).
    pub fn stats_text(&self, usage: &Usage, memory_high: u64, memory_max: u64) -> String {
        let engine = self.zswap().stats();
        let mut text = format!("{STATS_HEADER}\n{engine}{}", self.stats());
        let swap_file = engine.get("swap_slots_used") * PAGE_SIZE as u64;
        for (name, value) in [
            ("region_resident_bytes", usage.resident),
            ("region_staged_bytes", usage.staged),
            ("region_pool_bytes", usage.pool),
            ("region_metadata_bytes", usage.metadata),
            ("region_charged_bytes", usage.total()),
            ("memory_limit_bytes", memory_high),
            ("memory_max_bytes", memory_max),
            ("region_limit_bytes", self.limit()),
            ("region_registered", u64::from(self.registered())),
            ("pool_share_percent", u64::from(self.pool_share_percent())),
            ("swap_file_bytes", swap_file),
        ] {
            text.push_str(&format!("{name} {value}\n"));
        }
        text
    }

    /// Discard `len` bytes at `offset` (page aligned), as `madvise(MADV_DONTNEED)`: they read
    /// as zero afterwards, and whatever uzswap held for them is freed. Blocks until a fault
    /// handler has seen the discard.
    pub fn discard(&self, offset: usize, len: usize) -> Result<(), uffd::RawRegionError> {
        // It returns once a handler has read its event: see lock_order.rs.
        crate::lock_order::assert_none_held("a discard of the range");
        self.before_discard();
        self.mem.own().discard(offset, len)
    }

    /// Call before discarding the region's memory by other means (`madvise`, `munmap`, as a
    /// preload does for its program): waits for the faults the last discards held off, so
    /// that a thread discarding in a loop never starves them (mmap_changing.rs).
    pub fn before_discard(&self) {
        if let Some(waited) = self.inner.mapping().wait_for_retries() {
            let stats = self.inner.stats();
            stats
                .discards_waited
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            stats.discard_wait_ns.fetch_add(
                waited.as_nanos() as u64,
                std::sync::atomic::Ordering::Relaxed,
            );
        }
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
        let first = (offset / PAGE_SIZE) as u32;
        let end = (offset + len).div_ceil(PAGE_SIZE) as u32;
        let reclaim = self.inner.reclaim();
        if prot != libc::PROT_READ | libc::PROT_WRITE {
            // Before the change: reclaim, seeing the mark, no longer tries to move them.
            reclaim.mark_protected(first, end);
            return apply();
        }
        apply()?;
        reclaim.rescue_unprotected(first, end);
        Ok(())
    }

    /// Whether the region holds nothing for the `len` bytes at `offset` (page aligned): no
    /// page of them present, staged or held by the engine, and none locked, so that they read
    /// as zero and a discard of them would free nothing; or a discard of them already read
    /// and not yet processed. A hint, read without locks: a page brought in meanwhile (a
    /// thread touching the range, readahead) may be missed. For memory the program has let go
    /// of and never reads again, which a missed page only keeps resident (and counted) until
    /// reclaim takes it (an allocator's trimmed reservation, whose discard would cost a wait
    /// for a fault handler for nothing); and for a copy of memory no thread writes meanwhile
    /// (an emulated `mremap`, the program's call stopped), where what the region holds changes
    /// only under its folio locks, which count as held.
    pub fn holds_nothing(&self, offset: usize, len: usize) -> bool {
        // A lazy region does not count the pages the kernel mapped before it adopted them: the
        // page tables say where those are. Read first: a page adopted after the bookkeeping's
        // check below is in the page tables, read after it.
        let counts_every_page = self.inner.counts_every_page();
        self.inner.events().holds_nothing(offset, len)
            && (counts_every_page || self.inner.maps_nothing(offset, len))
    }

    /// `madvise(MADV_FREE)` on `len` bytes at `offset`, as an allocator's lazy purge does:
    /// the pages read either as they were or as zeros. For tests: a test has no other way to
    /// call it on the region without unsafe code.
    #[cfg(feature = "test-hooks")]
    pub fn free_lazily(&self, offset: usize, len: usize) -> Result<(), uffd::RawRegionError> {
        // It returns once a handler has read its event: see lock_order.rs.
        crate::lock_order::assert_none_held("an madvise(MADV_FREE) of the range");
        self.before_discard();
        self.mem.own().free_lazily(offset, len)
    }

    /// Reclaim until the region holds at most `target` bytes (or nothing more can go).
    /// kswapd may be evicting at the same time: while it frees something, this goes on. A
    /// lazy region not registered yet is registered first.
    pub fn reclaim_to(&self, target: u64) {
        self.inner.register_late();
        self.inner.wait_adopted();
        self.inner.reclaim().wait_for_reclaim(target);
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

    /// `prepare_fork` short of making the mapping inherited (`SwapIn::bring_all_back_for_fork`).
    pub(crate) fn bring_all_back_for_fork(&self) -> crate::lock_order::RwLockWriteGuard<'_, ()> {
        self.inner.swapin().bring_all_back_for_fork()
    }

    /// Bytes the last forks brought back that the region may hold past its limit until
    /// kswapd sees it back under (over_limit.rs).
    #[cfg(feature = "test-hooks")]
    pub fn fork_allowance(&self) -> u64 {
        self.inner.fork_allowance()
    }

    /// Register a lazy region's range without adopting the pages present (kswapd's
    /// registration stopped between its two steps; `adopt_now` takes the second). For tests
    /// of what may come between: a discard of a page not adopted yet.
    #[cfg(feature = "test-hooks")]
    pub fn register_without_adopting(&self) {
        self.inner.register_only();
    }

    /// Adopt the pages present that the region does not count, as kswapd does after it
    /// registers a lazy region's range, and again after a partial adoption.
    #[cfg(feature = "test-hooks")]
    pub fn adopt_now(&self) {
        self.inner.adopt_all();
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
        self.inner.audit().audit()
    }

    /// Serve a read fault on the page at `offset` as a handler serves one it has just read:
    /// for a page already there, as a stale event is (one whose fault another handler has
    /// served since). For tests of that path: a test cannot time a real stale event.
    #[cfg(feature = "test-hooks")]
    pub fn fault_again(&self, offset: usize) {
        self.inner
            .faults()
            .serve_fault(self.inner.mapping().base() + offset, false);
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

impl Drop for Region {
    fn drop(&mut self) {
        crate::in_thread::unregister(&self.inner);
        // kswapd and readahead first, the lazy threads with them: they may fault on the
        // region's memory (kswapd's unsharing populates pages: shared_folios.rs), which the
        // handlers serve until they are told to stop.
        self.inner.stop_threads();
        for t in self.kswapd.drain(..) {
            let _ = t.join();
        }
        self.inner.join_lazy_threads();
        self.inner.stop_handlers();
        for t in self.handlers.drain(..) {
            // A handler asleep in its poll stops when the bell wakes it, not 100 ms later: ring
            // until this one has stopped (each ring wakes one handler, maybe another).
            while !t.is_finished() {
                self.inner.wake_a_handler();
                std::thread::sleep(std::time::Duration::from_micros(100));
            }
            let _ = t.join();
        }
        // The range unregistered before the mapping goes.
        self.inner.shut_down();
    }
}
