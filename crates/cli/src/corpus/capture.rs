//! Reading a running process's anonymous memory into a page file.
//!
//! The anonymous private mappings come from `/proc/PID/maps` (the heap, anonymous mmaps, named
//! anonymous memory and the stack; not file-backed or shared mappings, not `[vvar]`, `[vdso]`
//! or `[vsyscall]`), `/proc/PID/pagemap` says which pages are in memory (present or swapped
//! out), and the pages are read with `pread` on `/proc/PID/mem`. The file is made of blocks of
//! [`BLOCK_PAGES`] virtually contiguous pages: each block is one 64 KiB-aligned stretch of the
//! address space whose pages are all in memory, so reserved but untouched memory gives no zero
//! pages, and the file serves 4 KiB page tests and 64 KiB large-folio tests alike. The blocks
//! are sampled evenly over all such blocks, in address order.
//!
//! Reading another process's memory needs ptrace access to it (root; or its own user with
//! `kernel.yama.ptrace_scope` 0; or, at `ptrace_scope` 1, its parent): a refusal is an error
//! that says so.

use std::ffi::OsString;
use std::fs::File;
use std::io::ErrorKind;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use zswap::PAGE_SIZE;

/// Pages in a block: one 64 KiB-aligned stretch of address space.
pub const BLOCK_PAGES: usize = 16;
/// Bytes in a block.
pub const BLOCK_BYTES: usize = BLOCK_PAGES * PAGE_SIZE;

/// pagemap entry: the page is in RAM.
const PM_PRESENT: u64 = 1 << 63;
/// pagemap entry: the page is in swap.
const PM_SWAPPED: u64 = 1 << 62;
/// pagemap entries read at once (512 KiB of entries, 256 MiB of address space).
const PAGEMAP_CHUNK: usize = 64 * 1024;

/// Why a capture failed; the message names the process or program, or the /proc file.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// A line of a maps file that does not parse.
    #[error("bad maps line: {0:?}")]
    BadMapsLine(String),
    /// Fewer pages asked than a block holds.
    #[error("at least {BLOCK_PAGES} pages (one 64 KiB block) are captured, {0} asked")]
    TooFewPages(usize),
    /// No such process.
    #[error("no process {0}")]
    NoProcess(u32),
    /// Reading the process's memory is not allowed; the message says what allows it.
    #[error(
        "{path}: permission denied: reading another process's memory needs ptrace access to \
         it: run as root, or as its user{yama_hint}, or start the program with `-- PROG ARGS`"
    )]
    PermissionDenied {
        /// The /proc file refused.
        path: String,
        /// What Yama asks of the same user, if it restricts ptrace.
        yama_hint: String,
    },
    /// A /proc file of the process cannot be read.
    #[error("cannot read {path}")]
    Proc {
        /// The /proc file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The process's memory cannot be read at a block it has in memory.
    #[error("cannot read /proc/{pid}/mem at {addr:#x}")]
    Mem {
        /// The process.
        pid: u32,
        /// The block's address.
        addr: u64,
        /// Why.
        source: std::io::Error,
    },
    /// No block of the process's anonymous memory is wholly in memory.
    #[error(
        "process {pid} ({comm}) has no anonymous memory to capture: no 64 KiB-aligned block \
         of its {mappings} anonymous mappings ({kib} KiB) is wholly in memory"
    )]
    NothingResident {
        /// The process.
        pid: u32,
        /// Its command name.
        comm: String,
        /// Its anonymous private mappings, merged.
        mappings: usize,
        /// Their size in KiB.
        kib: u64,
    },
    /// Every block chosen went away before it was read.
    #[error("process {pid} ({comm}): none of the {blocks} blocks chosen could be read")]
    NoneReadable {
        /// The process.
        pid: u32,
        /// Its command name.
        comm: String,
        /// The blocks chosen.
        blocks: usize,
    },
    /// An empty program line.
    #[error("no program given")]
    NoProgram,
    /// The program could not be started.
    #[error("cannot start {program}")]
    Start {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// Waiting for the program failed.
    #[error("waiting for {program}")]
    Wait {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// The program ended before the capture was due.
    #[error(
        "{program} ended ({status}) before the capture (due {after:.1} s after its start): \
         give a shorter --after, or keep it running (it may stop itself with SIGSTOP when \
         ready)"
    )]
    EndedBefore {
        /// The program.
        program: String,
        /// How it ended.
        status: std::process::ExitStatus,
        /// When the capture was due, in seconds after its start.
        after: f64,
    },
    /// The program could not be stopped.
    #[error("cannot stop {program} (pid {pid})")]
    Stop {
        /// The program.
        program: String,
        /// Its pid.
        pid: u32,
        /// Why.
        source: rustix::io::Errno,
    },
    /// The program ended as it was being stopped.
    #[error("{program} ended ({status}) as it was stopped for the capture")]
    EndedStopping {
        /// The program.
        program: String,
        /// How it ended.
        status: std::process::ExitStatus,
    },
    /// The program did not stop in time.
    #[error("{program} (pid {pid}) did not stop within 5 s of SIGSTOP")]
    DidNotStop {
        /// The program.
        program: String,
        /// Its pid.
        pid: u32,
    },
}

/// One line of `/proc/PID/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// `rwxp` / `rw-s` ...
    pub perms: String,
    /// The inode of the file mapped; 0 for anonymous memory.
    pub inode: u64,
    /// The path or pseudo-name (`[heap]`, `[anon:NAME]`), empty for plain anonymous memory.
    pub name: String,
}

impl Mapping {
    /// Anonymous, private and readable: memory the kernel's zswap could hold. The stack
    /// counts; `[vvar]`, `[vdso]`, `[vsyscall]` and other kernel pseudo-mappings do not.
    pub fn is_anonymous_private(&self) -> bool {
        let p = self.perms.as_bytes();
        let named_ok = self.name.is_empty()
            || self.name == "[heap]"
            || self.name == "[stack]"
            || self.name.starts_with("[anon:");
        p.len() == 4 && p[0] == b'r' && p[3] == b'p' && self.inode == 0 && named_ok
    }
}

/// Parse `/proc/PID/maps`. A line that does not parse is an error (the format is the kernel's,
/// so a bad line means the text is not a maps file).
pub fn parse_maps(text: &str) -> Result<Vec<Mapping>, CaptureError> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            parse_maps_line(line).ok_or_else(|| CaptureError::BadMapsLine(line.to_string()))
        })
        .collect()
}

fn parse_maps_line(line: &str) -> Option<Mapping> {
    let mut rest = line;
    let mut field = || {
        let t = rest.trim_start();
        let end = t.find(char::is_whitespace).unwrap_or(t.len());
        let (f, r) = t.split_at(end);
        rest = r;
        (!f.is_empty()).then_some(f)
    };
    let range = field()?;
    let perms = field()?.to_string();
    let _offset = field()?;
    let _dev = field()?;
    let inode = field()?.parse().ok()?;
    let name = rest.trim().to_string();
    let (s, e) = range.split_once('-')?;
    let start = u64::from_str_radix(s, 16).ok()?;
    let end = u64::from_str_radix(e, 16).ok()?;
    (start < end).then_some(Mapping {
        start,
        end,
        perms,
        inode,
        name,
    })
}

/// The anonymous private mappings as address ranges, in order, adjacent ones merged (a heap
/// split by `mprotect` is one stretch of memory, and a 64 KiB block may cross the split).
pub fn anonymous_ranges(maps: &[Mapping]) -> Vec<Range<u64>> {
    let mut ranges: Vec<Range<u64>> = maps
        .iter()
        .filter(|m| m.is_anonymous_private())
        .map(|m| m.start..m.end)
        .collect();
    ranges.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match merged.last_mut() {
            Some(last) if last.end == r.start => last.end = r.end,
            _ => merged.push(r),
        }
    }
    merged
}

/// The 64 KiB-aligned part of a range: the addresses of the whole blocks inside it.
pub fn aligned_blocks(range: &Range<u64>) -> Range<u64> {
    let b = BLOCK_BYTES as u64;
    let start = range.start.div_ceil(b) * b;
    let end = range.end / b * b;
    start..end.max(start)
}

/// `k` indices spread evenly over `0..n` (all of them when `k >= n`), in order.
pub fn sample_evenly(n: usize, k: usize) -> Vec<usize> {
    if k >= n {
        return (0..n).collect();
    }
    (0..k).map(|i| i * n / k).collect()
}

/// The start addresses of the blocks of `ranges` whose pages are all in memory (present or
/// in swap), from the process's pagemap.
pub fn resident_blocks(pagemap: &File, ranges: &[Range<u64>]) -> std::io::Result<Vec<u64>> {
    let mut blocks = Vec::new();
    let mut buf = vec![0u8; PAGEMAP_CHUNK * 8];
    for range in ranges {
        let aligned = aligned_blocks(range);
        let mut addr = aligned.start;
        while addr < aligned.end {
            let pages = ((aligned.end - addr) as usize / PAGE_SIZE).min(PAGEMAP_CHUNK);
            let want = &mut buf[..pages * 8];
            let got = read_full_at(pagemap, want, addr / PAGE_SIZE as u64 * 8)?;
            // A short read: the mapping went away meanwhile; what was read still counts.
            let entries: Vec<u64> = want[..got / 8 * 8]
                .chunks_exact(8)
                .map(|e| u64::from_ne_bytes(e.try_into().unwrap()))
                .collect();
            for (i, block) in entries.chunks_exact(BLOCK_PAGES).enumerate() {
                if block.iter().all(|&e| e & (PM_PRESENT | PM_SWAPPED) != 0) {
                    blocks.push(addr + (i * BLOCK_BYTES) as u64);
                }
            }
            if got < want.len() {
                break;
            }
            addr += (pages * PAGE_SIZE) as u64;
        }
    }
    Ok(blocks)
}

/// `pread` until `buf` is full or the file ends; the bytes read.
fn read_full_at(f: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// What a capture read.
#[derive(Debug, Clone)]
pub struct Capture {
    /// The process read.
    pub pid: u32,
    /// The process's command name (`/proc/PID/comm`).
    pub comm: String,
    /// The pages, in blocks of [`BLOCK_PAGES`] virtually contiguous pages.
    pub data: Vec<u8>,
    /// Bytes of the process's anonymous private mappings.
    pub anonymous_bytes: u64,
    /// Blocks of those mappings wholly in memory: the ones sampled from.
    pub resident_blocks: usize,
    /// Sampled blocks that could not be read (unmapped meanwhile): left out.
    pub unreadable_blocks: usize,
}

impl Capture {
    /// Pages captured.
    pub fn nr_pages(&self) -> usize {
        self.data.len() / PAGE_SIZE
    }

    /// Pages that hold nothing but zero bytes.
    pub fn zero_pages(&self) -> usize {
        self.data
            .chunks_exact(PAGE_SIZE)
            .filter(|p| p.iter().all(|&b| b == 0))
            .count()
    }
}

/// Open a file of `/proc/PID/`, with errors that say what to do.
fn open_proc(pid: u32, file: &str) -> Result<File, CaptureError> {
    let path = format!("/proc/{pid}/{file}");
    File::open(&path).map_err(|e| match e.kind() {
        ErrorKind::NotFound => CaptureError::NoProcess(pid),
        ErrorKind::PermissionDenied => permission_denied(path),
        _ => CaptureError::Proc { path, source: e },
    })
}

fn permission_denied(path: String) -> CaptureError {
    CaptureError::PermissionDenied {
        path,
        yama_hint: yama_hint(),
    }
}

/// Where Yama restricts ptrace, what it takes as the same user.
fn yama_hint() -> String {
    match std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope") {
        Ok(s) if s.trim() != "0" => {
            format!(" with kernel.yama.ptrace_scope 0 (it is {})", s.trim())
        }
        _ => String::new(),
    }
}

/// Capture up to `max_pages` pages (whole blocks of [`BLOCK_PAGES`]) of process `pid`'s
/// anonymous memory. The process keeps running: a page it writes while it is read may be
/// torn (`capture_program` stops its program first).
pub fn capture_pid(pid: u32, max_pages: usize) -> Result<Capture, CaptureError> {
    if max_pages < BLOCK_PAGES {
        return Err(CaptureError::TooFewPages(max_pages));
    }
    let proc_error = |file: &str, source| CaptureError::Proc {
        path: format!("/proc/{pid}/{file}"),
        source,
    };
    let maps_file = open_proc(pid, "maps")?;
    let mut maps_text = Vec::new();
    std::io::Read::read_to_end(&mut &maps_file, &mut maps_text)
        .map_err(|e| proc_error("maps", e))?;
    let maps = parse_maps(&String::from_utf8_lossy(&maps_text))?;
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let ranges = anonymous_ranges(&maps);
    let anonymous_bytes = ranges.iter().map(|r| r.end - r.start).sum();
    let blocks = if ranges.is_empty() {
        Vec::new()
    } else {
        let pagemap = open_proc(pid, "pagemap")?;
        resident_blocks(&pagemap, &ranges).map_err(|e| proc_error("pagemap", e))?
    };
    if blocks.is_empty() {
        return Err(CaptureError::NothingResident {
            pid,
            comm,
            mappings: ranges.len(),
            kib: anonymous_bytes / 1024,
        });
    }
    let mem = open_proc(pid, "mem")?;
    let chosen = sample_evenly(blocks.len(), max_pages / BLOCK_PAGES);
    let mut data = Vec::with_capacity(chosen.len() * BLOCK_BYTES);
    let mut unreadable_blocks = 0;
    let mut block = vec![0u8; BLOCK_BYTES];
    for i in chosen {
        match read_full_at(&mem, &mut block, blocks[i]) {
            Ok(n) if n == BLOCK_BYTES => data.extend_from_slice(&block),
            Ok(_) => unreadable_blocks += 1,
            // The kernel answers EIO for an address no longer mapped.
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::IO.raw_os_error()) => {
                unreadable_blocks += 1
            }
            Err(e) if e.kind() == ErrorKind::PermissionDenied => {
                return Err(permission_denied(format!("/proc/{pid}/mem")))
            }
            Err(source) => {
                return Err(CaptureError::Mem {
                    pid,
                    addr: blocks[i],
                    source,
                })
            }
        }
    }
    if data.is_empty() {
        return Err(CaptureError::NoneReadable {
            pid,
            comm,
            blocks: unreadable_blocks,
        });
    }
    Ok(Capture {
        pid,
        comm,
        data,
        anonymous_bytes,
        resident_blocks: blocks.len(),
        unreadable_blocks,
    })
}

/// The state letter of `/proc/PID/stat` (`R`, `S`, `T` stopped, ...), if the process exists.
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold anything: the state follows the last ')'.
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

fn is_stopped(pid: u32) -> bool {
    matches!(process_state(pid), Some('T' | 't'))
}

/// A started program, killed (and reaped) when dropped.
struct Started(Child);

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `program` (its first element the executable, the rest its arguments), wait `after`
/// or until it stops itself (`kill -STOP $$`, `os.kill(os.getpid(), signal.SIGSTOP)`), whichever
/// comes first, stop it (SIGSTOP), capture it, and kill it. Its stdin and stdout are
/// /dev/null; its stderr is the caller's. A program that exits before the capture is an error.
pub fn capture_program(
    program: &[OsString],
    after: Duration,
    max_pages: usize,
) -> Result<Capture, CaptureError> {
    let Some((exe, args)) = program.split_first() else {
        return Err(CaptureError::NoProgram);
    };
    let shown = exe.to_string_lossy().into_owned();
    let child = Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .map_err(|source| CaptureError::Start {
            program: shown.clone(),
            source,
        })?;
    let mut child = Started(child);
    let pid = child.0.id();
    let try_wait = |child: &mut Started| {
        child.0.try_wait().map_err(|source| CaptureError::Wait {
            program: shown.clone(),
            source,
        })
    };
    let deadline = Instant::now() + after;
    loop {
        if let Some(status) = try_wait(&mut child)? {
            return Err(CaptureError::EndedBefore {
                program: shown,
                status,
                after: after.as_secs_f64(),
            });
        }
        if is_stopped(pid) || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // Stopped, its memory holds still while it is read. A child's pid is above 0.
    let raw = rustix::process::Pid::from_raw(pid as i32).expect("a child's pid");
    rustix::process::kill_process(raw, rustix::process::Signal::STOP).map_err(|source| {
        CaptureError::Stop {
            program: shown.clone(),
            pid,
            source,
        }
    })?;
    let stop_by = Instant::now() + Duration::from_secs(5);
    while !is_stopped(pid) {
        if let Some(status) = try_wait(&mut child)? {
            return Err(CaptureError::EndedStopping {
                program: shown,
                status,
            });
        }
        if Instant::now() >= stop_by {
            return Err(CaptureError::DidNotStop {
                program: shown,
                pid,
            });
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    capture_pid(pid, max_pages)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
5581a9a00000-5581a9a21000 r--p 00000000 08:01 1311 /usr/bin/python3.11
5581a9a21000-5581a9c00000 rw-p 00021000 08:01 1311 /usr/bin/python3.11
5581ab000000-5581ab100000 rw-p 00000000 00:00 0                          [heap]
5581ab100000-5581ab180000 r--p 00000000 00:00 0                          [heap]
7f0000000000-7f0000021000 rw-p 00000000 00:00 0 
7f0000021000-7f0004000000 ---p 00000000 00:00 0 
7f0010000000-7f0010100000 rw-s 00000000 00:01 2048                       /dev/zero (deleted)
7f0020000000-7f0020010000 rw-p 00000000 00:00 0                          [anon:glibc: malloc arena]
7f0030000000-7f0030001000 rw-p 00000000 00:00 0                          [anon_shmem:x]
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
7ffd00100000-7ffd00104000 r--p 00000000 00:00 0                          [vvar]
7ffd00104000-7ffd00106000 r-xp 00000000 00:00 0                          [vdso]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
";

    #[test]
    fn only_anonymous_private_readable_mappings_count() {
        let maps = parse_maps(MAPS).unwrap();
        assert_eq!(maps.len(), 13);
        assert_eq!(maps[2].name, "[heap]");
        assert_eq!(maps[6].name, "/dev/zero (deleted)");
        assert_eq!(maps[7].name, "[anon:glibc: malloc arena]");
        assert_eq!(maps[4].name, "");
        let names: Vec<(u64, &str)> = maps
            .iter()
            .filter(|m| m.is_anonymous_private())
            .map(|m| (m.start, m.name.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                (0x5581ab000000, "[heap]"),
                (0x5581ab100000, "[heap]"),
                (0x7f0000000000, ""),
                (0x7f0020000000, "[anon:glibc: malloc arena]"),
                (0x7ffd00000000, "[stack]"),
            ]
        );
    }

    #[test]
    fn adjacent_ranges_merge() {
        let ranges = anonymous_ranges(&parse_maps(MAPS).unwrap());
        assert_eq!(
            ranges,
            [
                0x5581ab000000..0x5581ab180000,
                0x7f0000000000..0x7f0000021000,
                0x7f0020000000..0x7f0020010000,
                0x7ffd00000000..0x7ffd00021000,
            ]
        );
    }

    #[test]
    fn bad_maps_lines_are_errors() {
        for bad in [
            "garbage",
            "1000-2000 rw-p",
            "2000-1000 rw-p 0 00:00 0",
            "x-2000 rw-p 0 00:00 0",
        ] {
            let e = parse_maps(bad).unwrap_err().to_string();
            assert!(e.contains("bad maps line"), "{e}");
        }
    }

    #[test]
    fn blocks_are_aligned_and_whole() {
        let b = BLOCK_BYTES as u64;
        assert_eq!(aligned_blocks(&(0..3 * b)), 0..3 * b);
        assert_eq!(aligned_blocks(&(1..3 * b + 5)), b..3 * b);
        assert_eq!(
            aligned_blocks(&(b + PAGE_SIZE as u64..2 * b - PAGE_SIZE as u64)).count(),
            0
        );
        let r = aligned_blocks(&(0x7f0000000000..0x7f0000021000));
        assert_eq!((r.start, r.end), (0x7f0000000000, 0x7f0000020000));
    }

    #[test]
    fn samples_spread_over_the_whole_range() {
        assert_eq!(sample_evenly(5, 10), [0, 1, 2, 3, 4]);
        assert_eq!(sample_evenly(10, 5), [0, 2, 4, 6, 8]);
        let s = sample_evenly(1000, 7);
        assert_eq!(s.len(), 7);
        assert!(s.windows(2).all(|w| w[0] < w[1]));
        assert!(s[6] >= 1000 * 6 / 7);
        assert!(sample_evenly(0, 3).is_empty());
    }

    /// The blocks of this process's own memory: a buffer it wrote is resident, whole, and
    /// reads back through /proc/self/mem as it is.
    #[test]
    fn own_memory_reads_back() {
        let marker = b"uzswap capture marker 5e1f";
        let mut buf = vec![0u8; 1 << 20];
        for (i, c) in buf.chunks_mut(64).enumerate() {
            c[..marker.len()].copy_from_slice(marker);
            c[32..40].copy_from_slice(&(i as u64).to_ne_bytes());
        }
        let pid = std::process::id();
        let maps = parse_maps(&std::fs::read_to_string("/proc/self/maps").unwrap()).unwrap();
        let ranges = anonymous_ranges(&maps);
        let blocks = resident_blocks(&File::open("/proc/self/pagemap").unwrap(), &ranges).unwrap();
        let start = buf.as_ptr() as u64;
        let end = start + buf.len() as u64;
        let inside: Vec<u64> = blocks
            .iter()
            .copied()
            .filter(|&b| b >= start && b + BLOCK_BYTES as u64 <= end)
            .collect();
        // 1 MiB holds at least 15 whole aligned blocks, all written.
        assert!(
            inside.len() >= 15,
            "{} blocks of the buffer resident",
            inside.len()
        );
        let mem = File::open(format!("/proc/{pid}/mem")).unwrap();
        let mut block = vec![0u8; BLOCK_BYTES];
        for b in inside {
            assert_eq!(read_full_at(&mem, &mut block, b).unwrap(), BLOCK_BYTES);
            let off = (b - start) as usize;
            assert!(block[..] == buf[off..off + BLOCK_BYTES]);
        }

        let c = capture_pid(pid, 64).unwrap();
        assert_eq!(c.data.len(), 64 * PAGE_SIZE);
        assert!(c.resident_blocks >= 15);
        assert!(c.zero_pages() < c.nr_pages());
        assert!(!c.comm.is_empty());
        std::hint::black_box(&buf);
    }

    #[test]
    fn no_process_and_too_few_pages_are_errors() {
        // Above the largest pid the kernel gives (2^22).
        let e = capture_pid(4_194_305, 2048).unwrap_err().to_string();
        assert_eq!(e, "no process 4194305");
        let e = capture_pid(std::process::id(), 15).unwrap_err().to_string();
        assert!(e.contains("at least 16 pages"), "{e}");
    }

    #[test]
    fn stat_state_is_read_past_the_command_name() {
        assert!(matches!(process_state(std::process::id()), Some('R' | 'S')));
        assert_eq!(process_state(4_194_305), None);
    }
}
