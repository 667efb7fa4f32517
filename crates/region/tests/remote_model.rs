//! A region of another program's memory (`RemoteRegion`) against a model of every page,
//! with the program's memory read and written from this process (`process_vm_readv` and
//! `writev`: the kernel faults the pages in for them, and the region serves those faults
//! from here). Threads write, read back and discard pages while kswapd evicts them, some
//! folios shared between threads, and the main thread reclaims and changes the engine's
//! tunables: every page reads what the model says after every read, all of them at the
//! end, and the region's audit then finds each page where its counts say.
//!
//! What it covers that the program-driven test (remote.rs) does not: discards of part of a
//! folio while the rest of it is evicted, incompressible and same-filled pages, writeback
//! turned off and on, the pool's share moved, and the audit after all of it.

#![cfg(target_arch = "x86_64")]

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

use region::{RegionConfig, RemoteRegion};
use uffd::remote::RemoteProcess;

mod common;
#[path = "common/static_program.rs"]
mod static_program;
use common::PAGE;

/// What page `p` holds after its write numbered `n`: real data, incompressible data or one
/// byte repeated, stamped with the page and the write (but the repeated byte), so that a
/// page in the wrong place, or an old version of it, is caught.
fn contents(p: usize, n: u64) -> Vec<u8> {
    let mut page = match n % 3 {
        0 => common::corpus_page(p + n as usize),
        1 => common::random_page(p, n),
        _ => return vec![(n % 251) as u8 + 1; PAGE],
    };
    page[..8].copy_from_slice(&(p as u64).to_ne_bytes());
    page[8..16].copy_from_slice(&n.to_ne_bytes());
    page
}

/// The model: each page's last write (None: zero, never written or discarded).
type Model = Vec<Option<u64>>;

/// Page `p` as the program reads it, against the model.
fn check(remote: &RemoteProcess, base: usize, model: &Model, p: usize) {
    let mut got = vec![0u8; PAGE];
    remote
        .read(base + p * PAGE, &mut got)
        .unwrap_or_else(|e| panic!("reading page {p}: {e}"));
    let want = match model[p] {
        Some(n) => contents(p, n),
        None => vec![0u8; PAGE],
    };
    if got != want {
        let stamp = u64::from_ne_bytes(got[8..16].try_into().unwrap());
        panic!(
            "page {p}: expected {:?}, read another content (its write stamp {stamp})",
            model[p]
        );
    }
}

/// One thread's steps on the pages `p` with `p % threads == t`: write, read back, discard.
fn steps(remote: &RemoteProcess, base: usize, pages: usize, (t, threads): (usize, usize)) {
    let mine: Vec<usize> = (t..pages).step_by(threads).collect();
    let mut model: Model = vec![None; pages];
    let mut x = 0x5EED_0000 + t as u64 + 1;
    let mut writes = 0u64;
    for _ in 0..2500 {
        let p = mine[common::xorshift(&mut x) as usize % mine.len()];
        match common::xorshift(&mut x) % 10 {
            0..=4 => {
                writes += 1;
                remote
                    .write(base + p * PAGE, &contents(p, writes))
                    .unwrap_or_else(|e| panic!("writing page {p}: {e}"));
                model[p] = Some(writes);
            }
            5..=8 => check(remote, base, &model, p),
            _ => {
                remote
                    .discard(&[(base + p * PAGE, PAGE)])
                    .unwrap_or_else(|e| panic!("discarding page {p}: {e}"));
                model[p] = None;
                check(remote, base, &model, p);
            }
        }
    }
    for &p in &mine {
        check(remote, base, &model, p);
    }
}

/// A region of `folio_size` folios over 24 MiB of the program, under a limit of 6 MiB.
fn run(folio_size: usize) {
    let pages = (24 << 20) / PAGE;
    // With the inactive list: discards from outside cut into staged folios not stored.
    let config = RegionConfig::new(6 << 20)
        .folio_size(folio_size)
        .inactive_list(true);
    let features = RemoteRegion::features(&config).unwrap();
    let mut cmd = Command::new(static_program::built("wait"));
    cmd.stdin(Stdio::piped());
    let (mut child, remote) = RemoteProcess::spawn(&mut cmd, features, &[libc::SYS_mmap]).unwrap();
    let remote = Arc::new(remote);
    let rw = libc::PROT_READ | libc::PROT_WRITE;
    let private = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
    let base = remote.map_anonymous(0, pages * PAGE, rw, private).unwrap();
    let region = RemoteRegion::new(remote.clone(), base..base + pages * PAGE, config).unwrap();

    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let threads = 3;
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let remote = &remote;
                s.spawn(move || steps(remote, base, pages, (t, threads)))
            })
            .collect();
        // Meanwhile: reclaim to a target drawn anew, and the engine's tunables moved.
        s.spawn(|| {
            let mut x = 0xC0FFEE;
            let zswap = region.zswap();
            while !stop.load(Relaxed) {
                match common::xorshift(&mut x) % 6 {
                    0 => region.reclaim_to(common::xorshift(&mut x) % (6 << 20)),
                    1 => region
                        .group()
                        .set_writeback_enabled(common::xorshift(&mut x).is_multiple_of(2)),
                    2 => zswap
                        .params()
                        .set_max_pool_percent((common::xorshift(&mut x) % 60) as u32 + 5)
                        .unwrap(),
                    3 => {
                        let name = ["lz4", "zstd"][(common::xorshift(&mut x) % 2) as usize];
                        zswap.set_param("compressor", name).unwrap();
                    }
                    _ => std::thread::sleep(std::time::Duration::from_millis(2)),
                }
            }
        });
        let results: Vec<_> = workers.into_iter().map(|w| w.join()).collect();
        // Stopped before a worker's failure goes on, or the scope would wait for it.
        stop.store(true, Relaxed);
        for r in results {
            if let Err(panic) = r {
                std::panic::resume_unwind(panic);
            }
        }
    });
    region.group().set_writeback_enabled(true);
    let stats = region.stats();
    let zswap = region.zswap().stats();
    assert!(
        zswap.get("zswpout") > 0 && zswap.get("zswpin") > 0,
        "{zswap:?}"
    );
    assert!(stats.faults > 0 && stats.discarded_pages > 0, "{stats:?}");
    assert_eq!(stats.lost_track, 0, "{stats:?}");
    region.audit().unwrap();
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
}

#[test]
fn pages_written_read_and_discarded_from_outside_are_what_the_model_says() {
    run(PAGE);
    run(16 << 10);
    run(64 << 10);
}
