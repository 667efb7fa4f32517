//! The `uzswap` command's modules: `uzswap run` and its statistics ([`run`], [`stat`],
//! [`param`]), corpus capture ([`corpus`], [`pages`]), the benchmarks against the kernel's
//! zswap ([`bench`](mod@bench)), and what they share: one-line errors ([`report`]) and size
//! parsers ([`size`]). A program that wants uzswap's memory depends on the `uzswap` crate.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bench;
pub mod corpus;
pub mod pages;
pub mod param;
pub mod report;
pub mod run;
pub mod size;
pub mod stat;
