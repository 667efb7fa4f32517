//! Written bits: which folios the program wrote since reclaim last looked at them
//! (`Policies::referenced_writes`), the kernel's referenced bit for writes. The page tables
//! hold the truth (a page written since it was last write-protected, `WP_ASYNC`); reading it
//! costs a system call and, where pages are protected again, a TLB flush, so it is read for a
//! whole chunk of the region at once (`SCAN_PAGES`, as MGLRU walks page tables in batches
//! rather than folio by folio) and kept here, one bit a folio, until reclaim asks about the
//! folio. A chunk is read again when a folio of it reaches reclaim having been queued after
//! the chunk was last read: its whole trip through the FIFO is then not covered yet.
//!
//! Only a hint: a bit wrong either way keeps a folio once more or lets it go once sooner. It
//! never says a folio is clean (reclaim stores what it moves out).

use std::ops::Range;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

use zswap::sparse::{SparseArray, SparseBitmap};

/// Pages of a chunk read at once: 2 MiB.
pub(crate) const SCAN_PAGES: u32 = 512;

/// The region's written bits.
pub(crate) struct WrittenBits {
    /// One bit a folio: a read of its chunk found it written, and reclaim has not asked since.
    written: SparseBitmap<512>,
    /// Per chunk: the LRU's time (`Lru::now`) when it was last read, plus one (0: never).
    read_at: SparseArray<AtomicU32, 1024>,
    folio_pages: u32,
}

impl WrittenBits {
    pub fn new(folio_pages: u32, nr_folios: usize) -> Self {
        let chunk_folios = (SCAN_PAGES / folio_pages).max(1) as usize;
        WrittenBits {
            written: SparseBitmap::new(nr_folios),
            read_at: SparseArray::new(nr_folios.div_ceil(chunk_folios)),
            folio_pages,
        }
    }

    /// Whether the folio at `start` was written since reclaim last asked (the answer taken:
    /// the next one is of writes after it). `queued_since(t)`: whether the folio was queued at
    /// or after the LRU's time `t`; `now`: the LRU's time; `read`: the written runs of pages
    /// `first..first + n` (page numbers; the caller stops at the region's end), protecting
    /// them again.
    pub fn take(
        &self,
        start: u32,
        queued_since: impl Fn(u32) -> bool,
        now: u32,
        read: impl FnOnce(u32, u32) -> Vec<Range<u32>>,
    ) -> bool {
        let chunk_pages = SCAN_PAGES.max(self.folio_pages);
        let chunk = start / chunk_pages;
        let read_at = self.read_at.entry(chunk as usize);
        let last = read_at.load(Relaxed);
        if last == 0 || queued_since(last - 1) {
            read_at.store(now.wrapping_add(1).max(1), Relaxed);
            for run in read(chunk * chunk_pages, chunk_pages) {
                let folios = run.start / self.folio_pages..run.end.div_ceil(self.folio_pages);
                for f in folios {
                    self.written.assign(f as usize, true);
                }
            }
        }
        self.written
            .assign((start / self.folio_pages) as usize, false)
    }

    /// Memory the bits hold.
    pub fn bytes(&self) -> u64 {
        self.written.bytes() + self.read_at.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chunk is read once for the folios queued before its read, and a folio's bit is
    /// taken once; a folio queued after the read makes the chunk be read again.
    #[test]
    fn a_chunk_is_read_once_per_trip_and_each_bit_taken_once() {
        let bits = WrittenBits::new(4, 2 * SCAN_PAGES as usize / 4);
        let reads = std::cell::Cell::new(0);
        // Pages 0..4 (folio 0) and 9 (folio 2) written.
        let read = |first: u32, n: u32| {
            reads.set(reads.get() + 1);
            assert_eq!((first, n), (0, SCAN_PAGES));
            vec![0..4, 9..10]
        };
        // Every folio queued at time 5; the LRU at 10.
        let queued_since = |t: u32| 5 >= t;
        assert!(bits.take(0, queued_since, 10, read));
        assert_eq!(reads.get(), 1);
        let no_read = |_: u32, _: u32| -> Vec<Range<u32>> { panic!("read again") };
        assert!(
            bits.take(8, queued_since, 11, no_read),
            "folio 2, from the same read"
        );
        assert!(
            !bits.take(4, queued_since, 12, no_read),
            "folio 1 was not written"
        );
        assert!(!bits.take(0, queued_since, 13, no_read), "taken once");
        // A folio queued at 20, after the read (at 10): the chunk is read again.
        let read_again = |first: u32, _: u32| {
            assert_eq!(first, 0);
            std::iter::once(4..5).collect()
        };
        assert!(bits.take(4, |t: u32| 20 >= t, 21, read_again));
    }
}
