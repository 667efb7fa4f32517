//! A FIFO of folio starts: the LRU's queue of folios in the order they came in, and the
//! order staged folios are dropped in. A folio is named again each time it is queued, and its
//! older entries are not looked for: a reader skips the stale ones it pops. While nothing pops
//! (a region under its limit, staged folios that keep coming back), a folio queued over and
//! over would leave a pile of entries behind, without end. So once the queue has doubled
//! since it was last compacted, it keeps only each folio's newest entry (of the folios its
//! owner still wants): amortized O(1) a push, and never more than about twice the entries
//! there are folios in it.

use std::collections::VecDeque;

use zswap::sparse::SparseBitmap;

#[derive(Debug)]
pub(crate) struct FolioQueue {
    starts: VecDeque<u32>,
    /// Entries left by the last compaction.
    compacted: usize,
    folio_pages: u32,
    /// One bit a folio, all clear between compactions: the folios a compaction has kept an
    /// entry of. Held for good rather than allocated by each compaction, which would take
    /// memory the limit does not see, at the worst moment (the queue at its longest).
    kept: SparseBitmap<512>,
}

/// Entries a queue may grow by past twice its compacted length before compacting again:
/// small queues are not compacted at every push.
const SLACK: usize = 64;

impl FolioQueue {
    /// A queue of the folios (of `folio_pages` pages) of a region of `nr_folios` of them.
    pub fn new(folio_pages: u32, nr_folios: usize) -> Self {
        FolioQueue {
            starts: VecDeque::new(),
            compacted: 0,
            folio_pages,
            kept: SparseBitmap::new(nr_folios),
        }
    }

    /// Queue the folio at `start` at the back. Compacting, the entries of folios `wanted`
    /// says no to go too.
    pub fn push_back(&mut self, start: u32, wanted: impl Fn(u32) -> bool) {
        self.starts.push_back(start);
        if self.starts.len() > 2 * self.compacted + SLACK {
            self.compact(wanted);
        }
    }

    pub fn pop_front(&mut self) -> Option<u32> {
        let start = self.starts.pop_front();
        // Doubling is measured from what is left: a queue drained since its last compaction
        // does not pile up to twice its old length again first.
        self.compacted = self.compacted.min(self.starts.len());
        start
    }

    pub fn len(&self) -> usize {
        self.starts.len()
    }

    pub fn clear(&mut self) {
        self.starts.clear();
        self.compacted = 0;
    }

    /// Memory the queue holds (charged to a region's limit as metadata).
    pub fn bytes(&self) -> u64 {
        (self.starts.capacity() * std::mem::size_of::<u32>()) as u64 + self.kept.bytes()
    }

    /// Keep the newest entry of each folio `wanted`, in order, in place.
    fn compact(&mut self, wanted: impl Fn(u32) -> bool) {
        let FolioQueue {
            starts,
            kept,
            folio_pages,
            ..
        } = self;
        let folio = |start: u32| (start / *folio_pages) as usize;
        // Newest first, each kept entry moved to the back end of what is kept.
        let s = starts.make_contiguous();
        let mut w = s.len();
        for i in (0..s.len()).rev() {
            if !kept.test(folio(s[i])) && wanted(s[i]) {
                kept.assign(folio(s[i]), true);
                w -= 1;
                s[w] = s[i];
            }
        }
        for &start in &s[w..] {
            kept.assign(folio(start), false);
        }
        starts.drain(..w);
        self.compacted = self.starts.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(q: &FolioQueue) -> Vec<u32> {
        q.starts.iter().copied().collect()
    }

    fn queue() -> FolioQueue {
        FolioQueue::new(1, 1000)
    }

    #[test]
    fn a_folio_queued_over_and_over_keeps_the_queue_bounded() {
        let mut q = queue();
        for _ in 0..100_000 {
            q.push_back(7, |_| true);
        }
        assert!(q.len() <= 2 + SLACK, "{} entries", q.len());
        assert!(
            q.bytes() <= 4 * (2 * (2 + SLACK) as u64 + 1) * 2,
            "{} bytes",
            q.bytes()
        );
    }

    #[test]
    fn a_queue_drained_since_its_last_compaction_compacts_from_what_is_left() {
        let mut q = queue();
        for s in 0..500 {
            q.push_back(s, |_| true);
        }
        while q.len() > 1 {
            q.pop_front();
        }
        // Fewer than twice what the last compaction left (455 entries).
        for _ in 0..900 {
            q.push_back(7, |_| true);
        }
        assert!(q.len() <= 2 * 2 + SLACK, "{} entries", q.len());
    }

    #[test]
    fn compaction_keeps_each_folio_at_its_newest_place() {
        let mut q = queue();
        let order: Vec<u32> = (0..SLACK as u32 + 1).map(|i| i % 3).collect();
        for &s in &order {
            q.push_back(s, |_| true);
        }
        // 0 1 2 0 1 2 ... : each folio where it was last queued.
        let last = |s: u32| order.iter().rposition(|&x| x == s).unwrap();
        let mut expected = vec![0, 1, 2];
        expected.sort_by_key(|&s| last(s));
        assert_eq!(entries(&q), expected);
    }

    #[test]
    fn compaction_drops_the_folios_not_wanted() {
        let mut q = queue();
        for s in 0..=SLACK as u32 {
            q.push_back(s, |s| s % 2 == 0);
        }
        assert!(entries(&q).iter().all(|s| s % 2 == 0), "{:?}", entries(&q));
        assert_eq!(q.len(), SLACK / 2 + 1);
        assert!((0..1000).all(|f| !q.kept.test(f)), "bits left set");
    }
}
