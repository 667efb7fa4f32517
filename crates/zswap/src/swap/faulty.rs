//! (in progress)
#[derive(Debug)]
pub struct FaultyDevice;
#[derive(Debug)]
pub enum FaultKind {}
