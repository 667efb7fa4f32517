//! The program's calls that close or replace descriptors, kept off uzswap's own (the
//! userfaultfds, the swap files, the statistics socket: uffd's descriptors.rs moves them to
//! the top of the table and records them).
//!
//! To the program those numbers are not open, as they are not without uzswap: `close` of one
//! fails with EBADF, `close_range` and `closefrom` close everything around them, and a `dup2`
//! or `dup3` onto one fails with EBADF, as a number past the program's limit does. uzswap's
//! own threads close their own. Not compiled into this crate's unit tests, whose process
//! would otherwise close through them.
#![cfg(not(test))]

use std::ffi::{c_int, c_uint};

use uffd::descriptors::{is_ours, ours_within, MAX_RECORDED};

use crate::thread_role::is_uzswap_thread;

/// Whether the program's call on `fd` must not reach it.
fn guarded(fd: c_int) -> bool {
    is_ours(fd) && !is_uzswap_thread()
}

fn ebadf() -> c_int {
    // SAFETY: `__errno_location` returns this thread's errno, always valid.
    unsafe { *libc::__errno_location() = libc::EBADF };
    -1
}

/// # Safety
/// As C's `close`.
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if guarded(fd) {
        return ebadf();
    }
    // SAFETY: close takes any number; glibc's wrapper is this system call (its cancellation
    // point aside).
    unsafe { libc::syscall(libc::SYS_close, fd) as c_int }
}

/// # Safety
/// As C's `dup2`.
#[no_mangle]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    if guarded(new) {
        return ebadf();
    }
    // SAFETY: dup2 takes any two numbers and touches no memory of ours.
    unsafe { libc::syscall(libc::SYS_dup2, old, new) as c_int }
}

/// # Safety
/// As glibc's `dup3`.
#[no_mangle]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    if guarded(new) {
        return ebadf();
    }
    // SAFETY: as `dup2`.
    unsafe { libc::syscall(libc::SYS_dup3, old, new, flags) as c_int }
}

/// `close_range(first, last, flags)` as the kernel has it.
fn raw_close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int {
    // SAFETY: close_range takes numbers and flags and touches no memory of ours.
    unsafe { libc::syscall(libc::SYS_close_range, first, last, flags) as c_int }
}

/// # Safety
/// As glibc's `close_range`.
#[no_mangle]
pub unsafe extern "C" fn close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int {
    // Marking close-on-exec leaves uzswap's as they are (they are already).
    if is_uzswap_thread() || flags & libc::CLOSE_RANGE_CLOEXEC as c_int != 0 || first > last {
        return raw_close_range(first, last, flags);
    }
    let mut ours = [0; MAX_RECORDED];
    let clamp = |n: c_uint| n.min(c_int::MAX as c_uint) as c_int;
    let n = ours_within(clamp(first), clamp(last), &mut ours);
    let mut from = first;
    for &fd in &ours[..n] {
        let fd = fd as c_uint;
        if fd > from {
            let r = raw_close_range(from, fd - 1, flags);
            if r != 0 {
                return r;
            }
        }
        from = fd + 1;
    }
    if from <= last {
        return raw_close_range(from, last, flags);
    }
    0
}

/// # Safety
/// As glibc's `closefrom`.
#[no_mangle]
pub unsafe extern "C" fn closefrom(first: c_int) {
    // SAFETY: as `close_range`; glibc's closefrom is this call over every number from `first`.
    let _ = unsafe { close_range(first.max(0) as c_uint, c_uint::MAX, 0) };
}
