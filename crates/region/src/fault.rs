//! Fault handling: the threads that read the region's userfaultfd and bring pages back.
//!
//! A fault locks its folio in the engine's swap cache: the first thread to fault a folio owns
//! it, and others (another fault, reclaim, a discard) wait on it there. Under the lock:
//! 1. the folio is in the region's swap cache (staged): move it straight back;
//! 2. every page of it is held by the engine: load the whole folio and install it with one
//!    `UFFDIO_COPY`, one wake-up;
//! 3. otherwise its pages are in different places: each missing page comes back from where
//!    it is (zero-filled if nothing holds it), installed in runs.
//!
//! Only then are the engine's copies freed (invariant 2). A page that cannot be read back is
//! poisoned: the program gets SIGBUS on it, never zeros (invariant 7).
//!
//! A fault that would take the region past its limit reclaims first, before taking its lock.

use std::cell::RefCell;
use std::time::Instant;

use uffd::{CopyMode, Event, Filled, UffdError};
use zswap::swap::{FolioLock, Kind};
use zswap::PAGE_SIZE;

use crate::region::Inner;

thread_local! {
    static FOLIO_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Read events until the region stops; serve each.
pub(crate) fn handler_loop(inner: &Inner) {
    let mut events = Vec::with_capacity(uffd::EVENT_BATCH);
    while !inner.stop.load(std::sync::atomic::Ordering::Relaxed) {
        let deferred = std::mem::take(&mut *inner.deferred.lock());
        for ev in deferred {
            handle_event(inner, ev);
        }
        match inner
            .uffd
            .wait_readable(Some(std::time::Duration::from_millis(100)))
        {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) => panic!("waiting on the userfaultfd failed: {e}"),
        }
        events.clear();
        match inner.uffd.read_events(&mut events) {
            Ok(_) => {}
            Err(e) if e.is_retry() => continue,
            Err(e) => panic!("reading the userfaultfd failed: {e}"),
        }
        for ev in events.drain(..) {
            handle_event(inner, ev);
        }
    }
}

fn handle_event(inner: &Inner, ev: Event) {
    match ev {
        Event::Pagefault { addr, flags, .. } => serve_fault(inner, addr, flags.write),
        Event::Remove { start, end } => crate::events::discard(inner, start, end, false),
        Event::Unmap { start, end } => crate::events::discard(inner, start, end, true),
        Event::Remap { from, to, len } => crate::events::remap(inner, from, to, len),
        _ => {}
    }
}

/// Bring back the folio holding `addr`.
pub(crate) fn serve_fault(inner: &Inner, addr: usize, write: bool) {
    let t0 = Instant::now();
    let base = inner.base();
    if addr < base || addr >= base + inner.len {
        // Not ours (an mremap moved the region under a pending fault): let it retry.
        let _ = inner.uffd.wake(addr & !(PAGE_SIZE - 1), PAGE_SIZE);
        return;
    }
    let page = ((addr - base) / PAGE_SIZE) as u32;
    let start = page & !(inner.folio_pages - 1);
    crate::reclaim::throttle(inner);
    let folio = inner.group.lock_folio(start, inner.folio_order);
    inner
        .stats
        .faults
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let installed = if let Some(staged) = inner.swapcache.take(start) {
        from_swapcache(inner, &folio, staged)
    } else {
        from_engine(inner, &folio, page, write)
    };
    inner
        .stats
        .pages_in
        .fetch_add(installed, std::sync::atomic::Ordering::Relaxed);
    drop(folio);
    inner.stats.record_latency(t0.elapsed());
    if inner.usage().total() > inner.limit.saturating_sub(inner.folio_bytes() as u64 * 4) {
        inner.wake_kswapd();
    }
}

fn addr_of(inner: &Inner, page: u32) -> usize {
    inner.base() + page as usize * PAGE_SIZE
}

/// The folio is still staged: move it back. Its stored copy is dropped, since the program may
/// now write the page.
fn from_swapcache(inner: &Inner, folio: &FolioLock, mut staged: uffd::StagedFolio) -> u64 {
    let dst = addr_of(inner, folio.start());
    loop {
        match staged.move_back(&inner.uffd, dst) {
            Ok(Filled::All) => break,
            Ok(Filled::PageExists { done }) => {
                // Nothing installs into a folio without its lock, which we hold: a present
                // page here means the bookkeeping is wrong, and dropping the staged pages
                // behind it would lose data. Stop (the process is stopped with us).
                panic!("page {done} bytes into a staged folio is already present");
            }
            Err(e) if e.is_retry() => defer_pending_events(inner),
            Err(e) => panic!("moving a staged folio back failed: {e}"),
        }
    }
    drop(staged);
    for p in folio.offsets() {
        inner.set_resident(p, true);
    }
    inner.group.invalidate(folio);
    inner.lru.lock().push_back(folio.start());
    inner
        .stats
        .faults_swapcache
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    u64::from(folio.nr_pages())
}

/// Bring the folio's missing pages back from the engine.
fn from_engine(inner: &Inner, folio: &FolioLock, page: u32, write: bool) -> u64 {
    let nr = folio.nr_pages() as usize;
    let missing: Vec<u32> = folio.offsets().filter(|&p| !inner.is_resident(p)).collect();
    if missing.is_empty() {
        // Installed meanwhile by someone who held the folio before us.
        inner
            .stats
            .redundant
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let _ = inner.uffd.wake(addr_of(inner, page), PAGE_SIZE);
        return 0;
    }
    let whole = missing.len() == nr && folio.offsets().all(|p| folio.state(p).kind != Kind::Empty);
    let first_touch = folio.offsets().all(|p| folio.state(p).kind == Kind::Empty);
    FOLIO_BUF.with(|buf| {
        let buf = &mut *buf.borrow_mut();
        buf.resize(nr * PAGE_SIZE, 0);
        if whole && inner.group.load(folio, buf).is_ok() {
            install(inner, folio.start(), buf, write, false);
            for p in folio.offsets() {
                inner.set_resident(p, true);
            }
            inner.group.finish_load(folio);
            inner.lru.lock().push_back(folio.start());
            inner
                .stats
                .faults_folio
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return nr as u64;
        }
        // Page by page: each missing page from wherever it is. Runs of missing pages are
        // installed together.
        let mut poisoned = Vec::new();
        let mut ok = vec![false; nr];
        for &p in &missing {
            let i = (p - folio.start()) as usize;
            let out = &mut buf[i * PAGE_SIZE..(i + 1) * PAGE_SIZE];
            match inner.group.read_page(folio, p, out) {
                Ok(Kind::Empty) => {
                    out.fill(0);
                    ok[i] = true;
                }
                Ok(_) => ok[i] = true,
                Err(_) => poisoned.push(p),
            }
        }
        let mut i = 0;
        while i < nr {
            if !ok[i] {
                i += 1;
                continue;
            }
            let mut j = i;
            while j < nr && ok[j] {
                j += 1;
            }
            let zero_run = (i..j).all(|k| {
                let st = folio.state(folio.start() + k as u32);
                st.kind == Kind::Empty || (st.kind == Kind::Zero && st.payload == 0)
            });
            install(
                inner,
                folio.start() + i as u32,
                &buf[i * PAGE_SIZE..j * PAGE_SIZE],
                write,
                zero_run,
            );
            for k in i..j {
                inner.set_resident(folio.start() + k as u32, true);
            }
            i = j;
        }
        for &p in &missing {
            if !poisoned.contains(&p) {
                inner.group.invalidate_page(folio, p);
            }
        }
        for &p in &poisoned {
            poison(inner, folio, p);
        }
        inner.lru.lock().push_back(folio.start());
        let counter = if first_touch {
            &inner.stats.faults_first_touch
        } else {
            &inner.stats.faults_pages
        };
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        (missing.len() - poisoned.len()) as u64
    })
}

/// Install `data` at page `first` of the region: one `UFFDIO_COPY` (or zero pages, for an
/// all-zero run read by a read fault), retried across pending events, skipping pages that
/// turn out present.
fn install(inner: &Inner, first: u32, data: &[u8], write: bool, zero_run: bool) {
    let mut done = 0usize;
    while done < data.len() {
        let dst = addr_of(inner, first) + done;
        let r = if zero_run && !write {
            inner.uffd.zeropage(dst, data.len() - done, false)
        } else {
            inner.uffd.copy(dst, &data[done..], CopyMode::default())
        };
        match r {
            Ok(Filled::All) => return,
            Ok(Filled::PageExists { done: d }) => {
                inner
                    .stats
                    .redundant
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let _ = inner.uffd.wake(dst + d, PAGE_SIZE);
                done += d + PAGE_SIZE;
            }
            Err(e) if e.is_retry() => defer_pending_events(inner),
            Err(UffdError::RangeGone { .. }) | Err(UffdError::ProcessGone { .. }) => return,
            Err(e) => panic!("installing pages failed: {e}"),
        }
    }
}

/// The page cannot be read back: the program gets SIGBUS on it, not zeros.
fn poison(inner: &Inner, folio: &FolioLock, page: u32) {
    loop {
        match inner.uffd.poison(addr_of(inner, page), PAGE_SIZE, false) {
            Ok(_) => break,
            Err(e) if e.is_retry() => defer_pending_events(inner),
            Err(e) => panic!("poisoning a page that cannot be read back failed: {e}"),
        }
    }
    inner.group.mark_poisoned(folio, page);
    inner
        .stats
        .poisoned
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// An operation returned EAGAIN: an event (remove, unmap, remap) is queued and must be read
/// before the address space settles. We hold a folio, so we cannot act on the events now:
/// read them and leave them for the loop.
pub(crate) fn defer_pending_events(inner: &Inner) {
    let mut evs = Vec::new();
    let _ = inner.uffd.read_events(&mut evs);
    if evs.is_empty() {
        std::thread::yield_now();
        return;
    }
    inner.deferred.lock().extend(evs);
}
