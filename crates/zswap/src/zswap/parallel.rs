//! Parallel compression of a large folio (ours): the software form of the batching that the
//! kernel's large-folio zswap series prepared for (one `zswap_store` of a folio, its pages
//! compressed in a batch). A folio of at least two parts of `MIN_PART_PAGES` pages is cut
//! into parts, up to `compress_threads` of them: the storing thread compresses the first
//! part, helper threads the others, each part into pool objects of its own; the store waits
//! for every part and then goes on as for one thread (all or nothing: store.rs).
//!
//! The helpers are one pool of threads for the process (`rayon`), started with the first
//! zswap instance: one fewer than the CPUs, at most `MAX_HELPERS`. They start with the
//! instance, not on first use, so that a program that preloads uzswap can tell them from its
//! own threads (they exist right after its region is made).

use std::sync::OnceLock;

/// The least pages a part has: handing a part to a helper costs a wake-up across CPUs, as
/// much as compressing a few pages with lz4 (DESIGN.md section 6).
pub(crate) const MIN_PART_PAGES: u32 = 8;

/// Helper threads at most, whatever the CPUs.
const MAX_HELPERS: usize = 7;

/// Bytes each helper thread keeps: its store's batch buffer and entry list (16 KiB), and a
/// codec's context (zstd's are the largest, a few hundred KiB).
pub const HELPER_SCRATCH_BYTES: u64 = super::STORE_SCRATCH_BYTES + (16 << 10) + (1 << 20);

static HELPERS: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();

/// Start the helpers if they are not running yet (none on a machine of one CPU, or if no
/// thread could be started: folios are then compressed by their storing thread alone).
pub(crate) fn start_helpers() {
    helpers();
}

fn helpers() -> Option<&'static rayon::ThreadPool> {
    HELPERS
        .get_or_init(|| {
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            let n = cpus.saturating_sub(1).min(MAX_HELPERS);
            if n == 0 {
                return None;
            }
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .thread_name(|i| format!("zswap-compress-{i}"))
                .build()
                .ok()
        })
        .as_ref()
}

/// The helper threads running in this process.
pub fn helper_threads() -> usize {
    helpers().map_or(0, |h| h.current_num_threads())
}

/// How many parts a folio of `nr` pages is compressed in, with `threads` allowed.
pub(crate) fn parts(nr: u32, threads: u32) -> u32 {
    let most = threads.min(helper_threads() as u32 + 1);
    (nr / MIN_PART_PAGES).clamp(1, most.max(1))
}

/// Run `first` on this thread and `rest(k)` for k in 1..parts on the helpers, at the same
/// time; return when all are done, `rest`'s results in order. A panic in any is raised here
/// once all are done.
pub(crate) fn in_parts<F, R: Send>(
    parts: u32,
    first: impl FnOnce() -> F,
    rest: impl Fn(u32) -> R + Sync,
) -> (F, Vec<R>) {
    let mut results: Vec<Option<R>> = (1..parts).map(|_| None).collect();
    let first_result = match helpers() {
        Some(pool) if parts > 1 => pool.in_place_scope(|scope| {
            let rest = &rest;
            for (k, slot) in (1..parts).zip(results.iter_mut()) {
                scope.spawn(move |_| *slot = Some(rest(k)));
            }
            first()
        }),
        _ => {
            for (k, slot) in (1..parts).zip(results.iter_mut()) {
                *slot = Some(rest(k));
            }
            first()
        }
    };
    let rest = results
        .into_iter()
        .map(|r| r.expect("every part ran"))
        .collect();
    (first_result, rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folio_is_cut_in_parts_of_at_least_min_part_pages() {
        let most = helper_threads() as u32 + 1;
        assert_eq!(parts(512, 1), 1, "one thread allowed");
        assert_eq!(parts(1, 8), 1);
        assert_eq!(parts(MIN_PART_PAGES * 2 - 1, 8), 1);
        assert_eq!(parts(MIN_PART_PAGES * 2, 8), 2.min(most));
        assert_eq!(parts(512, 8), 8.min(most));
    }

    #[test]
    fn every_part_runs_once_and_the_results_keep_their_order() {
        let main = std::thread::current().id();
        let (first, rest) = in_parts(
            4,
            || std::thread::current().id(),
            |k| (k, std::thread::current().id()),
        );
        assert_eq!(first, main, "the first part runs on the calling thread");
        assert_eq!(rest.iter().map(|r| r.0).collect::<Vec<_>>(), [1, 2, 3]);
        if helper_threads() > 0 {
            assert!(rest.iter().all(|r| r.1 != main), "the rest on helpers");
        }
    }
}
