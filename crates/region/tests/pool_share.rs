//! The pool's share of the limit, sized by what refaults cost (pool_share.rs), in a test
//! binary of its own: its region runs for seconds under constant reclaim, which would load
//! the CPUs under region.rs's tests that time kswapd.

mod common;

use common::{xorshift, PAGE};
use region::{Region, RegionConfig};

/// A page that compresses about 4:1: its number, then 1 KiB of its own pseudo-random bytes,
/// then zeros.
fn page(i: usize) -> Vec<u8> {
    let mut p = vec![0u8; PAGE];
    p[..8].copy_from_slice(&(i as u64).to_ne_bytes());
    let mut x = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for w in p[8..1024].chunks_mut(8) {
        xorshift(&mut x);
        w.copy_from_slice(&x.to_ne_bytes()[..w.len()]);
    }
    p
}

/// A program reads its heap over and over in one fixed random order: each page comes back
/// after all the others, so the pages the pool writes back are read from the swap file a
/// cycle later, soon after they went there (a short writeback distance), while no page comes
/// back from the pool soon after its eviction (a long refault distance: a larger resident
/// share would keep nothing). A pool larger by a step holds what the disk is read for: the
/// share grows from its start (20% of the limit) until the disk is no longer read. Every
/// page is checked on each read. Would fail with the share fixed (at the start's 20% the
/// disk is read every cycle) or sized by a measure that cannot see the disk reads it saves.
#[test]
fn disk_reads_a_larger_pool_would_save_grow_it_until_they_stop() {
    const LIMIT: usize = 16 << 20;
    const PAGES: usize = (26 << 20) / PAGE;
    let mut r = Region::new(PAGES * PAGE, RegionConfig::new(LIMIT as u64)).unwrap();
    let start = r.pool_share_percent();
    let mem = r.as_mut_slice();
    for (i, p) in mem.chunks_mut(PAGE).enumerate() {
        p.copy_from_slice(&page(i));
    }
    let mut order: Vec<usize> = (0..PAGES).collect();
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for i in (1..PAGES).rev() {
        xorshift(&mut x);
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    let disk_reads = |r: &Region| r.zswap().stats().get("pswpin");
    let mut per_cycle = Vec::new();
    let began = std::time::Instant::now();
    while began.elapsed() < std::time::Duration::from_secs(60) {
        let before = disk_reads(&r);
        let mem = r.as_mut_slice();
        for &i in &order {
            assert!(
                mem[i * PAGE..(i + 1) * PAGE] == page(i),
                "page {i} came back wrong"
            );
        }
        per_cycle.push(disk_reads(&r) - before);
        if per_cycle.len() >= 4 && per_cycle.last() == Some(&0) {
            break;
        }
    }
    let share = r.pool_share_percent();
    assert!(
        per_cycle[1] > 0,
        "the disk was not read at the start's share: {per_cycle:?}"
    );
    assert!(
        share > start && per_cycle.last() == Some(&0),
        "the share went {start}% -> {share}%, disk reads a cycle {per_cycle:?}"
    );
}
