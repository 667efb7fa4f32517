//! uzswap's descriptors out of the program's reach.
//!
//! Under `uzswap run` a program shares its descriptor table with uzswap: a number the kernel
//! gave uzswap is one the program may close (a daemon's `close_range(3, ~0)`) or replace (a
//! shell's `exec 5>log`, `dup2(file, 5)`), and then the userfaultfd or the swap file under
//! its heap is gone, or is the program's own file. So every long-lived descriptor of uzswap's
//! is moved to the top of the numbers a program counts on ([`out_of_reach`]: from
//! `min(RLIMIT_NOFILE, 1024) - 64` up, where the kernel's lowest-free rule reaches only a
//! program holding that many) and recorded; the preload's `close`, `close_range`,
//! `closefrom`, `dup2` and `dup3` ask [`is_ours`] and leave those alone.
//!
//! A record names the file too (device and inode): a number uzswap closed and the program
//! got again is the program's, not ours (but for anonymous inodes, which eventfds and
//! userfaultfds share: uzswap keeps those for the life of the process). Every check is a load of atomics and at most one
//! `fstat`, safe in a signal handler (`close` is async-signal-safe).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{
    AtomicI32, AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
};

/// How many descriptors are recorded at most: uzswap holds about a dozen.
pub const MAX_RECORDED: usize = 64;
/// How far below the top of the numbers counted on uzswap's descriptors start.
const BELOW_TOP: RawFd = 64;

/// One recorded descriptor: its number (`FREE`, `CLAIMED` while being written) and its file.
struct Slot {
    fd: AtomicI32,
    dev: AtomicU64,
    ino: AtomicU64,
}

const FREE: RawFd = -1;
const CLAIMED: RawFd = -2;

static RECORDED: [Slot; MAX_RECORDED] = [const {
    Slot {
        fd: AtomicI32::new(FREE),
        dev: AtomicU64::new(0),
        ino: AtomicU64::new(0),
    }
}; MAX_RECORDED];

/// The lowest number recorded (`RawFd::MAX` when none): most calls stop at it.
static LOWEST: AtomicI32 = AtomicI32::new(RawFd::MAX);

/// The first number of uzswap's descriptors: 64 below the soft `RLIMIT_NOFILE`, counted at
/// most to 1024 (a larger limit would grow the descriptor table to match), or 3 under a
/// limit too small to leave room.
fn first_number() -> RawFd {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` into the live local it is given.
    let r = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    let top = if r == 0 {
        limit.rlim_cur.min(1024)
    } else {
        1024
    } as RawFd;
    (top - BELOW_TOP).max(3)
}

/// The file a descriptor is open on, or None if it is not open.
fn file_of(fd: RawFd) -> Option<(u64, u64)> {
    // SAFETY: `stat` is plain data, valid all zeros.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes one `stat` into the live local; a closed number is EBADF.
    let r = unsafe { libc::fstat(fd, &mut st) };
    (r == 0).then_some((st.st_dev, st.st_ino))
}

/// Whether `fd` is open on the file `slot` recorded.
fn recorded_as(slot: &Slot, fd: RawFd) -> bool {
    file_of(fd) == Some((slot.dev.load(Relaxed), slot.ino.load(Relaxed)))
}

/// Record `fd` as uzswap's; silently not when every slot is taken (it still works, only
/// within the program's reach).
fn record(fd: RawFd) {
    let Some((dev, ino)) = file_of(fd) else {
        return;
    };
    for slot in &RECORDED {
        // A free slot, or one whose descriptor uzswap has closed since.
        let was = slot.fd.load(Acquire);
        let reusable = was == FREE || (was >= 0 && !recorded_as(slot, was));
        if reusable
            && slot
                .fd
                .compare_exchange(was, CLAIMED, Acquire, Relaxed)
                .is_ok()
        {
            slot.dev.store(dev, Relaxed);
            slot.ino.store(ino, Relaxed);
            slot.fd.store(fd, Release);
            LOWEST.fetch_min(fd, Relaxed);
            return;
        }
    }
}

/// Grow the process's descriptor table to hold uzswap's numbers, while it has one thread: the
/// kernel grows the table when a descriptor first lands past its end, and with other threads
/// sharing the table it waits for an RCU grace period first (fs/file.c, `expand_fdtable`):
/// 7-22 ms on this VM, paid by every process `uzswap run` starts. Grown before any thread
/// exists, the table is simply replaced. Call it first thing in a process.
pub fn grow_table() {
    let Ok(root) = std::fs::File::open("/") else {
        return;
    };
    // SAFETY: F_DUPFD_CLOEXEC on a live descriptor makes a new one at the lowest free number
    // at or above the argument, or fails; it reads and writes none of our memory.
    let high = unsafe { libc::fcntl(root.as_raw_fd(), libc::F_DUPFD_CLOEXEC, first_number()) };
    if high >= 0 {
        // SAFETY: the kernel just made `high`; nothing else owns it, and it closes here.
        drop(unsafe { OwnedFd::from_raw_fd(high) });
    }
}

/// Move a descriptor uzswap keeps to a number at the top of the program's ones, close-on-exec,
/// and record it. Where no such number is free, it stays where it is, recorded.
pub fn out_of_reach<T: From<OwnedFd> + Into<OwnedFd>>(file: T) -> T {
    let fd: OwnedFd = file.into();
    // SAFETY: F_DUPFD_CLOEXEC on a live descriptor makes a new one at the lowest free number
    // at or above the argument, or fails; it reads and writes none of our memory.
    let high = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, first_number()) };
    let fd = if high >= 0 {
        // SAFETY: the kernel just made `high`; nothing else owns it. `fd` closes on drop.
        unsafe { OwnedFd::from_raw_fd(high) }
    } else {
        fd
    };
    record(fd.as_raw_fd());
    T::from(fd)
}

/// Whether `fd` is one of uzswap's descriptors (recorded, and still open on the same file).
pub fn is_ours(fd: RawFd) -> bool {
    if fd < LOWEST.load(Relaxed) {
        return false;
    }
    RECORDED
        .iter()
        .any(|slot| slot.fd.load(Acquire) == fd && recorded_as(slot, fd))
}

/// uzswap's descriptors in `first..=last`, ascending, into `out`; how many there are.
pub fn ours_within(first: RawFd, last: RawFd, out: &mut [RawFd; MAX_RECORDED]) -> usize {
    let mut n = 0;
    if last < LOWEST.load(Relaxed) {
        return 0;
    }
    for slot in &RECORDED {
        let fd = slot.fd.load(Acquire);
        if fd >= first && fd <= last && is_ours(fd) {
            out[n] = fd;
            n += 1;
        }
    }
    out[..n].sort_unstable();
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_descriptor_moved_out_of_reach_is_high_close_on_exec_and_ours() {
        let file = std::fs::File::open("/proc/self/stat").unwrap();
        let low = file.as_raw_fd();
        let file = out_of_reach(file);
        let fd = file.as_raw_fd();
        assert!(fd >= first_number() && fd > low, "{fd}");
        assert!(is_ours(fd));
        assert!(!is_ours(low), "the old number is closed");
        // SAFETY: F_GETFD reads the flags of a live descriptor.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        assert_eq!(flags & libc::FD_CLOEXEC, libc::FD_CLOEXEC);
        let mut found = [0; MAX_RECORDED];
        let n = ours_within(0, RawFd::MAX, &mut found);
        assert!(found[..n].contains(&fd));
        assert!(found[..n].is_sorted());
        let n = ours_within(fd + 1, RawFd::MAX, &mut found);
        assert!(!found[..n].contains(&fd));
    }

    #[test]
    fn a_number_closed_and_given_to_another_file_is_no_longer_ours() {
        // Recorded at a number far above the first one, which `out_of_reach` in the tests
        // running beside this one (lowest free number from the first) never reaches: the
        // number freed below is this test's alone.
        let file = std::fs::File::open("/proc/self/stat").unwrap();
        // SAFETY: F_DUPFD_CLOEXEC on a live descriptor makes a new one or fails.
        let fd =
            unsafe { libc::fcntl(file.as_raw_fd(), libc::F_DUPFD_CLOEXEC, first_number() + 48) };
        assert!(fd >= first_number() + 48, "{fd}");
        // SAFETY: the kernel just made `fd`; nothing else owns it.
        let file = unsafe { OwnedFd::from_raw_fd(fd) };
        record(fd);
        assert!(is_ours(fd));
        drop(file);
        assert!(!is_ours(fd), "closed");
        let other = std::fs::File::open("/proc/self/status").unwrap();
        // SAFETY: dup2 onto the number just freed, from a live descriptor.
        assert_eq!(unsafe { libc::dup2(other.as_raw_fd(), fd) }, fd);
        assert!(!is_ours(fd), "the number is another file's now");
        // SAFETY: `fd` is the dup made above, owned by nothing else.
        drop(unsafe { OwnedFd::from_raw_fd(fd) });
    }
}
