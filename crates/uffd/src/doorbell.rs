//! A doorbell: an eventfd one thread rings to wake another out of
//! [`Uffd::wait_readable_or_rung`](crate::Uffd::wait_readable_or_rung). A fault handler
//! sleeps in `poll` on its userfaultfd; events that another thread read and left for the
//! handlers (it could not act on them itself) would otherwise wait for the poll's timeout.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::UffdError;

/// An eventfd that wakes a thread waiting in `Uffd::wait_readable_or_rung`.
#[derive(Debug)]
pub struct Doorbell {
    fd: OwnedFd,
}

impl Doorbell {
    /// A new doorbell, not rung (a non-blocking, close-on-exec eventfd).
    pub fn new() -> Result<Self, UffdError> {
        // SAFETY: eventfd takes an initial count and flags and returns a new descriptor or
        // -1; it reads nothing from our memory.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(UffdError::Os {
                op: "eventfd",
                source: io::Error::last_os_error(),
            });
        }
        // SAFETY: the kernel just returned this descriptor to us, and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Doorbell {
            fd: crate::descriptors::out_of_reach(fd),
        })
    }

    /// Wake every thread waiting on the doorbell (until one of them clears it).
    pub fn ring(&self) {
        let one: u64 = 1;
        // SAFETY: writes the 8 bytes of a live u64, the size an eventfd takes. It can only
        // fail with EAGAIN when the count would overflow, which leaves it rung anyway.
        let _ = unsafe { libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Take the rings so far (the doorbell is quiet again).
    pub(crate) fn clear(&self) {
        let mut count: u64 = 0;
        // SAFETY: reads at most 8 bytes into a live, writable u64. On a non-blocking eventfd
        // with nothing rung it fails with EAGAIN and writes nothing.
        let _ = unsafe { libc::read(self.fd.as_raw_fd(), (&mut count as *mut u64).cast(), 8) };
    }

    pub(crate) fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
