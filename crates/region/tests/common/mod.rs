//! Helpers shared by the region tests: real pages from the corpus, stamped with their page
//! number so a page in the wrong place is caught.
#![allow(dead_code)]

pub const PAGE: usize = 4096;

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
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
        std::fs::read(dir.join("rustc-syn.pages")).expect("the corpus is needed")
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
