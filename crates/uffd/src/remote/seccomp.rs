//! The program's system calls that make, move and drop mappings, stopped for uzswap to see
//! (seccomp user notification): uzswap places a new anonymous mapping itself (where it can
//! be held, registered before the program has its address), or lets the call run.
//!
//! The filter is installed at the program's exec stop and applies to every thread it makes
//! (the parasite's calls excepted: the filter lets through any call made from the
//! parasite's page, so that the calls uzswap makes on the parasite to serve a notification
//! are never notified themselves).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

/// The most calls a filter notifies (it must fit in the parasite's page beside the rest).
pub(super) const MAX_NOTIFIED: usize = 64;

/// `AUDIT_ARCH_X86_64` (linux/audit.h).
const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;

// Offsets in `struct seccomp_data`.
const NR: u32 = 0;
const ARCH: u32 = 4;
const IP_LOW: u32 = 8;
const IP_HIGH: u32 = 12;

fn stmt(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump_eq(k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    }
}

/// The filter: a call in `notified` from outside `parasite_page` is notified, any other
/// call allowed. As bytes, to be copied into the program.
pub(super) fn filter(notified: &[libc::c_long], parasite_page: u64) -> Vec<u8> {
    let load = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    let and = libc::BPF_ALU | libc::BPF_AND | libc::BPF_K;
    let ret = libc::BPF_RET | libc::BPF_K;
    let n = notified.len() as u8;
    // Layout: 0-7 as below, 8.. one jump a notified call, then 8+n allow, 9+n notify. A
    // jump's offsets count from the next instruction.
    let mut prog = vec![
        /* 0 */ stmt(load, ARCH),
        /* 1 */ jump_eq(AUDIT_ARCH_X86_64, 0, 6 + n), // another ABI: allowed
        /* 2 */ stmt(load, IP_HIGH),
        /* 3 */ jump_eq((parasite_page >> 32) as u32, 0, 3),
        /* 4 */ stmt(load, IP_LOW),
        /* 5 */ stmt(and, !(crate::PAGE_SIZE as u32 - 1)),
        /* 6 */ jump_eq(parasite_page as u32, 1 + n, 0), // the parasite's: allowed
        /* 7 */ stmt(load, NR),
    ];
    for (i, &nr) in notified.iter().enumerate() {
        prog.push(jump_eq(nr as u32, n - i as u8, 0));
    }
    prog.push(stmt(ret, libc::SECCOMP_RET_ALLOW));
    prog.push(stmt(ret, libc::SECCOMP_RET_USER_NOTIF));
    prog.iter()
        .flat_map(|f| {
            let mut b = f.code.to_ne_bytes().to_vec();
            b.extend([f.jt, f.jf]);
            b.extend(f.k.to_ne_bytes());
            b
        })
        .collect()
}

/// A system call of the program's, stopped until it is answered.
#[derive(Debug, Clone, Copy)]
pub struct SyscallNotice {
    /// The notification's id, for the answer.
    pub id: u64,
    /// The thread that made the call.
    pub tid: u32,
    /// Its process (the filter stays with the program's children): 0 if it went away
    /// before it could be told.
    pub pid: i32,
    /// The call.
    pub nr: i64,
    /// Its arguments.
    pub args: [u64; 6],
}

/// The answer to a notified call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Run the call as the program made it.
    Continue,
    /// The call returns this value, without running.
    Return(i64),
    /// The call fails with this errno, without running.
    Fail(i32),
}

/// The program's notified calls.
#[derive(Debug)]
pub struct SyscallListener {
    fd: OwnedFd,
}

impl SyscallListener {
    pub(super) fn new(fd: OwnedFd) -> Self {
        SyscallListener { fd }
    }

    /// Wait up to `timeout` for a call: false if none came.
    pub fn wait(&self, timeout: Duration) -> io::Result<bool> {
        let mut p = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(libc::c_int::MAX as u128) as libc::c_int;
        // SAFETY: poll on one live pollfd of ours.
        let rc = unsafe { libc::poll(&mut p, 1, ms) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        if p.revents & libc::POLLHUP != 0 {
            return Err(io::Error::other("the program ended"));
        }
        Ok(rc == 1)
    }

    /// The next call (blocks until one comes).
    pub fn recv(&self) -> io::Result<SyscallNotice> {
        // SAFETY: an all-zero seccomp_notif is valid (plain integers), and the kernel wants it
        // zeroed.
        let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: NOTIF_RECV writes one seccomp_notif into `n`.
        let rc = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV,
                &mut n as *mut libc::seccomp_notif,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(SyscallNotice {
            id: n.id,
            tid: n.pid,
            pid: self.process_of(n.id, n.pid),
            nr: n.data.nr as i64,
            args: n.data.args,
        })
    }

    /// The process of thread `tid`, which made notified call `id`: read from its status,
    /// then checked to be still the one waiting on `id` (a tid read after the thread went
    /// away could be another's).
    fn process_of(&self, id: u64, tid: u32) -> i32 {
        let status = std::fs::read_to_string(format!("/proc/{tid}/status")).unwrap_or_default();
        let pid = status
            .lines()
            .find_map(|l| l.strip_prefix("Tgid:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        let mut id = id;
        // SAFETY: NOTIF_ID_VALID reads one u64 from `id`.
        let valid = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
                &mut id as *mut u64,
            )
        };
        if valid == 0 {
            pid
        } else {
            0
        }
    }

    /// Keep answering `Continue` to every call, in a process of its own, until no process
    /// uses the filter any more: for the program's descendants that outlive this process
    /// (without an answer, their calls fail with `ENOSYS` once the listener closes). Returns
    /// at once: false if no process uses the filter now (nothing to keep).
    ///
    /// The keeper is a grandchild in a session of its own, reparented when its parent exits
    /// at once; it holds the listener alone (every other descriptor closed: a pipe of this
    /// process's left open would keep its reader waiting) and exits when the listener
    /// reports that the last user is gone (`POLLHUP`).
    pub fn continue_all_in_background(&self) -> io::Result<bool> {
        let fd = self.fd.as_raw_fd();
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll on one live pollfd of ours, without waiting.
        if unsafe { libc::poll(&mut p, 1, 0) } >= 0 && p.revents & libc::POLLHUP != 0 {
            return Ok(false);
        }
        // SAFETY: fork in a process with other threads: the child runs only the system calls
        // below (setsid, fork, close_range, poll, ioctl, _exit), all async-signal-safe, on
        // its own stack's memory; it allocates nothing, takes no lock and never returns.
        let child = unsafe { libc::fork() };
        if child < 0 {
            return Err(io::Error::last_os_error());
        }
        if child == 0 {
            // SAFETY: as above; `keep_continuing` never returns.
            unsafe { keep_continuing(fd) }
        }
        let mut status = 0;
        // SAFETY: waits for our own child (which exits at once), writing its status into a
        // live local.
        unsafe { libc::waitpid(child, &mut status, 0) };
        Ok(true)
    }

    /// Answer call `id`. A call whose thread went away meanwhile is not an error.
    pub fn answer(&self, id: u64, answer: Answer) -> io::Result<()> {
        let (val, error, flags) = match answer {
            Answer::Continue => (0, 0, libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32),
            Answer::Return(v) => (v, 0, 0),
            Answer::Fail(e) => (0, -e, 0),
        };
        let mut resp = libc::seccomp_notif_resp {
            id,
            val,
            error,
            flags,
        };
        // SAFETY: NOTIF_SEND reads one seccomp_notif_resp from `resp`.
        let rc = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SEND,
                &mut resp as *mut libc::seccomp_notif_resp,
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENOENT) {
                return Ok(());
            }
            return Err(e);
        }
        Ok(())
    }
}

/// The keeper of `SyscallListener::continue_all_in_background`, in the forked child.
///
/// # Safety
/// Call only in a child just forked from a process with other threads: it makes only
/// async-signal-safe system calls on stack memory, and never returns.
unsafe fn keep_continuing(fd: libc::c_int) -> ! {
    // SAFETY: system calls on integers and on locals of this frame only (an all-zero
    // seccomp_notif is valid, and the kernel wants it zeroed).
    unsafe {
        libc::setsid();
        if libc::fork() != 0 {
            libc::_exit(0); // the keeper is reparented once this one is gone
        }
        if fd > 0 {
            libc::syscall(libc::SYS_close_range, 0, fd - 1, 0);
        }
        libc::syscall(libc::SYS_close_range, fd + 1, u32::MAX, 0);
        loop {
            let mut p = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            if libc::poll(&mut p, 1, -1) < 0 {
                continue; // EINTR
            }
            if p.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
                libc::_exit(0);
            }
            let mut n: libc::seccomp_notif = std::mem::zeroed();
            if libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_RECV, &mut n as *mut _) < 0 {
                continue;
            }
            let mut resp = libc::seccomp_notif_resp {
                id: n.id,
                val: 0,
                error: 0,
                flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
            };
            libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_SEND, &mut resp as *mut _);
        }
    }
}
