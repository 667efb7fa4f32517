//! The region's parts, each owning its own state, assembled (`Inner::new`); and the views
//! of them that the actions work through: each action (reclaim, swap-in, a fault, the event
//! reader, a handler, throttling, the audit) is a type in its own file that borrows the
//! parts it uses, built here (`Inner::reclaim`, ...). Only this file sees every part.
//!
//! Where a page is: present in the mapping (`pages`, its resident bit), staged (`staged`:
//! moved out by reclaim, uncompressed, still in memory, not yet stored), or held by the engine
//! (pool, zero mark, swap file: `group`'s swap cache); missing otherwise. A clean folio is
//! resident or staged and held by the engine too (clean.rs). All three change only under
//! the page's folio lock in the engine's swap cache, which is what makes concurrent faults,
//! reclaim and discards agree. What the region holds is charged as charge.rs says.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use uffd::{RegisterMode, Staging, Uffd};
use zswap::swap::{BackingDevice, FileDevice, LazyFileDevice};
use zswap::{Zswap, ZswapConfig, ZswapGroup, PAGE_SIZE};

use crate::adopt::Adopt;
#[cfg(feature = "test-hooks")]
use crate::audit::Audit;
use crate::charge::{Meter, ThreadScratch, Usage};
use crate::clean::CleanTracking;
use crate::config::{
    batching, discard_batch_slots, ConfigError, FixedCharge, RegionConfig, SwapFormat,
    BATCH_DISCARD_SLOTS,
};
use crate::deferred::DeferredEvents;
use crate::discards::Discards;
use crate::error::RegionError;
use crate::events::Events;
use crate::fault::Faults;
use crate::geometry::Geometry;
use crate::handler::Handler;
use crate::incompressible::IncompressibleFolios;
use crate::lazy_threads::{LazyKind, LazyThreads};
use crate::lru::Lru;
use crate::mapping::Mapping;
use crate::memory::Memory;
use crate::over_limit::{OverLimit, OverLimitState};
use crate::page_flags::PageFlags;
use crate::read_failures::ReadFailures;
use crate::readahead::Readahead;
use crate::reclaim::Reclaim;
use crate::reclaim_wait::ReclaimWait;
use crate::registration::Registration;
use crate::serving_threads::InThreadFaults;
use crate::shared_folios::SharedFolios;
use crate::spare::SpareHandlers;
use crate::staged::StagedFolios;
use crate::stats::RegionStats;
use crate::swapin::SwapIn;
use crate::swapin_window::SwapinWindow;
use crate::throttle::Throttle;
use crate::unevictable::Unevictable;

/// The share of the limit reclaim keeps staged (its inactive list, staged.rs): a folio must
/// be used within the time it takes reclaim to store this much to be kept.
const STAGED_SHARE: u64 = 8;

/// The state the region's threads share: its parts.
///
/// Their locks are taken in the order lock_order.rs gives (checked in debug builds).
pub(crate) struct Inner {
    /// The range, its userfaultfd and the event gate: every userfaultfd call on the range.
    mapping: Mapping,
    zswap: Zswap,
    /// The region's engine group: its pages' state words and folio locks (the swap cache).
    group: Arc<ZswapGroup>,
    geometry: Geometry,
    /// Whether the range is registered for write-protect faults too (clean.rs; with
    /// `WP_ASYNC`, the written bits reclaim reads, mapping.rs `take_written`).
    wp: bool,
    /// When the range is registered: at once, or once due (registration.rs).
    registration: Registration,
    /// Where folios are moved out to (one folio a slot); batch evictions of 4 KiB folios
    /// have slots of their own (reclaim.rs).
    staging: Arc<Staging>,
    batch_staging: Option<Arc<Staging>>,
    /// The memory limit and the hard limit (u64::MAX for none), in bytes (charge.rs).
    limit: AtomicU64,
    memory_max: AtomicU64,
    /// Bytes charged from the start (charge.rs).
    fixed_metadata: u64,
    /// Bytes out of the mapping and counted nowhere else (charge.rs, `InFlight`).
    in_flight: AtomicU64,
    /// The scratch of the region's threads that have used any (charge.rs).
    thread_scratch: ThreadScratch,
    /// Bytes of freed staging slots that `fixed_metadata` covers.
    dirty_reserve: u64,
    /// Resident and discarded bits.
    pages: PageFlags,
    /// The order reclaim takes folios in.
    lru: Lru,
    /// Folios moved out and not yet stored: reclaim's inactive list (staged.rs).
    staged: StagedFolios,
    /// Discards read, pending and recent (events.rs).
    discards: Discards,
    /// Events read but not served yet.
    deferred: DeferredEvents,
    /// Pages under another protection than read-write, which reclaim cannot take.
    unevictable: Unevictable,
    /// Folios reclaim found shared with a forked child, for kswapd to unshare.
    shared: SharedFolios,
    /// Pages the device failed to read once (swapin.rs).
    read_failures: ReadFailures,
    /// Policies: incompressible folios left resident, clean folios, readahead and
    /// drop-behind. They decide; the actions are reclaim's and the fault's.
    incompressible: IncompressibleFolios,
    /// `Policies::keep_incompressible`.
    keep_incompressible: bool,
    clean: CleanTracking,
    readahead: Readahead,
    /// How much of a folio a fault brings back (swapin_window.rs).
    swapin_window: SwapinWindow,
    /// `Policies::workingset`: near refaults activate folios (workingset.rs).
    workingset: bool,
    /// The spare fault handler's state (spare.rs).
    spares: SpareHandlers,
    /// The pool's share of the limit (pool_share.rs): None where it is fixed
    /// (`Policies::auto_pool_share` off).
    pool_share: Option<crate::pool_share::PoolShare>,
    /// Which fault handler polls the userfaultfd between faults (busy_poll.rs).
    busy_poll: crate::busy_poll::BusyPoll,
    /// The memory of the process the range is in (this one, or a program served from
    /// here), read where it is (reclaim's try of a folio's compression); None where `/proc`
    /// is not mounted: folios are then tried after they moved out.
    program_memory: Option<uffd::process::ProcessMemory>,
    /// The program, where it is not this process (a `RemoteRegion`'s): what a kill at the
    /// hard limit kills (throttle.rs).
    program_pid: Option<rustix::process::Pid>,
    /// Faults served in the faulting thread (in_thread.rs): None where handlers serve them.
    in_thread: Option<InThreadFaults>,
    /// kswapd's wake-ups, and reclaim's progress for those who wait on it.
    reclaim_wait: ReclaimWait,
    /// What a fault over the limit with nothing to reclaim does (over_limit.rs), and the
    /// episodes under way.
    over_limit_config: OverLimit,
    /// The limit this region shares with others, if any (`RegionConfig::shared_limit`).
    shared_limit: Option<Arc<dyn crate::over_limit::SharedLimit>>,
    over_limit: OverLimitState,
    /// kswapd, readahead and an adoption under way stop (`stop_threads`).
    stop: AtomicBool,
    /// The handlers and the spare stop (`stop_handlers`), once the others have.
    handlers_stop: AtomicBool,
    /// The threads started once needed (lazy_threads.rs).
    lazy_threads: LazyThreads<Inner>,
    stats: RegionStats,
}

impl Inner {
    /// The parts of a region over `len` bytes of `mem`, served through `uffd`, under
    /// `config` (validated for that length). The range is not registered yet (`register`,
    /// or later: `registers_at_once`).
    pub fn new(
        mem: &Memory,
        len: usize,
        uffd: Uffd,
        config: &RegionConfig,
    ) -> Result<Arc<Inner>, RegionError> {
        let fs = config.folio_size;
        let nr_pages = (len / PAGE_SIZE) as u32;
        let folio_pages = (fs / PAGE_SIZE) as u32;
        let fixed = FixedCharge::of(config, nr_pages);

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
                    // Made at its first write in a lazy region, which most often never
                    // writes (its directory checked where the run starts).
                    None if config.lazy_registration => Arc::new(LazyFileDevice::new(
                        config.swap_dir.clone(),
                        swap_pages,
                        folio_pages,
                    )),
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
        let pool_share = config
            .policies
            .auto_pool_share
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

        // Reclaim keeps 1/8 of the limit staged (its inactive list, staged.rs); staging needs
        // room for that plus one folio in flight per thread that evicts.
        let staged_target = match config.policies.inactive_list {
            true => (config.memory_limit / STAGED_SHARE / PAGE_SIZE as u64).max(folio_pages as u64),
            false => 0,
        };
        // Freed staging slots are discarded in batches (`discard_batch_slots`), one TLB
        // flush a batch instead of one a folio; charged up front (`FixedCharge`).
        let batch_slots = discard_batch_slots(config);
        let evicting = fixed.evicting as u64;
        let slots = u32::try_from(staged_target / folio_pages as u64 + batch_slots + evicting)
            .map_err(|_| {
                RegionError::Config(ConfigError {
                    field: "memory_limit",
                    reason: format!("{} bytes is too large a limit", config.memory_limit),
                })
            })?
            + 4;
        fail::fail_point!("region::new::staging", |_| Err(crate::error::injected(
            "mmap staging"
        )));
        let staging = mem.staging(slots, fs, batch_slots as usize)?;
        // Batch evictions (4 KiB folios) stage in slots of their own, one per evicting thread
        // (charged as in flight) and a few freed ones waiting for their batched discard
        // (charged in the fixed charge's `dirty_reserve`).
        let batch_staging = match batching(config) {
            true => Some(mem.staging(
                (evicting as usize + BATCH_DISCARD_SLOTS) as u32,
                crate::config::BATCH_PAGES * PAGE_SIZE,
                BATCH_DISCARD_SLOTS,
            )?),
            false => None,
        };
        // Write-protect faults too, where the kernel offers them: clean folios (clean.rs).
        let wp = uffd.features().contains(uffd::Features::PAGEFAULT_FLAG_WP);
        // Writes seen with no fault (`WP_ASYNC`, asked for with `referenced_writes`): the
        // kernel resolves every write-protect fault itself, so none reaches clean.rs, which
        // is off then.
        let wp_async = wp && uffd.features().contains(uffd::Features::WP_ASYNC);
        let written = match wp_async {
            true => Some(mem.written_pages().map_err(|source| uffd::UffdError::Os {
                op: "opening the program's pagemap",
                source,
            })?),
            false => None,
        };

        let nr_folios = nr_pages.div_ceil(folio_pages) as usize;
        let deferred = DeferredEvents::new()?;
        let tables = mem.page_tables().map_err(|source| uffd::UffdError::Os {
            op: "opening the program's pagemap",
            source,
        })?;
        let kswapd_threads = config.kswapd_threads;
        let thread_start = config.thread_start;
        Ok(Arc::new_cyclic(|me| Inner {
            lazy_threads: LazyThreads::new(
                me.clone(),
                LazyKind::new("uzswap-kswapd", 1..kswapd_threads, Inner::kswapd_loop),
                LazyKind::new(
                    "uzswap-readahead",
                    0..crate::config::READAHEAD_THREADS,
                    Inner::readahead_loop,
                ),
                thread_start,
            ),
            mapping: Mapping::new(uffd, tables, written, mem.addr(), len),
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
            geometry: Geometry::new(folio_pages, nr_pages),
            wp,
            registration: Registration::new(
                config.lazy_registration.then(|| mem.late_registration()),
                config.memory_limit,
            ),
            pages: PageFlags::new(nr_pages),
            lru: Lru::new(folio_pages, nr_folios, config.pinned.div_ceil(fs) as u32),
            staged: StagedFolios::new(staged_target, folio_pages, nr_folios),
            discards: Default::default(),
            deferred,
            read_failures: Default::default(),
            incompressible: IncompressibleFolios::new(nr_pages, folio_pages),
            unevictable: Unevictable::new(folio_pages),
            shared: SharedFolios::new(mem.unshare()),
            keep_incompressible: config.policies.keep_incompressible,
            clean: CleanTracking::new(wp && !wp_async && config.policies.keep_clean),
            readahead: Readahead::new(folio_pages, nr_pages, config.policies.drop_behind),
            workingset: config.policies.workingset,
            swapin_window: crate::swapin_window::SwapinWindow::new(
                config.policies.adaptive_swapin,
                folio_pages,
                nr_folios,
            ),
            spares: SpareHandlers::new(config.fault_threads),
            pool_share,
            busy_poll: Default::default(),
            program_memory: mem.process_memory(),
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
            handlers_stop: AtomicBool::new(false),
            stats: RegionStats::default(),
            over_limit_config: config.over_limit,
            shared_limit: config.shared_limit.clone(),
            over_limit: Default::default(),
        }))
    }

    /// Register the range with the userfaultfd: from here on an unmap of it waits until a
    /// handler reads its event.
    pub fn register(&self, mem: &Memory) -> Result<(), uffd::UffdError> {
        self.mapping.register(mem, self.register_mode())
    }

    fn register_mode(&self) -> RegisterMode {
        match self.wp {
            true => RegisterMode::MISSING_WP,
            false => RegisterMode::MISSING,
        }
    }

    /// Whether the range is to be registered now, as the region is made (else lazily,
    /// registration.rs).
    pub fn registers_at_once(&self) -> bool {
        self.registration.complete()
    }

    /// kswapd, before each pass: a lazy region not registered yet charges what its process
    /// holds, and is registered once that is due (registration.rs).
    fn register_when_due(&self) {
        if self.registration.retry_due() {
            self.adopt_all();
            return;
        }
        // (Unreadable, it is `u64::MAX`: registered now, as the limit cannot be watched.)
        let Some(anon) = self.registration.watch() else {
            return;
        };
        // This process's share of a limit shared with others, taken each pass (a region that
        // takes no faults takes it nowhere else so often).
        let total = self.usage().total();
        self.stats.peak_charged_bytes.fetch_max(total, Relaxed);
        if let Some(shared) = &self.shared_limit {
            let (limit, max) = shared.share(total);
            self.set_limits(limit, max);
        }
        if self.registration.due(anon, self.limit()) {
            self.register_late();
        }
    }

    /// Register a lazy region's range now, and adopt the pages present in it (adopt.rs);
    /// nothing for a region registered already. A failure is said: the memory is then not
    /// held under the limit.
    pub fn register_late(&self) {
        if self.register_only() {
            self.adopt_all();
        }
    }

    /// `register_late`'s first step: register a lazy region's range, its pages not adopted
    /// yet; true if this call did.
    pub fn register_only(&self) -> bool {
        let Some(late) = self.registration.begin() else {
            return false;
        };
        if let Err(e) = self.mapping.register_late(&late, self.register_mode()) {
            self.registration.failed();
            crate::threads::report(format_args!(
                "uzswap: cannot register the region's memory with userfaultfd ({e}): \
                 it is not held under the limit"
            ));
            return false;
        }
        true
    }

    /// Adopt the pages in the mapping the region does not count (adopt.rs): complete, or
    /// partial, to be adopted again later (pages left for a discard's zap that may still
    /// come, or page tables that could not be read).
    pub fn adopt_all(&self) {
        let adopted = self.adopt().adopt_in_mapping();
        self.stats.adopted_pages.fetch_add(adopted.adopted, Relaxed);
        match adopted.complete {
            true => self.registration.adopted(),
            false => self.registration.partial(),
        }
    }

    /// Whether the page tables map nothing (present or swapped) in the `len` bytes at
    /// `offset`; false when they cannot be read.
    pub fn maps_nothing(&self, offset: usize, len: usize) -> bool {
        let first = (offset / PAGE_SIZE) as u32;
        let n = len.div_ceil(PAGE_SIZE) as u32;
        self.mapping
            .in_mapping_pages(first, n)
            .is_some_and(|pages| !pages.contains(&true))
    }

    /// Wait while another thread adopts the pages present in a lazy region's range.
    pub fn wait_adopted(&self) {
        self.registration.wait_adopted();
    }

    /// Whether the region counts every page present in its range (registration.rs): not a
    /// lazy region before it is registered and its pages adopted.
    pub fn counts_every_page(&self) -> bool {
        self.registration.complete()
    }

    /// The thread bodies: a fault handler, the spare handler, kswapd, readahead.
    pub fn handler_loop(&self) {
        self.handler().handler_loop();
    }

    pub fn spare_loop(&self) {
        self.handler().spare_loop();
    }

    pub fn kswapd_loop(&self) {
        self.reclaim().kswapd_loop(&|| self.register_when_due());
    }

    pub fn readahead_loop(&self) {
        self.swapin().readahead_loop();
    }

    /// Start the engine's shrink worker.
    pub fn start_shrink_worker(&self) {
        self.zswap.start_shrink_worker();
    }

    /// Tell the region's threads but the handlers to stop: kswapd and readahead at once.
    pub fn stop_threads(&self) {
        self.stop.store(true, Relaxed);
        self.reclaim_wait.wake_kswapd();
        self.readahead.wake_all();
    }

    /// Once `stop_threads`' threads are joined: tell the handlers to stop, the spare at once,
    /// the others within their poll timeouts or at the next `wake_a_handler`.
    pub fn stop_handlers(&self) {
        self.handlers_stop.store(true, Relaxed);
        self.spares.wake();
    }

    #[cfg(feature = "test-hooks")]
    pub fn fork_allowance(&self) -> u64 {
        self.over_limit.fork_allowance.load(Relaxed)
    }

    /// Join the threads started once needed (none starts after this).
    pub fn join_lazy_threads(&self) {
        self.lazy_threads.join_all();
    }

    /// Ring the deferred events' bell: one handler asleep in its poll wakes (and, told to
    /// stop, stops), as the ring is taken by the handler it wakes.
    pub fn wake_a_handler(&self) {
        self.deferred.bell().ring();
    }

    /// Once every thread the region started is joined: the range is unregistered (an unmap
    /// of a registered range would wait for an event reader) and staging given back.
    pub fn shut_down(&self) {
        let _ = self.mapping.unregister();
        self.staged.clear();
    }

    // The views: each action borrows the parts it uses.

    pub fn adopt(&self) -> Adopt<'_> {
        Adopt {
            mapping: &self.mapping,
            group: &self.group,
            geometry: self.geometry,
            pages: &self.pages,
            discards: &self.discards,
            lru: &self.lru,
            registration: &self.registration,
            stop: &self.stop,
        }
    }

    pub fn meter(&self) -> Meter<'_> {
        Meter {
            limit: &self.limit,
            memory_max: &self.memory_max,
            fixed_metadata: self.fixed_metadata,
            dirty_reserve: self.dirty_reserve,
            in_flight: &self.in_flight,
            thread_scratch: &self.thread_scratch,
            reclaim_wait: &self.reclaim_wait,
            pages: &self.pages,
            staged: &self.staged,
            staging: &self.staging,
            batch_staging: self.batch_staging.as_deref(),
            zswap: &self.zswap,
            group: &self.group,
            incompressible: &self.incompressible,
            swapin_window: &self.swapin_window,
            unevictable: &self.unevictable,
            lru: &self.lru,
            in_thread: self.in_thread.as_ref(),
            registration: &self.registration,
        }
    }

    pub fn events(&self) -> Events<'_> {
        Events {
            mapping: &self.mapping,
            group: &self.group,
            geometry: self.geometry,
            pages: &self.pages,
            discards: &self.discards,
            deferred: &self.deferred,
            staged: &self.staged,
            read_failures: &self.read_failures,
            incompressible: &self.incompressible,
            lru: &self.lru,
            swapin_window: &self.swapin_window,
            reclaim_wait: &self.reclaim_wait,
            spares: &self.spares,
            stats: &self.stats,
        }
    }

    pub fn reclaim(&self) -> Reclaim<'_> {
        Reclaim {
            meter: self.meter(),
            events: self.events(),
            mapping: &self.mapping,
            zswap: &self.zswap,
            group: &self.group,
            geometry: self.geometry,
            pages: &self.pages,
            lru: &self.lru,
            discards: &self.discards,
            unevictable: &self.unevictable,
            shared: &self.shared,
            staging: &self.staging,
            batch_staging: self.batch_staging.as_ref(),
            staged: &self.staged,
            incompressible: &self.incompressible,
            keep_incompressible: self.keep_incompressible,
            readahead: &self.readahead,
            swapin_window: &self.swapin_window,
            pool_share: self.pool_share.as_ref(),
            program_memory: self.program_memory.as_ref(),
            over_limit_config: self.over_limit_config,
            over_limit: &self.over_limit,
            shared_limit: self.shared_limit.as_deref(),
            in_thread: self.in_thread.as_ref(),
            reclaim_wait: &self.reclaim_wait,
            lazy_threads: &self.lazy_threads,
            stop: &self.stop,
            stats: &self.stats,
        }
    }

    pub fn swapin(&self) -> SwapIn<'_> {
        SwapIn {
            events: self.events(),
            reclaim: self.reclaim(),
            meter: self.meter(),
            mapping: &self.mapping,
            group: &self.group,
            geometry: self.geometry,
            pages: &self.pages,
            staged: &self.staged,
            discards: &self.discards,
            lru: &self.lru,
            swapin_window: &self.swapin_window,
            readahead: &self.readahead,
            incompressible: &self.incompressible,
            clean: &self.clean,
            workingset: self.workingset,
            read_failures: &self.read_failures,
            spares: &self.spares,
            reclaim_wait: &self.reclaim_wait,
            over_limit: &self.over_limit,
            stop: &self.stop,
            stats: &self.stats,
        }
    }

    pub fn throttle(&self) -> Throttle<'_> {
        Throttle {
            reclaim: self.reclaim(),
            meter: self.meter(),
            over_limit_config: self.over_limit_config,
            over_limit: &self.over_limit,
            shared_limit: self.shared_limit.as_deref(),
            spares: &self.spares,
            zswap: &self.zswap,
            group: &self.group,
            program_pid: self.program_pid,
            stats: &self.stats,
        }
    }

    pub fn faults(&self) -> Faults<'_> {
        Faults {
            events: self.events(),
            reclaim: self.reclaim(),
            swapin: self.swapin(),
            throttle: self.throttle(),
            meter: self.meter(),
            mapping: &self.mapping,
            group: &self.group,
            geometry: self.geometry,
            pages: &self.pages,
            staged: &self.staged,
            discards: &self.discards,
            unevictable: &self.unevictable,
            lru: &self.lru,
            clean: &self.clean,
            over_limit_config: self.over_limit_config,
            reclaim_wait: &self.reclaim_wait,
            stats: &self.stats,
        }
    }

    pub fn handler(&self) -> Handler<'_> {
        Handler {
            faults: self.faults(),
            events: self.events(),
            mapping: &self.mapping,
            deferred: &self.deferred,
            busy_poll: &self.busy_poll,
            spares: &self.spares,
            thread_scratch: &self.thread_scratch,
            stop: &self.handlers_stop,
            stats: &self.stats,
        }
    }

    #[cfg(feature = "test-hooks")]
    pub fn audit(&self) -> Audit<'_> {
        Audit {
            meter: self.meter(),
            mapping: &self.mapping,
            zswap: &self.zswap,
            group: &self.group,
            geometry: self.geometry,
            pages: &self.pages,
            staged: &self.staged,
            discards: &self.discards,
            deferred: &self.deferred,
            readahead: &self.readahead,
            reclaim_wait: &self.reclaim_wait,
        }
    }

    // What the region's public face reads (region.rs).

    pub fn mapping(&self) -> &Mapping {
        &self.mapping
    }

    pub fn zswap(&self) -> &Zswap {
        &self.zswap
    }

    pub fn group(&self) -> &ZswapGroup {
        &self.group
    }

    pub fn stats(&self) -> &RegionStats {
        &self.stats
    }

    pub fn over_limit_config(&self) -> OverLimit {
        self.over_limit_config
    }

    /// Whether faults are served in the faulting thread (in_thread.rs).
    pub fn serves_in_thread(&self) -> bool {
        self.in_thread.is_some()
    }

    /// The memory limit now, in bytes.
    pub fn limit(&self) -> u64 {
        self.meter().limit()
    }

    /// `Region::set_limits`.
    pub fn set_limits(&self, limit: u64, memory_max: Option<u64>) {
        self.meter().set_limits(limit, memory_max);
    }

    pub fn usage(&self) -> Usage {
        self.meter().usage()
    }
}
