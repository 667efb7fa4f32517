//! Refault detection of the working set, as mm/workingset.c does for the kernel's LRU.
//!
//! Each eviction leaves a shadow in the engine's swap cache: the group's eviction count at
//! that moment. A fault that brings a folio back from the engine reads its refault distance,
//! the evictions since it left (`ZswapGroup::refault_distance`). A distance within what the
//! region holds resident means the folio would still be in memory had it been kept over the
//! pages evicted since: the working set is being thrashed, and the folio is activated (the
//! LRU's active queue, lru.rs, which reclaim does not take from). So the pages a program
//! touches once (a stream, a scan in no order) go before the working set they would push
//! out. A folio that comes back from further away (a stream, or a working set larger than
//! memory) is not activated: protecting it would only delay what must go.
//!
//! A policy: it decides; the fault acts (swapin.rs) and the LRU keeps the active folios.

/// Whether a folio that came back from the engine `distance` evictions after it left, while
/// `resident_pages` pages are in memory, is activated: it would have stayed. `enabled`:
/// `Policies::workingset`.
pub(crate) fn activates(enabled: bool, distance: u32, resident_pages: u64) -> bool {
    enabled && u64::from(distance) <= resident_pages
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_near_refault_activates_a_far_one_does_not() {
        assert!(super::activates(true, 100, 100));
        assert!(!super::activates(true, 101, 100));
        assert!(!super::activates(false, 0, 100));
    }
}
