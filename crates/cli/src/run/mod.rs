//! `uzswap run`: an unmodified program with its heap in a uzswap region.
//!
//! The program is started with the preload library (`libuzswap_preload.so`, built by the
//! workspace next to the `uzswap` binary) in `LD_PRELOAD` and the region's configuration in
//! `UZSWAP_RUN`; the library makes the region before the program's `main` and puts the whole
//! malloc family and the program's anonymous heap mappings in it (crates/preload). The
//! program keeps its stdin, stdout and stderr. Its exit status passes through, death by
//! signal N becomes 128+N as in a shell, and the signals `timeout(1)` passes on (SIGHUP,
//! SIGINT, SIGQUIT, SIGTERM, SIGALRM) and SIGUSR1, SIGUSR2 and SIGWINCH are passed on to it
//! (those uzswap was started ignoring stay ignored, in the program too, as under `nohup`).
//! uzswap's own failures follow `timeout(1)`: 125 when uzswap fails, 126 when the program
//! cannot be run, 127 when it is not found.
//!
//! A program that execs another (a shell script, a pyenv shim) hands the region over with
//! the exec: the new image makes its own. Every process of the program's tree that keeps
//! the environment gets its own region, each held under the limit.
//!
//! Past the limit with nothing left to reclaim, the program's allocations are throttled, and
//! past `--memory-max` it is killed or let grow (`--on-limit`), each said on stderr as it
//! starts (crates/region/src/over_limit.rs).

mod address_space;
mod agent;
mod agent_server;
mod launch;
mod program;
mod shared_file;

pub use launch::{check, command, held_from_outside, run, Refusal, RunArgs, StatsForm, FAILED};
pub use shared_file::SharedFile;
