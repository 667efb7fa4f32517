//! Feature and ioctl sets of the `UFFDIO_API` handshake and of `UFFDIO_REGISTER`, as small
//! bit-set newtypes so callers never handle the kernel's raw masks.

use crate::sys;
use std::fmt;

/// What does not work when a userfaultfd is user-mode-only; for a log line at start-up.
pub const USER_MODE_ONLY_WARNING: &str = "userfaultfd is user-mode-only: faults the kernel takes \
on the program's behalf (e.g. read(2) or recv(2) into an evicted page) fail with EFAULT instead \
of being served; run as root, grant CAP_SYS_PTRACE or access to /dev/userfaultfd to lift this";

/// A set of userfaultfd features (`UFFD_FEATURE_*`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Features(u64);

impl Features {
    /// Write-protect faults (`UFFDIO_REGISTER_MODE_WP`, `UFFDIO_WRITEPROTECT`) on anonymous memory.
    pub const PAGEFAULT_FLAG_WP: Self = Self(sys::UFFD_FEATURE_PAGEFAULT_FLAG_WP);
    /// A `Fork` event with a new userfaultfd for the child. Needs `CAP_SYS_PTRACE`.
    pub const EVENT_FORK: Self = Self(sys::UFFD_FEATURE_EVENT_FORK);
    /// A `Remap` event on `mremap`; without it, `mremap` silently drops the registration.
    pub const EVENT_REMAP: Self = Self(sys::UFFD_FEATURE_EVENT_REMAP);
    /// A `Remove` event on `MADV_DONTNEED`/`MADV_FREE`/`MADV_REMOVE`.
    pub const EVENT_REMOVE: Self = Self(sys::UFFD_FEATURE_EVENT_REMOVE);
    /// Missing-page faults on hugetlbfs mappings (not used by uzswap).
    pub const MISSING_HUGETLBFS: Self = Self(sys::UFFD_FEATURE_MISSING_HUGETLBFS);
    /// Missing-page faults on shmem mappings (not used by uzswap).
    pub const MISSING_SHMEM: Self = Self(sys::UFFD_FEATURE_MISSING_SHMEM);
    /// An `Unmap` event on `munmap`.
    pub const EVENT_UNMAP: Self = Self(sys::UFFD_FEATURE_EVENT_UNMAP);
    /// Faults raise SIGBUS in the faulting thread instead of an event (in-thread faults,
    /// `sigbus`).
    pub const SIGBUS: Self = Self(sys::UFFD_FEATURE_SIGBUS);
    /// Page fault events carry the faulting thread's id.
    pub const THREAD_ID: Self = Self(sys::UFFD_FEATURE_THREAD_ID);
    /// Minor faults on hugetlbfs mappings (not used by uzswap).
    pub const MINOR_HUGETLBFS: Self = Self(sys::UFFD_FEATURE_MINOR_HUGETLBFS);
    /// Minor faults on shmem mappings (not used by uzswap).
    pub const MINOR_SHMEM: Self = Self(sys::UFFD_FEATURE_MINOR_SHMEM);
    /// Page fault events carry the exact faulting address, not the page-aligned one.
    pub const EXACT_ADDRESS: Self = Self(sys::UFFD_FEATURE_EXACT_ADDRESS);
    /// Write protection on hugetlbfs and shmem mappings (not used by uzswap).
    pub const WP_HUGETLBFS_SHMEM: Self = Self(sys::UFFD_FEATURE_WP_HUGETLBFS_SHMEM);
    /// `UFFDIO_WRITEPROTECT` also protects pages that are not populated yet.
    pub const WP_UNPOPULATED: Self = Self(sys::UFFD_FEATURE_WP_UNPOPULATED);
    /// `UFFDIO_POISON`: a poisoned page raises SIGBUS on access.
    pub const POISON: Self = Self(sys::UFFD_FEATURE_POISON);
    /// Write-protect faults are resolved by the kernel itself (dirty tracking without events).
    pub const WP_ASYNC: Self = Self(sys::UFFD_FEATURE_WP_ASYNC);
    /// `UFFDIO_MOVE` (Linux 6.8): move pages between anonymous mappings without copying.
    pub const MOVE: Self = Self(sys::UFFD_FEATURE_MOVE);

    const NAMES: &'static [(Self, &'static str)] = &[
        (Self::PAGEFAULT_FLAG_WP, "PAGEFAULT_FLAG_WP"),
        (Self::EVENT_FORK, "EVENT_FORK"),
        (Self::EVENT_REMAP, "EVENT_REMAP"),
        (Self::EVENT_REMOVE, "EVENT_REMOVE"),
        (Self::MISSING_HUGETLBFS, "MISSING_HUGETLBFS"),
        (Self::MISSING_SHMEM, "MISSING_SHMEM"),
        (Self::EVENT_UNMAP, "EVENT_UNMAP"),
        (Self::SIGBUS, "SIGBUS"),
        (Self::THREAD_ID, "THREAD_ID"),
        (Self::MINOR_HUGETLBFS, "MINOR_HUGETLBFS"),
        (Self::MINOR_SHMEM, "MINOR_SHMEM"),
        (Self::EXACT_ADDRESS, "EXACT_ADDRESS"),
        (Self::WP_HUGETLBFS_SHMEM, "WP_HUGETLBFS_SHMEM"),
        (Self::WP_UNPOPULATED, "WP_UNPOPULATED"),
        (Self::POISON, "POISON"),
        (Self::WP_ASYNC, "WP_ASYNC"),
        (Self::MOVE, "MOVE"),
    ];

    /// What uzswap asks for unless told otherwise, and gets where the kernel has it. The three
    /// events are required (see [`Features::REQUIRED_DEFAULT`]); the rest are optional. Not
    /// `WP_UNPOPULATED`: with it, write-protecting a range that has an empty page (never
    /// touched, or discarded by a zap that races the call) leaves a marker there, which
    /// faults as missing while `/proc/self/pagemap` shows it as a swap entry.
    pub const REQUESTED_DEFAULT: Self = Self(
        Self::EVENT_REMOVE.0
            | Self::EVENT_UNMAP.0
            | Self::EVENT_REMAP.0
            | Self::MOVE.0
            | Self::POISON.0
            | Self::PAGEFAULT_FLAG_WP.0
            | Self::THREAD_ID.0
            | Self::EXACT_ADDRESS.0,
    );
    /// Without these events a managed region silently loses data (stale pages after
    /// `MADV_DONTNEED`, zeros after `mremap`, leaked entries after `munmap`), so their absence is
    /// an error, not a degraded mode.
    pub const REQUIRED_DEFAULT: Self =
        Self(Self::EVENT_REMOVE.0 | Self::EVENT_UNMAP.0 | Self::EVENT_REMAP.0);

    /// The empty set.
    pub const fn empty() -> Self {
        Self(0)
    }
    /// The raw `UFFD_FEATURE_*` mask.
    pub const fn bits(self) -> u64 {
        self.0
    }
    /// Keeps unknown bits too: a newer kernel may report features this crate has no name for.
    pub const fn from_bits(bits: u64) -> Self {
        Self(bits)
    }
    /// Whether every feature of `other` is in the set.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
    /// Whether some feature of `other` is in the set.
    pub const fn intersects(self, other: Self) -> bool {
        self.0 & other.0 != 0
    }
    /// Whether the set has no feature.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// The features in either set.
    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
    /// The features in both sets.
    pub const fn intersection(self, other: Self) -> Self {
        Self(self.0 & other.0)
    }
    /// The features of the set that are not in `other`.
    pub const fn difference(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }
    /// Names of the known features in the set, for logs.
    pub fn names(self) -> Vec<&'static str> {
        Self::NAMES
            .iter()
            .filter(|(f, _)| self.contains(*f))
            .map(|(_, n)| *n)
            .collect()
    }
}

impl std::ops::BitOr for Features {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        self.union(rhs)
    }
}

impl std::ops::BitOrAssign for Features {
    fn bitor_assign(&mut self, rhs: Self) {
        *self = self.union(rhs);
    }
}

impl fmt::Debug for Features {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Features({:#x}: {})", self.0, self.names().join("|"))
    }
}

/// A set of userfaultfd ioctls (`1 << _UFFDIO_*`), as reported by the handshake (API ioctls) and
/// by `UFFDIO_REGISTER` (what may be done on the registered range).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Ioctls(u64);

impl Ioctls {
    /// `UFFDIO_REGISTER`.
    pub const REGISTER: Self = Self(1 << sys::_UFFDIO_REGISTER);
    /// `UFFDIO_UNREGISTER`.
    pub const UNREGISTER: Self = Self(1 << sys::_UFFDIO_UNREGISTER);
    /// `UFFDIO_WAKE`.
    pub const WAKE: Self = Self(1 << sys::_UFFDIO_WAKE);
    /// `UFFDIO_COPY`.
    pub const COPY: Self = Self(1 << sys::_UFFDIO_COPY);
    /// `UFFDIO_ZEROPAGE`.
    pub const ZEROPAGE: Self = Self(1 << sys::_UFFDIO_ZEROPAGE);
    /// `UFFDIO_MOVE`.
    pub const MOVE: Self = Self(1 << sys::_UFFDIO_MOVE);
    /// `UFFDIO_WRITEPROTECT`.
    pub const WRITEPROTECT: Self = Self(1 << sys::_UFFDIO_WRITEPROTECT);
    /// `UFFDIO_CONTINUE`.
    pub const CONTINUE: Self = Self(1 << sys::_UFFDIO_CONTINUE);
    /// `UFFDIO_POISON`.
    pub const POISON: Self = Self(1 << sys::_UFFDIO_POISON);
    /// `UFFDIO_API`.
    pub const API: Self = Self(1 << sys::_UFFDIO_API);

    const NAMES: &'static [(Self, &'static str)] = &[
        (Self::REGISTER, "REGISTER"),
        (Self::UNREGISTER, "UNREGISTER"),
        (Self::WAKE, "WAKE"),
        (Self::COPY, "COPY"),
        (Self::ZEROPAGE, "ZEROPAGE"),
        (Self::MOVE, "MOVE"),
        (Self::WRITEPROTECT, "WRITEPROTECT"),
        (Self::CONTINUE, "CONTINUE"),
        (Self::POISON, "POISON"),
        (Self::API, "API"),
    ];

    /// The raw mask (`1 << _UFFDIO_*`).
    pub const fn bits(self) -> u64 {
        self.0
    }
    /// The set of a raw mask; unknown bits are kept.
    pub const fn from_bits(bits: u64) -> Self {
        Self(bits)
    }
    /// Whether every ioctl of `other` is in the set.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
    /// Names of the known ioctls in the set, for logs.
    pub fn names(self) -> Vec<&'static str> {
        Self::NAMES
            .iter()
            .filter(|(f, _)| self.contains(*f))
            .map(|(_, n)| *n)
            .collect()
    }
}

impl std::ops::BitOr for Ioctls {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

impl fmt::Debug for Ioctls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Ioctls({:#x}: {})", self.0, self.names().join("|"))
    }
}

/// How a range is registered: which faults are reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RegisterMode {
    /// Report faults on pages that are not present (`UFFDIO_REGISTER_MODE_MISSING`).
    pub missing: bool,
    /// Report writes to write-protected pages (`UFFDIO_REGISTER_MODE_WP`).
    pub write_protect: bool,
}

impl RegisterMode {
    /// Missing-page faults only.
    pub const MISSING: Self = Self {
        missing: true,
        write_protect: false,
    };
    /// Write-protect faults only.
    pub const WP: Self = Self {
        missing: false,
        write_protect: true,
    };
    /// Both missing-page and write-protect faults.
    pub const MISSING_WP: Self = Self {
        missing: true,
        write_protect: true,
    };

    pub(crate) fn bits(self) -> u64 {
        let mut m = 0;
        if self.missing {
            m |= sys::UFFDIO_REGISTER_MODE_MISSING;
        }
        if self.write_protect {
            m |= sys::UFFDIO_REGISTER_MODE_WP;
        }
        m
    }
}
