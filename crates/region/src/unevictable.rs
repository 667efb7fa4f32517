//! Pages the program gave another protection than read-write (`Region::protect`, its
//! `mprotect`), which reclaim cannot take: the kernel moves pages (`UFFDIO_MOVE`) only between
//! mappings of one protection, and staging is read-write. As mm keeps mlocked folios off its
//! LRU on the unevictable list, reclaim drops such a folio from the LRU when it meets it
//! (culled), and the folio is queued again when its pages are all read-write once more
//! (rescued). Resident meanwhile, they are charged as ever; one evicted before its
//! protection changed comes back through a fault (a copy goes into any protection).

use std::sync::atomic::{fence, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};

use zswap::sparse::SparseBitmap;

/// One bit a page: its protection is not read-write; one bit a folio: reclaim took it off
/// its queue for it.
pub(crate) struct Unevictable {
    protected: SparseBitmap<512>,
    /// Pages with the bit set: none, and reclaim asks nothing more.
    nr_protected: AtomicU64,
    culled: SparseBitmap<512>,
    folio_pages: u32,
}

impl Unevictable {
    pub fn new(nr_pages: u32, folio_pages: u32) -> Self {
        Unevictable {
            protected: SparseBitmap::new(nr_pages as usize),
            nr_protected: AtomicU64::new(0),
            culled: SparseBitmap::new(nr_pages.div_ceil(folio_pages) as usize),
            folio_pages,
        }
    }

    /// Whether reclaim must take the folio at `start` off its queue: some page of it is
    /// protected. Marked culled first and the pages looked at after, while `rescue` marks
    /// them read-write first and looks at the mark after (a fence between on both sides): of
    /// a folio culled as its protection is lifted, one of the two sees the other's change,
    /// so it is either not culled or rescued.
    pub fn cull(&self, start: u32) -> bool {
        let fp = self.folio_pages;
        if !self.any_protected(start, start + fp) {
            return false;
        }
        self.culled.assign((start / fp) as usize, true);
        fence(SeqCst);
        if self.any_protected(start, start + fp) {
            return true;
        }
        self.culled.assign((start / fp) as usize, false);
        false
    }

    /// Pages `first..end` are read-write again: mark them so, and return the starts of the
    /// folios culled before whose pages are now all read-write, for the caller to queue
    /// again.
    pub fn rescue(&self, first: u32, end: u32) -> Vec<u32> {
        self.set_protected(first, end, false);
        fence(SeqCst);
        let fp = self.folio_pages;
        (first / fp..end.div_ceil(fp))
            .map(|f| f * fp)
            .filter(|&f| {
                !self.any_protected(f, f + fp) && self.culled.assign((f / fp) as usize, false)
            })
            .collect()
    }

    /// Mark pages `first..end` protected (`on`) or read-write.
    pub fn set_protected(&self, first: u32, end: u32, on: bool) {
        for p in first..end {
            if self.protected.assign(p as usize, on) != on {
                match on {
                    true => self.nr_protected.fetch_add(1, Relaxed),
                    false => self.nr_protected.fetch_sub(1, Relaxed),
                };
            }
        }
    }

    /// Whether any page of `first..end` is protected: reclaim cannot move them together.
    pub fn any_protected(&self, first: u32, end: u32) -> bool {
        self.nr_protected.load(Relaxed) > 0 && (first..end).any(|p| self.protected.test(p as usize))
    }

    /// Bytes of the bitmaps, charged as metadata.
    pub fn bytes(&self) -> u64 {
        self.protected.bytes() + self.culled.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folio_is_unevictable_while_any_of_its_pages_is_protected() {
        let u = Unevictable::new(1024, 4);
        assert!(!u.any_protected(0, 1024));
        u.set_protected(10, 12, true);
        u.set_protected(11, 12, true);
        assert!(u.any_protected(8, 12));
        assert!(!u.any_protected(12, 16));
        u.set_protected(10, 11, false);
        assert!(u.any_protected(8, 12));
        u.set_protected(0, 1024, false);
        assert!(!u.any_protected(0, 1024));
        assert_eq!(u.nr_protected.load(Relaxed), 0);
    }

    #[test]
    fn a_culled_folio_is_rescued_once_all_its_pages_are_read_write() {
        let u = Unevictable::new(1024, 4);
        u.set_protected(9, 11, true);
        u.set_protected(20, 21, true);
        assert!(u.cull(8) && u.cull(20));
        assert!(!u.cull(12), "nothing protected");
        assert_eq!(
            u.rescue(9, 10),
            Vec::<u32>::new(),
            "page 10 is still protected"
        );
        assert_eq!(u.rescue(10, 21), vec![8, 20]);
        assert_eq!(u.rescue(0, 1024), Vec::<u32>::new(), "rescued once");
    }
}
