//! Staging: folios moved out keep their bytes; a folio moved back leaves its slot empty; freed
//! slots are counted as dirty until a batch of them is discarded, and are reused after.

mod common;

use common::{page, uffd};
use uffd::{RawRegion, RegisterMode, Staging};

#[test]
fn freed_slots_are_discarded_in_batches_and_reused() {
    let region = RawRegion::new(8 * page()).unwrap();
    // Filled before it is registered: nobody serves its faults.
    for p in 0..8 {
        region
            .write(p * page(), &vec![p as u8 + 1; page()])
            .unwrap();
    }
    // After the region, so it drops first (an unmap would wait for an event reader).
    let u = uffd();
    u.register(&region, 0, region.len(), RegisterMode::MISSING)
        .unwrap();
    let staging = Staging::new(6, page(), 4).unwrap();
    let addr = |p: usize| region.addr() + p * page();

    let staged: Vec<_> = (0..3)
        .map(|p| staging.stage(addr(p), page()).unwrap())
        .collect();
    for (p, s) in staged.iter().enumerate() {
        assert!(s.bytes().iter().all(|&b| b == p as u8 + 1));
    }
    drop(staged);
    // Three freed slots wait for a batch of four: they still hold their pages.
    assert_eq!(staging.dirty_bytes(), 3 * page());
    assert_eq!(staging.free_slots(), 6);
    drop(staging.stage(addr(3), page()).unwrap());
    assert_eq!(staging.dirty_bytes(), 0, "the fourth made a batch");

    // Moved back whole: the slot is empty, nothing to discard.
    let mut s = staging.stage(addr(4), page()).unwrap();
    assert_eq!(s.move_back(&u, addr(4)).unwrap(), uffd::Filled::All);
    u.wake(addr(4), page()).unwrap();
    drop(s);
    assert_eq!(staging.dirty_bytes(), 0);
    let mut buf = vec![0u8; page()];
    region.read(4 * page(), &mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 5));

    // Every slot is usable again, and a flush empties what is left dirty.
    let staged: Vec<_> = (5..8)
        .map(|p| staging.stage(addr(p), page()).unwrap())
        .collect();
    for (i, s) in staged.iter().enumerate() {
        assert!(s.bytes().iter().all(|&b| b == i as u8 + 6));
    }
    drop(staged);
    assert_eq!(staging.dirty_bytes(), 3 * page());
    staging.flush();
    assert_eq!(staging.dirty_bytes(), 0);
    assert_eq!(staging.free_slots(), 6);
}

/// A folio staged, then part of its range given another protection (a program's
/// `mprotect`): the kernel moves pages only between mappings of one protection, so the
/// move back copies the pages it cannot move, and every byte returns, under its new
/// protection where it has one. The slot keeps the copies until it is discarded.
#[test]
fn a_folio_moves_back_into_a_range_whose_protection_changed() {
    let region = RawRegion::new(4 * page()).unwrap();
    for p in 0..4 {
        region
            .write(p * page(), &vec![p as u8 + 1; page()])
            .unwrap();
    }
    let u = uffd();
    u.register(&region, 0, region.len(), RegisterMode::MISSING)
        .unwrap();
    let staging = Staging::new(2, 4 * page(), 2).unwrap();
    let mut s = staging.stage(region.addr(), 4 * page()).unwrap();
    region.protect(page(), page(), libc::PROT_READ).unwrap();
    assert_eq!(s.move_back(&u, region.addr()).unwrap(), uffd::Filled::All);
    u.wake(region.addr(), 4 * page()).unwrap();
    drop(s);
    assert_eq!(staging.dirty_bytes(), 4 * page(), "copies stay in the slot");
    let mut buf = vec![0u8; page()];
    for p in 0..4 {
        region.read(p * page(), &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == p as u8 + 1), "page {p}");
    }
    region
        .protect(page(), page(), libc::PROT_READ | libc::PROT_WRITE)
        .unwrap();
    region.write(page(), &vec![9; page()]).unwrap();
}

/// A program that reads every anonymous mapping of its process (redis-server's memory test
/// after a panic does) meets the staging area: an empty page of it fails at once (EFAULT to a
/// system call, SIGBUS to an access) instead of waiting forever on a userfaultfd nobody
/// reads. Would hang (here: time out) without SIGBUS on the staging userfaultfd.
#[test]
fn an_empty_staging_page_read_by_the_program_fails_at_once() {
    let staging = Staging::new(2, page(), 2).unwrap();
    let addr = staging.range().start;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 16];
        let local = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let remote = libc::iovec {
            iov_base: addr as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: the kernel writes at most 16 bytes into `buf` and reads the remote range
        // itself, failing where it cannot.
        let r = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
        let _ = tx.send((r, std::io::Error::last_os_error().raw_os_error()));
    });
    let (r, errno) = rx
        .recv_timeout(std::time::Duration::from_secs(5))
        .expect("a read of an empty staging page waited on the staging userfaultfd");
    assert_eq!((r, errno), (-1, Some(libc::EFAULT)));
    drop(staging);
}
