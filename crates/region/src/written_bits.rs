//! Written bits: which folios the program wrote since reclaim last looked at them
//! (`Policies::referenced_writes`), the kernel's referenced bit for writes. The page tables
//! hold the truth (a page written since it was last write-protected, `WP_ASYNC`); reading it
//! costs a system call and, where pages are protected again, a TLB flush, so it is read for a
//! whole chunk of the region at once (`SCAN_PAGES`, as MGLRU walks page tables in batches
//! rather than folio by folio) and kept here, one bit a folio, until reclaim asks about the
//! folio. A chunk is read again when the folio reclaim asks about has spent more than half
//! its trip through the FIFO since the chunk's last read: at least half of each trip is
//! covered, and a chunk is read about once for every two of its folios that come round.
//!
//! Only a hint: a bit wrong either way keeps a folio once more or lets it go once sooner.
//! It never says a folio is clean (reclaim stores what it moves out). A bit left by a folio
//! that went without being asked (a neighbour of a batch, one dropped behind) keeps it once
//! when it comes back, which its refault says it was worth.

use std::ops::Range;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

use zswap::sparse::{SparseArray, SparseBitmap};

use crate::lock_order::{self, Mutex};

/// Pages of a chunk read at once: 2 MiB.
pub(crate) const SCAN_PAGES: u32 = 512;

/// The region's written bits.
pub(crate) struct WrittenBits {
    /// One bit a folio: a read of its chunk found it written, and reclaim has not asked since.
    written: SparseBitmap<512>,
    /// Per chunk: the LRU's time (`Lru::now`) when it was last read, plus one (0: never).
    /// Set once the read's bits are in: a reclaimer that sees it current finds them there.
    read_at: SparseArray<AtomicU32, 1024>,
    /// Held across a chunk's read, so that a reclaimer asking about a folio of a chunk being
    /// read waits for its bits rather than find them not set yet (the read took them from
    /// the page tables).
    reading: Mutex<()>,
    folio_pages: u32,
}

impl WrittenBits {
    pub fn new(folio_pages: u32, nr_folios: usize) -> Self {
        let chunk_folios = (SCAN_PAGES / folio_pages).max(1) as usize;
        WrittenBits {
            written: SparseBitmap::new(nr_folios),
            read_at: SparseArray::new(nr_folios.div_ceil(chunk_folios)),
            reading: Mutex::new(&lock_order::WRITTEN_READ, ()),
            folio_pages,
        }
    }

    /// Whether the folio at `start` was written since reclaim last asked (the answer taken:
    /// the next one is of writes after it). `age`: how long ago, in the LRU's time, the folio
    /// was queued (`Lru::age`); `now`: the LRU's time; `read`: the written runs of pages
    /// `first..first + n` (page numbers; the caller leaves out what is not the region's to
    /// read), protecting them again. (The times wrap: a chunk unread for 2^31 queueings may
    /// go unread once more, a hint missed.)
    pub fn take(
        &self,
        start: u32,
        age: u32,
        now: u32,
        read: impl FnOnce(u32, u32) -> Vec<Range<u32>>,
    ) -> bool {
        let chunk_pages = SCAN_PAGES.max(self.folio_pages);
        let chunk = start / chunk_pages;
        let read_at = self.read_at.entry(chunk as usize);
        let stale = || {
            let last = read_at.load(Relaxed);
            last == 0 || now.wrapping_sub(last - 1) > age / 2
        };
        if stale() {
            let _reading = self.reading.lock();
            if stale() {
                for run in read(chunk * chunk_pages, chunk_pages) {
                    let folios = run.start / self.folio_pages..run.end.div_ceil(self.folio_pages);
                    for f in folios {
                        self.written.assign(f as usize, true);
                    }
                }
                read_at.store(now.wrapping_add(1).max(1), Relaxed);
            }
        }
        self.written
            .assign((start / self.folio_pages) as usize, false)
    }

    /// The folio at `start` was discarded: a write before it says nothing of what comes next.
    pub fn forget(&self, start: u32) {
        self.written
            .assign((start / self.folio_pages) as usize, false);
    }

    /// Memory the bits hold.
    pub fn bytes(&self) -> u64 {
        self.written.bytes() + self.read_at.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chunk is read once while the folios asked about spent most of their trip since; a
    /// folio's bit is taken once; a folio with more than half its trip since the last read
    /// makes the chunk be read again.
    #[test]
    fn a_chunk_is_read_again_only_for_a_trip_mostly_unread_and_each_bit_taken_once() {
        let bits = WrittenBits::new(4, 2 * SCAN_PAGES as usize / 4);
        let reads = std::cell::Cell::new(0);
        // Pages 0..4 (folio 0) and 9 (folio 2) written.
        let read = |first: u32, n: u32| {
            reads.set(reads.get() + 1);
            assert_eq!((first, n), (0, SCAN_PAGES));
            vec![0..4, 9..10]
        };
        // Read at time 10.
        assert!(bits.take(0, 8, 10, read));
        assert_eq!(reads.get(), 1);
        let no_read = |_: u32, _: u32| -> Vec<Range<u32>> { panic!("read again") };
        // Folios queued at 0: 11 of their 12 or so since, the read at 10 covers most.
        assert!(bits.take(8, 11, 11, no_read), "folio 2, from the same read");
        assert!(!bits.take(4, 12, 12, no_read), "folio 1 was not written");
        assert!(!bits.take(0, 13, 13, no_read), "taken once");
        // A folio queued at 12, asked about at 16: its trip (4) mostly after the read (at
        // 10, 6 ago): the chunk is read again.
        let read_again = |first: u32, _: u32| {
            assert_eq!(first, 0);
            std::iter::once(4..5).collect()
        };
        assert!(bits.take(4, 4, 16, read_again));
        // A discarded folio's bit goes.
        let read_folio_3 = |_: u32, _: u32| std::iter::once(12..16).collect();
        assert!(!bits.take(0, 100, 200, read_folio_3));
        bits.forget(12);
        assert!(!bits.take(12, 2, 201, no_read));
    }
}
