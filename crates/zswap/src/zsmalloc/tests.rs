//! Tests of the pool as a whole: one behaviour per unit test, a model test against a HashMap,
//! a concurrency stress test with compaction racing, and density on the real-page corpus.

use std::collections::HashMap;

use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::class::{class_of, geometry};
use super::handle::Location;
use super::*;
use crate::PAGE_SIZE;

/// `len` bytes that depend on `seed` and position, so a misplaced or torn copy shows (and,
/// for the engine's tests, a page that does not compress).
pub(crate) fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn read_vec(pool: &ZsPool, h: Handle) -> Vec<u8> {
    let mut buf = [0u8; PAGE_SIZE];
    let n = pool.read(h, &mut buf);
    buf[..n].to_vec()
}

fn location(pool: &ZsPool, h: Handle) -> Location {
    pool.shared().location(h.0)
}

fn span_of(pool: &ZsPool, h: Handle) -> u32 {
    match location(pool, h) {
        Location::Span { span, .. } => span,
        Location::Huge(_) => panic!("huge object"),
    }
}

#[test]
fn bad_sizes_are_refused() {
    let pool = ZsPool::new();
    assert_eq!(pool.malloc(&[]), Err(AllocError::BadSize(0)));
    assert_eq!(pool.malloc(&[0; 4097]), Err(AllocError::BadSize(4097)));
    assert_eq!(pool.nr_objects(), 0);
    assert_eq!(pool.total_size(), 0);
}

#[test]
fn packed_objects_are_appended_back_to_back() {
    let pool = ZsPool::new();
    let sizes = [100, 1, 2000, 37, 4080];
    let hs: Vec<_> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| pool.malloc(&pattern(i as u64, n)).unwrap())
        .collect();
    let mut off = 0;
    let first = span_of(&pool, hs[0]);
    for (h, &n) in hs.iter().zip(&sizes) {
        assert_eq!(
            location(&pool, *h),
            Location::Span {
                span: first,
                off: off as u16
            }
        );
        off += n;
    }
    // Only pages holding bytes are attached.
    assert_eq!(pool.total_size(), off.div_ceil(PAGE_SIZE) as u64 * 4096);
    assert_eq!(pool.stored_bytes(), off as u64);
    pool.check_consistency().unwrap();
}

#[test]
fn objects_straddling_pages_read_back() {
    let pool = ZsPool::new();
    // 1500-byte objects at 0, 1500, 3000 (straddles 4096), 4500, ...
    let hs: Vec<_> = (0..40)
        .map(|i| pool.malloc(&pattern(i, 1500)).unwrap())
        .collect();
    assert_eq!(
        location(&pool, hs[2]),
        Location::Span {
            span: span_of(&pool, hs[0]),
            off: 3000
        }
    );
    for (i, h) in hs.iter().enumerate() {
        assert_eq!(read_vec(&pool, *h), pattern(i as u64, 1500));
    }
    // And in class spans: 1504-byte slots cross page boundaries too.
    pool.compact();
    let first = span_of(&pool, hs[0]);
    assert!(pool.shared().spans[first].kind == span::SpanKind::Class);
    for (i, h) in hs.iter().enumerate() {
        assert_eq!(read_vec(&pool, *h), pattern(i as u64, 1500));
    }
    pool.check_consistency().unwrap();
}

#[test]
fn huge_objects_take_a_page_each() {
    let pool = ZsPool::new();
    let a = pool.malloc(&pattern(1, 4081)).unwrap();
    let b = pool.malloc(&pattern(2, 4096)).unwrap();
    assert!(matches!(location(&pool, a), Location::Huge(_)));
    assert!(matches!(location(&pool, b), Location::Huge(_)));
    assert_eq!(pool.total_size(), 2 * 4096);
    assert_eq!(read_vec(&pool, b), pattern(2, 4096));
    assert_eq!(pool.obj_len(a), 4081);
    pool.free(a);
    assert_eq!(pool.total_size(), 4096);
    // 4080 bytes is the largest class, not huge.
    let c = pool.malloc(&pattern(3, 4080)).unwrap();
    assert!(matches!(location(&pool, c), Location::Span { .. }));
    pool.check_consistency().unwrap();
}

#[test]
fn allocation_takes_the_fullest_class_span() {
    let pool = ZsPool::new();
    let class = class_of(64);
    let objs = geometry(class).objs as usize;
    assert_eq!(objs, 64);
    let hs: Vec<_> = (0..3 * objs as u64)
        .map(|i| pool.malloc(&pattern(i, 64)).unwrap())
        .collect();
    pool.compact();
    let mut by_span: HashMap<u32, Vec<Handle>> = HashMap::new();
    for &h in &hs {
        by_span.entry(span_of(&pool, h)).or_default().push(h);
    }
    assert_eq!(by_span.len(), 3, "compaction made three full class spans");
    let mut spans: Vec<_> = by_span.into_iter().collect();
    spans.sort();
    // Span A 63/64 full, B 24/64, C 44/64.
    let (a, b, c) = (spans[0].0, spans[1].0, spans[2].0);
    pool.free(spans[0].1[0]);
    spans[1].1[..40].iter().for_each(|&h| {
        pool.free(h);
    });
    spans[2].1[..20].iter().for_each(|&h| {
        pool.free(h);
    });
    let x = pool.malloc(&pattern(100, 60)).unwrap();
    assert_eq!(span_of(&pool, x), a);
    let y = pool.malloc(&pattern(101, 60)).unwrap();
    assert_eq!(span_of(&pool, y), c, "A is full: C (69%) beats B (38%)");
    assert_ne!(c, b);
    pool.check_consistency().unwrap();
}

#[test]
fn handles_survive_compaction() {
    let pool = ZsPool::new();
    let mut rng = SmallRng::seed_from_u64(7);
    let mut live: Vec<(Handle, Vec<u8>)> = (0..3000u64)
        .map(|i| {
            let data = pattern(i, rng.gen_range(1..=4096));
            (pool.malloc(&data).unwrap(), data)
        })
        .collect();
    live.shuffle(&mut rng);
    for (h, _) in live.drain(..1500) {
        pool.free(h);
    }
    let before: Vec<_> = live.iter().map(|(h, _)| location(&pool, *h)).collect();
    let stats = pool.compact();
    assert!(stats.objects_moved > 0);
    let after: Vec<_> = live.iter().map(|(h, _)| location(&pool, *h)).collect();
    assert_ne!(before, after, "objects moved");
    for (h, data) in &live {
        assert_eq!(&read_vec(&pool, *h), data);
    }
    pool.check_consistency().unwrap();
}

/// A pool of 12,000 objects of many classes with every other one freed: compaction has far
/// more than one step's budget of moves to make.
fn fragmented_pool(seed: u64) -> (ZsPool, Vec<(Handle, Vec<u8>)>) {
    fragmented_pool_of(seed, 200..=3000)
}

/// The same, with object sizes from `sizes`.
fn fragmented_pool_of(
    seed: u64,
    sizes: std::ops::RangeInclusive<usize>,
) -> (ZsPool, Vec<(Handle, Vec<u8>)>) {
    let pool = ZsPool::new();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut live: Vec<(Handle, Vec<u8>)> = (0..12_000u64)
        .map(|i| {
            let data = pattern(i, rng.gen_range(sizes.clone()));
            (pool.malloc(&data).unwrap(), data)
        })
        .collect();
    live.shuffle(&mut rng);
    for (h, _) in live.drain(..6000) {
        pool.free(h);
    }
    (pool, live)
}

#[test]
fn compaction_steps_are_bounded_and_end_no_worse_than_one_pass() {
    let (stepped, live) = fragmented_pool(11);
    let (whole, _) = fragmented_pool(11);

    // A step moves at most its budget, and says whether it is done.
    let (moved, done) = stepped.exclusive().compact_step(compact::STEP_BUDGET);
    assert_eq!(moved, compact::STEP_BUDGET);
    assert!(
        !done,
        "12,000 objects' worth of compaction takes more than one step"
    );
    stepped.check_consistency().unwrap();

    // The rest in steps (the lock given up between them) ends with the pool at most as large
    // as one unbounded pass leaves it (each step's ceiling starts from the pool as the steps
    // before left it, so steps can do better).
    let rest = stepped.compact();
    let (moved_whole, done_whole) = whole.exclusive().compact_step(u64::MAX);
    assert!(done_whole);
    assert!(rest.objects_moved > compact::STEP_BUDGET);
    eprintln!(
        "moved in steps: {}, in one pass: {moved_whole}",
        moved + rest.objects_moved
    );
    assert!(stepped.total_size() <= whole.total_size());
    assert!(
        (stepped.total_size() as f64) < stepped.stored_bytes() as f64 * 1.05,
        "compacted: {} bytes of pages for {} stored",
        stepped.total_size(),
        stepped.stored_bytes()
    );
    // Nothing left to do.
    assert_eq!(stepped.compact().objects_moved, 0);
    for (h, data) in &live {
        assert_eq!(&read_vec(&stepped, *h), data);
    }
    stepped.check_consistency().unwrap();
}

/// Compaction moves objects into spans mostly paid for by the ones it empties, each emptied
/// whole before the next: between two steps the pool holds at most one partly filled span per
/// size class, and the part of one packed span already moved, more than before it began.
/// (Moving class by class would leave every packed span alive until the last class: the pool
/// would grow by all that had moved, and a region charged for its pool go over its limit.)
/// At no moment (every page allocation is watched) does a compaction step take the pool's
/// charge more than its headroom above where the step began, which the pool charges to its
/// region: so compaction cannot take a region over its limit.
#[test]
fn compaction_never_takes_the_pool_over_its_charge_and_headroom() {
    // Sizes of a few classes, as a workload's pages compress to (moved class by class, the
    // pool would grow by a third), and a spread of sizes with packed spans to drain.
    for (seed, sizes) in [(14, 1500..=1700), (16, 100..=3000)] {
        let (pool, live) = fragmented_pool_of(seed, sizes);
        let before = pool.shared().arena.nr_used();
        let mut steps = 0;
        loop {
            let mut state = pool.exclusive();
            let start = state.arena.charged();
            let headroom = state.compact_headroom();
            state.arena.take_peak_charged();
            let done = state.compact_step(compact::STEP_BUDGET / 4).1;
            let peak = state.arena.take_peak_charged();
            assert!(
                peak <= start + headroom,
                "step {steps} took the pool from {start} to {peak} charged pages"
            );
            drop(state);
            pool.check_consistency().unwrap();
            if done {
                break;
            }
            steps += 1;
            assert!(steps < 1000, "compaction in steps does not converge");
        }
        let after = pool.shared().arena.nr_used();
        eprintln!("pages: {before} before, {after} after {steps} steps");
        assert!(steps > 10);
        // Kept under the ceiling, it still compacts as well as it did without one.
        assert!(after < before * 2 / 3, "{before} -> {after} pages");
        for (h, data) in &live {
            assert_eq!(&read_vec(&pool, *h), data);
        }
    }
}

/// Small objects cost more pages in class slots (rounded up) than packed back to back: with
/// nothing dead to pay for it, compaction leaves them packed rather than grow the pool.
#[test]
fn compaction_does_not_grow_the_pool_to_classify_small_objects() {
    let pool = ZsPool::new();
    let live: Vec<_> = (0..50_000u64)
        .map(|i| {
            let data = pattern(i, 20);
            (pool.malloc(&data).unwrap(), data)
        })
        .collect();
    let before = pool.total_size();
    pool.compact();
    assert!(
        pool.total_size() <= before,
        "{before} -> {} bytes",
        pool.total_size()
    );
    for (h, data) in &live {
        assert_eq!(&read_vec(&pool, *h), data);
    }
    pool.check_consistency().unwrap();
}

/// At its page cap the pool cannot re-append what compaction moves: the compaction ends
/// (rather than step again and again into the same wall), and every object reads back.
#[test]
fn compaction_at_the_page_cap_ends_and_loses_nothing() {
    let (pool, live) = fragmented_pool(15);
    let pages = pool.shared().arena.nr_used();
    pool.set_max_pages(Some(pages));
    let mut steps = 0;
    while !pool.exclusive().compact_step(compact::STEP_BUDGET).1 {
        steps += 1;
        assert!(steps < 100, "compaction at the cap never ends");
    }
    assert!(pool.shared().arena.nr_used() <= pages);
    for (h, data) in &live {
        assert_eq!(&read_vec(&pool, *h), data);
    }
    pool.check_consistency().unwrap();
}

#[test]
fn compaction_steps_interleave_with_frees_and_mallocs() {
    let (pool, mut live) = fragmented_pool(12);
    let mut rng = SmallRng::seed_from_u64(13);
    // Under steady churn compaction always has more to do (every free may leave a class
    // one span too many): the work is bounded per step, not in total.
    for _ in 0..40 {
        let (moved, _) = pool.exclusive().compact_step(compact::STEP_BUDGET / 4);
        assert!(moved <= compact::STEP_BUDGET / 4);
        pool.check_consistency().unwrap();
        // What a load (exclusive: the object is freed) and a store do between two steps.
        for _ in 0..50 {
            let i = rng.gen_range(0..live.len());
            let (h, data) = live.swap_remove(i);
            assert_eq!(read_vec(&pool, h), data);
            pool.free(h);
            let data = pattern(rng.gen(), rng.gen_range(200..=3000));
            live.push((pool.malloc(&data).unwrap(), data));
        }
    }
    // Once the churn stops, the steps finish.
    let mut steps = 0;
    while !pool.exclusive().compact_step(compact::STEP_BUDGET / 4).1 {
        steps += 1;
        assert!(steps < 1000, "compaction in steps does not converge");
    }
    pool.check_consistency().unwrap();
    for (h, data) in &live {
        assert_eq!(&read_vec(&pool, *h), data);
    }
}

#[test]
fn freed_pages_go_back() {
    let pool = ZsPool::new();
    let hs: Vec<_> = (0..5000u64)
        .map(|i| {
            pool.malloc(&pattern(i, 1000 + (i as usize % 3000)))
                .unwrap()
        })
        .collect();
    assert!(pool.total_size() > 2 * 512 * 4096, "more than two chunks");
    pool.compact();
    for h in hs {
        pool.free(h);
    }
    // The open packed span may keep one page for the next malloc; compaction drops it.
    assert!(pool.total_size() <= 4096);
    pool.compact();
    assert_eq!(pool.total_size(), 0);
    assert_eq!(pool.shared().arena.nr_chunks_mapped(), 0);
    pool.check_consistency().unwrap();
}

/// `malloc_many` gives handles in the objects' order, each holding its object; at the page
/// cap it stops with PoolFull, the objects before the failure allocated and handed back.
#[test]
fn malloc_many_allocates_in_order_and_stops_at_the_first_failure() {
    let pool = ZsPool::new();
    let objects: Vec<Vec<u8>> = (0..16)
        .map(|i| pattern(i, 700 + 200 * i as usize))
        .collect();
    let mut hs = Vec::new();
    pool.malloc_many(objects.iter().map(Vec::as_slice), &mut hs)
        .unwrap();
    assert_eq!(hs.len(), objects.len());
    let mut out = vec![0; 4096];
    for (h, object) in hs.iter().zip(&objects) {
        let n = pool.read(*h, &mut out);
        assert_eq!(&out[..n], object.as_slice());
    }
    let pages = pool.total_size() / 4096;
    pool.set_max_pages(Some(pages + 1));
    let mut more = Vec::new();
    let err = pool
        .malloc_many((0..8).map(|_| &[7u8; 4096][..]), &mut more)
        .unwrap_err();
    assert_eq!(err, AllocError::PoolFull);
    assert_eq!(more.len(), 1, "one page-sized object fits under the cap");
    assert_eq!(pool.nr_objects(), 17);
    let n = pool.read(more[0], &mut out);
    assert_eq!(&out[..n], &[7u8; 4096][..]);
    pool.check_consistency().unwrap();
}

#[test]
fn page_cap_fails_with_pool_full_and_leaves_no_trace() {
    let pool = ZsPool::new();
    pool.set_max_pages(Some(3));
    let mut hs = Vec::new();
    let err = loop {
        match pool.malloc(&pattern(hs.len() as u64, 1800)) {
            Ok(h) => hs.push(h),
            Err(e) => break e,
        }
    };
    assert_eq!(err, AllocError::PoolFull);
    assert_eq!(pool.total_size(), 3 * 4096);
    assert_eq!(pool.nr_objects(), hs.len() as u64);
    pool.check_consistency().unwrap();
    assert_eq!(pool.malloc(&[1; 4096]), Err(AllocError::PoolFull));
    // A small object still fits in the tail of the last page.
    let tail = 3 * 4096 - 1800 * hs.len();
    assert!(pool.malloc(&pattern(9, tail)).is_ok());
    pool.free(hs[0]);
    pool.set_max_pages(None);
    assert!(pool.malloc(&[1; 4096]).is_ok());
    pool.check_consistency().unwrap();
}

// ---- Model test ----

#[derive(Debug, Clone)]
enum Op {
    Malloc(usize, u64),
    Free(usize),
    Read(usize),
    Compact,
    Cap(Option<u64>),
}

fn op() -> impl Strategy<Value = Op> {
    let size = prop_oneof![1usize..=64, 1usize..=4096, 4070usize..=4096];
    prop_oneof![
        8 => (size, any::<u64>()).prop_map(|(n, s)| Op::Malloc(n, s)),
        5 => any::<usize>().prop_map(Op::Free),
        2 => any::<usize>().prop_map(Op::Read),
        1 => Just(Op::Compact),
        1 => prop::option::of(0u64..64).prop_map(Op::Cap),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn pool_matches_a_hashmap(ops in prop::collection::vec(op(), 1..300)) {
        let pool = ZsPool::new();
        let mut model: HashMap<Handle, Vec<u8>> = HashMap::new();
        let mut order: Vec<Handle> = Vec::new();
        for op in ops {
            match op {
                Op::Malloc(n, seed) => {
                    let data = pattern(seed, n);
                    let before = pool.total_size();
                    match pool.malloc(&data) {
                        Ok(h) => {
                            prop_assert!(model.insert(h, data).is_none(), "handle reused while live");
                            order.push(h);
                        }
                        Err(AllocError::PoolFull) => prop_assert_eq!(pool.total_size(), before),
                        Err(e) => prop_assert!(false, "unexpected {e}"),
                    }
                }
                Op::Free(i) if !order.is_empty() => {
                    let h = order.swap_remove(i % order.len());
                    model.remove(&h);
                    pool.free(h);
                }
                Op::Read(i) if !order.is_empty() => {
                    let h = order[i % order.len()];
                    prop_assert_eq!(&read_vec(&pool, h), &model[&h]);
                }
                Op::Compact => {
                    pool.compact();
                }
                Op::Cap(c) => pool.set_max_pages(c),
                _ => {}
            }
            for (h, data) in &model {
                prop_assert_eq!(&read_vec(&pool, *h), data);
                prop_assert_eq!(pool.obj_len(*h), data.len());
            }
            prop_assert_eq!(pool.nr_objects(), model.len() as u64);
            prop_assert_eq!(pool.stored_bytes(), model.values().map(|d| d.len() as u64).sum::<u64>());
            if let Err(e) = pool.check_consistency() {
                prop_assert!(false, "{}", e);
            }
        }
    }
}

// ---- Concurrency ----

#[test]
fn stress_threads_with_compaction() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    let pool = Arc::new(ZsPool::new());
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + Duration::from_millis(1500);
    let workers: Vec<_> = (0..8u64)
        .map(|t| {
            let (pool, stop) = (pool.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(t);
                let mut mine: Vec<(Handle, u64, usize)> = Vec::new();
                let mut buf = [0u8; PAGE_SIZE];
                let mut ops = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    ops += 1;
                    let r = rng.gen_range(0..10);
                    if r < 4 || mine.len() < 16 {
                        let (seed, n) = (rng.gen(), rng.gen_range(1..=4096));
                        mine.push((pool.malloc(&pattern(seed, n)).unwrap(), seed, n));
                    } else if r < 7 {
                        let (h, seed, n) = mine.swap_remove(rng.gen_range(0..mine.len()));
                        assert_eq!(pool.read(h, &mut buf), n);
                        assert_eq!(buf[..n], pattern(seed, n)[..]);
                        pool.free(h);
                    } else {
                        let (h, seed, n) = mine[rng.gen_range(0..mine.len())];
                        assert_eq!(pool.read(h, &mut buf), n);
                        assert_eq!(buf[..n], pattern(seed, n)[..]);
                    }
                    if mine.len() > 2000 {
                        for (h, _, _) in mine.drain(..1000) {
                            pool.free(h);
                        }
                    }
                }
                for (h, seed, n) in mine {
                    assert_eq!(pool.read(h, &mut buf), n);
                    assert_eq!(buf[..n], pattern(seed, n)[..]);
                    pool.free(h);
                }
                ops
            })
        })
        .collect();
    let mut compactions = 0;
    while Instant::now() < deadline {
        pool.compact();
        compactions += 1;
        std::thread::sleep(Duration::from_millis(1));
    }
    stop.store(true, Ordering::Relaxed);
    let ops: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    eprintln!("stress: {ops} ops, {compactions} compactions");
    assert_eq!(pool.nr_objects(), 0);
    pool.check_consistency().unwrap();
    pool.compact();
    assert_eq!(pool.total_size(), 0);
}

// ---- Density on real pages ----

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../corpus");

#[test]
fn density_on_the_corpus() {
    let dir = std::fs::read_dir(CORPUS).unwrap_or_else(|e| panic!("the corpus at {CORPUS}: {e}"));
    let mut files: Vec<_> = dir
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pages"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    let lz4 = crate::compress::CompressorSpec::default().build();
    let mut buf = vec![0u8; PAGE_SIZE - 1];
    for path in files {
        let bytes = std::fs::read(&path).unwrap();
        let pool = ZsPool::new();
        let mut hs = Vec::new();
        for page in bytes.chunks_exact(PAGE_SIZE) {
            if page.iter().all(|&b| b == 0) {
                continue;
            }
            let h = match lz4.compress(page, &mut buf) {
                Ok(n) => pool.malloc(&buf[..n]),
                Err(_) => pool.malloc(page),
            };
            hs.push(h.unwrap());
        }
        let density = |p: &ZsPool| p.stored_bytes() as f64 / p.total_size() as f64;
        let per_obj = |p: &ZsPool| p.metadata_bytes() as f64 / p.nr_objects() as f64;
        let (full, meta_full) = (density(&pool), per_obj(&pool));
        pool.check_consistency().unwrap();

        let mut rng = SmallRng::seed_from_u64(42);
        hs.shuffle(&mut rng);
        let n = hs.len();
        for h in hs.drain(..n / 2) {
            pool.free(h);
        }
        let freed = density(&pool);
        let stats = pool.compact();
        let (half, meta_half) = (density(&pool), per_obj(&pool));
        pool.check_consistency().unwrap();
        let name = path.file_name().unwrap().to_string_lossy();
        {
            let st = pool.shared();
            eprintln!(
                "  meta: handles {} spans {} ({} used) lists {} arena {}",
                st.handles.metadata_bytes(),
                st.spans.metadata_bytes(),
                st.spans.iter_used().count(),
                st.lists.capacity() * std::mem::size_of::<fullness::FullnessLists>(),
                st.arena.metadata_bytes()
            );
        }
        eprintln!(
            "{name}: {n} objects; full {full:.4} ({meta_full:.1} B meta/obj); half freed {freed:.4}, \
             compacted {half:.4} ({meta_half:.1} B meta/obj; moved {}, freed {} pages)",
            stats.objects_moved, stats.pages_freed
        );
        assert!(full >= 0.95, "{name}: density {full} when full");
        assert!(
            half >= 0.93,
            "{name}: density {half} after freeing half and compacting"
        );
    }
}

/// Slack a compaction could not remove does not make every later check compact again (each
/// compaction scans the whole handle table): a change of the page cap, or new slack, does.
#[test]
fn slack_compaction_cannot_remove_does_not_trigger_it_again() {
    let (pool, mut live) = fragmented_pool(17);
    // At a cap below the pool's size nothing can be allocated: with no class spans yet, the
    // packed spans cannot be drained, and their holes stay.
    pool.set_max_pages(Some(0));
    let before = pool.total_size();
    assert!(pool.total_size() > pool.stored_bytes() / 8 * 9 + (1 << 20));
    let ran = pool
        .compact_if_fragmented()
        .expect("a fragmented pool is compacted");
    assert_eq!(ran.objects_moved, 0);
    assert_eq!(pool.total_size(), before);
    assert_eq!(pool.compact_if_fragmented(), None, "the same slack again");

    // The cap lifted, compaction can do more: it runs.
    pool.set_max_pages(None);
    let ran = pool.compact_if_fragmented().expect("the cap changed");
    assert!(ran.objects_moved > 0 && pool.total_size() < before);
    assert_eq!(pool.compact_if_fragmented(), None, "compacted already");

    // Frees that leave new holes, more than an eighth and 1 MiB, make it run again.
    while pool.total_size() - pool.stored_bytes() <= pool.stored_bytes() / 8 + (1 << 20) {
        let (h, _) = live.pop().unwrap();
        pool.free(h);
    }
    assert!(
        pool.compact_if_fragmented().is_some(),
        "new slack is compacted"
    );
    for (h, data) in &live {
        assert_eq!(&read_vec(&pool, *h), data);
    }
    pool.check_consistency().unwrap();
}

/// Compaction's reverse map is memory of the pool like any other: kept from step to step and
/// charged as metadata, not allocated afresh by every step. (Freed after each step, it would
/// stay resident in the allocator of each thread that compacts, uncharged, and take the
/// process's RSS past its region's limit.)
#[test]
fn compaction_keeps_and_charges_its_reverse_map() {
    let (pool, live) = fragmented_pool(17);
    let before = pool.metadata_bytes();
    let (_, done) = pool.compact_step(compact::STEP_BUDGET);
    assert!(!done);
    let map = pool.shared().by_span.bytes();
    // A handle a live object, and an index a span.
    assert!(
        map >= 4 * live.len() as u64,
        "map of {map} bytes kept for {} objects",
        live.len()
    );
    // (The other tables are tidied only when a compaction ends: they did not shrink.)
    assert!(pool.metadata_bytes() >= before + map, "the map is charged");
    let (_, done) = pool.compact_step(compact::STEP_BUDGET);
    assert!(!done);
    assert!(pool.shared().by_span.bytes() >= map, "kept between steps");

    // Most objects freed, the next compaction's end gives the big map back.
    for (h, _) in &live[..5500] {
        pool.free(*h);
    }
    pool.compact();
    let after = pool.shared().by_span.bytes();
    assert!(
        after < map / 2,
        "map of {after} bytes kept after the pool shrank"
    );
    for (h, data) in &live[5500..] {
        assert_eq!(&read_vec(&pool, *h), data);
    }
    pool.check_consistency().unwrap();
}

/// The sizes an owner reads without the lock (a region's limit check, the pool limit) are
/// those the last change left: malloc, free, compaction and a new cap each publish them.
#[test]
fn every_change_publishes_the_pool_sizes() {
    let check = |pool: &ZsPool, what: &str| {
        let s = pool.shared();
        let reserved = (s.reserved_pages() + s.compact_headroom()) * PAGE_SIZE as u64;
        assert_eq!(pool.total_size(), s.total_size(), "total after {what}");
        assert_eq!(
            pool.charged_bytes(),
            s.total_size() + reserved,
            "charged after {what}"
        );
        assert_eq!(
            pool.metadata_bytes(),
            s.metadata_bytes(),
            "metadata after {what}"
        );
    };
    check(&ZsPool::new(), "nothing");
    let (pool, live) = fragmented_pool(21);
    check(&pool, "mallocs");
    for (h, _) in &live[..live.len() / 2] {
        pool.free(*h);
    }
    check(&pool, "frees");
    assert!(pool.compact().pages_freed > 0);
    check(&pool, "a compaction");
    pool.set_max_pages(Some(1));
    check(&pool, "a cap");
    pool.set_max_pages(None);
    pool.malloc(&[7; 3000]).unwrap();
    check(&pool, "a malloc");
}

/// What the pool keeps for reuse (an empty open span, freed pages) is charged, and
/// `give_back_kept` returns it without a compaction; with nothing kept it reports so.
#[test]
fn pages_kept_for_reuse_are_given_back_on_request() {
    let pool = ZsPool::new();
    let handles: Vec<Handle> = (0..8)
        .map(|i| pool.malloc(&pattern(i, 3000)).unwrap())
        .collect();
    for h in handles {
        pool.free(h);
    }
    assert_eq!(pool.nr_objects(), 0);
    assert!(
        pool.charged_bytes() > 0,
        "the open span's page and the reserve"
    );
    assert!(pool.give_back_kept());
    assert_eq!(pool.charged_bytes(), 0);
    assert_eq!(pool.total_size(), 0);
    assert!(!pool.give_back_kept(), "nothing left to give");
    let h = pool.malloc(&pattern(9, 100)).unwrap();
    assert_eq!(read_vec(&pool, h), pattern(9, 100));
}

/// A pool sized to the memory it serves keeps at most 1/256 of it in freed pages for reuse
/// (its owner charges them), gives back at once what a smaller share no longer covers, and
/// compacts past a slack floor of the same share. Would fail with the flat 4 MiB reserve and
/// 1 MiB floor: a region of 128 MiB would keep 3% of its limit in empty pool pages.
#[test]
fn the_reserve_and_the_compaction_floor_follow_the_served_memory() {
    let pool = ZsPool::new();
    // 2,000 pages of objects, all freed: the default reserve keeps 1024 of them.
    let handles: Vec<Handle> = (0..4000)
        .map(|i| pool.malloc(&pattern(i, 2000)).unwrap())
        .collect();
    for h in &handles {
        pool.free(*h);
    }
    let headroom = pool.shared().compact_headroom() * PAGE_SIZE as u64;
    assert_eq!(pool.reserved_bytes() - headroom, 1024 * PAGE_SIZE as u64);
    // Serving 64 MiB: 256 KiB kept, the rest given back now.
    pool.set_served_memory(64 << 20);
    let headroom = pool.shared().compact_headroom() * PAGE_SIZE as u64;
    assert_eq!(pool.reserved_bytes() - headroom, 256 << 10);
    assert_eq!(
        pool.charged_bytes(),
        pool.total_size() + pool.reserved_bytes()
    );
    // Frees past it are given back too.
    let handles: Vec<Handle> = (0..1000)
        .map(|i| pool.malloc(&pattern(i, 2000)).unwrap())
        .collect();
    for h in &handles {
        pool.free(*h);
    }
    let headroom = pool.shared().compact_headroom() * PAGE_SIZE as u64;
    assert!(pool.reserved_bytes() - headroom <= 256 << 10);
    // Half a MiB of slack (every other 2000-byte object of 1,000 freed) is under the default
    // floor of 1 MiB, over that of a pool serving 64 MiB (256 KiB).
    let fragmented = || {
        let pool = ZsPool::new();
        let handles: Vec<Handle> = (0..1000)
            .map(|i| pool.malloc(&pattern(i, 2000)).unwrap())
            .collect();
        for h in handles.iter().step_by(2) {
            pool.free(*h);
        }
        pool
    };
    assert!(fragmented().compact_if_fragmented().is_none());
    let small = fragmented();
    small.set_served_memory(64 << 20);
    assert!(small
        .compact_if_fragmented()
        .is_some_and(|c| c.pages_freed > 0));
    small.check_consistency().unwrap();
}
