//! (in progress)
#[derive(Debug)]
pub struct FileDevice;
