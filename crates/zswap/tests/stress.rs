//! Concurrency stress: threads store, swap out, load, invalidate and write back overlapping
//! folios of every size from 4 KiB to 64 KiB, with a pool small enough that the shrink
//! worker and the shrinker run all the time, compressors and writethrough switched under
//! them. Each page's expected content is a (page, version) pair recorded while its folio lock
//! is held, so every byte read is checked; at the end everything is drained and audited.
//!
//! Runs for `UZSWAP_STRESS_SECS` seconds (default 3; the long run is opt-in, e.g. 600).

mod common;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{Rng, RngCore, SeedableRng};
use zswap::swap::{BackingDevice, FileDevice, Kind};
use zswap::{Zswap, ZswapConfig, ZswapGroup, PAGE_SIZE};

const PAGES: u32 = 2048;
const THREADS: usize = 8;

/// The bytes page `page` holds at `version`: real corpus data stamped with both, or now and
/// then a zero, same-filled or incompressible page.
fn content(page: u32, version: u32) -> Vec<u8> {
    match version % 16 {
        0 => vec![0; PAGE_SIZE],
        1 => (page ^ version).to_ne_bytes().repeat(PAGE_SIZE / 4),
        2 => {
            let mut p = vec![0; PAGE_SIZE];
            rand::rngs::SmallRng::seed_from_u64(u64::from(page) << 32 | u64::from(version))
                .fill_bytes(&mut p);
            p
        }
        _ => {
            let corpus = common::corpus();
            let mut p = corpus[(page as usize * 31 + version as usize) % corpus.len()].clone();
            p[..4].copy_from_slice(&page.to_ne_bytes());
            p[4..8].copy_from_slice(&version.to_ne_bytes());
            p
        }
    }
}

struct Shared {
    zswap: Zswap,
    group: Arc<ZswapGroup>,
    /// Per page, changed only under the page's folio lock: whether the engine holds it and
    /// at which version.
    held: Vec<AtomicBool>,
    version: Vec<AtomicU32>,
    stop: AtomicBool,
}

impl Shared {
    fn check(&self, folio: &zswap::swap::FolioLock, buf: &[u8], what: &str) {
        for (i, off) in folio.offsets().enumerate() {
            if self.held[off as usize].load(Relaxed) {
                let want = content(off, self.version[off as usize].load(Relaxed));
                assert!(
                    buf[i * PAGE_SIZE..(i + 1) * PAGE_SIZE] == want[..],
                    "{what}: page {off} version {} read back wrong",
                    self.version[off as usize].load(Relaxed)
                );
            } else {
                assert_eq!(
                    folio.state(off).kind,
                    Kind::Empty,
                    "page {off} should be empty"
                );
            }
        }
    }
}

fn worker(s: &Shared, seed: u64) -> u64 {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut ops = 0;
    let mut buf = vec![0u8; 16 * PAGE_SIZE];
    while !s.stop.load(Relaxed) {
        ops += 1;
        let order: u8 = rng.gen_range(0..=4);
        let nr = 1u32 << order;
        let start = rng.gen_range(0..PAGES / nr) * nr;
        match rng.gen_range(0..100) {
            0..=39 => {
                let folio = s.group.lock_folio(start, order);
                let versions: Vec<u32> = (0..nr).map(|_| rng.gen()).collect();
                let data: Vec<u8> = folio
                    .offsets()
                    .zip(&versions)
                    .flat_map(|(o, &v)| content(o, v))
                    .collect();
                let ok = if rng.gen_bool(0.8) {
                    s.group.store(&folio, &data).is_ok()
                } else {
                    s.group.swap_out(&folio, &data).is_ok()
                };
                for (o, v) in folio.offsets().zip(versions) {
                    s.held[o as usize].store(ok, Relaxed);
                    s.version[o as usize].store(v, Relaxed);
                }
            }
            40..=74 => {
                let folio = s.group.lock_page(start);
                let out = &mut buf[..folio.nr_pages() as usize * PAGE_SIZE];
                for (i, off) in folio.offsets().enumerate() {
                    if !s.held[off as usize].load(Relaxed) {
                        out[i * PAGE_SIZE..(i + 1) * PAGE_SIZE].fill(0);
                    }
                }
                s.group
                    .load(&folio, out)
                    .expect("no fault is injected here");
                let out = &buf[..folio.nr_pages() as usize * PAGE_SIZE];
                s.check(&folio, out, "load");
                if rng.gen_bool(0.5) {
                    s.group.finish_load(&folio);
                    for off in folio.offsets() {
                        s.held[off as usize].store(false, Relaxed);
                    }
                }
            }
            75..=84 => {
                let folio = s.group.lock_folio(start, order);
                s.group.invalidate(&folio);
                for off in folio.offsets() {
                    s.held[off as usize].store(false, Relaxed);
                }
            }
            85..=92 => {
                let folio = s.group.lock_page(start);
                let _ = s.group.writeback(&folio);
            }
            93..=97 => {
                s.group.shrink(32);
            }
            98 => {
                let name = ["lz4", "zstd", "deflate", "zstd:-1"][rng.gen_range(0..4)];
                s.zswap.set_param("compressor", name).unwrap();
            }
            _ => {
                s.zswap.params().set_writethrough(rng.gen_bool(0.3));
                let threads = rng.gen_range(1..=8);
                s.zswap.params().set_compress_threads(threads).unwrap();
                s.zswap.compact();
            }
        }
    }
    ops
}

#[test]
fn threads_on_overlapping_folios_never_lose_a_byte() {
    stress(false);
}

/// The same with written-back pages in sealed segments: the shrinker lets its batch's
/// folios go while their segments are written, and threads load, store and invalidate
/// them meanwhile.
#[test]
fn threads_on_overlapping_folios_in_segments_never_lose_a_byte() {
    stress(true);
}

fn stress(segments: bool) {
    let secs: u64 = std::env::var("UZSWAP_STRESS_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let device: Arc<dyn BackingDevice> = Arc::new(FileDevice::create(None, 4 * PAGES).unwrap());
    // 8 MiB of pages against a pool limit of 20% of 4 MiB: the pool is always full.
    let mut config = ZswapConfig::new(4 << 20).device(device, 4 * PAGES);
    if segments {
        config = config.segments(true);
    }
    let zswap = Zswap::new(config);
    zswap.params().set_shrinker_enabled(true);
    zswap.start_shrink_worker();
    let group = zswap.new_group(PAGES);
    let s = Arc::new(Shared {
        zswap,
        group,
        held: (0..PAGES).map(|_| AtomicBool::new(false)).collect(),
        version: (0..PAGES).map(|_| AtomicU32::new(0)).collect(),
        stop: AtomicBool::new(false),
    });
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let s = s.clone();
            std::thread::spawn(move || worker(&s, t as u64 + 1))
        })
        .collect();
    let pressure = {
        let s = s.clone();
        std::thread::spawn(move || {
            while !s.stop.load(Relaxed) {
                s.zswap.shrinker_scan(64);
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    s.stop.store(true, Relaxed);
    let ops: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    pressure.join().unwrap();

    let stats = s.zswap.stats();
    eprintln!(
        "{ops} operations; zswpout {} zswpin {} written_back_pages {} pool_limit_hit {} \
         folios_compressed_in_parts {}",
        stats.get("zswpout"),
        stats.get("zswpin"),
        stats.get("written_back_pages"),
        stats.get("pool_limit_hit"),
        stats.get("folios_compressed_in_parts")
    );
    assert!(
        stats.get("written_back_pages") > 0,
        "the shrinker never ran"
    );
    if zswap::zswap::parallel::helper_threads() > 0 {
        assert!(stats.get("folios_compressed_in_parts") > 0);
    }
    s.zswap.audit().unwrap();
    // Drain: every page held comes back right; then nothing is left.
    let mut buf = vec![0u8; PAGE_SIZE];
    for off in 0..PAGES {
        let folio = s.group.lock_folio(off, 0);
        s.group.load(&folio, &mut buf).unwrap();
        s.check(&folio, &buf, "drain");
        s.group.finish_load(&folio);
    }
    s.zswap.compact();
    assert_eq!(s.zswap.pool().total_size(), 0);
    assert_eq!(s.zswap.stats().get("swap_slots_used"), 0);
    s.zswap.audit().unwrap();
}
