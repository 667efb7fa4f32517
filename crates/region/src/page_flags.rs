//! Two bits a page of the region, kept beside the engine's state word: whether the page is
//! present in the mapping (resident), and whether a discard covered it lately (discarded,
//! events.rs). Both change only under the page's folio lock.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The region's per-page flags.
pub(crate) struct PageFlags {
    /// One bit a page: present in the mapping.
    resident: Box<[AtomicU64]>,
    /// Pages with their resident bit set.
    nr_resident: AtomicU64,
    /// One bit a page: covered by a discard whose zap may still come, so the kernel may unmap
    /// the page behind our back (events.rs).
    discarded: Box<[AtomicU64]>,
    /// Debug builds: per page, where its resident bit was last cleared and last set (the
    /// caller's file initial and line), for the report of a page we lost track of.
    #[cfg(debug_assertions)]
    trail: Box<[[std::sync::atomic::AtomicU32; 2]]>,
}

fn bitmap(nr_pages: u32) -> Box<[AtomicU64]> {
    (0..nr_pages.div_ceil(64))
        .map(|_| AtomicU64::new(0))
        .collect()
}

fn test(map: &[AtomicU64], page: u32) -> bool {
    map[page as usize / 64].load(Relaxed) & (1 << (page % 64)) != 0
}

/// Set or clear the page's bit; returns whether it was set.
fn assign(map: &[AtomicU64], page: u32, on: bool) -> bool {
    let bit = 1u64 << (page % 64);
    let word = &map[page as usize / 64];
    let was = match on {
        true => word.fetch_or(bit, Relaxed),
        false => word.fetch_and(!bit, Relaxed),
    };
    was & bit != 0
}

impl PageFlags {
    /// Flags for `nr_pages` pages, all clear.
    pub fn new(nr_pages: u32) -> Self {
        PageFlags {
            resident: bitmap(nr_pages),
            nr_resident: AtomicU64::new(0),
            discarded: bitmap(nr_pages),
            #[cfg(debug_assertions)]
            trail: (0..nr_pages).map(|_| Default::default()).collect(),
        }
    }

    /// Pages present in the mapping.
    pub fn nr_resident(&self) -> u64 {
        self.nr_resident.load(Relaxed)
    }

    pub fn is_resident(&self, page: u32) -> bool {
        test(&self.resident, page)
    }

    /// Mark a page present or not; the caller holds its folio lock.
    #[track_caller]
    pub fn set_resident(&self, page: u32, on: bool) {
        #[cfg(debug_assertions)]
        {
            let at = std::panic::Location::caller();
            let initial = at.file().rsplit('/').next().map_or(0, |f| f.as_bytes()[0]);
            self.trail[page as usize][on as usize]
                .store(u32::from(initial) << 24 | at.line(), Relaxed);
        }
        match (assign(&self.resident, page, on), on) {
            (false, true) => {
                self.nr_resident.fetch_add(1, Relaxed);
            }
            (true, false) => {
                self.nr_resident.fetch_sub(1, Relaxed);
            }
            _ => {}
        }
    }

    pub fn is_discarded(&self, page: u32) -> bool {
        test(&self.discarded, page)
    }

    /// Mark a page covered by a discard, or not; the caller holds its folio lock.
    pub fn set_discarded(&self, page: u32, on: bool) {
        assign(&self.discarded, page, on);
    }

    /// Debug builds: where the page's resident bit was last cleared and last set.
    pub fn trail(&self, page: u32) -> String {
        #[cfg(debug_assertions)]
        {
            let [off, on] = &self.trail[page as usize];
            let at = |w: u32| format!("{}:{}", (w >> 24) as u8 as char, w & 0xff_ffff);
            format!(
                "cleared {} set {}",
                at(off.load(Relaxed)),
                at(on.load(Relaxed))
            )
        }
        #[cfg(not(debug_assertions))]
        {
            let _ = page;
            String::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resident_count_follows_the_bits() {
        let f = PageFlags::new(130);
        f.set_resident(129, true);
        f.set_resident(129, true);
        f.set_resident(0, true);
        assert_eq!(f.nr_resident(), 2);
        f.set_resident(129, false);
        f.set_resident(129, false);
        assert_eq!(f.nr_resident(), 1);
        assert!(f.is_resident(0) && !f.is_resident(129) && !f.is_discarded(0));
        f.set_discarded(64, true);
        assert!(f.is_discarded(64) && !f.is_resident(64));
    }
}
