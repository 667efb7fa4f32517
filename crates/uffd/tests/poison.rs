//! UFFDIO_POISON: access to a poisoned page kills with SIGBUS (checked in a forked child).

mod common;

use common::page;
use uffd::{CopyMode, Filled, RawRegion, RegisterMode};

#[test]
fn poisoned_page_gives_sigbus() {
    let region = RawRegion::new(2 * page()).unwrap();
    let u = common::uffd();
    u.register(&region, 0, region.len(), RegisterMode::MISSING)
        .unwrap();
    // Populate page 1, so the mapping has an anon_vma and fork copies its page tables (and with
    // them page 0's poison marker); the child loses the registration (no EVENT_FORK).
    assert_eq!(
        u.copy(
            region.addr() + page(),
            &vec![3u8; page()],
            CopyMode::default()
        )
        .unwrap(),
        Filled::All
    );
    assert_eq!(u.poison(region.addr(), page(), false).unwrap(), Filled::All);
    // Poisoning a present page is refused like any fill.
    assert_eq!(
        u.poison(region.addr() + page(), page(), false).unwrap(),
        Filled::PageExists { done: 0 }
    );
    let addr = region.addr();
    // SAFETY: the child only reads memory and calls _exit (async-signal-safe).
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: `addr + page()` is a present page of a live mapping (inherited by the child):
        // a control that must not kill; `addr` is poisoned and must raise SIGBUS.
        unsafe {
            let ok = std::ptr::read_volatile((addr + page()) as *const u8);
            if ok != 3 {
                libc::_exit(2);
            }
            std::ptr::read_volatile(addr as *const u8);
            libc::_exit(0);
        }
    }
    assert!(pid > 0);
    let mut status = 0;
    // SAFETY: waits for our own child; `status` is a live int.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGBUS,
        "child status {status:#x}"
    );
}
