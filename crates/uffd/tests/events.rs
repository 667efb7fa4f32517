//! Non-cooperative events: remove (MADV_DONTNEED), unmap (munmap), remap (mremap), fork.
//! Each is synchronous: the thread causing it blocks until the handler reads the event.

mod common;

use common::{page, spawn_handler};
use std::sync::Arc;
use uffd::{CopyMode, Event, RawRegion, RegisterMode, UffdBuilder};

fn serve_with_zeros(u: &uffd::Uffd, e: &Event) {
    if let Event::Pagefault { addr, .. } = e {
        let _ = u.zeropage(addr & !(page() - 1), page(), false).unwrap();
    }
}

#[test]
fn madv_dontneed_raises_remove() {
    let region = RawRegion::new(4 * page()).unwrap();
    let u = common::uffd();
    u.register(&region, 0, region.len(), RegisterMode::MISSING)
        .unwrap();
    let _ = u
        .copy(region.addr(), &vec![9u8; 2 * page()], CopyMode::default())
        .unwrap();
    let h = spawn_handler(u.clone(), serve_with_zeros);
    // Blocks until the handler thread has read the Remove event.
    region.discard(0, 2 * page()).unwrap();
    // The pages are gone: the next read is a missing fault again, served with zeros.
    let mut buf = vec![1u8; 16];
    region.read(0, &mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 0));
    let events = h.finish();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Remove { start, end }
            if *start == region.addr() && *end == region.addr() + 2 * page())),
        "{events:?}"
    );
    assert!(events.iter().any(|e| matches!(e, Event::Pagefault { .. })));
}

#[test]
fn munmap_raises_unmap() {
    let region = RawRegion::new(4 * page()).unwrap();
    let (start, end) = (region.addr(), region.addr() + region.len());
    let u = common::uffd();
    u.register(&region, 0, region.len(), RegisterMode::MISSING)
        .unwrap();
    let h = spawn_handler(u.clone(), serve_with_zeros);
    drop(region); // munmap: blocks until the Unmap event is read
    let events = h.finish();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Unmap { start: s, end: t } if *s == start && *t == end)),
        "{events:?}"
    );
}

#[test]
fn mremap_raises_remap_and_the_registration_follows() {
    let mut region = RawRegion::new(2 * page()).unwrap();
    let u = common::uffd();
    u.register(&region, 0, region.len(), RegisterMode::MISSING)
        .unwrap();
    let _ = u
        .copy(region.addr(), &vec![7u8; page()], CopyMode::default())
        .unwrap();
    let old = region.addr();
    let h = spawn_handler(u.clone(), serve_with_zeros);
    region.relocate().unwrap();
    let new = region.addr();
    assert_ne!(old, new);
    // The present page moved with the mapping; the missing one still faults to the handler.
    let mut buf = vec![0u8; 4];
    region.read(0, &mut buf).unwrap();
    assert_eq!(buf, [7; 4]);
    region.read(page(), &mut buf).unwrap();
    assert_eq!(buf, [0; 4]);
    drop(region);
    let events = h.finish();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Remap { from, to, len }
            if *from == old && *to == new && *len == 2 * page())),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Pagefault { addr, .. } if *addr == new + page())),
        "{events:?}"
    );
}

#[test]
fn fork_hands_over_a_uffd_for_the_child() {
    let region = RawRegion::new(2 * page()).unwrap();
    let u = Arc::new(
        UffdBuilder::new()
            .non_blocking(true)
            .event_fork(true)
            .create()
            .unwrap(),
    );
    u.register(&region, 0, region.len(), RegisterMode::MISSING)
        .unwrap();
    let h = spawn_handler(u.clone(), |_, _| {});
    // SAFETY: the child calls only _exit (async-signal-safe), so forking a multi-threaded test
    // process is fine.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: leaves the child at once without running any Rust destructor or atexit.
        unsafe { libc::_exit(0) };
    }
    assert!(pid > 0);
    let mut status = 0;
    // SAFETY: waits for our own child; `status` is a live int.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    let events = h.finish();
    let child = events.iter().find_map(|e| match e {
        Event::Fork { uffd } => Some(uffd),
        _ => None,
    });
    let child = child.expect("a Fork event");
    assert!(child.features().contains(uffd::Features::EVENT_FORK));
}

/// A handler asleep on its userfaultfd is woken by a ring of the doorbell, not only by an
/// event: events another thread read and left for the handlers must not wait for its poll's
/// timeout. Unrung, the wait times out.
#[test]
fn a_doorbell_wakes_a_handler_waiting_for_events() {
    let uffd = common::uffd();
    let bell = std::sync::Arc::new(uffd::Doorbell::new().unwrap());
    let long = std::time::Duration::from_secs(20);
    assert!(!uffd
        .wait_readable_or_rung(&bell, Some(std::time::Duration::from_millis(20)))
        .unwrap());
    let ringer = {
        let bell = bell.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(30));
            bell.ring();
        })
    };
    let t = std::time::Instant::now();
    assert!(uffd.wait_readable_or_rung(&bell, Some(long)).unwrap());
    assert!(
        t.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        t.elapsed()
    );
    ringer.join().unwrap();
    // The wake cleared it: quiet again.
    assert!(!uffd
        .wait_readable_or_rung(&bell, Some(std::time::Duration::from_millis(20)))
        .unwrap());
}
