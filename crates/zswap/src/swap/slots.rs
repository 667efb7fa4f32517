//! Swap slot allocator. (Interface.)

/// A page-sized slot on the backing device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SwapSlot(pub u32);

#[derive(Debug)]
pub struct SlotAllocator {}

impl SlotAllocator {
    /// An allocator over `capacity` slots.
    pub fn new(_capacity: u32) -> Self {
        todo!()
    }
    /// `nr` contiguous free slots (nr a power of two up to 512), or None.
    pub fn alloc(&mut self, _nr: u32) -> Option<SwapSlot> {
        todo!()
    }
    pub fn free(&mut self, _slot: SwapSlot, _nr: u32) {
        todo!()
    }
    pub fn used(&self) -> u32 {
        todo!()
    }
    pub fn capacity(&self) -> u32 {
        todo!()
    }
}
