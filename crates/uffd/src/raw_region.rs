//! `RawRegion`: an anonymous private mapping meant to be registered with a userfaultfd (or used
//! as a staging area for `UFFDIO_MOVE`), plus the `madvise` helpers that go with it.
//!
//! Why not [`AnonMapping`](crate::AnonMapping): that type hands out `&[u8]`/`&mut [u8]`, and
//! the contents of a registered range change behind Rust's back (copy, move, zeropage,
//! `MADV_DONTNEED` by another thread), which a live reference must never see. A `RawRegion`
//! never hands out a reference into its memory: only its address, and byte copies done with
//! atomic accesses. That is what lets [`Uffd::register`](crate::Uffd::register) be safe.

use crate::error::RawRegionError;
use std::io;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Weak};

/// The base page size; userfaultfd operations work on whole pages.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        crate::PAGE_SIZE
    }
}

/// Whether `x` is a multiple of the page size (a power of two).
pub fn page_aligned(x: usize) -> bool {
    x & (page_size() - 1) == 0
}

/// An anonymous, private, read-write mapping, unmapped on drop.
///
/// The memory is shared between threads only through raw pointers (the program it is given to)
/// and through [`read`](Self::read)/[`write`](Self::write), which use relaxed atomic byte
/// accesses so that concurrent access, and the kernel changing the contents, are never a data
/// race in Rust's memory model.
///
/// Dropping a region that is still registered with a userfaultfd that has `EVENT_UNMAP` blocks
/// until that userfaultfd's reader reads the `Unmap` event; do not drop it from the reader.
#[derive(Debug)]
pub struct RawRegion {
    // A plain address, not a pointer: the region never dereferences it outside the atomic
    // accessors below, and this keeps the type Send + Sync without an unsafe impl.
    addr: usize,
    len: usize,
    /// Held (upgraded from a `LateRegistration`'s weak reference) while a late registration
    /// registers the range: the mapping is neither unmapped nor moved meanwhile.
    late: Arc<()>,
}

/// A registration of a [`RawRegion`]'s whole range, to be made later from any thread
/// ([`RawRegion::late_registration`]): made only while the region is where it was when this
/// was taken.
#[derive(Debug)]
pub struct LateRegistration {
    addr: usize,
    len: usize,
    region: Weak<()>,
}

impl LateRegistration {
    /// The range, `(start, len)`, held (neither unmapped nor moved) until the guard goes;
    /// None when the region is gone, or has moved (`remap`, `relocate`): its drop, `remap`
    /// and `relocate` first wait for every hold to end, and void this registration
    /// (`void_late_registrations`).
    pub(crate) fn hold(&self) -> Option<(usize, usize, Arc<()>)> {
        Some((self.addr, self.len, self.region.upgrade()?))
    }
}

impl RawRegion {
    /// A registration of the whole range to be made later (a region registered only once
    /// it is needed): void once the region is dropped or moved.
    pub fn late_registration(&self) -> LateRegistration {
        LateRegistration {
            addr: self.addr,
            len: self.len,
            region: Arc::downgrade(&self.late),
        }
    }

    /// Wait until no late registration is registering the range, and void every one taken
    /// so far: before the mapping is unmapped or moved.
    fn void_late_registrations(&mut self) {
        let mut late = std::mem::take(&mut self.late);
        while let Err(held) = Arc::try_unwrap(late) {
            late = held;
            std::thread::yield_now();
        }
    }

    /// Map `len` bytes (a non-zero multiple of the page size) with `MAP_NORESERVE`: pages read
    /// as zero until written (or, once registered, fault as missing).
    pub fn new(len: usize) -> Result<Self, RawRegionError> {
        if len == 0 || !page_aligned(len) {
            return Err(RawRegionError::Mmap {
                len,
                source: io::Error::from_raw_os_error(libc::EINVAL),
            });
        }
        let p = crate::mmap::map_anonymous(len)
            .map_err(|source| RawRegionError::Mmap { len, source })?;
        Ok(Self {
            addr: p.as_ptr() as usize,
            len,
            late: Arc::new(()),
        })
    }

    /// The start address (page aligned).
    pub fn addr(&self) -> usize {
        self.addr
    }

    /// The start as a raw pointer, to hand to the program that uses the memory. Dereferencing
    /// it is the user's `unsafe` business; while the range is registered, contents change under
    /// any reference made from it.
    pub fn as_ptr(&self) -> *mut u8 {
        self.addr as *mut u8
    }

    /// The length in bytes: a non-zero multiple of the page size.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a mapping is never empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `addr..addr+len` as a range of addresses.
    pub fn range(&self) -> std::ops::Range<usize> {
        self.addr..self.addr + self.len
    }

    fn check(&self, offset: usize, len: usize, aligned: bool) -> Result<(), RawRegionError> {
        let inside = offset.checked_add(len).is_some_and(|end| end <= self.len);
        if !inside || (aligned && !(page_aligned(offset) && page_aligned(len))) {
            return Err(RawRegionError::OutOfRange {
                offset,
                len,
                region_len: self.len,
            });
        }
        Ok(())
    }

    /// Check that `offset..offset+len` is page aligned and inside the region; returns its address.
    pub fn page_range(&self, offset: usize, len: usize) -> Result<usize, RawRegionError> {
        self.check(offset, len, true)?;
        Ok(self.addr + offset)
    }

    /// Copy `buf.len()` bytes at `offset` out of the region. Touches the pages, so on a
    /// registered range it faults (and blocks until served) like any other access: never call
    /// it from the thread that serves this region's faults.
    pub fn read(&self, offset: usize, buf: &mut [u8]) -> Result<(), RawRegionError> {
        self.check(offset, buf.len(), false)?;
        for (i, b) in buf.iter_mut().enumerate() {
            // SAFETY: the byte lies inside the live mapping (checked above; the mapping lives
            // as long as &self), any address is aligned for AtomicU8, and every Rust access to
            // region memory goes through AtomicU8 of this same size, so no non-atomic or
            // mixed-size access can race with it. The reference lives for this one load only.
            *b = unsafe { AtomicU8::from_ptr((self.addr + offset + i) as *mut u8) }
                .load(Ordering::Relaxed);
        }
        Ok(())
    }

    /// Copy `data` into the region at `offset` (same faulting rules as [`read`](Self::read)).
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<(), RawRegionError> {
        self.check(offset, data.len(), false)?;
        for (i, b) in data.iter().enumerate() {
            // SAFETY: as in `read`: inside the live, writable mapping; atomic byte access only.
            unsafe { AtomicU8::from_ptr((self.addr + offset + i) as *mut u8) }
                .store(*b, Ordering::Relaxed);
        }
        Ok(())
    }

    /// `MADV_DONTNEED` on `offset..offset+len` (page aligned): the pages are freed and read as
    /// zero afterwards, or fault as missing while registered. On a registered range with
    /// `EVENT_REMOVE` this blocks until the reader reads the `Remove` event: never call it from
    /// the reader thread.
    pub fn discard(&self, offset: usize, len: usize) -> Result<(), RawRegionError> {
        let addr = self.page_range(offset, len)?;
        // SAFETY: the range is inside this region, whose memory no Rust reference ever points
        // into (only atomic accesses, which tolerate the contents changing), so dropping the
        // pages invalidates nothing Rust relies on.
        unsafe { madvise(addr, len, Advice::DontNeed) }
    }

    /// `MADV_FREE` on `len` bytes at `offset`: the pages keep their contents until the kernel
    /// takes them (then they read zero). It raises the same `Remove` event as `discard`, and
    /// blocks the same way until it is read.
    pub fn free_lazily(&self, offset: usize, len: usize) -> Result<(), RawRegionError> {
        let addr = self.page_range(offset, len)?;
        // SAFETY: as for `discard`: no Rust reference points into the region, so contents
        // that may become zero invalidate nothing Rust relies on.
        unsafe { madvise(addr, len, Advice::Free) }
    }

    /// `mprotect` of `len` bytes at `offset` to `prot` (`PROT_*` bits): an access the
    /// protection forbids gets SIGSEGV, as on any mapping; the range stays registered. The
    /// kernel moves pages (`UFFDIO_MOVE`) only between mappings of one protection, so a page
    /// under another than the rest's stays where it is.
    pub fn protect(&self, offset: usize, len: usize, prot: i32) -> Result<(), RawRegionError> {
        let addr = self.page_range(offset, len)?;
        // SAFETY: the range is inside this region, whose memory no Rust reference ever points
        // into; a protection changes only which of the program's accesses fault. The system
        // call itself: a preloaded `mprotect` may stand in front of libc's.
        let r = unsafe { libc::syscall(libc::SYS_mprotect, addr, len, prot) };
        if r != 0 {
            return Err(RawRegionError::Mprotect {
                prot,
                source: io::Error::last_os_error(),
            });
        }
        Ok(())
    }

    /// `MADV_DONTFORK` on the whole region: a child process does not inherit it (it gets SIGSEGV
    /// instead of silently reading zeros where evicted pages were), and `UFFDIO_MOVE` sources
    /// stay exclusive across a fork (else MOVE fails with `EBUSY`).
    pub fn dont_fork(&self) -> Result<(), RawRegionError> {
        // SAFETY: changes only what a fork inherits, not this process's memory.
        unsafe { madvise(self.addr, self.len, Advice::DontFork) }
    }

    /// Undo [`dont_fork`](Self::dont_fork): a forked child gets a copy of the mapping (not
    /// its userfaultfd registration: pages missing at the fork read as zero in the child).
    pub fn do_fork(&self) -> Result<(), RawRegionError> {
        // SAFETY: changes only what a fork inherits, not this process's memory.
        unsafe { madvise(self.addr, self.len, Advice::DoFork) }
    }

    /// `MADV_NOHUGEPAGE` on the whole region: only base pages back it.
    pub fn no_huge_pages(&self) -> Result<(), RawRegionError> {
        // SAFETY: changes how the range may be backed in future, never its contents.
        unsafe { madvise(self.addr, self.len, Advice::NoHugePage) }
    }

    /// `mremap(MREMAP_MAYMOVE)` to `new_len` bytes; the region may move (see
    /// [`addr`](Self::addr)). On a registered range with `EVENT_REMAP` this blocks until the
    /// reader reads the `Remap` event (and with `EVENT_UNMAP`, shrinking raises `Unmap`).
    pub fn remap(&mut self, new_len: usize) -> Result<(), RawRegionError> {
        if new_len == 0 || !page_aligned(new_len) {
            return Err(RawRegionError::Mremap {
                new_len,
                source: io::Error::from_raw_os_error(libc::EINVAL),
            });
        }
        self.void_late_registrations();
        // SAFETY: the old range is exactly this region's mapping, which `&mut self` proves no
        // one else is using through this type; no references into it exist. On success the old
        // range is gone and we only keep the new address.
        let p = unsafe {
            libc::mremap(
                self.addr as *mut libc::c_void,
                self.len,
                new_len,
                libc::MREMAP_MAYMOVE,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(RawRegionError::Mremap {
                new_len,
                source: io::Error::last_os_error(),
            });
        }
        self.addr = p as usize;
        self.len = new_len;
        Ok(())
    }
}

impl RawRegion {
    /// Move the whole region to a new address with `mremap(MREMAP_MAYMOVE | MREMAP_FIXED)`,
    /// keeping its pages: what a program's `realloc` of a large block does. Used to exercise
    /// `Remap` events, since a plain `remap` may grow in place without moving.
    pub fn relocate(&mut self) -> Result<(), RawRegionError> {
        // A placeholder reserves a free address range of the right size; mremap then replaces
        // it atomically. It is owned here and forgotten once replaced.
        let target = RawRegion::new(self.len)?;
        self.void_late_registrations();
        // SAFETY: the source is this region's mapping (`&mut self`: no other user through this
        // type, no references into it); the destination is our own placeholder, which MREMAP_FIXED
        // replaces, so no memory anyone else uses is overwritten.
        let p = unsafe {
            libc::mremap(
                self.addr as *mut libc::c_void,
                self.len,
                self.len,
                libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                target.addr as *mut libc::c_void,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(RawRegionError::Mremap {
                new_len: self.len,
                source: io::Error::last_os_error(),
            });
        }
        // The placeholder's range now holds this region; it must not be unmapped by its Drop.
        std::mem::forget(target);
        self.addr = p as usize;
        Ok(())
    }
}

impl Drop for RawRegion {
    fn drop(&mut self) {
        let Some(ptr) = std::ptr::NonNull::new(self.addr as *mut u8) else {
            return;
        };
        self.void_late_registrations();
        // SAFETY: this region owns the mapping (from map_anonymous, or moved by its own
        // remap/relocate, which keep addr/len current), and with `&mut self` in drop nothing
        // borrows it; raw pointers given out earlier dangle from here on, as documented on
        // `as_ptr`.
        unsafe { crate::mmap::unmap(ptr, self.len) }
    }
}

/// The `madvise` advices uzswap needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Advice {
    /// Free the pages; anonymous private memory reads as zero afterwards.
    DontNeed,
    /// Free the pages lazily: until the kernel needs the memory (and as soon as a page is
    /// written again) they keep their contents; a page it takes reads as zero.
    Free,
    /// Do not inherit the range across fork.
    DontFork,
    /// Undo `DontFork`.
    DoFork,
    /// Never back the range with transparent huge pages (khugepaged leaves it alone).
    NoHugePage,
}

impl Advice {
    fn raw(self) -> (libc::c_int, &'static str) {
        match self {
            Self::DontNeed => (libc::MADV_DONTNEED, "MADV_DONTNEED"),
            Self::Free => (libc::MADV_FREE, "MADV_FREE"),
            Self::DontFork => (libc::MADV_DONTFORK, "MADV_DONTFORK"),
            Self::DoFork => (libc::MADV_DOFORK, "MADV_DOFORK"),
            Self::NoHugePage => (libc::MADV_NOHUGEPAGE, "MADV_NOHUGEPAGE"),
        }
    }
}

/// `madvise(addr, len, advice)` on any range.
///
/// # Safety
/// For [`Advice::DontNeed`] and [`Advice::Free`], no Rust reference may point into `addr..addr+len` (its contents
/// become zero, or missing), and the range must not hold anything Rust code relies on (stack,
/// heap, statics). The fork advices have no such requirement. Prefer [`RawRegion::discard`].
pub unsafe fn madvise(addr: usize, len: usize, advice: Advice) -> Result<(), RawRegionError> {
    let (raw, name) = advice.raw();
    // SAFETY: the caller upholds the contract above; the kernel validates the range itself.
    let rc = unsafe { libc::madvise(addr as *mut libc::c_void, len, raw) };
    if rc != 0 {
        return Err(RawRegionError::Madvise {
            advice: name,
            source: io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// `madvise(addr, len, MADV_PAGEOUT)`: the kernel reclaims the range's pages now, to system
/// swap if any is on (anonymous pages stay where they are without it). Contents are kept:
/// an access swaps a page back in. For tests and tools that make the kernel do to a region
/// what its own reclaim does under memory pressure.
pub fn page_out(addr: usize, len: usize) -> Result<(), RawRegionError> {
    // SAFETY: MADV_PAGEOUT changes where pages live, never what they hold (a swapped-out
    // anonymous page reads back the same), so no reference or data Rust relies on can be
    // broken, whatever the range; the kernel validates the range itself.
    let rc = unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_PAGEOUT) };
    if rc != 0 {
        return Err(RawRegionError::Madvise {
            advice: "MADV_PAGEOUT",
            source: io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// `MADV_DONTNEED` on many ranges of this process's memory with one `process_madvise` call
/// (`pidfd`: this process), so the kernel flushes the TLB once for all of them (Linux 6.16
/// batches the flush; 6.13 first allowed this advice for one's own process). An error, or a
/// call that stopped short, says nothing was promised: the caller discards the ranges again
/// another way (discarding twice is harmless).
///
/// # Safety
/// As for [`madvise`] with [`Advice::DontNeed`], for every range.
pub(crate) unsafe fn discard_ranges(
    pidfd: &std::os::fd::OwnedFd,
    ranges: &[(usize, usize)],
) -> io::Result<()> {
    use std::os::fd::AsFd;
    for chunk in ranges.chunks(crate::process::MAX_RANGES) {
        let total: usize = chunk.iter().map(|r| r.1).sum();
        // SAFETY: the caller guarantees that discarding the ranges breaks no reference or
        // data Rust relies on.
        let done = unsafe {
            crate::process::process_madvise_raw(pidfd.as_fd(), chunk, libc::MADV_DONTNEED)
        }?;
        if done != total {
            return Err(io::Error::other("process_madvise stopped short"));
        }
    }
    Ok(())
}

/// Whether the page at `addr` (page aligned) is mapped in this process (`mincore`): for
/// anonymous memory without swap, whether it is present. An unmapped address is an error.
pub fn page_mapped(addr: usize) -> io::Result<bool> {
    let mut vec = [0u8; 1];
    // SAFETY: mincore reads no memory of ours and writes one byte per page of the range (one
    // page here) into `vec`, which is that long and lives across the call; the kernel checks
    // the address itself.
    let rc = unsafe { libc::mincore(addr as *mut libc::c_void, page_size(), vec.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(vec[0] & 1 != 0)
}

/// Whether the page at `addr` (page aligned) has its data in this process's mapping: mapped
/// (`page_mapped`), or swapped out to system swap by the kernel, or being migrated (a swap
/// or migration entry in its page table, `/proc/self/pagemap`'s bit 62), which an access
/// brings back without a userfault. Only `mincore`'s answer "not mapped" is checked further,
/// so a mapped page costs no more than `page_mapped`; the pagemap entry's present bit counts
/// too, since an access may have swapped the page back in between the two looks. Where the
/// pagemap cannot be read (`/proc` missing, a process made non-dumpable, no descriptor
/// left), `mincore`'s answer stands.
///
/// A PTE marker reads as a swap entry too (a `UFFDIO_POISON` marker; a write-protect marker,
/// which only `UFFDIO_WRITEPROTECT` of an unpopulated range puts on anonymous memory).
pub fn page_in_mapping(addr: usize) -> io::Result<bool> {
    if page_mapped(addr)? {
        return Ok(true);
    }
    use std::os::unix::fs::FileExt;
    const PM_PRESENT: u64 = 1 << 63;
    const PM_SWAP: u64 = 1 << 62;
    let mut entry = [0u8; 8];
    let read = std::fs::File::open("/proc/self/pagemap")
        .and_then(|pagemap| pagemap.read_exact_at(&mut entry, (addr / page_size() * 8) as u64));
    Ok(read.is_ok() && u64::from_ne_bytes(entry) & (PM_PRESENT | PM_SWAP) != 0)
}

/// Whether every page of `addr..addr + len` (page aligned) is in memory (`mincore`): present,
/// or in the swap cache. A page in system swap, or not mapped, is not. An unmapped address is
/// an error.
pub fn pages_in_core(addr: usize, len: usize) -> io::Result<bool> {
    Ok(pages_present(addr, len)?.into_iter().all(|present| present))
}

/// Which pages of `addr..addr + len` (page aligned) are in memory (`mincore`), one entry a
/// page: present, or in the swap cache. An unmapped address is an error.
pub fn pages_present(addr: usize, len: usize) -> io::Result<Vec<bool>> {
    let mut vec = vec![0u8; len.div_ceil(page_size())];
    // SAFETY: mincore reads no memory of ours and writes one byte per page of the range into
    // `vec`, which holds that many and lives across the call; the kernel checks the address.
    let rc = unsafe { libc::mincore(addr as *mut libc::c_void, len, vec.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(vec.iter().map(|&v| v & 1 != 0).collect())
}

impl RawRegion {
    /// The region's memory as a byte slice, for a region whose contents a page manager keeps
    /// (uzswap's `Region`): pages it moves out come back with the same bytes before any access
    /// completes, so every value read through the slice is the last one written through it.
    ///
    /// The exclusive borrow of the region keeps this slice the only Rust reference into it.
    /// What a manager must never do while such a slice lives: change a present page's bytes
    /// (it only moves whole pages out and back, or fills missing ones with their data).
    pub fn as_managed_slice(&mut self) -> &mut [u8] {
        // SAFETY: the mapping is live for the borrow of self, readable and writable, `len`
        // bytes long, and page aligned; `&mut self` makes this the only reference into it; the
        // contract above keeps every byte Rust can observe equal to what it last wrote (a
        // missing page blocks the access until it is filled with those same bytes).
        unsafe { std::slice::from_raw_parts_mut(self.addr as *mut u8, self.len) }
    }
}

impl RawRegion {
    /// The region's memory as 64-bit atomic words, shareable between threads: for programs
    /// (and tests) that update the same pages from several threads, as uffd-stress does.
    pub fn as_atomic_words(&self) -> &[std::sync::atomic::AtomicU64] {
        // SAFETY: the mapping is live for the borrow of self, page aligned (so 8-byte
        // aligned), readable and writable, and `len` is a multiple of 8. Atomics may be
        // shared and mutated through `&`, so aliasing is sound; every access through this
        // view is atomic. A page manager that keeps the region (uzswap's Region) only moves
        // whole pages out and back with their bytes, so no value a load can observe changes
        // under it except by a store through this view.
        unsafe {
            std::slice::from_raw_parts(
                self.addr as *const std::sync::atomic::AtomicU64,
                self.len / 8,
            )
        }
    }
}
