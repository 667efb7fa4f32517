//! Dropping a region stops its threads in an order that lets each finish: kswapd and the
//! threads it started first, while the handlers still serve the faults they may take on the
//! region's memory (kswapd's unsharing after a fork populates pages: a page discarded since
//! its check faults). One test in its own binary: fail points are the process's.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc;
use std::time::Duration;

use region::{Region, RegionConfig};

const PAGE: usize = 4096;

/// Would hang without the order (the handlers stopped first, kswapd's fault never served).
#[test]
fn a_region_dropped_while_kswapd_faults_on_its_memory_stops() {
    let mut r = Region::new(1 << 20, RegionConfig::new(8 << 20)).unwrap();
    r.as_mut_slice().fill(7);
    r.reclaim_to(0);
    assert_eq!(r.usage().resident, 0, "{:?}", r.usage());
    let page = r.as_ptr() as usize;
    let (entered, in_pass) = mpsc::channel();
    let once = AtomicBool::new(false);
    fail::cfg_callback("kswapd::pass", move || {
        if once.swap(true, Relaxed) {
            return;
        }
        entered.send(()).unwrap();
        // The drop has begun by now.
        std::thread::sleep(Duration::from_millis(200));
        uffd::process::populate_write(page, PAGE).expect("kswapd's fault on the region");
    })
    .unwrap();
    in_pass
        .recv_timeout(Duration::from_secs(5))
        .expect("no kswapd pass");
    let (dropped, done) = mpsc::channel();
    std::thread::spawn(move || {
        drop(r);
        dropped.send(()).unwrap();
    });
    assert!(
        done.recv_timeout(Duration::from_secs(10)).is_ok(),
        "the region's drop hung on kswapd's fault"
    );
    fail::remove("kswapd::pass");
}
