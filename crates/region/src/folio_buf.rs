//! Each thread's folio buffer: what a folio is read into (a load, a read where it is), page
//! aligned so that direct I/O from and to it needs no bounce buffer. Charged once the thread
//! has used scratch (charge.rs, `ThreadScratch`).

use std::cell::RefCell;

use zswap::PAGE_SIZE;

thread_local! {
    static FOLIO_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Make the folio buffer's thread-local (empty) now: see `threads::spawn_critical`.
pub(crate) fn touch_thread_local() {
    FOLIO_BUF.with(|_| ());
}

/// Run `f` on this thread's folio buffer, `nr_pages` pages from a page boundary. Its bytes
/// are whatever the last use left.
pub(crate) fn with_folio_buf<R>(nr_pages: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
    zswap::scratch::with(&FOLIO_BUF, Vec::new, |buf| {
        let mut buf = buf.borrow_mut();
        f(zswap::swap::file::page_aligned(
            &mut buf,
            nr_pages * PAGE_SIZE,
        ))
    })
}
