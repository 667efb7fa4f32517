//! A thread faults on a registered page; the handler serves it with copy, zeropage or move.

mod common;

use common::{page, spawn_handler, uffd};
use std::sync::Arc;
use std::thread;
use uffd::{CopyMode, Event, Filled, MoveMode, RawRegion, RegisterMode};

fn pattern(seed: u8) -> Vec<u8> {
    (0..page())
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

#[test]
fn copy_serves_a_fault_with_the_right_data() {
    let region = Arc::new(RawRegion::new(4 * page()).unwrap());
    // After the region, so it drops first: unmapping a registered range with EVENT_UNMAP
    // waits for a reader, and there is none once the handler has finished.
    let u = uffd();
    u.register(&region, 0, region.len(), RegisterMode::MISSING)
        .unwrap();
    let data = pattern(7);
    let d2 = data.clone();
    let h = spawn_handler(u.clone(), move |u, e| {
        if let Event::Pagefault { addr, .. } = e {
            let page_addr = addr & !(page() - 1);
            assert_eq!(
                u.copy(page_addr, &d2, CopyMode::default()).unwrap(),
                Filled::All
            );
        }
    });
    let r2 = region.clone();
    let got = thread::spawn(move || {
        let mut buf = vec![0u8; page()];
        r2.read(2 * page(), &mut buf).unwrap();
        buf
    })
    .join()
    .unwrap();
    assert_eq!(got, data);
    let events = h.finish();
    let faults: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::Pagefault {
                addr,
                flags,
                thread_id,
            } => Some((*addr, *flags, *thread_id)),
            _ => None,
        })
        .collect();
    assert_eq!(faults.len(), 1);
    let (addr, flags, tid) = faults[0];
    // EXACT_ADDRESS: a read of the first byte of page 2 reports exactly that address.
    assert_eq!(addr, region.addr() + 2 * page());
    assert!(!flags.write && !flags.wp);
    assert!(tid.is_some_and(|t| t > 0));
}

#[test]
fn zeropage_serves_a_fault() {
    let region = Arc::new(RawRegion::new(2 * page()).unwrap());
    // After the region, so it drops first: unmapping a registered range with EVENT_UNMAP
    // waits for a reader, and there is none once the handler has finished.
    let u = uffd();
    u.register(&region, 0, region.len(), RegisterMode::MISSING)
        .unwrap();
    let h = spawn_handler(u.clone(), |u, e| {
        if let Event::Pagefault { addr, .. } = e {
            assert_eq!(
                u.zeropage(addr & !(page() - 1), page(), false).unwrap(),
                Filled::All
            );
        }
    });
    let r2 = region.clone();
    let got = thread::spawn(move || {
        let mut buf = vec![1u8; page()];
        r2.read(page(), &mut buf).unwrap();
        buf
    })
    .join()
    .unwrap();
    assert!(got.iter().all(|&b| b == 0));
    assert_eq!(h.finish().len(), 1);
}

#[test]
fn move_serves_a_fault_from_a_staging_region() {
    let region = Arc::new(RawRegion::new(4 * page()).unwrap());
    // After the region, so it drops first: unmapping a registered range with EVENT_UNMAP
    // waits for a reader, and there is none once the handler has finished.
    let u = uffd();
    u.register(&region, 0, region.len(), RegisterMode::MISSING)
        .unwrap();
    // Staging: unregistered, private, populated by this process only, so its pages are
    // exclusive (MOVE answers EBUSY otherwise).
    let staging = Arc::new(RawRegion::new(2 * page()).unwrap());
    staging.dont_fork().unwrap();
    let data = pattern(42);
    staging.write(page(), &data).unwrap();
    let st = staging.clone();
    let h = spawn_handler(u.clone(), move |u, e| {
        if let Event::Pagefault { addr, .. } = e {
            let r = u
                .move_from(
                    addr & !(page() - 1),
                    &st,
                    page(),
                    page(),
                    MoveMode::default(),
                )
                .unwrap();
            assert_eq!(r, Filled::All);
        }
    });
    let r2 = region.clone();
    let got = thread::spawn(move || {
        let mut buf = vec![0u8; page()];
        r2.read(3 * page(), &mut buf).unwrap();
        buf
    })
    .join()
    .unwrap();
    assert_eq!(got, data);
    h.finish();
    // The page left the staging region: it reads as zero there now.
    let mut after = vec![1u8; page()];
    staging.read(page(), &mut after).unwrap();
    assert!(after.iter().all(|&b| b == 0));
}

#[test]
fn batched_move_of_several_pages_then_one_wake() {
    let region = Arc::new(RawRegion::new(8 * page()).unwrap());
    // After the region, so it drops first: unmapping a registered range with EVENT_UNMAP
    // waits for a reader, and there is none once the handler has finished.
    let u = uffd();
    u.register(&region, 0, region.len(), RegisterMode::MISSING)
        .unwrap();
    let staging = RawRegion::new(8 * page()).unwrap();
    for i in 0..8 {
        staging.write(i * page(), &pattern(i as u8)).unwrap();
    }
    let mode = MoveMode {
        dont_wake: true,
        allow_src_holes: false,
    };
    assert_eq!(
        u.move_from(region.addr(), &staging, 0, 8 * page(), mode)
            .unwrap(),
        Filled::All
    );
    u.wake(region.addr(), region.len()).unwrap();
    for i in 0..8 {
        let mut buf = vec![0u8; page()];
        region.read(i * page(), &mut buf).unwrap();
        assert_eq!(buf, pattern(i as u8));
    }
}

#[test]
fn copy_onto_a_present_page_is_page_exists() {
    let region = RawRegion::new(4 * page()).unwrap();
    // After the region, so it drops first: unmapping a registered range with EVENT_UNMAP
    // waits for a reader, and there is none once the handler has finished.
    let u = uffd();
    u.register(&region, 0, region.len(), RegisterMode::MISSING)
        .unwrap();
    let data = pattern(1);
    // No handler needed: filling from this thread resolves nothing that waits.
    assert_eq!(
        u.copy(region.addr() + page(), &data, CopyMode::default())
            .unwrap(),
        Filled::All
    );
    assert_eq!(
        u.copy(region.addr() + page(), &data, CopyMode::default())
            .unwrap(),
        Filled::PageExists { done: 0 }
    );
    // A two-page copy over [missing, present]: the first page lands, then EEXIST.
    let two = [pattern(2), pattern(3)].concat();
    assert_eq!(
        u.copy(region.addr(), &two, CopyMode::default()).unwrap(),
        Filled::PageExists { done: page() }
    );
    assert_eq!(
        u.zeropage(region.addr(), page(), false).unwrap(),
        Filled::PageExists { done: 0 }
    );
    let staging = RawRegion::new(page()).unwrap();
    staging.write(0, &data).unwrap();
    assert_eq!(
        u.move_from(region.addr(), &staging, 0, page(), MoveMode::default())
            .unwrap(),
        Filled::PageExists { done: 0 }
    );
    let mut buf = vec![0u8; page()];
    region.read(0, &mut buf).unwrap();
    assert_eq!(buf, pattern(2));
}

#[test]
fn copy_outside_any_registered_range_is_range_gone() {
    let region = RawRegion::new(page()).unwrap();
    // After the region, so it drops first: unmapping a registered range with EVENT_UNMAP
    // waits for a reader, and there is none once the handler has finished.
    let u = uffd();
    let err = u
        .copy(region.addr(), &pattern(0), CopyMode::default())
        .unwrap_err();
    assert!(matches!(err, uffd::UffdError::RangeGone { .. }), "{err}");
}
