//! uffd-stress, in the style of the kernel's selftest: threads share pages; each page holds a
//! lock word and a counter. A thread takes a page's lock (a compare-and-swap inside the page,
//! so faults happen inside the lock operation, as in uffd-stress's pthread_mutex), bumps the
//! counter and a separate record, and releases it; meanwhile reclaim, the shrinker (a small
//! pool), writeback to the swap file and large-folio swap-in run all the time. After every
//! round every page is checked against the record.
//!
//! `UZSWAP_REGION_STRESS_SECS` sets the time (default 2 s; the long run is opt-in).

use std::sync::atomic::{AtomicU64, Ordering::*};
use std::time::{Duration, Instant};

use region::{Region, RegionConfig};

mod common;
use common::{xorshift, SystemSwap};

const PAGE_WORDS: usize = 4096 / 8;
const THREADS: usize = 8;

/// Seconds a stress test runs: `UZSWAP_REGION_STRESS_SECS`, 2 by default.
fn stress_secs() -> u64 {
    std::env::var("UZSWAP_REGION_STRESS_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
}

const STRESS_SIZE: usize = 16 << 20;

/// Who serves the faults.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Faults {
    /// The region's handler threads.
    Handlers,
    /// The faulting threads themselves (`in_thread_faults`).
    InThread,
}

/// 16 MiB under a 4 MiB limit, three fault threads: constant reclaim; with a small pool
/// (5% of the limit), the shrinker and writeback all the time, most swap-ins from disk; with
/// a large one (50%), most from the pool. With a pool of 20% or more, reclaim reads and
/// re-arms folios' written bits too (`referenced_writes`), so the kernel's write-protect
/// faults and the page-table scans race the rest.
/// Except at 20%, reclaim keeps its inactive list: folios staged and not stored, which
/// faults take back and discards cut into.
fn stress_region(folio: usize, pool_percent: u32, faults: Faults) -> Region {
    Region::new(
        STRESS_SIZE,
        RegionConfig::new(4 << 20)
            .folio_size(folio)
            .max_pool_percent(pool_percent)
            .auto_pool_share(false)
            .referenced_writes(pool_percent >= 20)
            .inactive_list(pool_percent != 20)
            .fault_threads(3)
            .in_thread_faults(faults == Faults::InThread),
    )
    .unwrap()
}

/// Take page `p`'s lock (a compare-and-swap inside the page, so faults happen inside the lock
/// operation), bump its counter and the record, release it.
fn locked_increment(words: &[AtomicU64], record: &[AtomicU64], p: usize, owner: u64) {
    let lock = &words[p * PAGE_WORDS];
    while lock
        .compare_exchange_weak(0, owner, Acquire, Relaxed)
        .is_err()
    {
        std::hint::spin_loop();
    }
    words[p * PAGE_WORDS + 1].fetch_add(1, Relaxed);
    record[p].fetch_add(1, Relaxed);
    lock.store(0, Release);
}

/// Every page's lock is free, its counter matches the record, and every `step`-th other word
/// holds `rest(p, w)`.
fn check_pages(
    words: &[AtomicU64],
    record: &[AtomicU64],
    step: usize,
    rest: impl Fn(usize, usize) -> u64,
) {
    for (p, rec) in record.iter().enumerate() {
        assert_eq!(
            words[p * PAGE_WORDS].load(Relaxed),
            0,
            "page {p}: lock left taken"
        );
        assert_eq!(
            words[p * PAGE_WORDS + 1].load(Relaxed),
            rec.load(Relaxed),
            "page {p}: counter lost an update"
        );
        for w in (2..PAGE_WORDS).step_by(step) {
            assert_eq!(
                words[p * PAGE_WORDS + w].load(Relaxed),
                rest(p, w),
                "page {p} word {w} changed"
            );
        }
    }
}

#[test]
fn threads_sharing_locked_counters_in_pages_under_reclaim_lose_nothing() {
    locked_counters_under_reclaim(Disturb::Nothing, Faults::Handlers);
}

/// The same with every fault served in the thread that faults, from its SIGBUS handler,
/// while reclaim evicts from under it.
#[test]
fn threads_serving_their_own_faults_on_locked_counters_lose_nothing() {
    locked_counters_under_reclaim(Disturb::Nothing, Faults::InThread);
}

/// The same while the kernel migrates pages all the time (memory compaction forced every
/// 50 ms; needs root). Linux 6.18's `UFFDIO_MOVE` then reports `EEXIST` for pages its own
/// retry moved. Would fail if staging took those for strays and discarded them
/// (`Staging::stage`): the program's pages would be lost.
#[test]
fn locked_counters_while_the_kernel_migrates_pages_lose_nothing() {
    if std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/sys/vm/compact_memory")
        .is_err()
    {
        panic!("this test forces memory compaction (/proc/sys/vm/compact_memory): run it as root (CI does)");
    }
    locked_counters_under_reclaim(Disturb::Migrate, Faults::Handlers);
}

/// The same while the kernel swaps the region's resident pages out to a system swap file
/// (`MADV_PAGEOUT` of a random 256 KiB every 2 ms), as its own reclaim does on a machine with
/// swap under memory pressure: uzswap then moves swap entries out of the mapping and finds
/// resident pages not present. Needs root (`swapon`).
#[test]
fn locked_counters_while_the_kernel_swaps_the_region_lose_nothing() {
    let Some(_swap) = SystemSwap::on() else {
        return;
    };
    // To the swap file, or into the kernel's zswap if it is on.
    let swapped_out = || {
        let vmstat = std::fs::read_to_string("/proc/vmstat").unwrap();
        let count = |key: &str| {
            let line = vmstat.lines().find(|l| l.split(' ').next() == Some(key));
            line.map_or(0, |l| l[key.len() + 1..].parse::<u64>().unwrap())
        };
        count("pswpout") + count("zswpout")
    };
    let before = swapped_out();
    locked_counters_under_reclaim(Disturb::PageOut, Faults::Handlers);
    let swapped = swapped_out() - before;
    eprintln!("the kernel swapped out {swapped} pages");
    assert!(swapped > 0, "the kernel swapped nothing out");
}

/// What the kernel does to the region meanwhile.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Disturb {
    Nothing,
    /// Memory compaction, forced every 50 ms: pages migrate.
    Migrate,
    /// A random 256 KiB of the region paged out to system swap every 2 ms.
    PageOut,
}

/// Threads bump locked counters in shared pages under constant reclaim (64 KiB folios, a 5%
/// pool) for `stress_secs()`, checked after every round, while the kernel does `disturb`.
fn locked_counters_under_reclaim(disturb: Disturb, faults: Faults) {
    /// Stops the disturbing thread however the rounds end (a failed check unwinds).
    struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Relaxed);
        }
    }
    let secs = stress_secs();
    let stop = std::sync::atomic::AtomicBool::new(false);
    // The default folio size: 64 KiB.
    let r = stress_region(RegionConfig::new(4 << 20).folio_size, 5, faults);
    let base = r.as_ptr() as usize;
    std::thread::scope(|s| {
        match disturb {
            Disturb::Nothing => {}
            Disturb::Migrate => {
                s.spawn(|| {
                    while !stop.load(Relaxed) {
                        let _ = std::fs::write("/proc/sys/vm/compact_memory", "1");
                        std::thread::sleep(Duration::from_millis(50));
                    }
                });
            }
            Disturb::PageOut => {
                s.spawn(|| {
                    while !stop.load(Relaxed) {
                        page_out_until(base, Instant::now() + Duration::from_millis(20));
                    }
                });
            }
        }
        let _stop = StopOnDrop(&stop);
        locked_counters_rounds(&r, secs, faults);
    });
}

/// Until `deadline`, every 2 ms, a random 256 KiB of the region at `base` (a stress region)
/// paged out to system swap.
fn page_out_until(base: usize, deadline: Instant) {
    let chunk = 256 << 10;
    let mut x = 0x2545_F491_4F6C_DD1Du64 ^ deadline.elapsed().as_nanos() as u64;
    while Instant::now() < deadline {
        xorshift(&mut x);
        let at = (x as usize % (STRESS_SIZE / chunk)) * chunk;
        uffd::page_out(base + at, chunk).expect("MADV_PAGEOUT on the region");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn locked_counters_rounds(r: &Region, secs: u64, faults: Faults) {
    let words = r.as_atomic_words();
    let pages = STRESS_SIZE / 4096;
    // Word 0 of a page: its lock; word 1: its counter; the rest: a pattern that must survive.
    for p in 0..pages {
        for w in 2..PAGE_WORDS {
            words[p * PAGE_WORDS + w].store((p * PAGE_WORDS + w) as u64, Relaxed);
        }
    }
    let record: Vec<AtomicU64> = (0..pages).map(|_| AtomicU64::new(0)).collect();
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut rounds = 0;
    while rounds == 0 || Instant::now() < deadline {
        rounds += 1;
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let record = &record;
                s.spawn(move || {
                    let mut x = (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ rounds;
                    for _ in 0..2000 {
                        xorshift(&mut x);
                        // Threads share pages: a quarter of the area is hot, for contention.
                        let p = if x.is_multiple_of(4) {
                            (x >> 8) as usize % (pages / 4)
                        } else {
                            (x >> 8) as usize % pages
                        };
                        locked_increment(words, record, p, t as u64 + 1);
                    }
                });
            }
        });
        check_pages(words, &record, 61, |p, w| (p * PAGE_WORDS + w) as u64);
    }
    let z = r.zswap().stats();
    let s = r.stats();
    eprintln!(
        "{rounds} rounds; faults {} (staged {}), evicted {} ({} batches), zswpout {}, \
         written back {}, clean installs {} / evictions {} / written {}, spare handler events {}",
        s.faults,
        s.faults_staged,
        s.folios_evicted,
        s.batch_evictions,
        z.get("zswpout"),
        z.get("written_back_pages"),
        s.clean_installs,
        s.clean_evictions,
        s.wp_faults,
        s.spare_events,
    );
    assert!(s.folios_evicted > 0 && s.faults > 0);
    assert_eq!(s.in_thread_faults > 0, faults == Faults::InThread, "{s:?}");
    assert!(
        z.get("written_back_pages") + z.get("pswpout") > 0,
        "nothing reached the swap file"
    );
}

/// Readers and writers over memory that starts untouched: readers scan in order (first
/// touches by reads get the zero page and fault-around; pages on disk come back clean, read
/// ahead), writers update counters at random (first touches by writes, write-protect faults on
/// clean folios), all under constant reclaim with a small pool. At the end every page holds
/// exactly its counter and zeros elsewhere, and no fault found a page marked resident that was
/// not mapped.
#[test]
fn readers_and_writers_on_fresh_memory_under_reclaim_lose_nothing() {
    readers_and_writers_on_fresh_memory(Faults::Handlers);
}

/// The same with every fault (missing, and write-protect on clean folios) served in the
/// thread that faults.
#[test]
fn readers_and_writers_serving_their_own_faults_lose_nothing() {
    readers_and_writers_on_fresh_memory(Faults::InThread);
}

fn readers_and_writers_on_fresh_memory(faults: Faults) {
    let secs = stress_secs();
    let mut fault_around = 0;
    for folio in [4096usize, 64 << 10] {
        let r = stress_region(folio, 5, faults);
        let words = r.as_atomic_words();
        let pages = STRESS_SIZE / 4096;
        let record: Vec<AtomicU64> = (0..pages).map(|_| AtomicU64::new(0)).collect();
        let deadline = Instant::now() + Duration::from_secs(secs);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let record = &record;
                s.spawn(move || {
                    let mut x = (t + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                    while Instant::now() < deadline {
                        for _ in 0..256 {
                            xorshift(&mut x);
                            let p = (x >> 8) as usize % pages;
                            locked_increment(words, record, p, t + 1);
                        }
                    }
                });
            }
            for t in 0..2usize {
                s.spawn(move || {
                    // Each reader starts at its own place and scans in order, a word a page.
                    let mut p = t * pages / 2;
                    let mut sum = 0u64;
                    while Instant::now() < deadline {
                        for _ in 0..256 {
                            sum = sum.wrapping_add(words[p * PAGE_WORDS + 100].load(Relaxed));
                            p = (p + 1) % pages;
                        }
                    }
                    // Word 100 is never written: every read saw zero.
                    assert_eq!(sum, 0, "a reader saw a word nobody wrote");
                });
            }
        });
        check_pages(words, &record, 37, |_, _| 0);
        let s = r.stats();
        eprintln!(
            "folio {folio}: faults {}, first touch {}, fault-around {}, clean installs {} / \
             evictions {} / written {}, read ahead {}, evicted {}, lost track {}",
            s.faults,
            s.faults_first_touch,
            s.fault_around,
            s.clean_installs,
            s.clean_evictions,
            s.wp_faults,
            s.readahead_folios,
            s.folios_evicted,
            s.lost_track
        );
        assert_eq!(s.lost_track, 0, "{s:?}");
        assert!(s.folios_evicted > 0, "{s:?}");
        assert_eq!(s.in_thread_faults > 0, faults == Faults::InThread, "{s:?}");
        fault_around += s.fault_around;
    }
    // Fault-around needs room under the limit, which a busy run may never leave at 64 KiB.
    assert!(fault_around > 0, "no fault-around");
}

/// Discards racing with reclaim: each thread owns every fourth page, and at random checks one
/// of its pages and rewrites it (one time in seven after an `MADV_FREE` of it), or discards it
/// (`MADV_DONTNEED`: it must read zero after), while a scanner reads the whole area in order
/// (readahead, drop-behind, clean folios) and reclaim runs all the time, most swap-ins from
/// disk (a pool of 5% of the limit). A discard that lands while reclaim is moving the page's
/// folio out makes that move fail part way, the path where a lost page would show. Every page
/// is checked against its owner's record at every step and at the end.
#[test]
fn discards_racing_with_reclaim_lose_nothing_else() {
    discards_racing_with_reclaim(5, Disturb::Nothing, Fill::Stamps, Faults::Handlers);
}

/// The same with every fault served in the thread that faults: discards are still events,
/// read by the handler threads.
#[test]
fn discards_racing_with_threads_serving_their_own_faults_lose_nothing_else() {
    discards_racing_with_reclaim(5, Disturb::Nothing, Fill::Stamps, Faults::InThread);
}

/// The same with pages of random bytes: stored as-is, they come back in, and refault
/// detection keeps them resident, so reclaim tries folios for compression where they are
/// (outside the event gate, through /proc/self/mem) while owners discard and rewrite them.
#[test]
fn incompressible_pages_with_discards_racing_reclaim_lose_nothing_else() {
    discards_racing_with_reclaim(50, Disturb::Nothing, Fill::Random, Faults::Handlers);
}

/// The same with a pool of 50% of the limit, so most swap-ins come from the pool. Would fail
/// (about one run in three of 40 s per folio size) if a fault served a page whose discard
/// was read but not yet processed: the program writes it, reclaim stores it, the late
/// processing frees it, and the program reads zeros (events.rs).
#[test]
fn discards_racing_with_reclaim_from_the_pool_lose_nothing_else() {
    discards_racing_with_reclaim(50, Disturb::Nothing, Fill::Stamps, Faults::Handlers);
}

/// The same, a small pool, while the kernel swaps the region's pages out to a system swap
/// file (root): a discarded page may be a swap entry, not present, when its discard is
/// processed.
#[test]
fn discards_racing_with_reclaim_while_the_kernel_swaps_lose_nothing_else() {
    let Some(_swap) = SystemSwap::on() else {
        return;
    };
    discards_racing_with_reclaim(5, Disturb::PageOut, Fill::Stamps, Faults::Handlers);
}

/// What the owners write in a page besides its stamp.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fill {
    /// Every 61st word: the page compresses well.
    Stamps,
    /// Every word but word 1 (which the scanner checks stays zero), scrambled: the page
    /// does not compress.
    Random,
}

fn discards_racing_with_reclaim(pool_percent: u32, disturb: Disturb, fill: Fill, faults: Faults) {
    let secs = stress_secs();
    const OWNERS: usize = 4;
    // Word 0 of a page: its stamp (0: discarded or never written); the words `fill` says
    // after it: a function of the stamp and the word's index.
    let written = move || {
        let step = if fill == Fill::Random { 1 } else { 61 };
        (0..PAGE_WORDS).step_by(step).filter(|&w| w != 1)
    };
    let word = move |stamp: u64, w: usize| -> u64 {
        match (stamp, fill) {
            (0, _) => 0,
            (_, Fill::Stamps) => stamp ^ w as u64,
            (_, Fill::Random) => {
                let x = (stamp ^ (w as u64) << 44).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                x ^ x >> 29
            }
        }
    };
    let holds = move |words: &[AtomicU64], p: usize, stamp: u64| -> bool {
        written().all(|w| {
            let want = if w == 0 { stamp } else { word(stamp, w) };
            words[p * PAGE_WORDS + w].load(Relaxed) == want
        })
    };
    let mut kept = 0;
    for folio in [4096usize, 64 << 10] {
        let r = stress_region(folio, pool_percent, faults);
        let words = r.as_atomic_words();
        let pages = STRESS_SIZE / 4096;
        let deadline = Instant::now() + Duration::from_secs(secs);
        let stamps: Vec<Vec<u64>> = std::thread::scope(|s| {
            let owners: Vec<_> = (0..OWNERS)
                .map(|t| {
                    let r = &r;
                    s.spawn(move || {
                        let mut stamps = vec![0u64; pages / OWNERS];
                        let mut x = (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                        let mut n = 0u64;
                        while Instant::now() < deadline {
                            for _ in 0..256 {
                                xorshift(&mut x);
                                let i = (x >> 8) as usize % stamps.len();
                                let p = i * OWNERS + t;
                                assert!(
                                    holds(words, p, stamps[i]),
                                    "folio {folio}: page {p} does not hold stamp {:#x}: word 0 \
                                     {:#x}, word 61 {:#x}",
                                    stamps[i],
                                    words[p * PAGE_WORDS].load(Relaxed),
                                    words[p * PAGE_WORDS + 61].load(Relaxed)
                                );
                                if x.is_multiple_of(8) {
                                    r.discard(p * 4096, 4096).unwrap();
                                    stamps[i] = 0;
                                } else {
                                    if x % 8 == 4 {
                                        // Lazily freed (the page stays mapped), then
                                        // rewritten at once: the new stamp must stick.
                                        r.free_lazily(p * 4096, 4096).unwrap();
                                    }
                                    n += 1;
                                    let stamp = (t as u64 + 1) << 40 | n;
                                    for w in written().filter(|&w| w != 0) {
                                        words[p * PAGE_WORDS + w].store(word(stamp, w), Relaxed);
                                    }
                                    words[p * PAGE_WORDS].store(stamp, Relaxed);
                                    stamps[i] = stamp;
                                }
                            }
                        }
                        stamps
                    })
                })
                .collect();
            if disturb == Disturb::PageOut {
                let base = r.as_ptr() as usize;
                s.spawn(move || page_out_until(base, deadline));
            }
            s.spawn(move || {
                let mut sum = 0u64;
                while Instant::now() < deadline {
                    for p in 0..pages {
                        sum = sum.wrapping_add(words[p * PAGE_WORDS + 1].load(Relaxed));
                    }
                }
                // Word 1 is never written.
                assert_eq!(sum, 0, "the scanner saw a word nobody wrote");
            });
            owners.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (t, stamps) in stamps.iter().enumerate() {
            for (i, &stamp) in stamps.iter().enumerate() {
                let p = i * OWNERS + t;
                assert!(holds(words, p, stamp), "page {p} lost stamp {stamp:#x}");
            }
        }
        let s = r.stats();
        eprintln!(
            "folio {folio}: faults {}, evicted {} ({} batches), evictions given up {}, \
             discarded {} ({} still mapped when processed, {} zapped late), clean installs {}, \
             dropped behind {}, read ahead {}, spare handler events {}, stray {}, lost track {}",
            s.faults,
            s.folios_evicted,
            s.batch_evictions,
            s.evict_failed,
            s.discarded_pages,
            s.discards_not_zapped,
            s.late_zaps,
            s.clean_installs,
            s.dropped_behind,
            s.readahead_folios,
            s.spare_events,
            s.stray_staged_pages,
            s.lost_track
        );
        // A page present both in the region and in a staging slot would mean a move that
        // reported fewer pages than it moved (the one known way to lose track of a page).
        assert_eq!((s.lost_track, s.stray_staged_pages), (0, 0), "{s:?}");
        assert!(s.folios_evicted > 0 && s.discarded_pages > 0, "{s:?}");
        if fill == Fill::Random {
            eprintln!(
                "folio {folio}: incompressible folios kept {}, back in after a store as-is {}",
                s.incompressible_kept, s.incompressible_refaults
            );
            kept += s.incompressible_kept;
        }
    }
    // (Over both folio sizes: in a short run of a debug build, 64 KiB folios of random bytes
    // may all go to disk once the pool is full, and a folio written to disk is not marked.)
    assert!(
        fill == Fill::Stamps || kept > 0,
        "no folio was tried in place and kept"
    );
}

/// The kernel reading and writing the region on the program's behalf under constant reclaim,
/// most swap-ins from the pool: each thread owns a quarter of the area and rewrites its pages
/// with `read(2)` from a pipe (the kernel writes into the region, faulting on evicted pages)
/// and checks them with `write(2)` into a pipe (the kernel reads the region), or reads them
/// itself. Every page is checked against its owner's record at every step and at the end.
#[test]
fn kernel_reads_and_writes_under_reclaim_lose_nothing() {
    use std::io::{Read, Write};
    let secs = stress_secs();
    const OWNERS: usize = 4;
    for folio in [4096usize, 64 << 10] {
        // A large pool: pages come back from it, and scanned folios keep their pool copies.
        let mut r = stress_region(folio, 50, Faults::Handlers);
        if !r.kernel_faults_served() {
            panic!("this test needs kernel-mode userfaultfd faults: run it as root (CI does)");
        }
        let deadline = Instant::now() + Duration::from_secs(secs);
        let page_of = |stamp: u64| -> Vec<u8> {
            (0..4096 / 8)
                // Compressible (the pool keeps it small), and every 16th word tells the
                // page's place apart.
                .flat_map(|w| (if w % 16 == 0 { stamp ^ w as u64 } else { stamp }).to_ne_bytes())
                .collect()
        };
        let part = STRESS_SIZE / OWNERS;
        std::thread::scope(|s| {
            for (t, mem) in r.as_mut_slice().chunks_mut(part).enumerate() {
                s.spawn(move || {
                    let (mut rx, mut tx) = std::io::pipe().unwrap();
                    let mut stamps = vec![0u64; part / 4096];
                    let mut x = (t as u64 + 7).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                    let mut n = 0u64;
                    let mut buf = vec![0u8; 4096];
                    while Instant::now() < deadline {
                        for _ in 0..64 {
                            xorshift(&mut x);
                            let i = (x >> 8) as usize % stamps.len();
                            let page = &mut mem[i * 4096..(i + 1) * 4096];
                            let want = if stamps[i] == 0 {
                                vec![0u8; 4096]
                            } else {
                                page_of(stamps[i])
                            };
                            match x % 3 {
                                0 => {
                                    // The kernel writes the page (copy_to_user).
                                    n += 1;
                                    stamps[i] = (t as u64 + 1) << 40 | n;
                                    tx.write_all(&page_of(stamps[i])).unwrap();
                                    rx.read_exact(page).unwrap();
                                }
                                1 => {
                                    // The kernel reads the page (copy_from_user).
                                    tx.write_all(page).unwrap();
                                    rx.read_exact(&mut buf).unwrap();
                                    assert!(buf == want, "page {i} of part {t} read wrong");
                                }
                                _ => assert!(*page == want[..], "page {i} of part {t} wrong"),
                            }
                        }
                    }
                    for (i, &stamp) in stamps.iter().enumerate() {
                        let want = if stamp == 0 {
                            vec![0u8; 4096]
                        } else {
                            page_of(stamp)
                        };
                        assert!(mem[i * 4096..(i + 1) * 4096] == want[..], "page {i} lost");
                    }
                });
            }
        });
        let s = r.stats();
        let z = r.zswap().stats();
        eprintln!(
            "folio {folio}: faults {}, evicted {} ({} batches), swapped in from the pool {} / \
             disk {}, clean installs {}, write-protect faults {}, read ahead {}, lost track {}",
            s.faults,
            s.folios_evicted,
            s.batch_evictions,
            z.get("zswpin"),
            z.get("pswpin"),
            s.clean_installs,
            s.wp_faults,
            s.readahead_folios,
            s.lost_track
        );
        assert_eq!(s.lost_track, 0, "{s:?}");
        assert!(s.folios_evicted > 0 && s.faults > 0, "{s:?}");
    }
}

/// Batch evictions (4 KiB folios: a cold folio's cold neighbours go with it in one move)
/// racing discards: writer threads rewrite whole pages of their own at random, discarder
/// threads discard pages of their own (each must read zero at once) and write them again,
/// and the two kinds own alternate 32-page blocks, so batches run across both. Every page
/// ends holding its owner's last stamp.
#[test]
fn batch_evictions_racing_discards_lose_nothing() {
    const BLOCK: usize = 32;
    const PER_KIND: usize = 2;
    let secs = stress_secs();
    let r = stress_region(4096, 20, Faults::Handlers);
    let words = r.as_atomic_words();
    let pages = STRESS_SIZE / 4096;
    // Every 61st word of a page: its stamp, mixed with the word's index (the page compresses).
    let write = |p: usize, stamp: u64| {
        for w in (0..PAGE_WORDS).step_by(61) {
            words[p * PAGE_WORDS + w].store(stamp ^ w as u64, Relaxed);
        }
    };
    let holds = |p: usize, stamp: u64| {
        (0..PAGE_WORDS)
            .step_by(61)
            .all(|w| words[p * PAGE_WORDS + w].load(Relaxed) == stamp ^ w as u64)
    };
    for p in 0..pages {
        write(p, p as u64);
    }
    // Owner t of kind k: the pages of blocks with (block % 2 == k), every PER_KIND-th.
    let owned = |kind: usize, t: usize| {
        (0..pages).filter(move |p| (p / BLOCK) % 2 == kind && (p / BLOCK / 2) % PER_KIND == t)
    };
    let deadline = Instant::now() + Duration::from_secs(secs);
    let stamps: Vec<Vec<(usize, u64)>> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..2 * PER_KIND)
            .map(|i| {
                let (kind, t) = (i % 2, i / 2);
                let r = &r;
                s.spawn(move || {
                    let mine: Vec<usize> = owned(kind, t).collect();
                    let mut last: Vec<u64> = mine.iter().map(|&p| p as u64).collect();
                    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ i as u64;
                    let mut n = 0u64;
                    while Instant::now() < deadline {
                        xorshift(&mut x);
                        let k = (x % mine.len() as u64) as usize;
                        let p = mine[k];
                        if kind == 1 {
                            r.discard(p * 4096, 4096).unwrap();
                            let zero = (0..PAGE_WORDS)
                                .step_by(61)
                                .all(|w| words[p * PAGE_WORDS + w].load(Relaxed) == 0);
                            assert!(
                                zero,
                                "page {p} kept data after its discard: word 0 {:#x}, word 61 \
                                 {:#x}, its last stamp {:#x}",
                                words[p * PAGE_WORDS].load(Relaxed),
                                words[p * PAGE_WORDS + 61].load(Relaxed),
                                last[k]
                            );
                        }
                        n += 1;
                        let stamp = (i as u64 + 1) << 48 | n;
                        write(p, stamp);
                        last[k] = stamp;
                    }
                    mine.into_iter().zip(last).collect()
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    for (p, stamp) in stamps.into_iter().flatten() {
        assert!(holds(p, stamp), "page {p} lost stamp {stamp:#x}");
    }
    let s = r.stats();
    eprintln!(
        "evicted {} ({} batches), evictions given up {}, discarded {}, zapped late {}, \
         stray {}, lost track {}",
        s.folios_evicted,
        s.batch_evictions,
        s.evict_failed,
        s.discarded_pages,
        s.late_zaps,
        s.stray_staged_pages,
        s.lost_track,
    );
    assert!(s.batch_evictions > 0, "no batch: {s:?}");
    assert_eq!(s.lost_track, 0);
}
