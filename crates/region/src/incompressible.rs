//! Incompressible folios stay resident while compressible ones can go.
//!
//! The pool is charged to the region's limit. A folio whose pages did not compress is stored
//! as-is (DESIGN.md section 1: it keeps LRU order for writeback), and then takes as much of
//! the limit in the pool as it took in the mapping: evicting it freed nothing, and every
//! access to it since cost a fault. A resident folio that reclaim finds marked here came back
//! from such a store, so the program used it after it was evicted (a refault). Evicting it
//! again would free nothing until the shrinker writes it to disk, and would then cost a disk
//! read at the next access; a compressible folio evicted in its place frees most of its size
//! at the cost of a pool fault. So reclaim passes over marked folios (they go to the back of
//! the queue). Only while it finds others: after a whole queue's length of marked folios in a
//! row, it evicts them as they come, so a region of nothing but incompressible data still
//! reclaims, the old way, at no extra cost. (The count is of folios in a row across calls, not
//! per call: marked folios cluster in the queue, as a program's incompressible data usually
//! sits together, and a per-call bound would evict from every cluster it meets.)
//!
//! Incompressible data that is not used again is unaffected: it is evicted once (nothing is
//! known of it before its first store), stays in the pool, and the shrinker writes it back
//! oldest first, as in the kernel. A folio's mark is set or cleared by each store of the whole
//! folio (a clean eviction keeps it), so a folio that becomes compressible is found out the
//! next time it is evicted.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use zswap::swap::FolioLock;
use zswap::PAGE_SIZE;

/// A folio is incompressible if its store saved less than an eighth of its size.
pub(crate) fn poor(stored_length: u64, folio_pages: u32) -> bool {
    stored_length * 8 > u64::from(folio_pages) * PAGE_SIZE as u64 * 7
}

/// One bit a folio: its last store found it incompressible. Changed under the folio's lock.
#[derive(Debug)]
pub(crate) struct IncompressibleFolios {
    bits: Box<[AtomicU64]>,
    folio_shift: u32,
    /// Marked folios reclaim passed over since it last evicted an unmarked one.
    in_a_row: AtomicU64,
}

impl IncompressibleFolios {
    pub fn new(nr_pages: u32, folio_pages: u32) -> Self {
        let nr_folios = nr_pages.div_ceil(folio_pages);
        IncompressibleFolios {
            bits: (0..nr_folios.div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
            folio_shift: folio_pages.trailing_zeros(),
            in_a_row: AtomicU64::new(0),
        }
    }

    /// Bytes of the bitmap, charged as metadata.
    pub fn bytes(&self) -> u64 {
        self.bits.len() as u64 * 8
    }

    fn word_bit(&self, start: u32) -> (&AtomicU64, u64) {
        let folio = start >> self.folio_shift;
        (&self.bits[folio as usize / 64], 1 << (folio % 64))
    }

    pub fn is_marked(&self, start: u32) -> bool {
        let (word, bit) = self.word_bit(start);
        word.load(Relaxed) & bit != 0
    }

    /// Reclaim met a marked folio with `queued` folios left in the queue: pass it over?
    pub fn pass_over(&self, queued: usize) -> bool {
        self.in_a_row.fetch_add(1, Relaxed) <= queued as u64
    }

    /// Reclaim evicts `folio`: an unmarked one ends the run of marked folios passed over.
    pub fn evicting(&self, folio: &FolioLock) {
        if !self.is_marked(folio.start()) {
            self.in_a_row.store(0, Relaxed);
        }
    }

    pub fn set(&self, start: u32, on: bool) {
        let (word, bit) = self.word_bit(start);
        if on {
            word.fetch_or(bit, Relaxed);
        } else {
            word.fetch_and(!bit, Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_that_saves_an_eighth_is_not_poor() {
        let page = PAGE_SIZE as u64;
        assert!(poor(page, 1));
        assert!(!poor(page * 7 / 8, 1));
        assert!(poor(16 * page - 1, 16));
        // Half the folio zero pages, half random: it saves half.
        assert!(!poor(8 * page, 16));
    }

    #[test]
    fn marks_are_per_folio() {
        let m = IncompressibleFolios::new(1000, 16);
        m.set(16 * 62, true);
        assert!(m.is_marked(16 * 62));
        assert!(!m.is_marked(16 * 61) && !m.is_marked(16 * 63));
        m.set(16 * 62, false);
        assert!(!m.is_marked(16 * 62));
    }
}
