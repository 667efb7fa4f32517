//! The preload library of `uzswap run`: loaded into an unmodified program with `LD_PRELOAD`,
//! it puts the program's heap in one uzswap region held under a memory limit.
//!
//! - The whole malloc family (malloc.rs) allocates from one mimalloc heap whose only arena
//!   is the region (heap.rs): mimalloc does the allocating, uzswap the memory under it.
//! - Anonymous private mappings a runtime makes for its own heap (CPython's object arenas,
//!   the jemalloc built into Redis) come from the same heap, and their munmap, mremap and
//!   madvise are applied there (mmap.rs).
//! - uzswap's own memory stays outside the region: its Rust allocations go to glibc's malloc
//!   (below), its threads' calls pass straight to the kernel (thread_role.rs), so a thread
//!   that serves faults never faults on the memory it serves, nor waits on an event of it.
//!
//! - uzswap's descriptors sit at the top of the program's table, where its `close`,
//!   `close_range`, `closefrom`, `dup2` and `dup3` do not reach (descriptors.rs).
//!
//! - While the program runs, one thread of uzswap's own answers `uzswap stat PID` on a Unix
//!   socket (server.rs) with the statistics (stats.rs), which `uzswap run --stats` also
//!   gets at exit.
//!
//! The constructor (init.rs) reads the configuration `uzswap run` put in the environment,
//! makes the region, and only then turns the region heap on: everything allocated before
//! (the loader's and libc's start-up, the region's own threads) is glibc's, outside it.

// The exported symbols are left out of the unit tests (their process would allocate through
// them), and with them every use of the heap.
#![cfg_attr(test, allow(dead_code))]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod config;
mod descriptors;
mod fork_table;
mod heap;
mod in_thread_wrappers;
mod init;
mod large_blocks;
mod malloc;
mod mmap;
mod not_held;
mod over_aligned;
mod run;
mod server;
mod stats;
mod thread_role;
mod tree;

use std::alloc::{GlobalAlloc, Layout};

/// One `uzswap: ...` line on the program's stderr, written whole.
pub(crate) fn say(line: &str) {
    use std::io::Write;
    let _ = std::io::stderr().write_all(format!("uzswap: {line}\n").as_bytes());
}
use std::ffi::c_void;

/// uzswap's own Rust allocations: glibc's malloc, which the program no longer uses. Not
/// mimalloc: its arenas are the process's, and any thread that allocates there may purge
/// any arena, the region's included, with a madvise that waits for the region's own
/// threads to read its event (heap.rs).
struct Outside;

extern "C" {
    fn __libc_malloc(size: usize) -> *mut c_void;
    fn __libc_calloc(count: usize, size: usize) -> *mut c_void;
    fn __libc_memalign(align: usize, size: usize) -> *mut c_void;
    fn __libc_realloc(p: *mut c_void, size: usize) -> *mut c_void;
    fn __libc_free(p: *mut c_void);
}

/// glibc's malloc aligns to 16 bytes; larger alignments go through `__libc_memalign`.
const LIBC_ALIGN: usize = 16;

// SAFETY: each method forwards to glibc's allocator, which returns memory of at least
// `layout.size()` bytes (at `layout.align()`: memalign for the larger alignments) or null,
// and frees or resizes only what it handed out.
unsafe impl GlobalAlloc for Outside {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: any size; a power-of-two alignment.
        unsafe {
            match layout.align() <= LIBC_ALIGN {
                true => __libc_malloc(layout.size()).cast(),
                false => __libc_memalign(layout.align(), layout.size()).cast(),
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.align() > LIBC_ALIGN {
            // SAFETY: as `alloc`; the block is then zeroed whole.
            unsafe {
                let p = self.alloc(layout);
                if !p.is_null() {
                    p.write_bytes(0, layout.size());
                }
                return p;
            }
        }
        // SAFETY: any size.
        unsafe { __libc_calloc(1, layout.size()).cast() }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator (the GlobalAlloc contract): glibc's.
        unsafe { __libc_free(ptr.cast()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() > LIBC_ALIGN {
            // SAFETY: a new block at the alignment, the old one's bytes copied, the old freed.
            unsafe {
                let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
                let new = self.alloc(new_layout);
                if !new.is_null() {
                    std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                    self.dealloc(ptr, layout);
                }
                return new;
            }
        }
        // SAFETY: `ptr` is glibc's, live.
        unsafe { __libc_realloc(ptr.cast(), new_size).cast() }
    }
}

#[global_allocator]
static OUTSIDE: Outside = Outside;
