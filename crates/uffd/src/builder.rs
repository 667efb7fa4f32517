//! `UffdBuilder`: how a userfaultfd is created (device or syscall, kernel-mode or user-mode-only
//! faults) and which features the `UFFDIO_API` handshake asks for.

use crate::error::UffdError;
use crate::features::{Features, Ioctls};
use crate::sys;
use crate::userfaultfd::Uffd;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// Builds a [`Uffd`].
///
/// Defaults: close-on-exec, blocking reads, kernel-mode faults where the process may have them
/// (falling back to user-mode-only otherwise), features [`Features::REQUESTED_DEFAULT`] with
/// [`Features::REQUIRED_DEFAULT`] required.
#[derive(Clone, Debug)]
pub struct UffdBuilder {
    non_blocking: bool,
    force_user_mode_only: bool,
    allow_user_mode_fallback: bool,
    requested: Features,
    required: Features,
}

impl Default for UffdBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl UffdBuilder {
    /// A builder with the defaults above.
    pub fn new() -> Self {
        Self {
            non_blocking: false,
            force_user_mode_only: false,
            allow_user_mode_fallback: true,
            requested: Features::REQUESTED_DEFAULT,
            required: Features::REQUIRED_DEFAULT,
        }
    }

    /// `O_NONBLOCK`: `read_events` returns no events instead of waiting.
    pub fn non_blocking(mut self, on: bool) -> Self {
        self.non_blocking = on;
        self
    }

    /// Force `UFFD_USER_MODE_ONLY` even where kernel-mode faults are allowed (to test that path).
    pub fn user_mode_only(mut self, on: bool) -> Self {
        self.force_user_mode_only = on;
        self
    }

    /// Whether to fall back to user-mode-only when kernel-mode faults are refused (default yes).
    /// Turned off, creation fails with [`UffdError::Unavailable`] instead.
    pub fn allow_user_mode_fallback(mut self, on: bool) -> Self {
        self.allow_user_mode_fallback = on;
        self
    }

    /// Also ask for `features` where the kernel has them.
    pub fn request(mut self, features: Features) -> Self {
        self.requested |= features;
        self
    }

    /// Ask for `features` and fail with [`UffdError::MissingFeatures`] if the kernel lacks any.
    pub fn require(mut self, features: Features) -> Self {
        self.requested |= features;
        self.required |= features;
        self
    }

    /// Neither ask for nor require `features` (e.g. to test behaviour without an event).
    pub fn without(mut self, features: Features) -> Self {
        self.requested = self.requested.difference(features);
        self.required = self.required.difference(features);
        self
    }

    /// Require `EVENT_FORK` (needs `CAP_SYS_PTRACE`, else [`UffdError::ForkNotPermitted`]).
    /// Off by default: with it, every `fork` of the process waits for the reader.
    pub fn event_fork(self, on: bool) -> Self {
        if on {
            self.require(Features::EVENT_FORK)
        } else {
            self.without(Features::EVENT_FORK)
        }
    }

    /// Require `SIGBUS`: a fault raises SIGBUS in the faulting thread instead of an event, to
    /// be served there (`sigbus`); a fault the kernel takes for a system call fails it with
    /// EFAULT. Off by default.
    pub fn sigbus(self, on: bool) -> Self {
        if on {
            self.require(Features::SIGBUS)
        } else {
            self.without(Features::SIGBUS)
        }
    }

    /// Require `WP_ASYNC`: write-protect faults are resolved by the kernel (dirty tracking
    /// without events). Off by default, since it stops WP faults from being reported.
    pub fn wp_async(self, on: bool) -> Self {
        if on {
            self.require(Features::WP_ASYNC | Features::PAGEFAULT_FLAG_WP)
        } else {
            self.without(Features::WP_ASYNC)
        }
    }

    /// Create the userfaultfd and do the handshake.
    pub fn create(&self) -> Result<Uffd, UffdError> {
        let mut flags = libc::O_CLOEXEC;
        if self.non_blocking {
            flags |= libc::O_NONBLOCK;
        }
        let (fd, user_mode_only) = self.open(flags)?;
        // The kernel reports what it supports only from a successful handshake, and a
        // userfaultfd takes exactly one handshake; so learn the supported set on a throwaway
        // descriptor (features 0 always succeeds), then ask the real one for what we want.
        let probe = open_mode(flags, user_mode_only)?;
        let supported = api(&probe, Features::empty())?.0;
        drop(probe);

        let missing = self.required.difference(supported);
        if !missing.is_empty() {
            return Err(UffdError::MissingFeatures { missing });
        }
        let mut wanted = self.requested.intersection(supported);
        // The kernel turns WP_UNPOPULATED on by itself with WP_ASYNC; record it as granted.
        if wanted.contains(Features::WP_ASYNC) {
            wanted |= Features::WP_UNPOPULATED;
        }
        let (_, api_ioctls) = api(&fd, wanted)?;
        let fd = crate::descriptors::out_of_reach(fd);
        Ok(Uffd::new(fd, wanted, supported, api_ioctls, user_mode_only))
    }

    /// Open with kernel-mode faults if allowed (device first: access to it is the permission;
    /// then the syscall, which needs CAP_SYS_PTRACE or vm.unprivileged_userfaultfd=1), else
    /// user-mode-only. Returns the fd and whether it is user-mode-only.
    fn open(&self, flags: libc::c_int) -> Result<(OwnedFd, bool), UffdError> {
        if self.force_user_mode_only {
            return Ok((open_mode(flags, true)?, true));
        }
        match open_mode(flags, false) {
            Ok(fd) => Ok((fd, false)),
            Err(UffdError::NotPermitted { source }) => {
                if self.allow_user_mode_fallback {
                    Ok((open_mode(flags, true)?, true))
                } else {
                    Err(UffdError::Unavailable {
                        source: io::Error::new(
                            source.kind(),
                            format!(
                                "kernel-mode faults are not permitted ({source}) and the \
                                 user-mode-only fallback is off: {}",
                                crate::error::PERMISSION_HINT
                            ),
                        ),
                    })
                }
            }
            Err(e) => Err(e),
        }
    }
}

fn create_error(err: io::Error) -> UffdError {
    match err.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => UffdError::NotPermitted { source: err },
        _ => UffdError::Unavailable { source: err },
    }
}

/// Open one userfaultfd in the given mode, through `/dev/userfaultfd` or `userfaultfd(2)`.
fn open_mode(flags: libc::c_int, user_mode_only: bool) -> Result<OwnedFd, UffdError> {
    let flags = if user_mode_only {
        flags | sys::UFFD_USER_MODE_ONLY
    } else {
        flags
    };
    let dev_err = match open_via_device(flags) {
        Ok(fd) => return Ok(fd),
        Err(e) => e,
    };
    // SAFETY: userfaultfd(2) takes only flags and returns a new descriptor or -1.
    let rc = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) };
    if rc >= 0 {
        // SAFETY: the kernel just created this descriptor for us; nothing else owns it.
        return Ok(unsafe { OwnedFd::from_raw_fd(rc as i32) });
    }
    let sys_err = io::Error::last_os_error();
    // Prefer the syscall's reason (EPERM tells the caller to fall back), unless the syscall is
    // missing altogether (seccomp), where the device's reason is the informative one.
    if sys_err.raw_os_error() == Some(libc::ENOSYS) && dev_err.raw_os_error() != Some(libc::ENOENT)
    {
        Err(create_error(dev_err))
    } else {
        Err(create_error(sys_err))
    }
}

fn open_via_device(flags: libc::c_int) -> io::Result<OwnedFd> {
    let dev = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/userfaultfd")?;
    // SAFETY: USERFAULTFD_IOC_NEW takes the creation flags by value (no pointer) and returns a
    // new userfaultfd descriptor or -1; `dev` is a live descriptor of the userfaultfd device.
    let rc = unsafe {
        libc::ioctl(
            std::os::fd::AsRawFd::as_raw_fd(&dev),
            sys::USERFAULTFD_IOC_NEW as _,
            flags,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just created this descriptor for us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(rc) })
}

/// The handshake of a userfaultfd made elsewhere (in a program uzswap serves from outside,
/// remote/), in kernel mode, asking for `features`.
pub(crate) fn handshake(fd: OwnedFd, features: Features) -> Result<Uffd, UffdError> {
    let (supported, api_ioctls) = api(&fd, features)?;
    Ok(Uffd::new(fd, features, supported, api_ioctls, false))
}

/// The `UFFDIO_API` handshake: returns what the kernel supports and the API ioctls.
fn api(fd: &OwnedFd, features: Features) -> Result<(Features, Ioctls), UffdError> {
    let mut arg = sys::uffdio_api {
        api: sys::UFFD_API,
        features: features.bits(),
        ioctls: 0,
    };
    // SAFETY: `arg` is a live, properly sized and aligned `uffdio_api` that the kernel reads and
    // writes back during the call only; `fd` is a userfaultfd.
    let rc = unsafe {
        libc::ioctl(
            std::os::fd::AsRawFd::as_raw_fd(fd),
            sys::UFFDIO_API as _,
            &mut arg as *mut sys::uffdio_api,
        )
    };
    if rc < 0 {
        let err = io::Error::last_os_error();
        return Err(match err.raw_os_error() {
            Some(libc::EPERM) if features.contains(Features::EVENT_FORK) => {
                UffdError::ForkNotPermitted
            }
            Some(e) => UffdError::from_errno("UFFDIO_API", e, 0),
            None => UffdError::Os {
                op: "UFFDIO_API",
                source: err,
            },
        });
    }
    Ok((
        Features::from_bits(arg.features),
        Ioctls::from_bits(arg.ioctls),
    ))
}
