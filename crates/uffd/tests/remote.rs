//! Programs that load nothing of ours, a static C binary and a Go program, with their memory
//! served from the test's process (uffd::remote): every page of their heaps moved out
//! through the parasite, read from here, and brought back by faults served from here, byte
//! for byte; the program's descriptor table holds nothing of ours; and the kernel facts the
//! design rests on (UFFDIO_MOVE refused from outside the memory it moves).

#![cfg(target_arch = "x86_64")]

use std::io::{BufRead, BufReader, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use uffd::remote::{Answer, RemoteProcess};
use uffd::{CopyMode, Event, Features, Filled, RegisterMode, UffdError, PAGE_SIZE};

const STAGING: usize = 1 << 20;

fn programs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs")
}

fn out_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
}

/// The static C program, built once (the tests run at once).
fn static_c_program() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let out = out_dir().join("static_heap");
            let status = Command::new("cc")
                .args(["-O2", "-static", "-o"])
                .arg(&out)
                .arg(programs().join("static_heap.c"))
                .status()
                .expect("this test needs a C compiler: apt-get install build-essential");
            assert!(
                status.success(),
                "cc -static failed: static glibc (libc6-dev) is needed"
            );
            out
        })
        .clone()
}

fn go() -> PathBuf {
    let local = PathBuf::from("/usr/local/go/bin/go");
    if local.exists() {
        local
    } else {
        PathBuf::from("go")
    }
}

fn go_program() -> PathBuf {
    let out = out_dir().join("go_heap");
    let status = Command::new(go())
        .args(["build", "-o"])
        .arg(&out)
        .arg(programs().join("go_heap.go"))
        .env("CGO_ENABLED", "0")
        .env("GOCACHE", out_dir().join("gocache"))
        .env("GO111MODULE", "off")
        .status()
        .expect("this test needs Go: apt-get install golang-go");
    assert!(status.success(), "go build failed");
    out
}

/// The program started with its memory served from here, its stdin and stdout piped.
fn start(program: &Path) -> (Child, RemoteProcess) {
    let mut cmd = Command::new(program);
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
    RemoteProcess::spawn(&mut cmd, Features::MOVE, &[]).expect("starting the program")
}

/// The program's anonymous private read-write mappings of 1 MiB or more: its heap.
fn heap_ranges(pid: i32) -> Vec<Range<usize>> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    maps.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (a, b) = f[0].split_once('-')?;
            let (a, b) = (
                usize::from_str_radix(a, 16).ok()?,
                usize::from_str_radix(b, 16).ok()?,
            );
            (f[1] == "rw-p" && f[4] == "0" && f.len() == 5 && b - a >= 1 << 20).then_some(a..b)
        })
        .collect()
}

fn rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// What was moved out of one range: its bytes, and which pages there were.
struct Stored {
    range: Range<usize>,
    bytes: Vec<u8>,
    held: Vec<bool>,
}

/// Register every range and move each of its pages out through the staging area, keeping its
/// bytes here: the program is left with none of them.
fn evict_all(remote: &RemoteProcess, ranges: &[Range<usize>], register: bool) -> Vec<Stored> {
    let staging = remote.map_staging(STAGING).unwrap();
    let pagemap = std::fs::File::open(format!("/proc/{}/pagemap", remote.pid())).unwrap();
    let mut stored = Vec::new();
    for range in ranges {
        if register {
            remote
                .register(range.start, range.len(), RegisterMode::MISSING)
                .unwrap();
        }
        let mut s = Stored {
            range: range.clone(),
            bytes: vec![0; range.len()],
            held: vec![false; range.len() / PAGE_SIZE],
        };
        for off in (0..range.len()).step_by(STAGING) {
            let len = STAGING.min(range.len() - off);
            remote
                .move_out(staging.start, range.start + off, len, true)
                .unwrap();
            // Which staging pages hold one (a hole in the source left its slot empty).
            let mut entries = vec![0u8; len / PAGE_SIZE * 8];
            std::os::unix::fs::FileExt::read_exact_at(
                &pagemap,
                &mut entries,
                (staging.start / PAGE_SIZE * 8) as u64,
            )
            .unwrap();
            for (p, e) in entries.chunks(8).enumerate() {
                let e = u64::from_ne_bytes(e.try_into().unwrap());
                // Present, or in the kernel's swap.
                if e >> 62 == 0 {
                    continue;
                }
                let at = off + p * PAGE_SIZE;
                remote
                    .read(
                        staging.start + p * PAGE_SIZE,
                        &mut s.bytes[at..at + PAGE_SIZE],
                    )
                    .unwrap();
                s.held[at / PAGE_SIZE] = true;
            }
            remote.discard_staging(&[(staging.start, STAGING)]).unwrap();
        }
        stored.push(s);
    }
    stored
}

/// Serve the program's faults from `stored` (zeros for a page it does not hold) until
/// `stop`, counting them in `faults`.
fn serve(
    remote: &RemoteProcess,
    stored: &std::sync::Mutex<Vec<Stored>>,
    stop: &AtomicBool,
    faults: &AtomicU64,
) {
    let zero = vec![0u8; PAGE_SIZE];
    let mut events = Vec::new();
    while !stop.load(Relaxed) {
        if !remote
            .uffd()
            .wait_readable(Some(std::time::Duration::from_millis(20)))
            .unwrap()
        {
            continue;
        }
        events.clear();
        match remote.uffd().read_events(&mut events) {
            Ok(_) => {}
            Err(UffdError::ProcessGone { .. }) => return,
            Err(e) => panic!("reading events: {e}"),
        }
        for e in &events {
            let Event::Pagefault { addr, .. } = *e else {
                panic!("unexpected event {e:?}")
            };
            let page = addr & !(PAGE_SIZE - 1);
            let stored = stored.lock().unwrap();
            let src = stored
                .iter()
                .find(|s| s.range.contains(&page) && s.held[(page - s.range.start) / PAGE_SIZE])
                .map_or(&zero[..], |s| {
                    let at = page - s.range.start;
                    &s.bytes[at..at + PAGE_SIZE]
                });
            match remote.uffd().copy(page, src, CopyMode::default()) {
                Ok(Filled::All) => {}
                Ok(Filled::PageExists { .. }) => remote.uffd().wake(page, PAGE_SIZE).unwrap(),
                Err(e) => panic!("UFFDIO_COPY at {page:#x}: {e}"),
            }
            faults.fetch_add(1, Relaxed);
        }
    }
}

/// Run `program` (it prints a line when its heap is built, waits for one, checks its heap
/// and prints "bad N") with every page of its heap moved out and served back from here.
fn held_from_outside(program: &Path) {
    let (mut child, remote) = start(program);
    let pid = remote.pid();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();

    // Nothing of ours in the program's descriptor table (only what it inherited).
    let ours = ours_in_table(pid);
    assert!(
        ours.is_empty(),
        "uzswap's descriptors in the program: {ours:?}"
    );
    // The parasite's tables: one holds the staging userfaultfd alone (for its moves out).
    let tables: Vec<Vec<PathBuf>> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .map(|t| {
            std::fs::read_dir(t.unwrap().path().join("fd"))
                .unwrap()
                .filter_map(|e| std::fs::read_link(e.unwrap().path()).ok())
                .collect()
        })
        .collect();
    let parasite: Vec<&Vec<PathBuf>> = tables
        .iter()
        .filter(|t| {
            t.iter()
                .any(|f| f.to_string_lossy().contains("userfaultfd"))
        })
        .collect();
    assert!(
        parasite.len() == 1 && parasite[0].len() == 1,
        "tables holding a userfaultfd: {parasite:?}"
    );

    let ranges = heap_ranges(pid);
    let rss_before = rss_kib(pid);
    let stored = std::sync::Mutex::new(evict_all(&remote, &ranges, true));
    let rss_after = rss_kib(pid);
    let moved: usize = stored
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.held.iter().filter(|&&h| h).count())
        .sum();
    assert!(
        rss_after < 16 << 10 && moved * PAGE_SIZE >= 60 << 20,
        "{moved} pages moved out; RSS {rss_before} KiB before, {rss_after} KiB after"
    );

    let stop = AtomicBool::new(false);
    let faults = AtomicU64::new(0);
    std::thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        s.spawn(|| or_kill(pid, || serve(&remote, &stored, &stop, &faults)));
        // The threads stop when this scope's body ends, by a panic too.
        struct StopOnDrop<'a>(&'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Relaxed);
            }
        }
        let _stop = StopOnDrop(&stop);
        child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
        line.clear();
        stdout.read_line(&mut line).unwrap();
        let status = child.wait().unwrap();
        stop.store(true, Relaxed);
        assert_eq!(line.trim(), "bad 0", "the program found its heap changed");
        assert!(status.success(), "{status}");
    });
    assert!(
        faults.load(Relaxed) as usize >= moved / 2,
        "{} faults for {moved} pages moved out",
        faults.load(Relaxed)
    );
    // The program has ended: a call posted to its parasite fails, it does not wait forever.
    let t = std::time::Instant::now();
    assert!(remote.map_staging(STAGING).is_err());
    assert!(t.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn a_static_binary_s_heap_is_moved_out_and_served_back_from_outside() {
    held_from_outside(&static_c_program());
}

#[test]
fn a_go_program_s_heap_is_moved_out_and_served_back_from_outside() {
    held_from_outside(&go_program());
}

#[test]
fn the_kernel_refuses_a_move_from_outside_the_memory_it_moves() {
    let (mut child, remote) = start(&static_c_program());
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let heap = heap_ranges(remote.pid()).into_iter().next().unwrap();
    let staging = remote.map_staging(STAGING).unwrap();
    remote
        .register(heap.start, heap.len(), RegisterMode::MISSING)
        .unwrap();
    // From here, into a range registered with the userfaultfd that moves: refused, so
    // reclaim's moves go through the parasite.
    let rw = libc::PROT_READ | libc::PROT_WRITE;
    let private = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
    let dst = remote.map_anonymous(0, STAGING, rw, private).unwrap();
    remote
        .register(dst, STAGING, RegisterMode::MISSING)
        .unwrap();
    // SAFETY: both addresses are the program's, not this process's memory.
    let from_here = unsafe {
        remote
            .uffd()
            .move_pages(dst, heap.start, PAGE_SIZE, uffd::MoveMode::default())
    };
    assert!(
        matches!(from_here, Err(UffdError::InvalidArgument { .. })),
        "{from_here:?}"
    );
    // Through the parasite: moved.
    assert_eq!(
        remote
            .move_out(staging.start, heap.start, PAGE_SIZE, false)
            .unwrap(),
        PAGE_SIZE
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// Run `f` (a helper thread's body); if it panics, kill `pid` first, so that the test fails
/// instead of waiting forever on a program left waiting for the helper.
fn or_kill<T>(pid: i32, f: impl FnOnce() -> T) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(t) => t,
        Err(panic) => {
            // SAFETY: kill sends a signal to the test's child, not reaped while the test runs.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            std::panic::resume_unwind(panic)
        }
    }
}

/// Sets the flag when dropped: the helper threads stop when a test's body ends, by a panic
/// too.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Relaxed);
    }
}

/// uzswap's descriptors in the program's table: none may be there.
fn ours_in_table(pid: i32) -> Vec<PathBuf> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.unwrap().path()).ok())
        .filter(|f| {
            let f = f.to_string_lossy();
            f.contains("userfaultfd") || f.contains("uzswap") || f.contains("seccomp")
        })
        .collect()
}

#[test]
fn a_static_binary_s_mappings_are_placed_and_held_from_outside() {
    let mut cmd = Command::new(static_c_program());
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
    let (mut child, remote) =
        RemoteProcess::spawn(&mut cmd, Features::MOVE, &[libc::SYS_mmap]).unwrap();
    let pid = remote.pid();
    let listener = remote.listener().expect("mmap is intercepted");
    // A reservation in the program that its large anonymous mappings are placed in.
    let reserved_len = 1usize << 30;
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
    let reserved = remote
        .map_anonymous(
            0,
            reserved_len,
            libc::PROT_NONE,
            flags | libc::MAP_NORESERVE,
        )
        .unwrap();
    let reserved = reserved..reserved + reserved_len;

    let stop = AtomicBool::new(false);
    let placed = std::sync::Mutex::new(Vec::<Range<usize>>::new());
    let faults = AtomicU64::new(0);
    let stored = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        // Faults from the start: a placed mapping is registered before the program first
        // writes it.
        s.spawn(|| or_kill(pid, || serve(&remote, &stored, &stop, &faults)));
        // The placer: a private anonymous mapping of 1 MiB or more at no address asked, by
        // the program itself, is made in the reservation (on the parasite) and registered
        // before the program learns where it is; any other call runs as made.
        s.spawn(|| {
            or_kill(pid, || {
                let mut next = reserved.start;
                while !stop.load(Relaxed) {
                    if !listener
                        .wait(std::time::Duration::from_millis(20))
                        .unwrap_or(false)
                    {
                        continue;
                    }
                    let Ok(call) = listener.recv() else { continue };
                    let [addr, len, prot, f, fd, _] = call.args;
                    let len = (len as usize).next_multiple_of(PAGE_SIZE);
                    let ours = call.pid == pid
                        && call.nr == libc::SYS_mmap
                        && addr == 0
                        && f as i32 & !libc::MAP_NORESERVE == flags
                        && fd as u32 == u32::MAX
                        && len >= 1 << 20
                        && next + len <= reserved.end;
                    if !ours {
                        listener.answer(call.id, Answer::Continue).unwrap();
                        continue;
                    }
                    let at = remote
                        .map_anonymous(next, len, prot as i32, f as i32 | libc::MAP_FIXED)
                        .unwrap();
                    assert_eq!(at, next, "placing a mapping");
                    remote.register(next, len, RegisterMode::MISSING).unwrap();
                    placed.lock().unwrap().push(next..next + len);
                    listener.answer(call.id, Answer::Return(at as i64)).unwrap();
                    next += len;
                }
            })
        });
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let heap = line.split_whitespace().next().unwrap_or("?");
        let heap = usize::from_str_radix(heap.trim_start_matches("0x"), 16)
            .unwrap_or_else(|_| panic!("the program said {line:?}"));
        assert!(
            reserved.contains(&heap),
            "the heap at {heap:#x} is outside {reserved:x?}"
        );
        let ranges = placed.lock().unwrap().clone();
        assert_eq!(ranges.len(), 1, "placed: {ranges:x?}");
        let ours = ours_in_table(pid);
        assert!(
            ours.is_empty(),
            "uzswap's descriptors in the program: {ours:?}"
        );

        // Every page the program filled faulted here first (served as zeros); now they are
        // moved out, and faults bring them back.
        let first_touch = faults.load(Relaxed);
        assert!(
            first_touch >= 16 << 10,
            "{first_touch} faults while the heap was filled"
        );
        let evicted = evict_all(&remote, &ranges, false);
        let moved: usize = evicted
            .iter()
            .map(|s| s.held.iter().filter(|&&h| h).count())
            .sum();
        assert!(moved >= 16 << 10, "{moved} pages moved out");
        *stored.lock().unwrap() = evicted;
        child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
        line.clear();
        stdout.read_line(&mut line).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(line.trim(), "bad 0", "the program found its heap changed");
        assert!(status.success(), "{status}");
        let served_back = faults.load(Relaxed) - first_touch;
        assert!(
            served_back as usize >= moved,
            "{served_back} faults for {moved} pages moved out"
        );
    });
}
