//! The libc wrappers in-thread faults need (`uzswap run --in-thread-faults`): each program
//! thread serves its own faults on the heap from uzswap's SIGBUS handler (the region crate's
//! in_thread.rs), and what the program does must not break that:
//!
//! - **Its own SIGBUS handling.** A `sigaction` or `signal` for SIGBUS does not replace
//!   uzswap's handler: the program's action becomes the one uzswap passes every SIGBUS it
//!   does not serve to, and the program reads back its own. A `sigprocmask` or
//!   `pthread_sigmask` never blocks SIGBUS: a fault with SIGBUS blocked kills the process.
//! - **Memory a thread reads with signals blocked.** A new thread's TLS vector and the
//!   locale tables glibc reads while it starts are allocated outside the region.
//! - **System calls on evicted heap memory.** The kernel's own access to an evicted page (a
//!   `read` into it, a `write` from it) is not served: the call fails with EFAULT. The calls
//!   a program makes through libc's symbols (`read`, `write`, `pread64`, `pwrite64`, `readv`,
//!   `writev`, `recv`, `recvfrom`, `send`, `sendto`, `recvmsg`, `sendmsg`) are retried here
//!   after their heap buffers are touched in the calling thread (which serves their faults).
//!   Calls libc makes internally (stdio's buffers: `fwrite`, `printf`) and every other system
//!   call still fail with EFAULT on an evicted page: the trade-off `--help` states.
#![cfg(not(test))]

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::Relaxed};

use crate::heap::overlaps_region;

const PAGE: usize = 4096;

/// In-thread faults are on (set once, before the program runs).
static ON: AtomicBool = AtomicBool::new(false);

/// Turn the wrappers on: the region serves faults in the faulting thread.
pub fn turn_on() {
    ON.store(true, Relaxed);
}

fn on() -> bool {
    ON.load(Relaxed)
}

fn errno() -> c_int {
    // SAFETY: `__errno_location` returns this thread's errno, always valid.
    unsafe { *libc::__errno_location() }
}

/// libc's definition of a function wrapped here: the next after ours.
pub struct Next {
    name: &'static std::ffi::CStr,
    f: AtomicUsize,
}

impl Next {
    const fn new(name: &'static std::ffi::CStr) -> Self {
        Next {
            name,
            f: AtomicUsize::new(0),
        }
    }

    fn resolve(&self) -> usize {
        // SAFETY: a NUL-terminated symbol name; RTLD_NEXT finds libc's definition.
        let f = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) as usize };
        self.f.store(f, Relaxed);
        f
    }

    fn get(&self) -> usize {
        let f = match self.f.load(Relaxed) {
            0 => self.resolve(),
            f => f,
        };
        assert!(f != 0, "uzswap: libc has no {:?}", self.name);
        f
    }
}

macro_rules! libc_functions {
    ($($id:ident = $name:literal,)*) => {
        $(static $id: Next = Next::new($name);)*

        /// Look every wrapped function up, as the library starts: a lookup walks the dynamic
        /// linker's data, which libraries loaded later keep on the heap, and a uzswap thread
        /// that met it evicted there would wait on a fault that only it could serve (one did,
        /// in its first `pwrite64` to the swap file, under a JVM).
        pub fn resolve_all() {
            $($id.resolve();)*
        }
    };
}

libc_functions! {
    SIGACTION = c"sigaction",
    SIGNAL = c"signal",
    SIGPROCMASK = c"sigprocmask",
    PTHREAD_SIGMASK = c"pthread_sigmask",
    PTHREAD_CREATE = c"pthread_create",
    SETLOCALE = c"setlocale",
    READ = c"read",
    WRITE = c"write",
    PREAD64 = c"pread64",
    PWRITE64 = c"pwrite64",
    READV = c"readv",
    WRITEV = c"writev",
    RECV = c"recv",
    RECVFROM = c"recvfrom",
    SEND = c"send",
    SENDTO = c"sendto",
    RECVMSG = c"recvmsg",
    SENDMSG = c"sendmsg",
}

/// libc's function of that `Next`, with its signature.
macro_rules! next {
    ($id:ident: $ty:ty) => {{
        // SAFETY: the symbol is libc's function of that name, which has this signature.
        unsafe { std::mem::transmute::<usize, $ty>($id.get()) }
    }};
}

// ---- SIGBUS stays uzswap's -------------------------------------------------------------

/// # Safety
/// As C's `sigaction`.
#[no_mangle]
pub unsafe extern "C" fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    let real = next!(SIGACTION: unsafe extern "C" fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int);
    if sig != libc::SIGBUS || !on() {
        // SAFETY: the caller's arguments, as it passed them.
        return unsafe { real(sig, act, old) };
    }
    // SAFETY: `act` is null or a valid sigaction (the caller's contract); copied before
    // anything else.
    let new = unsafe { act.as_ref().copied() };
    let previous = match new {
        Some(a) => uffd::sigbus::set_passed_on(a),
        None => uffd::sigbus::passed_on(),
    };
    // SAFETY: `old` is null or valid for a write (the caller's contract).
    if let Some(old) = unsafe { old.as_mut() } {
        *old = previous;
    }
    0
}

/// # Safety
/// As C's `signal`.
#[no_mangle]
pub unsafe extern "C" fn signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    if sig != libc::SIGBUS || !on() {
        let real =
            next!(SIGNAL: unsafe extern "C" fn(c_int, libc::sighandler_t) -> libc::sighandler_t);
        // SAFETY: the caller's arguments.
        return unsafe { real(sig, handler) };
    }
    // SAFETY: an all-zero sigaction is valid; then set as glibc's `signal` sets it (BSD
    // semantics: restarting system calls).
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = handler;
    action.sa_flags = libc::SA_RESTART;
    uffd::sigbus::set_passed_on(action).sa_sigaction
}

/// `set` without SIGBUS, if `how` would block it.
fn without_sigbus(how: c_int, set: *const libc::sigset_t) -> Option<libc::sigset_t> {
    if !on() || set.is_null() || how == libc::SIG_UNBLOCK {
        return None;
    }
    // SAFETY: `set` is a valid sigset_t (the caller's contract); copied, then changed.
    let mut copy = unsafe { *set };
    // SAFETY: `copy` is a valid sigset_t.
    unsafe { libc::sigdelset(&mut copy, libc::SIGBUS) };
    Some(copy)
}

/// # Safety
/// As C's `sigprocmask`.
#[no_mangle]
pub unsafe extern "C" fn sigprocmask(
    how: c_int,
    set: *const libc::sigset_t,
    old: *mut libc::sigset_t,
) -> c_int {
    let real = next!(SIGPROCMASK: unsafe extern "C" fn(c_int, *const libc::sigset_t, *mut libc::sigset_t) -> c_int);
    let copy = without_sigbus(how, set);
    let set = copy.as_ref().map_or(set, |c| c as *const _);
    // SAFETY: the caller's arguments, `set` perhaps our copy of it.
    unsafe { real(how, set, old) }
}

/// # Safety
/// As C's `pthread_sigmask`.
#[no_mangle]
pub unsafe extern "C" fn pthread_sigmask(
    how: c_int,
    set: *const libc::sigset_t,
    old: *mut libc::sigset_t,
) -> c_int {
    let real = next!(PTHREAD_SIGMASK: unsafe extern "C" fn(c_int, *const libc::sigset_t, *mut libc::sigset_t) -> c_int);
    let copy = without_sigbus(how, set);
    let set = copy.as_ref().map_or(set, |c| c as *const _);
    // SAFETY: the caller's arguments, `set` perhaps our copy of it.
    unsafe { real(how, set, old) }
}

// ---- A new thread's TLS vector stays outside the region ----------------------------------

/// # Safety
/// As C's `pthread_create`.
#[no_mangle]
pub unsafe extern "C" fn pthread_create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    start: extern "C" fn(*mut c_void) -> *mut c_void,
    arg: *mut c_void,
) -> c_int {
    let real = next!(PTHREAD_CREATE: unsafe extern "C" fn(*mut libc::pthread_t, *const libc::pthread_attr_t, extern "C" fn(*mut c_void) -> *mut c_void, *mut c_void) -> c_int);
    // glibc allocates the new thread's TLS vector here: outside the region (thread_role.rs).
    let _outside = on().then(crate::thread_role::allocate_outside);
    // SAFETY: the caller's arguments.
    unsafe { real(thread, attr, start, arg) }
}

// ---- The locale a new thread reads before it can take a signal stays outside the region -

/// # Safety
/// As C's `setlocale`.
///
/// glibc starts every thread with all signals blocked and reads the global locale's
/// `LC_CTYPE` tables (`__ctype_init`) before it unblocks them; the tables `setlocale` loads
/// are malloc'ed. In the region, evicted, the new thread's access would raise a SIGBUS it
/// has blocked, which kills the process: they are allocated outside it (a few KiB).
#[no_mangle]
pub unsafe extern "C" fn setlocale(
    category: c_int,
    locale: *const libc::c_char,
) -> *mut libc::c_char {
    let real =
        next!(SETLOCALE: unsafe extern "C" fn(c_int, *const libc::c_char) -> *mut libc::c_char);
    let _outside = crate::thread_role::allocate_outside();
    // SAFETY: the caller's arguments.
    unsafe { real(category, locale) }
}

// ---- System calls retried once their buffers are in ------------------------------------

/// How many times a call that failed with EFAULT is retried: each time its buffers are
/// touched first, but reclaim may take a page back before the call reaches it.
const TRIES: usize = 8;

/// A buffer a system call reads from (`into` false) or writes into (`into` true).
#[derive(Clone, Copy)]
struct Buf {
    ptr: *const c_void,
    len: usize,
    into: bool,
}

/// How much of a call's buffers is touched before it is retried: from their start, for a
/// buffer larger than the limit could never be in whole. The kernel copies up to the first
/// page that is not there and returns what it did (a short read or write, which the caller
/// goes on from): only a call that copied nothing fails with EFAULT.
const TOUCH_WINDOW: usize = 256 << 10;

/// Touch the pages of `buf` that lie in the region, in this thread, up to `budget` bytes
/// (taken from it): a read, and for a buffer the kernel writes into a compare-exchange of a
/// byte with itself (a write that changes nothing, even under another thread's writes), so
/// that a page mapped read-only (the zero page, a write-protected clean page) is made
/// writable too. True if it had a page in the region.
fn touch(buf: Buf, budget: &mut usize) -> bool {
    let len = buf.len.min(*budget);
    *budget -= len;
    if len == 0 || !overlaps_region(buf.ptr, len) {
        return false;
    }
    let start = buf.ptr as usize;
    let end = start + len;
    let mut at = start;
    while at < end {
        if crate::heap::in_region(at as *const c_void) {
            // SAFETY: `at` is a byte of the caller's buffer in the region, mapped read-write
            // for the life of the process; an atomic access to it is sound whatever other
            // threads do, and touching it only serves its fault.
            let byte = unsafe { AtomicU8::from_ptr(at as *mut u8) };
            let seen = byte.load(Relaxed);
            if buf.into {
                // A locked compare-exchange writes even when it fails (x86), where an add of
                // zero may be compiled to a plain load.
                let _ = byte.compare_exchange(seen, seen, Relaxed, Relaxed);
            }
        }
        at = (at / PAGE + 1) * PAGE;
    }
    true
}

/// Calls its argument with each buffer of a system call.
type Visit<'a> = &'a mut dyn FnMut(Buf);

/// Run `call` (a libc system call wrapper's result) and, while it fails with EFAULT on a
/// buffer in the region, touch its buffers (`bufs` names them) and run it again.
fn retried(bufs: &dyn Fn(Visit), mut call: impl FnMut() -> isize) -> isize {
    let mut tries = 0;
    loop {
        let r = call();
        if r >= 0 || !on() || errno() != libc::EFAULT || tries == TRIES {
            return r;
        }
        tries += 1;
        let (mut any, mut budget) = (false, TOUCH_WINDOW);
        bufs(&mut |b| any |= touch(b, &mut budget));
        // A genuine EFAULT (a bad pointer outside the region) is the caller's.
        if !any {
            return r;
        }
    }
}

/// A copy of the `n` values at `p`, or None where they cannot be read (a bad pointer the
/// caller passed, which the kernel answered with EFAULT: it must not crash us instead). In
/// the region (whose memory is mapped for the life of the process) they are read as they
/// are, a page that is out brought back by this thread's own fault; elsewhere through
/// `process_vm_readv` on this process, which fails where a plain read would crash.
fn read_user<T: Copy>(p: *const T, n: usize) -> Option<Vec<T>> {
    let len = n.checked_mul(std::mem::size_of::<T>())?;
    if n == 0 {
        return Some(Vec::new());
    }
    let mut out: Vec<T> = Vec::with_capacity(n);
    let (start, end) = (p as usize, (p as usize).checked_add(len)?);
    if crate::heap::in_region(p.cast()) && crate::heap::in_region((end - 1) as *const c_void) {
        // SAFETY: the `len` bytes at `p` lie in the region, mapped read-write for the life
        // of the process; `out` has room for `n` values, which any bytes make (`T` is one
        // of the C structs iovec and msghdr, plain data).
        unsafe {
            std::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), n);
            out.set_len(n);
        }
        return Some(out);
    }
    let local = libc::iovec {
        iov_base: out.as_mut_ptr().cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: start as *mut c_void,
        iov_len: len,
    };
    // SAFETY: the kernel writes at most `len` bytes into `out`'s capacity and reads the
    // remote range itself, failing with EFAULT where it is not mapped.
    let copied = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    if copied != len as isize {
        return None;
    }
    // SAFETY: all `len` bytes were written, and any bytes make a `T` (above).
    unsafe { out.set_len(n) };
    Some(out)
}

/// The buffers of an iovec array (`iov`, `n` entries), itself perhaps in the region. An
/// array that cannot be read names none but itself.
fn iov_bufs(iov: *const libc::iovec, n: c_int, into: bool, f: Visit) {
    let n = n.max(0) as usize;
    f(Buf {
        ptr: iov.cast(),
        len: n.saturating_mul(std::mem::size_of::<libc::iovec>()),
        into: false,
    });
    for v in read_user(iov, n).unwrap_or_default() {
        f(Buf {
            ptr: v.iov_base,
            len: v.iov_len,
            into,
        });
    }
}

/// The buffers of a msghdr: the header, its name, its iovecs and its control data. A header
/// that cannot be read names none but itself.
fn msg_bufs(msg: *const libc::msghdr, into: bool, f: Visit) {
    f(Buf {
        ptr: msg.cast(),
        len: std::mem::size_of::<libc::msghdr>(),
        into,
    });
    let Some(&m) = read_user(msg, 1).as_deref().and_then(|m| m.first()) else {
        return;
    };
    f(Buf {
        ptr: m.msg_name,
        len: m.msg_namelen as usize,
        into,
    });
    f(Buf {
        ptr: m.msg_control,
        len: m.msg_controllen,
        into,
    });
    iov_bufs(m.msg_iov, m.msg_iovlen as c_int, into, f)
}

fn one(ptr: *const c_void, len: usize, into: bool) -> impl Fn(Visit) {
    move |f| f(Buf { ptr, len, into })
}

/// Whether `fd` is a regular file or a block device: a short transfer from one means its end,
/// or a fault on the buffer; never "no more for now", as from a pipe or a socket.
fn is_file(fd: c_int) -> bool {
    // SAFETY: `stat` is plain data, valid all zeros.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes one `stat` into the live local; a bad descriptor is an error.
    let r = unsafe { libc::fstat(fd, &mut st) };
    r == 0 && matches!(st.st_mode & libc::S_IFMT, libc::S_IFREG | libc::S_IFBLK)
}

/// A transfer of `buf` to or from `fd`: `call(done)` moves the bytes after the first `done`
/// (from `buf + done`, and a file as far on), retried while it fails with EFAULT on the
/// region (`retried`). A transfer with a regular file goes on where a page of `buf` in the
/// region cut it short: the kernel copies up to the first page that is out and returns what
/// it did, and a program may take a short count from a regular file for its end (bash
/// sourcing a script does). It stops at the end of the file (0), at an error (what was done
/// is the answer, as the kernel's would be), or where the rest of `buf` is not the region's.
fn transfer(fd: c_int, buf: Buf, call: impl Fn(usize) -> isize) -> isize {
    let part = |done: usize| {
        let rest = one(buf.ptr.wrapping_byte_add(done), buf.len - done, buf.into);
        retried(&rest, || call(done))
    };
    let cut_short =
        |done: usize| done < buf.len && crate::heap::in_region(buf.ptr.wrapping_byte_add(done));
    let first = part(0);
    if first <= 0 || !on() || !cut_short(first as usize) || !is_file(fd) {
        return first;
    }
    let mut done = first as usize;
    while cut_short(done) {
        let r = part(done);
        if r <= 0 {
            break;
        }
        done += r as usize;
    }
    done as isize
}

/// # Safety
/// As C's `read`.
#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: usize) -> isize {
    let real = next!(READ: unsafe extern "C" fn(c_int, *mut c_void, usize) -> isize);
    let whole = Buf {
        ptr: buf,
        len: n,
        into: true,
    };
    // SAFETY: the caller's arguments, the buffer from `done` on.
    transfer(fd, whole, |done| unsafe {
        real(fd, buf.wrapping_byte_add(done), n - done)
    })
}

/// # Safety
/// As C's `write`.
#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: usize) -> isize {
    let real = next!(WRITE: unsafe extern "C" fn(c_int, *const c_void, usize) -> isize);
    let whole = Buf {
        ptr: buf,
        len: n,
        into: false,
    };
    // SAFETY: the caller's arguments, the buffer from `done` on.
    transfer(fd, whole, |done| unsafe {
        real(fd, buf.wrapping_byte_add(done), n - done)
    })
}

/// # Safety
/// As C's `pread64`.
#[no_mangle]
pub unsafe extern "C" fn pread64(fd: c_int, buf: *mut c_void, n: usize, off: i64) -> isize {
    let real = next!(PREAD64: unsafe extern "C" fn(c_int, *mut c_void, usize, i64) -> isize);
    let whole = Buf {
        ptr: buf,
        len: n,
        into: true,
    };
    // SAFETY: the caller's arguments, the buffer and the file from `done` on.
    transfer(fd, whole, |done| unsafe {
        real(fd, buf.wrapping_byte_add(done), n - done, off + done as i64)
    })
}

/// # Safety
/// As C's `pread` (an alias of `pread64` on 64-bit glibc).
#[no_mangle]
pub unsafe extern "C" fn pread(fd: c_int, buf: *mut c_void, n: usize, off: i64) -> isize {
    // SAFETY: the caller's contract, passed on.
    unsafe { pread64(fd, buf, n, off) }
}

/// # Safety
/// As C's `pwrite64`.
#[no_mangle]
pub unsafe extern "C" fn pwrite64(fd: c_int, buf: *const c_void, n: usize, off: i64) -> isize {
    let real = next!(PWRITE64: unsafe extern "C" fn(c_int, *const c_void, usize, i64) -> isize);
    let whole = Buf {
        ptr: buf,
        len: n,
        into: false,
    };
    // SAFETY: the caller's arguments, the buffer and the file from `done` on.
    transfer(fd, whole, |done| unsafe {
        real(fd, buf.wrapping_byte_add(done), n - done, off + done as i64)
    })
}

/// # Safety
/// As C's `pwrite` (an alias of `pwrite64` on 64-bit glibc).
#[no_mangle]
pub unsafe extern "C" fn pwrite(fd: c_int, buf: *const c_void, n: usize, off: i64) -> isize {
    // SAFETY: the caller's contract, passed on.
    unsafe { pwrite64(fd, buf, n, off) }
}

/// # Safety
/// As C's `readv`.
#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const libc::iovec, n: c_int) -> isize {
    let real = next!(READV: unsafe extern "C" fn(c_int, *const libc::iovec, c_int) -> isize);
    // SAFETY: the caller's arguments.
    retried(&|f| iov_bufs(iov, n, true, f), || unsafe {
        real(fd, iov, n)
    })
}

/// # Safety
/// As C's `writev`.
#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const libc::iovec, n: c_int) -> isize {
    let real = next!(WRITEV: unsafe extern "C" fn(c_int, *const libc::iovec, c_int) -> isize);
    // SAFETY: the caller's arguments.
    retried(&|f| iov_bufs(iov, n, false, f), || unsafe {
        real(fd, iov, n)
    })
}

/// # Safety
/// As C's `recv`.
#[no_mangle]
pub unsafe extern "C" fn recv(fd: c_int, buf: *mut c_void, n: usize, flags: c_int) -> isize {
    let real = next!(RECV: unsafe extern "C" fn(c_int, *mut c_void, usize, c_int) -> isize);
    // SAFETY: the caller's arguments.
    retried(&one(buf, n, true), || unsafe { real(fd, buf, n, flags) })
}

/// # Safety
/// As C's `recvfrom`.
#[no_mangle]
pub unsafe extern "C" fn recvfrom(
    fd: c_int,
    buf: *mut c_void,
    n: usize,
    flags: c_int,
    addr: *mut libc::sockaddr,
    addr_len: *mut libc::socklen_t,
) -> isize {
    let real = next!(RECVFROM: unsafe extern "C" fn(c_int, *mut c_void, usize, c_int, *mut libc::sockaddr, *mut libc::socklen_t) -> isize);
    let bufs = |f: Visit| {
        f(Buf {
            ptr: buf,
            len: n,
            into: true,
        });
        f(Buf {
            ptr: addr_len.cast(),
            len: std::mem::size_of::<libc::socklen_t>(),
            into: true,
        });
        f(Buf {
            ptr: addr.cast(),
            len: std::mem::size_of::<libc::sockaddr_storage>(),
            into: true,
        })
    };
    // SAFETY: the caller's arguments.
    retried(&bufs, || unsafe { real(fd, buf, n, flags, addr, addr_len) })
}

/// # Safety
/// As C's `send`.
#[no_mangle]
pub unsafe extern "C" fn send(fd: c_int, buf: *const c_void, n: usize, flags: c_int) -> isize {
    let real = next!(SEND: unsafe extern "C" fn(c_int, *const c_void, usize, c_int) -> isize);
    // SAFETY: the caller's arguments.
    retried(&one(buf, n, false), || unsafe { real(fd, buf, n, flags) })
}

/// # Safety
/// As C's `sendto`.
#[no_mangle]
pub unsafe extern "C" fn sendto(
    fd: c_int,
    buf: *const c_void,
    n: usize,
    flags: c_int,
    addr: *const libc::sockaddr,
    addr_len: libc::socklen_t,
) -> isize {
    let real = next!(SENDTO: unsafe extern "C" fn(c_int, *const c_void, usize, c_int, *const libc::sockaddr, libc::socklen_t) -> isize);
    let bufs = |f: Visit| {
        f(Buf {
            ptr: buf,
            len: n,
            into: false,
        });
        f(Buf {
            ptr: addr.cast(),
            len: addr_len as usize,
            into: false,
        })
    };
    // SAFETY: the caller's arguments.
    retried(&bufs, || unsafe { real(fd, buf, n, flags, addr, addr_len) })
}

/// # Safety
/// As C's `recvmsg`.
#[no_mangle]
pub unsafe extern "C" fn recvmsg(fd: c_int, msg: *mut libc::msghdr, flags: c_int) -> isize {
    let real = next!(RECVMSG: unsafe extern "C" fn(c_int, *mut libc::msghdr, c_int) -> isize);
    // SAFETY: the caller's arguments.
    retried(&|f| msg_bufs(msg, true, f), || unsafe {
        real(fd, msg, flags)
    })
}

/// # Safety
/// As C's `sendmsg`.
#[no_mangle]
pub unsafe extern "C" fn sendmsg(fd: c_int, msg: *const libc::msghdr, flags: c_int) -> isize {
    let real = next!(SENDMSG: unsafe extern "C" fn(c_int, *const libc::msghdr, c_int) -> isize);
    // SAFETY: the caller's arguments.
    retried(&|f| msg_bufs(msg, false, f), || unsafe {
        real(fd, msg, flags)
    })
}
