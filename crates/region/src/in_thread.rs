//! In-thread faults (`RegionConfig::in_thread_faults`): a thread that faults on the region
//! serves its own fault, from the SIGBUS handler the uffd crate puts in place (uffd's
//! `sigbus`), as the kernel serves a swap-in in the faulting task: no event, no handler thread
//! woken, no wake-up back (a wake-up across CPUs is most of a handler's fault: DESIGN.md
//! section 6). The handler threads still read the region's other events (discards, unmaps,
//! moves).
//!
//! The trade-off: a fault the kernel takes for a system call (read(2) into an evicted page)
//! is not served, and the call fails with EFAULT. So only memory the program never hands to
//! the kernel may be in such a region.
//!
//! Why serving from a signal handler is safe here: a SIGBUS of ours comes only from an access
//! to the range, and no code of the region touches the range while it holds a folio lock, the
//! event gate or any part's lock (lock_order.rs), so the interrupted code holds none of what
//! the fault takes. The program's own locks are never taken. Memory is allocated from the
//! process's allocator, which never touches the range itself. The serving threads' reclaim
//! slots and scratch are serving_threads.rs's.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use uffd::sigbus::Fault;

use crate::lock_order::{self, RwLock};

use crate::inner::Inner;

/// The regions that serve faults in the faulting thread.
static REGIONS: RwLock<Vec<Arc<Inner>>> = RwLock::new(&lock_order::IN_THREAD_REGIONS, Vec::new());

/// Serve faults on `inner` in the faulting thread from now on.
pub(crate) fn register(inner: &Arc<Inner>) -> std::io::Result<()> {
    uffd::sigbus::install(serve)?;
    REGIONS.write().push(inner.clone());
    Ok(())
}

/// Stop serving `inner`'s faults (nothing if it was not registered).
pub(crate) fn unregister(inner: &Arc<Inner>) {
    REGIONS.write().retain(|r| !Arc::ptr_eq(r, inner));
}

/// The SIGBUS handler's function: serve a fault on a registered region (uffd's `ServeFn`).
fn serve(fault: Fault) -> bool {
    let inner = REGIONS
        .read()
        .iter()
        .find(|r| r.mapping().page_of(fault.addr).is_some())
        .cloned();
    let Some(inner) = inner else {
        return false;
    };
    let faults = inner.faults();
    // A poisoned page (its data lost: swapin.rs) faults as a SIGBUS of its own, which a
    // kernel without CONFIG_MEMORY_FAILURE reports as a userfault's would be: it goes on to
    // the program, whose access must not be retried (invariant 7).
    let page = faults.mapping.page_of(fault.addr);
    if page.is_some_and(|p| faults.group.peek(p).kind == zswap::swap::Kind::Poisoned) {
        return false;
    }
    crate::serving_threads::this_thread_serves();
    faults.stats.in_thread_faults.fetch_add(1, Relaxed);
    // Neither ever leaves a fault to another thread (only the spare does), and a fault
    // found served already (or left by a page whose discard is pending) is retried by the
    // access itself.
    if fault.present && fault.write {
        faults.serve_wp_fault(fault.addr);
    } else {
        faults.serve_fault(fault.addr, fault.write);
        // Left missing (its discard pending, a handler to process it): give the handler the
        // CPU before the access faults again.
        if page.is_some_and(|p| !faults.pages.is_resident(p)) {
            std::thread::yield_now();
        }
    }
    crate::serving_threads::count_segment_scratch();
    true
}
