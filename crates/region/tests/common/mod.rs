//! Helpers shared by the region tests: real pages from the corpus, stamped with their page
//! number so a page in the wrong place is caught.
#![allow(dead_code)]

pub const PAGE: usize = 4096;

/// Waits until `done` holds, checking every millisecond; fails the test after 5 s, naming
/// `what` never happened.
pub fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "{what}: never");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// One step of xorshift64 (Marsaglia's 13, 7, 17): the tests' cheap, reproducible random
/// numbers. `x` must not be 0.
pub fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Page `i` of incompressible data: xorshift output seeded by `i` and `seed`.
pub fn random_page(i: usize, seed: u64) -> Vec<u8> {
    let mut x = (i as u64 + seed).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut p = vec![0u8; PAGE];
    for w in p.chunks_exact_mut(8) {
        w.copy_from_slice(&xorshift(&mut x).to_ne_bytes());
    }
    p
}

pub fn corpus_page(n: usize) -> Vec<u8> {
    static DATA: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let data = DATA.get_or_init(|| {
        // The repository's corpus/, from crates/region or from fuzz/ (whose fuzz target
        // includes these helpers).
        let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        ["../../corpus", "../corpus"]
            .iter()
            .find_map(|dir| std::fs::read(here.join(dir).join("python-objects.pages")).ok())
            .expect("the corpus is needed")
    });
    let pages = data.len() / PAGE;
    data[(n % pages) * PAGE..(n % pages + 1) * PAGE].to_vec()
}

/// The bytes page `i` holds after `fill(_, seed)`: real data stamped with its page number,
/// so a page in the wrong place is caught.
pub fn page_data(i: usize, seed: usize) -> Vec<u8> {
    let mut p = corpus_page(i + seed);
    p[..8].copy_from_slice(&((i + seed) as u64).to_ne_bytes());
    p
}

pub fn fill(mem: &mut [u8], seed: usize) {
    for (i, page) in mem.chunks_mut(PAGE).enumerate() {
        page.copy_from_slice(&page_data(i, seed));
    }
}

/// Check the pages of `mem`, the first being page `first` of a region filled with `seed`.
pub fn check_from(mem: &[u8], first: usize, seed: usize) {
    for (i, page) in mem.chunks(PAGE).enumerate() {
        assert!(
            page == &page_data(first + i, seed)[..],
            "page {} read back wrong",
            first + i
        );
    }
}

pub fn check(mem: &[u8], seed: usize) {
    check_from(mem, 0, seed);
}

/// Evict the region's coldest folios until some are stored in the engine, the folios evicted
/// after them still staged (its inactive list, which must be on) and the rest resident. A
/// little at a time below the usage as it is each time: reclaim charges as it goes (its
/// threads' scratch once each has used some, the pool's bookkeeping), and one target taken
/// before it started can be passed by that alone, so reclaim stores every folio.
pub fn stage_and_store_some(r: &region::Region) {
    for _ in 0..64 {
        if r.stats().staged_dropped > 0 {
            break;
        }
        r.reclaim_to(r.usage().total().saturating_sub(64 << 10));
    }
    let u = r.usage();
    assert!(
        u.resident > 0 && u.staged > 0 && r.stats().staged_dropped > 0,
        "{u:?} {:?}",
        r.stats()
    );
}

/// Pages of `r`'s first `size` bytes (filled with `fill(.., seed)`) that the kernel has
/// swapped out: `MADV_PAGEOUT`, the writes waited for (a page under writeback stays in the
/// swap cache), the pages mapped again, clean now (and checked), and paged out for good.
/// At least one, within 10 s. Needs swap on (`SystemSwap`).
pub fn swap_out(r: &mut region::Region, size: usize, seed: usize) -> Vec<usize> {
    let base = r.as_ptr() as usize;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        uffd::page_out(base, size).expect("MADV_PAGEOUT on the region");
        std::thread::sleep(std::time::Duration::from_millis(20));
        check(&r.as_mut_slice()[..size], seed);
        uffd::page_out(base, size).expect("MADV_PAGEOUT on the region");
        let swapped: Vec<usize> = (0..size / PAGE)
            .filter(|p| !uffd::page_mapped(base + p * PAGE).unwrap())
            .collect();
        if !swapped.is_empty() {
            return swapped;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the kernel kept every page in memory"
        );
    }
}

/// A swap file turned on for the machine while the value lives (root only).
pub struct SystemSwap(std::path::PathBuf);

impl SystemSwap {
    pub fn on() -> Option<SystemSwap> {
        // Named for the test too: tests of one binary run at once.
        static TURNED_ON: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let nth = TURNED_ON.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("uzswap-test-swap-{}-{nth}", std::process::id());
        let path = std::env::temp_dir().join(name);
        let run = |cmd: &str, args: &[&std::ffi::OsStr]| {
            std::process::Command::new(cmd)
                .args(args)
                .output()
                .is_ok_and(|o| o.status.success())
        };
        use std::os::unix::fs::OpenOptionsExt;
        let made = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .is_ok()
            // A swap file must have no holes.
            && run("fallocate", &["-l".as_ref(), "256M".as_ref(), path.as_os_str()])
            && run("mkswap", &[path.as_os_str()]);
        if !made || !run("swapon", &[path.as_os_str()]) {
            let _ = std::fs::remove_file(&path);
            panic!("this test turns a swap file on (fallocate, mkswap, swapon): run it as root (CI does)");
        }
        Some(SystemSwap(path))
    }
}

impl Drop for SystemSwap {
    fn drop(&mut self) {
        let off = std::process::Command::new("swapoff").arg(&self.0).status();
        assert!(off.is_ok_and(|s| s.success()), "swapoff {:?}", self.0);
        let _ = std::fs::remove_file(&self.0);
    }
}
