//! Model-based test of the engine: random sequences of store (every folio size), swap-out,
//! load (exclusive or not), invalidate, writeback, shrinker runs, compaction, tunable changes
//! and injected device faults, checked against a plain map of what each page should hold.
//! After every step: every page's bytes, the step's counter deltas, and (through `audit`)
//! every gauge and charge.
//!
//! `PROPTEST_CASES` sets the number of sequences a test (default 4,000; a soak run: 100,000).

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use zswap::params::Writethrough;
use zswap::swap::{BackingDevice, FaultKind, FaultyDevice, Kind, MemoryDevice};
use zswap::zswap::{LoadErrorKind, SwapOutResult};
use zswap::{Zswap, ZswapConfig, ZswapGroup, PAGE_SIZE};

use common::{page_content, Content};

const PAGES: u32 = 512;
const DEVICE_PAGES: u32 = 768;

#[derive(Debug, Clone)]
enum Op {
    Store {
        start: u32,
        order: u8,
        contents: Vec<Content>,
    },
    SwapOut {
        start: u32,
        order: u8,
        contents: Vec<Content>,
    },
    Load {
        page: u32,
        finish: bool,
        read_fault: bool,
    },
    Invalidate {
        start: u32,
        order: u8,
    },
    Writeback {
        page: u32,
    },
    Shrink {
        nr: u32,
    },
    ShrinkWorker,
    Compact,
    Enabled(bool),
    Compressor(&'static str),
    GroupWriteback(bool),
    /// `writethrough`: N, Y or auto (by how full the pool is).
    Writethrough(Writethrough),
    MaxPoolPercent(u32),
    /// `compress_threads`: large folios compressed in parts by several threads.
    CompressThreads(u32),
    AcceptThreshold(u32),
    ZswapMax(u64),
    WriteFault {
        n: u32,
        kind: u8,
    },
    /// Cap the pool's pages: stores then fail partway through a folio (rollback).
    PoolCap(Option<u64>),
    ClearFaults,
}

fn order_strategy() -> impl Strategy<Value = u8> {
    prop_oneof![
        8 => Just(0u8),
        6 => 1u8..=4,
        2 => 5u8..=7,
        1 => 8u8..=9,
    ]
}

fn folio_strategy() -> impl Strategy<Value = (u32, u8, Vec<Content>)> {
    order_strategy().prop_flat_map(|order| {
        let nr = 1u32 << order;
        (
            (0..PAGES / nr).prop_map(move |i| i * nr),
            Just(order),
            // One content kind per folio keeps big folios cheap to generate; a few mixed.
            prop_oneof![
                3 => common::content_strategy().prop_map(move |c| vec![c; nr as usize]),
                1 => proptest::collection::vec(common::content_strategy(), nr as usize),
            ]
            .prop_map(move |mut v| {
                // Make pages of a uniform folio distinct: real data differs page to page.
                for (i, c) in v.iter_mut().enumerate() {
                    c.vary(i as u32);
                }
                v
            }),
        )
    })
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => folio_strategy().prop_map(|(start, order, contents)| Op::Store { start, order, contents }),
        3 => folio_strategy().prop_map(|(start, order, contents)| Op::SwapOut { start, order, contents }),
        8 => (0..PAGES, any::<bool>(), prop::bool::weighted(0.1))
            .prop_map(|(page, finish, read_fault)| Op::Load { page, finish, read_fault }),
        3 => order_strategy().prop_flat_map(|order| {
            let nr = 1u32 << order;
            ((0..PAGES / nr).prop_map(move |i| i * nr), Just(order))
        }).prop_map(|(start, order)| Op::Invalidate { start, order }),
        4 => (0..PAGES).prop_map(|page| Op::Writeback { page }),
        3 => (1u32..128).prop_map(|nr| Op::Shrink { nr }),
        1 => Just(Op::ShrinkWorker),
        1 => Just(Op::Compact),
        1 => any::<bool>().prop_map(Op::Enabled),
        1 => prop::sample::select(vec!["lz4", "zstd", "zstd:-1", "deflate"]).prop_map(Op::Compressor),
        1 => any::<bool>().prop_map(Op::GroupWriteback),
        1 => prop::sample::select(vec![Writethrough::Off, Writethrough::On, Writethrough::Auto])
            .prop_map(Op::Writethrough),
        1 => prop_oneof![Just(0u32), 1u32..10, Just(20), Just(100)].prop_map(Op::MaxPoolPercent),
        1 => prop_oneof![Just(50u32), Just(90), Just(100)].prop_map(Op::AcceptThreshold),
        1 => prop_oneof![Just(1u32), 2u32..=8].prop_map(Op::CompressThreads),
        1 => prop_oneof![Just(0u64), 1u64..300_000, Just(u64::MAX)].prop_map(Op::ZswapMax),
        1 => (1u32..4, 0u8..3).prop_map(|(n, kind)| Op::WriteFault { n, kind }),
        1 => Just(Op::ClearFaults),
        1 => prop_oneof![Just(None), (0u64..64).prop_map(Some)].prop_map(Op::PoolCap),
    ]
}

/// The engine under test and the model it must agree with.
struct Harness {
    zswap: Zswap,
    group: Arc<ZswapGroup>,
    device: Arc<FaultyDevice>,
    /// What each page the engine holds must read as. Absent: the engine holds nothing.
    model: BTreeMap<u32, Vec<u8>>,
}

impl Harness {
    /// The engine writing back a page a slot, or (`segments`: Some(encrypt)) in segments.
    fn new(segments: Option<bool>) -> Self {
        let device = Arc::new(FaultyDevice::new(Arc::new(MemoryDevice::new(DEVICE_PAGES))));
        let backing: Arc<dyn BackingDevice> = device.clone();
        // Limits are percentages of 1 MiB: the pool limit is hit often.
        let mut config = ZswapConfig::new(1 << 20).device(backing, DEVICE_PAGES);
        if let Some(encrypt) = segments {
            config = config.segments(encrypt);
        }
        let zswap = Zswap::new(config);
        let group = zswap.new_group(PAGES);
        Harness {
            zswap,
            group,
            device,
            model: BTreeMap::new(),
        }
    }

    fn folio_data(contents: &[Content]) -> Vec<u8> {
        contents.iter().flat_map(page_content).collect()
    }

    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        let before = self.zswap.stats();
        match op {
            Op::Store {
                start,
                order,
                contents,
            }
            | Op::SwapOut {
                start,
                order,
                contents,
            } => {
                let data = Self::folio_data(contents);
                let folio = self.group.lock_folio(*start, *order);
                let nr = folio.nr_pages() as usize;
                let same = data.chunks(PAGE_SIZE).filter(|p| is_same_filled(p)).count() as u64;
                let stored = if matches!(op, Op::Store { .. }) {
                    self.group.store(&folio, &data).is_ok()
                } else {
                    match self.group.swap_out(&folio, &data) {
                        Ok(SwapOutResult::Stored) => true,
                        Ok(SwapOutResult::WrittenToDisk(_)) => {
                            let after = self.zswap.stats().delta(&before);
                            prop_assert_eq!(after.get("zswpout"), 0);
                            // The failed store may have written back other pages (zswap_max).
                            prop_assert_eq!(
                                after.get("pswpout") - after.get("written_back_pages"),
                                nr as u64 - same
                            );
                            for (i, off) in folio.offsets().enumerate() {
                                self.model
                                    .insert(off, data[i * PAGE_SIZE..(i + 1) * PAGE_SIZE].to_vec());
                            }
                            return Ok(());
                        }
                        Err(_) => false,
                    }
                };
                let d = self.zswap.stats().delta(&before);
                if stored {
                    prop_assert_eq!(d.get("zswpout"), nr as u64 - same);
                    prop_assert_eq!(d.get("swpout_zero"), same);
                    for (i, off) in folio.offsets().enumerate() {
                        self.model
                            .insert(off, data[i * PAGE_SIZE..(i + 1) * PAGE_SIZE].to_vec());
                    }
                } else {
                    prop_assert_eq!(d.get("zswpout"), 0);
                    prop_assert_eq!(d.get("swpout_zero"), 0);
                    let rejects: u64 = [
                        "pool_limit_hit",
                        "reject_reclaim_fail",
                        "reject_alloc_fail",
                        "reject_compress_fail",
                        "reject_compress_poor",
                    ]
                    .iter()
                    .map(|n| d.get(n))
                    .sum();
                    let disabled = !self.zswap.params().enabled();
                    let still_full = self.zswap.pool_full();
                    prop_assert!(
                        rejects >= 1 || disabled || still_full,
                        "a store failed without a reason counted"
                    );
                    // All or nothing: no entry at any offset, stale ones included.
                    for off in folio.offsets() {
                        prop_assert_eq!(folio.state(off).kind, Kind::Empty);
                        self.model.remove(&off);
                    }
                }
            }
            Op::Load {
                page,
                finish,
                read_fault,
            } => {
                if *read_fault {
                    self.device.fail_next_reads(1);
                }
                let folio = self.group.lock_page(*page);
                let mut buf = vec![0xa5u8; folio.nr_pages() as usize * PAGE_SIZE];
                let result = self.group.load(&folio, &mut buf);
                self.device.clear();
                match result {
                    Ok(loaded) => {
                        let mut present = 0u64;
                        for (i, off) in folio.offsets().enumerate() {
                            let got = &buf[i * PAGE_SIZE..(i + 1) * PAGE_SIZE];
                            match self.model.get(&off) {
                                Some(want) => {
                                    present += 1;
                                    prop_assert!(got == &want[..], "page {} read back wrong", off);
                                }
                                None => prop_assert!(
                                    got.iter().all(|&b| b == 0xa5),
                                    "empty page {} was written",
                                    off
                                ),
                            }
                        }
                        let d = self.zswap.stats().delta(&before);
                        prop_assert_eq!(
                            d.get("zswpin") + d.get("pswpin") + d.get("swpin_zero"),
                            present
                        );
                        prop_assert_eq!(
                            u64::from(loaded.pool + loaded.disk + loaded.zero),
                            present
                        );
                        if *finish {
                            self.group.finish_load(&folio);
                            for off in folio.offsets() {
                                self.model.remove(&off);
                            }
                        }
                    }
                    Err(e) => {
                        // Only an injected read fault may fail a load, and it loses nothing.
                        prop_assert!(*read_fault, "load failed unprompted: {}", e);
                        prop_assert_eq!(e.kind, LoadErrorKind::ReadError);
                    }
                }
            }
            Op::Invalidate { start, order } => {
                let folio = self.group.lock_folio(*start, *order);
                self.group.invalidate(&folio);
                for off in folio.offsets() {
                    self.model.remove(&off);
                }
            }
            Op::Writeback { page } => {
                let folio = self.group.lock_page(*page);
                let in_pool = folio
                    .offsets()
                    .filter(|&o| folio.state(o).kind == Kind::Stored)
                    .count() as u32;
                match self.group.writeback(&folio) {
                    Ok(n) => {
                        prop_assert_eq!(n, in_pool);
                        let d = self.zswap.stats().delta(&before);
                        prop_assert_eq!(
                            d.get("written_back_pages") + d.get("writethrough_evictions"),
                            u64::from(n)
                        );
                        for off in folio.offsets() {
                            prop_assert!(folio.state(off).kind != Kind::Stored);
                        }
                    }
                    Err(_) => {
                        // Nothing moved: every pool page is still there.
                        let still = folio
                            .offsets()
                            .filter(|&o| folio.state(o).kind == Kind::Stored)
                            .count() as u32;
                        prop_assert_eq!(still, in_pool);
                    }
                }
            }
            Op::Shrink { nr } => {
                let r = self.group.shrink(*nr);
                let d = self.zswap.stats().delta(&before);
                prop_assert_eq!(
                    d.get("written_back_pages") + d.get("writethrough_evictions"),
                    u64::from(r.written)
                );
            }
            Op::ShrinkWorker => {
                self.zswap.shrink_worker_run();
            }
            Op::Compact => {
                self.zswap.compact();
                if let Some(swap) = self.zswap.swap_info() {
                    let before = self.zswap.stats().get("swap_segment_compactions");
                    match swap.compact() {
                        Ok(true) => prop_assert_eq!(
                            self.zswap.stats().get("swap_segment_compactions"),
                            before + 1
                        ),
                        Ok(false) => {}
                        // An injected fault: nothing moved, or what moved is whole.
                        Err(_) => {}
                    }
                }
            }
            Op::Enabled(on) => self.zswap.params().set_enabled(*on),
            Op::Compressor(name) => self.zswap.set_param("compressor", name).unwrap(),
            Op::GroupWriteback(on) => self.group.set_writeback_enabled(*on),
            Op::Writethrough(mode) => self.zswap.params().set_writethrough_mode(*mode),
            Op::MaxPoolPercent(p) => self.zswap.params().set_max_pool_percent(*p).unwrap(),
            Op::CompressThreads(n) => self.zswap.params().set_compress_threads(*n).unwrap(),
            Op::AcceptThreshold(p) => self
                .zswap
                .params()
                .set_accept_threshold_percent(*p)
                .unwrap(),
            Op::ZswapMax(m) => self.group.set_zswap_max(*m),
            Op::WriteFault { n, kind } => {
                let kind =
                    [FaultKind::Eio, FaultKind::Enospc, FaultKind::ShortWrite][*kind as usize];
                self.device.fail_next_writes(*n, kind);
            }
            Op::ClearFaults => self.device.clear(),
            Op::PoolCap(pages) => {
                let cap = pages.map(|p| p + self.zswap.pool().total_size() / PAGE_SIZE as u64);
                self.zswap.pool().set_max_pages(cap);
            }
        }
        self.verify()
    }

    /// Every page reads back what the model says; pages the model does not have are empty;
    /// every gauge agrees with the entries.
    fn verify(&self) -> Result<(), TestCaseError> {
        let mut buf = vec![0u8; PAGE_SIZE];
        for off in 0..PAGES {
            let folio = self.group.lock_page(off);
            let kind = folio.state(off).kind;
            match self.model.get(&off) {
                None => prop_assert_eq!(kind, Kind::Empty, "page {} should hold nothing", off),
                Some(want) => {
                    prop_assert!(kind != Kind::Empty, "page {} lost", off);
                    let got = self.group.read_page(&folio, off, &mut buf);
                    prop_assert!(got.is_ok(), "page {} unreadable: {:?}", off, got);
                    prop_assert!(
                        &buf == want,
                        "page {} holds the wrong bytes ({:?})",
                        off,
                        kind
                    );
                }
            }
        }
        if let Err(e) = self.zswap.audit() {
            return Err(TestCaseError::fail(e));
        }
        Ok(())
    }
}

fn is_same_filled(page: &[u8]) -> bool {
    page.chunks(4).all(|w| w == &page[..4])
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4_000)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        max_shrink_iters: 2000,
        failure_persistence: None,
        .. ProptestConfig::default()
    })]

    #[test]
    fn engine_matches_the_model(ops in proptest::collection::vec(op_strategy(), 1..24)) {
        run(&ops, None)?;
    }

    #[test]
    fn engine_in_sealed_segments_matches_the_model(
        ops in proptest::collection::vec(op_strategy(), 1..24)
    ) {
        run(&ops, Some(true))?;
    }

    #[test]
    fn engine_in_plain_segments_matches_the_model(
        ops in proptest::collection::vec(op_strategy(), 1..24)
    ) {
        run(&ops, Some(false))?;
    }
}

/// Apply `ops`, then drain: everything still held comes back, and nothing is left anywhere.
fn run(ops: &[Op], segments: Option<bool>) -> Result<(), TestCaseError> {
    let mut h = Harness::new(segments);
    for op in ops {
        h.apply(op)?;
    }
    // Drain: everything still held comes back, then nothing is left anywhere.
    h.device.clear();
    h.zswap.pool().set_max_pages(None);
    h.zswap.params().set_enabled(true);
    for off in 0..PAGES {
        let folio = h.group.lock_folio(off, 0);
        let mut buf = vec![0u8; PAGE_SIZE];
        h.group
            .load(&folio, &mut buf)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        if let Some(want) = h.model.remove(&off) {
            prop_assert!(buf == want, "page {} wrong at the end", off);
        }
        h.group.finish_load(&folio);
    }
    h.zswap.compact();
    prop_assert_eq!(h.zswap.pool().total_size(), 0);
    prop_assert_eq!(h.zswap.stats().get("stored_pages"), 0);
    prop_assert_eq!(h.zswap.stats().get("swap_slots_used"), 0);
    h.zswap.audit().map_err(TestCaseError::fail)?;

    prop_assert_eq!(h.zswap.stats().get("swap_segments"), 0);
    Ok(())
}
