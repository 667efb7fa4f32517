//! Lazy registration (registration.rs, adopt.rs): a region far from its limit leaves its pages
//! to the kernel, and once registered adopts the pages present, which reclaim then takes as
//! any other; every byte checked, across the registration too.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use region::{Region, RegionConfig};

mod common;
use common::{check, check_from, fill, wait_until, xorshift, PAGE};

/// A lazy region of `size` bytes under 4 GiB: far from its limit, so not registered.
fn lazy_region(size: usize) -> Region {
    Region::new(size, RegionConfig::new(4 << 30).lazy_registration(true)).unwrap()
}

fn registered(r: &Region) -> bool {
    let usage = r.usage();
    r.stats_text(&usage, 0, 0)
        .lines()
        .any(|l| l == "region_registered 1")
}

#[test]
fn a_lazy_region_adopts_the_pages_present_and_reclaims_them() {
    let mut r = lazy_region(64 << 20);
    fill(&mut r.as_mut_slice()[..32 << 20], 3);
    // The kernel alone served the first touches; the process's anonymous memory is charged.
    assert_eq!(r.stats().faults, 0, "{:?}", r.stats());
    assert!(!registered(&r));
    wait_until(
        "the process's anonymous memory charged (kswapd reads it each pass)",
        || r.usage().resident >= 32 << 20,
    );
    assert!(
        !r.holds_nothing(0, PAGE),
        "it cannot tell before it counts its pages"
    );
    // A limit under a GiB is due at once: kswapd registers the range at its next pass.
    r.set_limits(16 << 20, None);
    wait_until("the range registered and reclaimed to its limit", || {
        registered(&r) && r.usage().total() <= 16 << 20
    });
    let s = r.stats();
    assert_eq!(s.adopted_pages, (32 << 20) / PAGE as u64, "{s:?}");
    assert!(r.zswap().stats().get("zswpout") > 0);
    r.audit().unwrap();
    // Untouched pages hold nothing, and fault as missing from now on.
    assert!(r.holds_nothing(48 << 20, 1 << 20));
    check(&r.as_mut_slice()[..32 << 20], 3);
    assert!(r.stats().faults > 0);
    r.audit().unwrap();
}

#[test]
fn reclaim_to_registers_a_lazy_region_first() {
    let mut r = lazy_region(16 << 20);
    fill(r.as_mut_slice(), 5);
    r.reclaim_to(0);
    assert!(registered(&r));
    assert_eq!(r.usage().resident, 0, "{:?}", r.stats());
    check(r.as_mut_slice(), 5);
}

/// Threads write, read and discard their own pages, each keeping what it wrote, while kswapd
/// registers the range and adopts what is present, then reclaims under a small limit: no
/// byte is lost or stale, and the bookkeeping agrees with the mapping at the end.
#[test]
fn threads_writing_and_discarding_across_the_registration_lose_nothing() {
    const THREADS: usize = 4;
    const PAGES: usize = 2048; // each thread's: 8 MiB
    let r = lazy_region(THREADS * PAGES * PAGE);
    let words = r.as_atomic_words();
    let word = |page: usize| &words[page * PAGE / 8];
    let stop = AtomicBool::new(false);
    let mut registered_early = false;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (r, stop) = (&r, &stop);
            s.spawn(move || {
                let first = t * PAGES;
                let mut model = vec![0u64; PAGES];
                let mut x = 0x9e37_79b9_7f4a_7c15 ^ t as u64;
                let mut n = 0u64;
                while !stop.load(Relaxed) {
                    n += 1;
                    let i = xorshift(&mut x) as usize % PAGES;
                    match xorshift(&mut x) % 16 {
                        0 => {
                            let len = (1 + xorshift(&mut x) as usize % 16).min(PAGES - i);
                            r.discard((first + i) * PAGE, len * PAGE).unwrap();
                            model[i..i + len].fill(0);
                        }
                        1..=7 => {
                            let v = (t as u64) << 56 | n;
                            word(first + i).store(v, Relaxed);
                            model[i] = v;
                        }
                        _ => assert_eq!(
                            word(first + i).load(Relaxed),
                            model[i],
                            "thread {t} page {i}"
                        ),
                    }
                }
                for (i, &v) in model.iter().enumerate() {
                    assert_eq!(
                        word(first + i).load(Relaxed),
                        v,
                        "thread {t} page {i} at the end"
                    );
                }
            });
        }
        std::thread::sleep(Duration::from_millis(300));
        registered_early = registered(&r);
        r.set_limits(12 << 20, None);
        let t0 = Instant::now();
        while !registered(&r) && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(1500));
        stop.store(true, Relaxed);
    });
    assert!(!registered_early, "registered far from the limit");
    assert!(registered(&r));
    let s = r.stats();
    assert!(s.adopted_pages > 0, "{s:?}");
    assert!(r.zswap().stats().get("zswpout") > 0, "{s:?}");
    assert_eq!(s.lost_track, 0, "{s:?}");
    r.audit().unwrap();
}

/// Pages the kernel swapped out before the registration have their data in the mapping (an
/// access brings them back without a userfault): they are held (`holds_nothing` says no),
/// adopted, reclaimed and read back as any other.
#[test]
fn pages_the_kernel_swapped_out_before_the_registration_are_adopted_and_kept() {
    let Some(_swap) = common::SystemSwap::on() else {
        return;
    };
    let size = 4 << 20;
    let mut r = lazy_region(size);
    fill(r.as_mut_slice(), 9);
    let swapped = common::swap_out(&mut r, size, 9);
    assert!(!registered(&r));
    for &p in &swapped {
        assert!(!r.holds_nothing(p * PAGE, PAGE), "swapped page {p}");
    }
    r.reclaim_to(0);
    assert!(registered(&r));
    let s = r.stats();
    assert_eq!(s.adopted_pages, (size / PAGE) as u64, "{s:?}");
    check(r.as_mut_slice(), 9);
    assert_eq!(r.stats().lost_track, 0);
    r.audit().unwrap();
}

/// A discard read between the registration and the adoption of its pages, whose zap may
/// come later (`MADV_FREE` leaves the pages mapped): its pages are left, and the adoption is
/// partial: the region does not claim to count every page, and `holds_nothing` asks the page
/// tables. Once the pages are gone the next adoption completes.
#[test]
fn pages_a_discard_covered_before_their_adoption_are_left_and_the_adoption_partial() {
    let mut r = lazy_region(4 << 20);
    fill(r.as_mut_slice(), 4);
    r.register_without_adopting();
    r.free_lazily(0, 64 * PAGE).unwrap();
    r.adopt_now();
    assert!(
        !registered(&r),
        "partial: pages left for a zap that may still come"
    );
    assert_eq!(r.stats().adopted_pages, 1024 - 64, "{:?}", r.stats());
    assert!(
        !r.holds_nothing(0, PAGE),
        "still mapped: the page tables say so"
    );
    r.discard(0, 64 * PAGE).unwrap();
    r.adopt_now();
    assert!(registered(&r), "nothing left to adopt");
    assert!(r.holds_nothing(0, 64 * PAGE));
    r.reclaim_to(0);
    check_from(&r.as_mut_slice()[64 * PAGE..], 64, 4);
    assert!(r.as_mut_slice()[..64 * PAGE].iter().all(|&b| b == 0));
    assert_eq!(r.stats().lost_track, 0);
    r.audit().unwrap();
}
