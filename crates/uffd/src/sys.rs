//! The raw kernel ABI of userfaultfd: `#[repr(C)]` copies of the structs of
//! `include/uapi/linux/userfaultfd.h` and the ioctl numbers built from them.
//!
//! Everything is written out by hand rather than taken from `libc` or the system headers because
//! the development machine's 6.1-era headers lack `UFFDIO_MOVE`, `UFFDIO_POISON` and the newer
//! feature bits, while the running kernel (6.18) has them. The layouts are checked against the
//! kernel's sizes by the const assertions at the bottom of this file.

#![allow(non_camel_case_types)]

/// `UFFD_API`: the only API version the kernel knows.
pub const UFFD_API: u64 = 0xAA;

/// `UFFD_USER_MODE_ONLY`: a creation flag; faults raised while the kernel itself touches user
/// memory (`copy_to_user` in `read(2)`, ...) are not reported but fail with `EFAULT`.
pub const UFFD_USER_MODE_ONLY: libc::c_int = 1;

// Event types (`uffd_msg.event`).
/// A fault on a registered range.
pub const UFFD_EVENT_PAGEFAULT: u8 = 0x12;
/// The process forked; the child's copy of the registered ranges has a new userfaultfd.
pub const UFFD_EVENT_FORK: u8 = 0x13;
/// A registered range was moved by `mremap`.
pub const UFFD_EVENT_REMAP: u8 = 0x14;
/// A range was discarded (`MADV_DONTNEED`, `MADV_REMOVE`).
pub const UFFD_EVENT_REMOVE: u8 = 0x15;
/// A range was unmapped (`munmap`, or an `mremap` that shrank it).
pub const UFFD_EVENT_UNMAP: u8 = 0x16;

// Page fault flags (`uffd_msg.arg.pagefault.flags`).
/// The fault was a write.
pub const UFFD_PAGEFAULT_FLAG_WRITE: u64 = 1 << 0;
/// The fault was a write to a write-protected page.
pub const UFFD_PAGEFAULT_FLAG_WP: u64 = 1 << 1;
/// The fault was a minor fault (the page is in the page cache but not mapped).
pub const UFFD_PAGEFAULT_FLAG_MINOR: u64 = 1 << 2;

// Feature bits (`uffdio_api.features`).
/// Write-protect faults (`UFFDIO_REGISTER_MODE_WP`) on anonymous memory.
pub const UFFD_FEATURE_PAGEFAULT_FLAG_WP: u64 = 1 << 0;
/// Report forks (`UFFD_EVENT_FORK`); needs `CAP_SYS_PTRACE`.
pub const UFFD_FEATURE_EVENT_FORK: u64 = 1 << 1;
/// Report moves (`UFFD_EVENT_REMAP`).
pub const UFFD_FEATURE_EVENT_REMAP: u64 = 1 << 2;
/// Report discards (`UFFD_EVENT_REMOVE`).
pub const UFFD_FEATURE_EVENT_REMOVE: u64 = 1 << 3;
/// Missing-page faults on hugetlbfs mappings.
pub const UFFD_FEATURE_MISSING_HUGETLBFS: u64 = 1 << 4;
/// Missing-page faults on shmem mappings.
pub const UFFD_FEATURE_MISSING_SHMEM: u64 = 1 << 5;
/// Report unmaps (`UFFD_EVENT_UNMAP`).
pub const UFFD_FEATURE_EVENT_UNMAP: u64 = 1 << 6;
/// Faults raise SIGBUS instead of being reported.
pub const UFFD_FEATURE_SIGBUS: u64 = 1 << 7;
/// Fault messages carry the faulting thread's id.
pub const UFFD_FEATURE_THREAD_ID: u64 = 1 << 8;
/// Minor faults (`UFFDIO_REGISTER_MODE_MINOR`) on hugetlbfs mappings.
pub const UFFD_FEATURE_MINOR_HUGETLBFS: u64 = 1 << 9;
/// Minor faults on shmem mappings.
pub const UFFD_FEATURE_MINOR_SHMEM: u64 = 1 << 10;
/// Fault addresses are reported exactly, not rounded down to the page.
pub const UFFD_FEATURE_EXACT_ADDRESS: u64 = 1 << 11;
/// Write protection on hugetlbfs and shmem mappings.
pub const UFFD_FEATURE_WP_HUGETLBFS_SHMEM: u64 = 1 << 12;
/// Write protection also marks pages not yet populated.
pub const UFFD_FEATURE_WP_UNPOPULATED: u64 = 1 << 13;
/// `UFFDIO_POISON`.
pub const UFFD_FEATURE_POISON: u64 = 1 << 14;
/// Write-protect faults are resolved by the kernel, not reported.
pub const UFFD_FEATURE_WP_ASYNC: u64 = 1 << 15;
/// `UFFDIO_MOVE`.
pub const UFFD_FEATURE_MOVE: u64 = 1 << 16;

// ioctl command numbers (`_UFFDIO_*`); a bit `1 << nr` in an `ioctls` mask says it is available.
/// Command number of `UFFDIO_REGISTER`.
pub const _UFFDIO_REGISTER: u64 = 0x00;
/// Command number of `UFFDIO_UNREGISTER`.
pub const _UFFDIO_UNREGISTER: u64 = 0x01;
/// Command number of `UFFDIO_WAKE`.
pub const _UFFDIO_WAKE: u64 = 0x02;
/// Command number of `UFFDIO_COPY`.
pub const _UFFDIO_COPY: u64 = 0x03;
/// Command number of `UFFDIO_ZEROPAGE`.
pub const _UFFDIO_ZEROPAGE: u64 = 0x04;
/// Command number of `UFFDIO_MOVE`.
pub const _UFFDIO_MOVE: u64 = 0x05;
/// Command number of `UFFDIO_WRITEPROTECT`.
pub const _UFFDIO_WRITEPROTECT: u64 = 0x06;
/// Command number of `UFFDIO_CONTINUE`.
pub const _UFFDIO_CONTINUE: u64 = 0x07;
/// Command number of `UFFDIO_POISON`.
pub const _UFFDIO_POISON: u64 = 0x08;
/// Command number of `UFFDIO_API`.
pub const _UFFDIO_API: u64 = 0x3F;

// Registration modes.
/// Report faults on pages that are not present.
pub const UFFDIO_REGISTER_MODE_MISSING: u64 = 1 << 0;
/// Report writes to write-protected pages.
pub const UFFDIO_REGISTER_MODE_WP: u64 = 1 << 1;
/// Report minor faults (shmem and hugetlbfs only).
pub const UFFDIO_REGISTER_MODE_MINOR: u64 = 1 << 2;

// Per-operation modes.
/// `UFFDIO_COPY`: do not wake the threads waiting on the range.
pub const UFFDIO_COPY_MODE_DONTWAKE: u64 = 1 << 0;
/// `UFFDIO_COPY`: map the new pages write-protected.
pub const UFFDIO_COPY_MODE_WP: u64 = 1 << 1;
/// `UFFDIO_ZEROPAGE`: do not wake the threads waiting on the range.
pub const UFFDIO_ZEROPAGE_MODE_DONTWAKE: u64 = 1 << 0;
/// `UFFDIO_MOVE`: do not wake the threads waiting on the range.
pub const UFFDIO_MOVE_MODE_DONTWAKE: u64 = 1 << 0;
/// `UFFDIO_MOVE`: skip holes in the source instead of failing with `ENOENT`.
pub const UFFDIO_MOVE_MODE_ALLOW_SRC_HOLES: u64 = 1 << 1;
/// `UFFDIO_WRITEPROTECT`: set write protection (without it: clear it).
pub const UFFDIO_WRITEPROTECT_MODE_WP: u64 = 1 << 0;
/// `UFFDIO_WRITEPROTECT`: do not wake the threads waiting on the range.
pub const UFFDIO_WRITEPROTECT_MODE_DONTWAKE: u64 = 1 << 1;
/// `UFFDIO_CONTINUE`: do not wake the threads waiting on the range.
pub const UFFDIO_CONTINUE_MODE_DONTWAKE: u64 = 1 << 0;
/// `UFFDIO_CONTINUE`: map the pages write-protected.
pub const UFFDIO_CONTINUE_MODE_WP: u64 = 1 << 1;
/// `UFFDIO_POISON`: do not wake the threads waiting on the range.
pub const UFFDIO_POISON_MODE_DONTWAKE: u64 = 1 << 0;

/// `struct uffdio_api`: the `UFFDIO_API` handshake.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct uffdio_api {
    /// `UFFD_API`.
    pub api: u64,
    /// In: the features asked for. Out: the features the kernel supports.
    pub features: u64,
    /// Out: the ioctls the userfaultfd accepts (bit `1 << _UFFDIO_*`).
    pub ioctls: u64,
}

/// `struct uffdio_range`: an address range.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct uffdio_range {
    /// The first address.
    pub start: u64,
    /// The length, in bytes.
    pub len: u64,
}

/// `struct uffdio_register`: the argument of `UFFDIO_REGISTER`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct uffdio_register {
    /// The range to register.
    pub range: uffdio_range,
    /// `UFFDIO_REGISTER_MODE_*` bits.
    pub mode: u64,
    /// Out: the ioctls the range accepts (bit `1 << _UFFDIO_*`).
    pub ioctls: u64,
}

/// `copy` is written back by the kernel: bytes copied (> 0) or a negative errno. It is signed:
/// reading it as unsigned turns `-EAGAIN` into a huge "byte count" (the userfaultfd-rs bug).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct uffdio_copy {
    /// Where the pages go.
    pub dst: u64,
    /// Where their contents come from.
    pub src: u64,
    /// Bytes to copy.
    pub len: u64,
    /// `UFFDIO_COPY_MODE_*` bits.
    pub mode: u64,
    /// Out: bytes copied, or a negative errno.
    pub copy: i64,
}

/// `struct uffdio_zeropage`: the argument of `UFFDIO_ZEROPAGE`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct uffdio_zeropage {
    /// The range to map to the zero page.
    pub range: uffdio_range,
    /// `UFFDIO_ZEROPAGE_MODE_*` bits.
    pub mode: u64,
    /// Out: bytes mapped, or a negative errno.
    pub zeropage: i64,
}

/// `struct uffdio_move` (Linux 6.8): absent from the system headers, hence written here.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct uffdio_move {
    /// Where the pages go.
    pub dst: u64,
    /// Where they are now.
    pub src: u64,
    /// Bytes to move.
    pub len: u64,
    /// `UFFDIO_MOVE_MODE_*` bits.
    pub mode: u64,
    /// Out: bytes moved, or a negative errno (`move` in the kernel).
    pub move_: i64,
}

/// `struct uffdio_writeprotect`: the argument of `UFFDIO_WRITEPROTECT`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct uffdio_writeprotect {
    /// The range to protect or unprotect.
    pub range: uffdio_range,
    /// `UFFDIO_WRITEPROTECT_MODE_*` bits.
    pub mode: u64,
}

/// `struct uffdio_continue`: the argument of `UFFDIO_CONTINUE`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct uffdio_continue {
    /// The range to map from the page cache.
    pub range: uffdio_range,
    /// `UFFDIO_CONTINUE_MODE_*` bits.
    pub mode: u64,
    /// Out: bytes mapped, or a negative errno.
    pub mapped: i64,
}

/// `struct uffdio_poison`: the argument of `UFFDIO_POISON`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct uffdio_poison {
    /// The range to poison (SIGBUS on access).
    pub range: uffdio_range,
    /// `UFFDIO_POISON_MODE_*` bits.
    pub mode: u64,
    /// Out: bytes poisoned, or a negative errno.
    pub updated: i64,
}

/// `struct uffd_msg` is `__packed` in the kernel, but every member is naturally aligned at its
/// offset, so `repr(C)` gives the same 32-byte layout. The union `arg` is kept as raw bytes and
/// decoded field by field in `event.rs`, which keeps reading it free of union `unsafe`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct uffd_msg {
    /// `UFFD_EVENT_*`.
    pub event: u8,
    /// Reserved.
    pub reserved1: u8,
    /// Reserved.
    pub reserved2: u16,
    /// Reserved.
    pub reserved3: u32,
    /// The event's arguments (the kernel's union), as raw bytes.
    pub arg: [u8; 24],
}

// The `_IOC` encoding of asm-generic/ioctl.h (x86_64, aarch64, riscv64 all use it).
const IOC_NONE: u64 = 0;
const IOC_WRITE: u64 = 1;
const IOC_READ: u64 = 2;

const fn ioc(dir: u64, ty: u64, nr: u64, size: usize) -> u64 {
    (dir << 30) | ((size as u64) << 16) | (ty << 8) | nr
}

const UFFDIO: u64 = 0xAA;

/// The ioctl on `/dev/userfaultfd` that makes a userfaultfd (its argument: the flags).
pub const USERFAULTFD_IOC_NEW: u64 = ioc(IOC_NONE, 0xAA, 0x00, 0);
/// The `UFFDIO_API` ioctl: the handshake, which must come first.
pub const UFFDIO_API: u64 = ioc(
    IOC_READ | IOC_WRITE,
    UFFDIO,
    _UFFDIO_API,
    size_of::<uffdio_api>(),
);
/// The `UFFDIO_REGISTER` ioctl: register a range.
pub const UFFDIO_REGISTER: u64 = ioc(
    IOC_READ | IOC_WRITE,
    UFFDIO,
    _UFFDIO_REGISTER,
    size_of::<uffdio_register>(),
);
/// The `UFFDIO_UNREGISTER` ioctl: unregister a range.
pub const UFFDIO_UNREGISTER: u64 = ioc(
    IOC_READ,
    UFFDIO,
    _UFFDIO_UNREGISTER,
    size_of::<uffdio_range>(),
);
/// The `UFFDIO_WAKE` ioctl: wake the threads waiting on a range.
pub const UFFDIO_WAKE: u64 = ioc(IOC_READ, UFFDIO, _UFFDIO_WAKE, size_of::<uffdio_range>());
/// The `UFFDIO_COPY` ioctl: fill missing pages with a copy of given bytes.
pub const UFFDIO_COPY: u64 = ioc(
    IOC_READ | IOC_WRITE,
    UFFDIO,
    _UFFDIO_COPY,
    size_of::<uffdio_copy>(),
);
/// The `UFFDIO_ZEROPAGE` ioctl: map missing pages to the zero page.
pub const UFFDIO_ZEROPAGE: u64 = ioc(
    IOC_READ | IOC_WRITE,
    UFFDIO,
    _UFFDIO_ZEROPAGE,
    size_of::<uffdio_zeropage>(),
);
/// The `UFFDIO_MOVE` ioctl: move pages from one place to another without copying.
pub const UFFDIO_MOVE: u64 = ioc(
    IOC_READ | IOC_WRITE,
    UFFDIO,
    _UFFDIO_MOVE,
    size_of::<uffdio_move>(),
);
/// The `UFFDIO_WRITEPROTECT` ioctl: write-protect or unprotect a range.
pub const UFFDIO_WRITEPROTECT: u64 = ioc(
    IOC_READ | IOC_WRITE,
    UFFDIO,
    _UFFDIO_WRITEPROTECT,
    size_of::<uffdio_writeprotect>(),
);
/// The `UFFDIO_CONTINUE` ioctl: map pages already in the page cache.
pub const UFFDIO_CONTINUE: u64 = ioc(
    IOC_READ | IOC_WRITE,
    UFFDIO,
    _UFFDIO_CONTINUE,
    size_of::<uffdio_continue>(),
);
/// The `UFFDIO_POISON` ioctl: make a range raise SIGBUS when touched.
pub const UFFDIO_POISON: u64 = ioc(
    IOC_READ | IOC_WRITE,
    UFFDIO,
    _UFFDIO_POISON,
    size_of::<uffdio_poison>(),
);

// The kernel's sizes; a wrong layout would make every ioctl number wrong (ENOTTY) or worse.
const _: () = assert!(size_of::<uffdio_api>() == 24);
const _: () = assert!(size_of::<uffdio_range>() == 16);
const _: () = assert!(size_of::<uffdio_register>() == 32);
const _: () = assert!(size_of::<uffdio_copy>() == 40);
const _: () = assert!(size_of::<uffdio_zeropage>() == 32);
const _: () = assert!(size_of::<uffdio_move>() == 40);
const _: () = assert!(size_of::<uffdio_writeprotect>() == 24);
const _: () = assert!(size_of::<uffdio_continue>() == 32);
const _: () = assert!(size_of::<uffdio_poison>() == 32);
const _: () = assert!(size_of::<uffd_msg>() == 32);
// Known values from the kernel headers, as a cross-check of `ioc`.
const _: () = assert!(UFFDIO_API == 0xc018_aa3f);
const _: () = assert!(UFFDIO_COPY == 0xc028_aa03);
const _: () = assert!(USERFAULTFD_IOC_NEW == 0xaa00);

// PAGEMAP_SCAN (the `ioctl` on `/proc/PID/pagemap`, include/uapi/linux/fs.h).
/// `struct pm_scan_arg`.
#[repr(C)]
#[derive(Debug, Default)]
pub struct pm_scan_arg {
    /// `size_of::<pm_scan_arg>()`.
    pub size: u64,
    /// `PM_SCAN_*`.
    pub flags: u64,
    /// The range's start (a run's, in `page_region`).
    pub start: u64,
    /// The range's end (a run's, in `page_region`).
    pub end: u64,
    /// Where the walk stopped (set by the kernel).
    pub walk_end: u64,
    /// The `page_region` array to fill.
    pub vec: u64,
    /// Its length.
    pub vec_len: u64,
    /// Most pages to report (0: no limit).
    pub max_pages: u64,
    /// Categories whose sense is inverted.
    pub category_inverted: u64,
    /// Categories a page must all have.
    pub category_mask: u64,
    /// Categories a page must have one of.
    pub category_anyof_mask: u64,
    /// Categories to report.
    pub return_mask: u64,
}
/// `struct page_region`: a run of pages with the same categories.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct page_region {
    /// The range's start (a run's, in `page_region`).
    pub start: u64,
    /// The range's end (a run's, in `page_region`).
    pub end: u64,
    /// The run's categories (`PAGE_IS_*`).
    pub categories: u64,
}
/// `_IOWR('f', 16, struct pm_scan_arg)`.
pub const PAGEMAP_SCAN: u64 = ioc(
    IOC_READ | IOC_WRITE,
    b'f' as u64,
    16,
    size_of::<pm_scan_arg>(),
);
const _: () = assert!(size_of::<pm_scan_arg>() == 96);
const _: () = assert!(size_of::<page_region>() == 24);
const _: () = assert!(PAGEMAP_SCAN == 0xC060_6610);
/// Write-protect the pages that match (`UFFDIO_WRITEPROTECT` in the same walk).
pub const PM_SCAN_WP_MATCHING: u64 = 1 << 0;
/// Fail with `EPERM` unless the range is registered with a `WP_ASYNC` userfaultfd.
pub const PM_SCAN_CHECK_WPASYNC: u64 = 1 << 1;
/// Written since last write-protected (the uffd-wp bit clear).
pub const PAGE_IS_WRITTEN: u64 = 1 << 1;
/// Present in the page tables.
pub const PAGE_IS_PRESENT: u64 = 1 << 3;
