//! `uzswap bench ...`: benchmarks as programs, never as timed tests.

pub mod codecs;
pub mod engine;
