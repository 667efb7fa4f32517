//! Rough per-operation cost of the zsmalloc pool: malloc (with the copy in), read (copy out) and
//! free of ~1.5 KB objects, on a growing pool and in steady state after compaction.
//! Run: `cargo run --release -p zswap --example zsmalloc_bench [OBJECTS]` (default 200000;
//! a few thousand keep the pool in cache and show the pool's own cost rather than DRAM's).

use std::time::Instant;

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use zswap::zsmalloc::{Handle, ZsPool};

fn per_op(label: &str, n: usize, t: Instant) {
    println!(
        "{label:<40} {:>7.1} ns/op",
        t.elapsed().as_nanos() as f64 / n as f64
    );
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("OBJECTS is a number"))
        .unwrap_or(200_000);
    println!("{n} objects");
    // Repeat the read passes so small pools run long enough to time.
    let passes = (1_000_000 / n).max(1);
    let mut rng = SmallRng::seed_from_u64(1);
    let data: Vec<u8> = (0..8192).map(|_| rng.gen()).collect();
    let sizes: Vec<usize> = (0..n).map(|_| rng.gen_range(1000..2000)).collect();
    let pool = ZsPool::new();

    let t = Instant::now();
    let mut hs: Vec<Handle> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| pool.malloc(&data[i % 4096..i % 4096 + n]).unwrap())
        .collect();
    per_op("malloc 1-2 KB, growing pool (packed)", n, t);

    let mut buf = [0u8; 4096];
    let mut order = hs.clone();
    order.shuffle(&mut rng);
    let t = Instant::now();
    let mut sum = 0usize;
    for _ in 0..passes {
        for &h in &order {
            sum += pool.read(h, &mut buf);
        }
    }
    per_op("read, random order", n * passes, t);

    hs.shuffle(&mut rng);
    let t = Instant::now();
    for h in hs.drain(..n / 2) {
        pool.free(h);
    }
    per_op("free half, random order", n / 2, t);

    let t = Instant::now();
    let stats = pool.compact();
    println!(
        "compact: {:?} for {} live objects, moved {}, freed {} pages",
        t.elapsed(),
        pool.nr_objects(),
        stats.objects_moved,
        stats.pages_freed
    );

    // Steady state: free one, malloc one of a similar size (class slots get reused).
    let t = Instant::now();
    for i in 0..n * passes {
        let j = rng.gen_range(0..hs.len());
        pool.free(hs[j]);
        hs[j] = pool
            .malloc(&data[i % 4096..i % 4096 + sizes[i % n]])
            .unwrap();
    }
    per_op("steady state free + malloc pair", n * passes, t);

    let t = Instant::now();
    for _ in 0..passes {
        for &h in &hs {
            sum += pool.read(h, &mut buf);
        }
    }
    per_op("read, allocation order", hs.len() * passes, t);
    println!(
        "density {:.4}, metadata {:.1} B/object (checksum {sum})",
        pool.stored_bytes() as f64 / pool.total_size() as f64,
        pool.metadata_bytes() as f64 / pool.nr_objects() as f64
    );
}
