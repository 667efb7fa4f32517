//! (in progress)
#[derive(Debug)]
pub struct MemoryDevice;
