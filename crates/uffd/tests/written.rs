//! Written pages (`WrittenPages`, `PAGEMAP_SCAN` on a `WP_ASYNC` userfaultfd): a write is seen
//! with no fault delivered, the scan re-arms what it reports, and pages not present are left
//! as they are.

use uffd::{CopyMode, Features, RawRegion, RegisterMode, UffdBuilder, WrittenPages};

fn page() -> usize {
    uffd::raw_region::page_size()
}

/// Eight pages installed write-protected: unwritten to the scan; two written (no handler
/// runs: the kernel lifts the protection) are what the scan reports, once; a page installed
/// unprotected reads as written; a missing page is never reported, and the scan leaves no
/// marker there (it is missing to the pagemap after, and a copy into it works).
#[test]
fn a_write_is_seen_once_with_no_fault_and_missing_pages_are_left_alone() {
    // Made before the userfaultfd, so dropped after it: its unmap raises no event then.
    let region = RawRegion::new(16 * page()).unwrap();
    let u = UffdBuilder::new()
        .non_blocking(true)
        .wp_async(true)
        .create()
        .unwrap();
    assert!(u.features().contains(Features::WP_ASYNC));
    u.register(&region, 0, region.len(), RegisterMode::MISSING_WP)
        .unwrap();
    let protected = CopyMode {
        dont_wake: true,
        write_protect: true,
    };
    let _ = u
        .copy(region.addr(), &vec![1u8; 8 * page()], protected)
        .unwrap();
    let written = WrittenPages::own().unwrap();
    let pages = |addr: usize, len: usize| -> usize {
        written
            .take(addr, len)
            .unwrap()
            .iter()
            .map(|r| r.len() / page())
            .sum()
    };
    let folio = |i: usize| (region.addr() + i * 8 * page(), 8 * page());
    let (addr, len) = folio(0);
    assert_eq!(pages(addr, len), 0, "installed protected");
    region.write(2 * page(), b"two").unwrap();
    region.write(5 * page() + 100, b"five").unwrap();
    let mut buf = [0u8; 4];
    region.read(7 * page(), &mut buf).unwrap();
    let runs = written.take(addr, len).unwrap();
    assert_eq!(
        runs,
        [
            addr + 2 * page()..addr + 3 * page(),
            addr + 5 * page()..addr + 6 * page()
        ],
        "two written, one read"
    );
    assert_eq!(pages(addr, len), 0, "re-armed by the scan");
    region.write(2 * page() + 1, b"again").unwrap();
    assert_eq!(pages(addr, len), 1);
    // Nothing of the second folio is present: nothing reported, nothing left behind.
    let (addr, len) = folio(1);
    assert_eq!(pages(addr, len), 0);
    let tables = uffd::PageTables::Own;
    assert_eq!(tables.entry(addr).unwrap(), 0, "no marker where no page is");
    // Installed unprotected (as a write fault installs): written.
    let _ = u
        .copy(addr, &vec![2u8; page()], CopyMode::default())
        .unwrap();
    assert_eq!(pages(addr, len), 1);
    // The data is what was written.
    region.read(2 * page(), &mut buf).unwrap();
    assert_eq!(&buf, b"taga");
}

/// A range whose userfaultfd lacks `WP_ASYNC` is refused (its write-protect faults go to a
/// handler, and a scan that re-armed them would raise faults nobody asked for).
#[test]
fn a_range_without_wp_async_is_refused() {
    let region = RawRegion::new(4 * page()).unwrap();
    let u = UffdBuilder::new().non_blocking(true).create().unwrap();
    u.register(&region, 0, region.len(), RegisterMode::MISSING_WP)
        .unwrap();
    let _ = u
        .copy(region.addr(), &vec![1u8; 4 * page()], CopyMode::default())
        .unwrap();
    let written = WrittenPages::own().unwrap();
    assert!(written.take(region.addr(), region.len()).is_err());
}
