//! zsmalloc: the size-class allocator for compressed objects of 1..=4096 bytes.
//! (Interface; implementation in progress.)

/// An opaque object handle. Stable for the object's life: compaction moves objects but never
/// changes their handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Handle(u32);

impl Handle {
    pub fn to_raw(self) -> u32 {
        self.0
    }
    pub fn from_raw(raw: u32) -> Self {
        Handle(raw)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    #[error("object size {0} is outside 1..=4096")]
    BadSize(usize),
    #[error("the pool is at its page limit")]
    PoolFull,
    #[error("the pool could not get memory: {0}")]
    NoMemory(String),
}

/// What one compaction did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactStats {
    pub objects_moved: u64,
    pub pages_freed: u64,
}

#[derive(Debug, Default)]
pub struct ZsPool {}

impl ZsPool {
    pub fn new() -> Self {
        todo!()
    }
    /// Allocate an object of `data.len()` bytes (1..=4096) and copy `data` into it.
    pub fn malloc(&self, _data: &[u8]) -> Result<Handle, AllocError> {
        todo!()
    }
    /// Copy the object into `out` (at least 4096 bytes); returns its length.
    pub fn read(&self, _handle: Handle, _out: &mut [u8]) -> usize {
        todo!()
    }
    /// Length of the object in bytes.
    pub fn obj_len(&self, _handle: Handle) -> usize {
        todo!()
    }
    pub fn free(&self, _handle: Handle) {
        todo!()
    }
    pub fn compact(&self) -> CompactStats {
        todo!()
    }
    /// Bytes of memory the pool holds (pages in spans × 4096): the kernel's pool_total_size.
    pub fn total_size(&self) -> u64 {
        todo!()
    }
    /// Sum of the lengths of the live objects.
    pub fn stored_bytes(&self) -> u64 {
        todo!()
    }
    /// Number of live objects.
    pub fn nr_objects(&self) -> u64 {
        todo!()
    }
    /// Bytes of heap metadata the pool keeps (handle table, span descriptors).
    pub fn metadata_bytes(&self) -> u64 {
        todo!()
    }
    /// Cap the pool at this many pages (None: no cap). Allocation past it fails with PoolFull.
    pub fn set_max_pages(&self, _max: Option<u64>) {
        todo!()
    }
}
