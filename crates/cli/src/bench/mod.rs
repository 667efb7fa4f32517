//! `uzswap bench ...`: benchmarks as programs, never as timed tests.

pub mod cmd;
pub mod codecs;
pub mod engine;
pub mod java_heap;
pub mod peer;
pub mod plot;
pub mod program;
pub mod progress;
pub mod stats;
pub mod summary;
pub mod systems;
pub mod uzswap_side;
pub mod worker;
pub mod workload;
