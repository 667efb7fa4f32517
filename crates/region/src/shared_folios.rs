//! Folios a fork left shared with a child. The kernel moves (`UFFDIO_MOVE`) only pages a
//! process holds alone, and a fork makes every page the parent has shared with the child, copy
//! on write; a page stays so, even once the child has exited or exec'd, until the parent
//! writes it. Reclaim that meets one (EBUSY) leaves its folio where it is and records it here;
//! kswapd, which holds nothing a fault handler may wait for, makes the recorded folios the
//! region's own again as a write would (`MADV_POPULATE_WRITE`: the kernel copies a page the
//! child still shares, or takes it back once the child is gone), and its next try moves them
//! out. No byte changes: only the sharing ends. So a parent whose fork brought its heap back
//! (fork.rs) goes back under its limit, as the kernel's reclaim takes shared pages too.

use std::sync::Arc;

use crate::lock_order::{self, Mutex};
use zswap::PAGE_SIZE;

/// Where a folio is made the region's own: in this process, or in the program served from
/// here (through its parasite: the kernel takes this advice only from the process itself).
pub(crate) enum Unshare {
    Own,
    #[cfg(target_arch = "x86_64")]
    Program(Arc<uffd::remote::RemoteProcess>),
}

/// The most folios recorded between two of kswapd's turns; more are found again later.
const MAX_FOUND: usize = 4096;

/// Folios reclaim could not move for sharing, until kswapd unshares them.
pub(crate) struct SharedFolios {
    /// (first page, pages) of each folio found.
    found: Mutex<Vec<(u32, u32)>>,
    unshare: Unshare,
}

impl SharedFolios {
    pub fn new(unshare: Unshare) -> Self {
        SharedFolios {
            found: Mutex::new(&lock_order::SHARED_FOLIOS, Vec::new()),
            unshare,
        }
    }

    /// Reclaim could not move the `pages` pages at `start`: one of them is shared with a
    /// child (or pinned, which unsharing leaves as it is).
    pub fn found(&self, start: u32, pages: u32) {
        let mut found = self.found.lock();
        if found.len() < MAX_FOUND && found.last() != Some(&(start, pages)) {
            found.push((start, pages));
        }
    }

    /// Make every folio found since the last call the region's own, `addr_of` giving where a
    /// page is now. Returns the pages unshared. The caller holds no lock: a page discarded
    /// meanwhile faults as a write would, and a handler serves it.
    pub fn unshare_found(&self, addr_of: impl Fn(u32) -> usize) -> u64 {
        let found = std::mem::take(&mut *self.found.lock());
        if found.is_empty() {
            return 0;
        }
        lock_order::assert_none_held("unsharing the pages a fork left shared");
        let mut unshared = 0;
        for (start, pages) in found {
            let (addr, len) = (addr_of(start), pages as usize * PAGE_SIZE);
            let done = match &self.unshare {
                Unshare::Own => uffd::process::populate_write(addr, len),
                #[cfg(target_arch = "x86_64")]
                Unshare::Program(process) => process.madvise(addr, len, libc::MADV_POPULATE_WRITE),
            };
            // An error: the program unmapped the range or took its write permission since
            // (reclaim meets such a folio again, or culls it: unevictable.rs).
            if done.is_ok() {
                unshared += u64::from(pages);
            }
        }
        unshared
    }
}
