//! uzswap: the library facade over the engine, and the pieces of the `uzswap` command that are
//! worth testing on their own (page-file loading, benchmarks). The command's `main` only
//! parses arguments and reports errors.
#![forbid(unsafe_code)]

pub mod bench;
pub mod pages;
pub mod report;
pub mod size;
