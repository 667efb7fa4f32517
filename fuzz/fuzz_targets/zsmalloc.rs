//! The zsmalloc pool against a HashMap model: the input is a sequence of operations (malloc of
//! a length with a fill pattern, free, compact, read); every read, and the pool's object and
//! byte counts, must match the model. Compaction moves objects between spans, so reads after
//! compactions are where a stale handle or a half-copied object would show.
#![no_main]

use std::collections::HashMap;

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use zswap::zsmalloc::{AllocError, Handle, ZsPool};
use zswap::PAGE_SIZE;

#[derive(Arbitrary, Debug)]
enum Op {
    /// Allocate 1..=4096 bytes (len is taken modulo 4096, plus one), filled from `seed`.
    Malloc {
        len: u16,
        seed: u32,
    },
    /// Allocate a size the pool must refuse: 0, or more than a page.
    MallocBad {
        over: u16,
        zero: bool,
    },
    /// Free the live object at this index (modulo the number of live objects).
    Free {
        idx: u16,
    },
    Compact,
    /// Read the live object at this index and compare.
    Read {
        idx: u16,
    },
    /// Read every live object and compare.
    ReadAll,
}

/// A pattern that differs per object (seed) and per position, so an object read from the
/// wrong place or shifted by some bytes does not match by accident.
fn fill(len: usize, seed: u32) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

struct Model {
    pool: ZsPool,
    objects: HashMap<Handle, Vec<u8>>,
    /// The live handles, for picking one by index.
    live: Vec<Handle>,
}

impl Model {
    fn pick(&self, idx: u16) -> Option<usize> {
        (!self.live.is_empty()).then(|| usize::from(idx) % self.live.len())
    }

    fn read_and_compare(&self, h: Handle) {
        let want = &self.objects[&h];
        let mut out = [0u8; PAGE_SIZE];
        let n = self.pool.read(h, &mut out);
        assert_eq!(n, want.len(), "read length of {h:?}");
        assert_eq!(self.pool.obj_len(h), want.len(), "obj_len of {h:?}");
        assert!(out[..n] == want[..], "contents of {h:?}");
    }

    fn check_counts(&self) {
        assert_eq!(self.pool.nr_objects(), self.objects.len() as u64);
        let bytes: u64 = self.objects.values().map(|v| v.len() as u64).sum();
        assert_eq!(self.pool.stored_bytes(), bytes);
        // Objects live inside the pool's pages, so the pages hold at least their bytes.
        assert!(self.pool.total_size() >= bytes);
    }
}

fuzz_target!(|ops: Vec<Op>| {
    let mut m = Model {
        pool: ZsPool::new(),
        objects: HashMap::new(),
        live: Vec::new(),
    };
    for op in ops.into_iter().take(4096) {
        match op {
            Op::Malloc { len, seed } => {
                let data = fill(usize::from(len) % PAGE_SIZE + 1, seed);
                let h = m.pool.malloc(&data).expect("no page limit is set");
                // A handle is never handed out twice while its object lives.
                assert!(
                    m.objects.insert(h, data).is_none(),
                    "{h:?} reused while live"
                );
                m.live.push(h);
            }
            Op::MallocBad { over, zero } => {
                let len = if zero {
                    0
                } else {
                    PAGE_SIZE + 1 + usize::from(over)
                };
                let r = m.pool.malloc(&vec![0xee; len]);
                assert_eq!(r, Err(AllocError::BadSize(len)));
            }
            Op::Free { idx } => {
                if let Some(i) = m.pick(idx) {
                    let h = m.live.swap_remove(i);
                    m.objects.remove(&h);
                    m.pool.free(h);
                }
            }
            Op::Compact => {
                m.pool.compact();
            }
            Op::Read { idx } => {
                if let Some(i) = m.pick(idx) {
                    m.read_and_compare(m.live[i]);
                }
            }
            Op::ReadAll => {
                for &h in &m.live {
                    m.read_and_compare(h);
                }
            }
        }
        m.check_counts();
    }
    // Everything that is still live reads back, then frees to an empty pool.
    m.pool.compact();
    for h in std::mem::take(&mut m.live) {
        m.read_and_compare(h);
        m.objects.remove(&h);
        m.pool.free(h);
    }
    m.check_counts();
});
