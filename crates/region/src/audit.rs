//! The region's audit, for tests (the `test-hooks` feature): with reclaim held off, every
//! folio is locked in turn and where each of its pages is checked against the region's
//! counts, then the engine audits its own (`Zswap::audit`). It needs the region quiet: no
//! access of the program's under way.

use std::time::{Duration, Instant};

use zswap::swap::Kind;
use zswap::PAGE_SIZE;

use crate::inner::Inner;

/// Check where every page is against the region's counts and the engine's entries; the
/// first disagreement.
pub(crate) fn audit(inner: &Inner) -> Result<(), String> {
    // A readahead thread may be installing a folio it took off its queue: its count moves
    // meanwhile, and the audit looks again.
    for _ in 0..5 {
        let before = inner.pages.nr_resident();
        let result = audit_once(inner);
        if result.is_ok() || inner.pages.nr_resident() == before {
            return result;
        }
    }
    Err("the resident count keeps moving with the region quiet".into())
}

fn audit_once(inner: &Inner) -> Result<(), String> {
    // The handlers finish what they have read (a discard returns once its event is read,
    // before it is processed) and readahead what it has queued.
    let deadline = Instant::now() + Duration::from_secs(5);
    while inner.discards.any_pending() || inner.deferred.any() || inner.readahead.any_queued() {
        if Instant::now() > deadline {
            return Err("discards, events or readahead still pending after 5 s".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // Evictions under way finish first, and none starts until the audit is done.
    let _held_off = inner.reclaim_wait.hold_off();
    let fp = inner.folio_pages;
    let (mut resident, mut staged) = (0u64, 0u64);
    for start in (0..inner.nr_pages()).step_by(fp as usize) {
        let folio = inner.group.lock_folio(start, inner.folio_order);
        let is_staged = inner.staged.contains(start);
        if is_staged {
            staged += u64::from(fp);
        }
        for p in folio.offsets() {
            let kind = folio.state(p).kind;
            if !inner.pages.is_resident(p) {
                continue;
            }
            resident += 1;
            if is_staged {
                return Err(format!("folio {start} is staged and its page {p} resident"));
            }
            if kind == Kind::Poisoned {
                return Err(format!("page {p} is counted resident and poisoned"));
            }
            // A discard covered it lately: the kernel may have zapped it since (events.rs).
            if !inner.pages.is_discarded(p) && inner.mapping.in_mapping(p) == Some(false) {
                return Err(format!(
                    "page {p} is counted resident but not in the mapping"
                ));
            }
        }
    }
    if resident != inner.pages.nr_resident() {
        return Err(format!(
            "{resident} pages resident, {} counted",
            inner.pages.nr_resident()
        ));
    }
    if staged != inner.staged.pages() {
        return Err(format!(
            "{staged} pages in staged folios, {} counted",
            inner.staged.pages()
        ));
    }
    let in_flight = inner.in_flight.load(std::sync::atomic::Ordering::Relaxed);
    if in_flight != 0 {
        return Err(format!("{in_flight} bytes in flight with reclaim held off"));
    }
    debug_assert_eq!(inner.usage().resident, resident * PAGE_SIZE as u64);
    // The engine's shrink worker may be writing back a batch (its folios locked, its slots
    // taken before its entries say so): a disagreement must last to count.
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        match inner.zswap.audit() {
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
            result => return result,
        }
    }
}
