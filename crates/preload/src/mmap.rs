//! Anonymous private mappings on the region heap: what a runtime maps for its own heap
//! (CPython's object arenas, the jemalloc in Redis) is a block of the region heap, zeroed,
//! page aligned, and its munmap, mremap and madvise are applied to the block:
//! - munmap of a whole block frees it; of part of one, discards that part (the region frees
//!   what it held) and frees the block once all of it is unmapped;
//! - mremap shrinks a block in place (discarding the tail) or moves it to a larger one;
//! - madvise passes through, except `MADV_HUGEPAGE`, which the region's base pages refuse,
//!   and `MADV_FREE`, which frees at once (`MADV_DONTNEED`): the limit must see every page.
//!
//! An mprotect over the region is the region's (`Region::protect`): the kernel keeps the
//! protection. A fixed mapping over it never reaches the kernel, which would replace the
//! region's mapping: over part of a block, an anonymous one is a discard under the protection
//! asked for, a private file one a copy of the file's bytes, and anything else is refused
//! (`fixed_in_region`). Everything else (file mappings, shared
//! or fixed mappings elsewhere, stacks, the region's own threads, mimalloc's own mappings)
//! goes straight to the kernel.
#![cfg(not(test))]

use std::collections::BTreeMap;
use std::ffi::{c_int, c_long, c_void};

use libmimalloc_sys as mi;

use crate::fork_table::ForkTable;
use crate::heap::{enter, in_region, inside, overlaps_region, region_heap};
use crate::thread_role::is_uzswap_thread;

const PAGE: usize = 4096;

/// A block handed out by `mmap`: its length, and which of its pages were unmapped since (a
/// page unmapped twice counts once, so the block is freed only when no page of it is left).
/// Its protections are the kernel's, on the region's mapping (`protect`).
pub(crate) struct Block {
    len: usize,
    /// Given another protection than read-write at some time: made read-write again when
    /// freed, for mimalloc to hand out.
    protected: bool,
    unmapped: Vec<bool>,
    nr_unmapped: usize,
}

impl Block {
    fn new(len: usize, protected: bool) -> Self {
        Block {
            len,
            protected,
            unmapped: Vec::new(),
            nr_unmapped: 0,
        }
    }

    /// The `len` bytes `offset` bytes in were unmapped; true once every page of it is.
    fn unmap(&mut self, offset: usize, len: usize) -> bool {
        let pages = self.len / PAGE;
        if self.unmapped.is_empty() {
            self.unmapped = vec![false; pages];
        }
        for p in offset / PAGE..(offset + len).div_ceil(PAGE).min(pages) {
            if !std::mem::replace(&mut self.unmapped[p], true) {
                self.nr_unmapped += 1;
            }
        }
        self.nr_unmapped == pages
    }

    /// `mremap` within the block from `old_len` to `new_len` bytes: the pages past the new
    /// end are unmapped, those between the old end and a larger new one mapped again.
    fn resize(&mut self, old_len: usize, new_len: usize) {
        let pages = self.len / PAGE;
        if self.unmapped.is_empty() {
            self.unmapped = vec![false; pages];
        }
        let end = new_len.div_ceil(PAGE);
        for p in old_len.min(new_len).div_ceil(PAGE)..pages {
            self.unmapped[p] = p >= end;
        }
        self.nr_unmapped = self.unmapped.iter().filter(|&&u| u).count();
    }
}

/// The blocks `mmap` handed out, by start address.
pub(crate) static BLOCKS: ForkTable<BTreeMap<usize, Block>> = ForkTable::new(BTreeMap::new());

fn fail(e: c_int) -> *mut c_void {
    // SAFETY: this thread's errno.
    unsafe { *libc::__errno_location() = e };
    libc::MAP_FAILED
}

fn raw_mmap(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: i64,
) -> *mut c_void {
    // SAFETY: the kernel's mmap, with the caller's arguments.
    unsafe { libc::syscall(libc::SYS_mmap, addr, len, prot, flags, fd, off) as *mut c_void }
}

fn raw_madvise(addr: *mut c_void, len: usize, advice: c_int) -> c_int {
    // SAFETY: the kernel's madvise, with the caller's arguments.
    unsafe { libc::syscall(libc::SYS_madvise, addr, len, advice) as c_int }
}

/// `madvise` of heap memory with an advice that discards (the region reads an event for it):
/// a program thread waits first for the faults the last discards held off, as a discard in a
/// loop would starve them (`Region::before_discard`).
fn discard(addr: *mut c_void, len: usize, advice: c_int) -> c_int {
    if let Some(region) = crate::run::region().filter(|_| !is_uzswap_thread()) {
        region.before_discard();
    }
    raw_madvise(addr, len, advice)
}

/// The smallest `PROT_NONE` reservation the heap takes. Smaller ones are a guard or a trap,
/// whose fault is the point, and stay with the kernel: a JVM's safepoint polling page (two
/// pages, one protected `PROT_NONE` to stop every thread that polls it) never trapped in a
/// block, and the JVM hung at its first safepoint.
const RESERVATION_MIN: usize = 64 << 10;

/// Whether a mapping with these arguments is heap memory: anonymous, private, placed by the
/// kernel (`addr` a hint at most), readable and writable, or a `PROT_NONE` reservation from
/// of `RESERVATION_MIN` or more.
fn is_heap(len: usize, prot: c_int, flags: c_int, fd: c_int) -> bool {
    let refused = libc::MAP_FIXED
        | libc::MAP_FIXED_NOREPLACE
        | libc::MAP_SHARED
        | libc::MAP_GROWSDOWN
        | libc::MAP_STACK
        | libc::MAP_HUGETLB;
    let rw = prot == libc::PROT_READ | libc::PROT_WRITE;
    let reservation = prot == libc::PROT_NONE && len >= RESERVATION_MIN;
    fd == -1
        && (rw || reservation)
        && flags & (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS)
            == libc::MAP_PRIVATE | libc::MAP_ANONYMOUS
        && flags & refused == 0
}

/// # Safety
/// As C's `mmap`.
#[no_mangle]
pub unsafe extern "C" fn mmap(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: i64,
) -> *mut c_void {
    let fixed = flags & (libc::MAP_FIXED | libc::MAP_FIXED_NOREPLACE) != 0;
    if fixed && !inside() && !is_uzswap_thread() && overlaps_region(addr, len) {
        return fixed_in_region(addr, len, prot, flags, fd, off);
    }
    let heap = match inside() || !is_heap(len, prot, flags, fd) || len == 0 {
        true => None,
        false => region_heap(),
    };
    let Some(heap) = heap else {
        return raw_mmap(addr, len, prot, flags, fd, off);
    };
    let Some(len) = len.checked_next_multiple_of(PAGE) else {
        return fail(libc::ENOMEM);
    };
    let reservation = prot == libc::PROT_NONE;
    let Some((p, large)) = alloc_block(heap, len, reservation) else {
        if reservation {
            // Address space the region has no room for (a WebAssembly memory's guard region
            // of several GiB): the kernel's, its pages outside the limit once committed.
            static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
            if len >= LARGE_RESERVATION && !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
                crate::say(&format!(
                    "a reservation of {} MiB does not fit in the heap's address space \
                     (--max-heap): it is the kernel's, and what is used of it is outside the \
                     limit (said once)",
                    len >> 20
                ));
            }
            return raw_mmap(addr, len, prot, flags, fd, off);
        }
        // No room for a mapping to be held: the kernel's, outside the limit, said once.
        crate::heap::say_allocations_outside();
        return raw_mmap(addr, len, prot, flags, fd, off);
    };
    // A reservation holds no page, and traps as it does without uzswap until the program
    // commits it: discarded (the zeroes a reused block would be written with would stay
    // resident, unevictable under `PROT_NONE`; a large block is zeroed by nothing else), then
    // protected.
    let wipe = reservation || large;
    if (wipe && discard(p, len, libc::MADV_DONTNEED) != 0)
        || (reservation && protect(p as usize, len, prot) != 0)
    {
        release(p as usize, len, large);
        return fail(libc::ENOMEM);
    }
    BLOCKS
        .lock()
        .insert(p as usize, Block::new(len, reservation));
    p
}

/// A reservation this large is a runtime's heap or code space (a JVM's `-Xmx`): one that
/// goes to the kernel for want of room is said.
const LARGE_RESERVATION: usize = 1 << 30;

/// A block of `len` bytes for `mmap`, zeroed unless a `reservation`: from mimalloc, or, for
/// a reservation of `LARGE_RESERVATION` or more (kept out of mimalloc's arena, which malloc
/// needs) and for 2 GiB or more (mimalloc makes no such block), a large block, not zeroed
/// (large_blocks.rs). Its address, and whether it is large; None when neither has room
/// (nothing said yet).
fn alloc_block(
    heap: *mut mi::mi_heap_t,
    len: usize,
    reservation: bool,
) -> Option<(*mut c_void, bool)> {
    let large_first = reservation && len >= LARGE_RESERVATION;
    if large_first {
        if let Some(p) = crate::large_blocks::alloc(len) {
            return Some((p as *mut c_void, true));
        }
    }
    let p = {
        let _inside = enter();
        match reservation {
            // SAFETY: the live region heap; any size, page alignment.
            true => unsafe { mi::mi_heap_malloc_aligned(heap, len, PAGE) },
            // SAFETY: as above.
            false => unsafe { mi::mi_heap_zalloc_aligned(heap, len, PAGE) },
        }
    };
    if !p.is_null() {
        return Some((p, false));
    }
    match large_first {
        true => None,
        false => crate::large_blocks::alloc(len).map(|p| (p as *mut c_void, true)),
    }
}

/// Give back a block `alloc_block` made, to the allocator it came from.
fn release(start: usize, len: usize, large: bool) {
    if large {
        crate::large_blocks::free(start, len);
        return;
    }
    let _inside = enter();
    // SAFETY: a live block of the region heap that no one else holds.
    unsafe { mi::mi_free(start as *mut c_void) };
}

/// Whether `[addr, addr + len)` lies in one block; if so and `prot` is not read-write, the
/// block is marked protected.
fn mark_protected(addr: usize, len: usize, prot: c_int) -> bool {
    let mut blocks = BLOCKS.lock();
    let Some(start) = block_of(&blocks, addr, len) else {
        return false;
    };
    if prot != libc::PROT_READ | libc::PROT_WRITE {
        blocks.get_mut(&start).expect("found").protected = true;
    }
    true
}

/// Give `len` bytes at `addr` (page aligned, in the region) the protection `prot`
/// (`Region::protect`): 0, or -1 with errno set.
fn protect(addr: usize, len: usize, prot: c_int) -> c_int {
    let Some(region) = crate::run::region() else {
        // SAFETY: the kernel's mprotect; no region yet, so none of its memory.
        return unsafe { libc::syscall(libc::SYS_mprotect, addr, len, prot) as c_int };
    };
    let _outside = crate::thread_role::allocate_outside();
    match region.protect(addr - region.as_ptr() as usize, len, prot) {
        Ok(()) => 0,
        Err(e) => {
            let errno = match &e {
                uffd::RawRegionError::Mprotect { source, .. } => source.raw_os_error(),
                _ => None,
            };
            // SAFETY: this thread's errno.
            unsafe { *libc::__errno_location() = errno.unwrap_or(libc::EINVAL) };
            -1
        }
    }
}

/// A fixed mapping over the region, which the kernel must never get: it would replace part
/// of the region's mapping, and with it whatever uzswap holds there. Over part of one heap
/// block, what it asks for is made in place:
/// - anonymous and private: zeroed memory under its protection (a runtime's commit, or its
///   decommit to `PROT_NONE`): a discard, then `protect`;
/// - a private file mapping: the file's bytes copied in (`copy_file_in`).
///
/// Anything else is refused (`EEXIST` for `MAP_FIXED_NOREPLACE`, as the range is mapped;
/// `EINVAL` otherwise).
fn fixed_in_region(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: i64,
) -> *mut c_void {
    if flags & libc::MAP_FIXED_NOREPLACE != 0 {
        return fail(libc::EEXIST);
    }
    let a = addr as usize;
    let sharing = flags & (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_SHARED);
    let anonymous = fd == -1 && sharing == libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
    let private_file = fd >= 0 && sharing == libc::MAP_PRIVATE;
    let len = len.next_multiple_of(PAGE);
    let in_block = a.is_multiple_of(PAGE) && mark_protected(a, len, prot);
    if anonymous && in_block {
        discard(addr, len, libc::MADV_DONTNEED);
        if protect(a, len, prot) != 0 {
            return libc::MAP_FAILED;
        }
        return addr;
    }
    if private_file && in_block {
        return copy_file_in(a, len, prot, fd, off);
    }
    refused_once("a fixed mapping over heap memory other than part of a block");
    fail(libc::EINVAL)
}

/// A private mapping of `len` bytes of file `fd` from `off` at `addr`, part of a heap block:
/// the bytes read in, then the protection asked for. (A JVM maps its class-data archive's
/// objects into its Java heap so.) The copy is the program's own from the start, where the
/// kernel's mapping shares the file's pages until each is written: it differs only in not
/// showing later writes to the file, and in zeros past its end, where the kernel's mapping
/// raises SIGBUS.
fn copy_file_in(addr: usize, len: usize, prot: c_int, fd: c_int, off: i64) -> *mut c_void {
    // SAFETY: fcntl reads the descriptor's flags and touches no memory.
    let mode = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if mode < 0 {
        return fail(libc::EBADF);
    }
    if mode & libc::O_ACCMODE == libc::O_WRONLY {
        return fail(libc::EACCES);
    }
    if off < 0 || !(off as usize).is_multiple_of(PAGE) {
        return fail(libc::EINVAL);
    }
    // SAFETY: an all-zero stat is a valid value for fstat to fill.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes the descriptor's stat into `st`, which is ours.
    if unsafe { libc::fstat(fd, &mut st) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFREG {
        // As the kernel's mmap of a file it cannot map (a pipe, a directory).
        return fail(libc::ENODEV);
    }
    discard(addr as *mut c_void, len, libc::MADV_DONTNEED);
    if protect(addr, len, libc::PROT_READ | libc::PROT_WRITE) != 0 {
        return libc::MAP_FAILED;
    }
    let (mut done, mut faults) = (0, 0);
    while done < len {
        let at = addr + done;
        // SAFETY: `[at, addr + len)` is read-write memory of a heap block the program gave
        // this mapping; pread writes at most that many bytes there.
        let n = unsafe { libc::syscall(libc::SYS_pread64, fd, at, len - done, off + done as i64) };
        match n {
            0 => break,
            n if n > 0 => {
                done += n as usize;
                faults = 0;
            }
            _ => match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => {}
                // The kernel's write met an evicted page it could not wait for (in-thread or
                // user-mode-only faults): a write from here brings it back, then read again
                // (a few times, should reclaim take it again first).
                Some(libc::EFAULT) if faults < 8 => {
                    faults += 1;
                    // SAFETY: as above; one byte of that memory, zero as the mapping's start
                    // is.
                    unsafe { std::ptr::write_volatile(at as *mut u8, 0) }
                }
                _ => return libc::MAP_FAILED,
            },
        }
    }
    if prot != libc::PROT_READ | libc::PROT_WRITE && protect(addr, len, prot) != 0 {
        return libc::MAP_FAILED;
    }
    addr as *mut c_void
}

/// Say once, on stderr, that the program asked for what the heap cannot do.
fn refused_once(what: &str) {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
        let line = format!(
            "uzswap: warning: the program asked for {what}: refused (the heap's memory stays \
             as it is, in the region); this is said once\n"
        );
        // SAFETY: a write of the line's bytes to stderr.
        unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
    }
}

/// # Safety
/// As C's `mprotect`. On the heap it is the region's (`Region::protect`): the kernel keeps
/// the protection, and reclaim, which cannot move pages between mappings of different
/// protections, leaves pages under another protection than read-write in memory.
#[no_mangle]
pub unsafe extern "C" fn mprotect(addr: *mut c_void, len: usize, prot: c_int) -> c_int {
    let a = addr as usize;
    let whole = len.next_multiple_of(PAGE);
    let in_region = in_region(addr) && in_region((a + whole.max(1) - 1) as *const c_void);
    if inside() || is_uzswap_thread() || !in_region || !a.is_multiple_of(PAGE) {
        // SAFETY: the kernel's mprotect, with the caller's arguments.
        return unsafe { libc::syscall(libc::SYS_mprotect, addr, len, prot) as c_int };
    }
    // Memory of a block, or malloc's (which the program makes read-write again before it
    // frees it, as it must without uzswap).
    mark_protected(a, whole, prot);
    protect(a, whole, prot)
}

/// # Safety
/// As glibc's `mmap64` (the same as `mmap` on 64-bit).
#[no_mangle]
pub unsafe extern "C" fn mmap64(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: i64,
) -> *mut c_void {
    // SAFETY: as `mmap`.
    unsafe { mmap(addr, len, prot, flags, fd, off) }
}

/// Free `block`, at `start`: read-write again, if it was not, for mimalloc to reuse.
fn free_block(start: usize, block: &Block) {
    if block.protected {
        protect(start, block.len, libc::PROT_READ | libc::PROT_WRITE);
    }
    let large = crate::heap::in_large_blocks(start);
    if large {
        // Its pages go now (it is discarded again when handed out).
        discard(start as *mut c_void, block.len, libc::MADV_DONTNEED);
    }
    release(start, block.len, large);
}

/// The block that holds `[addr, addr + len)`: its start.
fn block_of(blocks: &BTreeMap<usize, Block>, addr: usize, len: usize) -> Option<usize> {
    let (&start, b) = blocks.range(..=addr).next_back()?;
    (addr + len <= start + b.len).then_some(start)
}

/// # Safety
/// As C's `munmap`.
#[no_mangle]
pub unsafe extern "C" fn munmap(addr: *mut c_void, len: usize) -> c_int {
    if inside() || !in_region(addr) {
        // SAFETY: the kernel's munmap.
        return unsafe { libc::syscall(libc::SYS_munmap, addr, len) as c_int };
    }
    let a = addr as usize;
    let len = len.next_multiple_of(PAGE);
    let mut blocks = BLOCKS.lock();
    let Some(start) = block_of(&blocks, a, len).filter(|_| a.is_multiple_of(PAGE)) else {
        // Never unmap part of the region itself: memory the program did not map.
        drop(blocks);
        // SAFETY: this thread's errno.
        unsafe { *libc::__errno_location() = libc::EINVAL };
        return -1;
    };
    let block = blocks.get_mut(&start).expect("found");
    if a == start && len >= block.len {
        let block = blocks.remove(&start).expect("found");
        drop(blocks);
        free_block(start, &block);
        return 0;
    }
    drop(blocks);
    // The part's memory goes now (the region frees what it held), before the part is marked
    // unmapped: once it is, another thread's munmap of the rest frees the block, and a
    // discard after that could wipe the block's next owner. What is left of the block stays
    // until the rest is unmapped. A part the region holds nothing for (a runtime trimming a
    // reservation it never touched) is left as it is: its discard would only wait for a
    // fault handler. The block is zeroed again when it is handed out anew.
    let held = crate::run::region().is_none_or(|r| {
        let _outside = crate::thread_role::allocate_outside();
        !r.holds_nothing(a - r.as_ptr() as usize, len)
    });
    if held {
        discard(addr, len, libc::MADV_DONTNEED);
    }
    let mut blocks = BLOCKS.lock();
    // Gone meanwhile only if another thread unmapped the whole block at once.
    let gone = blocks
        .get_mut(&start)
        .is_some_and(|b| b.unmap(a - start, len));
    let gone = gone.then(|| blocks.remove(&start).expect("found"));
    drop(blocks);
    if let Some(block) = gone {
        free_block(start, &block);
    }
    0
}

/// # Safety
/// As C's `mremap` (`new_addr` only with `MREMAP_FIXED`, which region blocks refuse).
#[no_mangle]
pub unsafe extern "C" fn mremap(
    old: *mut c_void,
    old_len: usize,
    new_len: usize,
    flags: c_int,
    new_addr: *mut c_void,
) -> *mut c_void {
    if inside() || !in_region(old) {
        // SAFETY: the kernel's mremap.
        return unsafe {
            libc::syscall(
                libc::SYS_mremap,
                old,
                old_len,
                new_len,
                flags as c_long,
                new_addr,
            ) as *mut c_void
        };
    }
    let o = old as usize;
    let new_len = new_len.next_multiple_of(PAGE);
    let Some((capacity, protected)) = BLOCKS.lock().get(&o).map(|b| (b.len, b.protected)) else {
        return fail(libc::EINVAL);
    };
    if new_len <= capacity {
        // Shrunk (or grown within the block): what lies past the new end reads as zero,
        // discarded before the block is resized, as munmap's part is.
        if new_len < old_len {
            discard(
                (o + new_len) as *mut c_void,
                old_len.next_multiple_of(PAGE) - new_len,
                libc::MADV_DONTNEED,
            );
        }
        // The pages past the new end are the program's no more: unmapping the new length
        // frees the block.
        if let Some(block) = BLOCKS.lock().get_mut(&o) {
            block.resize(old_len, new_len);
        }
        return old;
    }
    if flags & libc::MREMAP_MAYMOVE == 0 || flags & libc::MREMAP_FIXED != 0 {
        return fail(libc::ENOMEM);
    }
    let prot = libc::PROT_READ | libc::PROT_WRITE;
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
    // SAFETY: a new heap mapping.
    let new = unsafe { mmap(std::ptr::null_mut(), new_len, prot, flags, -1, 0) };
    if new == libc::MAP_FAILED {
        return new;
    }
    // Read whole (the moved pages are read-write in the new block, protections not kept).
    if protected {
        protect(o, capacity, libc::PROT_READ | libc::PROT_WRITE);
    }
    copy_held(o, new as usize, old_len.min(capacity));
    // SAFETY: the old block, whole.
    unsafe { munmap(old, capacity) };
    new
}

/// Copy `len` bytes from the old block at `from` to the new one at `to` (fresh, reading
/// zero), but for the chunks the region holds nothing for: they read zero already, and a
/// copy would only fault them in, in both blocks (a runtime growing a reservation it has
/// touched a little of).
fn copy_held(from: usize, to: usize, len: usize) {
    const CHUNK: usize = 64 << 10;
    let region = crate::run::region();
    for at in (0..len).step_by(CHUNK) {
        let n = CHUNK.min(len - at);
        let held = region.is_none_or(|r| {
            let _outside = crate::thread_role::allocate_outside();
            !r.holds_nothing(from + at - r.as_ptr() as usize, n)
        });
        if held {
            // SAFETY: both blocks are live heap blocks mremap owns, the old one's first `len`
            // bytes the program's and the new one larger; they do not overlap.
            unsafe {
                std::ptr::copy_nonoverlapping((from + at) as *const u8, (to + at) as *mut u8, n)
            };
        }
    }
}

/// # Safety
/// As C's `madvise`.
#[no_mangle]
pub unsafe extern "C" fn madvise(addr: *mut c_void, len: usize, advice: c_int) -> c_int {
    if !in_region(addr) {
        return raw_madvise(addr, len, advice);
    }
    match advice {
        // The region keeps base pages (a huge page would be split by every move).
        libc::MADV_HUGEPAGE if !inside() => 0,
        // A lazy free (mimalloc's purge, jemalloc's) becomes a free now: the region counts an
        // `MADV_FREE`d page missing, and one the kernel leaves mapped, then written again,
        // would be memory the limit never sees. `MADV_FREE` lets a page read as zero, so
        // `MADV_DONTNEED` keeps its promise.
        libc::MADV_FREE => discard(addr, len, libc::MADV_DONTNEED),
        libc::MADV_DONTNEED | libc::MADV_DONTNEED_LOCKED => discard(addr, len, advice),
        _ => raw_madvise(addr, len, advice),
    }
}
