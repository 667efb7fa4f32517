//! A Java server's heap as a workload (the sweep's `--locality java`): the locality that the
//! writethrough patch's specjbb table had and a uniform sweep lacks. A generational heap of
//! real compressible pages in two areas:
//!
//! - **young** (`young_percent` of the heap): allocation bumps through it, a whole page
//!   written at a time with new contents, and wraps around; what was there is dead (a minor
//!   collection freed it) and is overwritten without being read, as a TLAB is refilled;
//! - **old** (the rest): each access reads and writes one word of a page drawn from a Zipf
//!   distribution of exponent `zipf_exponent` over the old pages, the ranks scattered over
//!   the area by a fixed permutation (the hot objects are not next to each other);
//! - **marking**: every `mark_seconds`, a whole-heap scan reads one word of every page in
//!   address order, as a collector's mark phase does; the time it takes counts against the
//!   accesses, as a collection's pause counts against a server's throughput.
//!
//! An old access counts as one access, and so does a page allocated: there is one allocated
//! page every `1000 / alloc_per_mille` old accesses. The end check knows every byte: old pages
//! by the ledger (workload.rs), young pages by the generation each was last written in.

use std::time::Instant;

use rand::rngs::SmallRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Zipf};
use serde::{Deserialize, Serialize};
use zswap::PAGE_SIZE;

use super::workload::{
    access, access_word, fill, get_word, verify, Content, Fill, Ledger, Phase, WorkloadError,
    WorkloadOutput, CLOCK_EVERY,
};

/// The model's parameters (each has a flag of the same name on `bench sweep`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct JavaHeap {
    /// The young area's share of the heap, in percent (1 to 90).
    pub young_percent: u32,
    /// Skew of the old area's accesses: the Zipf exponent (0 is uniform; 1 sends about
    /// 60% of the accesses to the hottest 1% of a 100,000-page area).
    pub zipf_exponent: f64,
    /// Young pages allocated per 1000 old accesses.
    pub alloc_per_mille: u32,
    /// Seconds between two whole-heap marks (0: none).
    pub mark_seconds: f64,
}

impl Default for JavaHeap {
    fn default() -> Self {
        JavaHeap {
            young_percent: 20,
            zipf_exponent: 1.0,
            alloc_per_mille: 50,
            mark_seconds: 5.0,
        }
    }
}

impl JavaHeap {
    /// Young pages of a heap of `pages` pages (at least one; the old area keeps one too).
    fn young_pages(&self, pages: usize) -> usize {
        (pages * self.young_percent as usize / 100).clamp(1, pages - 1)
    }
}

/// A bijection of `0..n` that scatters ranks over the area: `r * a mod n`, `a` odd and prime
/// to `n`.
fn scatter(n: usize) -> impl Fn(usize) -> usize {
    let gcd = |mut a: u64, mut b: u64| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let n64 = n as u64;
    let mut a = (0x9E37_79B9_7F4A_7C15u64 % n64.max(2)) | 1;
    while gcd(a, n64) != 1 {
        a += 2;
    }
    move |r| ((r as u128 * a as u128) % n as u128) as usize
}

/// The heap's layout and what the end check needs to know of what happened.
struct Heap {
    old_pages: usize,
    young_pages: usize,
    /// Accesses per old page.
    ledger: Ledger,
    /// Allocations per young page.
    generation: Vec<u32>,
}

impl Heap {
    fn new(pages: usize, model: &JavaHeap) -> Heap {
        let young_pages = model.young_pages(pages);
        Heap {
            old_pages: pages - young_pages,
            young_pages,
            ledger: Ledger::new(pages - young_pages),
            generation: vec![0; young_pages],
        }
    }

    /// The content page young page `page` holds now.
    fn young_content(&self, page: usize) -> usize {
        self.old_pages + page + self.generation[page] as usize * self.young_pages
    }

    fn fill(&self, mem: &mut [u8], content: &Content) {
        let (old, young) = mem.split_at_mut(self.old_pages * PAGE_SIZE);
        fill(old, Fill::Compressible { first: 0 }, Some(content));
        for (page, p) in young.chunks_exact_mut(PAGE_SIZE).enumerate() {
            p.copy_from_slice(content.page(self.young_content(page)));
        }
    }

    /// Old accesses and allocations, marks between them, until `seconds` have passed or
    /// `limit` accesses were made. Returns (accesses, seconds).
    fn work(
        &mut self,
        mem: &mut [u8],
        model: &JavaHeap,
        content: &Content,
        (seconds, limit): (f64, u64),
        seed: u64,
    ) -> Result<(u64, f64), WorkloadError> {
        let (old, young) = mem.split_at_mut(self.old_pages * PAGE_SIZE);
        let zipf = Zipf::new(self.old_pages as u64, model.zipf_exponent)
            .map_err(|_| WorkloadError::AreaTooSmall(old.len()))?;
        let place = scatter(self.old_pages);
        let alloc_every = match model.alloc_per_mille {
            0 => u64::MAX,
            n => (1000 / u64::from(n)).max(1),
        };
        let mut rng = SmallRng::seed_from_u64(seed ^ 0x1a7a);
        let start = Instant::now();
        let mut last_mark = 0.0;
        let (mut n, mut steps, mut bump, mut marked) = (0u64, 0u64, 0usize, 0u64);
        loop {
            for _ in 0..CLOCK_EVERY {
                let rank = zipf.sample(&mut rng) as usize - 1;
                access(old, &mut self.ledger, place(rank));
                steps += 1;
                if steps % alloc_every == 0 {
                    self.generation[bump] += 1;
                    young[bump * PAGE_SIZE..][..PAGE_SIZE]
                        .copy_from_slice(content.page(self.young_content(bump)));
                    bump = (bump + 1) % self.young_pages;
                    n += 1;
                }
            }
            n += CLOCK_EVERY;
            let now = start.elapsed().as_secs_f64();
            if n >= limit || now >= seconds {
                break;
            }
            if model.mark_seconds > 0.0 && now - last_mark >= model.mark_seconds {
                marked ^= mark(old) ^ mark(young);
                last_mark = start.elapsed().as_secs_f64();
            }
        }
        std::hint::black_box(marked);
        Ok((n, start.elapsed().as_secs_f64()))
    }

    /// Every byte of both areas against what the fill and the work made of them.
    fn check(&self, mem: &[u8], content: &Content) -> Result<(), WorkloadError> {
        let (old, young) = mem.split_at(self.old_pages * PAGE_SIZE);
        verify(
            old,
            &[Fill::Compressible { first: 0 }],
            Some(content),
            &self.ledger,
        )?;
        for (page, got) in young.chunks_exact(PAGE_SIZE).enumerate() {
            let want = content.page(self.young_content(page));
            if let Some(byte) = got.iter().zip(want).position(|(x, y)| x != y) {
                return Err(WorkloadError::Check {
                    page: self.old_pages + page,
                    area: 1,
                    byte,
                    held: got[byte],
                    expected: want[byte],
                    accesses: self.generation[page],
                });
            }
        }
        Ok(())
    }
}

/// Run the model on `mem` for `seconds` (or `max_accesses`, for tests): fill, work, check.
pub fn run(
    mem: &mut [u8],
    model: &JavaHeap,
    content: &Content,
    seconds: f64,
    max_accesses: Option<u64>,
    seed: u64,
) -> Result<WorkloadOutput, WorkloadError> {
    let pages = mem.len() / PAGE_SIZE;
    if pages < 2 {
        return Err(WorkloadError::AreaTooSmall(mem.len()));
    }
    let mem = &mut mem[..pages * PAGE_SIZE];
    let mut heap = Heap::new(pages, model);
    let t = Instant::now();
    heap.fill(mem, content);
    let fill_seconds = t.elapsed().as_secs_f64().max(1e-9);
    let kb_s = mem.len() as f64 / 1024.0 / fill_seconds;
    let limit = max_accesses.unwrap_or(u64::MAX);
    let (n, s) = heap.work(mem, model, content, (seconds, limit), seed)?;
    heap.check(mem, content)?;
    Ok(WorkloadOutput {
        phases: vec![Phase {
            name: "fill".to_string(),
            bytes: mem.len() as u64,
            seconds: fill_seconds,
            per_worker_kb_s: vec![kb_s],
            total_kb_s: kb_s,
        }],
        accesses: Some(n),
        access_seconds: Some(s),
        accesses_per_s: Some(n as f64 / s.max(1e-9)),
        verified: true,
    })
}

/// A mark phase over `area`: one word of every page read, in address order.
fn mark(area: &[u8]) -> u64 {
    area.chunks_exact(PAGE_SIZE)
        .enumerate()
        .fold(0, |acc, (page, p)| acc ^ get_word(p, access_word(page)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scatter_is_a_bijection() {
        for n in [1usize, 2, 3, 10, 97, 1000, 4096] {
            let f = scatter(n);
            let mut seen = vec![false; n];
            for r in 0..n {
                let p = f(r);
                assert!(!seen[p], "{n}: {p} twice");
                seen[p] = true;
            }
        }
    }

    /// The check covers every byte of both areas after the work: a byte changed in either
    /// is found, and a run left alone passes.
    #[test]
    fn the_check_finds_a_changed_byte_in_either_area() {
        let content = Content::builtin();
        let model = JavaHeap {
            mark_seconds: 0.0,
            ..JavaHeap::default()
        };
        let out = run(
            &mut vec![0u8; 64 * PAGE_SIZE],
            &model,
            &content,
            f64::INFINITY,
            Some(50_000),
            7,
        )
        .unwrap();
        assert!(out.verified && out.accesses.unwrap() >= 50_000);
        for page in [3, 60] {
            let mut mem = vec![0u8; 64 * PAGE_SIZE];
            let mut heap = Heap::new(64, &model);
            heap.fill(&mut mem, &content);
            heap.work(&mut mem, &model, &content, (f64::INFINITY, 20_000), 7)
                .unwrap();
            heap.check(&mem, &content).unwrap();
            mem[page * PAGE_SIZE + 100] ^= 1;
            let e = heap.check(&mem, &content).unwrap_err();
            assert!(
                matches!(e, WorkloadError::Check { page: p, .. } if p == page),
                "{e}"
            );
        }
        assert!(heap_allocates(&model));
    }

    fn heap_allocates(model: &JavaHeap) -> bool {
        let content = Content::builtin();
        let mut mem = vec![0u8; 64 * PAGE_SIZE];
        let mut heap = Heap::new(64, model);
        heap.fill(&mut mem, &content);
        heap.work(&mut mem, model, &content, (f64::INFINITY, 10_000), 1)
            .unwrap();
        heap.generation.iter().all(|&g| g > 0)
    }

    /// Old accesses go mostly to a few pages: with exponent 1 over 10,000 pages, the hottest
    /// 1% take more than half.
    #[test]
    fn the_old_area_has_a_hot_subset() {
        let zipf = Zipf::new(10_000, 1.0).unwrap();
        let mut rng = SmallRng::seed_from_u64(1);
        let hot = (0..100_000)
            .filter(|_| zipf.sample(&mut rng) <= 100.0)
            .count();
        assert!(hot > 50_000, "{hot}");
    }
}
