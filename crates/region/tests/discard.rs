//! A discard (MADV_DONTNEED) must read as zeros once it returns, whatever the region was doing
//! with the page: staged, stored in the engine, or being faulted by another handler at the
//! moment the discard's event is read. The kernel zaps as soon as the event is read, so
//! anything installed after the read would survive the zap.

use region::{Region, RegionConfig};

mod common;
use common::{stage_and_store_some, PAGE};

/// Pages evicted to the engine, then each discarded and read at once: two handler threads
/// race the discard's processing with the fault on the same page.
#[test]
fn a_discarded_page_reads_zero_even_when_a_fault_races_its_event() {
    let n = 1024;
    for _ in 0..4 {
        let mut r = Region::new(n * PAGE, RegionConfig::new(2 << 20).folio_size(PAGE)).unwrap();
        for p in r.as_mut_slice().chunks_mut(PAGE) {
            p.fill(0x5a);
        }
        r.reclaim_to(0);
        for p in 0..n {
            r.discard(p * PAGE, PAGE).unwrap();
            let v = r.as_mut_slice()[p * PAGE + 100];
            assert_eq!(v, 0, "page {p} read old data after its discard returned");
        }
    }
}

/// A folio still staged, part of it discarded: the discarded pages read zero and the rest of
/// the folio keeps its data.
#[test]
fn a_discard_into_a_staged_folio_keeps_the_rest_of_it() {
    let config = RegionConfig::new(8 << 20).inactive_list(true);
    let mut r = Region::new(4 << 20, config).unwrap();
    for (i, p) in r.as_mut_slice().chunks_mut(PAGE).enumerate() {
        p.fill(i as u8 | 1);
    }
    // Evict a little: the folios evicted last are still staged.
    stage_and_store_some(&r);
    // Discard the second page of every folio.
    let folio = 64 << 10;
    for f in 0..(4 << 20) / folio {
        r.discard(f * folio + PAGE, PAGE).unwrap();
    }
    let mem = r.as_mut_slice();
    for (i, p) in mem.chunks(PAGE).enumerate() {
        let want = if i % 16 == 1 { 0 } else { i as u8 | 1 };
        assert!(
            p.iter().all(|&b| b == want),
            "page {i} holds the wrong bytes"
        );
    }
}

/// `MADV_FREE` raises the same remove event as `MADV_DONTNEED`, but the kernel leaves the pages
/// mapped, with their contents, until it needs the memory. Processing the event must not wait
/// long for a zap that never comes; each page reads as it was or as zero; and a write made
/// after the `madvise` returned must survive reclaim, even one made before the event is
/// processed. Would fail if reclaim moved such a page out while its discard was pending:
/// the processing would then free the write.
#[test]
fn madv_free_is_quick_and_loses_no_later_write() {
    let n = 256;
    let mut r = Region::new(n * PAGE, RegionConfig::new(16 << 20).folio_size(PAGE)).unwrap();
    for (i, p) in r.as_mut_slice().chunks_mut(PAGE).enumerate() {
        p.fill(i as u8 | 1);
    }
    let t = std::time::Instant::now();
    r.free_lazily(0, n * PAGE).unwrap();
    // Written at once, most likely before the event is processed; then reclaimed.
    for (i, p) in r.as_mut_slice().chunks_mut(PAGE).enumerate().skip(n / 2) {
        p.fill(i as u8 ^ 0x80);
    }
    r.reclaim_to(0);
    while r.stats().discarded_pages < n as u64 {
        assert!(
            t.elapsed().as_secs() < 10,
            "the discard was never processed"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let took = t.elapsed();
    let s = r.stats();
    eprintln!("processed in {took:?}; {s:?}");
    // The wait for a zap (`ZAP_WAIT`) is per range: waited for each page still mapped, it
    // would take seconds here.
    assert!(
        took.as_millis() < 1000,
        "MADV_FREE of {n} pages took {took:?}"
    );
    // Reclaim left the pending pages alone, so all were still mapped when processed.
    assert_eq!(s.discards_not_zapped, n as u64, "{s:?}");
    for (i, p) in r.as_mut_slice().chunks_mut(PAGE).enumerate().take(n / 2) {
        let v = p[0];
        assert!(v == 0 || v == i as u8 | 1, "page {i} reads {v:#x}");
        assert!(p.iter().all(|&b| b == v), "page {i} is torn");
        p.fill(i as u8 ^ 0x80);
    }
    r.reclaim_to(0);
    for (i, p) in r.as_mut_slice().chunks(PAGE).enumerate() {
        assert!(
            p.iter().all(|&b| b == i as u8 ^ 0x80),
            "page {i} lost its write: {:x?}",
            &p[..8]
        );
    }
}

/// A page `MADV_FREE` left mapped is not counted resident (a late zap could still take it), and
/// a fault that installs the rest of its folio around it must not count it either: counted,
/// reclaim could move it out with its old data ahead of such a zap. Its neighbours come back
/// intact, and it reads as it was or as zero.
#[test]
fn a_fault_around_a_page_left_mapped_does_not_count_it() {
    let folio = 64 << 10;
    let n = 64 * folio / PAGE;
    let mut r = Region::new(n * PAGE, RegionConfig::new(64 << 20)).unwrap();
    for (i, p) in r.as_mut_slice().chunks_mut(PAGE).enumerate() {
        p.fill(i as u8 | 1);
    }
    // The second page of every folio.
    for f in 0..n * PAGE / folio {
        r.free_lazily(f * folio + PAGE, PAGE).unwrap();
    }
    let folios = (n * PAGE / folio) as u64;
    while r.stats().discarded_pages < folios {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    // The rest of each folio goes out page by page, and comes back with a fault that finds
    // the freed page still there.
    r.reclaim_to(0);
    let mem = r.as_mut_slice();
    for (i, p) in mem.chunks(PAGE).enumerate() {
        let want = i as u8 | 1;
        if i % (folio / PAGE) == 1 {
            assert!(p[0] == want || p[0] == 0, "page {i} reads {:#x}", p[0]);
        } else {
            assert!(p.iter().all(|&b| b == want), "page {i} read back wrong");
        }
    }
    let counted = r.usage().resident / PAGE as u64;
    assert_eq!(
        counted,
        n as u64 - folios,
        "{counted} pages counted resident; the {folios} freed ones must not be"
    );
}

/// Discards read just before the region moves (`mremap`) are processed as the pages they
/// covered when read. Two lazy frees keep the handlers busy (each waits for a zap that never
/// comes) while a third discard and the move queue behind them. Would fail (a read of the
/// region hangs) if a handler took a discard's addresses against the new place: it would
/// miss the region and leave the discard pending forever, every fault on its pages retrying.
#[test]
fn discards_read_before_the_region_moves_are_processed_where_they_were_read() {
    let n = 256;
    let mut r = Region::new(n * PAGE, RegionConfig::new(64 << 20).folio_size(PAGE)).unwrap();
    let fill = |r: &mut Region, round: u8| {
        for (i, p) in r.as_mut_slice().chunks_mut(PAGE).enumerate() {
            p.fill(i as u8 ^ round | 1);
        }
    };
    for round in 0..12u8 {
        fill(&mut r, round);
        let start = std::sync::Barrier::new(3);
        std::thread::scope(|s| {
            s.spawn(|| {
                start.wait();
                r.free_lazily(0, 64 * PAGE).unwrap();
            });
            s.spawn(|| {
                start.wait();
                r.free_lazily(64 * PAGE, 64 * PAGE).unwrap();
            });
            start.wait();
            r.discard(128 * PAGE, 64 * PAGE).unwrap();
        });
        r.relocate().unwrap();
        // Read from another thread, so a fault that retries forever fails the test.
        let (done, wait) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            let words = r.as_atomic_words();
            s.spawn(move || {
                let word =
                    |i: usize| words[i * PAGE / 8].load(std::sync::atomic::Ordering::Relaxed);
                let pages: Vec<u64> = (0..n).map(word).collect();
                let _ = done.send(pages);
            });
            let Ok(pages) = wait.recv_timeout(std::time::Duration::from_secs(20)) else {
                // A panic would wait for the hung reader (the scope joins it): stop instead.
                eprintln!("round {round}: a read of the region hung");
                std::process::abort();
            };
            for (i, &w) in pages.iter().enumerate() {
                let want = u64::from_ne_bytes([i as u8 ^ round | 1; 8]);
                match i {
                    0..128 => assert!(w == want || w == 0, "round {round}: page {i}: {w:#x}"),
                    128..192 => assert_eq!(w, 0, "round {round}: discarded page {i}"),
                    _ => assert_eq!(w, want, "round {round}: page {i}"),
                }
            }
        });
        // What was written after the discards survives eviction at the new place.
        fill(&mut r, round ^ 0x40);
        r.reclaim_to(0);
        for (i, p) in r.as_mut_slice().chunks(PAGE).enumerate() {
            let want = i as u8 ^ round ^ 0x40 | 1;
            assert!(
                p.iter().all(|&b| b == want),
                "round {round}: page {i} lost its write"
            );
        }
    }
    let s = r.stats();
    assert_eq!(s.remaps, 12, "{s:?}");
    assert_eq!(s.lost_track, 0, "{s:?}");
}

/// A thread that discards in a loop never starves the faults. Each discard holds every install
/// off (`UFFDIO_COPY`/`UFFDIO_MOVE` fail `EAGAIN`) from its event's raising until the
/// discarding thread runs again after a handler read it; on one CPU a handler that read the
/// event and retried at once met the next discard's event every time, and a program thread
/// freeing and taking back an untouched 1 GiB block in a loop (a runtime's reservation) left
/// every other thread's fault unserved (a forked program hung so). Pinned to one CPU: the
/// interleaving that starved is then the scheduler's every time.
#[test]
fn a_discard_loop_never_starves_the_faults() {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    let mut one = rustix::thread::CpuSet::new();
    one.set(rustix::thread::sched_getcpu());
    rustix::thread::sched_setaffinity(None, &one).unwrap();
    let n = 4096;
    let config = RegionConfig::new(4 << 20).folio_size(PAGE);
    let mut r = Region::new(2 * n * PAGE, config).unwrap();
    for (i, p) in r.as_mut_slice()[..n * PAGE].chunks_mut(PAGE).enumerate() {
        p.fill(i as u8 | 1);
    }
    r.reclaim_to(0);
    // Set when the reads end, or a check fails: the discarder stops. A starved read never
    // returns: the watchdog then ends the test binary.
    static DONE: AtomicBool = AtomicBool::new(false);
    struct Done;
    impl Drop for Done {
        fn drop(&mut self) {
            DONE.store(true, Relaxed);
        }
    }
    std::thread::spawn(|| {
        std::thread::sleep(std::time::Duration::from_secs(60));
        if !DONE.load(Relaxed) {
            eprintln!("the faults starved: pages not read in 60 s beside a discard loop");
            std::process::exit(1);
        }
    });
    let r = &r;
    let discards = std::thread::scope(|s| {
        let discarder = s.spawn(|| {
            let mut discards = 0u64;
            while !DONE.load(Relaxed) {
                // The second half, never touched: its discard frees nothing, but raises the event.
                r.discard(n * PAGE, n * PAGE).unwrap();
                discards += 1;
            }
            discards
        });
        let done = Done;
        let words = r.as_atomic_words();
        for i in 0..n {
            let v = words[i * PAGE / 8].load(Relaxed);
            assert_eq!(v, u64::from_ne_bytes([i as u8 | 1; 8]), "page {i}");
        }
        drop(done);
        discarder.join().unwrap()
    });
    let s = r.stats();
    assert!(
        discards > 0 && s.discards_waited > 0,
        "{discards} discards, {} waited",
        s.discards_waited
    );
}
