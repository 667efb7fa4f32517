//! The malloc family, on the region heap (heap.rs) for the program's threads once it exists;
//! on glibc's own malloc before (the loader's and libc's start-up allocations) and for the
//! region's own threads. A pointer outside the region is glibc's (including a library's
//! bound to libc's malloc with `RTLD_DEEPBIND`) and goes back to glibc.
//!
//! Where the heap's address space (`--max-heap`) has no room for a request, it goes to
//! glibc's malloc too: memory outside the limit, said once (`heap::say_heap_exhausted`),
//! rather than an allocation that would fail where it succeeds without uzswap.
//!
//! `free` keeps `errno`, as glibc's does. Not compiled into this crate's unit tests, whose
//! process would otherwise allocate through them.
#![cfg(not(test))]

use std::ffi::{c_int, c_void};

use libmimalloc_sys as mi;

use crate::heap::{enter, in_region, region_heap, shared_heap};
use crate::over_aligned::{self, MIMALLOC_ALIGN_MAX};

extern "C" {
    fn __libc_malloc(size: usize) -> *mut c_void;
    fn __libc_calloc(count: usize, size: usize) -> *mut c_void;
    fn __libc_memalign(align: usize, size: usize) -> *mut c_void;
    fn __libc_free(p: *mut c_void);
    fn __libc_realloc(p: *mut c_void, size: usize) -> *mut c_void;
}

const PAGE: usize = 4096;

fn set_errno(e: c_int) {
    // SAFETY: `__errno_location` returns this thread's errno, always valid.
    unsafe { *libc::__errno_location() = e };
}

fn errno() -> c_int {
    // SAFETY: as `set_errno`.
    unsafe { *libc::__errno_location() }
}

/// `size` bytes at `align` (a power of two), from the region heap if there is one.
fn alloc_aligned(size: usize, align: usize) -> *mut c_void {
    let _inside = enter();
    // SAFETY: mimalloc takes any size and power-of-two alignment; the heap is the live region
    // heap.
    unsafe {
        let p = match region_heap() {
            Some(h) if align > MIMALLOC_ALIGN_MAX => over_aligned::alloc(h, size, align),
            Some(h) => mi::mi_heap_malloc_aligned(h, size, align),
            None => return __libc_memalign(align, size),
        };
        or_outside(p, || __libc_memalign(align, size))
    }
}

/// # Safety
/// As C's `malloc`.
#[no_mangle]
pub unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
    let _inside = enter();
    // SAFETY: any size.
    unsafe {
        match region_heap() {
            Some(h) => or_outside(mi::mi_heap_malloc(h, size), || __libc_malloc(size)),
            None => __libc_malloc(size),
        }
    }
}

/// # Safety
/// As C's `calloc`.
#[no_mangle]
pub unsafe extern "C" fn calloc(count: usize, size: usize) -> *mut c_void {
    let _inside = enter();
    // SAFETY: mimalloc checks `count * size` for overflow.
    unsafe {
        match region_heap() {
            Some(h) => or_outside(mi::mi_heap_calloc(h, count, size), || {
                __libc_calloc(count, size)
            }),
            None => __libc_calloc(count, size),
        }
    }
}

/// # Safety
/// As C's `free`: `p` is null or a live allocation of this family.
#[no_mangle]
pub unsafe extern "C" fn free(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    let saved = errno();
    if in_region(p) {
        let _inside = enter();
        let block = over_aligned::block_of(p, true).map_or(p, |(block, _)| block);
        // SAFETY: the region heap handed `block` out, and it is live (the caller's part).
        unsafe { mi::mi_free(block) };
    } else {
        program_frees_libc_block(p);
        // SAFETY: not ours: libc's own malloc handed it out.
        unsafe { __libc_free(p) };
    }
    set_errno(saved);
}

/// # Safety
/// As C's `realloc`.
#[no_mangle]
pub unsafe extern "C" fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    if p.is_null() {
        // SAFETY: as `malloc`.
        return unsafe { malloc(size) };
    }
    if !in_region(p) {
        program_frees_libc_block(p);
        // SAFETY: libc's own allocation, resized by libc.
        let q = unsafe { __libc_realloc(p, size) };
        if !q.is_null() && region_heap().is_some() {
            // SAFETY: glibc's live block.
            let n = unsafe { malloc_usable_size(q) } as u64;
            PROGRAM_IN_LIBC.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        }
        return q;
    }
    if size == 0 {
        // glibc frees and returns null.
        // SAFETY: `p` is live and ours.
        unsafe { free(p) };
        return std::ptr::null_mut();
    }
    if let Some((block, offset)) = over_aligned::block_of(p, false) {
        // A carved block moves to a plain one: realloc promises no more than malloc's
        // alignment.
        let _inside = enter();
        // SAFETY: `block` is the region heap's and live.
        let old = unsafe { mi::mi_usable_size(block) } - offset;
        // SAFETY: as `malloc`.
        let new = unsafe { malloc(size) };
        if !new.is_null() {
            // SAFETY: both live, distinct blocks at least this long.
            unsafe { std::ptr::copy_nonoverlapping(p.cast::<u8>(), new.cast(), old.min(size)) };
            // SAFETY: `p` is live and ours.
            unsafe { free(p) };
        }
        return new;
    }
    let new = {
        let _inside = enter();
        // SAFETY: `p` is the region heap's and live; it is resized there (left as it is on
        // failure).
        unsafe { mi::mi_heap_realloc(shared_heap(), p, size) }
    };
    if !new.is_null() {
        return new;
    }
    // No room in the heap: the block moves out of it (module doc).
    // SAFETY: glibc's malloc, any size.
    let outside = or_outside(new, || unsafe { __libc_malloc(size) });
    if !outside.is_null() {
        // SAFETY: `p` is live and ours, `outside` a distinct live block of `size` bytes.
        unsafe {
            let old = malloc_usable_size(p);
            std::ptr::copy_nonoverlapping(p.cast::<u8>(), outside.cast(), old.min(size));
            free(p);
        }
    }
    outside
}

/// `p` from the region heap; where it is null (no room in the heap's address space), what
/// `libc` allocates instead, outside the limit, said once.
fn or_outside(p: *mut c_void, libc: impl FnOnce() -> *mut c_void) -> *mut c_void {
    if !p.is_null() {
        return p;
    }
    let q = libc();
    if !q.is_null() {
        crate::heap::say_allocations_outside();
        // SAFETY: glibc's live block.
        let n = unsafe { malloc_usable_size(q) } as u64;
        PROGRAM_IN_LIBC.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }
    q
}

/// Bytes of the program's in glibc's malloc (what the heap had no room for), as near as can
/// be told: a program thread's free of a glibc block takes its size off (the blocks it made
/// before the region existed too, hence the floor at 0). The `--stats` split counts them
/// with the program's anonymous memory, not uzswap's own (not_held.rs).
pub static PROGRAM_IN_LIBC: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A program thread gives a glibc block of `p` back: off `PROGRAM_IN_LIBC`.
fn program_frees_libc_block(p: *mut c_void) {
    if region_heap().is_none() || PROGRAM_IN_LIBC.load(std::sync::atomic::Ordering::Relaxed) == 0 {
        return;
    }
    // SAFETY: glibc's live block.
    let n = unsafe { malloc_usable_size(p) } as u64;
    let _ = PROGRAM_IN_LIBC.fetch_update(
        std::sync::atomic::Ordering::Relaxed,
        std::sync::atomic::Ordering::Relaxed,
        |v| Some(v.saturating_sub(n)),
    );
}

/// # Safety
/// As glibc's `reallocarray`.
#[no_mangle]
pub unsafe extern "C" fn reallocarray(p: *mut c_void, count: usize, size: usize) -> *mut c_void {
    match count.checked_mul(size) {
        // SAFETY: as `realloc`.
        Some(bytes) => unsafe { realloc(p, bytes) },
        None => {
            set_errno(libc::ENOMEM);
            std::ptr::null_mut()
        }
    }
}

/// # Safety
/// As C's `posix_memalign`: `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
    if !align.is_power_of_two() || !align.is_multiple_of(std::mem::size_of::<*mut c_void>()) {
        return libc::EINVAL;
    }
    let p = alloc_aligned(size, align);
    if p.is_null() {
        return libc::ENOMEM;
    }
    // SAFETY: the caller's part.
    unsafe { *out = p };
    0
}

/// # Safety
/// As C's `aligned_alloc`.
#[no_mangle]
pub unsafe extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    if !align.is_power_of_two() {
        set_errno(libc::EINVAL);
        return std::ptr::null_mut();
    }
    alloc_aligned(size, align)
}

/// # Safety
/// As glibc's `memalign`.
#[no_mangle]
pub unsafe extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    // glibc rounds an alignment that is not a power of two up to one.
    alloc_aligned(size, align.max(1).next_power_of_two())
}

/// # Safety
/// As glibc's `valloc`.
#[no_mangle]
pub unsafe extern "C" fn valloc(size: usize) -> *mut c_void {
    alloc_aligned(size, PAGE)
}

/// # Safety
/// As glibc's `pvalloc`.
#[no_mangle]
pub unsafe extern "C" fn pvalloc(size: usize) -> *mut c_void {
    match size.checked_next_multiple_of(PAGE) {
        Some(rounded) => alloc_aligned(rounded.max(PAGE), PAGE),
        None => {
            set_errno(libc::ENOMEM);
            std::ptr::null_mut()
        }
    }
}

/// # Safety
/// As glibc's `malloc_usable_size`: `p` is null or a live allocation.
#[no_mangle]
pub unsafe extern "C" fn malloc_usable_size(p: *mut c_void) -> usize {
    if p.is_null() {
        return 0;
    }
    if in_region(p) {
        let _inside = enter();
        let (block, offset) = over_aligned::block_of(p, false).unwrap_or((p, 0));
        // SAFETY: the region heap's live block.
        return unsafe { mi::mi_usable_size(block) } - offset;
    }
    // libc's own block: what libc says.
    let f = match LIBC_MALLOC_USABLE_SIZE.load(std::sync::atomic::Ordering::Relaxed) {
        0 => resolve_libc(),
        f => f,
    };
    if f == 0 {
        return 0;
    }
    // SAFETY: `f` is libc's `malloc_usable_size`, which has this signature.
    let f: unsafe extern "C" fn(*mut c_void) -> usize = unsafe { std::mem::transmute(f) };
    // SAFETY: `p` is libc's live block.
    unsafe { f(p) }
}

/// libc's `malloc_usable_size`, looked up as the library starts (`resolve_libc`).
static LIBC_MALLOC_USABLE_SIZE: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

/// Look libc's `malloc_usable_size` up (in_thread_wrappers.rs's `resolve_all` says why at
/// start; dlsym may allocate, through us).
pub fn resolve_libc() -> usize {
    // SAFETY: a NUL-terminated symbol name; RTLD_NEXT finds libc's definition after ours.
    let f = unsafe { libc::dlsym(libc::RTLD_NEXT, c"malloc_usable_size".as_ptr()) as usize };
    LIBC_MALLOC_USABLE_SIZE.store(f, std::sync::atomic::Ordering::Relaxed);
    f
}
