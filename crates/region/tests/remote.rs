//! A region of another program's memory, served from the test's process (`RemoteRegion`): a
//! static C program that loads nothing of ours has its heap placed in the region's range
//! (its mmap answered through seccomp), and runs its rounds of writes, discards and checks
//! of every page under a limit a quarter of the heap, its pages going through the pool and
//! back byte for byte.

#![cfg(target_arch = "x86_64")]

use std::io::{BufRead, BufReader};
use std::ops::Range;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use region::{RegionConfig, RemoteRegion};
use uffd::remote::{Answer, RemoteProcess, SyscallListener};

mod common;
#[path = "common/static_program.rs"]
mod static_program;

const MIB: usize = 1 << 20;

/// Answer the program's calls until `stop`: its first private anonymous read-write mmap of
/// `range`'s length at no address asked is placed at `range` (already mapped, and served by
/// the region); an munmap inside `range` discards the pages instead (the range stays the
/// region's); any other call runs as made. Counts the calls answered in `placed`.
fn place(
    remote: &RemoteProcess,
    listener: &SyscallListener,
    range: &Range<usize>,
    stop: &AtomicBool,
    placed: &AtomicU64,
) {
    let flags = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64;
    let rw = (libc::PROT_READ | libc::PROT_WRITE) as u64;
    let mut taken = false;
    while !stop.load(Relaxed) {
        if !listener
            .wait(std::time::Duration::from_millis(20))
            .unwrap_or(false)
        {
            continue;
        }
        let Ok(call) = listener.recv() else { continue };
        let [addr, len, prot, f, fd, _] = call.args;
        let (addr, len) = (addr as usize, len as usize);
        let answer = match call.nr {
            libc::SYS_mmap
                if !taken
                    && addr == 0
                    && len == range.len()
                    && prot == rw
                    && f == flags
                    && fd as i32 == -1 =>
            {
                taken = true;
                Answer::Return(range.start as i64)
            }
            libc::SYS_munmap if range.contains(&addr) && addr + len <= range.end => {
                remote
                    .discard(&[(addr, len)])
                    .expect("discarding in the program");
                Answer::Return(0)
            }
            _ => Answer::Continue,
        };
        if answer != Answer::Continue {
            placed.fetch_add(1, Relaxed);
        }
        let _ = listener.answer(call.id, answer);
    }
}

/// Run heap_rounds with a heap of `heap_mib` under a limit of `limit_mib`, served by a region
/// of `folio_size` folios; returns the region when the program has ended well.
fn run(heap_mib: usize, rounds: usize, limit_mib: usize, folio_size: usize) -> RemoteRegion {
    let config = RegionConfig::new((limit_mib * MIB) as u64).folio_size(folio_size);
    let features = RemoteRegion::features(&config).unwrap();
    let mut cmd = Command::new(static_program::built("heap_rounds"));
    cmd.args([heap_mib.to_string(), rounds.to_string()])
        .stdout(Stdio::piped());
    let (mut child, remote) =
        RemoteProcess::spawn(&mut cmd, features, &[libc::SYS_mmap, libc::SYS_munmap]).unwrap();
    let remote = Arc::new(remote);
    let len = heap_mib * MIB;
    let rw = libc::PROT_READ | libc::PROT_WRITE;
    let private = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
    let at = remote.map_anonymous(0, len, rw, private).unwrap();
    let range = at..at + len;
    let region = RemoteRegion::new(remote.clone(), range.clone(), config).unwrap();
    assert_eq!(region.range(), range);

    let stop = AtomicBool::new(false);
    let placed = AtomicU64::new(0);
    let peak = AtomicU64::new(0);
    let (status, out) = std::thread::scope(|s| {
        let listener = remote.listener().unwrap();
        s.spawn(|| place(&remote, listener, &range, &stop, &placed));
        s.spawn(|| {
            while !stop.load(Relaxed) {
                peak.fetch_max(region.usage().total(), Relaxed);
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        });
        let mut out = String::new();
        for line in BufReader::new(child.stdout.take().unwrap()).lines() {
            out.push_str(&line.unwrap());
            out.push('\n');
        }
        let status = child.wait().unwrap();
        stop.store(true, Relaxed);
        (status, out)
    });
    assert!(
        out.starts_with(&format!("heap {:#x}\n", range.start)),
        "the heap was not placed in the region: {out:?}"
    );
    assert!(
        out.ends_with("bad 0\n"),
        "the program found pages changed: {out:?}"
    );
    assert!(status.success(), "{status}");
    assert_eq!(placed.load(Relaxed), 2, "the mmap and the munmap answered");
    // The program's heap went through the pool and back, under the limit.
    let stats = region.stats();
    let zswap = region.zswap().stats();
    assert!(zswap.get("zswpout") as usize > len / 4096, "{zswap:?}");
    assert!(zswap.get("zswpin") > 0 && stats.faults > 0, "{stats:?}");
    let limit = (limit_mib * MIB) as u64;
    let peak = peak.load(Relaxed);
    assert!(
        peak <= limit + limit / 4,
        "the region held {peak} bytes under a limit of {limit}"
    );
    region
}

#[test]
fn a_static_binary_s_heap_is_held_under_the_limit_by_a_region_outside_it() {
    let region = run(64, 3, 16, 16 << 10);
    // Everything the program unmapped is let go of, once the discard's event is processed
    // (its madvise returned when the event was read).
    common::wait_until("the unmapped heap let go of", || {
        let usage = region.usage();
        usage.resident + usage.staged == 0
    });
    region.audit().unwrap();
}

#[test]
fn a_static_binary_is_held_with_base_page_and_2_mib_folios() {
    run(32, 2, 12, 4 << 10);
    run(192, 2, 96, 2 << 20);
}
