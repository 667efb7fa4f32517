//! Page corpora: capturing a process's anonymous memory into a page file (`uzswap corpus
//! capture`).

pub mod capture;
pub mod cmd;
