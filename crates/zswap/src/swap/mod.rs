//! The swap layer: the swap cache (the per-page state table every path synchronizes on), the
//! swap slot allocator, and the backing devices that written-back pages go to.

pub mod cache;
pub mod device;
pub mod faulty;
pub mod file;
pub mod lazy_file;
pub mod memory;
pub mod segments;
pub mod slots;
pub mod swap_info;

pub use cache::{Busy, FolioLock, Kind, PageState, SwapCache};
pub use device::{BackingDevice, DeviceError};
pub use faulty::{FaultKind, FaultStats, FaultyDevice};
pub use file::FileDevice;
pub use lazy_file::LazyFileDevice;
pub use memory::MemoryDevice;
pub use segments::{PagedSegments, SegmentDevice, SegmentLog};
pub use slots::{SlotAllocator, SwapSlot, CLUSTER_SLOTS};
pub use swap_info::{SwapInfo, SwapWriteError};
