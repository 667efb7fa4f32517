//! `uzswap run` for a program that loads nothing of ours (a statically linked binary, a Go
//! program): the agent. uzswap stays outside the program. It starts it with a parasite
//! (uffd::remote), reserves the heap's address space in it (`--max-heap`), serves that
//! range as a `RemoteRegion` from this process, and places the program's anonymous private
//! mappings there, answering its calls of the mmap family (seccomp user notification):
//!
//! - `mmap` of anonymous private memory (not a stack, not huge pages) is placed in the
//!   reservation: at its hint where that is free there, else first fit; `MAP_FIXED` inside
//!   it replaces what was there. A mapping that does not fit runs as made, outside the
//!   limit, said once.
//! - `munmap` inside: its pages discarded and its protection read-write again; the space is
//!   free for the next mapping.
//! - `mremap` inside: shrunk or grown in place, or moved by a copy.
//! - `mprotect` inside: through the region, which keeps pages under another protection
//!   resident.
//! - `brk`: the first MiB past the program's first break is granted (static glibc before
//!   2.36 takes its thread-local storage from `sbrk` and cannot do without it), the rest
//!   refused (the break stays where it is), so malloc maps its heap instead.
//! - `madvise(MADV_HUGEPAGE or MADV_COLLAPSE)` inside: nothing (the region keeps base pages).
//!
//! The program's own `madvise(MADV_DONTNEED)` of its memory reaches the region as an event.
//! The calls of other processes (children the program forks) and of another image after an
//! `execve` (said once) run as made.
//!
//! A fork (a `clone` without `CLONE_VM`) waits while uzswap brings every evicted page back
//! and lets the reservation be inherited (`RemoteRegion::prepare_fork`), until the child is
//! made: the child gets a plain copy of the heap as it was, held under no limit, as the
//! preload's fork does. Otherwise the reservation is not inherited (`MADV_DONTFORK`).
//! Threads, `vfork` and `posix_spawn` share the program's memory and are not stopped.

use std::ops::Range;
use std::path::Path;
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use region::RemoteRegion;
use uffd::remote::{Answer, RemoteProcess, SyscallNotice};
use zswap::PAGE_SIZE;

use super::address_space::{AddressSpace, READ_WRITE, UNKNOWN_PROTECTION};
use super::launch::{region_config, Refusal, RunArgs, StatsForm, SwapTo, FAILED};

/// The calls the agent answers, and the forks it watches for.
const INTERCEPTED: [libc::c_long; 14] = [
    libc::SYS_mmap,
    libc::SYS_munmap,
    libc::SYS_mremap,
    libc::SYS_mprotect,
    libc::SYS_pkey_mprotect,
    libc::SYS_brk,
    libc::SYS_madvise,
    libc::SYS_mlock,
    libc::SYS_mlock2,
    libc::SYS_munlock,
    libc::SYS_mlockall,
    libc::SYS_fork,
    libc::SYS_clone,
    libc::SYS_clone3,
];

/// Run the statically linked program at `path` under `args`; its exit status, as `run`.
pub fn run(args: &RunArgs, path: &Path) -> Result<ExitCode, Refusal> {
    let fail = |line: String| (FAILED, line);
    if args.in_thread_faults {
        return Err(fail(format!(
            "--in-thread-faults: {} is statically linked and runs nothing of uzswap's, so its \
             faults are served by uzswap's threads; leave the flag out",
            path.display()
        )));
    }
    let (mut config, max_heap) = region_config(args).map_err(fail)?;
    // Registered from the start: a late registration and adoption from outside (the
    // program's pagemap) is not built for a program held so.
    config.lazy_registration = false;
    let features = RemoteRegion::features(&config)
        .map_err(|e| fail(format!("userfaultfd is not available: {}", e.chain())))?;
    let mut command = Command::new(path);
    std::os::unix::process::CommandExt::arg0(&mut command, &args.program[0]);
    command.args(&args.program[1..]);
    let signals = super::launch::catch_signals();
    let (child, remote) = RemoteProcess::spawn(&mut command, features, &INTERCEPTED)
        .map_err(|e| (126, format!("{}: {e}", path.display())))?;
    let pid = remote.pid();
    let remote = Arc::new(remote);
    if let Some(SwapTo::Redis(url)) = &args.swap_to {
        let store = redis_tier::RedisSegments::connect(
            url,
            &format!("{}-{pid}", super::launch::run_id()),
            Default::default(),
        )
        .map_err(|e| fail(format!("--swap-to: {e}")))?;
        config = config.segment_device(Arc::new(store));
    }
    let heap = reserve(&remote, max_heap as usize).map_err(fail)?;
    let memory_max = config.over_limit.memory_max.unwrap_or(0);
    let region = RemoteRegion::new(remote.clone(), heap.clone(), config)
        .map_err(|e| fail(format!("the program's heap: {}", e.chain())))?;
    let forwarding = signals.and_then(|s| super::launch::forward_signals(s, pid as u32));

    let stop = AtomicBool::new(false);
    let rss = RssSamples::default();
    let (status, peak_rss) = std::thread::scope(|s| {
        let (stop, rss, region) = (&stop, &rss, &region);
        let mut agent = Agent::new(region, heap);
        s.spawn(move || agent.answer_calls(stop));
        s.spawn(move || rss.sample(pid, region, stop));
        // `uzswap stat` and `uzswap param` while it runs.
        let live = move || stats_text(region, (args.memory_high, memory_max), rss.peak(), rss);
        s.spawn(move || super::agent_server::serve(region.zswap(), live, stop));
        let waited = uffd::process::wait_with_peak_rss(child);
        stop.store(true, Relaxed);
        waited
    })
    .map_err(|e| fail(format!("waiting for the program: {e}")))?;
    if let Some(h) = forwarding {
        h.close();
    }
    // The program's descendants that outlive it keep its seccomp filter: their calls are
    // answered (run as made) until the last is gone, or they would fail with ENOSYS.
    if let Some(listener) = remote.listener() {
        if let Err(e) = listener.continue_all_in_background() {
            crate::report::say(&format!(
                "the program's descendants left running may fail their mmap calls: {e}"
            ));
        }
    }
    if let Some(SwapTo::Redis(url)) = &args.swap_to {
        if let Err(e) = redis_tier::delete_run(url, super::launch::run_id()) {
            crate::report::say(&format!(
                "warning: the run's keys are left to their lease (a minute): {e}"
            ));
        }
    }
    let stats = stats_text(&region, (args.memory_high, memory_max), peak_rss, &rss);
    if let Some(path) = &args.stats_file {
        if let Err(e) = std::fs::write(path, &stats) {
            crate::report::say(&format!("writing the statistics: {e}"));
        }
    }
    if let Some(form) = args.stats {
        print_stats(&stats, form);
    }
    // uzswap exits next, the program gone: the region's threads need no orderly stop (a
    // handler sees it only at the end of its wait, up to 100 ms later).
    std::mem::forget(region);
    Ok(ExitCode::from(super::launch::exit_status(status)))
}

/// The heap's reservation in the program: `len` bytes of private anonymous memory, read-write
/// (what the program does not map reads as nothing: it is never told it is there), not
/// inherited by a child, base pages only.
fn reserve(remote: &RemoteProcess, len: usize) -> Result<Range<usize>, String> {
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
    let at = remote
        .map_anonymous(0, len, READ_WRITE, flags)
        .map_err(|e| format!("reserving the heap in the program: {e}"))?;
    for advice in [libc::MADV_DONTFORK, libc::MADV_NOHUGEPAGE] {
        remote
            .madvise(at, len, advice)
            .map_err(|e| format!("reserving the heap in the program: {e}"))?;
    }
    Ok(at..at + len)
}

/// The program's resident memory, sampled while it runs: the last sample stands for what it
/// held at exit.
#[derive(Default)]
struct RssSamples {
    /// Its resident memory at the last sample.
    rss: AtomicU64,
    /// Of that, what was not the region's resident pages.
    outside: AtomicU64,
    /// The most it held at a sample.
    peak: AtomicU64,
}

impl RssSamples {
    /// The most the program held at a sample so far.
    fn peak(&self) -> u64 {
        self.peak.load(Relaxed)
    }

    fn sample(&self, pid: i32, region: &RemoteRegion, stop: &AtomicBool) {
        while !stop.load(Relaxed) {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status"));
            let rss = status.ok().and_then(|s| {
                let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
                let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
                Some(kib * 1024)
            });
            if let Some(rss) = rss {
                let resident = region.usage().resident;
                self.rss.store(rss, Relaxed);
                self.peak.fetch_max(rss, Relaxed);
                self.outside.store(rss.saturating_sub(resident), Relaxed);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// The program's calls of the mmap family, answered over its reservation.
struct Agent<'a> {
    region: &'a RemoteRegion,
    remote: &'a RemoteProcess,
    space: AddressSpace,
    /// The program's first break (read at the first call to `brk`).
    brk: Option<usize>,
    /// A mapping has been left outside the reservation (said once).
    said_outside: bool,
    /// An `execve` of the program has been said.
    said_exec: bool,
    /// A lock of heap memory (`mlock`, `mlockall`) has been said.
    said_lock: bool,
}

impl<'a> Agent<'a> {
    fn new(region: &'a RemoteRegion, heap: Range<usize>) -> Self {
        Agent {
            region,
            remote: region.process(),
            space: AddressSpace::new(heap),
            brk: None,
            said_outside: false,
            said_exec: false,
            said_lock: false,
        }
    }

    fn answer_calls(&mut self, stop: &AtomicBool) {
        let listener = self.remote.listener().expect("the calls are intercepted");
        while !stop.load(Relaxed) {
            if !listener.wait(Duration::from_millis(5)).unwrap_or(false) {
                continue;
            }
            let Ok(call) = listener.recv() else { continue };
            if call.pid == self.remote.pid() && self.forks(&call) {
                self.fork(listener, &call);
                continue;
            }
            let answer = if call.pid != self.remote.pid() {
                Answer::Continue
            } else if self.remote.alive() {
                self.answer(&call)
            } else {
                // The parasite went with the image: the program ran another.
                if !self.said_exec {
                    self.said_exec = true;
                    crate::report::say(
                        "the program ran another program (execve): what that one maps is not \
                         held",
                    );
                }
                Answer::Continue
            };
            // An error: the call's thread is gone (killed meanwhile).
            let _ = listener.answer(call.id, answer);
        }
    }

    fn answer(&mut self, call: &SyscallNotice) -> Answer {
        let [a, b, c, d, e, _] = call.args;
        let addr = a as usize;
        match call.nr {
            libc::SYS_brk => return self.brk(addr),
            libc::SYS_fork | libc::SYS_clone | libc::SYS_clone3 => return Answer::Continue,
            libc::SYS_mlockall => return self.lock_all(a as i32),
            _ => {}
        }
        // A lock's range starts at the page its address is in, its length growing by as much
        // (wrapping, as the kernel's arithmetic does).
        let (addr, b) = match call.nr {
            libc::SYS_mlock | libc::SYS_mlock2 | libc::SYS_munlock => {
                let start = addr & !(PAGE_SIZE - 1);
                (start, b.wrapping_add((addr - start) as u64))
            }
            _ => (addr, b),
        };
        // The rest take a range: one the kernel refuses (EINVAL), or an empty one (nothing to
        // do, or refused), runs as made.
        let Some(len) = (b as usize).checked_next_multiple_of(PAGE_SIZE) else {
            return Answer::Continue;
        };
        if (len == 0 && call.nr != libc::SYS_mremap) || (call.nr == libc::SYS_mremap && b == 0) {
            return Answer::Continue;
        }
        if call.nr != libc::SYS_mmap && !addr.is_multiple_of(PAGE_SIZE) {
            return Answer::Continue;
        }
        let result = match call.nr {
            libc::SYS_mmap => self.mmap(addr, len, c as i32, d as i32, e as i32),
            libc::SYS_munmap => self.munmap(addr, len),
            libc::SYS_mremap => self.mremap(addr, len, c as usize, d as i32),
            libc::SYS_mprotect => self.mprotect(addr, len, c as i32),
            libc::SYS_pkey_mprotect => match self.mprotect(addr, len, c as i32) {
                // Protected here as asked; the kernel then sets the same protection again,
                // with the key.
                Ok(Some(_)) => Ok(None),
                other => other,
            },
            libc::SYS_madvise => self.madvise(addr, len, c as i32),
            libc::SYS_mlock => self.lock(addr, len, 0, true),
            libc::SYS_mlock2 => self.lock(addr, len, c as i32, true),
            libc::SYS_munlock => self.lock(addr, len, 0, false),
            _ => return Answer::Continue,
        };
        match result {
            Ok(Some(value)) => Answer::Return(value as i64),
            Ok(None) => Answer::Continue,
            Err(errno) => Answer::Fail(errno),
        }
    }

    /// `mmap(addr, len, prot, flags, fd, _)`: Some(address) where placed, None to run it as
    /// made, an errno to fail it with.
    fn mmap(
        &mut self,
        addr: usize,
        len: usize,
        prot: i32,
        flags: i32,
        fd: i32,
    ) -> Result<Option<usize>, i32> {
        let private = flags & libc::MAP_TYPE == libc::MAP_PRIVATE;
        let not_ours = libc::MAP_STACK | libc::MAP_GROWSDOWN | libc::MAP_HUGETLB | libc::MAP_32BIT;
        let anonymous = flags & libc::MAP_ANONYMOUS != 0 && fd == -1;
        if !private || !anonymous || flags & not_ours != 0 || len == 0 {
            return match self.space.overlaps(addr, len) && flags & libc::MAP_FIXED != 0 {
                // Something else over the heap: refused, as a clash of mappings would be.
                true => Err(libc::ENOMEM),
                false => Ok(None),
            };
        }
        let fixed = flags & (libc::MAP_FIXED | libc::MAP_FIXED_NOREPLACE) != 0;
        if fixed && !addr.is_multiple_of(PAGE_SIZE) {
            return Err(libc::EINVAL);
        }
        let hint = addr & !(PAGE_SIZE - 1);
        let at = if fixed {
            if !self.space.contains(addr, len) {
                return match self.space.overlaps(addr, len) {
                    true => Err(libc::ENOMEM),
                    false => Ok(None),
                };
            }
            if !self.space.is_free(addr, len) {
                if flags & libc::MAP_FIXED_NOREPLACE != 0 {
                    return Err(libc::EEXIST);
                }
                // MAP_FIXED: what was there is gone; the new mapping reads as zeros.
                self.unmap(addr, len)?;
            }
            self.space.take(addr, len);
            addr
        } else if hint != 0 && self.space.contains(hint, len) && self.space.is_free(hint, len) {
            self.space.take(hint, len);
            hint
        } else {
            match self.space.place(len) {
                Some(at) => at,
                None => {
                    if !self.said_outside {
                        self.said_outside = true;
                        crate::report::say(&format!(
                            "the program maps more than its heap's address space holds \
                             (--max-heap {}): what does not fit is outside the limit",
                            crate::report::mib(self.region.range().len() as u64)
                        ));
                    }
                    return Ok(None);
                }
            }
        };
        if prot != READ_WRITE {
            if let Err(e) = self.protect(at, len, prot) {
                let _ = self.unmap(at, len);
                return Err(e);
            }
        }
        Ok(Some(at))
    }

    /// `mlock`, `mlock2(flags)` (`locks`) or `munlock` of `addr..addr + len`: over the
    /// heap, checked as the kernel checks it and done as far as uzswap can (nothing: its pages
    /// stay evictable, said once), the rest of the range left unlocked; elsewhere run as made.
    fn lock(
        &mut self,
        addr: usize,
        len: usize,
        flags: i32,
        locks: bool,
    ) -> Result<Option<usize>, i32> {
        if !self.space.overlaps(addr, len) {
            return Ok(None);
        }
        if flags & !(libc::MLOCK_ONFAULT as i32) != 0 {
            return Err(libc::EINVAL);
        }
        // As the kernel: every page of the range must be mapped (here, its part in the heap).
        let heap = self.region.range();
        let (start, end) = (addr.max(heap.start), addr.saturating_add(len).min(heap.end));
        if !self.space.is_mapped(start, end - start) {
            return Err(libc::ENOMEM);
        }
        if locks {
            self.say_lock();
        }
        Ok(Some(0))
    }

    /// `mlockall(flags)`: as made, it would fault in the whole reservation (every page of
    /// `--max-heap`) and lock it there; answered as done once its flags are checked as the
    /// kernel checks them, and said once. (`munlockall` runs as made.)
    fn lock_all(&mut self, flags: i32) -> Answer {
        let known = libc::MCL_CURRENT | libc::MCL_FUTURE | libc::MCL_ONFAULT;
        if flags & !known != 0 || flags & (libc::MCL_CURRENT | libc::MCL_FUTURE) == 0 {
            return Answer::Fail(libc::EINVAL);
        }
        self.say_lock();
        Answer::Return(0)
    }

    fn say_lock(&mut self) {
        if !self.said_lock {
            self.said_lock = true;
            crate::report::say(
                "the program locks memory (mlock, mlockall): its heap is not locked (uzswap \
                 may compress it and write it to the swap file like the rest), nor, after \
                 mlockall, the rest of its memory",
            );
        }
    }

    /// `munmap(addr, len)`: Some(0) for a range inside the heap, None for one outside it.
    fn munmap(&mut self, addr: usize, len: usize) -> Result<Option<usize>, i32> {
        if !self.space.overlaps(addr, len) {
            return Ok(None);
        }
        if !self.space.contains(addr, len) {
            return Err(libc::EINVAL); // across the heap's edge: not a range it gave out
        }
        self.unmap(addr, len)?;
        Ok(Some(0))
    }

    /// Let go of `addr..addr + len` of the heap: its pages discarded (the region frees what it
    /// held for them), read-write again, and free for the next mapping.
    fn unmap(&mut self, addr: usize, len: usize) -> Result<(), i32> {
        // Made read-write through the program (a round trip to it) only where it is not, or
        // may not be (a protect that failed part way).
        if self.space.any_protected(addr, len) {
            self.protect(addr, len, READ_WRITE)?;
        }
        self.remote.discard(&[(addr, len)]).map_err(errno)?;
        self.space.free(addr, len);
        Ok(())
    }

    /// `mremap(addr, old_len, new_len, flags)` of a mapping in the heap.
    fn mremap(
        &mut self,
        addr: usize,
        old_len: usize,
        new_len: usize,
        flags: i32,
    ) -> Result<Option<usize>, i32> {
        if !self.space.overlaps(addr, old_len) {
            return Ok(None);
        }
        let Some(new_len) = new_len.checked_next_multiple_of(PAGE_SIZE) else {
            return Err(libc::EINVAL);
        };
        if !self.space.contains(addr, old_len) || new_len == 0 || flags & !libc::MREMAP_MAYMOVE != 0
        {
            return Err(libc::EINVAL);
        }
        if !self.space.is_mapped(addr, PAGE_SIZE) {
            return Err(libc::EFAULT);
        }
        if new_len <= old_len {
            if new_len < old_len {
                self.unmap(addr + new_len, old_len - new_len)?;
            }
            return Ok(Some(addr));
        }
        // The kernel grows one mapping: its protection goes with it, and to what it grows by.
        let prot = match self.space.is_mapped(addr, old_len) {
            true => self.space.protection(addr, old_len),
            false => None,
        };
        let Some(prot) = prot else {
            return Err(libc::EFAULT);
        };
        let grown = addr + old_len;
        if self.space.contains(grown, new_len - old_len)
            && self.space.is_free(grown, new_len - old_len)
        {
            self.space.take(grown, new_len - old_len);
            if prot != READ_WRITE {
                if let Err(e) = self.protect(grown, new_len - old_len, prot) {
                    let _ = self.unmap(grown, new_len - old_len);
                    return Err(e);
                }
            }
            return Ok(Some(addr));
        }
        if flags & libc::MREMAP_MAYMOVE == 0 {
            return Err(libc::ENOMEM);
        }
        let Some(to) = self.space.place(new_len) else {
            return Err(libc::ENOMEM);
        };
        // Copied from a readable source into the new place, read-write, which then gets the
        // mapping's protection.
        let readable = prot & libc::PROT_READ != 0;
        let moved = match readable {
            true => Ok(()),
            false => self.protect(addr, old_len, libc::PROT_READ),
        }
        .and_then(|()| self.copy(addr, to, old_len))
        .and_then(|()| match prot {
            READ_WRITE => Ok(()),
            _ => self.protect(to, new_len, prot),
        });
        if let Err(e) = moved {
            let _ = self.unmap(to, new_len);
            if !readable {
                let _ = self.protect(addr, old_len, prot);
            }
            return Err(e);
        }
        if let Err(e) = self.unmap(addr, old_len) {
            let _ = self.unmap(to, new_len);
            if !readable {
                let _ = self.protect(addr, old_len, prot);
            }
            return Err(e);
        }
        Ok(Some(to))
    }

    /// Copy `len` bytes from `from` to `to` in the program, a MiB at a time (the region
    /// serves the faults either side takes), into fresh memory: a MiB the region holds
    /// nothing for reads as zero, as `to` does already, and is not read (reading it would
    /// fault it in: a large reservation moved would fill the heap with zeros).
    fn copy(&self, from: usize, to: usize, len: usize) -> Result<(), i32> {
        let mut buf = vec![0u8; len.min(1 << 20)];
        let base = self.region.range().start;
        for done in (0..len).step_by(buf.len()) {
            let n = buf.len().min(len - done);
            if self.region.holds_nothing(from + done - base, n) {
                continue;
            }
            self.remote
                .read(from + done, &mut buf[..n])
                .map_err(errno)?;
            self.remote.write(to + done, &buf[..n]).map_err(errno)?;
        }
        Ok(())
    }

    /// `mprotect(addr, len, prot)` of memory in the heap, through the region.
    fn mprotect(&mut self, addr: usize, len: usize, prot: i32) -> Result<Option<usize>, i32> {
        if !self.space.overlaps(addr, len) {
            return Ok(None);
        }
        // As the kernel: every page of the range must be mapped.
        if !self.space.contains(addr, len) || !self.space.is_mapped(addr, len) {
            return Err(libc::ENOMEM);
        }
        self.protect(addr, len, prot)?;
        Ok(Some(0))
    }

    /// Give `addr..addr + len` of the heap the protection `prot`, in the program and in
    /// the region (whose reclaim leaves pages that are not read-write alone).
    /// A failure may leave part of the range changed: it is recorded as of no known
    /// protection, which the next unmap of it resets.
    fn protect(&mut self, addr: usize, len: usize, prot: i32) -> Result<(), i32> {
        let offset = addr - self.region.range().start;
        let result = self.region.protect(offset, len, prot).map_err(errno);
        let now = match result {
            Ok(()) => prot,
            Err(_) => UNKNOWN_PROTECTION,
        };
        self.space.set_protection(addr, len, now);
        result
    }

    /// Whether `call` makes a child without the program's memory: `fork`, or a `clone`
    /// without `CLONE_VM`.
    fn forks(&self, call: &SyscallNotice) -> bool {
        let flags = match call.nr {
            libc::SYS_fork => 0,
            libc::SYS_clone => call.args[0],
            libc::SYS_clone3 => {
                // struct clone_args starts with its flags (on the caller's stack).
                let mut flags = [0u8; 8];
                match self.remote.read(call.args[0] as usize, &mut flags) {
                    Ok(()) => u64::from_ne_bytes(flags),
                    Err(_) => return false, // the kernel refuses it (EFAULT)
                }
            }
            _ => return false,
        };
        flags & libc::CLONE_VM as u64 == 0 && self.remote.alive()
    }

    /// Let the fork `call` run with the heap brought back and inherited, until the child is
    /// made (or a second has passed: a fork that failed, or a child gone already).
    fn fork(&self, listener: &uffd::remote::SyscallListener, call: &SyscallNotice) {
        let path = format!("/proc/{}/task/{}/children", self.remote.pid(), call.tid);
        let children = || -> std::collections::BTreeSet<u32> {
            let list = std::fs::read_to_string(&path).unwrap_or_default();
            list.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        };
        let before = children();
        let guard = self.region.prepare_fork();
        if let Err(e) = &guard {
            crate::report::say(&format!(
                "a fork of the program: its heap could not be handed to the child ({e}): \
                 the child gets SIGSEGV there"
            ));
        }
        let _ = listener.answer(call.id, Answer::Continue);
        // The kernel puts the child on its parent's list once its memory is copied.
        let deadline = std::time::Instant::now() + Duration::from_secs(1);
        while children().is_subset(&before) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(50));
        }
        drop(guard);
    }

    /// `brk(addr)`: up to a MiB past the first break runs as made; past it the break stays
    /// where it is (malloc maps its heap instead).
    fn brk(&mut self, addr: usize) -> Answer {
        if self.brk.is_none() {
            self.brk = self.remote.current_break().ok();
        }
        match self.brk {
            Some(first) if addr > first + (1 << 20) => match self.remote.current_break() {
                Ok(now) => Answer::Return(now as i64),
                Err(_) => Answer::Continue,
            },
            _ => Answer::Continue,
        }
    }

    /// `madvise`: huge pages in the heap are not made (the region keeps base pages).
    fn madvise(&self, addr: usize, len: usize, advice: i32) -> Result<Option<usize>, i32> {
        let huge = matches!(advice, libc::MADV_HUGEPAGE | libc::MADV_COLLAPSE);
        match huge && self.space.overlaps(addr, len) {
            true => Ok(Some(0)),
            false => Ok(None),
        }
    }
}

/// An error's errno, for the program (EFAULT where it has none: the program is gone).
fn errno(e: std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EFAULT)
}

/// The region's statistics at the program's exit, in the preload's form
/// (crates/preload/src/stats.rs).
fn stats_text(
    region: &RemoteRegion,
    (memory_high, memory_max): (u64, u64),
    peak_rss: u64,
    rss: &RssSamples,
) -> String {
    let mut text = region.stats_text(&region.usage(), memory_high, memory_max);
    for (name, value) in [
        ("peak_rss_bytes", peak_rss),
        ("rss_bytes", rss.rss.load(Relaxed)),
        ("outside_bytes", rss.outside.load(Relaxed)),
    ] {
        text.push_str(&format!("{name} {value}\n"));
    }
    text
}

/// `--stats`: `text` printed as `run` prints the preload's.
fn print_stats(text: &str, form: StatsForm) {
    match crate::stat::Snapshot::parse(text) {
        Ok(stats) => match form {
            StatsForm::Summary => eprint!("{}", crate::stat::summary::summary(&stats)),
            StatsForm::Full => eprint!("{}", stats.used_orders_only().text()),
        },
        Err(e) => crate::report::say(&format!("the program's statistics: {e}")),
    }
}
