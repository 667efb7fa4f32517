//! Swap slot allocator: which page-sized slots of the backing device are in use.
//!
//! It owns one bit per slot and hands out runs of `nr` contiguous slots (nr a power of two,
//! 1..=512) so that a large folio written back lands in one contiguous, naturally aligned
//! stretch of the file, as the kernel's swap allocator does for mTHP swap-out.
//!
//! Layout, following mm/swapfile.c's clusters:
//! - the bitmap is split into clusters of [`CLUSTER_SLOTS`] slots (one largest folio), each with
//!   a free count; a naturally aligned run of at most 512 slots never crosses a cluster;
//! - every cluster is in exactly one of three states by its free count: *free* (all 512 slots
//!   free, kept in an indexed set), *partial* (some free, another indexed set) or *full*;
//! - single slots are taken from a current cluster, then from any partial cluster, and only
//!   then from a free one, so that whole free clusters stay available for large folios;
//! - a run of order k is taken from the current cluster of that order, then from the current
//!   clusters of the other orders, then from a free cluster, then by a scan of the partial
//!   clusters, and last, unaligned, by a scan of the bitmap (runs may then cross clusters).
//!
//! Freed storage goes back to the file system a cluster at a time, as the kernel discards
//! swap clusters: a cluster written since its last discard is queued once all its slots are
//! free, and `take_dirty_free_clusters` hands such clusters out (reserved, so nothing is
//! allocated in them meanwhile) for the caller to discard and give back with
//! `free_discarded`. Punching a hole for every freed slot would put a file system call on
//! every swap-in (DESIGN.md section 6).
//!
//! Costs: single-slot alloc and free are O(1) (a bounded scan of one cluster's 8 words plus
//! O(1) set updates). A large alloc is O(1) while free clusters last; beyond that it scans,
//! and a failed scan is remembered until the next free so that a caller falling back to
//! single slots does not rescan for every folio.

/// A page-sized slot on the backing device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SwapSlot(pub u32);

impl SwapSlot {
    /// The byte offset of this slot on a device of [`crate::PAGE_SIZE`] pages. The one place
    /// slot numbers become byte offsets (u64: a u32 slot times 4096 overflows u32).
    pub fn byte_offset(self) -> u64 {
        u64::from(self.0) * crate::PAGE_SIZE as u64
    }
}

/// Slots per cluster: the largest run `alloc` hands out (a 2 MiB folio of 4 KiB pages).
pub const CLUSTER_SLOTS: u32 = 512;
/// The largest `nr` that `alloc` accepts.
pub const MAX_RUN: u32 = CLUSTER_SLOTS;

const WORD_BITS: u32 = 64;
const WORDS_PER_CLUSTER: usize = (CLUSTER_SLOTS / WORD_BITS) as usize;
const NR_ORDERS: usize = 10; // orders 0..=9: 1..=512 slots.

/// For order k <= 6: bits at the positions in a word that are aligned to 2^k.
const fn align_mask(order: u32) -> u64 {
    let step = 1u32 << order;
    let mut mask = 0u64;
    let mut i = 0;
    while i < WORD_BITS {
        mask |= 1u64 << i;
        i += step;
    }
    mask
}
const ALIGN_MASKS: [u64; 7] = [
    align_mask(0),
    align_mask(1),
    align_mask(2),
    align_mask(3),
    align_mask(4),
    align_mask(5),
    align_mask(6),
];

/// Bit i of the result is set iff bits i..i+2^order of `free` are all set (the run may not
/// cross the top of the word: bits shifted in from above are 0).
fn runs_in_word(free: u64, order: u32) -> u64 {
    let mut m = free;
    let mut shift = 1;
    while shift < (1u32 << order) {
        m &= m >> shift;
        shift <<= 1;
    }
    m
}

/// A set of cluster indices with O(1) insert, remove and pick (swap-remove with a position
/// table), so that cluster state changes cost O(1) whatever the device size.
#[derive(Debug)]
struct ClusterSet {
    members: Vec<u32>,
    pos: Vec<u32>,
}

const ABSENT: u32 = u32::MAX;

impl ClusterSet {
    fn new(nr_clusters: usize) -> Self {
        ClusterSet {
            members: Vec::new(),
            pos: vec![ABSENT; nr_clusters],
        }
    }
    fn contains(&self, c: u32) -> bool {
        self.pos[c as usize] != ABSENT
    }
    fn insert(&mut self, c: u32) {
        if !self.contains(c) {
            self.pos[c as usize] = self.members.len() as u32;
            self.members.push(c);
        }
    }
    fn remove(&mut self, c: u32) {
        let p = self.pos[c as usize];
        if p == ABSENT {
            return;
        }
        let last = self.members.pop().expect("a member is present");
        if last != c {
            self.members[p as usize] = last;
            self.pos[last as usize] = p;
        }
        self.pos[c as usize] = ABSENT;
    }
    fn last(&self) -> Option<u32> {
        self.members.last().copied()
    }
}

/// Which slots of a backing device are in use, with mm/swapfile.c's clusters (see the
/// module documentation).
#[derive(Debug)]
pub struct SlotAllocator {
    capacity: u32,
    used: u32,
    /// One bit per slot, set = in use. Padded to whole clusters; the padding bits past
    /// `capacity` are set forever, so no search ever hands them out.
    bits: Vec<u64>,
    /// Free slots per cluster (real slots only, padding not counted).
    cluster_free: Vec<u16>,
    /// Clusters with all 512 slots free.
    free_clusters: ClusterSet,
    /// Clusters with some but not all slots free (a short last cluster is never "free").
    partial_clusters: ClusterSet,
    /// Where the last allocation of each order came from: the next one of that order looks
    /// there first (the kernel's per-cpu, per-order cluster).
    cur: [Option<u32>; NR_ORDERS],
    /// Bit k set: a full search for a run of order k found none since the last free. Allocs
    /// never create runs, so the answer stays "none" until something is freed.
    no_run: u16,
    /// Per cluster: some slot was allocated (written) since the cluster's last discard.
    dirty: Vec<bool>,
    /// Dirty clusters that became wholly free (maybe in use again since; checked on take),
    /// each at most once (`queued`): without discard nothing takes them, and a cluster that
    /// fills and empties again must not add to the queue every time.
    dirty_free: Vec<u32>,
    queued: Vec<bool>,
    /// Clusters handed out by `take_dirty_free_clusters` and not given back yet.
    discarding: u32,
}

impl SlotAllocator {
    /// An allocator over `capacity` slots.
    pub fn new(capacity: u32) -> Self {
        let nr_clusters = capacity.div_ceil(CLUSTER_SLOTS) as usize;
        let mut bits = vec![0u64; nr_clusters * WORDS_PER_CLUSTER];
        // Mark the padding past the last real slot as used.
        let padded = nr_clusters as u64 * u64::from(CLUSTER_SLOTS);
        for slot in u64::from(capacity)..padded {
            bits[(slot / 64) as usize] |= 1u64 << (slot % 64);
        }
        let mut a = SlotAllocator {
            capacity,
            used: 0,
            bits,
            cluster_free: vec![0; nr_clusters],
            free_clusters: ClusterSet::new(nr_clusters),
            partial_clusters: ClusterSet::new(nr_clusters),
            cur: [None; NR_ORDERS],
            no_run: 0,
            dirty: vec![false; nr_clusters],
            dirty_free: Vec::new(),
            queued: vec![false; nr_clusters],
            discarding: 0,
        };
        // In reverse, so that `last()` of the free set is the lowest cluster: the file is
        // used from its start, which keeps a young device's extents few.
        for c in (0..nr_clusters as u32).rev() {
            let start = c * CLUSTER_SLOTS;
            a.cluster_free[c as usize] = (capacity - start).min(CLUSTER_SLOTS) as u16;
            a.classify(c);
        }
        a
    }

    /// `nr` contiguous free slots (nr a power of two up to 512), or None.
    ///
    /// The run is naturally aligned to `nr` whenever such a run exists; otherwise any
    /// contiguous run is returned; None means no run of `nr` free slots exists at all.
    pub fn alloc(&mut self, nr: u32) -> Option<SwapSlot> {
        assert!(
            nr.is_power_of_two() && nr <= MAX_RUN,
            "alloc of {nr} slots: not a power of two up to {MAX_RUN}"
        );
        if self.capacity - self.used < nr {
            return None;
        }
        let order = nr.trailing_zeros();
        // A failed search for a smaller run means no larger one exists either.
        if self.no_run & ((1u16 << (order + 1)) - 1) != 0 {
            return None;
        }
        let start = if order == 0 {
            self.alloc_single()
        } else {
            self.alloc_run(order)
        };
        match start {
            Some(start) => {
                self.mark(start, nr, true);
                Some(SwapSlot(start))
            }
            None => {
                self.no_run |= 1 << order;
                None
            }
        }
    }

    /// Give back the `nr` slots from `slot`, which must all be allocated.
    pub fn free(&mut self, slot: SwapSlot, nr: u32) {
        assert!(
            u64::from(slot.0) + u64::from(nr) <= u64::from(self.capacity),
            "free of slots {}..+{nr} past capacity {}",
            slot.0,
            self.capacity
        );
        self.mark(slot.0, nr, false);
        self.no_run = 0;
    }

    /// The dirty clusters that are wholly free, each reserved (marked in use) and returned
    /// as its first slot and length: the caller discards its storage and then gives it back
    /// with `free_discarded`. A cluster is returned once per time it fills with data and
    /// empties again.
    pub fn take_dirty_free_clusters(&mut self) -> Vec<(SwapSlot, u32)> {
        let mut queued = std::mem::take(&mut self.dirty_free);
        queued.sort_unstable();
        let mut out = Vec::new();
        for c in queued {
            self.queued[c as usize] = false;
            let len = self.cluster_len(c);
            if self.dirty[c as usize] && u32::from(self.cluster_free[c as usize]) == len {
                let start = c * CLUSTER_SLOTS;
                self.mark(start, len, true);
                self.discarding += 1;
                out.push((SwapSlot(start), len));
            }
        }
        out
    }

    /// Give back a cluster from `take_dirty_free_clusters` once its storage is discarded: it
    /// is clean until something is written to it again.
    pub fn free_discarded(&mut self, slot: SwapSlot, nr: u32) {
        let c = slot.0 / CLUSTER_SLOTS;
        assert!(
            slot.0 == c * CLUSTER_SLOTS && nr == self.cluster_len(c),
            "free_discarded of {}..+{nr}: not a whole cluster",
            slot.0
        );
        self.dirty[c as usize] = false;
        self.discarding -= 1;
        self.free(slot, nr);
    }

    /// Clusters being discarded now: reserved, and free once `free_discarded` gives them back.
    pub fn discarding(&self) -> u32 {
        self.discarding
    }

    /// Real slots in cluster `c` (the last one may be short).
    fn cluster_len(&self, c: u32) -> u32 {
        (self.capacity - c * CLUSTER_SLOTS).min(CLUSTER_SLOTS)
    }

    /// Slots in use.
    pub fn used(&self) -> u32 {
        self.used
    }

    /// Slots in all.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Whether `slot` is currently allocated.
    pub fn is_allocated(&self, slot: SwapSlot) -> bool {
        slot.0 < self.capacity && self.bits[(slot.0 / 64) as usize] & (1u64 << (slot.0 % 64)) != 0
    }

    fn alloc_single(&mut self) -> Option<u32> {
        if let Some(c) = self.cur[0] {
            if self.cluster_free[c as usize] > 0 {
                return self.find_aligned_in_cluster(c, 0);
            }
        }
        // A partial cluster before a free one: whole free clusters are what large folios need.
        let c = self
            .partial_clusters
            .last()
            .or_else(|| self.free_clusters.last())?;
        self.cur[0] = Some(c);
        self.find_aligned_in_cluster(c, 0)
    }

    fn alloc_run(&mut self, order: u32) -> Option<u32> {
        let nr = 1u32 << order;
        let o = order as usize;
        if let Some(c) = self.cur[o] {
            if u32::from(self.cluster_free[c as usize]) >= nr {
                if let Some(s) = self.find_aligned_in_cluster(c, order) {
                    return Some(s);
                }
            }
        }
        // The clusters other orders are filling come before a free cluster: a run of 512
        // needs a whole free cluster, so small runs must not break one while they fit
        // elsewhere. At most NR_ORDERS candidates: still O(1).
        for j in 0..NR_ORDERS {
            if let Some(c) = self.cur[j] {
                if j != o && u32::from(self.cluster_free[c as usize]) >= nr {
                    if let Some(s) = self.find_aligned_in_cluster(c, order) {
                        self.cur[o] = Some(c);
                        return Some(s);
                    }
                }
            }
        }
        if let Some(c) = self.free_clusters.last() {
            self.cur[o] = Some(c);
            return self.find_aligned_in_cluster(c, order);
        }
        // The free counts make this scan cheap: most clusters are rejected by one compare.
        for i in 0..self.partial_clusters.members.len() {
            let c = self.partial_clusters.members[i];
            if u32::from(self.cluster_free[c as usize]) >= nr {
                if let Some(s) = self.find_aligned_in_cluster(c, order) {
                    self.cur[o] = Some(c);
                    return Some(s);
                }
            }
        }
        self.find_unaligned(nr)
    }

    /// The first naturally aligned run of 2^order free slots in cluster `c`.
    fn find_aligned_in_cluster(&self, c: u32, order: u32) -> Option<u32> {
        let first = c as usize * WORDS_PER_CLUSTER;
        let words = &self.bits[first..first + WORDS_PER_CLUSTER];
        if order <= 6 {
            for (i, &w) in words.iter().enumerate() {
                let m = runs_in_word(!w, order) & ALIGN_MASKS[order as usize];
                if m != 0 {
                    return Some(((first + i) as u32) * WORD_BITS + m.trailing_zeros());
                }
            }
        } else {
            let per_run = 1usize << (order - 6);
            for (i, group) in words.chunks_exact(per_run).enumerate() {
                if group.iter().all(|&w| w == 0) {
                    return Some(((first + i * per_run) as u32) * WORD_BITS);
                }
            }
        }
        None
    }

    /// Any run of `nr` free slots, aligned or not, possibly crossing clusters: the last
    /// resort before telling the caller to fall back to single slots.
    fn find_unaligned(&self, nr: u32) -> Option<u32> {
        let order = nr.trailing_zeros();
        let mut run_start = 0u32;
        let mut run_len = 0u32;
        for (c, &free) in self.cluster_free.iter().enumerate() {
            if free == 0 {
                run_len = 0;
                continue;
            }
            let first = c * WORDS_PER_CLUSTER;
            for (i, &w) in self.bits[first..first + WORDS_PER_CLUSTER]
                .iter()
                .enumerate()
            {
                let base = ((first + i) as u32) * WORD_BITS;
                let f = !w;
                if f == u64::MAX {
                    if run_len == 0 {
                        run_start = base;
                    }
                    run_len += WORD_BITS;
                    if run_len >= nr {
                        return Some(run_start);
                    }
                    continue;
                }
                // A run continuing from lower words into this word's low bits.
                if run_len > 0 && run_len + f.trailing_ones() >= nr {
                    return Some(run_start);
                }
                if order <= 6 {
                    let m = runs_in_word(f, order);
                    if m != 0 {
                        return Some(base + m.trailing_zeros());
                    }
                }
                // A run that may continue into the next word starts at the top free bits.
                run_len = f.leading_ones();
                run_start = base + WORD_BITS - run_len;
            }
        }
        None
    }

    /// Set (`used`) or clear the bits of `nr` slots from `start`, keeping the counts and
    /// cluster sets right.
    fn mark(&mut self, start: u32, nr: u32, used: bool) {
        let mut slot = start;
        let end = start + nr;
        while slot < end {
            let word = (slot / WORD_BITS) as usize;
            let bit = slot % WORD_BITS;
            let n = (WORD_BITS - bit).min(end - slot);
            let mask = if n == WORD_BITS {
                u64::MAX
            } else {
                ((1u64 << n) - 1) << bit
            };
            if used {
                debug_assert_eq!(self.bits[word] & mask, 0, "allocating slots already in use");
                self.bits[word] |= mask;
            } else {
                debug_assert_eq!(
                    self.bits[word] & mask,
                    mask,
                    "freeing slots that are not allocated"
                );
                self.bits[word] &= !mask;
            }
            let c = slot / CLUSTER_SLOTS;
            let cf = &mut self.cluster_free[c as usize];
            if used {
                *cf -= n as u16;
                self.dirty[c as usize] = true;
            } else {
                *cf += n as u16;
                if self.dirty[c as usize]
                    && u32::from(*cf) == self.cluster_len(c)
                    && !self.queued[c as usize]
                {
                    self.queued[c as usize] = true;
                    self.dirty_free.push(c);
                }
            }
            self.classify(c);
            slot += n;
        }
        if used {
            self.used += nr;
        } else {
            self.used -= nr;
        }
    }

    /// Put cluster `c` in the set its free count says.
    fn classify(&mut self, c: u32) {
        let free = u32::from(self.cluster_free[c as usize]);
        if free == CLUSTER_SLOTS {
            self.partial_clusters.remove(c);
            self.free_clusters.insert(c);
        } else if free > 0 {
            self.free_clusters.remove(c);
            self.partial_clusters.insert(c);
        } else {
            self.free_clusters.remove(c);
            self.partial_clusters.remove(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[test]
    fn align_masks() {
        assert_eq!(ALIGN_MASKS[0], u64::MAX);
        assert_eq!(ALIGN_MASKS[1], 0x5555_5555_5555_5555);
        assert_eq!(ALIGN_MASKS[6], 1);
    }

    #[test]
    fn singles_fill_everything_then_none() {
        let mut a = SlotAllocator::new(1000);
        let mut seen = vec![false; 1000];
        for _ in 0..1000 {
            let s = a.alloc(1).unwrap();
            assert!(!seen[s.0 as usize]);
            seen[s.0 as usize] = true;
        }
        assert_eq!(a.used(), 1000);
        assert_eq!(a.alloc(1), None);
        a.free(SwapSlot(517), 1);
        assert_eq!(a.alloc(1), Some(SwapSlot(517)));
    }

    #[test]
    fn runs_are_aligned_and_stay_within_capacity() {
        let mut a = SlotAllocator::new(4 * 512 + 100);
        for order in 0..=9 {
            let nr = 1 << order;
            let s = a.alloc(nr).unwrap();
            assert_eq!(s.0 % nr, 0, "order {order}");
            assert!(s.0 + nr <= a.capacity());
        }
        assert_eq!(a.used(), 1023);
        // Small runs went into clusters already in use: whole clusters are left for 512s.
        assert!(a.alloc(512).is_some());
        assert!(a.alloc(512).is_some());
    }

    #[test]
    fn whole_cluster_run_and_short_last_cluster() {
        // 512 + 100 slots: one whole cluster, one short one that can never hold 512.
        let mut a = SlotAllocator::new(612);
        assert_eq!(a.alloc(512), Some(SwapSlot(0)));
        assert_eq!(a.alloc(512), None);
        assert_eq!(a.alloc(64), Some(SwapSlot(512)));
        // 36 left at 576..612: a 32-run fits aligned, a 64-run does not fit at all.
        assert_eq!(a.alloc(64), None);
        assert_eq!(a.alloc(32), Some(SwapSlot(576)));
        assert_eq!(a.used(), 512 + 64 + 32);
        // 4 left at 608..612.
        assert_eq!(a.alloc(8), None);
        assert_eq!(a.alloc(4), Some(SwapSlot(608)));
        assert_eq!(a.alloc(1), None);
        a.free(SwapSlot(0), 512);
        assert_eq!(a.alloc(512), Some(SwapSlot(0)));
    }

    #[test]
    fn singles_leave_free_clusters_for_large_folios() {
        let mut a = SlotAllocator::new(4 * 512);
        let big = a.alloc(512).unwrap();
        let single = a.alloc(1).unwrap();
        // Singles now keep to one cluster: two more 512-runs must still fit.
        for _ in 0..100 {
            a.alloc(1).unwrap();
        }
        assert!(a.alloc(512).is_some());
        assert!(a.alloc(512).is_some());
        assert_ne!(big.0 / 512, single.0 / 512);
    }

    #[test]
    fn unaligned_fallback_when_no_aligned_run() {
        let mut a = SlotAllocator::new(16);
        let all = a.alloc(16).unwrap();
        assert_eq!(all, SwapSlot(0));
        // Free 3..7: four free slots, none of them an aligned 4-run.
        a.free(SwapSlot(3), 4);
        assert_eq!(a.alloc(4), Some(SwapSlot(3)));
    }

    #[test]
    fn unaligned_fallback_across_words_and_clusters() {
        let mut a = SlotAllocator::new(1024);
        assert_eq!(a.alloc(512), Some(SwapSlot(0)));
        assert_eq!(a.alloc(512), Some(SwapSlot(512)));
        // 448..576 free: 128 slots crossing the cluster boundary, unaligned to 128.
        a.free(SwapSlot(448), 64);
        a.free(SwapSlot(512), 64);
        assert_eq!(a.alloc(128), Some(SwapSlot(448)));
        assert_eq!(a.used(), 1024);
    }

    #[test]
    fn failed_search_is_remembered_until_a_free() {
        let mut a = SlotAllocator::new(512);
        for _ in 0..256 {
            a.alloc(1).unwrap();
        }
        // Every other single freed: 128 free slots, no run of 2.
        for s in (0..256).step_by(2) {
            a.free(SwapSlot(s), 1);
        }
        for s in (0..256).step_by(2) {
            assert_eq!(a.alloc(1), Some(SwapSlot(s)));
        }
        assert!(a.alloc(512).is_none());
        assert!(a.alloc(256).is_some());
        assert!(a.alloc(2).is_none());
        assert!(a.alloc(4).is_none());
        a.free(SwapSlot(10), 2);
        assert_eq!(a.alloc(2), Some(SwapSlot(10)));
    }

    #[test]
    fn a_cluster_is_handed_out_for_discard_once_each_time_it_empties() {
        let mut a = SlotAllocator::new(CLUSTER_SLOTS + 100);
        assert!(
            a.take_dirty_free_clusters().is_empty(),
            "nothing written yet"
        );
        let run = a.alloc(CLUSTER_SLOTS).unwrap();
        let one = a.alloc(1).unwrap();
        assert_eq!(one.0 / CLUSTER_SLOTS, 1, "the short last cluster");
        a.free(SwapSlot(run.0), 256);
        assert!(
            a.take_dirty_free_clusters().is_empty(),
            "half the cluster is in use"
        );
        a.free(SwapSlot(run.0 + 256), 256);
        a.free(one, 1);
        let mut got = a.take_dirty_free_clusters();
        got.sort();
        assert_eq!(
            got,
            vec![(SwapSlot(0), CLUSTER_SLOTS), (SwapSlot(CLUSTER_SLOTS), 100)]
        );
        // Reserved while the caller discards: nothing is allocated from them.
        assert_eq!(a.used(), CLUSTER_SLOTS + 100);
        assert!(a.alloc(1).is_none());
        for (s, n) in got {
            a.free_discarded(s, n);
        }
        assert_eq!(a.used(), 0);
        assert!(
            a.take_dirty_free_clusters().is_empty(),
            "clean until written again"
        );
        // Written and freed again: handed out again; reused before the take: not handed out.
        let s = a.alloc(1).unwrap();
        a.free(s, 1);
        let s2 = a.alloc(1).unwrap();
        assert!(a
            .take_dirty_free_clusters()
            .iter()
            .all(|&(c, _)| c.0 / CLUSTER_SLOTS != s2.0 / CLUSTER_SLOTS));
        a.free(s2, 1);
        assert_eq!(a.take_dirty_free_clusters().len(), 1);
    }

    /// Without discard nothing takes the queue of emptied clusters: a cluster that fills and
    /// empties again and again is queued once, so the queue stays within one entry a cluster.
    #[test]
    fn the_discard_queue_holds_a_cluster_once_however_often_it_empties() {
        let mut a = SlotAllocator::new(4 * CLUSTER_SLOTS);
        for _ in 0..1000 {
            let run = a.alloc(CLUSTER_SLOTS).unwrap();
            let one = a.alloc(1).unwrap();
            a.free(run, CLUSTER_SLOTS);
            a.free(one, 1);
        }
        assert!(a.dirty_free.len() <= 4, "{} queued", a.dirty_free.len());
        // Still handed out, once each, when asked.
        let got = a.take_dirty_free_clusters();
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(a.dirty_free.is_empty());
        for (s, n) in got {
            a.free_discarded(s, n);
        }
        let s = a.alloc(1).unwrap();
        a.free(s, 1);
        assert_eq!(a.take_dirty_free_clusters().len(), 1);
    }

    #[test]
    fn zero_capacity() {
        let mut a = SlotAllocator::new(0);
        assert_eq!(a.alloc(1), None);
        assert_eq!(a.capacity(), 0);
    }

    #[test]
    #[should_panic]
    #[cfg(debug_assertions)]
    fn double_free_is_caught() {
        let mut a = SlotAllocator::new(64);
        let s = a.alloc(1).unwrap();
        a.free(s, 1);
        a.free(s, 1);
    }

    #[test]
    #[should_panic]
    fn bad_run_size_is_refused() {
        SlotAllocator::new(64).alloc(3);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Alloc(u32),
        /// Free the allocated run at this index (modulo the number of runs).
        Free(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0u32..=9).prop_map(Op::Alloc),
            1 => (0u32..4).prop_map(Op::Alloc),
            3 => any::<usize>().prop_map(Op::Free),
        ]
    }

    /// Whether the model has a free run of `nr` slots, aligned or not.
    fn model_has_run(used: &[bool], nr: u32, aligned: bool) -> bool {
        let nr = nr as usize;
        let step = if aligned { nr } else { 1 };
        (0..used.len().saturating_sub(nr - 1))
            .step_by(step)
            .any(|s| used[s..s + nr].iter().all(|u| !u))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn matches_model(capacity in 0u32..2200, ops in proptest::collection::vec(op(), 1..400)) {
            let mut a = SlotAllocator::new(capacity);
            let mut used = vec![false; capacity as usize];
            let mut runs: BTreeMap<u32, u32> = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Alloc(order) => {
                        let nr = 1u32 << order;
                        let could_align = model_has_run(&used, nr, true);
                        let could = model_has_run(&used, nr, false);
                        match a.alloc(nr) {
                            Some(s) => {
                                prop_assert!(s.0 + nr <= capacity);
                                for i in s.0..s.0 + nr {
                                    prop_assert!(!used[i as usize], "slot {} handed out twice", i);
                                    used[i as usize] = true;
                                }
                                if could_align {
                                    prop_assert_eq!(s.0 % nr, 0, "unaligned run when an aligned one existed");
                                }
                                runs.insert(s.0, nr);
                            }
                            None => prop_assert!(!could, "no run of {} found but one exists", nr),
                        }
                    }
                    Op::Free(i) => {
                        if runs.is_empty() {
                            continue;
                        }
                        let (&s, &nr) = runs.iter().nth(i % runs.len()).unwrap();
                        runs.remove(&s);
                        a.free(SwapSlot(s), nr);
                        for j in s..s + nr {
                            used[j as usize] = false;
                        }
                    }
                }
                prop_assert_eq!(a.used() as usize, used.iter().filter(|&&u| u).count());
                prop_assert_eq!(a.capacity(), capacity);
            }
            for (s, u) in used.iter().enumerate() {
                prop_assert_eq!(a.is_allocated(SwapSlot(s as u32)), *u);
            }
        }
    }
}
