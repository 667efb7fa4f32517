//! The one crate of uzswap that holds `unsafe` code: anonymous mappings (`mmap`, `madvise`)
//! and userfaultfd. Every `unsafe` block carries a `// SAFETY:` argument. Everything above this
//! crate is safe Rust.

pub mod mapping;
pub mod process;

pub use mapping::{AnonMapping, MappingError};
