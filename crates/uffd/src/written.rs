//! `WrittenPages`: which pages of a range were written since they were last write-protected,
//! from the page tables, with no fault (`PAGEMAP_SCAN` on a range registered with a
//! `WP_ASYNC` userfaultfd: the kernel clears a page's uffd-wp bit itself at the first write,
//! and the scan reports a present page without it as `PAGE_IS_WRITTEN`). The scan protects
//! the written pages again in the same walk, as the kernel's reclaim clears a page's accessed
//! bit when it reads it: the next scan sees only the writes since this one.

use std::io;
use std::os::fd::AsRawFd;

use crate::sys;

/// A process's pagemap, to scan for written pages.
#[derive(Debug)]
pub struct WrittenPages {
    pagemap: std::fs::File,
}

impl WrittenPages {
    /// This process's pages.
    pub fn own() -> io::Result<WrittenPages> {
        Self::open("/proc/self/pagemap")
    }

    /// Process `pid`'s pages (it must be ours to trace: a child).
    pub fn of(pid: libc::pid_t) -> io::Result<WrittenPages> {
        Self::open(&format!("/proc/{pid}/pagemap"))
    }

    fn open(path: &str) -> io::Result<WrittenPages> {
        let pagemap = std::fs::File::open(path)?;
        Ok(WrittenPages {
            pagemap: crate::descriptors::out_of_reach(pagemap),
        })
    }

    /// The runs of present pages of `addr..addr + len` (page aligned) written since they
    /// were last write-protected, in address order; those are write-protected again, with
    /// one TLB flush for each page table's span (2 MiB) the range meets. Fails (`EPERM`) where the range is not registered for
    /// write-protect faults with a `WP_ASYNC` userfaultfd. Pages not present are neither
    /// reported nor touched (no uffd-wp marker goes in).
    pub fn take(&self, addr: usize, len: usize) -> io::Result<Vec<std::ops::Range<usize>>> {
        // Room for every run of written pages the range can hold (a run, then a page that is
        // not, at best): the scan never stops short.
        let page = crate::raw_region::page_size();
        let mut runs = vec![sys::page_region::default(); len.div_ceil(2 * page).max(1)];
        let mut arg = sys::pm_scan_arg {
            size: std::mem::size_of::<sys::pm_scan_arg>() as u64,
            flags: sys::PM_SCAN_WP_MATCHING | sys::PM_SCAN_CHECK_WPASYNC,
            start: addr as u64,
            end: (addr + len) as u64,
            vec: runs.as_mut_ptr() as u64,
            vec_len: runs.len() as u64,
            // Present and written: a page not present is left alone (asking for written
            // alone would put uffd-wp markers where pages are missing).
            category_mask: sys::PAGE_IS_WRITTEN | sys::PAGE_IS_PRESENT,
            return_mask: sys::PAGE_IS_WRITTEN,
            ..Default::default()
        };
        // SAFETY: `arg` is a valid `pm_scan_arg` of the size it says, and `vec` points to
        // `vec_len` writable `page_region`s that outlive the call; the kernel writes only
        // there and into `arg.walk_end`. The scan changes page-table bits of the range
        // (uffd-wp), never its contents.
        let n = unsafe {
            libc::ioctl(
                self.pagemap.as_raw_fd(),
                sys::PAGEMAP_SCAN as _,
                &mut arg as *mut sys::pm_scan_arg,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(runs[..n as usize]
            .iter()
            .map(|r| r.start as usize..r.end as usize)
            .collect())
    }
}
