//! Where a process's pages are, as the kernel's page tables say: this process's through
//! `mincore` (and its pagemap where `mincore` says a page is not mapped: raw_region.rs), a
//! program's served from here through `/proc/PID/pagemap`.

use std::io;
use std::os::unix::fs::FileExt;

use crate::raw_region::{page_in_mapping, page_mapped, page_size, pages_in_core, pages_present};

/// A pagemap entry's bits (Documentation/admin-guide/mm/pagemap.rst).
const PM_PRESENT: u64 = 1 << 63;
/// Swapped, or a migration entry or PTE marker.
const PM_SWAP: u64 = 1 << 62;

/// One process's page tables, to probe.
#[derive(Debug)]
pub enum PageTables {
    /// This process's.
    Own,
    /// Another's: its `/proc/PID/pagemap`.
    Of(std::fs::File),
}

impl PageTables {
    /// Process `pid`'s page tables (it must be ours to trace: a child).
    pub fn of(pid: libc::pid_t) -> io::Result<PageTables> {
        let pagemap = std::fs::File::open(format!("/proc/{pid}/pagemap"))?;
        Ok(PageTables::Of(crate::descriptors::out_of_reach(pagemap)))
    }

    /// Whether the page at `addr` (page aligned) is present (`page_mapped`).
    pub fn mapped(&self, addr: usize) -> io::Result<bool> {
        match self {
            PageTables::Own => page_mapped(addr),
            PageTables::Of(_) => Ok(self.entries(addr, 1)?[0] & PM_PRESENT != 0),
        }
    }

    /// Whether the page at `addr` has its data in the mapping: present, or swapped out by the
    /// kernel, or migrating (`page_in_mapping`).
    pub fn in_mapping(&self, addr: usize) -> io::Result<bool> {
        match self {
            PageTables::Own => page_in_mapping(addr),
            PageTables::Of(_) => Ok(self.entries(addr, 1)?[0] & (PM_PRESENT | PM_SWAP) != 0),
        }
    }

    /// Whether every page of `addr..addr + len` is in memory (`pages_in_core`). Another
    /// process's page in the kernel's swap cache reads as swapped, so as not in memory.
    pub fn in_core(&self, addr: usize, len: usize) -> io::Result<bool> {
        match self {
            PageTables::Own => pages_in_core(addr, len),
            PageTables::Of(_) => Ok(self
                .entries(addr, len.div_ceil(page_size()))?
                .iter()
                .all(|e| e & PM_PRESENT != 0)),
        }
    }

    /// Which of the `n` pages from `addr` (page aligned) are present, one entry a page
    /// (`pages_present`, one system call; another process's, as its pagemap says).
    pub fn present(&self, addr: usize, n: usize) -> io::Result<Vec<bool>> {
        match self {
            PageTables::Own => pages_present(addr, n * page_size()),
            PageTables::Of(_) => Ok(self
                .entries(addr, n)?
                .iter()
                .map(|e| e & PM_PRESENT != 0)
                .collect()),
        }
    }

    /// Which of the `n` pages from `addr` (page aligned) have their data in the mapping, one
    /// entry a page: present, or swapped out by the kernel (`in_mapping`, from the pagemap).
    pub fn in_mapping_pages(&self, addr: usize, n: usize) -> io::Result<Vec<bool>> {
        Ok(self
            .entries(addr, n)?
            .iter()
            .map(|e| e & (PM_PRESENT | PM_SWAP) != 0)
            .collect())
    }

    /// The pagemap entry of the page at `addr`.
    pub fn entry(&self, addr: usize) -> io::Result<u64> {
        Ok(self.entries(addr, 1)?[0])
    }

    fn entries(&self, addr: usize, n: usize) -> io::Result<Vec<u64>> {
        let own;
        let pagemap = match self {
            PageTables::Own => {
                own = std::fs::File::open("/proc/self/pagemap")?;
                &own
            }
            PageTables::Of(f) => f,
        };
        let mut raw = vec![0u8; n * 8];
        pagemap.read_exact_at(&mut raw, (addr / page_size() * 8) as u64)?;
        Ok(raw
            .chunks_exact(8)
            .map(|e| u64::from_ne_bytes(e.try_into().expect("8 bytes")))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child's page tables read as this process's own say for the same memory: a page
    /// written is present, one never touched is not.
    #[test]
    fn another_process_s_pages_read_as_its_own_mincore_says() {
        let ps = page_size();
        let mut mem = crate::RawRegion::new(4 * ps).unwrap();
        mem.as_managed_slice()[ps] = 1;
        let own = PageTables::Own;
        let of_self = PageTables::of(std::process::id() as libc::pid_t).unwrap();
        for tables in [&own, &of_self] {
            assert!(!tables.mapped(mem.addr()).unwrap());
            assert!(tables.mapped(mem.addr() + ps).unwrap());
            assert!(tables.in_mapping(mem.addr() + ps).unwrap());
            assert!(tables.in_core(mem.addr() + ps, ps).unwrap());
            assert!(!tables.in_core(mem.addr(), 2 * ps).unwrap());
            let in_mapping = tables.in_mapping_pages(mem.addr(), 4).unwrap();
            assert_eq!(in_mapping, [false, true, false, false]);
            assert_eq!(tables.present(mem.addr(), 4).unwrap(), in_mapping);
            assert_ne!(tables.entry(mem.addr() + ps).unwrap() & PM_PRESENT, 0);
        }
    }
}
