//! The benchmark workloads, as kernels over plain memory (`&mut [u8]`): the same code runs on a
//! uzswap region and, in a peer process, on ordinary memory under the kernel's zswap.
//!
//! - usemem (vm-scalability): N workers each write their slice sequentially, `p[i] = i` in
//!   every 8-byte word, then read it all back and check it; KB/s per worker and in total.
//! - mix (SeongJae Park's eval_zswap): three equal areas, two of real compressible pages, one
//!   of random bytes; random accesses with equal probability over the three; accesses/s.
//! - heap (one cell of the writethrough patch's sweep): one area of compressible pages,
//!   random accesses over it; accesses/s.
//! - java heap (a sweep cell with a Java server's locality): java_heap.rs.
//!
//! The timed loops allocate nothing and take no locks: the figure is memory (and fault) speed,
//! not allocator speed. An access reads one 8-byte word of a random page, adds one and writes it
//! back; the word is a fixed function of the page, and a per-page ledger counts the accesses, so
//! the end check knows every byte the area must hold.

use std::path::{Path, PathBuf};
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};
use serde::{Deserialize, Serialize};
use zswap::PAGE_SIZE;

const WORD: usize = 8;
const WORDS_PER_PAGE: usize = PAGE_SIZE / WORD;
/// Accesses between two clock reads in the timed loops: about 10 ms of work when every access
/// faults, a few microseconds when none does.
pub(crate) const CLOCK_EVERY: u64 = 1024;

/// Why a workload could not run, or what its check found wrong.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The corpus directory cannot be read.
    #[error(
        "corpus directory {dir} not readable (pass --corpus DIR, a directory of *.pages files)"
    )]
    CorpusUnreadable {
        /// The directory as given.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The corpus directory has no page files.
    #[error("corpus directory {dir} holds no *.pages files (pass --corpus DIR)")]
    CorpusEmpty {
        /// The directory as given.
        dir: PathBuf,
    },
    /// A page file of the corpus cannot be used.
    #[error(transparent)]
    PageFile(#[from] crate::pages::PageFileError),
    /// The workload needs the corpus and was given none.
    #[error("this workload needs the corpus content")]
    NoContent,
    /// The memory given is smaller than the workload's area.
    #[error("memory of {len} bytes is smaller than the workload's {need}")]
    MemoryTooSmall {
        /// Bytes given.
        len: usize,
        /// Bytes the workload works on.
        need: usize,
    },
    /// usemem without a worker, or with less than a page for each.
    #[error("usemem needs at least one worker and one page per worker")]
    UsememTooSmall,
    /// mix or heap with less than a page for each area.
    #[error("the area is too small: {0} bytes")]
    AreaTooSmall(usize),
    /// usemem's check found a word that is not its index.
    #[error("usemem check failed: word {word} (byte {byte}) holds {held:#x}, expected {word:#x}")]
    UsememCheck {
        /// The word's index, which it should hold.
        word: usize,
        /// Its byte offset.
        byte: usize,
        /// What it holds.
        held: u64,
    },
    /// The check of mix or heap found a byte that is not what the fills and the accesses made.
    #[error(
        "check failed: page {page} (area {area}) byte {byte} holds {held:#04x}, expected \
         {expected:#04x} ({accesses} accesses counted on that page)"
    )]
    Check {
        /// The page, counted over the whole memory.
        page: usize,
        /// The area it is in.
        area: usize,
        /// The first wrong byte in it.
        byte: usize,
        /// What that byte holds.
        held: u8,
        /// What it should hold.
        expected: u8,
        /// Accesses the ledger counted on the page.
        accesses: u32,
    },
}

/// Which workload, with its own parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Workload {
    /// vm-scalability's usemem: `workers` threads, each on its own `size` bytes.
    Usemem {
        /// Worker threads.
        workers: usize,
        /// Bytes per worker.
        size: u64,
    },
    /// eval_zswap's mix: `size` bytes in three equal areas, accessed for `seconds`.
    Mix {
        /// Bytes of the three areas together.
        size: u64,
        /// Seconds of random accesses.
        seconds: f64,
    },
    /// One sweep cell: a heap of `size` bytes of compressible pages, accessed for `seconds`.
    Heap {
        /// Bytes of the heap.
        size: u64,
        /// Seconds of random accesses.
        seconds: f64,
    },
    /// One sweep cell with a Java server's locality (java_heap.rs): a generational heap of
    /// `size` bytes, worked for `seconds`.
    JavaHeap {
        /// Bytes of the heap.
        size: u64,
        /// Seconds of accesses, allocations and marks.
        seconds: f64,
        /// The model's parameters.
        model: super::java_heap::JavaHeap,
    },
}

/// Everything a system needs to run one workload: plain data, so it crosses to a peer process
/// as JSON and the uzswap side can read it as it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadSpec {
    /// The workload and its parameters.
    pub workload: Workload,
    /// The memory limit (memory.high) in bytes.
    pub memory_high: u64,
    /// Folio size for uzswap (4 KiB..2 MiB); the kernel peers use what THP gives them.
    pub folio_size: usize,
    /// Directory of `*.pages` files, the compressible content of mix and heap; `None`: the
    /// repository's corpus, built into the binary.
    pub corpus: Option<PathBuf>,
    /// Seed of the random area and of the access sequence.
    pub seed: u64,
}

impl WorkloadSpec {
    /// Bytes of memory the workload works on (a whole number of pages; mix: three equal areas).
    pub fn area_bytes(&self) -> usize {
        match self.workload {
            Workload::Usemem { workers, size } => workers * page_floor(size as usize),
            Workload::Mix { size, .. } => 3 * page_floor(size as usize / 3),
            Workload::Heap { size, .. } | Workload::JavaHeap { size, .. } => {
                page_floor(size as usize)
            }
        }
    }

    /// Whether the workload needs the corpus (usemem does not).
    pub fn needs_content(&self) -> bool {
        !matches!(self.workload, Workload::Usemem { .. })
    }
}

fn page_floor(n: usize) -> usize {
    n / PAGE_SIZE * PAGE_SIZE
}

/// One timed phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    /// "write", "reread", "fill".
    pub name: String,
    /// Bytes the phase wrote or read, all workers together.
    pub bytes: u64,
    /// Wall time of the phase (the slowest worker's).
    pub seconds: f64,
    /// KB/s (KB = 1024 bytes, as usemem prints) of each worker.
    pub per_worker_kb_s: Vec<f64>,
    /// Sum over the workers, as usemem's total.
    pub total_kb_s: f64,
}

/// What a workload kernel measured; the system around it adds CPU time and statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct WorkloadOutput {
    /// The timed phases, in order.
    pub phases: Vec<Phase>,
    /// Random accesses done in the timed access phase (mix, heap).
    pub accesses: Option<u64>,
    /// Wall time of the timed access phase, in seconds.
    pub access_seconds: Option<f64>,
    /// `accesses / access_seconds`.
    pub accesses_per_s: Option<f64>,
    /// Every checked byte matched (a mismatch is an error instead, so this is true whenever an
    /// output exists; kept so JSON consumers see that the check ran).
    pub verified: bool,
}

/// The compressible content: real memory pages from `*.pages` files, cycled through.
#[derive(Debug, Clone)]
pub struct Content {
    pages: Vec<u8>,
}

impl Content {
    /// Load every `*.pages` file of `dir`, in name order.
    pub fn load(dir: &Path) -> Result<Content, WorkloadError> {
        let entries = std::fs::read_dir(dir).map_err(|source| WorkloadError::CorpusUnreadable {
            dir: dir.to_path_buf(),
            source,
        })?;
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "pages"))
            .collect();
        paths.sort();
        if paths.is_empty() {
            return Err(WorkloadError::CorpusEmpty {
                dir: dir.to_path_buf(),
            });
        }
        let files = crate::pages::load_page_files(&paths)?;
        Ok(Content::from_pages(
            files.into_iter().flat_map(|f| f.data).collect(),
        ))
    }

    /// The repository's corpus, built into the binary (`corpus::builtin`), in name order.
    pub fn builtin() -> Content {
        Content::from_pages(
            crate::corpus::builtin::FILES
                .iter()
                .flat_map(|(_, d)| d.iter().copied())
                .collect(),
        )
    }

    /// The `*.pages` files of `dir`, or the built-in corpus.
    pub fn load_or_builtin(dir: Option<&Path>) -> Result<Content, WorkloadError> {
        match dir {
            Some(dir) => Content::load(dir),
            None => Ok(Content::builtin()),
        }
    }

    /// Content from pages in memory (a non-empty multiple of `PAGE_SIZE` bytes).
    pub fn from_pages(pages: Vec<u8>) -> Content {
        assert!(!pages.is_empty() && pages.len() / PAGE_SIZE * PAGE_SIZE == pages.len());
        Content { pages }
    }

    /// Page `n` of the cycle.
    pub fn page(&self, n: usize) -> &[u8] {
        let i = n % (self.pages.len() / PAGE_SIZE);
        &self.pages[i * PAGE_SIZE..(i + 1) * PAGE_SIZE]
    }
}

fn put_word(mem: &mut [u8], word: usize, v: u64) {
    mem[word * WORD..(word + 1) * WORD].copy_from_slice(&v.to_ne_bytes());
}

pub(crate) fn get_word(mem: &[u8], word: usize) -> u64 {
    let mut b = [0u8; WORD];
    b.copy_from_slice(&mem[word * WORD..(word + 1) * WORD]);
    u64::from_ne_bytes(b)
}

fn kb_s(bytes: usize, seconds: f64) -> f64 {
    bytes as f64 / 1024.0 / seconds.max(1e-9)
}

// ---------------------------------------------------------------------------------------------
// usemem

/// Write `p[i] = i` in every 8-byte word of `mem`, in order.
pub fn usemem_write(mem: &mut [u8]) {
    for (i, w) in mem.chunks_exact_mut(WORD).enumerate() {
        w.copy_from_slice(&(i as u64).to_ne_bytes());
    }
}

/// Check `p[i] == i` in every word; the first wrong word is the error.
pub fn usemem_check(mem: &[u8]) -> Result<(), WorkloadError> {
    for (i, w) in mem.chunks_exact(WORD).enumerate() {
        let v = u64::from_ne_bytes(w.try_into().expect("8-byte chunk"));
        if v != i as u64 {
            return Err(WorkloadError::UsememCheck {
                word: i,
                byte: i * WORD,
                held: v,
            });
        }
    }
    Ok(())
}

/// usemem over `area`, split into `workers` equal slices, one thread each: all write, then
/// all re-read and check (each worker starts its re-read when it finished writing, as
/// usemem's processes do).
pub fn usemem(area: &mut [u8], workers: usize) -> Result<WorkloadOutput, WorkloadError> {
    if workers == 0 || area.len() < workers * PAGE_SIZE {
        return Err(WorkloadError::UsememTooSmall);
    }
    let per = page_floor(area.len() / workers);
    let results: Vec<Result<(f64, f64), WorkloadError>> = std::thread::scope(|s| {
        let handles: Vec<_> = area
            .chunks_mut(per)
            .take(workers)
            .map(|slice| {
                s.spawn(move || {
                    let t = Instant::now();
                    usemem_write(slice);
                    let w = t.elapsed().as_secs_f64();
                    let t = Instant::now();
                    usemem_check(slice)?;
                    Ok((w, t.elapsed().as_secs_f64()))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("usemem worker panicked"))
            .collect()
    });
    let times = results.into_iter().collect::<Result<Vec<_>, _>>()?;
    let phase = |name: &str, pick: fn(&(f64, f64)) -> f64| {
        let per_worker: Vec<f64> = times.iter().map(|t| kb_s(per, pick(t))).collect();
        Phase {
            name: name.to_string(),
            bytes: (per * workers) as u64,
            seconds: times.iter().map(pick).fold(0.0, f64::max),
            total_kb_s: per_worker.iter().sum(),
            per_worker_kb_s: per_worker,
        }
    };
    Ok(WorkloadOutput {
        phases: vec![phase("write", |t| t.0), phase("reread", |t| t.1)],
        verified: true,
        ..Default::default()
    })
}

// ---------------------------------------------------------------------------------------------
// mix and heap

/// How an area's pages were filled, so the check can regenerate them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    /// Content page `first + n` in page `n` of the area.
    Compressible {
        /// The content page of the area's first page.
        first: usize,
    },
    /// Random bytes from `SmallRng::seed_from_u64(seed)`, one `fill_bytes` a page.
    Random {
        /// The generator's seed.
        seed: u64,
    },
}

/// Fill `mem` (whole pages) as `fill` says.
pub fn fill(mem: &mut [u8], fill: Fill, content: Option<&Content>) {
    match fill {
        Fill::Compressible { first } => {
            let c = content.expect("compressible fill needs content");
            for (n, p) in mem.chunks_exact_mut(PAGE_SIZE).enumerate() {
                p.copy_from_slice(c.page(first + n));
            }
        }
        Fill::Random { seed } => {
            let mut rng = SmallRng::seed_from_u64(seed);
            for p in mem.chunks_exact_mut(PAGE_SIZE) {
                rng.fill_bytes(p);
            }
        }
    }
}

/// The word of page `page` that accesses change: spread over the page by a multiplicative
/// hash, so that accesses do not all hit the first cache line of every page.
pub fn access_word(page: usize) -> usize {
    ((page as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 55) as usize % WORDS_PER_PAGE
}

/// Per-page access counts of the timed phase: the check adds a page's count to its access word.
/// `u32` is plenty (2^32 accesses to one page would take hours) and keeps the ledger at 1/1024
/// of the area, so it barely competes with the area for memory.
#[derive(Debug, Clone)]
pub struct Ledger {
    counts: Vec<u32>,
}

impl Ledger {
    /// A ledger of `pages` pages, every count 0.
    pub fn new(pages: usize) -> Ledger {
        Ledger {
            counts: vec![0; pages],
        }
    }
    /// Accesses to page `page` so far.
    pub fn count(&self, page: usize) -> u32 {
        self.counts[page]
    }
    /// Accesses to every page together.
    pub fn total(&self) -> u64 {
        self.counts.iter().map(|&c| c as u64).sum()
    }
}

/// One access: add one to the access word of page `page` of `mem`, and count it.
#[inline]
pub fn access(mem: &mut [u8], ledger: &mut Ledger, page: usize) {
    let w = page * WORDS_PER_PAGE + access_word(page);
    let v = get_word(mem, w);
    put_word(mem, w, v.wrapping_add(1));
    ledger.counts[page] = ledger.counts[page].wrapping_add(1);
}

/// Random accesses over `mem`, split into `areas` equal areas of whole pages: pick an area
/// with equal probability, then a page in it, until `seconds` passed (or `max_accesses`, for
/// tests). Returns (accesses, seconds).
pub fn random_accesses(
    mem: &mut [u8],
    areas: usize,
    ledger: &mut Ledger,
    seconds: f64,
    max_accesses: Option<u64>,
    seed: u64,
) -> (u64, f64) {
    let per_area = mem.len() / PAGE_SIZE / areas;
    assert!(per_area > 0, "areas must hold a page each");
    let mut rng = SmallRng::seed_from_u64(seed ^ 0xacce55);
    let limit = max_accesses.unwrap_or(u64::MAX);
    let start = Instant::now();
    let mut n = 0u64;
    loop {
        for _ in 0..CLOCK_EVERY {
            let a = rng.gen_range(0..areas);
            let p = a * per_area + rng.gen_range(0..per_area);
            access(mem, ledger, p);
        }
        n += CLOCK_EVERY;
        if n >= limit || start.elapsed().as_secs_f64() >= seconds {
            break;
        }
    }
    (n, start.elapsed().as_secs_f64())
}

/// Check `mem` against its fills (one per area, areas of equal size) and the ledger.
pub fn verify(
    mem: &[u8],
    fills: &[Fill],
    content: Option<&Content>,
    ledger: &Ledger,
) -> Result<(), WorkloadError> {
    let per_area = mem.len() / PAGE_SIZE / fills.len();
    let mut expect = vec![0u8; PAGE_SIZE];
    for (a, f) in fills.iter().enumerate() {
        let mut rng = match f {
            Fill::Random { seed } => Some(SmallRng::seed_from_u64(*seed)),
            Fill::Compressible { .. } => None,
        };
        for n in 0..per_area {
            match (f, rng.as_mut()) {
                (Fill::Compressible { first }, _) => {
                    let c = content.expect("compressible fill needs content");
                    expect.copy_from_slice(c.page(first + n));
                }
                (Fill::Random { .. }, Some(r)) => r.fill_bytes(&mut expect),
                (Fill::Random { .. }, None) => unreachable!(),
            }
            let page = a * per_area + n;
            let w = access_word(page);
            let v = get_word(&expect, w).wrapping_add(ledger.count(page) as u64);
            put_word(&mut expect, w, v);
            let got = &mem[page * PAGE_SIZE..(page + 1) * PAGE_SIZE];
            if got != expect.as_slice() {
                let byte = got
                    .iter()
                    .zip(&expect)
                    .position(|(x, y)| x != y)
                    .unwrap_or(0);
                return Err(WorkloadError::Check {
                    page,
                    area: a,
                    byte,
                    held: got[byte],
                    expected: expect[byte],
                    accesses: ledger.count(page),
                });
            }
        }
    }
    Ok(())
}

/// The fills of the mix's three areas: two compressible (different content pages), one random.
pub fn mix_fills(pages_per_area: usize, seed: u64) -> [Fill; 3] {
    [
        Fill::Compressible { first: 0 },
        Fill::Compressible {
            first: pages_per_area,
        },
        Fill::Random { seed },
    ]
}

/// Fill `mem` with `fills` (equal areas), timed as phase "fill".
fn fill_areas(mem: &mut [u8], fills: &[Fill], content: Option<&Content>) -> Phase {
    let per_area = mem.len() / PAGE_SIZE / fills.len() * PAGE_SIZE;
    let t = Instant::now();
    for (chunk, f) in mem.chunks_mut(per_area).zip(fills) {
        fill(chunk, *f, content);
    }
    let s = t.elapsed().as_secs_f64();
    let bytes = per_area * fills.len();
    Phase {
        name: "fill".to_string(),
        bytes: bytes as u64,
        seconds: s,
        per_worker_kb_s: vec![kb_s(bytes, s)],
        total_kb_s: kb_s(bytes, s),
    }
}

/// Fill, access at random for the given time, verify: mix (three areas) or heap (one).
fn fill_access_verify(
    mem: &mut [u8],
    fills: &[Fill],
    content: Option<&Content>,
    seconds: f64,
    max_accesses: Option<u64>,
    seed: u64,
) -> Result<WorkloadOutput, WorkloadError> {
    if mem.len() < fills.len() * PAGE_SIZE {
        return Err(WorkloadError::AreaTooSmall(mem.len()));
    }
    let fill_phase = fill_areas(mem, fills, content);
    let mut ledger = Ledger::new(mem.len() / PAGE_SIZE);
    let (n, s) = random_accesses(mem, fills.len(), &mut ledger, seconds, max_accesses, seed);
    verify(mem, fills, content, &ledger)?;
    Ok(WorkloadOutput {
        phases: vec![fill_phase],
        accesses: Some(n),
        access_seconds: Some(s),
        accesses_per_s: Some(n as f64 / s.max(1e-9)),
        verified: true,
    })
}

/// Run `spec`'s workload on `mem` (at least `spec.area_bytes()` bytes; page aligned for
/// the page-wise figures to mean pages). `content` is required by mix and heap.
pub fn run_on_memory(
    spec: &WorkloadSpec,
    content: Option<&Content>,
    mem: &mut [u8],
) -> Result<WorkloadOutput, WorkloadError> {
    let n = spec.area_bytes();
    if mem.len() < n {
        return Err(WorkloadError::MemoryTooSmall {
            len: mem.len(),
            need: n,
        });
    }
    let mem = &mut mem[..n];
    if spec.needs_content() && content.is_none() {
        return Err(WorkloadError::NoContent);
    }
    match spec.workload {
        Workload::Usemem { workers, .. } => usemem(mem, workers),
        Workload::Mix { seconds, .. } => {
            let fills = mix_fills(n / PAGE_SIZE / 3, spec.seed);
            fill_access_verify(mem, &fills, content, seconds, None, spec.seed)
        }
        Workload::Heap { seconds, .. } => fill_access_verify(
            mem,
            &[Fill::Compressible { first: 0 }],
            content,
            seconds,
            None,
            spec.seed,
        ),
        Workload::JavaHeap { seconds, model, .. } => {
            let content = content.ok_or(WorkloadError::NoContent)?;
            super::java_heap::run(mem, &model, content, seconds, None, spec.seed)
        }
    }
}

/// Like `run_on_memory` for mix/heap, but stopping after `max_accesses` (tests).
pub fn run_accesses_for_test(
    spec: &WorkloadSpec,
    content: &Content,
    mem: &mut [u8],
    max_accesses: u64,
) -> Result<WorkloadOutput, WorkloadError> {
    let n = spec.area_bytes();
    let mem = &mut mem[..n];
    if let Workload::JavaHeap { model, .. } = spec.workload {
        return super::java_heap::run(
            mem,
            &model,
            content,
            f64::INFINITY,
            Some(max_accesses),
            spec.seed,
        );
    }
    let fills: Vec<Fill> = match spec.workload {
        Workload::Mix { .. } => mix_fills(n / PAGE_SIZE / 3, spec.seed).to_vec(),
        _ => vec![Fill::Compressible { first: 0 }],
    };
    fill_access_verify(
        mem,
        &fills,
        Some(content),
        f64::INFINITY,
        Some(max_accesses),
        spec.seed,
    )
}
