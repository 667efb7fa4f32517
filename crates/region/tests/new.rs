//! `Region::new` fails cleanly: every error returns at once and leaves nothing behind (no
//! thread, no mapping, no open file). One test in its own binary, so that the process's
//! threads, file descriptors and mappings are the region's alone to change.

use std::time::Duration;

use region::{Region, RegionConfig, RegionError};

/// What a process holds that a region could leave behind.
#[derive(Debug, PartialEq, Eq)]
struct Held {
    threads: usize,
    fds: usize,
    mappings: usize,
}

impl Held {
    fn now() -> Held {
        let count = |dir: &str| std::fs::read_dir(dir).unwrap().count();
        Held {
            threads: count("/proc/self/task"),
            fds: count("/proc/self/fd"),
            mappings: mappings_but_malloc_arenas(),
        }
    }
}

/// The process's mappings, not counting glibc's malloc arenas: a thread that allocates while
/// the others hold theirs may make a new one (a 64 MiB-aligned pair of mappings, read-write
/// then inaccessible up to 64 MiB), and it stays for the life of the process.
fn mappings_but_malloc_arenas() -> usize {
    const HEAP: u64 = 64 << 20;
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let parsed: Vec<(u64, u64, bool)> = maps
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (a, b) = f[0].split_once('-').unwrap();
            let addr = |x| u64::from_str_radix(x, 16).unwrap();
            (addr(a), addr(b), f.len() == 5)
        })
        .collect();
    let mut count = 0;
    let mut i = 0;
    while i < parsed.len() {
        let (start, _, anonymous) = parsed[i];
        let arena = anonymous
            && start % HEAP == 0
            && parsed
                .get(i + 1)
                .is_some_and(|&(_, end, anon)| anon && end == start + HEAP);
        if arena {
            i += 2;
        } else {
            count += 1;
            i += 1;
        }
    }
    count
}

/// `Region::new` under `config` fails within a second, with an error `is_expected` accepts,
/// and leaves the process as it found it.
fn fails_cleanly(what: &str, config: RegionConfig, is_expected: impl Fn(&RegionError) -> bool) {
    let before = Held::now();
    // On a thread of its own, so that a hang fails the test rather than stopping it.
    let (tx, rx) = std::sync::mpsc::channel();
    let call = std::thread::spawn(move || tx.send(Region::new(4 << 20, config).err()));
    let err = rx
        .recv_timeout(Duration::from_secs(1))
        .unwrap_or_else(|_| panic!("{what}: Region::new did not return within a second"))
        .unwrap_or_else(|| panic!("{what}: Region::new succeeded"));
    call.join().unwrap().unwrap();
    assert!(is_expected(&err), "{what}: unexpected error {err}");
    let after = Held::now();
    if after != before {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        panic!("{what}: left something behind ({err}): {before:?} -> {after:?}\n{maps}");
    }
}

#[test]
fn every_failure_of_region_new_returns_at_once_and_leaves_nothing_behind() {
    let scenario = fail::FailScenario::setup();
    let config = || RegionConfig::new(32 << 20);
    // A region that works, made and dropped once first: whatever the process sets up once
    // (the harness's threads, the allocator's arenas, lazily opened files) is there before
    // the counts are taken.
    drop(Region::new(4 << 20, config()).unwrap());
    // Nothing of it lingers (the engine's shrink worker is joined with it); a margin anyway.
    std::thread::sleep(Duration::from_millis(400));

    // A swap directory that cannot be used: the swap file is created after the mapping.
    fails_cleanly(
        "unusable swap directory",
        config().swap_dir("/nonexistent/uzswap"),
        |e| matches!(e, RegionError::SwapFile(_)) && e.chain().contains("/nonexistent"),
    );
    // A tunable the engine refuses, caught before anything is made and named.
    fails_cleanly(
        "bad tunable",
        config().max_pool_percent(101),
        |e| matches!(e, RegionError::Config(c) if c.field == "max_pool_percent"),
    );
    fails_cleanly(
        "limit below the fixed charge",
        RegionConfig::new(1 << 20),
        |e| matches!(e, RegionError::Config(c) if c.field == "memory_limit"),
    );
    // Staging (its own mapping and userfaultfd) cannot be set up.
    fail::cfg("region::new::staging", "return").unwrap();
    fails_cleanly("staging", config(), |e| e.chain().contains("injected"));
    fail::remove("region::new::staging");
    // The range cannot be registered.
    fail::cfg("region::new::register", "return").unwrap();
    fails_cleanly("register", config(), |e| e.chain().contains("injected"));
    fail::remove("region::new::register");
    // A thread cannot be started after the range is registered and three threads serve it
    // (of the four a region starts with: two handlers, the spare, one kswapd): an unmap of a
    // registered range waits for its event to be read, so this would hang if the error path
    // did not stop the threads and unregister the range first.
    fail::cfg("region::new::spawn", "3*off->return").unwrap();
    fails_cleanly("thread start", config(), |e| {
        matches!(e, RegionError::Spawn(_))
    });
    fail::remove("region::new::spawn");

    // And a region made after all that works.
    let mut r = Region::new(4 << 20, config()).unwrap();
    r.as_mut_slice().fill(7);
    r.reclaim_to(0);
    assert!(r.as_mut_slice().iter().all(|&b| b == 7));
    scenario.teardown();
}
