//! The parasite: a thread of the program's own that runs the system calls uzswap posts to it,
//! for the ones that act only on the caller's memory (`UFFDIO_MOVE`, `madvise`).
//!
//! Its code is the position-independent blob below, copied into a page of the program. An
//! injected `clone(2)` starts it at its first instruction (the `syscall` the clone itself
//! runs): the thread that made the clone finds its registers restored by the tracer, and the
//! new thread (rax 0) blocks every signal and serves a mailbox, a page of a memfd mapped by
//! the program and by uzswap alike, whose address it holds in r15:
//!
//! | offset | field | |
//! |---|---|---|
//! | 0 | `posted: u32` | set by uzswap after the call is written; the futex the parasite waits on |
//! | 4 | `done: u32` | set by the parasite after the result is written; the futex uzswap waits on |
//! | 8 | `nr: u64` | the system call |
//! | 16 | `args: [u64; 6]` | its arguments |
//! | 64 | `result: i64` | what it returned (a negative errno on failure) |
//! | 512 | | room for a call's argument struct (a `uffdio_move`) |
//!
//! The futexes are shared ones (no `FUTEX_PRIVATE_FLAG`): keyed by the memfd's page, so a wake
//! from uzswap's mapping reaches the parasite waiting on the program's.

use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};

// The blob (x86-64, AT&T syntax): no absolute address, no stack, no data but `all_signals`,
// reached relative to rip.
std::arch::global_asm!(
    ".pushsection .rodata.uzswap_parasite,\"a\"",
    ".balign 16",
    ".globl uzswap_parasite_start",
    ".globl uzswap_parasite_end",
    "uzswap_parasite_start:",
    "    syscall", // the injected clone
    "    test %rax, %rax",
    "    jnz 9f", // the cloning thread never gets here: its registers are restored
    "    mov $14, %eax", // rt_sigprocmask(SIG_BLOCK, &all_signals, NULL, 8)
    "    xor %edi, %edi",
    "    lea 8f(%rip), %rsi",
    "    xor %edx, %edx",
    "    mov $8, %r10d",
    "    syscall",
    "1:  mov (%r15), %eax", // posted?
    "    test %eax, %eax",
    "    jnz 2f",
    "    mov $202, %eax", // futex(&posted, FUTEX_WAIT, 0, NULL)
    "    mov %r15, %rdi",
    "    xor %esi, %esi",
    "    xor %edx, %edx",
    "    xor %r10d, %r10d",
    "    syscall",
    "    jmp 1b",
    "2:  movl $0, (%r15)", // taken
    "    mov 8(%r15), %rax",
    "    mov 16(%r15), %rdi",
    "    mov 24(%r15), %rsi",
    "    mov 32(%r15), %rdx",
    "    mov 40(%r15), %r10",
    "    mov 48(%r15), %r8",
    "    mov 56(%r15), %r9",
    "    syscall",
    "    mov %rax, 64(%r15)",
    "    movl $1, 4(%r15)", // done (x86 stores are ordered: the result is seen first)
    "    mov $202, %eax",   // futex(&done, FUTEX_WAKE, 1)
    "    lea 4(%r15), %rdi",
    "    mov $1, %esi",
    "    mov $1, %edx",
    "    syscall",
    "    jmp 1b",
    "9:  ud2",
    ".balign 8",
    "8:  .quad -1", // all_signals
    "uzswap_parasite_end:",
    ".popsection",
    options(att_syntax)
);

extern "C" {
    static uzswap_parasite_start: u8;
    static uzswap_parasite_end: u8;
}

/// The parasite's code, to be copied into the program.
pub(super) fn code() -> &'static [u8] {
    // SAFETY: the two symbols bound the blob above, in a read-only section of this binary:
    // `start..end` is its bytes, alive for the program's life.
    unsafe {
        let start = &raw const uzswap_parasite_start;
        let end = &raw const uzswap_parasite_end;
        std::slice::from_raw_parts(start, end as usize - start as usize)
    }
}

/// Offsets in the mailbox.
pub(super) const POSTED: usize = 0;
pub(super) const DONE: usize = 4;
pub(super) const NR: usize = 8;
pub(super) const ARGS: usize = 16;
pub(super) const RESULT: usize = 64;
/// Where a call's argument struct goes.
pub(super) const SCRATCH: usize = 512;

/// uzswap's view of the mailbox: its mapping of the memfd page.
pub(super) struct Mailbox {
    /// The page, mapped shared in this process.
    page: *mut u8,
}

// SAFETY: the page is only read and written through atomics, and calls are serialised by
// the caller (`RemoteProcess` holds the mailbox under a mutex).
unsafe impl Send for Mailbox {}

impl Mailbox {
    /// # Safety
    /// `page` is a page-sized shared mapping that the mailbox owns (it unmaps it when
    /// dropped), used by no one else in this process.
    pub(super) unsafe fn new(page: *mut u8) -> Self {
        Mailbox { page }
    }

    fn u32_at(&self, offset: usize) -> &AtomicU32 {
        // SAFETY: offset is one of the aligned u32 fields inside the page (module table); the
        // parasite changes it concurrently, hence an atomic.
        unsafe { &*self.page.add(offset).cast::<AtomicU32>() }
    }

    fn u64_at(&self, offset: usize) -> &AtomicU64 {
        // SAFETY: as `u32_at`, for the 8-byte aligned u64 fields.
        unsafe { &*self.page.add(offset).cast::<AtomicU64>() }
    }

    /// Write `bytes` into the scratch area (for a call whose argument points there).
    pub(super) fn write_scratch(&self, bytes: &[u64]) {
        for (i, &w) in bytes.iter().enumerate() {
            self.u64_at(SCRATCH + i * 8).store(w, Ordering::Relaxed);
        }
    }

    /// Read back word `i` of the scratch area (a field the call wrote).
    pub(super) fn read_scratch(&self, i: usize) -> u64 {
        self.u64_at(SCRATCH + i * 8).load(Ordering::Relaxed)
    }

    /// Post a call: its number and arguments, then `posted`, then the wake.
    pub(super) fn post(&self, nr: i64, args: [u64; 6]) {
        self.u64_at(NR).store(nr as u64, Ordering::Relaxed);
        for (i, a) in args.iter().enumerate() {
            self.u64_at(ARGS + i * 8).store(*a, Ordering::Relaxed);
        }
        self.u32_at(DONE).store(0, Ordering::Relaxed);
        self.u32_at(POSTED).store(1, Ordering::Release);
        futex(self.u32_at(POSTED), libc::FUTEX_WAKE, 1, None);
    }

    /// Wait up to `timeout` for the posted call's result: None if it is not done yet.
    pub(super) fn wait(&self, timeout: std::time::Duration) -> Option<i64> {
        if self.u32_at(DONE).load(Ordering::Acquire) == 0 {
            futex(self.u32_at(DONE), libc::FUTEX_WAIT, 0, Some(timeout));
        }
        if self.u32_at(DONE).load(Ordering::Acquire) == 0 {
            return None;
        }
        // SAFETY: RESULT is an aligned i64 field of the page.
        let result = unsafe { &*self.page.add(RESULT).cast::<AtomicI64>() };
        Some(result.load(Ordering::Relaxed))
    }
}

impl Drop for Mailbox {
    fn drop(&mut self) {
        // SAFETY: the page is the mailbox's own mapping (`new`), unmapped once, here.
        unsafe { libc::munmap(self.page.cast(), crate::PAGE_SIZE) };
    }
}

/// A shared futex operation on `word`.
fn futex(word: &AtomicU32, op: libc::c_int, val: u32, timeout: Option<std::time::Duration>) {
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs() as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: futex(2) on a live aligned u32 (shared: the page is a memfd's), with a timeout
    // that outlives the call or none; it reads and writes nothing else of ours.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), op, val, ts_ptr, 0, 0);
    }
}
