//! Page corpora: capturing a process's anonymous memory into a page file (`uzswap corpus
//! capture`), and the repository's own corpus (`corpus/` at its root) built into the binary
//! as the benchmarks' default content.

pub mod builtin;
pub mod capture;
pub mod capture_command;
