//! Anonymous private mappings (mmap) whose pages can be handed back to the OS (madvise).
//! (Interface.)

#[derive(Debug, thiserror::Error)]
pub enum MappingError {
    #[error("mmap of {len} bytes failed: {source}")]
    Mmap { len: usize, source: std::io::Error },
    #[error("madvise failed: {0}")]
    Madvise(std::io::Error),
}

/// An anonymous, private, read-write mapping of a whole number of pages, unmapped on drop.
#[derive(Debug)]
pub struct AnonMapping {}

impl AnonMapping {
    /// Map `len` bytes (a multiple of 4096; MAP_NORESERVE). Pages read as zero until written.
    pub fn new(_len: usize) -> Result<Self, MappingError> {
        todo!()
    }
    pub fn len(&self) -> usize {
        todo!()
    }
    pub fn is_empty(&self) -> bool {
        todo!()
    }
    pub fn as_slice(&self) -> &[u8] {
        todo!()
    }
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        todo!()
    }
    /// Give the pages of `offset..offset+len` (page aligned) back to the OS (MADV_DONTNEED):
    /// they read as zero afterwards and no longer count in the process's RSS.
    pub fn discard(&mut self, _offset: usize, _len: usize) -> Result<(), MappingError> {
        todo!()
    }
}
