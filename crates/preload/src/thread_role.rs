//! Who the calling thread is, decided in one place, and the one question the allocator asks
//! of it (`allocates_in_region`):
//! - **uzswap's own** threads (the region's, the engine's, the statistics server): never
//!   allocate from the region heap and their mappings are never redirected, since a thread
//!   that serves faults must not fault on the memory it serves. They are the threads alive
//!   right after the region is made (the loading thread aside: `set_uzswap_threads`) and
//!   those the region starts later (`mark_uzswap_thread`, its `thread_start`).
//! - a program thread **serving its own fault** (in-thread faults: uffd's `sigbus::serving`)
//!   allocates outside the memory it serves;
//! - a program thread **inside uzswap's code** (`allocate_outside`: the fork handlers, a
//!   `munmap` asking the region, the exit handler), whose allocations (a thread-local's
//!   destructor registered by glibc on first use, under the region's locks) must never fault
//!   on the memory the region's handlers serve while it holds what they wait for; and one
//!   **creating a thread** with in-thread faults on (around `pthread_create`): glibc's
//!   allocations there are the new thread's TLS vector, which every thread-local access
//!   reads, the SIGBUS handler's included, so it must not be evicted;
//! - every other thread is the **program's**, and allocates in the region.

use std::cell::Cell;
use std::sync::OnceLock;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Not decided yet: the region's threads are not recorded yet.
    Unknown,
    Program,
    Uzswap,
}

thread_local! {
    static ROLE: Cell<Role> = const { Cell::new(Role::Unknown) };
    /// `allocate_outside` guards this thread holds.
    static OUTSIDE: Cell<u32> = const { Cell::new(0) };
}

/// uzswap's own threads alive when the region was made, by thread id.
static UZSWAP_THREADS: OnceLock<Vec<i32>> = OnceLock::new();

/// Record the region's threads: every thread of the process but `main_thread`, called
/// right after the region is made, before the program's `main` (nothing else runs yet).
pub fn set_uzswap_threads(main_thread: i32) {
    let tids = std::fs::read_dir("/proc/self/task")
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .filter(|&tid| tid != main_thread)
                .collect()
        })
        .unwrap_or_default();
    let _ = UZSWAP_THREADS.set(tids);
}

/// Mark this thread as one of uzswap's own: the region runs it first on every thread it
/// starts (`RegionConfig::thread_start`), those it starts after `set_uzswap_threads` too.
pub fn mark_uzswap_thread() {
    ROLE.with(|role| role.set(Role::Uzswap));
}

/// Whether this thread is one of uzswap's own.
pub fn is_uzswap_thread() -> bool {
    ROLE.with(|role| {
        if role.get() != Role::Unknown {
            return role.get() == Role::Uzswap;
        }
        // Until the region's threads are recorded, none of them runs outside the region's
        // own start-up: stay undecided until then.
        let Some(threads) = UZSWAP_THREADS.get() else {
            return false;
        };
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        let ours = threads.contains(&tid);
        role.set(if ours { Role::Uzswap } else { Role::Program });
        ours
    })
}

/// While held, this thread's allocations go to glibc's malloc, outside the region.
pub struct AllocatingOutside(());

impl Drop for AllocatingOutside {
    fn drop(&mut self) {
        OUTSIDE.with(|n| n.set(n.get() - 1));
    }
}

/// Send this thread's allocations outside the region until the guard drops: taken around
/// every call of a program thread into the region, and around `pthread_create` with
/// in-thread faults on.
pub fn allocate_outside() -> AllocatingOutside {
    OUTSIDE.with(|n| n.set(n.get() + 1));
    AllocatingOutside(())
}

/// Whether this thread's allocations go to the region heap (once it exists): a program
/// thread, neither serving its own fault nor inside uzswap's code.
pub fn allocates_in_region() -> bool {
    !is_uzswap_thread() && !uffd::sigbus::serving() && OUTSIDE.with(Cell::get) == 0
}
