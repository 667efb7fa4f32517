//! `uzswap bench ...`: benchmarks as programs, never as timed tests.

pub mod codecs;
pub mod engine;
pub mod figures;
pub mod java_heap;
pub mod machine_check;
pub mod peer;
pub mod plot;
pub mod program;
pub mod progress;
pub mod region_worker;
pub mod runner;
pub mod stats;
pub mod suite;
pub mod suite_programs;
pub mod summary;
pub mod systems;
pub mod titles;
pub mod worker;
pub mod workload;
pub mod workload_args;
pub mod workload_commands;
