//! Folios a fork left shared with a child. The kernel moves (`UFFDIO_MOVE`) only pages a
//! process holds alone, and a fork makes every page the parent has shared with the child, copy
//! on write; a page stays so, even once the child has exited or exec'd, until the parent
//! writes it. Reclaim that meets one (EBUSY) leaves its folio where it is and records it here;
//! kswapd, which holds nothing a fault handler may wait for, makes the recorded folios the
//! region's own again as a write would (`MADV_POPULATE_WRITE`: the kernel copies a page the
//! child still shares, or takes it back once the child is gone), and its next try moves them
//! out. No byte changes: only the sharing ends. So a parent whose fork brought its heap back
//! (fork.rs) goes back under its limit, as the kernel's reclaim takes shared pages too. While
//! the child lives, each unshared page is a copy: reclaim tries an unshared folio next
//! (`Lru::reclaim_next`), so the copy leaves as it is made and the two processes hold little
//! more than the heap (were it queued young, the unsharing could copy the whole heap before
//! the first copy left). Not unshared: a program served from outside (see
//! `Unshare`), a pinned page (it stays busy), and under in-thread faults a clean folio (its
//! write-protect fault is EFAULT there, so it stays shared).

use std::time::{Duration, Instant};

use crate::lock_order::{self, Mutex};
use zswap::PAGE_SIZE;

/// Whether folios can be made the region's own here: in this process, yes. A program served
/// from outside is not unshared: the call would run on its parasite's program lane, which a
/// fork waits for while reclaim is held off, and a page discarded meanwhile would fault there
/// and wait for a handler waiting for reclaim.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unshare {
    Own,
    #[cfg(target_arch = "x86_64")]
    Never,
}

/// The most folios recorded between two of kswapd's turns; more are found again later.
const MAX_FOUND: usize = 4096;

/// How long after a fork nothing is unshared: forks in a burst (a process pool starting its
/// workers) share the one heap the first brought back, and children that are done by then
/// (the pool's work, a BGSAVE) leave the pages the parent's alone again, to be moved out as
/// any. Unshared and moved out between forks, each fork would bring the heap back again:
/// `multiprocessing.Pool(4)` over 209 MiB under 128M stored 3 times the pages and took twice
/// as long; with 250 ms, 1.3 times the pages and 1.2 times as long; with this, as before
/// the copies were tried next, and none made. Meanwhile the pages are shared, not copied.
const FORK_SETTLE: Duration = Duration::from_millis(1000);

/// Folios reclaim could not move for sharing, until kswapd unshares them.
pub(crate) struct SharedFolios {
    /// (first page, pages) of each folio found.
    found: Mutex<Vec<(u32, u32)>>,
    /// When the last fork brought the heap back.
    forked_at: Mutex<Option<Instant>>,
    unshare: Unshare,
}

impl SharedFolios {
    pub fn new(unshare: Unshare) -> Self {
        SharedFolios {
            found: Mutex::new(&lock_order::SHARED_FOLIOS, Vec::new()),
            forked_at: Mutex::new(&lock_order::SHARED_FOLIOS, None),
            unshare,
        }
    }

    /// A fork has brought the heap back (fork.rs).
    pub fn forked(&self) {
        *self.forked_at.lock() = Some(Instant::now());
    }

    /// Whether the last fork is `FORK_SETTLE` ago or more: what reclaim found shared may be
    /// unshared now.
    pub fn settled(&self) -> bool {
        self.forked_at
            .lock()
            .is_none_or(|at| at.elapsed() >= FORK_SETTLE)
    }

    /// Whether this region's shared folios are unshared at all.
    pub fn unshares(&self) -> bool {
        self.unshare == Unshare::Own
    }

    /// Reclaim could not move the `pages` pages at `start`: one of them is shared with a
    /// child (or pinned, which unsharing leaves as it is).
    pub fn found(&self, start: u32, pages: u32) {
        if !self.unshares() {
            return;
        }
        let mut found = self.found.lock();
        if found.len() < MAX_FOUND && found.last() != Some(&(start, pages)) {
            found.push((start, pages));
        }
    }

    /// Make the folios found (at most `most`, the oldest first: the rest wait for the next
    /// call) the region's own, where `still_in` gives its address: a folio whose pages are
    /// all still resident and mapped (one discarded, staged or evicted since is left alone:
    /// populating it would bring it in). Returns the folios unshared, (first page, pages)
    /// each: reclaim tries them next, so that each copy the unsharing makes while the child
    /// lives leaves soon after it is made (`most` is what it can queue). The caller holds no
    /// lock: a page discarded between the look and the call faults as a write would, and a
    /// handler serves it.
    pub fn unshare_found(
        &self,
        most: usize,
        still_in: impl Fn(u32, u32) -> Option<usize>,
    ) -> Vec<(u32, u32)> {
        let found: Vec<(u32, u32)> = {
            let mut found = self.found.lock();
            let n = found.len().min(most);
            found.drain(..n).collect()
        };
        if found.is_empty() {
            return found;
        }
        lock_order::assert_none_held("unsharing the pages a fork left shared");
        found
            .into_iter()
            .filter(|&(start, pages)| {
                // An error: the program unmapped the range or took its write permission
                // since (reclaim meets such a folio again, or culls it: unevictable.rs).
                still_in(start, pages).is_some_and(|addr| {
                    uffd::process::populate_write(addr, pages as usize * PAGE_SIZE).is_ok()
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_unshared_right_after_a_fork() {
        let shared = SharedFolios::new(Unshare::Own);
        assert!(shared.settled(), "no fork yet");
        shared.forked();
        assert!(!shared.settled());
    }
}
