//! A child stopped at its exec, and system calls injected into it with ptrace: how the
//! parasite and the userfaultfd get into a program that loads nothing of ours.
//!
//! The child asked to be traced (`PTRACE_TRACEME`, before its exec), so it stops with
//! SIGTRAP once the new program is loaded, before its first instruction. A call is injected
//! by pointing the stopped thread at a `syscall` instruction with the call in its registers
//! and stepping it once; its registers are put back afterwards. The first `syscall`
//! instruction is written over the program's entry point and taken back at once; the
//! later ones are the parasite's page's.
//!
//! A signal sent to the child meanwhile stops it too (a traced task stops for every signal):
//! it is kept, the step tried again, and the signal delivered when the child is let go. A
//! child whose tracer dies before that is killed (`PTRACE_O_EXITKILL`): it would run with
//! its entry point overwritten.

use std::io;

/// The stopped child.
pub(super) struct Tracee {
    pid: libc::pid_t,
    /// Its registers at the stop, put back before it runs.
    saved: libc::user_regs_struct,
    /// Where the `syscall` instruction that injected calls run is.
    syscall_at: u64,
    /// The program's word at its entry point while a `syscall` is written over it.
    entry_word: Option<i64>,
    /// Signals that stopped the child while calls were injected, to deliver at `detach`.
    signals: Vec<i32>,
    /// Let go (`detach`): not killed when dropped.
    detached: bool,
}

fn check(rc: libc::c_long, what: &str) -> io::Result<libc::c_long> {
    if rc < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("{what}: {e}")));
    }
    Ok(rc)
}

/// Wait for `pid` to stop: its stop signal; an error if it ended instead.
fn wait_stop(pid: libc::pid_t) -> io::Result<i32> {
    let mut status = 0;
    loop {
        // SAFETY: waitpid writes the status into our local.
        let rc = unsafe { libc::waitpid(pid, &mut status, libc::__WALL) };
        if rc >= 0 {
            break;
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(io::Error::new(e.kind(), format!("waitpid: {e}")));
        }
    }
    if !libc::WIFSTOPPED(status) {
        return Err(io::Error::other(format!(
            "the program ended while it was being set up (wait status {status:#x})"
        )));
    }
    Ok(libc::WSTOPSIG(status))
}

fn get_regs(pid: libc::pid_t) -> io::Result<libc::user_regs_struct> {
    // SAFETY: an all-zero user_regs_struct is a valid value (plain integers).
    let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
    // SAFETY: PTRACE_GETREGS writes one user_regs_struct into `regs`.
    let rc = unsafe { libc::ptrace(libc::PTRACE_GETREGS, pid, 0, &mut regs) };
    check(rc, "PTRACE_GETREGS")?;
    Ok(regs)
}

fn set_regs(pid: libc::pid_t, regs: &libc::user_regs_struct) -> io::Result<()> {
    // SAFETY: PTRACE_SETREGS reads one user_regs_struct from `regs`.
    let rc = unsafe { libc::ptrace(libc::PTRACE_SETREGS, pid, 0, regs) };
    check(rc, "PTRACE_SETREGS").map(|_| ())
}

impl Tracee {
    /// Wait for `pid`, a child that asked to be traced, to stop at its exec.
    pub(super) fn at_exec(pid: libc::pid_t) -> io::Result<Tracee> {
        let sig = wait_stop(pid)?;
        if sig != libc::SIGTRAP {
            return Err(io::Error::other(format!(
                "the program stopped with signal {sig} before its exec"
            )));
        }
        // SAFETY: SETOPTIONS changes how the kernel treats our tracee, nothing of ours.
        let rc = unsafe {
            libc::ptrace(
                libc::PTRACE_SETOPTIONS,
                pid,
                0,
                libc::PTRACE_O_EXITKILL as libc::c_long,
            )
        };
        check(rc, "PTRACE_SETOPTIONS")?;
        let saved = get_regs(pid)?;
        Ok(Tracee {
            pid,
            saved,
            syscall_at: saved.rip,
            entry_word: None,
            signals: Vec::new(),
            detached: false,
        })
    }

    /// Write a `syscall` instruction over the program's entry point, for the calls that make
    /// the parasite's page.
    pub(super) fn borrow_entry(&mut self) -> io::Result<()> {
        // SAFETY: PEEKTEXT reads a word of the stopped child's memory; errors come in errno,
        // which is cleared first since -1 is also a valid word.
        let word = unsafe {
            *libc::__errno_location() = 0;
            libc::ptrace(libc::PTRACE_PEEKTEXT, self.pid, self.saved.rip, 0)
        };
        let errno = io::Error::last_os_error();
        if word == -1 && errno.raw_os_error().is_some_and(|e| e != 0) {
            return Err(io::Error::new(
                errno.kind(),
                format!("PTRACE_PEEKTEXT: {errno}"),
            ));
        }
        let with_syscall = (word & !0xffff) | 0x050f;
        // SAFETY: POKETEXT writes a word of the stopped child's text; it is put back by
        // `give_entry_back` before the child runs, or the child is killed.
        let rc = unsafe {
            libc::ptrace(
                libc::PTRACE_POKETEXT,
                self.pid,
                self.saved.rip,
                with_syscall,
            )
        };
        check(rc, "PTRACE_POKETEXT")?;
        self.entry_word = Some(word);
        self.syscall_at = self.saved.rip;
        Ok(())
    }

    /// Put the program's entry point back, and run later calls at `syscall_at`.
    pub(super) fn give_entry_back(&mut self, syscall_at: u64) -> io::Result<()> {
        if let Some(word) = self.entry_word.take() {
            // SAFETY: writes back the word `borrow_entry` read.
            let rc = unsafe { libc::ptrace(libc::PTRACE_POKETEXT, self.pid, self.saved.rip, word) };
            check(rc, "PTRACE_POKETEXT")?;
        }
        self.syscall_at = syscall_at;
        Ok(())
    }

    /// Run system call `nr` in the child, with `r15` set (the parasite's mailbox, for a
    /// clone); returns what it returned (a negative errno on failure).
    pub(super) fn syscall(
        &mut self,
        nr: libc::c_long,
        args: [u64; 6],
        r15: u64,
    ) -> io::Result<i64> {
        let mut regs = self.saved;
        regs.rip = self.syscall_at;
        regs.rax = nr as u64;
        // Not in a system call: no restart for the kernel to make of the stop's.
        regs.orig_rax = u64::MAX;
        regs.rdi = args[0];
        regs.rsi = args[1];
        regs.rdx = args[2];
        regs.r10 = args[3];
        regs.r8 = args[4];
        regs.r9 = args[5];
        regs.r15 = r15;
        loop {
            set_regs(self.pid, &regs)?;
            // SAFETY: SINGLESTEP resumes the stopped child for one instruction, no signal.
            let rc = unsafe { libc::ptrace(libc::PTRACE_SINGLESTEP, self.pid, 0, 0) };
            check(rc, "PTRACE_SINGLESTEP")?;
            let sig = wait_stop(self.pid)?;
            if sig != libc::SIGTRAP {
                self.signals.push(sig);
            }
            let after = get_regs(self.pid)?;
            if after.rip != self.syscall_at + 2 {
                // Stopped by a signal before the instruction ran: step it again.
                continue;
            }
            let rc = after.rax as i64;
            // Interrupted by a signal (-ERESTARTSYS .. -ERESTART_RESTARTBLOCK): again.
            if (-516..=-512).contains(&rc) {
                continue;
            }
            return Ok(rc);
        }
    }

    /// As `syscall`, with a negative result turned into an error naming `what`.
    pub(super) fn call(&mut self, what: &str, nr: libc::c_long, args: [u64; 6]) -> io::Result<u64> {
        super::returned(what, self.syscall(nr, args, 0)?)
    }

    /// Put the child's registers back and let it run, untraced, with the signals that came
    /// meanwhile.
    pub(super) fn detach(mut self) -> io::Result<()> {
        self.give_entry_back(self.syscall_at)?;
        set_regs(self.pid, &self.saved)?;
        let first = self.signals.first().copied().unwrap_or(0);
        // SAFETY: DETACH resumes the child untraced, delivering `first`.
        let rc = unsafe { libc::ptrace(libc::PTRACE_DETACH, self.pid, 0, first as libc::c_long) };
        check(rc, "PTRACE_DETACH")?;
        self.detached = true;
        for &sig in self.signals.iter().skip(1) {
            // SAFETY: kill sends a signal to our child, which we have not reaped.
            unsafe { libc::kill(self.pid, sig) };
        }
        Ok(())
    }
}

impl Drop for Tracee {
    /// A child not let go (its setup failed, or panicked) is killed: it may be stopped with
    /// its entry point overwritten.
    fn drop(&mut self) {
        if !self.detached {
            // SAFETY: kill sends SIGKILL to our child, which we have not reaped.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
        }
    }
}
