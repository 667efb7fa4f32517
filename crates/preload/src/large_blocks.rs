//! Blocks too large for the region heap's allocator: mimalloc makes no block of 2 GiB or
//! more (a Java heap of `-Xmx2g` reserves one), so the region's upper part is not its arena
//! but this first-fit allocator's, for the mappings mimalloc refuses (mmap.rs).
//!
//! A block here holds no page when handed out or when freed: both discard it, as nothing
//! else zeroes it.

use std::collections::BTreeMap;

use crate::fork_table::ForkTable;

/// Alignment of every block: what runtimes align their heaps to at most without trimming
/// a larger reservation themselves.
const ALIGN: usize = 2 << 20;

/// Free ranges by start, never two adjacent (merged when freed).
pub(crate) static FREE: ForkTable<BTreeMap<usize, usize>> = ForkTable::new(BTreeMap::new());

/// The region's part this allocator has: `len` bytes at `start`, of which it uses the whole
/// `ALIGN`ed ranges.
pub fn init(start: usize, len: usize) {
    let first = start.next_multiple_of(ALIGN);
    let end = (start + len) / ALIGN * ALIGN;
    if end > first {
        FREE.lock().insert(first, end - first);
    }
}

/// A block of `len` bytes (rounded up to `ALIGN`), the first free range it fits in; None
/// when none is large enough.
pub fn alloc(len: usize) -> Option<usize> {
    let len = len.checked_next_multiple_of(ALIGN)?;
    let mut free = FREE.lock();
    let (&start, &have) = free.iter().find(|(_, &have)| have >= len)?;
    free.remove(&start);
    if have > len {
        free.insert(start + len, have - len);
    }
    Some(start)
}

/// Give back the block of `len` bytes at `start` (as `alloc` gave it).
pub fn free(start: usize, len: usize) {
    let mut len = len.next_multiple_of(ALIGN);
    let mut start = start;
    let mut free = FREE.lock();
    if let Some((&before, &before_len)) = free.range(..start).next_back() {
        if before + before_len == start {
            free.remove(&before);
            start = before;
            len += before_len;
        }
    }
    if let Some(after_len) = free.remove(&(start + len)) {
        len += after_len;
    }
    free.insert(start, len);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_aligned_first_fit_and_freed_ranges_merge() {
        const G: usize = 1 << 30;
        init(16 * G - 4096, 8 * G + 4096);
        let a = alloc(3 * G).unwrap();
        let b = alloc(G + 1).unwrap();
        assert_eq!((a, b), (16 * G, 19 * G), "first fit, in order");
        let c = alloc(2 * G).unwrap();
        assert_eq!(c, 19 * G + (G + ALIGN), "rounded up to the alignment");
        assert_eq!(alloc(3 * G), None, "no range that large is left");
        free(a, 3 * G);
        free(b, G + 1);
        assert_eq!(alloc(4 * G).unwrap(), 16 * G, "the two freed blocks merged");
        free(16 * G, 4 * G);
        free(c, 2 * G);
        assert_eq!(alloc(8 * G).unwrap(), 16 * G, "all of it merged again");
    }
}
