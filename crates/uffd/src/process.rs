//! Acting on a process's memory, and waiting for termination signals: system calls that
//! neither std nor rustix wraps.
//!
//! - [`ProcessMemory`]: reclaim tries whether a folio compresses where it is, before it moves it
//!   out (a copy by the kernel, so the program's concurrent writes are no data race, and a
//!   missing page is an error rather than a userfault to wait for).
//! - [`populate_write`]: pages a fork left shared with a child made this process's own again,
//!   so reclaim can move them out.
//! - [`process_madvise`]: the benchmark's memory.high stand-in pages out chunks of a worker
//!   process (cgroup v1 has no memory.high). Only advice that keeps the memory's contents is
//!   offered, so a call cannot change what any process reads, whatever the addresses.
//! - [`return_large_blocks_when_freed`]: uzswap's own large buffers go back to the kernel
//!   when freed, instead of staying in malloc's arenas uncounted.
//! - [`wait_with_peak_rss`]: a child's exit status and the most memory it held
//!   (`wait4`'s resource usage), for `uzswap run` of a program held from outside.
//! - [`block_termination_signals`] / [`wait_termination_signal`]: a thread that waits for
//!   SIGINT/SIGTERM synchronously, so an interrupted benchmark can still restore the kernel
//!   settings it changed (no async-signal-safety concerns: the thread runs ordinary code).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// A process's memory read through `/proc/PID/mem` (this process's, or a program's served
/// from here): a copy by the kernel, so memory other threads write meanwhile is read without
/// a data race (the copy may mix old and new bytes), and an address that is not mapped is an error, not a crash. A page of a range
/// registered with a userfaultfd that is not present makes the read fail (`EIO`) rather
/// than wait for the userfault: the kernel reads another address space's view of memory
/// with faults that cannot be retried, and `handle_userfault` answers those with SIGBUS. So
/// a reader that holds what a fault handler would wait for cannot deadlock with it. (A
/// page in system swap is read in.)
#[derive(Debug)]
pub struct ProcessMemory(std::fs::File);

impl ProcessMemory {
    /// Open `/proc/self/mem` for reading.
    pub fn own() -> io::Result<ProcessMemory> {
        Self::open("/proc/self/mem")
    }

    /// Open process `pid`'s memory for reading (it must be ours to trace: a child).
    pub fn of(pid: libc::pid_t) -> io::Result<ProcessMemory> {
        Self::open(&format!("/proc/{pid}/mem"))
    }

    fn open(path: &str) -> io::Result<ProcessMemory> {
        std::fs::File::open(path)
            .map(crate::descriptors::out_of_reach)
            .map(ProcessMemory)
    }

    /// Copy the bytes at `addr` into `buf`; returns how many were copied, fewer than asked
    /// when the read stopped at a page it could not read.
    pub fn read(&self, addr: usize, buf: &mut [u8]) -> io::Result<usize> {
        use std::os::unix::fs::FileExt;
        self.0.read_at(buf, addr as u64)
    }
}

/// Wait for `child` to end: its exit status, and its peak resident memory in bytes
/// (`wait4`'s `ru_maxrss`).
pub fn wait_with_peak_rss(
    child: std::process::Child,
) -> io::Result<(std::process::ExitStatus, u64)> {
    use std::os::unix::process::ExitStatusExt;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is a valid value of the plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: wait4 writes the status and the usage into the two live locals, and
        // reaps `pid`, our child, whose `Child` is consumed here (nothing waits for it again).
        let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if rc == pid {
            break;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    drop(child);
    Ok((
        std::process::ExitStatus::from_raw(status),
        usage.ru_maxrss as u64 * 1024,
    ))
}

/// Advice that leaves the contents of the memory unchanged (see `madvise(2)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advice {
    /// Reclaim the pages now: write them to swap (or zswap) and drop them from memory.
    PageOut,
    /// Move the pages to the inactive list: reclaim takes them first.
    Cold,
    /// Read the pages in ahead of use.
    WillNeed,
}

impl Advice {
    fn raw(self) -> libc::c_int {
        match self {
            Advice::PageOut => libc::MADV_PAGEOUT,
            Advice::Cold => libc::MADV_COLD,
            Advice::WillNeed => libc::MADV_WILLNEED,
        }
    }
}

/// Make the pages of `addr..addr + len` in this process its own, as a write would, without
/// writing a byte (`MADV_POPULATE_WRITE`): a page shared copy on write with a forked child is
/// copied, or taken back where the child has let it go (exited, or exec'd), so that
/// `UFFDIO_MOVE`, which moves only pages a process holds alone, can move it. A missing page of
/// a range registered with a userfaultfd faults as a write would and waits for its handler:
/// the caller must hold nothing a handler may wait for. A range not mapped, or not writable,
/// is an error (never a signal).
pub fn populate_write(addr: usize, len: usize) -> io::Result<()> {
    // SAFETY: MADV_POPULATE_WRITE changes page tables only: every byte of the range reads as
    // it did (a page shared copy on write is read-only in both processes, so no write lands
    // in it while the kernel copies it, and this process's table points at the copy only
    // once it is whole), and nothing is unmapped. Any address is allowed: an unmapped one is
    // ENOMEM.
    let r = unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_POPULATE_WRITE) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The most ranges one call takes (the kernel's `UIO_MAXIOV`).
pub const MAX_RANGES: usize = 1024;

/// Apply `advice` to the ranges `(address, length)` of the process behind `pidfd` (from
/// `pidfd_open`). Returns the bytes advised, which is less than the total when the kernel
/// stopped early (a range not mapped in the target stops the walk with an error instead).
pub fn process_madvise(
    pidfd: BorrowedFd<'_>,
    ranges: &[(usize, usize)],
    advice: Advice,
) -> io::Result<usize> {
    if ranges.is_empty() {
        return Ok(0);
    }
    if ranges.len() > MAX_RANGES {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: every `Advice` keeps the memory's contents (page-out, deactivate, read-ahead),
    // so no process, this one included, can observe a changed byte, whatever the addresses.
    unsafe { process_madvise_raw(pidfd, ranges, advice.raw()) }
}

/// `process_madvise(2)` with any advice, for at most [`MAX_RANGES`] ranges; returns the bytes
/// advised.
///
/// # Safety
/// The advice applied to the ranges must not break what any Rust code in the target relies
/// on (for a destructive advice such as `MADV_DONTNEED` on this process: no reference into
/// the ranges, nothing Rust relies on inside them).
pub(crate) unsafe fn process_madvise_raw(
    pidfd: BorrowedFd<'_>,
    ranges: &[(usize, usize)],
    advice: libc::c_int,
) -> io::Result<usize> {
    let iov: Vec<libc::iovec> = ranges
        .iter()
        .map(|&(addr, len)| libc::iovec {
            iov_base: addr as *mut libc::c_void,
            iov_len: len,
        })
        .collect();
    // SAFETY: `iov` is a live, initialised array of `iov.len()` iovecs that the kernel only
    // reads during the call; the addresses inside are not dereferenced here, and the caller
    // vouches for what the advice does to the memory they name. The fd is borrowed, hence
    // open for the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_process_madvise,
            pidfd.as_raw_fd(),
            iov.as_ptr(),
            iov.len(),
            advice,
            0u32,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

fn termination_set() -> io::Result<libc::sigset_t> {
    // SAFETY: sigset_t is a plain bit array for which all-zero is a valid value; sigemptyset
    // and sigaddset then only write inside the set they are given a pointer to, which lives
    // on this stack frame for the duration of the calls.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        if libc::sigemptyset(&mut set) != 0
            || libc::sigaddset(&mut set, libc::SIGINT) != 0
            || libc::sigaddset(&mut set, libc::SIGTERM) != 0
        {
            return Err(io::Error::last_os_error());
        }
        Ok(set)
    }
}

/// The size from which glibc's malloc maps a block of its own, set by
/// [`return_large_blocks_when_freed`].
pub const LARGE_BLOCK_BYTES: usize = 128 << 10;

/// Have glibc's malloc give every block of [`LARGE_BLOCK_BYTES`] or more back to the kernel
/// when it is freed. Its default starts there but raises the threshold to each such block
/// freed, so later large blocks come from its arenas, where memory freed stays resident
/// (uzswap's transient buffers of a folio or a batch, and a Redis client's, held ~20 MiB
/// uncounted over a region's limit). A fixed threshold keeps them out of the arenas. Only
/// what glibc's malloc serves is affected: a program's own allocator is left as it is.
pub fn return_large_blocks_when_freed() -> bool {
    // SAFETY: mallopt only changes the allocator's parameters, under its own lock; any
    // value is valid for M_MMAP_THRESHOLD up to HEAP_MAX (32 MiB on 64-bit).
    unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, LARGE_BLOCK_BYTES as i32) == 1 }
}

/// Block SIGINT and SIGTERM in the calling thread, and so in every thread it starts later.
/// Call it early in `main`, before starting threads, then have one thread call
/// [`wait_termination_signal`]. Child processes started with `std::process::Command` get an
/// empty signal mask again (std resets it), so they still die of Ctrl-C.
pub fn block_termination_signals() -> io::Result<()> {
    let set = termination_set()?;
    // SAFETY: `set` is an initialised sigset_t on this stack frame; a null old-set pointer is
    // allowed. Changing this thread's signal mask cannot violate memory safety.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok(())
}

/// Wait until SIGINT or SIGTERM is pending and take it; returns the signal number. The signals
/// must be blocked in every thread (see [`block_termination_signals`]), or one of them may be
/// delivered elsewhere with the default action (exit) instead.
pub fn wait_termination_signal() -> io::Result<i32> {
    let set = termination_set()?;
    let mut sig: libc::c_int = 0;
    // SAFETY: both pointers point at initialised locals that outlive the call; sigwait only
    // writes the signal number into `sig`.
    let r = unsafe { libc::sigwait(&set, &mut sig) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok(sig)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn reads_its_own_memory_and_refuses_an_unmapped_address() {
        let mem = ProcessMemory::own().unwrap();
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let mut buf = vec![0u8; data.len()];
        assert_eq!(
            mem.read(data.as_ptr() as usize, &mut buf).unwrap(),
            data.len()
        );
        assert_eq!(buf, data);
        // The first page is never mapped.
        assert!(mem.read(16, &mut buf[..8]).is_err());
    }

    #[test]
    fn empty_and_oversized_range_lists() {
        let me = std::fs::File::open("/proc/self/stat").unwrap();
        // An empty list never reaches the kernel; too many ranges are refused before it.
        assert_eq!(process_madvise(me.as_fd(), &[], Advice::Cold).unwrap(), 0);
        let many = vec![(0usize, 4096usize); MAX_RANGES + 1];
        let e = process_madvise(me.as_fd(), &many, Advice::Cold).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
    }

    #[test]
    fn a_non_pidfd_is_refused() {
        let f = std::fs::File::open("/proc/self/stat").unwrap();
        let buf = vec![1u8; 8192];
        let e =
            process_madvise(f.as_fd(), &[(buf.as_ptr() as usize, 4096)], Advice::Cold).unwrap_err();
        // EBADF for a non-pidfd (ENOSYS on kernels before 5.10).
        assert!(
            matches!(e.raw_os_error(), Some(libc::EBADF) | Some(libc::ENOSYS)),
            "{e}"
        );
        assert!(buf.iter().all(|&b| b == 1));
    }
}
