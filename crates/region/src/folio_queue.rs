//! A FIFO of folio starts: reclaim's queue of folios in the order they came in, and the swap
//! cache's order of dropping. A folio is named again each time it is queued, and its older
//! entries are not looked for: a reader skips the stale ones it pops. While nothing pops
//! (a region under its limit, a swap cache whose folios keep coming back), a folio queued
//! over and over would leave a pile of entries behind, without end. So once the queue has
//! doubled since it was last compacted, it keeps only each folio's newest entry (of the
//! folios its owner still wants): amortized O(1) a push, and never more than about twice
//! the entries there are folios in it.

use std::collections::{HashSet, VecDeque};

#[derive(Debug, Default)]
pub(crate) struct FolioQueue {
    starts: VecDeque<u32>,
    /// Entries left by the last compaction.
    compacted: usize,
}

/// Entries a queue may grow by past twice its compacted length before compacting again:
/// small queues are not compacted at every push.
const SLACK: usize = 64;

impl FolioQueue {
    /// Queue the folio at `start` at the back. Compacting, the entries of folios `wanted`
    /// says no to go too.
    pub fn push_back(&mut self, start: u32, wanted: impl Fn(u32) -> bool) {
        self.starts.push_back(start);
        if self.starts.len() > 2 * self.compacted + SLACK {
            self.compact(wanted);
        }
    }

    pub fn pop_front(&mut self) -> Option<u32> {
        self.starts.pop_front()
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
        (self.starts.capacity() * std::mem::size_of::<u32>()) as u64
    }

    /// Keep the newest entry of each folio `wanted`, in order.
    fn compact(&mut self, wanted: impl Fn(u32) -> bool) {
        let mut seen = HashSet::with_capacity(self.starts.len());
        let newest_first: Vec<u32> = self
            .starts
            .iter()
            .rev()
            .copied()
            .filter(|&s| wanted(s) && seen.insert(s))
            .collect();
        self.starts.clear();
        self.starts.extend(newest_first.into_iter().rev());
        self.compacted = self.starts.len();
        // Room for the queue to double again, and no more held for good.
        self.starts.shrink_to(2 * self.compacted + SLACK + 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(q: &FolioQueue) -> Vec<u32> {
        q.starts.iter().copied().collect()
    }

    #[test]
    fn a_folio_queued_over_and_over_keeps_the_queue_bounded() {
        let mut q = FolioQueue::default();
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
    fn compaction_keeps_each_folio_at_its_newest_place() {
        let mut q = FolioQueue::default();
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
        let mut q = FolioQueue::default();
        for s in 0..=SLACK as u32 {
            q.push_back(s, |s| s % 2 == 0);
        }
        assert!(entries(&q).iter().all(|s| s % 2 == 0), "{:?}", entries(&q));
        assert_eq!(q.len(), SLACK / 2 + 1);
    }
}
