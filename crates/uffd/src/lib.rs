//! The kernel edge of uzswap: anonymous mappings (`mmap`, `madvise`) and userfaultfd, behind
//! safe types. One of its three crates with `unsafe` code, with the preload library and the
//! C API; every `unsafe` block carries a `// SAFETY:` argument.
//!
//! - [`sys`]: the raw kernel ABI (structs, ioctl numbers), including `UFFDIO_MOVE`/`POISON`
//!   which the system headers lack.
//! - [`UffdBuilder`] / [`Uffd`]: creation, handshake, operations, events.
//! - [`Event`]: what `read(2)` on a userfaultfd says.
//! - [`sigbus`]: faults served in the faulting thread, from its SIGBUS handler.
//! - [`descriptors`]: uzswap's descriptors moved out of a program's reach.
//! - [`remote`]: a program's memory served from outside it (its userfaultfd and a parasite).
//! - [`RawRegion`]: a mapping to register, which never hands out references into itself.
//! - [`UffdError`]: errno turned into domain errors; `EEXIST` is the [`Filled::PageExists`]
//!   outcome, not an error.
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod builder;
pub mod descriptors;
pub mod doorbell;
pub mod error;
pub mod event;
pub mod features;
pub mod mapping;
mod mmap;
pub mod page_tables;
pub mod process;
pub mod raw_region;
#[cfg(target_arch = "x86_64")]
pub mod remote;
pub mod sigbus;
pub mod staging;
pub mod sys;
pub mod userfaultfd;
pub mod written;

pub use builder::UffdBuilder;
pub use doorbell::Doorbell;
pub use error::{RawRegionError, UffdError, PERMISSION_HINT};
pub use event::{Event, PagefaultFlags};
pub use features::USER_MODE_ONLY_WARNING;
pub use features::{Features, Ioctls, RegisterMode};
pub use mapping::{AnonMapping, MappingError};
pub use page_tables::PageTables;
pub use raw_region::{
    madvise, page_aligned, page_in_mapping, page_mapped, page_out, page_size, pages_in_core,
    pages_present, Advice, LateRegistration, RawRegion,
};
pub use staging::{StageError, StagedFolio, Staging};
pub use userfaultfd::{CopyMode, Filled, MoveMode, Uffd, EVENT_BATCH};
pub use written::WrittenPages;

/// The page size all of uzswap works in, in bytes: mappings, userfaultfd ranges, the engine's
/// pages and slots, page files. It is the base page of x86-64 (and of arm64 kernels built with
/// 4 KiB pages); [`page_size`] is what the running kernel uses, and a test checks that they
/// agree. Defined here, in the lowest crate, so that every crate above names the same one.
pub const PAGE_SIZE: usize = 4096;

#[cfg(test)]
mod tests {
    #[test]
    fn the_kernel_page_is_page_size() {
        assert_eq!(super::page_size(), super::PAGE_SIZE);
    }
}
