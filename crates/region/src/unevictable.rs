//! Pages the program gave another protection than read-write (`Region::protect`, its
//! `mprotect`), which reclaim cannot take: the kernel moves pages (`UFFDIO_MOVE`) only between
//! mappings of one protection, and staging is read-write. As mm keeps mlocked folios off its
//! LRU on the unevictable list, reclaim drops such a folio from the LRU when it meets it
//! (culled), and the folio is queued again when its pages are all read-write once more
//! (rescued). Resident meanwhile, they are charged as ever; one evicted before its
//! protection changed comes back through a fault (a copy goes into any protection).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering::Acquire, Ordering::Release};

use crate::lock_order::{self, Mutex};

/// The pages whose protection is not read-write, as the ranges the program's `mprotect`s
/// made them (a runtime protects gigabytes of reservation at a time: what this costs follows
/// the calls, not the pages), and the folios reclaim took off its queue for them.
pub(crate) struct Unevictable {
    state: Mutex<Protected>,
    /// Pages protected, as `state` counts them: none, and reclaim asks nothing more.
    nr_protected: AtomicU64,
    /// What `state` takes, as `bytes` says (read with every usage, without the lock).
    bytes: AtomicU64,
    folio_pages: u32,
}

#[derive(Default)]
struct Protected {
    /// Disjoint ranges, none adjacent to another: start page to end page.
    ranges: BTreeMap<u32, u32>,
    /// Pages in `ranges`.
    nr_pages: u64,
    /// Starts of the folios reclaim took off its queue (culled).
    culled: BTreeSet<u32>,
}

impl Protected {
    /// What the ranges and culled folios take, charged as metadata (a B-tree entry's share of
    /// its node, about).
    fn bytes(&self) -> u64 {
        (self.ranges.len() as u64) * 16 + (self.culled.len() as u64) * 8
    }

    fn any(&self, first: u32, end: u32) -> bool {
        // The last range starting before `end` is the only one that can reach past `first`:
        // every range before it ends before it starts.
        first < end
            && self
                .ranges
                .range(..end)
                .next_back()
                .is_some_and(|(_, &e)| e > first)
    }

    fn insert(&mut self, first: u32, end: u32) {
        let (mut lo, mut hi) = (first, end);
        if let Some((&s, &e)) = self.ranges.range(..first).next_back() {
            if e >= first {
                lo = s;
            }
        }
        let joined: Vec<u32> = self.ranges.range(lo..=end).map(|(&s, _)| s).collect();
        for s in joined {
            let e = self.ranges.remove(&s).expect("just seen");
            self.nr_pages -= u64::from(e - s);
            hi = hi.max(e);
        }
        self.ranges.insert(lo, hi);
        self.nr_pages += u64::from(hi - lo);
    }

    fn remove(&mut self, first: u32, end: u32) {
        let cut: Vec<(u32, u32)> = self
            .ranges
            .range(..end)
            .rev()
            .take_while(|&(_, &e)| e > first)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in cut {
            self.ranges.remove(&s);
            self.nr_pages -= u64::from(e - s);
            for (a, b) in [(s, first.max(s)), (end.min(e), e)] {
                if a < b {
                    self.ranges.insert(a, b);
                    self.nr_pages += u64::from(b - a);
                }
            }
        }
    }
}

impl Unevictable {
    pub fn new(folio_pages: u32) -> Self {
        Unevictable {
            state: Mutex::new(&lock_order::UNEVICTABLE, Protected::default()),
            nr_protected: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            folio_pages,
        }
    }

    /// Whether reclaim must take the folio at `start` off its queue: some page of it is
    /// protected. Marked culled under the same lock `rescue` lifts protections under, so a
    /// folio culled as its protection is lifted is either not culled or rescued.
    pub fn cull(&self, start: u32) -> bool {
        if self.nr_protected.load(Acquire) == 0 {
            return false;
        }
        let mut state = self.state.lock();
        let culled = state.any(start, start + self.folio_pages);
        if culled {
            state.culled.insert(start);
            self.bytes.store(state.bytes(), Release);
        }
        culled
    }

    /// Pages `first..end` are read-write again: mark them so, and return the starts of the
    /// folios culled before whose pages are now all read-write, for the caller to queue
    /// again.
    pub fn rescue(&self, first: u32, end: u32) -> Vec<u32> {
        if first >= end {
            return Vec::new();
        }
        let fp = self.folio_pages;
        let mut state = self.state.lock();
        state.remove(first, end);
        self.nr_protected.store(state.nr_pages, Release);
        let near: Vec<u32> = state.culled.range(first / fp * fp..end).copied().collect();
        let rescued: Vec<u32> = near
            .into_iter()
            .filter(|&f| !state.any(f, f + fp))
            .collect();
        for f in &rescued {
            state.culled.remove(f);
        }
        self.bytes.store(state.bytes(), Release);
        rescued
    }

    /// Mark pages `first..end` protected (`on`) or read-write.
    pub fn set_protected(&self, first: u32, end: u32, on: bool) {
        if first >= end {
            return;
        }
        let mut state = self.state.lock();
        match on {
            true => state.insert(first, end),
            false => state.remove(first, end),
        }
        self.nr_protected.store(state.nr_pages, Release);
        self.bytes.store(state.bytes(), Release);
    }

    /// Whether any page of `first..end` is protected: reclaim cannot move them together.
    pub fn any_protected(&self, first: u32, end: u32) -> bool {
        self.nr_protected.load(Acquire) > 0 && self.state.lock().any(first, end)
    }

    /// Bytes the ranges and culled folios take, charged as metadata.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folio_is_unevictable_while_any_of_its_pages_is_protected() {
        let u = Unevictable::new(4);
        assert!(!u.any_protected(0, 1024));
        u.set_protected(10, 12, true);
        u.set_protected(11, 12, true);
        assert!(u.any_protected(8, 12));
        assert!(!u.any_protected(12, 16));
        u.set_protected(10, 11, false);
        assert!(u.any_protected(8, 12));
        u.set_protected(0, 1024, false);
        assert!(!u.any_protected(0, 1024));
        assert_eq!(u.nr_protected.load(Acquire), 0);
    }

    #[test]
    fn a_culled_folio_is_rescued_once_all_its_pages_are_read_write() {
        let u = Unevictable::new(4);
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

    #[test]
    fn the_ranges_answer_as_a_bit_a_page_would() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let u = Unevictable::new(4);
        let mut model = vec![false; 256];
        for _ in 0..5_000 {
            let a = rng.gen_range(0..256u32);
            let b = rng.gen_range(a..=256u32.min(a + 40));
            let on = rng.gen_bool(0.5);
            u.set_protected(a, b, on);
            model[a as usize..b as usize].fill(on);
            let x = rng.gen_range(0..256u32);
            let y = rng.gen_range(x..=256u32);
            let want = model[x as usize..y as usize].iter().any(|&p| p);
            assert_eq!(u.any_protected(x, y), want, "pages {x}..{y}");
            let count = model.iter().filter(|&&p| p).count() as u64;
            assert_eq!(u.nr_protected.load(Acquire), count);
            let state = u.state.lock();
            let ranges: Vec<_> = state.ranges.iter().map(|(&s, &e)| (s, e)).collect();
            assert!(
                ranges.windows(2).all(|w| w[0].1 < w[1].0),
                "disjoint and not adjacent: {ranges:?}"
            );
        }
    }
}
