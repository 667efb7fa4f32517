//! In-thread faults (`RegionConfig::in_thread_faults`): each thread serves its own faults
//! from its SIGBUS handler. The stress tests (stress.rs) run their races in this mode too;
//! here: the limit holds with the serving threads' scratch charged, and what the mode does
//! not do (a system call on an evicted page) fails as documented, losing nothing.
//!
//! One binary of its own: the serving threads' count is the process's, which other tests'
//! threads would change under these.

use std::io::{Read, Write};
use std::sync::Barrier;

use region::{Region, RegionConfig};

mod common;
use common::{check, fill, PAGE};

/// Fill 64 MiB under a 16 MiB limit from four threads that serve their own faults, and read
/// it back: every byte comes back, no handler thread served a fault, and the region held at
/// most its limit and a folio per thread at every sample. While the four threads live, their
/// scratch is charged; once they are gone, it is not.
#[test]
fn threads_serving_their_own_faults_stay_under_the_limit() {
    const THREADS: usize = 4;
    let limit = 16 << 20;
    let folio = 64 << 10;
    let mut r = Region::new(
        64 << 20,
        RegionConfig::new(limit)
            .folio_size(folio)
            .in_thread_faults(true),
    )
    .unwrap();
    let probe = r.usage_probe();
    let idle_metadata = r.usage().metadata;
    let quarter = r.len() / THREADS;
    let filled = Barrier::new(THREADS + 1);
    let measured = Barrier::new(THREADS + 1);
    let (max, with_threads) = std::thread::scope(|s| {
        for (t, chunk) in r.as_mut_slice().chunks_mut(quarter).enumerate() {
            let (filled, measured, probe) = (&filled, &measured, probe.clone());
            s.spawn(move || {
                let mut max = 0;
                for (i, page) in chunk.chunks_mut(PAGE).enumerate() {
                    page[..8].copy_from_slice(&((t << 32 | i) as u64).to_le_bytes());
                    max = max.max(probe.usage().total());
                }
                filled.wait();
                measured.wait();
                max
            });
        }
        filled.wait();
        let with_threads = probe.usage().metadata;
        measured.wait();
        (probe.usage().total(), with_threads)
    });
    let max = max.max(r.usage().total());
    assert!(
        max <= limit + (THREADS * folio) as u64,
        "held {max} bytes under a {limit}-byte limit"
    );
    // Two folio buffers a thread at least (a load's and a writeback's).
    assert!(
        with_threads >= idle_metadata + (THREADS * 2 * folio) as u64,
        "the serving threads' scratch was not charged: {with_threads} with them, \
         {idle_metadata} before"
    );
    // A thread's scratch goes with its thread-local destructors, which may run just after
    // the scope sees the thread done.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while r.usage().metadata >= with_threads && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert!(
        r.usage().metadata < with_threads,
        "charged after the threads ended"
    );
    let mem = r.as_mut_slice();
    for (t, chunk) in mem.chunks(quarter).enumerate() {
        for (i, page) in chunk.chunks(PAGE).enumerate() {
            let want = (t << 32 | i) as u64;
            assert_eq!(page[..8], want.to_le_bytes(), "thread {t} page {i}");
        }
    }
    let s = r.stats();
    assert!(s.folios_evicted > 0 && s.direct_reclaim > 0, "{s:?}");
    assert_eq!(
        s.faults, s.in_thread_faults,
        "a handler served a fault: {s:?}"
    );
}

/// What in-thread faults cost: the kernel's own access to an evicted page (a system call's
/// buffer) is not served and the call fails with EFAULT, where a handler would have served it.
/// Nothing is lost: the program's own access then brings the page back.
#[test]
fn a_system_call_on_an_evicted_page_fails_with_efault() {
    let mut r = Region::new(4 << 20, RegionConfig::new(3 << 20).in_thread_faults(true)).unwrap();
    assert!(!r.kernel_faults_served());
    fill(r.as_mut_slice(), 5);
    r.reclaim_to(0);
    let (mut rx, mut tx) = std::io::pipe().unwrap();
    let e = tx.write(&r.as_mut_slice()[..PAGE]).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EFAULT), "write(2) from it");
    tx.write_all(b"hello").unwrap();
    let e = rx.read(&mut r.as_mut_slice()[PAGE..2 * PAGE]).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EFAULT), "read(2) into it");
    check(r.as_mut_slice(), 5);
    // Once the program has touched it (the most recent page, the last reclaim takes), the
    // page is there for the kernel too.
    std::hint::black_box(r.as_mut_slice()[0]);
    tx.write_all(&r.as_mut_slice()[..PAGE]).unwrap();
    let mut back = vec![0u8; 5 + PAGE];
    rx.read_exact(&mut back).unwrap();
    assert_eq!(&back[..5], b"hello");
    assert_eq!(back[5..], r.as_mut_slice()[..PAGE]);
}

/// Regions of both kinds in one process: a fault on a handler-served region is not taken
/// for an in-thread one's (the SIGBUS handler only serves the regions registered with it),
/// and a dropped in-thread region leaves the next one served.
#[test]
fn in_thread_and_handler_regions_live_side_by_side() {
    let config = || RegionConfig::new(3 << 20);
    let mut handled = Region::new(8 << 20, config()).unwrap();
    for round in 0..2 {
        let mut own = Region::new(8 << 20, config().in_thread_faults(true)).unwrap();
        fill(handled.as_mut_slice(), round);
        fill(own.as_mut_slice(), round + 10);
        check(handled.as_mut_slice(), round);
        check(own.as_mut_slice(), round + 10);
        assert!(own.stats().in_thread_faults > 0);
        assert!(own.stats().folios_evicted > 0);
    }
    assert_eq!(handled.stats().in_thread_faults, 0);
    assert!(handled.stats().faults > 0);
}
