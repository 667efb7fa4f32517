//! A fixed-length array of atomics whose memory comes as it is written, like the kernel's
//! XArray, whose nodes exist only where entries do: a region reserves address space for all
//! the memory a program may ever map, and what uzswap keeps per page must cost what the
//! program touches, not what it reserved.
//!
//! The array is cut into leaves of `LEAF` elements (the last one shorter, so that an array
//! smaller than a leaf costs what it holds). A leaf is allocated, zeroed, the first time an
//! element of it is asked for by `entry`; until then its elements read as zero (`get`
//! answers `None`). Leaves stay until the array is dropped. What the array costs is the
//! table of leaves (24 bytes a leaf, allocated or not) and the allocated leaves: `bytes`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;

/// An array of `len` atomics (`A`: `AtomicU64`, `AtomicU32`, ...), all zero at first, cut
/// into leaves of `LEAF` elements allocated on first write.
pub struct SparseArray<A, const LEAF: usize> {
    leaves: Box<[OnceLock<Box<[A]>>]>,
    len: usize,
    /// Elements in the leaves allocated.
    allocated: AtomicU64,
}

impl<A, const LEAF: usize> std::fmt::Debug for SparseArray<A, LEAF> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SparseArray")
            .field("len", &self.len)
            .field("allocated", &self.allocated.load(Relaxed))
            .finish()
    }
}

impl<A: Default, const LEAF: usize> SparseArray<A, LEAF> {
    /// `len` elements, all zero, no leaf allocated.
    pub fn new(len: usize) -> Self {
        SparseArray {
            leaves: (0..len.div_ceil(LEAF)).map(|_| OnceLock::new()).collect(),
            len,
            allocated: AtomicU64::new(0),
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Element `i` if its leaf is allocated; `None` means it is zero. Panics past the end.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&A> {
        assert!(i < self.len, "index {i} past {}", self.len);
        self.leaves[i / LEAF].get().map(|leaf| &leaf[i % LEAF])
    }

    /// Element `i`, its leaf allocated (zeroed) if it was not. Panics past the end.
    #[inline]
    pub fn entry(&self, i: usize) -> &A {
        assert!(i < self.len, "index {i} past {}", self.len);
        let leaf = self.leaves[i / LEAF].get_or_init(|| {
            let first = i / LEAF * LEAF;
            let n = LEAF.min(self.len - first);
            self.allocated.fetch_add(n as u64, Relaxed);
            (0..n).map(|_| A::default()).collect()
        });
        &leaf[i % LEAF]
    }

    /// Whether element `i`'s leaf is allocated.
    pub fn is_populated(&self, i: usize) -> bool {
        self.leaves[i / LEAF].get().is_some()
    }

    /// The first index at or after `i` whose leaf is allocated, if any.
    pub fn next_populated(&self, i: usize) -> Option<usize> {
        let first = i / LEAF;
        let found = (first..self.leaves.len()).find(|&l| self.leaves[l].get().is_some())?;
        Some(match found == first {
            true => i,
            false => found * LEAF,
        })
    }

    /// The index ranges whose leaves are allocated, in order: every element outside them is
    /// zero.
    pub fn populated(&self) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
        self.leaves
            .iter()
            .enumerate()
            .filter(|(_, l)| l.get().is_some())
            .map(|(l, _)| l * LEAF..((l + 1) * LEAF).min(self.len))
    }

    /// Bytes the array holds: its table of leaves and the leaves allocated.
    pub fn bytes(&self) -> u64 {
        let table = std::mem::size_of_val(&*self.leaves) as u64;
        table + self.allocated.load(Relaxed) * std::mem::size_of::<A>() as u64
    }

    /// What an array of `len` elements holds before a leaf is allocated.
    pub fn table_bytes(len: usize) -> u64 {
        (len.div_ceil(LEAF) * std::mem::size_of::<OnceLock<Box<[A]>>>()) as u64
    }
}

/// A bitmap over a `SparseArray` of 64-bit words: bits set allocate their leaf, bits cleared
/// or read do not.
#[derive(Debug)]
pub struct SparseBitmap<const LEAF: usize> {
    words: SparseArray<AtomicU64, LEAF>,
}

impl<const LEAF: usize> SparseBitmap<LEAF> {
    /// `nr_bits` bits, all clear.
    pub fn new(nr_bits: usize) -> Self {
        SparseBitmap {
            words: SparseArray::new(nr_bits.div_ceil(64)),
        }
    }

    /// Whether bit `i` is set.
    #[inline]
    pub fn test(&self, i: usize) -> bool {
        self.words
            .get(i / 64)
            .is_some_and(|w| w.load(Relaxed) & (1 << (i % 64)) != 0)
    }

    /// Set or clear bit `i`; returns whether it was set.
    #[inline]
    pub fn assign(&self, i: usize, on: bool) -> bool {
        let bit = 1u64 << (i % 64);
        let was = match on {
            true => self.words.entry(i / 64).fetch_or(bit, Relaxed),
            false => match self.words.get(i / 64) {
                Some(w) => w.fetch_and(!bit, Relaxed),
                None => 0,
            },
        };
        was & bit != 0
    }

    /// Clear every bit.
    pub fn clear_all(&self) {
        for range in self.words.populated() {
            for w in range {
                self.words.entry(w).store(0, Relaxed);
            }
        }
    }

    /// Bytes the bitmap holds.
    pub fn bytes(&self) -> u64 {
        self.words.bytes()
    }

    /// What a bitmap of `nr_bits` bits holds before a bit is set.
    pub fn table_bytes(nr_bits: usize) -> u64 {
        SparseArray::<AtomicU64, LEAF>::table_bytes(nr_bits.div_ceil(64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[test]
    fn leaves_come_with_the_first_write_only() {
        let a = SparseArray::<AtomicU32, 4>::new(10);
        assert_eq!(a.bytes(), SparseArray::<AtomicU32, 4>::table_bytes(10));
        assert!(a.get(9).is_none() && !a.is_populated(5));
        assert_eq!(a.next_populated(0), None);
        a.entry(5).store(7, Relaxed);
        assert_eq!(a.get(5).map(|e| e.load(Relaxed)), Some(7));
        assert_eq!(a.get(4).map(|e| e.load(Relaxed)), Some(0));
        assert!(a.get(3).is_none() && a.get(8).is_none());
        assert_eq!(a.populated().collect::<Vec<_>>(), vec![4..8]);
        assert_eq!(a.next_populated(0), Some(4));
        assert_eq!(a.next_populated(6), Some(6));
        assert_eq!(a.next_populated(8), None);
        assert_eq!(a.bytes(), a.leaves.len() as u64 * 24 + 16);
        a.entry(9);
        assert_eq!(a.populated().collect::<Vec<_>>(), vec![4..8, 8..10]);
        // The last leaf holds the two elements left, not four.
        assert_eq!(a.bytes(), a.leaves.len() as u64 * 24 + 24);
    }

    #[test]
    #[should_panic(expected = "past")]
    fn an_index_past_the_end_panics() {
        SparseArray::<AtomicU64, 8>::new(3).get(3);
    }

    #[test]
    fn bits_cleared_or_read_allocate_nothing() {
        let b = SparseBitmap::<2>::new(1000);
        let empty = b.bytes();
        assert!(!b.assign(999, false) && !b.test(999));
        assert_eq!(b.bytes(), empty);
        assert!(!b.assign(999, true) && b.assign(999, true) && b.test(999));
        assert!(b.bytes() > empty && !b.test(998));
        b.clear_all();
        assert!(!b.test(999));
    }

    #[test]
    fn threads_that_race_for_a_leaf_share_one() {
        let a = SparseArray::<AtomicU64, 64>::new(64);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for i in 0..64 {
                        a.entry(i).fetch_add(1, Relaxed);
                    }
                });
            }
        });
        assert!((0..64).all(|i| a.get(i).unwrap().load(Relaxed) == 8));
        assert_eq!(a.allocated.load(Relaxed), 64);
    }
}
