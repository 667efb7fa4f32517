//! Write-protect: a write to a protected page faults with the WP flag; unprotecting resumes it.

mod common;

use common::{page, spawn_handler};
use std::sync::Arc;
use std::thread;
use uffd::{Event, RawRegion, RegisterMode};

#[test]
fn write_to_protected_page_faults_with_wp_and_resumes() {
    let region = Arc::new(RawRegion::new(2 * page()).unwrap());
    let u = common::uffd();
    u.register(&region, 0, region.len(), RegisterMode::WP)
        .unwrap();
    // WP-only registration: missing pages fill normally, so this populates without a handler.
    region.write(0, b"before").unwrap();
    u.write_protect(region.addr(), page()).unwrap();
    // Reads of a protected page do not fault.
    let mut buf = [0u8; 6];
    region.read(0, &mut buf).unwrap();
    assert_eq!(&buf, b"before");
    let h = spawn_handler(u.clone(), |u, e| {
        if let Event::Pagefault { addr, flags, .. } = e {
            assert!(flags.wp && flags.write, "{flags:?}");
            u.write_unprotect(addr & !(page() - 1), page(), false)
                .unwrap();
        }
    });
    let r2 = region.clone();
    thread::spawn(move || r2.write(0, b"after!").unwrap())
        .join()
        .unwrap();
    region.read(0, &mut buf).unwrap();
    assert_eq!(&buf, b"after!");
    let events = h.finish();
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Event::Pagefault { .. }))
            .count(),
        1,
        "{events:?}"
    );
}

/// A one-page region registered for missing and write-protect faults, its page installed
/// write-protected (`UFFDIO_COPY` with `MODE_WP`) holding 4s.
fn protected_page_of_fours() -> (Arc<RawRegion>, Arc<uffd::Uffd>) {
    let region = Arc::new(RawRegion::new(page()).unwrap());
    let u = common::uffd();
    u.register(&region, 0, region.len(), RegisterMode::MISSING_WP)
        .unwrap();
    let mode = uffd::CopyMode {
        dont_wake: false,
        write_protect: true,
    };
    let _ = u.copy(region.addr(), &vec![4u8; page()], mode).unwrap();
    (region, u)
}

/// Write a 5 at byte 1 of the page from another thread, with a handler that lifts write
/// protection on any (write-protect) fault; check the page reads 4, 5, 4 after. Returns the
/// number of faults the write raised.
fn write_a_five_into_the_fours(region: &Arc<RawRegion>, u: &Arc<uffd::Uffd>) -> usize {
    let h = spawn_handler(u.clone(), |u, e| {
        if let Event::Pagefault { addr, flags, .. } = e {
            assert!(flags.wp);
            u.write_unprotect(addr & !(page() - 1), page(), false)
                .unwrap();
        }
    });
    let r2 = region.clone();
    thread::spawn(move || r2.write(1, &[5]).unwrap())
        .join()
        .unwrap();
    let mut buf = [0u8; 3];
    region.read(0, &mut buf).unwrap();
    assert_eq!(buf, [4, 5, 4]);
    h.finish().len()
}

#[test]
fn copy_with_wp_mode_installs_a_protected_page() {
    let (region, u) = protected_page_of_fours();
    assert_eq!(write_a_five_into_the_fours(&region, &u), 1);
}

/// A kernel fact the region relies on: `UFFDIO_MOVE` does not carry write protection. A
/// protected page moved out into staging and back comes back writable, so a write to it
/// raises no write-protect fault (the region drops a clean folio's disk copies before putting
/// it back for this reason).
#[test]
fn a_page_moved_out_and_back_comes_back_unprotected() {
    let (region, u) = protected_page_of_fours();
    let staging = uffd::Staging::new(1, page(), 1).unwrap();
    let mut staged = staging.stage(region.addr(), page()).unwrap();
    assert_eq!(
        staged.move_back(&u, region.addr()).unwrap(),
        uffd::Filled::All
    );
    assert_eq!(
        write_a_five_into_the_fours(&region, &u),
        0,
        "the write met write protection"
    );
}

/// The default features leave no marker where a write protection meets an empty page:
/// reclaim write-protects whole folios, some of whose pages may be empty (never touched, or
/// zapped by a discard racing the call). A marker would fault as missing while pagemap shows
/// a swap entry there, and the region takes a page in the kernel's swap for one an access
/// brings back by itself: the fault would repeat forever. Fails with `WP_UNPOPULATED`.
#[test]
fn write_protecting_an_empty_page_leaves_it_empty() {
    let region = Arc::new(RawRegion::new(2 * page()).unwrap());
    let u = common::uffd();
    assert!(!u.features().contains(uffd::Features::WP_UNPOPULATED));
    u.register(&region, 0, region.len(), RegisterMode::MISSING_WP)
        .unwrap();
    let mode = uffd::CopyMode {
        dont_wake: false,
        write_protect: false,
    };
    let _ = u.copy(region.addr(), &vec![7u8; page()], mode).unwrap();
    u.write_protect(region.addr(), 2 * page()).unwrap();
    assert!(uffd::page_mapped(region.addr()).unwrap());
    let empty = region.addr() + page();
    assert!(
        !uffd::page_in_mapping(empty).unwrap(),
        "a write-protected empty page reads as present or swapped"
    );
}
