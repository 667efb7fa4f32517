//! Faults the kernel takes on the program's behalf (here `read(2)` from a socket into a
//! registered, unpopulated page): served with kernel-mode faults; EFAULT when user-mode-only.

mod common;

use common::{page, spawn_handler};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use uffd::{CopyMode, Event, RawRegion, RegisterMode, UffdBuilder};

/// read(2) from a socket holding `page()` bytes of 0x5a into page 0 of `region`.
fn read_into(region: &RawRegion) -> std::io::Result<usize> {
    let (mut tx, rx) = UnixStream::pair()?;
    tx.write_all(&vec![0x5a; page()])?;
    // SAFETY: the destination is a page of a live mapping that no Rust reference covers; the
    // kernel writes at most page() bytes into it (or fails with EFAULT).
    let n = unsafe { libc::read(rx.as_raw_fd(), region.as_ptr().cast(), page()) };
    if n < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

fn serve_with_copy(u: &uffd::Uffd, e: &Event) {
    if let Event::Pagefault { addr, .. } = e {
        let _ = u
            .copy(
                addr & !(page() - 1),
                &vec![0u8; page()],
                CopyMode::default(),
            )
            .unwrap();
    }
}

#[test]
fn kernel_mode_fault_in_read_is_served() {
    let region = RawRegion::new(page()).unwrap();
    let u = common::uffd();
    assert!(!u.user_mode_only());
    u.register(&region, 0, region.len(), RegisterMode::MISSING)
        .unwrap();
    let h = spawn_handler(u.clone(), serve_with_copy);
    assert_eq!(read_into(&region).unwrap(), page());
    let mut buf = vec![0u8; page()];
    region.read(0, &mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 0x5a));
    let events = h.finish();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Pagefault { flags, .. } if flags.write)),
        "{events:?}"
    );
}

#[test]
fn user_mode_only_read_fails_with_efault() {
    let region = RawRegion::new(page()).unwrap();
    let u = Arc::new(
        UffdBuilder::new()
            .non_blocking(true)
            .user_mode_only(true)
            .create()
            .unwrap(),
    );
    assert!(u.user_mode_only());
    u.register(&region, 0, region.len(), RegisterMode::MISSING)
        .unwrap();
    let h = spawn_handler(u.clone(), serve_with_copy);
    let err = read_into(&region).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EFAULT));
    // A user-mode access still goes to the handler.
    let mut buf = vec![1u8; 8];
    region.read(0, &mut buf).unwrap();
    assert_eq!(buf, [0; 8]);
    let events = h.finish();
    assert_eq!(events.len(), 1, "{events:?}");
}

/// Reclaim reads a folio where it is (`ProcessMemory`) while holding what a fault handler would
/// wait for: a registered page that is not present must make that read fail, not raise a
/// userfault and wait for it. No handler runs here: a wait would never end.
#[test]
fn reading_own_memory_fails_on_a_missing_page_without_a_userfault() {
    let region = RawRegion::new(2 * page()).unwrap();
    let u = common::uffd();
    u.register(&region, 0, region.len(), RegisterMode::MISSING)
        .unwrap();
    let addr = region.as_ptr() as usize;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mem = uffd::process::ProcessMemory::own().unwrap();
        let mut buf = vec![0u8; 2 * page()];
        let _ = tx.send(mem.read(addr, &mut buf).map_err(|e| e.kind()));
    });
    let got = rx
        .recv_timeout(std::time::Duration::from_secs(5))
        .expect("the read waited for a userfault");
    assert!(got.is_err(), "read {got:?} bytes of a missing page");
}
