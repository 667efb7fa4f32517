//! The region model test's operations (crates/region/tests/model_ops/run.rs: writes, reads,
//! discards, lazy frees, reclaim, tunables changed at run time, device write and read
//! failures) drawn from the fuzzer's input instead of a seed, against the same page model:
//! every byte of every page checked after every step, the limit kept, and the region's and
//! the engine's audits at the end. The first byte picks the folio size (4 KiB to 2 MiB), the
//! next 8 the region's setup, the rest the operations.
#![no_main]
#![allow(dead_code)]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/region/tests/common/mod.rs"]
mod common;

include!("../../crates/region/tests/model_ops/run.rs");

/// Regions are dropped on threads of their own: a drop waits for the handlers' poll timeout.
static DROPPER: std::sync::Mutex<Option<Dropper>> = std::sync::Mutex::new(None);

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let folio = [4 << 10, 16 << 10, 64 << 10, 2 << 20][usize::from(pick) % 4];
    let mut dropper = DROPPER.lock().unwrap();
    run_bytes(folio, rest, dropper.get_or_insert_with(Dropper::default));
});
