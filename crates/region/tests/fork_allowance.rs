//! A fork's allowance (over_limit.rs: the region is neither throttled nor killed past its
//! limit by what the fork brought back) ends when kswapd sees the region back under its
//! limit, and only from a look taken after the fork's pages came back. One test in its own
//! binary: fail points are the process's.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc;
use std::time::Duration;

use region::{Region, RegionConfig};

/// kswapd sees the region under its limit and stops before it ends the allowance; a fork
/// brings about 8 MiB back meanwhile. Would fail if kswapd's look and the fork could interleave:
/// the allowance, set by the fork, ended by a look from before it.
#[test]
fn a_forks_allowance_is_not_ended_by_a_look_from_before_the_fork() {
    let mut r = Region::new(16 << 20, RegionConfig::new(8 << 20)).unwrap();
    r.as_mut_slice().fill(5);
    let limit = r.limit();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while r.usage().total() > limit {
        assert!(std::time::Instant::now() < deadline, "{:?}", r.usage());
        std::thread::sleep(Duration::from_millis(10));
    }
    let (entered, in_look) = mpsc::channel();
    let (left, look_done) = mpsc::channel();
    let once = AtomicBool::new(false);
    fail::cfg_callback("kswapd::fork_reclaimed", move || {
        if once.swap(true, Relaxed) {
            return;
        }
        entered.send(()).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        left.send(()).unwrap();
    })
    .unwrap();
    in_look
        .recv_timeout(Duration::from_secs(5))
        .expect("kswapd never looked");
    let guard = r.prepare_fork().unwrap();
    look_done.recv_timeout(Duration::from_secs(5)).unwrap();
    // The look has ended the allowance, if it was to.
    std::thread::sleep(Duration::from_millis(50));
    let allowance = r.fork_allowance();
    drop(guard);
    fail::remove("kswapd::fork_reclaimed");
    assert!(allowance >= 1 << 20, "{allowance} {:?}", r.usage());
    assert!(r.as_mut_slice().iter().all(|&b| b == 5));
}
