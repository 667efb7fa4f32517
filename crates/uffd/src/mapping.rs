//! Anonymous private mappings (mmap) whose pages can be handed back to the OS (madvise).
//!
//! This file owns the `AnonMapping` type: one `mmap(MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE)`
//! region, exposed to safe code as a byte slice, unmapped on drop. The zsmalloc page arena builds
//! its pool on these; `discard` is how freed pool pages stop counting in the process's RSS.

use std::io;
use std::ptr::NonNull;

use crate::PAGE_SIZE;

/// Why a mapping could not be made or its pages not be given back.
#[derive(Debug, thiserror::Error)]
pub enum MappingError {
    /// `mmap` failed, or the length was not a non-zero multiple of the page size (`EINVAL`).
    #[error("mmap of {len} bytes failed: {source}")]
    Mmap {
        /// The length asked for, in bytes.
        len: usize,
        /// The OS error.
        source: std::io::Error,
    },
    /// `madvise(MADV_DONTNEED)` failed, or the range was not page aligned inside the mapping.
    #[error("madvise failed: {0}")]
    Madvise(std::io::Error),
}

/// An anonymous, private, read-write mapping of a whole number of pages, unmapped on drop.
///
/// Ownership model: the mapping is owned exclusively by this value, like a `Box<[u8]>` whose
/// memory comes from `mmap`. Shared access (`as_slice`) needs `&self`, mutation (`as_mut_slice`,
/// `discard`) needs `&mut self`, so the borrow checker rules out a live slice while the kernel
/// zeroes pages under it.
#[derive(Debug)]
pub struct AnonMapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value alone (no aliasing pointers escape
// except through borrows tied to `&self`/`&mut self`), so moving it to another thread is as
// sound as moving a `Box<[u8]>`.
unsafe impl Send for AnonMapping {}
// SAFETY: `&AnonMapping` only gives out `&[u8]`; all mutation needs `&mut AnonMapping`. Shared
// read-only access from several threads is therefore data-race free, as for `&[u8]`.
unsafe impl Sync for AnonMapping {}

impl AnonMapping {
    /// Map `len` bytes (a multiple of [`PAGE_SIZE`]; MAP_NORESERVE). Pages read as zero until
    /// written.
    pub fn new(len: usize) -> Result<Self, MappingError> {
        if len == 0 || !len.is_multiple_of(PAGE_SIZE) {
            return Err(MappingError::Mmap {
                len,
                source: io::Error::from_raw_os_error(libc::EINVAL),
            });
        }
        let ptr =
            crate::mmap::map_anonymous(len).map_err(|source| MappingError::Mmap { len, source })?;
        Ok(AnonMapping { ptr, len })
    }

    /// The length in bytes: a non-zero multiple of the page size.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a mapping is never empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The mapping's bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: 1. `ptr..ptr+len` is one live, readable mapping owned by `self` until drop.
        // 2. Anonymous memory is always initialized (zero-filled on first touch), so every byte
        // is a valid `u8`. 3. The slice borrows `self`, so it cannot outlive the mapping, and no
        // `&mut` to the same bytes can exist while it lives (`as_mut_slice`/`discard` take
        // `&mut self`). 4. len <= isize::MAX since the kernel mapped it.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The mapping's bytes, to write.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and the mapping is PROT_WRITE; `&mut self` guarantees this
        // is the only live borrow of the bytes.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// Give the pages of `offset..offset+len` (page aligned) back to the OS (MADV_DONTNEED):
    /// they read as zero afterwards and no longer count in the process's RSS.
    pub fn discard(&mut self, offset: usize, len: usize) -> Result<(), MappingError> {
        let in_range = offset.checked_add(len).is_some_and(|end| end <= self.len);
        if !offset.is_multiple_of(PAGE_SIZE) || !len.is_multiple_of(PAGE_SIZE) || !in_range {
            return Err(MappingError::Madvise(io::Error::from_raw_os_error(
                libc::EINVAL,
            )));
        }
        if len == 0 {
            return Ok(());
        }
        // SAFETY: 1. The range was checked above to lie inside our own mapping and to be page
        // aligned, so madvise touches no memory outside what `self` owns. 2. `&mut self` means
        // no slice into the mapping is alive, so no Rust reference observes the bytes changing
        // to zero. 3. MADV_DONTNEED on a private anonymous mapping keeps the range mapped; later
        // accesses fault in zero pages, which are valid `u8`s.
        let rc = unsafe {
            libc::madvise(
                self.ptr.as_ptr().add(offset).cast::<libc::c_void>(),
                len,
                libc::MADV_DONTNEED,
            )
        };
        if rc != 0 {
            return Err(MappingError::Madvise(io::Error::last_os_error()));
        }
        Ok(())
    }
}

impl Drop for AnonMapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are what map_anonymous returned and only Drop unmaps; Drop has
        // `&mut self`, so no borrow of the bytes is alive.
        unsafe { crate::mmap::unmap(self.ptr, self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Resident pages of `m`, from mincore(2): a test-only view of what `discard` gives back.
    fn resident_pages(m: &AnonMapping) -> usize {
        let pages = m.len() / PAGE_SIZE;
        let mut vec = vec![0u8; pages];
        // SAFETY: the range is our own live mapping (page aligned, `len` bytes) and `vec` has
        // one byte per page as mincore requires; mincore only writes into `vec`.
        let rc = unsafe {
            libc::mincore(
                m.as_slice().as_ptr() as *mut libc::c_void,
                m.len(),
                vec.as_mut_ptr().cast(),
            )
        };
        assert_eq!(rc, 0);
        vec.iter().filter(|&&b| b & 1 != 0).count()
    }

    #[test]
    fn new_mapping_reads_zero() {
        let m = AnonMapping::new(4 * PAGE_SIZE).unwrap();
        assert_eq!(m.len(), 4 * PAGE_SIZE);
        assert!(!m.is_empty());
        assert!(m.as_slice().iter().all(|&b| b == 0));
    }

    #[test]
    fn bad_lengths_are_rejected() {
        assert!(AnonMapping::new(0).is_err());
        assert!(AnonMapping::new(100).is_err());
    }

    #[test]
    fn write_then_read_back() {
        let mut m = AnonMapping::new(2 * PAGE_SIZE).unwrap();
        for (i, b) in m.as_mut_slice().iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        assert!(m
            .as_slice()
            .iter()
            .enumerate()
            .all(|(i, &b)| b == (i % 251) as u8));
    }

    #[test]
    fn discard_reads_zero_and_keeps_the_rest() {
        let mut m = AnonMapping::new(4 * PAGE_SIZE).unwrap();
        m.as_mut_slice().fill(0xAB);
        m.discard(PAGE_SIZE, 2 * PAGE_SIZE).unwrap();
        let s = m.as_slice();
        assert!(s[..PAGE_SIZE].iter().all(|&b| b == 0xAB));
        assert!(s[PAGE_SIZE..3 * PAGE_SIZE].iter().all(|&b| b == 0));
        assert!(s[3 * PAGE_SIZE..].iter().all(|&b| b == 0xAB));
    }

    #[test]
    fn discard_drops_resident_pages() {
        let mut m = AnonMapping::new(8 * PAGE_SIZE).unwrap();
        m.as_mut_slice().fill(1);
        assert_eq!(resident_pages(&m), 8);
        m.discard(0, 8 * PAGE_SIZE).unwrap();
        assert_eq!(resident_pages(&m), 0);
    }

    #[test]
    fn discard_out_of_range_or_unaligned_fails() {
        let mut m = AnonMapping::new(2 * PAGE_SIZE).unwrap();
        assert!(m.discard(PAGE_SIZE, 2 * PAGE_SIZE).is_err());
        assert!(m.discard(1, PAGE_SIZE).is_err());
        assert!(m.discard(0, 100).is_err());
        assert!(m.discard(usize::MAX - 4095, PAGE_SIZE).is_err());
    }
}
