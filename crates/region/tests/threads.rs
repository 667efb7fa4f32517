//! A region's threads are few until it needs more, and all gone when it is: its handlers,
//! kswapd and readahead threads, and its engine's shrink worker. (One test in its own
//! binary: the count of the process's threads is what it checks.)

use region::{Region, RegionConfig};

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

#[test]
fn a_dropped_region_leaves_no_thread_behind() {
    // The engine's compression helpers are the process's, started with the first region.
    drop(Region::new(4 << 20, RegionConfig::new(8 << 20)).unwrap());
    // Anything of it that lingers (it must not) ends well within this.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let before = threads();
    // An idle region: two fault handlers, the spare, one kswapd, the shrink worker.
    let idle: Vec<Region> = (0..10)
        .map(|_| Region::new(16 << 20, RegionConfig::new(8 << 20)).unwrap())
        .collect();
    assert_eq!(threads(), before + 10 * 5, "an idle region's threads");
    drop(idle);
    assert_eq!(threads(), before, "threads left behind by dropped regions");
    for _ in 0..10 {
        let mut r = Region::new(
            16 << 20,
            RegionConfig::new(4 << 20)
                .max_pool_percent(10)
                .auto_pool_share(false),
        )
        .unwrap();
        // Past the limit and the pool's share: the shrink worker runs.
        for (i, page) in r.as_mut_slice().chunks_mut(4096).enumerate() {
            page[..8].copy_from_slice(&(i as u64).to_le_bytes());
        }
        // Reclaim had work: the other kswapd threads started (kswapd looks each pass).
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(threads() >= before + 8, "{} threads", threads() - before);
        drop(r);
        assert_eq!(threads(), before, "threads left behind by a dropped region");
    }
}
