//! In-thread faults. A userfaultfd made with `UFFD_FEATURE_SIGBUS` queues no event for a
//! fault on its range: the kernel raises SIGBUS (`BUS_ADRERR`, `si_addr` the faulting address)
//! in the faulting thread instead, which then serves its own fault and retries the access.
//! That spares the two wake-ups of a fault served by another thread (the handler's, and the
//! faulting thread's once served), most of a fault's cost where idle CPUs halt (DESIGN.md
//! section 6).
//! A fault the kernel takes on the program's behalf (a system call's buffer) is not served:
//! the system call fails with EFAULT.
//!
//! This module owns the process's SIGBUS handler: [`install`] puts it in place once, with the
//! one function that serves faults, and every SIGBUS that function declines (not a userfault,
//! or an address it does not serve) goes to the handler that was there before, as if ours
//! were not there.

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::io;
use std::sync::atomic::{AtomicPtr, Ordering::AcqRel, Ordering::Acquire};
use std::sync::OnceLock;

/// A fault on a page of a userfaultfd range with `UFFD_FEATURE_SIGBUS`, as the faulting thread
/// sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// The faulting address.
    pub addr: usize,
    /// The access was a write.
    pub write: bool,
    /// The page was present: a write-protect fault (a missing page is not present).
    pub present: bool,
}

/// Serves a fault in the faulting thread, from the SIGBUS handler: true if it was one of its
/// own (served, or found served already: the access is retried), false to pass the signal
/// on. It runs with every signal blocked, on the faulting thread's stack, and may be
/// interrupting any code that touched the range: it must never touch the range itself (a
/// fault there would kill the process), nor take a lock that code could hold.
pub type ServeFn = fn(Fault) -> bool;

/// What `install` put in place: the function that serves.
struct Installed {
    serve: ServeFn,
}

static INSTALLED: OnceLock<Installed> = OnceLock::new();

thread_local! {
    /// This thread is serving a fault (`serving`).
    static SERVING: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread is inside the SIGBUS handler, serving a fault: what it allocates then
/// must not come from the memory it serves (a preload's malloc asks, for the allocations libc
/// makes on its own, such as a thread-local destructor's record).
pub fn serving() -> bool {
    SERVING.with(Cell::get)
}

/// The action a SIGBUS we do not serve goes to: the one in place before ours, or the one the
/// program set since (`set_passed_on`). Leaked boxes, swapped whole, so that the handler
/// reads one consistently without a lock: a program sets its SIGBUS action a few times at
/// most.
static PASSED_ON: AtomicPtr<libc::sigaction> = AtomicPtr::new(std::ptr::null_mut());

/// The action a SIGBUS we do not serve goes to (SIG_DFL before `install`).
pub fn passed_on() -> libc::sigaction {
    let p = PASSED_ON.load(Acquire);
    if p.is_null() {
        // SAFETY: an all-zero sigaction is SIG_DFL with no flags and an empty mask.
        return unsafe { std::mem::zeroed() };
    }
    // SAFETY: a non-null `PASSED_ON` is a leaked box, never freed.
    unsafe { *p }
}

/// Make `action` the one a SIGBUS we do not serve goes to, in place of ours: for a program
/// that sets its own SIGBUS action while ours is installed (a preload's `sigaction`). Returns
/// the one it replaces.
pub fn set_passed_on(action: libc::sigaction) -> libc::sigaction {
    let new = Box::into_raw(Box::new(action));
    let old = PASSED_ON.swap(new, AcqRel);
    if old.is_null() {
        // SAFETY: as in `passed_on`.
        return unsafe { std::mem::zeroed() };
    }
    // SAFETY: a non-null `PASSED_ON` is a leaked box, never freed: the handler may be
    // reading it now.
    unsafe { *old }
}

/// Whether this platform tells a write fault from a read one in the signal's context (the
/// page-fault error code): x86-64 only. Elsewhere in-thread faults are not offered.
pub const SUPPORTED: bool = cfg!(all(target_arch = "x86_64", target_os = "linux"));

/// Put the SIGBUS handler in place, serving with `serve`. Once per process: a second call
/// with the same function does nothing, with another fails. Fails where not [`SUPPORTED`].
pub fn install(serve: ServeFn) -> io::Result<()> {
    if !SUPPORTED {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "in-thread faults need x86-64 Linux",
        ));
    }
    let mut result = Ok(());
    let installed = INSTALLED.get_or_init(|| {
        // SAFETY: an all-zero sigaction is a valid value (SIG_DFL, no flags, empty mask).
        let mut previous: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: as above; then filled in field by field.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction =
            on_sigbus as extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) as usize;
        // SA_SIGINFO for the address and the context; SA_RESTART so that a system call the
        // fault interrupted goes on. No SA_ONSTACK: serving a fault takes more stack than an
        // alternate signal stack usually has (Rust's is a few pages), and a fault is never a
        // stack overflow.
        action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        // SAFETY: `sa_mask` is a valid sigset_t to fill. Every signal is blocked while a fault
        // is served: a handler of the program's that touched the range then would fault with
        // SIGBUS blocked, which the kernel turns into the process's death.
        unsafe { libc::sigfillset(&mut action.sa_mask) };
        // SAFETY: both pointers are to valid sigaction values; SIGBUS may be caught.
        if unsafe { libc::sigaction(libc::SIGBUS, &action, &mut previous) } != 0 {
            result = Err(io::Error::last_os_error());
        }
        set_passed_on(previous);
        Installed { serve }
    });
    result?;
    if !std::ptr::fn_addr_eq(installed.serve, serve) {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "another function serves in-thread faults",
        ));
    }
    Ok(())
}

/// The SIGBUS handler: a userfault is served in this thread; anything else goes on.
extern "C" fn on_sigbus(sig: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    // SAFETY: `__errno_location` returns this thread's errno, always valid. Kept across the
    // serve: the interrupted code may be about to read it.
    let errno = unsafe { *libc::__errno_location() };
    let Some(installed) = INSTALLED.get() else {
        return pass_on(sig, info, context);
    };
    // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo; a SIGBUS one carries an
    // address (`si_addr`).
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    if code == libc::BUS_ADRERR {
        if let Some((write, present)) = error_code(context) {
            SERVING.with(|s| s.set(true));
            let served = (installed.serve)(Fault {
                addr,
                write,
                present,
            });
            SERVING.with(|s| s.set(false));
            if served {
                // SAFETY: as above.
                unsafe { *libc::__errno_location() = errno };
                return;
            }
        }
    }
    pass_on(sig, info, context)
}

/// Whether the fault was a write, and on a present page, from the x86 page-fault error code
/// the kernel saves in the context (bit 1: write, bit 0: protection violation).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn error_code(context: *mut c_void) -> Option<(bool, bool)> {
    if context.is_null() {
        return None;
    }
    // SAFETY: with SA_SIGINFO the third argument is the interrupted thread's ucontext_t,
    // valid for the handler's duration; only read.
    let err = unsafe { (*(context as *const libc::ucontext_t)).uc_mcontext.gregs }
        [libc::REG_ERR as usize] as u64;
    Some((err & 2 != 0, err & 1 != 0))
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn error_code(_context: *mut c_void) -> Option<(bool, bool)> {
    None
}

/// Give the signal to the action that was in place before ours (`passed_on`). The default
/// action (or ignoring it: a fault cannot be ignored) is taken by restoring it and returning:
/// the access faults again and the kernel acts on its own.
fn pass_on(sig: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    let previous = passed_on();
    let handler = previous.sa_sigaction;
    // SAFETY: the kernel passes a valid siginfo. A code of 0 or below is a signal some
    // process sent (kill, tgkill, sigqueue), which no retried access brings back.
    let sent = unsafe { (*info).si_code } <= 0;
    if handler == libc::SIG_IGN && sent {
        return;
    }
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        // SAFETY: an all-zero sigaction is SIG_DFL with no flags; SIGBUS may be reset. A sent
        // signal is raised again: blocked until this handler returns, it then takes the
        // default action.
        unsafe {
            let dfl: libc::sigaction = std::mem::zeroed();
            libc::sigaction(libc::SIGBUS, &dfl, std::ptr::null_mut());
            if sent {
                libc::raise(sig);
            }
        }
        return;
    }
    if previous.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous action was installed with SA_SIGINFO, so `sa_sigaction` is a
        // three-argument handler; it gets what the kernel gave us.
        unsafe {
            let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
                std::mem::transmute(handler);
            f(sig, info, context);
        }
    } else {
        // SAFETY: without SA_SIGINFO `sa_sigaction` is a one-argument `sa_handler`.
        unsafe {
            let f: extern "C" fn(c_int) = std::mem::transmute(handler);
            f(sig);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never(_: Fault) -> bool {
        false
    }

    /// Not `never` (a body of its own, so that the optimiser does not merge the two).
    fn other(f: Fault) -> bool {
        f.addr == 1
    }

    #[test]
    fn install_is_once_per_process() {
        if !SUPPORTED {
            assert!(install(never).is_err());
            return;
        }
        install(never).unwrap();
        install(never).unwrap();
        assert_eq!(
            install(other).unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
    }
}
