//! The C API of uzswap: `libuzswap.so` and `libuzswap.a`, with the header `include/uzswap.h`
//! that cbindgen generates from this crate (a test keeps the committed header equal to what
//! it generates). A C program makes a region of memory held under a memory limit, reads and
//! writes it through a pointer, reads its statistics, changes the engine's tunables, and
//! destroys it.
//!
//! Conventions, the same for every function:
//! - A function that can fail returns an `int`: `UZSWAP_OK` (0) or a negative
//!   `enum uzswap_status`; `uzswap_last_error()` then says what failed, on that thread.
//! - Pointers are checked for NULL (an invalid argument); nothing panics across the boundary
//!   (a panic inside uzswap is caught and returned as `UZSWAP_ERR_INTERNAL`).
//! - Strings uzswap returns (statistics, a tunable's value) are allocated by uzswap and freed
//!   with `uzswap_string_free`, never with `free`.
//! - `struct uzswap_config` starts with its own size, so a program built against an older
//!   header keeps working with a newer library (see config.rs).
//!
//! This is an unsafe edge crate: its `unsafe` is where C pointers become Rust references, and
//! each such place says why it is sound. The work is done by `region::Region`.
#![allow(non_camel_case_types)]
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod config;
mod error;
mod region;
mod stats;
mod strings;

pub use config::{uzswap_config, uzswap_config_init};
pub use error::{uzswap_last_error, uzswap_status};
pub use region::{
    uzswap_region, uzswap_region_create, uzswap_region_destroy, uzswap_region_get_param,
    uzswap_region_len, uzswap_region_ptr, uzswap_region_set_param, uzswap_region_stat,
    uzswap_region_stats_json, uzswap_region_stats_text,
};
pub use strings::uzswap_string_free;

#[cfg(test)]
mod tests;
