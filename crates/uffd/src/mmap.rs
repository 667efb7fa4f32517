//! The one place that maps and unmaps anonymous memory: `AnonMapping` (the pool's pages) and
//! `RawRegion` (managed and staging memory) are both fresh private anonymous mappings.

use std::io;
use std::ptr::NonNull;

/// Map `len` bytes (non-zero) of private anonymous read-write memory with `MAP_NORESERVE` at
/// an address the kernel picks. Pages read as zero until written.
pub(crate) fn map_anonymous(len: usize) -> io::Result<NonNull<u8>> {
    if len == 0 {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: a fresh anonymous private mapping with a null hint and no MAP_FIXED cannot
    // overlap or replace any memory Rust already owns: the kernel picks an unused range. The
    // arguments are valid (len > 0, fd -1 with MAP_ANONYMOUS, offset 0); failure is reported
    // as MAP_FAILED and checked below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // Never null for a successful non-MAP_FIXED request (mmap_min_addr keeps page 0 unmapped),
    // but check rather than assume.
    NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))
}

/// Unmap a mapping made by `map_anonymous`.
///
/// # Safety
/// `ptr` and `len` are exactly what `map_anonymous` returned and gave out, the mapping has not
/// been unmapped before, and no reference into it is alive (raw pointers into it dangle from
/// here on).
pub(crate) unsafe fn unmap(ptr: NonNull<u8>, len: usize) {
    // SAFETY: the caller upholds the contract above. munmap failing would mean the range is
    // not ours, which the contract rules out; the result is ignored because callers are Drop
    // impls that cannot report it.
    unsafe {
        libc::munmap(ptr.as_ptr().cast::<libc::c_void>(), len);
    }
}
