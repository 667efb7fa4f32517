//! zswap itself: a [`Zswap`] instance (the pool, the compressors, the tunables, the
//! statistics, the backing device and the shrinker) and its groups ([`ZswapGroup`]): swap
//! spaces with their own swap cache and the per-cgroup knobs `zswap_max` and `writeback`.
//! A managed region is one group.
//!
//! Every operation on pages takes a [`FolioLock`] from the group's swap cache: owning the
//! folio there is what makes store, load, writeback and invalidate of the same pages
//! mutually exclusive, as the folio lock does in the kernel.
//!
//! Store (store.rs), load (load.rs), invalidate (invalidate.rs), writeback (writeback.rs),
//! the shrinker (shrinker.rs) and the limits (limits.rs) each have a file.

mod adaptive;
mod audit;
mod invalidate;
mod limits;
mod load;
pub mod parallel;
pub mod pool;
mod shrinker;
mod store;
mod writeback;

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Weak};

use parking_lot::{Condvar, Mutex};

use crate::compress::{CompressorSpec, UnknownCompressor};
use crate::params::{ParamError, Params, WritebackCompressor};
use crate::stats::{Stats, StatsSnapshot};
use crate::swap::cache::{Busy, FolioLock, PageState, SwapCache, SHADOW_BITS};
use crate::swap::device::BackingDevice;
use crate::swap::segments::{PagedSegments, SegmentDevice, SegmentLog, SegmentStats};
use crate::swap::swap_info::SwapInfo;
use crate::zsmalloc::ZsPool;

pub use load::{LoadError, LoadErrorKind, Loaded};
pub use pool::{TooManyCompressors, MAX_COMPRESSORS};
pub use shrinker::ShrinkResult;
pub use store::{StoreError, SwapOutResult, STORE_SCRATCH_BYTES};
pub use writeback::WritebackError;

use pool::Compressors;

/// How to build a zswap instance.
#[derive(Debug, Clone)]
pub struct ZswapConfig {
    /// The memory that `max_pool_percent` is a percentage of: the region's memory limit, as
    /// the kernel uses total RAM.
    pub total_memory: u64,
    /// The compressor to start with.
    pub compressor: CompressorSpec,
    /// The `writeback_compressor` to start with (what objects are re-encoded with as they go
    /// to segments).
    pub writeback_compressor: WritebackCompressor,
    /// Where written-back pages go. Without one, nothing is ever written back.
    pub device: Option<Arc<dyn BackingDevice>>,
    /// Capacity of the device in pages.
    pub device_pages: u32,
    /// Discard freed swap clusters (the kernel's `swapon --discard`). Off by default.
    pub discard: bool,
    /// Write back in segments (compressed, packed, log-structured) rather than a page a
    /// slot; where they go, and whether they are sealed. None by default: pages.
    pub segments: Option<SegmentsConfig>,
}

/// How written-back pages are kept when they are kept in segments.
#[derive(Debug, Clone)]
pub struct SegmentsConfig {
    /// The segments' store; None: on `ZswapConfig::device`, a run of its pages a segment.
    pub device: Option<Arc<dyn SegmentDevice>>,
    /// Encrypt and authenticate every object (AES-256-GCM, a key per run).
    pub encrypt: bool,
}

impl ZswapConfig {
    /// A config for `total_memory` bytes: `lz4` at its default level, no backing device (so no
    /// writeback), discard off.
    pub fn new(total_memory: u64) -> Self {
        ZswapConfig {
            total_memory,
            compressor: "lz4".parse().expect("lz4 is always built"),
            writeback_compressor: WritebackCompressor::Same,
            device: None,
            device_pages: 0,
            discard: false,
            segments: None,
        }
    }

    /// Set `discard`.
    pub fn discard(mut self, on: bool) -> Self {
        self.discard = on;
        self
    }

    /// Set the compressor to start with.
    pub fn compressor(mut self, spec: CompressorSpec) -> Self {
        self.compressor = spec;
        self
    }

    /// Set the `writeback_compressor` to start with.
    pub fn writeback_compressor(mut self, value: WritebackCompressor) -> Self {
        self.writeback_compressor = value;
        self
    }

    /// Write back in segments on the page device (see `segments`), sealed when `encrypt`.
    pub fn segments(mut self, encrypt: bool) -> Self {
        self.segments = Some(SegmentsConfig {
            device: None,
            encrypt,
        });
        self
    }

    /// Write back in segments to `device` (a store of segments: no page device needed),
    /// with room for `pages` written-back pages; sealed when `encrypt`.
    pub fn segment_device(
        mut self,
        device: Arc<dyn SegmentDevice>,
        pages: u32,
        encrypt: bool,
    ) -> Self {
        self.segments = Some(SegmentsConfig {
            device: Some(device),
            encrypt,
        });
        self.device_pages = pages;
        self
    }

    /// Write back to `device`, of `pages` pages.
    pub fn device(mut self, device: Arc<dyn BackingDevice>, pages: u32) -> Self {
        self.device = Some(device);
        self.device_pages = pages;
        self
    }
}

/// A zswap instance. Cheap to clone: clones share everything.
///
/// Storing a folio of four pages and loading it back:
///
/// ```
/// use std::sync::Arc;
/// use zswap::swap::MemoryDevice;
/// use zswap::{Zswap, ZswapConfig, PAGE_SIZE};
///
/// // The pool may use `max_pool_percent` (20%) of 64 MiB; written-back pages would go to a
/// // device of 1024 pages in RAM.
/// let config = ZswapConfig::new(64 << 20).device(Arc::new(MemoryDevice::new(1024)), 1024);
/// let zswap = Zswap::new(config);
/// let group = zswap.new_group(256);
///
/// // Pages 8..12 as one folio of order 2: the caller owns it while it holds the lock.
/// let data: Vec<u8> = (0..4 * PAGE_SIZE).map(|i| (i / 64 % 7) as u8).collect();
/// let folio = group.lock_folio(8, 2);
/// group.store(&folio, &data).unwrap();
/// drop(folio);
/// assert_eq!(zswap.stats().get("zswpout"), 4);
/// assert_eq!(zswap.stats().get("stored_pages"), 4);
///
/// // A load copies the pages out and leaves the entries; `finish_load` frees them once the
/// // caller has put the data where it belongs.
/// let folio = group.lock_folio(8, 2);
/// let mut out = vec![0u8; 4 * PAGE_SIZE];
/// let loaded = group.load(&folio, &mut out).unwrap();
/// assert_eq!((loaded.pool, out == data), (4, true));
/// group.finish_load(&folio);
/// assert_eq!(zswap.stats().get("stored_pages"), 0);
/// ```
#[derive(Debug, Clone)]
pub struct Zswap {
    shared: Arc<Shared>,
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) params: Params,
    pub(crate) stats: Stats,
    pub(crate) pool: ZsPool,
    pub(crate) compressors: Compressors,
    pub(crate) swap: Option<SwapInfo>,
    total_memory: AtomicU64,
    /// The share of `total_memory` the pool may take, in percent, under `max_pool_percent`:
    /// set by the owner (a region sizes its pool by cost), 100 for none.
    pool_share_percent: AtomicU32,
    /// The pool hit `max_pool_percent` and has not yet shrunk below the accept threshold.
    reached_full: AtomicBool,
    /// Where the pool's pages have been going, for `writethrough=auto` (adaptive.rs).
    disk_share: adaptive::DiskShare,
    groups: Mutex<Vec<Weak<ZswapGroup>>>,
    next_group: AtomicUsize,
    worker: Arc<ShrinkWork>,
}

/// The "zswap-shrink" work item: queued when the pool fills, run by the worker thread if
/// one was started. The worker waits here without holding the instance, which stops it
/// (and waits for it) when the last handle drops.
#[derive(Debug, Default)]
struct ShrinkWork {
    /// Work queued, and the instance gone (the worker is to end).
    state: Mutex<ShrinkState>,
    wake: Condvar,
    started: AtomicBool,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Bytes the worker keeps for segments (`segments::thread_scratch_bytes`).
    segment_scratch: AtomicU64,
}

#[derive(Debug, Default)]
struct ShrinkState {
    pending: bool,
    stopped: bool,
}

/// `scratch::touch_thread_locals`, for the store's, load's and writeback's.
pub(crate) fn touch_thread_locals() {
    store::touch_thread_locals();
    load::touch_thread_locals();
    writeback::touch_thread_locals();
}

impl Drop for Shared {
    /// The last handle is gone: the shrink worker ends with it, and is gone when this
    /// returns (unless this is the worker itself, dropping the last handle after a run).
    fn drop(&mut self) {
        self.worker.state.lock().stopped = true;
        self.worker.wake.notify_all();
        if let Some(thread) = self.worker.thread.lock().take() {
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
    }
}

impl Zswap {
    /// A zswap instance built from `config`, its tunables at their defaults (see `Params`: on,
    /// `max_pool_percent` 20, `accept_threshold_percent` 90, shrinker off). No shrink worker
    /// runs until `start_shrink_worker`.
    pub fn new(config: ZswapConfig) -> Self {
        let params = Params::default();
        params.set_compressor_spec(config.compressor);
        params.set_writeback_compressor(config.writeback_compressor);
        parallel::start_helpers();
        let swap = match (config.segments, config.device) {
            (None, device) => {
                device.map(|dev| SwapInfo::new(dev, config.device_pages, config.discard))
            }
            (Some(seg), device) => {
                let store: Option<Arc<dyn SegmentDevice>> = match (seg.device, device) {
                    (Some(store), _) => Some(store),
                    (None, Some(dev)) => Some(Arc::new(PagedSegments::new(
                        dev,
                        config.device_pages,
                        config.discard,
                    ))),
                    (None, None) => None,
                };
                store.map(|store| {
                    SwapInfo::with_segments(
                        SegmentLog::new(store, seg.encrypt),
                        config.device_pages,
                    )
                })
            }
        };
        let pool = ZsPool::new();
        pool.set_served_memory(config.total_memory);
        Zswap {
            shared: Arc::new(Shared {
                params,
                stats: Stats::default(),
                pool,
                compressors: Compressors::new(config.compressor),
                swap,
                total_memory: AtomicU64::new(config.total_memory),
                pool_share_percent: AtomicU32::new(100),
                reached_full: AtomicBool::new(false),
                disk_share: adaptive::DiskShare::default(),
                groups: Mutex::new(Vec::new()),
                next_group: AtomicUsize::new(0),
                worker: Arc::default(),
            }),
        }
    }

    /// A new group (swap space) of `nr_pages` pages.
    pub fn new_group(&self, nr_pages: u32) -> Arc<ZswapGroup> {
        let group = Arc::new(ZswapGroup {
            shared: self.shared.clone(),
            cache: SwapCache::new(nr_pages),
            zswap_max: AtomicU64::new(u64::MAX),
            writeback: AtomicBool::new(true),
            charged: AtomicU64::new(0),
            zswapped: AtomicU64::new(0),
            evictions: AtomicU32::new(0),
            writebacks: AtomicU32::new(0),
            written_back_shadow: AtomicU32::new(0),
            // Until a re-encoded batch says otherwise.
            recoded_permille: AtomicU32::new(1000),
            hand: Mutex::new(0),
        });
        let mut groups = self.shared.groups.lock();
        groups.retain(|g| g.strong_count() > 0);
        groups.push(Arc::downgrade(&group));
        group
    }

    /// The global tunables (`/sys/module/zswap/parameters`).
    pub fn params(&self) -> &Params {
        &self.shared.params
    }

    /// The answer to a request about the tunables, as `uzswap param` sends them to a program
    /// (the preload's server, the agent's): `params`, every tunable as `name value` lines in
    /// its sysfs spelling; `set NAME VALUE`, `ok` or one line `error: ...`. None for another
    /// request.
    pub fn answer_param_request(&self, request: &str) -> Option<String> {
        let mut words = request.split(' ');
        match (words.next(), words.next(), words.next(), words.next()) {
            (Some("params"), None, ..) => Some(
                self.params()
                    .list()
                    .into_iter()
                    .map(|(name, value)| format!("{name} {value}\n"))
                    .collect(),
            ),
            (Some("set"), Some(name), Some(value), None) => {
                Some(match self.set_param(name, value) {
                    Ok(()) => "ok\n".to_string(),
                    Err(e) => format!("error: {e}\n"),
                })
            }
            _ => None,
        }
    }

    /// Set a tunable by its kernel name, from its sysfs spelling.
    pub fn set_param(&self, name: &str, value: &str) -> Result<(), ParamError> {
        if name != "compressor" {
            return self.shared.params.set_plain(name, value);
        }
        let spec: CompressorSpec =
            value
                .trim()
                .parse()
                .map_err(|e: UnknownCompressor| ParamError::BadValue {
                    name: "compressor",
                    value: value.to_string(),
                    why: e.to_string(),
                })?;
        self.set_compressor(spec).map_err(|e| ParamError::BadValue {
            name: "compressor",
            value: value.to_string(),
            why: e.to_string(),
        })
    }

    /// Make `spec` the compressor for new stores. Pages stored earlier keep theirs.
    pub fn set_compressor(&self, spec: CompressorSpec) -> Result<(), TooManyCompressors> {
        self.shared.compressors.set_current(spec)?;
        self.shared.params.set_compressor_spec(spec);
        Ok(())
    }

    /// The memory that `max_pool_percent` is a percentage of, in bytes.
    pub fn total_memory(&self) -> u64 {
        self.shared.total_memory.load(Relaxed)
    }

    /// Set the memory that `max_pool_percent` is a percentage of, in bytes.
    pub fn set_total_memory(&self, bytes: u64) {
        self.shared.total_memory.store(bytes, Relaxed);
        self.shared.pool.set_served_memory(bytes);
    }

    /// The share of `total_memory` the pool may take, in percent: the pool's limit is the
    /// lower of this and `max_pool_percent`.
    pub fn pool_share_percent(&self) -> u32 {
        self.shared.pool_share_percent.load(Relaxed)
    }

    /// Set the share of `total_memory` the pool may take, in percent (at most 100): the
    /// owner's own limit under `max_pool_percent`, which stays the ceiling.
    pub fn set_pool_share_percent(&self, percent: u32) {
        self.shared
            .pool_share_percent
            .store(percent.min(100), Relaxed);
    }

    /// The compressed pool.
    pub fn pool(&self) -> &ZsPool {
        &self.shared.pool
    }

    /// Bytes of memory the segment log's places, tags and slot lists take, and the buffers
    /// the shrink worker keeps for segments: for the owner's charge.
    pub fn swap_metadata_bytes(&self) -> u64 {
        self.shared
            .swap
            .as_ref()
            .map_or(0, SwapInfo::metadata_bytes)
            + self.shared.worker.segment_scratch.load(Relaxed)
    }

    /// The backing device with its slot map, if there is one.
    pub fn swap_info(&self) -> Option<&SwapInfo> {
        self.shared.swap.as_ref()
    }

    /// Compact the pool (zs_compact): returns pages freed.
    pub fn compact(&self) -> u64 {
        self.shared.pool.compact().pages_freed
    }

    /// Every statistic, counters and gauges.
    pub fn stats(&self) -> StatsSnapshot {
        let s = &self.shared;
        let log = s.swap.as_ref().and_then(|w| w.segments());
        let seg =
            |f: fn(&SegmentStats) -> &AtomicU64| log.map_or(0, |l| f(l.stats()).load(Relaxed));
        let (held, live) = log.map_or((0, 0), |l| l.held_bytes());
        let page_bytes = |pages: &AtomicU64| pages.load(Relaxed) * crate::PAGE_SIZE as u64;
        let (written, read) = match log {
            Some(_) => (seg(|l| &l.bytes_written), seg(|l| &l.bytes_read)),
            None => (page_bytes(&s.stats.pswpout), page_bytes(&s.stats.pswpin)),
        };
        s.stats.snapshot_with(&[
            ("pool_total_size", s.pool.total_size()),
            (
                "swap_slots_used",
                s.swap.as_ref().map_or(0, |w| u64::from(w.used())),
            ),
            ("swap_written_bytes", written),
            ("swap_read_bytes", read),
            ("swap_segments_written", seg(|l| &l.segments_written)),
            ("swap_segment_compactions", seg(|l| &l.compactions)),
            (
                "swap_segment_compacted_pages",
                seg(|l| &l.compacted_objects),
            ),
            ("swap_auth_fail", seg(|l| &l.auth_fail)),
            ("swap_segments", log.map_or(0, |l| l.nr_segments())),
            ("swap_segment_bytes", held),
            ("swap_segment_live_bytes", live),
            (
                "swap_device_memory_bytes",
                log.map_or(0, |l| l.device().memory_bytes()),
            ),
        ])
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}

/// A swap space with its swap cache, and the per-cgroup knobs.
#[derive(Debug)]
pub struct ZswapGroup {
    shared: Arc<Shared>,
    cache: SwapCache,
    /// memory.zswap.max: compressed bytes this group may hold in the pool.
    zswap_max: AtomicU64,
    /// memory.zswap.writeback: whether this group's pages may go to the backing device.
    writeback: AtomicBool,
    /// memory.stat `zswap`: compressed bytes charged to this group.
    charged: AtomicU64,
    /// memory.stat `zswapped`: pages of this group in the pool.
    zswapped: AtomicU64,
    /// Pages evicted so far: shadows are taken from it.
    evictions: AtomicU32,
    /// Pages that left the pool for the device so far (written back, evicted written
    /// through, or written there straight): an on-disk page's payload is stamped with it.
    writebacks: AtomicU32,
    /// The shadow (eviction clock) of the page the pool last wrote back: the pool's oldest
    /// pages left since are younger (`pool_span`).
    written_back_shadow: AtomicU32,
    /// The shrinker's clock hand over this group's pages.
    hand: Mutex<u32>,
    /// Bytes in segments per 1000 pool bytes, over recent writeback batches: what
    /// re-encoding (`writeback_compressor`) makes of them, for sizing the next batch.
    recoded_permille: AtomicU32,
}

impl ZswapGroup {
    /// The number of pages of the group's swap space.
    pub fn nr_pages(&self) -> u32 {
        self.cache.nr_pages()
    }

    /// The group's swap cache: the state of each of its pages.
    pub fn cache(&self) -> &SwapCache {
        &self.cache
    }

    /// Lock the folio holding `offset`, waiting for its owner.
    pub fn lock_page(&self, offset: u32) -> FolioLock<'_> {
        self.cache.lock_page(offset)
    }

    /// Lock the folio holding `offset` if nobody owns it; otherwise say whose folio is busy.
    pub fn try_lock_page(&self, offset: u32) -> Result<FolioLock<'_>, Busy> {
        self.cache.try_lock_page(offset)
    }

    /// Lock exactly the folio `[start, start + 2^order)`, merging or splitting as needed.
    pub fn lock_folio(&self, start: u32, order: u8) -> FolioLock<'_> {
        self.cache.lock_folio(start, order)
    }

    /// `lock_folio` without waiting: None if the folio or a piece of it is held.
    pub fn try_lock_folio(&self, start: u32, order: u8) -> Option<FolioLock<'_>> {
        self.cache.try_lock_folio(start, order)
    }

    /// Whether some owner holds the folio that contains `offset` right now (a hint).
    pub fn is_locked(&self, offset: u32) -> bool {
        self.cache.is_locked(offset)
    }

    /// The entry of a page as it is now (unlocked: a hint).
    pub fn peek(&self, offset: u32) -> PageState {
        self.cache.peek(offset)
    }

    /// memory.zswap.max, in bytes (default `u64::MAX`, "max").
    pub fn zswap_max(&self) -> u64 {
        self.zswap_max.load(Relaxed)
    }

    /// memory.zswap.max, in bytes; `u64::MAX` is "max", 0 forbids zswap.
    pub fn set_zswap_max(&self, bytes: u64) {
        self.zswap_max.store(bytes, Relaxed)
    }

    /// memory.zswap.writeback.
    pub fn writeback_enabled(&self) -> bool {
        self.writeback.load(Relaxed)
    }

    /// memory.zswap.writeback.
    pub fn set_writeback_enabled(&self, on: bool) {
        self.writeback.store(on, Relaxed)
    }

    /// Whether pages of this group may go to the backing device now.
    pub(crate) fn writeback_allowed(&self) -> bool {
        self.writeback_enabled() && self.shared.swap.is_some()
    }

    /// memory.stat `zswap`: compressed bytes charged to this group.
    pub fn zswap_bytes(&self) -> u64 {
        self.charged.load(Relaxed)
    }

    /// memory.stat `zswapped`: bytes of this group's pages held in the pool.
    pub fn zswapped_bytes(&self) -> u64 {
        self.zswapped.load(Relaxed) * crate::PAGE_SIZE as u64
    }

    /// Bytes the pool holds for the locked folio's pages: each stored page's object length
    /// (`PAGE_SIZE` for a page stored as-is), 0 for zero marks and pages held elsewhere.
    pub fn stored_length(&self, folio: &FolioLock) -> u64 {
        self.check(folio);
        folio
            .offsets()
            .map(|o| folio.state(o))
            .filter(|st| st.kind == crate::swap::Kind::Stored)
            .map(|st| {
                let handle = crate::zsmalloc::Handle::from_raw(st.payload);
                self.shared.pool.obj_len(handle) as u64
            })
            .sum()
    }

    /// Pages evicted from this group so far (the clock shadows are read against).
    pub fn evictions(&self) -> u32 {
        self.evictions.load(Relaxed)
    }

    /// How many evictions happened since this evicted page left: its refault distance
    /// (modulo 2^18). For a page that holds no evicted data, None.
    pub fn refault_distance(&self, folio: &FolioLock, offset: u32) -> Option<u32> {
        self.check(folio);
        let st = folio.state(offset);
        if st.kind == crate::swap::Kind::Empty {
            return None;
        }
        let mask = (1u32 << SHADOW_BITS) - 1;
        Some(self.evictions().wrapping_sub(st.shadow) & mask)
    }

    /// How many of this group's pages left for the device since this on-disk page did, itself
    /// included: how many more pages the pool would have had to hold to keep it, its pages
    /// leaving oldest first (modulo 2^31). None for a page not on the device alone.
    pub fn writeback_distance(&self, folio: &FolioLock, offset: u32) -> Option<u32> {
        self.check(folio);
        let st = folio.state(offset);
        if st.kind != crate::swap::Kind::OnDisk {
            return None;
        }
        let at = writeback::written_back_at(st.payload);
        Some(self.writebacks.load(Relaxed).wrapping_sub(at) & (u32::MAX >> 1))
    }

    /// The evictions the pool's pages span: since the eviction of the page it last wrote
    /// back (its oldest pages go first), or since the start (modulo 2^17: a span past it
    /// reads short).
    pub fn pool_span(&self) -> u32 {
        let mask = (1u32 << SHADOW_BITS) - 1;
        self.evictions()
            .wrapping_sub(self.written_back_shadow.load(Relaxed))
            & mask
    }

    fn check(&self, folio: &FolioLock) {
        assert!(
            std::ptr::eq(folio.cache(), &self.cache),
            "{folio:?} belongs to another group"
        );
    }
}

impl Drop for ZswapGroup {
    fn drop(&mut self) {
        // Free everything the group still holds: nobody else can reach it now.
        let populated: Vec<_> = self.cache.populated().collect();
        for offset in populated.into_iter().flatten() {
            let folio = self.cache.lock_page(offset);
            if folio.start() == offset {
                self.invalidate(&folio);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn param_requests_read_and_set_the_tunables_as_sysfs_does() {
        let zswap = Zswap::new(ZswapConfig::new(1 << 20));
        let listed = zswap.answer_param_request("params").unwrap();
        assert!(
            listed.lines().any(|l| l.starts_with("max_pool_percent ")),
            "{listed}"
        );
        assert_eq!(
            zswap
                .answer_param_request("set max_pool_percent 30")
                .as_deref(),
            Some("ok\n")
        );
        let listed = zswap.answer_param_request("params").unwrap();
        assert!(listed.contains("max_pool_percent 30\n"), "{listed}");
        let bad = zswap
            .answer_param_request("set max_pool_percent lots")
            .unwrap();
        assert!(bad.starts_with("error: ") && bad.ends_with('\n'), "{bad}");
        for other in ["stats", "set max_pool_percent", "params x", ""] {
            assert_eq!(zswap.answer_param_request(other), None, "{other:?}");
        }
    }
}
