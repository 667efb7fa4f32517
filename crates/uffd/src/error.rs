//! Errors of the userfaultfd layer: errno values become domain errors here, at the edge, so the
//! callers above match on what happened (the range is gone, the mapping is changing) rather than
//! on numbers. An `EEXIST` from a fill is not an error at all: it is the
//! [`Filled::PageExists`](crate::Filled) outcome.

use crate::features::Features;
use std::io;

/// What to do when the creation of a userfaultfd is refused.
pub const PERMISSION_HINT: &str = "run as root, grant CAP_SYS_PTRACE, give this user read-write \
access to /dev/userfaultfd (e.g. `setfacl -m u:$USER:rw /dev/userfaultfd`), or set \
vm.unprivileged_userfaultfd=1";

/// A userfaultfd operation's failure, by what happened.
#[derive(Debug, thiserror::Error)]
pub enum UffdError {
    /// `EPERM`/`EACCES` while creating the userfaultfd, even in user-mode-only mode.
    #[error("creating a userfaultfd is not permitted ({source}): {PERMISSION_HINT}")]
    NotPermitted {
        /// The OS error.
        source: io::Error,
    },
    /// `EPERM` from the handshake: `EVENT_FORK` needs `CAP_SYS_PTRACE`.
    #[error(
        "the userfaultfd feature EVENT_FORK needs CAP_SYS_PTRACE: run as root or do not request it"
    )]
    ForkNotPermitted,
    /// No userfaultfd at all: `ENOSYS` (kernel without CONFIG_USERFAULTFD, or a seccomp filter such
    /// as Docker's default profile) or kernel-mode faults refused with fallback disabled.
    #[error("userfaultfd is not available: {source}")]
    Unavailable {
        /// The OS error, or why kernel-mode faults were refused.
        source: io::Error,
    },
    /// The kernel lacks features the builder was told to require.
    #[error("the kernel lacks required userfaultfd features {missing:?}")]
    MissingFeatures {
        /// The required features the kernel does not have.
        missing: Features,
    },
    /// `EAGAIN`: the address space is changing (an `mremap`, `munmap`, `madvise` or `fork` whose
    /// event is queued but not yet read). `done` bytes at the start of the range were handled
    /// before it happened. Read the pending events, then retry the rest (if it still exists).
    #[error("{op}: the address space is changing (EAGAIN after {done} bytes): read pending events, then retry")]
    MappingChanging {
        /// The operation (`"UFFDIO_COPY"`, ...).
        op: &'static str,
        /// Bytes handled before the error.
        done: usize,
    },
    /// `ENOENT`: the destination range is no longer mapped, or no longer registered (munmap,
    /// mremap, unregister); for MOVE also a hole in the source without `allow_src_holes`.
    #[error("{op}: the range is gone (ENOENT): unmapped, moved or unregistered")]
    RangeGone {
        /// The operation.
        op: &'static str,
    },
    /// `ESRCH`/`ENOSPC`: the process whose memory the userfaultfd manages has exited.
    #[error("{op}: the process behind the userfaultfd is gone ({errno})")]
    ProcessGone {
        /// The operation.
        op: &'static str,
        /// `ESRCH` or `ENOSPC`.
        errno: i32,
    },
    /// `EBUSY`: for MOVE, a source page is not exclusive to this process (shared after fork: use
    /// MADV_DONTFORK on the source), or is pinned; for REGISTER, the range is registered with
    /// another userfaultfd. `done` bytes were handled first.
    #[error("{op}: busy (EBUSY after {done} bytes): a MOVE source page is shared or pinned, or the range is registered elsewhere")]
    Busy {
        /// The operation.
        op: &'static str,
        /// Bytes handled before the error.
        done: usize,
    },
    /// `EINVAL`: unaligned or out-of-range addresses, a mode the kernel refuses, a range not
    /// registered in the mode the operation needs, or a feature not negotiated.
    #[error("{op}: invalid argument (EINVAL): unaligned range, unsupported mode, or a range not registered for this operation")]
    InvalidArgument {
        /// The operation.
        op: &'static str,
    },
    /// `ENOMEM`: the kernel could not allocate (page tables, pages, VMA splits).
    #[error("{op}: out of memory (ENOMEM)")]
    OutOfMemory {
        /// The operation.
        op: &'static str,
    },
    /// `EFAULT`: an address outside the process's mappings (e.g. the source of a copy).
    #[error("{op}: bad address (EFAULT)")]
    BadAddress {
        /// The operation.
        op: &'static str,
    },
    /// Anything else, with the errno kept.
    #[error("{op}: {source}")]
    Os {
        /// The operation.
        op: &'static str,
        /// The OS error.
        source: io::Error,
    },
}

impl UffdError {
    /// Map an errno from operation `op`, after `done` bytes had been handled, to its domain error.
    /// `EEXIST` must have been handled by the caller (it is an outcome, not an error).
    pub(crate) fn from_errno(op: &'static str, errno: i32, done: usize) -> Self {
        match errno {
            libc::EAGAIN => Self::MappingChanging { op, done },
            libc::ENOENT => Self::RangeGone { op },
            libc::ESRCH | libc::ENOSPC => Self::ProcessGone { op, errno },
            libc::EBUSY => Self::Busy { op, done },
            libc::EINVAL => Self::InvalidArgument { op },
            libc::ENOMEM => Self::OutOfMemory { op },
            libc::EFAULT => Self::BadAddress { op },
            e => Self::Os {
                op,
                source: io::Error::from_raw_os_error(e),
            },
        }
    }

    /// The errno this error came from, where there was one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Self::NotPermitted { source }
            | Self::Unavailable { source }
            | Self::Os { source, .. } => source.raw_os_error(),
            Self::ForkNotPermitted => Some(libc::EPERM),
            Self::MissingFeatures { .. } => None,
            Self::MappingChanging { .. } => Some(libc::EAGAIN),
            Self::RangeGone { .. } => Some(libc::ENOENT),
            Self::ProcessGone { errno, .. } => Some(*errno),
            Self::Busy { .. } => Some(libc::EBUSY),
            Self::InvalidArgument { .. } => Some(libc::EINVAL),
            Self::OutOfMemory { .. } => Some(libc::ENOMEM),
            Self::BadAddress { .. } => Some(libc::EFAULT),
        }
    }

    /// Whether retrying after reading the pending events may succeed (`EAGAIN`).
    pub fn is_retry(&self) -> bool {
        matches!(self, Self::MappingChanging { .. })
    }
}

/// Errors of the [`RawRegion`](crate::RawRegion) helpers (mmap, mremap, madvise).
#[derive(Debug, thiserror::Error)]
pub enum RawRegionError {
    /// `mmap` failed.
    #[error("mmap of {len} bytes failed: {source}")]
    Mmap {
        /// The length asked for, in bytes.
        len: usize,
        /// The OS error.
        source: io::Error,
    },
    /// `mremap` failed.
    #[error("mremap to {new_len} bytes failed: {source}")]
    Mremap {
        /// The new length asked for, in bytes.
        new_len: usize,
        /// The OS error.
        source: io::Error,
    },
    /// `madvise` failed.
    #[error("madvise({advice}) failed: {source}")]
    Madvise {
        /// The advice (`"MADV_DONTNEED"`, ...).
        advice: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// `mprotect` failed.
    #[error("mprotect to {prot:#x} failed: {source}")]
    Mprotect {
        /// The protection asked for (`PROT_*` bits).
        prot: i32,
        /// The OS error.
        source: io::Error,
    },
    /// A range outside the region, or not page aligned.
    #[error("range {offset:#x}+{len:#x} is not page aligned or not inside the {region_len:#x}-byte region")]
    OutOfRange {
        /// The range's offset in the region, in bytes.
        offset: usize,
        /// The range's length, in bytes.
        len: usize,
        /// The region's length, in bytes.
        region_len: usize,
    },
}
