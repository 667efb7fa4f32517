//! The region heap: one mimalloc heap whose only arena is the region, shared by every thread
//! of the program (mimalloc's heaps allocate and free from any thread), and which threads
//! may use it.
//!
//! Two per-thread facts decide where a call goes:
//! - who the thread is (thread_role.rs): uzswap's own threads, and program threads serving
//!   a fault or creating a thread, never allocate from the region heap;
//! - `enter`: inside mimalloc, its own anonymous mappings (its page map, its threads'
//!   state) pass straight to the kernel instead of coming back here.

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering::Acquire, Ordering::Release};

use libmimalloc_sys as mi;

/// The region heap, null until the region is made (init.rs).
static HEAP: AtomicPtr<mi::mi_heap_t> = AtomicPtr::new(std::ptr::null_mut());
/// The region, `[START, END)`.
static START: AtomicUsize = AtomicUsize::new(0);
static END: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Calls into mimalloc this thread is inside.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Held while a thread is inside mimalloc (`enter`).
pub struct Inside(());

impl Drop for Inside {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get() - 1));
    }
}

/// Mark this thread as inside mimalloc until the guard drops.
pub fn enter() -> Inside {
    DEPTH.with(|d| d.set(d.get() + 1));
    Inside(())
}

/// Whether this thread is inside mimalloc.
pub fn inside() -> bool {
    DEPTH.with(Cell::get) > 0
}

/// The region heap, for a program thread once the region exists and while it is not serving
/// a fault; None otherwise (the call goes to glibc's malloc, outside the region).
pub fn region_heap() -> Option<*mut mi::mi_heap_t> {
    let heap = HEAP.load(Acquire);
    (!heap.is_null() && crate::thread_role::allocates_in_region()).then_some(heap)
}

/// Whether `p` lies in the region.
pub fn in_region(p: *const c_void) -> bool {
    (START.load(Acquire)..END.load(Acquire)).contains(&(p as usize))
}

/// Whether `p` lies in the region's part for large blocks, past mimalloc's arena.
pub fn in_large_blocks(p: usize) -> bool {
    let (start, end) = (START.load(Acquire), END.load(Acquire));
    (start + arena_len(end - start)..end).contains(&p)
}

/// Whether `[p, p + len)` has a byte in the region.
pub fn overlaps_region(p: *const c_void, len: usize) -> bool {
    let (start, end) = (START.load(Acquire), END.load(Acquire));
    let p = p as usize;
    p < end && p.saturating_add(len) > start
}

/// The region heap, which exists once a pointer in the region does.
pub fn shared_heap() -> *mut mi::mi_heap_t {
    HEAP.load(Acquire)
}

/// Bytes mimalloc keeps at the start of an arena of `len` bytes for its own bookkeeping (the
/// arena's header and bitmaps, `mi_arena_info_slices_needed` in mimalloc's arena.c: about 96
/// bitmaps of a bit per 64 KiB slice), rounded up generously to whole slices.
pub fn arena_info_bytes(len: usize) -> usize {
    const SLICE: usize = 64 << 10;
    let slices = len.div_ceil(SLICE);
    (96 * slices.div_ceil(8) + (128 << 10)).next_multiple_of(SLICE)
}

/// The part of a region of `len` bytes that is mimalloc's arena: all of it under 4 GiB, else
/// the lower half in whole GiB; the rest is for blocks mimalloc cannot make (large_blocks.rs).
pub fn arena_len(len: usize) -> usize {
    const G: usize = 1 << 30;
    match len < 4 * G {
        true => len,
        false => len / 2 / G * G,
    }
}

/// Make the region heap: an arena of mimalloc's on the region's memory (`len` bytes at
/// `region`, untouched; the arena its first `arena_len(len)`, of which the first
/// `arena_info_bytes` are pinned), and turn the heap on.
///
/// mimalloc keeps the arena's bookkeeping at its start, and every thread that allocates
/// reads it (to see whether the arena is one it may use); the region's own threads do too,
/// and they must never fault on region memory: hence the pinned start.
pub fn start(region: *mut u8, len: usize) -> Result<(), String> {
    let _inside = enter();
    let mut arena: mi::mi_arena_id_t = std::ptr::null_mut();
    let arena_len = arena_len(len);
    // SAFETY: the region is a private mapping of `len` bytes that nothing else uses and that
    // stays mapped for the life of the process (it is never dropped); it reads as zeros. The
    // arena is its first `arena_len` bytes. Committed: its pages come in on first touch,
    // through the region.
    let managed = unsafe {
        mi::mi_manage_os_memory_ex(
            region.cast(),
            arena_len,
            true,
            false,
            true,
            -1,
            true,
            &mut arena,
        )
    };
    if !managed {
        return Err("mimalloc refused the region as an arena".into());
    }
    // SAFETY: `arena` was just made.
    let heap = unsafe { mi::mi_heap_new_in_arena(arena) };
    if heap.is_null() {
        return Err("mimalloc could not make a heap in the region".into());
    }
    crate::large_blocks::init(region as usize + arena_len, len - arena_len);
    START.store(region as usize, Release);
    END.store(region as usize + len, Release);
    HEAP.store(heap, Release);
    Ok(())
}

/// Say, once, that what the heap has no room for is allocated outside it (malloc.rs,
/// mmap.rs).
pub fn say_allocations_outside() {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    let len = END.load(Acquire) - START.load(Acquire);
    // Made on the stack and written straight to the descriptor: this runs inside an
    // allocation, which must not allocate again.
    let mut line = [0u8; 320];
    use std::io::Write;
    let mut cursor = std::io::Cursor::new(&mut line[..]);
    let _ = writeln!(
        cursor,
        "uzswap: the heap's address space (--max-heap, {} MiB) is used up or too small \
         for a request: what it has no room for is allocated outside the limit (a larger \
         --max-heap, at most 15G, keeps more of it held)",
        len >> 20
    );
    let end = cursor.position() as usize;
    // std's stderr is unbuffered and takes no allocation.
    let _ = std::io::stderr().write_all(&line[..end]);
}
