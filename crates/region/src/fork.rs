//! Fork. A child gets a copy of the region's mapping but not its userfaultfd registration,
//! nor the region's threads: a page that is not in the mapping at the fork reads as zero in
//! the child. So the mapping is not inherited at all (`MADV_DONTFORK`: a child that touches
//! it faults, it never reads zeros where data is), except across `Region::prepare_fork`:
//! reclaim is held off, every page the engine holds or staging keeps is brought back into
//! the mapping, and only then is the mapping inherited, until the guard drops. The child
//! then sees exactly its parent's data as it was at the fork, as plain memory of its own
//! (held under no limit), and its own writes after.

use zswap::swap::Kind;

use crate::inner::Inner;

/// Bring every page the engine holds (pool, swap file, zero marks) or staging keeps back
/// into the mapping. Reclaim is held off by the caller, so what comes back stays.
pub(crate) fn bring_all_back(inner: &Inner) {
    let fp = inner.folio_pages;
    // A page held or staged has been locked, so its state word is allocated: the pages
    // outside `populated` are all missing or resident.
    let populated: Vec<_> = inner.group.cache().populated().collect();
    for start in populated.into_iter().flat_map(|r| r.step_by(fp as usize)) {
        let out = |p: u32| !inner.pages.is_resident(p) && inner.group.peek(p).kind != Kind::Empty;
        if !(start..start + fp).any(out) && !inner.staged.contains(start) {
            continue;
        }
        let folio = inner.group.lock_folio(start, inner.folio_order);
        crate::swapin::swap_in(inner, &folio, start, false, crate::swapin::Bring::All);
        drop(folio);
        // Threads that faulted on the folio meanwhile find it there.
        inner
            .mapping
            .wake(inner.mapping.page_addr(start), inner.folio_bytes());
    }
}
