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
pub const UFFD_EVENT_PAGEFAULT: u8 = 0x12;
pub const UFFD_EVENT_FORK: u8 = 0x13;
pub const UFFD_EVENT_REMAP: u8 = 0x14;
pub const UFFD_EVENT_REMOVE: u8 = 0x15;
pub const UFFD_EVENT_UNMAP: u8 = 0x16;

// Page fault flags (`uffd_msg.arg.pagefault.flags`).
pub const UFFD_PAGEFAULT_FLAG_WRITE: u64 = 1 << 0;
pub const UFFD_PAGEFAULT_FLAG_WP: u64 = 1 << 1;
pub const UFFD_PAGEFAULT_FLAG_MINOR: u64 = 1 << 2;

// Feature bits (`uffdio_api.features`).
pub const UFFD_FEATURE_PAGEFAULT_FLAG_WP: u64 = 1 << 0;
pub const UFFD_FEATURE_EVENT_FORK: u64 = 1 << 1;
pub const UFFD_FEATURE_EVENT_REMAP: u64 = 1 << 2;
pub const UFFD_FEATURE_EVENT_REMOVE: u64 = 1 << 3;
pub const UFFD_FEATURE_MISSING_HUGETLBFS: u64 = 1 << 4;
pub const UFFD_FEATURE_MISSING_SHMEM: u64 = 1 << 5;
pub const UFFD_FEATURE_EVENT_UNMAP: u64 = 1 << 6;
pub const UFFD_FEATURE_SIGBUS: u64 = 1 << 7;
pub const UFFD_FEATURE_THREAD_ID: u64 = 1 << 8;
pub const UFFD_FEATURE_MINOR_HUGETLBFS: u64 = 1 << 9;
pub const UFFD_FEATURE_MINOR_SHMEM: u64 = 1 << 10;
pub const UFFD_FEATURE_EXACT_ADDRESS: u64 = 1 << 11;
pub const UFFD_FEATURE_WP_HUGETLBFS_SHMEM: u64 = 1 << 12;
pub const UFFD_FEATURE_WP_UNPOPULATED: u64 = 1 << 13;
pub const UFFD_FEATURE_POISON: u64 = 1 << 14;
pub const UFFD_FEATURE_WP_ASYNC: u64 = 1 << 15;
pub const UFFD_FEATURE_MOVE: u64 = 1 << 16;

// ioctl command numbers (`_UFFDIO_*`); a bit `1 << nr` in an `ioctls` mask says it is available.
pub const _UFFDIO_REGISTER: u64 = 0x00;
pub const _UFFDIO_UNREGISTER: u64 = 0x01;
pub const _UFFDIO_WAKE: u64 = 0x02;
pub const _UFFDIO_COPY: u64 = 0x03;
pub const _UFFDIO_ZEROPAGE: u64 = 0x04;
pub const _UFFDIO_MOVE: u64 = 0x05;
pub const _UFFDIO_WRITEPROTECT: u64 = 0x06;
pub const _UFFDIO_CONTINUE: u64 = 0x07;
pub const _UFFDIO_POISON: u64 = 0x08;
pub const _UFFDIO_API: u64 = 0x3F;

// Registration modes.
pub const UFFDIO_REGISTER_MODE_MISSING: u64 = 1 << 0;
pub const UFFDIO_REGISTER_MODE_WP: u64 = 1 << 1;
pub const UFFDIO_REGISTER_MODE_MINOR: u64 = 1 << 2;

// Per-operation modes.
pub const UFFDIO_COPY_MODE_DONTWAKE: u64 = 1 << 0;
pub const UFFDIO_COPY_MODE_WP: u64 = 1 << 1;
pub const UFFDIO_ZEROPAGE_MODE_DONTWAKE: u64 = 1 << 0;
pub const UFFDIO_MOVE_MODE_DONTWAKE: u64 = 1 << 0;
pub const UFFDIO_MOVE_MODE_ALLOW_SRC_HOLES: u64 = 1 << 1;
pub const UFFDIO_WRITEPROTECT_MODE_WP: u64 = 1 << 0;
pub const UFFDIO_WRITEPROTECT_MODE_DONTWAKE: u64 = 1 << 1;
pub const UFFDIO_CONTINUE_MODE_DONTWAKE: u64 = 1 << 0;
pub const UFFDIO_CONTINUE_MODE_WP: u64 = 1 << 1;
pub const UFFDIO_POISON_MODE_DONTWAKE: u64 = 1 << 0;

#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct uffdio_api {
    pub api: u64,
    pub features: u64,
    pub ioctls: u64,
}

#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct uffdio_range {
    pub start: u64,
    pub len: u64,
}

#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct uffdio_register {
    pub range: uffdio_range,
    pub mode: u64,
    pub ioctls: u64,
}

/// `copy` is written back by the kernel: bytes copied (> 0) or a negative errno. It is signed:
/// reading it as unsigned turns `-EAGAIN` into a huge "byte count" (the userfaultfd-rs bug).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct uffdio_copy {
    pub dst: u64,
    pub src: u64,
    pub len: u64,
    pub mode: u64,
    pub copy: i64,
}

#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct uffdio_zeropage {
    pub range: uffdio_range,
    pub mode: u64,
    pub zeropage: i64,
}

/// `struct uffdio_move` (Linux 6.8): absent from the system headers, hence written here.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct uffdio_move {
    pub dst: u64,
    pub src: u64,
    pub len: u64,
    pub mode: u64,
    pub move_: i64,
}

#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct uffdio_writeprotect {
    pub range: uffdio_range,
    pub mode: u64,
}

#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct uffdio_continue {
    pub range: uffdio_range,
    pub mode: u64,
    pub mapped: i64,
}

#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct uffdio_poison {
    pub range: uffdio_range,
    pub mode: u64,
    pub updated: i64,
}

/// `struct uffd_msg` is `__packed` in the kernel, but every member is naturally aligned at its
/// offset, so `repr(C)` gives the same 32-byte layout. The union `arg` is kept as raw bytes and
/// decoded field by field in `event.rs`, which keeps reading it free of union `unsafe`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct uffd_msg {
    pub event: u8,
    pub reserved1: u8,
    pub reserved2: u16,
    pub reserved3: u32,
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

pub const USERFAULTFD_IOC_NEW: u64 = ioc(IOC_NONE, 0xAA, 0x00, 0);
pub const UFFDIO_API: u64 = ioc(
    IOC_READ | IOC_WRITE,
    UFFDIO,
    _UFFDIO_API,
    size_of::<uffdio_api>(),
);
pub const UFFDIO_REGISTER: u64 = ioc(
    IOC_READ | IOC_WRITE,
    UFFDIO,
    _UFFDIO_REGISTER,
    size_of::<uffdio_register>(),
);
pub const UFFDIO_UNREGISTER: u64 = ioc(
    IOC_READ,
    UFFDIO,
    _UFFDIO_UNREGISTER,
    size_of::<uffdio_range>(),
);
pub const UFFDIO_WAKE: u64 = ioc(IOC_READ, UFFDIO, _UFFDIO_WAKE, size_of::<uffdio_range>());
pub const UFFDIO_COPY: u64 = ioc(
    IOC_READ | IOC_WRITE,
    UFFDIO,
    _UFFDIO_COPY,
    size_of::<uffdio_copy>(),
);
pub const UFFDIO_ZEROPAGE: u64 = ioc(
    IOC_READ | IOC_WRITE,
    UFFDIO,
    _UFFDIO_ZEROPAGE,
    size_of::<uffdio_zeropage>(),
);
pub const UFFDIO_MOVE: u64 = ioc(
    IOC_READ | IOC_WRITE,
    UFFDIO,
    _UFFDIO_MOVE,
    size_of::<uffdio_move>(),
);
pub const UFFDIO_WRITEPROTECT: u64 = ioc(
    IOC_READ | IOC_WRITE,
    UFFDIO,
    _UFFDIO_WRITEPROTECT,
    size_of::<uffdio_writeprotect>(),
);
pub const UFFDIO_CONTINUE: u64 = ioc(
    IOC_READ | IOC_WRITE,
    UFFDIO,
    _UFFDIO_CONTINUE,
    size_of::<uffdio_continue>(),
);
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
