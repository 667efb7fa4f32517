//! The swap layer: the swap cache (the per-page state table every path synchronizes on), the
//! swap slot allocator, and the backing devices that written-back pages go to.

pub mod device;
pub mod faulty;
pub mod file;
pub mod memory;
pub mod slots;

pub use device::{BackingDevice, DeviceError};
pub use faulty::{FaultKind, FaultyDevice};
pub use file::FileDevice;
pub use memory::MemoryDevice;
pub use slots::{SlotAllocator, SwapSlot};
pub mod cache;
pub mod swap_info;

pub use cache::{Busy, FolioLock, Kind, PageState, SwapCache};
pub use swap_info::{SwapInfo, SwapWriteError};
