//! A program's memory served from outside it: uzswap in a process of its own, the program
//! loading nothing of ours (a static binary, a Go program), as CRIU's lazy-pages daemon
//! serves a restored process.
//!
//! What this rests on (tests/remote.rs checks each on the running kernel):
//! - A userfaultfd acts on the memory of the process that made it, whoever holds it:
//!   `UFFDIO_REGISTER`, `_COPY`, `_ZEROPAGE`, `_WRITEPROTECT` and its events work from uzswap's
//!   process. `UFFDIO_MOVE` does not: the kernel refuses it (`EINVAL`) from outside the memory
//!   it moves, and so does `madvise` (`process_madvise` takes only advice that frees nothing).
//! - So the program holds a parasite (parasite.rs): two threads of its own, made at its exec,
//!   that run the calls uzswap posts to them, one at a time each. The reclaim lane moves
//!   pages out and discards staging slots: calls that never wait for the reader of the
//!   program's userfaultfd. The program lane runs the rest (`madvise` of the program's
//!   memory, which waits until its event is read; mappings). Were they one, a discard
//!   waiting for its event would wait for a reader waiting for reclaim waiting for the lane.
//!   Each has a descriptor table of its own (cloned without `CLONE_FILES`): the reclaim
//!   lane's holds the staging userfaultfd alone, the program lane's nothing. The program's
//!   table holds nothing of uzswap's, so it can close, reuse or list its descriptors as it
//!   pleases.
//! - Pages move out into staging areas in the program (`map_staging`), registered with a
//!   second userfaultfd of the program's, made without events (as `Staging`'s own is): a
//!   move needs its destination registered with the userfaultfd that issues it, and a
//!   discard of a staging slot then raises no event and waits for no reader.
//! - The parasite's page, stack, mailbox and the staging areas are mappings of the program
//!   that uzswap made; they are `MADV_DONTFORK` (a child has none of them), which also keeps
//!   the kernel from merging them with the program's own mappings.
//! - Setup happens while the program is stopped at its exec (tracee.rs); after it the program
//!   runs untraced, and a debugger can attach to it as to any program.
//! - The parasite lives as long as the program's image: an `execve` ends it (and the memory
//!   the userfaultfd is of), and calls posted to it then fail with `ProcessGone`.
//! - A seccomp filter stays with the program's children and with the programs it runs; where
//!   the program lacks `CAP_SYS_ADMIN`, installing it sets `no_new_privs`, which a setuid
//!   program started from it then runs without.
//! - Dropping a `RemoteProcess` kills the program: pages moved out of it could not come
//!   back, and its threads that fault would wait forever.

mod parasite;
mod seccomp;
mod tracee;

pub use seccomp::{Answer, SyscallListener, SyscallNotice};

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::time::Duration;

use crate::error::UffdError;
use crate::features::{Features, RegisterMode};
use crate::sys;
use crate::userfaultfd::Uffd;
use crate::PAGE_SIZE;
use parasite::Mailbox;
use tracee::Tracee;

/// The parasite's stack: it pushes nothing, but a signal frame would need room.
const PARASITE_STACK: u64 = 64 << 10;
/// Where the name of the mailbox's memfd lies in the parasite's page.
const NAME_OFFSET: usize = 2048;
/// Where the seccomp filter's `sock_fprog` lies in the parasite's page, the filter after it.
const FPROG_OFFSET: usize = 3072;

/// A program started with its memory served from this process.
#[derive(Debug)]
pub struct RemoteProcess {
    pid: libc::pid_t,
    pidfd: OwnedFd,
    uffd: Uffd,
    /// The userfaultfd of the staging areas (without events).
    staging_uffd: Uffd,
    /// The staging userfaultfd's number in the reclaim lane's descriptor table.
    parasite_staging_uffd: u64,
    reclaim_lane: Lane,
    program_lane: Lane,
    listener: Option<SyscallListener>,
    /// Cleared once `process_madvise` on the program itself is refused (kernels before
    /// 6.14 have no `PIDFD_SELF`): `discard` then makes one `madvise` a range.
    batched_discard: std::sync::atomic::AtomicBool,
}

/// `PIDFD_SELF_THREAD_GROUP` (Linux 6.14): the calling process, for `process_madvise`.
const PIDFD_SELF: u64 = -10001i64 as u64;
/// The ranges one `discard` call takes: the `iovec`s fit the mailbox's scratch area.
const DISCARD_RANGES: usize = (PAGE_SIZE - parasite::SCRATCH) / 16;

/// A parasite thread and its mailbox (module doc).
#[derive(Debug)]
struct Lane {
    mailbox: std::sync::Mutex<MailboxWithAddr>,
    /// The thread's id: while `/proc/PID/task/TID` is there, it serves calls.
    tid: libc::pid_t,
}

/// The mailbox, and its address in the program.
struct MailboxWithAddr {
    mailbox: Mailbox,
    in_program: u64,
}

impl std::fmt::Debug for MailboxWithAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mailbox at {:#x}", self.in_program)
    }
}

impl RemoteProcess {
    /// Start `command` with its memory served from this process: a userfaultfd of its memory
    /// with `features`, and a parasite; the calls `intercept` names (the mmap family) stop for
    /// [`RemoteProcess::listener`] to answer.
    pub fn spawn(
        command: &mut Command,
        features: Features,
        intercept: &[libc::c_long],
    ) -> io::Result<(Child, RemoteProcess)> {
        if intercept.len() > seccomp::MAX_NOTIFIED {
            return Err(io::Error::other(format!(
                "at most {} system calls can be intercepted",
                seccomp::MAX_NOTIFIED
            )));
        }
        // SAFETY: the closure runs in the child between fork and exec and makes one system
        // call, which is async-signal-safe; it touches no memory of the parent's.
        unsafe {
            command.pre_exec(|| {
                if libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = command.spawn()?;
        let pid = child.id() as libc::pid_t;
        match Self::install(pid, features, intercept) {
            Ok(remote) => Ok((child, remote)),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(e)
            }
        }
    }

    fn install(
        pid: libc::pid_t,
        features: Features,
        intercept: &[libc::c_long],
    ) -> io::Result<Self> {
        let mut t = Tracee::at_exec(pid)?;
        let page = PAGE_SIZE as u64;
        let rw = (libc::PROT_READ | libc::PROT_WRITE) as u64;
        let private = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64;
        let none = u64::MAX; // fd -1

        // The parasite's page: made writable, filled, then made executable.
        t.borrow_entry()?;
        let code = t.call("mmap", libc::SYS_mmap, [0, page, rw, private, none, 0])?;
        let mut bytes = vec![0u8; PAGE_SIZE];
        let blob = parasite::code();
        bytes[..blob.len()].copy_from_slice(blob);
        bytes[NAME_OFFSET..NAME_OFFSET + 7].copy_from_slice(b"uzswap\0");
        // struct sock_fprog { unsigned short len; struct sock_filter *filter; }
        let filter = seccomp::filter(intercept, code);
        let filter_at = FPROG_OFFSET + 16;
        bytes[FPROG_OFFSET..FPROG_OFFSET + 2]
            .copy_from_slice(&((filter.len() / 8) as u16).to_ne_bytes());
        bytes[FPROG_OFFSET + 8..FPROG_OFFSET + 16]
            .copy_from_slice(&(code + filter_at as u64).to_ne_bytes());
        bytes[filter_at..filter_at + filter.len()].copy_from_slice(&filter);
        write_memory(pid, code as usize, &bytes)?;
        let rx = (libc::PROT_READ | libc::PROT_EXEC) as u64;
        t.call("mprotect", libc::SYS_mprotect, [code, page, rx, 0, 0, 0])?;
        t.give_entry_back(code)?;

        // The program dies with uzswap: its pages moved out would be lost, and its faults,
        // once nothing serves its userfaultfd, would read zeros.
        let kill = libc::SIGKILL as u64;
        t.call(
            "prctl",
            libc::SYS_prctl,
            [libc::PR_SET_PDEATHSIG as u64, kill, 0, 0, 0, 0],
        )?;
        let uffd_flags = (libc::O_CLOEXEC | libc::O_NONBLOCK) as u64;
        let uffd_t = t.syscall(libc::SYS_userfaultfd, [uffd_flags, 0, 0, 0, 0, 0], 0)?;
        if uffd_t < 0 {
            let e = io::Error::from_raw_os_error(-uffd_t as i32);
            return Err(io::Error::new(
                e.kind(),
                format!(
                    "userfaultfd in the program: {e}: {}",
                    crate::PERMISSION_HINT
                ),
            ));
        }
        let uffd_t = uffd_t as u64;
        // Made second, so its number is the higher (the lowest free one is taken).
        let staging_uffd_t = t.call(
            "userfaultfd",
            libc::SYS_userfaultfd,
            [uffd_flags, 0, 0, 0, 0, 0],
        )?;
        let memfd_flags = libc::MFD_CLOEXEC as u64;
        let name = code + NAME_OFFSET as u64;
        let mfd_t = t.call(
            "memfd_create",
            libc::SYS_memfd_create,
            [name, memfd_flags, 0, 0, 0, 0],
        )?;
        // A mailbox page a lane.
        let pages = 2 * page;
        t.call("ftruncate", libc::SYS_ftruncate, [mfd_t, pages, 0, 0, 0, 0])?;
        let shared = libc::MAP_SHARED as u64;
        let mailbox_t = t.call("mmap", libc::SYS_mmap, [0, pages, rw, shared, mfd_t, 0])?;
        let dontfork = libc::MADV_DONTFORK as u64;
        t.call(
            "madvise",
            libc::SYS_madvise,
            [mailbox_t, pages, dontfork, 0, 0, 0],
        )?;
        let stacks = 2 * PARASITE_STACK;
        let stack = t.call("mmap", libc::SYS_mmap, [0, stacks, rw, private, none, 0])?;
        t.call(
            "madvise",
            libc::SYS_madvise,
            [stack, stacks, dontfork, 0, 0, 0],
        )?;
        t.call(
            "madvise",
            libc::SYS_madvise,
            [code, page, dontfork, 0, 0, 0],
        )?;

        // The filter, before the parasite exists (it inherits it, and its calls pass).
        let listener_t = if intercept.is_empty() {
            None
        } else {
            let fprog = code + FPROG_OFFSET as u64;
            // Once uzswap has received a call, only a kill interrupts the program's wait for
            // the answer: a signal with a handler would otherwise restart the call, which
            // uzswap would then carry out twice (its first answer lost).
            let flags = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER
                | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
            let add_filter = |t: &mut Tracee| {
                t.syscall(
                    libc::SYS_seccomp,
                    [libc::SECCOMP_SET_MODE_FILTER as u64, flags, fprog, 0, 0, 0],
                    0,
                )
            };
            let mut rc = add_filter(&mut t)?;
            if rc == -(libc::EACCES as i64) {
                // Without CAP_SYS_ADMIN a filter needs no_new_privs.
                t.call(
                    "prctl",
                    libc::SYS_prctl,
                    [libc::PR_SET_NO_NEW_PRIVS as u64, 1, 0, 0, 0, 0],
                )?;
                rc = add_filter(&mut t)?;
            }
            if rc < 0 {
                return Err(io::Error::other(format!(
                    "seccomp in the program: {}",
                    io::Error::from_raw_os_error(-rc as i32)
                )));
            }
            Some(rc as u64)
        };

        // Our copies of the userfaultfd and the memfd, and our mapping of the mailbox.
        let pidfd = pidfd_open(pid)?;
        let uffd_fd = pidfd_getfd(&pidfd, uffd_t as i32)?;
        let staging_uffd_fd = pidfd_getfd(&pidfd, staging_uffd_t as i32)?;
        let memfd = pidfd_getfd(&pidfd, mfd_t as i32)?;
        let listener = match listener_t {
            Some(fd) => Some(SyscallListener::new(crate::descriptors::out_of_reach(
                pidfd_getfd(&pidfd, fd as i32)?,
            ))),
            None => None,
        };

        // The lanes: each its own descriptor table, a copy of the program's now.
        let clone_flags = (libc::CLONE_VM
            | libc::CLONE_FS
            | libc::CLONE_SIGHAND
            | libc::CLONE_THREAD
            | libc::CLONE_SYSVSEM) as u64;
        let mut lanes = Vec::new();
        for i in 0..2 {
            let stack_top = stack + (i + 1) * PARASITE_STACK - 64;
            let in_program = mailbox_t + i * page;
            let tid = t.syscall(
                libc::SYS_clone,
                [clone_flags, stack_top, 0, 0, 0, 0],
                in_program,
            )?;
            if tid <= 0 {
                return Err(io::Error::other(format!(
                    "clone in the program: {}",
                    io::Error::from_raw_os_error(-tid as i32)
                )));
            }
            let mailbox = map_shared_page(&memfd, (i * page) as libc::off_t)?;
            lanes.push(Lane {
                mailbox: std::sync::Mutex::new(MailboxWithAddr {
                    mailbox,
                    in_program,
                }),
                tid: tid as libc::pid_t,
            });
        }
        let program_lane = lanes.pop().expect("two lanes");
        let reclaim_lane = lanes.pop().expect("two lanes");
        // The program's table: nothing of ours left in it.
        t.call("close", libc::SYS_close, [uffd_t, 0, 0, 0, 0, 0])?;
        t.call("close", libc::SYS_close, [staging_uffd_t, 0, 0, 0, 0, 0])?;
        t.call("close", libc::SYS_close, [mfd_t, 0, 0, 0, 0, 0])?;
        if let Some(fd) = listener_t {
            t.call("close", libc::SYS_close, [fd, 0, 0, 0, 0, 0])?;
        }
        t.detach()?;

        let staging_features = Features::MOVE | Features::SIGBUS;
        let remote = RemoteProcess {
            pid,
            pidfd,
            uffd: crate::builder::handshake(uffd_fd, features).map_err(io::Error::other)?,
            staging_uffd: crate::builder::handshake(staging_uffd_fd, staging_features)
                .map_err(io::Error::other)?,
            parasite_staging_uffd: staging_uffd_t,
            reclaim_lane,
            program_lane,
            listener,
            batched_discard: std::sync::atomic::AtomicBool::new(true),
        };
        // The lanes' tables: the staging userfaultfd alone in the reclaim lane's, nothing in
        // the program lane's.
        let last = u32::MAX as u64;
        let closed = [
            (&remote.reclaim_lane, 0, staging_uffd_t),
            (&remote.reclaim_lane, staging_uffd_t + 1, last + 1),
            (&remote.program_lane, 0, last + 1),
        ];
        for (lane, from, to) in closed {
            if from < to {
                let args = [from, to - 1, 0, 0, 0, 0];
                remote.call(lane, "close_range", libc::SYS_close_range, args)?;
            }
        }
        Ok(remote)
    }

    /// The program's calls that `spawn` was asked to intercept, to answer.
    pub fn listener(&self) -> Option<&SyscallListener> {
        self.listener.as_ref()
    }

    /// The program's pid.
    pub fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// The userfaultfd of the program's memory: register, copy, zeropage, write-protect and
    /// events work on it from here. (A move out is [`RemoteProcess::move_out`].)
    pub fn uffd(&self) -> &Uffd {
        &self.uffd
    }

    /// A staging area of `len` bytes in the program, for [`RemoteProcess::move_out`]: private
    /// anonymous memory, `MADV_DONTFORK`, base pages only, registered with the staging
    /// userfaultfd (nobody serves its faults: with `SIGBUS`, a read of an empty page of it
    /// fails at once).
    pub fn map_staging(&self, len: usize) -> io::Result<std::ops::Range<usize>> {
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        let private = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
        let at = self.map_anonymous(0, len, rw, private)?;
        self.madvise(at, len, libc::MADV_DONTFORK)?;
        self.madvise(at, len, libc::MADV_NOHUGEPAGE)?;
        // SAFETY: the range is the program's memory, not this process's: no Rust reference
        // of ours can point into it, which is what `register_range` asks.
        unsafe {
            self.staging_uffd
                .register_range(at, len, RegisterMode::MISSING)
        }
        .map_err(io::Error::other)?;
        Ok(at..at + len)
    }

    /// Register `start..start+len` of the program's memory.
    pub fn register(&self, start: usize, len: usize, mode: RegisterMode) -> Result<(), UffdError> {
        // SAFETY: the range is the program's memory, not this process's: no Rust reference
        // of ours can point into it, which is what `register_range` asks.
        unsafe { self.uffd.register_range(start, len, mode) }.map(|_| ())
    }

    /// `madvise(addr, len, advice)` in the program (the kernel takes most advice only from
    /// the process itself).
    pub fn madvise(&self, addr: usize, len: usize, advice: libc::c_int) -> io::Result<()> {
        let args = [addr as u64, len as u64, advice as u64, 0, 0, 0];
        self.call(&self.program_lane, "madvise", libc::SYS_madvise, args)
            .map(|_| ())
    }

    /// An anonymous mapping in the program (`mmap(addr, len, prot, flags, -1, 0)`, `flags`
    /// with `MAP_ANONYMOUS`): its address.
    pub fn map_anonymous(
        &self,
        addr: usize,
        len: usize,
        prot: libc::c_int,
        flags: libc::c_int,
    ) -> io::Result<usize> {
        if flags & libc::MAP_ANONYMOUS == 0 {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let args = [
            addr as u64,
            len as u64,
            prot as u64,
            flags as u64,
            u64::MAX,
            0,
        ];
        self.call(&self.program_lane, "mmap", libc::SYS_mmap, args)
            .map(|a| a as usize)
    }

    /// `mprotect(addr, len, prot)` in the program.
    pub fn mprotect(&self, addr: usize, len: usize, prot: libc::c_int) -> io::Result<()> {
        let args = [addr as u64, len as u64, prot as u64, 0, 0, 0];
        self.call(&self.program_lane, "mprotect", libc::SYS_mprotect, args)
            .map(|_| ())
    }

    /// `munmap(addr, len)` in the program.
    pub fn munmap(&self, addr: usize, len: usize) -> io::Result<()> {
        let args = [addr as u64, len as u64, 0, 0, 0, 0];
        self.call(&self.program_lane, "munmap", libc::SYS_munmap, args)
            .map(|_| ())
    }

    /// The program's break now (`brk(0)` in the program).
    pub fn current_break(&self) -> io::Result<usize> {
        self.call(&self.program_lane, "brk", libc::SYS_brk, [0; 6])
            .map(|b| b as usize)
    }

    /// Kill the program (SIGKILL, through its pidfd).
    pub fn kill(&self) {
        // SAFETY: pidfd_send_signal on our pidfd: it names the program, never a process that
        // reused its pid.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.pidfd.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
    }

    /// Whether the program still runs the image it was started with (its parasite's threads
    /// are there: an exit or an `execve` ends them).
    pub fn alive(&self) -> bool {
        [&self.reclaim_lane, &self.program_lane].iter().all(|lane| {
            std::path::Path::new(&format!("/proc/{}/task/{}", self.pid, lane.tid)).exists()
        })
    }

    /// As `syscall`, with a negative result turned into an error naming `what`.
    fn call(&self, lane: &Lane, what: &str, nr: libc::c_long, args: [u64; 6]) -> io::Result<u64> {
        returned(what, self.syscall(lane, nr, args)?)
    }

    /// Run system call `nr` in the program, on `lane`; returns what it returned (a negative
    /// errno on failure), or an error once the parasite is gone. Not public: a call in the
    /// program could reach this process too (`process_vm_writev`).
    fn syscall(&self, lane: &Lane, nr: libc::c_long, args: [u64; 6]) -> io::Result<i64> {
        let m = lane.mailbox.lock().unwrap_or_else(|e| e.into_inner());
        m.mailbox.post(nr, args);
        self.wait(lane, &m.mailbox)
    }

    /// The result of the call posted to `lane`'s `mailbox` (which the caller holds locked).
    fn wait(&self, lane: &Lane, mailbox: &Mailbox) -> io::Result<i64> {
        loop {
            if let Some(rc) = mailbox.wait(Duration::from_millis(100)) {
                return Ok(rc);
            }
            // Its thread is gone after an exit or an `execve` of the program.
            let task = format!("/proc/{}/task/{}", self.pid, lane.tid);
            if !std::path::Path::new(&task).exists() {
                return Err(io::Error::other(
                    "the program ended or ran another program: its parasite is gone",
                ));
            }
        }
    }

    /// `UFFDIO_MOVE` in the program (the kernel refuses it from here): move `len` bytes at
    /// `src` to `dst`, both in the program, `dst` in a staging area (`map_staging`). Returns
    /// the bytes moved; an error says how many moved before it (`done`, as a move's error
    /// does).
    pub fn move_out(
        &self,
        dst: usize,
        src: usize,
        len: usize,
        allow_src_holes: bool,
    ) -> Result<usize, UffdError> {
        let lane = &self.reclaim_lane;
        let m = lane.mailbox.lock().unwrap_or_else(|e| e.into_inner());
        let mode = if allow_src_holes {
            sys::UFFDIO_MOVE_MODE_ALLOW_SRC_HOLES
        } else {
            0
        };
        // struct uffdio_move { dst, src, len, mode, move }
        m.mailbox
            .write_scratch(&[dst as u64, src as u64, len as u64, mode, 0]);
        let arg = m.in_program + parasite::SCRATCH as u64;
        m.mailbox.post(
            libc::SYS_ioctl,
            [self.parasite_staging_uffd, sys::UFFDIO_MOVE, arg, 0, 0, 0],
        );
        let rc = self
            .wait(lane, &m.mailbox)
            .map_err(|_| UffdError::ProcessGone {
                op: "UFFDIO_MOVE",
                errno: libc::ESRCH,
            })?;
        let moved = m.mailbox.read_scratch(4) as i64;
        if rc < 0 {
            return Err(UffdError::from_errno(
                "UFFDIO_MOVE",
                -rc as i32,
                moved.max(0) as usize,
            ));
        }
        Ok(moved as usize)
    }

    /// `madvise(MADV_DONTNEED)` on each range `(address, length)` of the program's memory,
    /// in as few calls to the parasite as the mailbox allows (one `process_madvise` of the
    /// program on itself for up to `DISCARD_RANGES` ranges). A discard of a range registered
    /// with the program's userfaultfd returns once its event is read.
    pub fn discard(&self, ranges: &[(usize, usize)]) -> io::Result<()> {
        self.discard_on(&self.program_lane, ranges)
    }

    /// `discard` for ranges of a staging area (`map_staging`), on the reclaim lane: their
    /// discard raises no event.
    pub fn discard_staging(&self, ranges: &[(usize, usize)]) -> io::Result<()> {
        self.discard_on(&self.reclaim_lane, ranges)
    }

    fn discard_on(&self, lane: &Lane, ranges: &[(usize, usize)]) -> io::Result<()> {
        use std::sync::atomic::Ordering::Relaxed;
        if !self.batched_discard.load(Relaxed) {
            for &(addr, len) in ranges {
                let args = [addr as u64, len as u64, libc::MADV_DONTNEED as u64, 0, 0, 0];
                self.call(lane, "madvise", libc::SYS_madvise, args)?;
            }
            return Ok(());
        }
        for chunk in ranges.chunks(DISCARD_RANGES) {
            let m = lane.mailbox.lock().unwrap_or_else(|e| e.into_inner());
            // struct iovec { base, len }, one a range.
            let iov: Vec<u64> = chunk
                .iter()
                .flat_map(|&(addr, len)| [addr as u64, len as u64])
                .collect();
            m.mailbox.write_scratch(&iov);
            let arg = m.in_program + parasite::SCRATCH as u64;
            let dontneed = libc::MADV_DONTNEED as u64;
            let n = chunk.len() as u64;
            m.mailbox.post(
                libc::SYS_process_madvise,
                [PIDFD_SELF, arg, n, dontneed, 0, 0],
            );
            let rc = self.wait(lane, &m.mailbox)?;
            drop(m);
            let total: usize = chunk.iter().map(|r| r.1).sum();
            if rc == total as i64 {
                continue;
            }
            if rc == -(libc::EBADF as i64) || rc == -(libc::EINVAL as i64) {
                // No PIDFD_SELF here (or a refusal of the advice on itself): a range at a time.
                self.batched_discard.store(false, Relaxed);
                return self.discard_on(lane, ranges);
            }
            returned("process_madvise", rc)?;
            return Err(io::Error::other(format!(
                "process_madvise in the program discarded {rc} of {total} bytes"
            )));
        }
        Ok(())
    }

    /// Write `bytes` into the program's memory at `addr` (pages that are not present are
    /// faulted in, as for `read`).
    pub fn write(&self, addr: usize, bytes: &[u8]) -> io::Result<()> {
        write_memory(self.pid, addr, bytes)
    }

    /// Read the program's memory at `addr` into `out` (pages that are not present are
    /// faulted in: a registered page that is missing waits for whoever serves it).
    pub fn read(&self, addr: usize, out: &mut [u8]) -> io::Result<()> {
        let local = libc::iovec {
            iov_base: out.as_mut_ptr().cast(),
            iov_len: out.len(),
        };
        let remote = libc::iovec {
            iov_base: addr as *mut libc::c_void,
            iov_len: out.len(),
        };
        // SAFETY: the local iovec is `out`, live and writable for its length; the remote one
        // is only read by the kernel, in the program.
        let n = unsafe { libc::process_vm_readv(self.pid, &local, 1, &remote, 1, 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n as usize != out.len() {
            return Err(io::Error::other(format!("read {n} of {} bytes", out.len())));
        }
        Ok(())
    }
}

impl Drop for RemoteProcess {
    /// The program is killed (module doc): what was moved out of it is lost with this.
    fn drop(&mut self) {
        self.kill();
    }
}

/// A system call's result in the program: a negative one turned into an error naming `what`.
fn returned(what: &str, rc: i64) -> io::Result<u64> {
    if rc < 0 {
        let e = io::Error::from_raw_os_error(-rc as i32);
        return Err(io::Error::new(
            e.kind(),
            format!("{what} in the program: {e}"),
        ));
    }
    Ok(rc as u64)
}

/// Write `bytes` into the program's memory at `addr` (a writable mapping).
fn write_memory(pid: libc::pid_t, addr: usize, bytes: &[u8]) -> io::Result<()> {
    let local = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    // SAFETY: the local iovec is only read, from `bytes`; the remote one is the program's.
    let n = unsafe { libc::process_vm_writev(pid, &local, 1, &remote, 1, 0) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("writing into the program: {e}"),
        ));
    }
    if n as usize != bytes.len() {
        return Err(io::Error::other(format!(
            "writing into the program: {n} of {} bytes",
            bytes.len()
        )));
    }
    Ok(())
}

fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just made this descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn pidfd_getfd(pidfd: &OwnedFd, fd: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_getfd takes a pidfd, a number in that process and flags, and returns a
    // new descriptor of ours or -1.
    let ours = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if ours < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("pidfd_getfd: {e}")));
    }
    // SAFETY: the kernel just made this descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(ours as i32) })
}

/// Map the page at `offset` of `memfd` shared into this process, for a mailbox.
fn map_shared_page(memfd: &OwnedFd, offset: libc::off_t) -> io::Result<Mailbox> {
    // SAFETY: a new shared mapping of one page of a memfd of ours; nothing else uses it.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            PAGE_SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            memfd.as_raw_fd(),
            offset,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `p` is a new page-sized shared mapping, handed to the mailbox alone.
    Ok(unsafe { Mailbox::new(p.cast()) })
}
