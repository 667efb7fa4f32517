//! Blocks aligned past what mimalloc aligns in an arena (64 KiB, `MI_PAGE_MAX_OVERALLOC_ALIGN`:
//! beyond it mimalloc asks the OS, which the region heap's exclusive arena forbids). Such a
//! block is carved out of a larger one (`size + align` bytes) at its first aligned address,
//! and the table here maps it back to the block mimalloc handed out, for `free`, `realloc`
//! and `malloc_usable_size`.
#![cfg(not(test))]

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use crate::fork_table::ForkTable;

use libmimalloc_sys as mi;

/// The largest alignment mimalloc gives from the region heap itself.
pub const MIMALLOC_ALIGN_MAX: usize = 64 << 10;

/// Carved blocks: aligned address -> the block mimalloc handed out.
pub(crate) static CARVED: ForkTable<BTreeMap<usize, usize>> = ForkTable::new(BTreeMap::new());
/// How many there are: `free` looks in the table only when some are.
static NR_CARVED: AtomicUsize = AtomicUsize::new(0);

/// `size` bytes at `align` (a power of two above `MIMALLOC_ALIGN_MAX`) from `heap`.
pub fn alloc(heap: *mut mi::mi_heap_t, size: usize, align: usize) -> *mut c_void {
    let Some(whole) = size.checked_add(align) else {
        return std::ptr::null_mut();
    };
    // SAFETY: the live region heap; any size.
    let block = unsafe { mi::mi_heap_malloc(heap, whole) };
    if block.is_null() {
        return block;
    }
    let aligned = (block as usize).next_multiple_of(align);
    if aligned != block as usize {
        CARVED.lock().insert(aligned, block as usize);
        NR_CARVED.fetch_add(1, Relaxed);
    }
    aligned as *mut c_void
}

/// The block mimalloc handed out that `p` was carved from and how far into it `p` lies, if
/// `p` is a carved block; with `remove`, it is no longer one.
pub fn block_of(p: *mut c_void, remove: bool) -> Option<(*mut c_void, usize)> {
    // Carved blocks are aligned past 64 KiB; the rest are looked up only while any exist.
    if !(p as usize).is_multiple_of(MIMALLOC_ALIGN_MAX * 2) || NR_CARVED.load(Relaxed) == 0 {
        return None;
    }
    let mut carved = CARVED.lock();
    let block = match remove {
        true => carved.remove(&(p as usize))?,
        false => *carved.get(&(p as usize))?,
    };
    if remove {
        NR_CARVED.fetch_sub(1, Relaxed);
    }
    Some((block as *mut c_void, p as usize - block))
}
