// The region model's operations and their run: included (`include!`) by the model test
// (tests/model.rs, which describes them) and by the fuzz target `region_model` (fuzz/), so
// both drive the same operations against the same page model. Plain comments only: an
// included file cannot carry inner doc comments.

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use region::{Region, RegionConfig, Writethrough};
use zswap::compress::CompressorSpec;
use zswap::swap::{BackingDevice, FaultKind, FaultyDevice, FileDevice, MemoryDevice};

use crate::common::{corpus_page, random_page, PAGE};

static ZERO: [u8; PAGE] = [0; PAGE];

// ---------------------------------------------------------------------------------------
// The model of one page.

#[derive(Clone, Debug)]
struct PageModel {
    /// What the page may hold: one content, or two after a partial write to a lazily freed
    /// page whose fate no read has told yet.
    cands: Vec<Vec<u8>>,
    /// Lazily freed (`MADV_FREE`) and not written since: it may read as `cands[0]` or as
    /// zeros, and turn to zeros at any time.
    lazy: bool,
    /// Poisoned (a device read failed twice): every access faults until it is discarded.
    poisoned: bool,
}

/// How a read of a page compared with its model.
enum Seen {
    Fine,
    /// What the page held and what it might have held, said in a line.
    Wrong(String),
}

impl PageModel {
    fn zero() -> Self {
        PageModel {
            cands: vec![ZERO.to_vec()],
            lazy: false,
            poisoned: false,
        }
    }

    fn set(&mut self, bytes: Vec<u8>) {
        *self = PageModel {
            cands: vec![bytes],
            lazy: false,
            poisoned: false,
        };
    }

    /// `data` written at `offset` of the page.
    fn patch(&mut self, offset: usize, data: &[u8]) {
        assert!(!self.poisoned, "the model wrote to a poisoned page");
        if offset == 0 && data.len() == PAGE {
            self.set(data.to_vec());
            return;
        }
        if self.lazy {
            // The write lands on the old bytes or on zeros, whichever the page holds at that
            // moment; either way the page is dirty, and so definite, afterwards.
            self.cands.push(ZERO.to_vec());
            self.lazy = false;
        }
        for c in &mut self.cands {
            c[offset..offset + data.len()].copy_from_slice(data);
        }
        self.cands.dedup();
    }

    fn free_lazily(&mut self) {
        assert!(!self.poisoned, "the model lazily freed a poisoned page");
        // A page that may hold either of two contents, lazily freed: it reads as one of them
        // or zeros; only one old content can be kept in the model, so the page is read first
        // (`Run::free_lazily`) and never has two here.
        assert_eq!(self.cands.len(), 1, "lazily freeing an undecided page");
        if self.cands[0] != ZERO {
            self.lazy = true;
        }
    }

    /// Compare what the page reads as with the model, and narrow the model down.
    fn observe(&mut self, got: &[u8]) -> Seen {
        if self.poisoned {
            return Seen::Wrong(format!(
                "a poisoned page read as data ({}): its data came back",
                describe(got)
            ));
        }
        if let Some(i) = self.cands.iter().position(|c| c == got) {
            if !self.lazy && self.cands.len() > 1 {
                let c = self.cands.swap_remove(i);
                self.cands = vec![c];
            }
            return Seen::Fine;
        }
        if self.lazy && got == ZERO {
            self.set(ZERO.to_vec());
            return Seen::Fine;
        }
        let want: Vec<String> = self
            .cands
            .iter()
            .map(|c| {
                let differ: Vec<usize> = (0..PAGE).filter(|&i| c[i] != got[i]).collect();
                format!(
                    "{} (differing in {} bytes, {}..={})",
                    describe(c),
                    differ.len(),
                    differ[0],
                    differ[differ.len() - 1]
                )
            })
            .collect();
        Seen::Wrong(format!(
            "read {} where the model has {}{}",
            describe(got),
            want.join(" or "),
            if self.lazy {
                " or zeros (lazily freed)"
            } else {
                ""
            }
        ))
    }
}

/// A page's bytes in a few words: zeros, same-filled, or its first words (a corpus page's
/// stamp: page and version) and the next bytes.
fn describe(p: &[u8]) -> String {
    if p == ZERO {
        return "zeros".into();
    }
    if p.chunks(8).all(|w| w == &p[..8]) {
        return format!("same-filled {:02x?}", &p[..8]);
    }
    let word = |i: usize| u64::from_ne_bytes(p[i * 8..i * 8 + 8].try_into().unwrap());
    format!(
        "[words {:#x} {:#x}, bytes {:02x?}..]",
        word(0),
        word(1),
        &p[16..24]
    )
}

// ---------------------------------------------------------------------------------------
// Operations.

#[derive(Clone, Copy, Debug, PartialEq)]
enum Data {
    /// Real memory from the corpus, stamped with its page and the write's version (so a
    /// stale copy of the page is told apart).
    Corpus,
    /// Incompressible.
    Random,
    Zero,
    /// Every 8-byte word the same (a same-filled page: kept as a value, not stored).
    Same(u64),
}

/// How the program touches the region: its own loads and stores, or the kernel's copies
/// for a system call (kernel-mode faults).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Via {
    User,
    Kernel,
}

#[derive(Clone, Debug)]
enum Op {
    /// `len` bytes at byte `at`, from `data` version `version`.
    Write {
        at: usize,
        len: usize,
        data: Data,
        version: u64,
        via: Via,
    },
    Read {
        first: usize,
        n: usize,
        via: Via,
    },
    Discard {
        first: usize,
        n: usize,
    },
    FreeLazily {
        first: usize,
        n: usize,
    },
    ReclaimTo(u64),
    Compressor(&'static str),
    Enabled(bool),
    Writeback(bool),
    /// `writethrough`: N, Y or auto (by how full the pool is).
    Writethrough(zswap::params::Writethrough),
    MaxPoolPercent(u32),
    AcceptThreshold(u32),
    Shrinker(bool),
    ZswapMax(u64),
    FailNextWrites(u32, FaultKind),
    FailWrites(FaultKind),
    FailNextReads(u32),
    ClearFaults,
    Idle(u64),
}

/// Compressors a sequence switches between: fewer than `MAX_COMPRESSORS` (16), so a switch
/// never runs out of codec slots.
/// The engine's counters of events (its gauges aside), as `Zswap::stats` names them.
const ENGINE_COUNTERS: &[&str] = &[
    "zswpout",
    "zswpin",
    "pswpout",
    "pswpin",
    "written_back_pages",
    "swap_write_fail",
    "swap_read_fail",
    "pool_limit_hit",
    "reject_compress_poor",
];

const COMPRESSORS: &[&str] = &["lz4", "zstd", "zstd:1", "zstd:-5", "deflate", "deflate:1"];

const FAULT_KINDS: &[FaultKind] = &[FaultKind::Eio, FaultKind::Enospc, FaultKind::ShortWrite];

/// The bytes of page `page` as written by version `version` of `data`.
fn source_page(data: Data, page: usize, version: u64) -> Vec<u8> {
    match data {
        Data::Corpus => {
            let mut p = corpus_page(page * 7 + version as usize);
            p[..8].copy_from_slice(&(page as u64).to_ne_bytes());
            p[8..16].copy_from_slice(&version.to_ne_bytes());
            p
        }
        Data::Random => random_page(page, version.wrapping_mul(0x1_0000_0001)),
        Data::Zero => ZERO.to_vec(),
        Data::Same(w) => w.to_ne_bytes().repeat(PAGE / 8),
    }
}

/// The bytes a write puts at `at..at + len`.
fn write_bytes(data: Data, at: usize, len: usize, version: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    let mut pos = at;
    while pos < at + len {
        let page = pos / PAGE;
        let end = (at + len).min((page + 1) * PAGE);
        let src = source_page(data, page, version);
        out.extend_from_slice(&src[pos - page * PAGE..end - page * PAGE]);
        pos = end;
    }
    out
}

// ---------------------------------------------------------------------------------------
// A sequence's setup.

#[derive(Clone, Debug)]
struct Setup {
    seed: u64,
    folio: usize,
    pages: usize,
    steps: usize,
    config: RegionConfig,
    /// The swap file (wrapped to inject faults) instead of a memory device.
    file_device: bool,
    /// Whether the sequence may arm device read failures (all access through the kernel from
    /// then on).
    read_faults: bool,
}

impl Setup {
    fn draw(seed: u64, folio: usize) -> Setup {
        let mut rng = SmallRng::seed_from_u64(seed ^ 0x5e70_0000);
        let folio_pages = folio / PAGE;
        // Small regions: a few folios, a few dozen pages with 4 KiB folios. A step checks
        // every page, so each step faults back in whatever the limit left no room for: the
        // sizes and limits below keep that to a few folios a step in most sequences.
        let folios = match folio_pages {
            1 => rng.gen_range(16..=48),
            4 => rng.gen_range(6..=16),
            16 => rng.gen_range(3..=6),
            _ => 2,
        };
        let pages = folios * folio_pages;
        let steps = match folio_pages {
            512 => rng.gen_range(8..=16),
            _ => rng.gen_range(20..=40),
        };
        let mut config = RegionConfig::new(0)
            .folio_size(folio)
            .fault_threads(rng.gen_range(1..=3))
            .kswapd_threads(rng.gen_range(1..=4))
            .keep_clean(rng.gen_bool(0.8))
            .drop_behind(rng.gen_bool(0.8))
            .keep_incompressible(rng.gen_bool(0.8))
            .batch_eviction(rng.gen_bool(0.8))
            .workingset(rng.gen_bool(0.5))
            // By the seed, as writethrough's mode: no seed's later draws move.
            .inactive_list(seed & 2 == 0)
            .swap_discard(rng.gen_bool(0.2))
            .writeback(rng.gen_bool(0.9))
            // Y or auto by the seed's last bit, so that no seed's later draws move.
            .writethrough(match rng.gen_bool(0.15) {
                false => Writethrough::Off,
                true if seed & 1 == 0 => Writethrough::On,
                true => Writethrough::Auto,
            })
            .max_pool_percent(if folio_pages == 512 {
                // Large folios fill a pool of a few percent with one store: the swap file
                // (and its write failures) is reached in a short sequence.
                *[0, 1, 5, 20].choose(&mut rng).unwrap()
            } else {
                *[0, 1, 5, 20, 20, 50, 100].choose(&mut rng).unwrap()
            })
            .compressor(COMPRESSORS.choose(&mut rng).unwrap().parse().unwrap());
        // The least limit the region takes holds about a folio besides its fixed charge
        // (kswapd keeps a margin of four folios or 1/64 of the limit below it). Above it, room
        // for all but `short` folios of the region, and a few pages more or less.
        let min = Region::min_memory_limit(pages * PAGE, &config).expect("a valid config");
        let short = match rng.gen_range(0..8) {
            0 | 1 => 0,
            2..=5 => rng.gen_range(1..=3usize).min(folios),
            _ => rng.gen_range(0..=folios),
        };
        let room = match folio_pages {
            // kswapd's margin is four folios here, and the least limit holds only those: a
            // region of two folios is under pressure only at the least limit, or a little
            // above it (two folios is what a step costs to fault back: about 4 ms each).
            512 => rng.gen_range(0..=4) * folio / 16,
            _ => (folios - short) * folio + rng.gen_range(0..=(4 * folio_pages).min(64)) * PAGE,
        };
        config.memory_limit = min + room as u64;
        let file_device = rng.gen_bool(0.3);
        let read_faults = rng.gen_bool(0.2);
        // Drawn last, so that no earlier draw of a seed moves.
        config.policies.referenced_writes = rng.gen_bool(0.5);
        Setup {
            seed,
            folio,
            pages,
            steps,
            config,
            file_device,
            read_faults,
        }
    }

    fn describe(&self) -> String {
        let c = &self.config;
        format!(
            "seed {:#x}: folio {} KiB, {} pages, limit {} (min {}), {} steps; fault_threads {} \
             kswapd_threads {} keep_clean {} drop_behind {} keep_incompressible {} \
             batch_eviction {} workingset {} referenced_writes {} swap_discard {} writeback {} \
             writethrough {} max_pool_percent {} compressor {}; device {}{}",
            self.seed,
            self.folio >> 10,
            self.pages,
            c.memory_limit,
            Region::min_memory_limit(self.pages * PAGE, c).unwrap(),
            self.steps,
            c.fault_threads,
            c.kswapd_threads,
            c.policies.keep_clean,
            c.policies.drop_behind,
            c.policies.keep_incompressible,
            c.policies.batch_eviction,
            c.policies.workingset,
            c.policies.referenced_writes,
            c.swap_discard,
            c.writeback,
            c.writethrough.as_str(),
            c.max_pool_percent,
            c.compressor,
            if self.file_device { "file" } else { "memory" },
            if self.read_faults {
                ", read failures"
            } else {
                ""
            }
        )
    }

    /// How far past its limit the region may be seen from the test's thread, with
    /// everything able to leave (writeback on, device writes working).
    ///
    /// The program here is one thread, idle whenever the usage is read, so the reasoning of
    /// region.rs ("within the limit but for a folio per thread") counts the region's own
    /// threads: a thread that brings a folio in after its reclaim found nothing it could take
    /// (reclaim.rs, `throttle`: everything in flight) passes the limit by that folio: the
    /// fault handlers, the spare and the four readahead threads. And a thread that evicts
    /// puts the folio's pool copy in before its staged copy is dropped (and a store as-is, of
    /// incompressible data, saves nothing): kswapd's threads, a folio each, or with 4 KiB
    /// folios an eviction batch of 64 KiB (the region.rs test of incompressible data allows
    /// 512 KiB for that). Folios in flight in staging and the threads' buffers are in the
    /// fixed charge, so not here. The largest overshoot over the default sequences is about
    /// a third of this (`Tally::max_over_of_tolerance`).
    fn tolerance(&self) -> u64 {
        let c = &self.config;
        let faulting = (c.fault_threads + 1 + 4) as u64 * self.folio as u64;
        let evicting = match self.folio == PAGE && c.policies.batch_eviction {
            true => 64 << 10,
            false => self.folio as u64,
        };
        faulting + c.kswapd_threads as u64 * evicting
    }
}

// ---------------------------------------------------------------------------------------
// A sequence run.

/// Counts over a test's sequences: what the test covered, and the largest overshoot of the
/// limit it saw.
#[derive(Default, Debug)]
struct Tally {
    sequences: u64,
    steps: u64,
    faults: u64,
    folios_evicted: u64,
    zswpout: u64,
    pswpout: u64,
    written_back: u64,
    pswpin: u64,
    poisoned: u64,
    write_faults: u64,
    /// Device writes that failed with no failure injected (`swap_write_fail` past the
    /// injected write failures).
    write_fail_uninjected: u64,
    read_faults: u64,
    lazy_read_old: u64,
    lazy_read_zero: u64,
    /// Looks at the usage that found the pool and metadata alone past the limit.
    pool_over: u64,
    /// Bytes past the limit, at most, where the limit is checked and the region was within
    /// it at the last look.
    max_over: u64,
    /// The same, as a fraction of the tolerance.
    max_over_of_tolerance: f64,
    /// Sequences that ended past the limit, with writeback on and device writes working,
    /// and the longest wait for the region to get back within it.
    recoveries: u64,
    longest_recovery: Duration,
    /// Time spent by kind of operation, and in the checks after them.
    time: std::collections::BTreeMap<&'static str, (u64, Duration)>,
}

impl Tally {
    fn add(&mut self, o: Tally) {
        self.sequences += o.sequences;
        self.steps += o.steps;
        self.faults += o.faults;
        self.folios_evicted += o.folios_evicted;
        self.zswpout += o.zswpout;
        self.pswpout += o.pswpout;
        self.written_back += o.written_back;
        self.pswpin += o.pswpin;
        self.poisoned += o.poisoned;
        self.write_faults += o.write_faults;
        self.write_fail_uninjected += o.write_fail_uninjected;
        self.read_faults += o.read_faults;
        self.lazy_read_old += o.lazy_read_old;
        self.lazy_read_zero += o.lazy_read_zero;
        self.pool_over += o.pool_over;
        self.max_over = self.max_over.max(o.max_over);
        self.max_over_of_tolerance = self.max_over_of_tolerance.max(o.max_over_of_tolerance);
        self.recoveries += o.recoveries;
        self.longest_recovery = self.longest_recovery.max(o.longest_recovery);
        for (k, (n, d)) in o.time {
            let e = self.time.entry(k).or_default();
            e.0 += n;
            e.1 += d;
        }
    }

    fn time(&mut self, what: &'static str, took: Duration) {
        let e = self.time.entry(what).or_default();
        e.0 += 1;
        e.1 += took;
    }
}

struct Run<'a> {
    setup: &'a Setup,
    region: Region,
    dev: Arc<FaultyDevice>,
    model: Vec<PageModel>,
    /// Draws the operations and the order of the checks.
    rng: Source,
    log: Vec<String>,
    version: u64,
    /// Read failures were armed: every access goes through the kernel from then on.
    kernel_only: bool,
    /// The pipe for kernel accesses.
    pipe: (std::io::PipeReader, std::io::PipeWriter),
    writeback: bool,
    /// Injected write failures still to come: until cleared (`None` count), or the next n
    /// from the device's fault count then.
    write_faults: Option<(u64, Option<u64>)>,
    /// Writeback off or device writes failing: what the pool cannot take may have nowhere
    /// to go, and `reclaim_to` then tries for 200 ms before it gives up (so is drawn
    /// rarely). Known from the operations alone, so that drawing them stays reproducible.
    stuck: bool,
    /// Device write failures were armed since the faults were last cleared.
    writes_armed: bool,
    /// Within the limit since the conditions for it last came back.
    settled: bool,
    trace: bool,
    tally: &'a mut Tally,
}

/// Bytes a kernel access copies at once (half a default pipe).
const KERNEL_CHUNK: usize = 8 * PAGE;

impl Run<'_> {
    fn fail(&self, what: &str) -> ! {
        let r = &self.region;
        let z = r.zswap().stats();
        let zs: Vec<String> = [
            "zswpout",
            "zswpin",
            "pswpout",
            "pswpin",
            "written_back_pages",
            "swap_write_fail",
            "swap_read_fail",
            "pool_limit_hit",
            "reject_compress_poor",
        ]
        .iter()
        .map(|n| format!("{n} {}", z.get(n)))
        .collect();
        let ops: Vec<String> = self
            .log
            .iter()
            .enumerate()
            .map(|(i, l)| format!("  {i:3}: {l}"))
            .collect();
        panic!(
            "model test failed: {what}\n{}\nrerun: UZSWAP_MODEL_SEED={:#x} cargo test -p region \
             --test model {}\noperations:\n{}\nusage {:?} (limit {}, tolerance {})\nregion {:?}\n\
             zswap {}\ndevice {:?}",
            self.setup.describe(),
            self.setup.seed,
            test_name(self.setup.folio),
            ops.join("\n"),
            r.usage(),
            r.limit(),
            self.setup.tolerance(),
            r.stats(),
            zs.join(", "),
            self.dev.stats(),
        );
    }

    fn note(&mut self, line: String) {
        if self.trace {
            // Straight to the process's stderr: the harness's capture is lost if the
            // sequence kills the process.
            let _ = writeln!(
                std::io::stderr().lock(),
                "model {:#x}: {line}",
                self.setup.seed
            );
        }
        self.log.push(line);
    }

    // ----- Drawing an operation.

    fn draw_range(&mut self) -> (usize, usize) {
        let fp = self.setup.folio / PAGE;
        let max = (2 * fp).clamp(4, 1024).min(self.setup.pages);
        let n = match self.rng.gen_range(0..4) {
            0 => 1,
            1 if fp > 1 => fp.min(max),
            _ => self.rng.gen_range(1..=max),
        };
        let first = match self.rng.gen_bool(0.5) {
            // Folio aligned.
            true => self.rng.gen_range(0..=(self.setup.pages - n) / fp) * fp,
            false => self.rng.gen_range(0..=self.setup.pages - n),
        };
        (first, n.min(self.setup.pages - first))
    }

    fn draw_via(&mut self) -> Via {
        if self.kernel_only || self.rng.gen_bool(0.15) {
            Via::Kernel
        } else {
            Via::User
        }
    }

    fn draw(&mut self) -> Op {
        let setup = self.setup;
        let data = |rng: &mut Source| match rng.gen_range(0..10) {
            0..=4 => Data::Corpus,
            5..=6 => Data::Random,
            7 => Data::Zero,
            _ => Data::Same(rng.gen::<u64>() | 1),
        };
        // Weighted: writes most, then reads, discards, reclaim, tunables, device faults.
        let pick = self.rng.gen_range(0..100);
        match pick {
            0..=24 => {
                let (first, n) = self.draw_range();
                self.version += 1;
                let data = data(&mut self.rng);
                Op::Write {
                    at: first * PAGE,
                    len: n * PAGE,
                    data,
                    version: self.version,
                    via: self.draw_via(),
                }
            }
            25..=39 => {
                // Part of a page, or across page boundaries.
                let len = match self.rng.gen_range(0..3) {
                    0 => self.rng.gen_range(1..=64),
                    1 => self.rng.gen_range(1..PAGE),
                    _ => self.rng.gen_range(PAGE..=3 * PAGE),
                }
                .min(setup.pages * PAGE);
                let at = self.rng.gen_range(0..=setup.pages * PAGE - len);
                self.version += 1;
                let data = data(&mut self.rng);
                Op::Write {
                    at,
                    len,
                    data,
                    version: self.version,
                    via: self.draw_via(),
                }
            }
            40..=47 => {
                let (first, n) = self.draw_range();
                Op::Read {
                    first,
                    n,
                    via: self.draw_via(),
                }
            }
            48..=55 => {
                let (first, n) = self.draw_range();
                Op::Discard { first, n }
            }
            56..=61 => {
                let (first, n) = self.draw_range();
                Op::FreeLazily { first, n }
            }
            62..=68 if self.stuck && !self.rng.gen_bool(0.05) => self.draw(),
            62..=68 => {
                let usage = self.region.usage().total();
                Op::ReclaimTo(match self.rng.gen_range(0..3) {
                    0 => 0,
                    1 => self.region.limit() / 2,
                    _ => usage.saturating_sub(self.rng.gen_range(1..=4) * setup.folio as u64),
                })
            }
            69..=71 => Op::Compressor(COMPRESSORS.choose(&mut self.rng).unwrap()),
            72..=74 => Op::Enabled(self.rng.gen_bool(0.7)),
            75..=77 => Op::Writeback(self.rng.gen_bool(0.7)),
            78..=79 => Op::Writethrough(
                [
                    zswap::params::Writethrough::Off,
                    zswap::params::Writethrough::On,
                    zswap::params::Writethrough::Auto,
                ][self.rng.gen_range(0..3)],
            ),
            80..=81 => Op::MaxPoolPercent(*[0, 1, 5, 20, 50, 100].choose(&mut self.rng).unwrap()),
            82 => Op::AcceptThreshold(*[0, 50, 90, 100].choose(&mut self.rng).unwrap()),
            83 => Op::Shrinker(self.rng.gen_bool(0.5)),
            84 => Op::ZswapMax(match self.rng.gen_range(0..3) {
                0 => 0,
                1 => self.rng.gen_range(1..=8) * setup.folio as u64,
                _ => u64::MAX,
            }),
            85..=88 => Op::FailNextWrites(
                self.rng.gen_range(1..=8),
                *FAULT_KINDS.choose(&mut self.rng).unwrap(),
            ),
            89..=90 => Op::FailWrites(*FAULT_KINDS.choose(&mut self.rng).unwrap()),
            91..=94 => Op::ClearFaults,
            95..=96 if setup.read_faults => Op::FailNextReads(self.rng.gen_range(1..=4)),
            _ => Op::Idle(self.rng.gen_range(0..=2)),
        }
    }

    // ----- Carrying an operation out, on the region and on the model.

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Write {
                at,
                len,
                data,
                version,
                via,
            } => self.write(at, len, data, version, via),
            Op::Read { first, n, via } => self.read(first, n, via),
            Op::Discard { first, n } => {
                self.region
                    .discard(first * PAGE, n * PAGE)
                    .unwrap_or_else(|e| self.fail(&format!("discard: {e}")));
                for p in &mut self.model[first..first + n] {
                    *p = PageModel::zero();
                }
            }
            Op::FreeLazily { first, n } => self.free_lazily(first, n),
            Op::ReclaimTo(target) => self.region.reclaim_to(target),
            Op::Compressor(name) => {
                let z = self.region.zswap();
                // By name as sysfs takes it, or as a spec.
                let set = if self.rng.gen_bool(0.5) {
                    z.set_param("compressor", name).map_err(|e| e.to_string())
                } else {
                    let spec: CompressorSpec = name.parse().unwrap();
                    z.set_compressor(spec).map_err(|e| e.to_string())
                };
                set.unwrap_or_else(|e| self.fail(&format!("setting the compressor: {e}")));
            }
            Op::Enabled(on) => self.region.zswap().params().set_enabled(on),
            Op::Writeback(on) => {
                self.region.group().set_writeback_enabled(on);
                self.writeback = on;
            }
            Op::Writethrough(mode) => self.region.zswap().params().set_writethrough_mode(mode),
            Op::MaxPoolPercent(p) => self
                .region
                .zswap()
                .params()
                .set_max_pool_percent(p)
                .unwrap(),
            Op::AcceptThreshold(p) => self
                .region
                .zswap()
                .params()
                .set_accept_threshold_percent(p)
                .unwrap(),
            Op::Shrinker(on) => self.region.zswap().params().set_shrinker_enabled(on),
            Op::ZswapMax(bytes) => self.region.group().set_zswap_max(bytes),
            Op::FailNextWrites(n, kind) => {
                self.dev.fail_next_writes(n, kind);
                self.writes_armed = true;
                let all = self.write_faults.is_some_and(|(_, n)| n.is_none());
                if !all {
                    self.write_faults = Some((self.write_faults_so_far(), Some(n.into())));
                }
            }
            Op::FailWrites(kind) => {
                self.dev.fail_writes(kind);
                self.writes_armed = true;
                self.write_faults = Some((0, None));
            }
            Op::FailNextReads(n) => {
                self.kernel_only = true;
                self.dev.fail_next_reads(n);
            }
            Op::ClearFaults => {
                self.dev.clear();
                self.write_faults = None;
                self.writes_armed = false;
            }
            Op::Idle(ms) => std::thread::sleep(Duration::from_millis(ms)),
        }
        self.stuck = !self.writeback || self.writes_armed;
    }

    fn write_faults_so_far(&self) -> u64 {
        let s = self.dev.stats();
        s.write_eio + s.write_enospc + s.short_writes
    }

    fn write(&mut self, at: usize, len: usize, data: Data, version: u64, via: Via) {
        let bytes = write_bytes(data, at, len, version);
        match via {
            Via::User => {
                self.region.as_mut_slice()[at..at + len].copy_from_slice(&bytes);
                self.model_write(at, &bytes);
            }
            Via::Kernel => {
                let mut done = 0;
                while done < len {
                    let n = (len - done).min(KERNEL_CHUNK);
                    let from = at + done;
                    let wrote = self.kernel_write(from, &bytes[done..done + n]);
                    self.model_write(from, &bytes[done..done + wrote]);
                    if wrote < n {
                        // The kernel stopped at a page it could not fault in: poisoned.
                        self.found_poisoned((from + wrote) / PAGE);
                        // The rest of the write is left out.
                        return;
                    }
                    done += n;
                }
            }
        }
    }

    fn model_write(&mut self, at: usize, bytes: &[u8]) {
        let mut pos = at;
        while pos < at + bytes.len() {
            let page = pos / PAGE;
            let end = (at + bytes.len()).min((page + 1) * PAGE);
            self.model[page].patch(pos - page * PAGE, &bytes[pos - at..end - at]);
            pos = end;
        }
    }

    fn free_lazily(&mut self, first: usize, n: usize) {
        // A page that may hold either of two contents is read first: the model keeps one
        // old content for a lazily freed page.
        for p in first..first + n {
            if self.model[p].cands.len() > 1 {
                self.read(
                    p,
                    1,
                    if self.kernel_only {
                        Via::Kernel
                    } else {
                        Via::User
                    },
                );
            }
        }
        self.region
            .free_lazily(first * PAGE, n * PAGE)
            .unwrap_or_else(|e| self.fail(&format!("free_lazily: {e}")));
        for p in &mut self.model[first..first + n] {
            p.free_lazily();
        }
    }

    fn read(&mut self, first: usize, n: usize, via: Via) {
        match via {
            Via::User => {
                for p in first..first + n {
                    self.check_user(p);
                }
            }
            Via::Kernel => self.check_kernel(first, n),
        }
    }

    fn check_user(&mut self, p: usize) {
        assert!(!self.kernel_only && !self.model[p].poisoned);
        let was_lazy = self.model[p].lazy;
        let seen = {
            let mem = self.region.as_mut_slice();
            self.model[p].observe(&mem[p * PAGE..(p + 1) * PAGE])
        };
        self.seen(p, seen, was_lazy);
    }

    fn seen(&mut self, p: usize, seen: Seen, was_lazy: bool) {
        match seen {
            Seen::Fine if was_lazy && self.model[p].lazy => self.tally.lazy_read_old += 1,
            Seen::Fine if was_lazy => self.tally.lazy_read_zero += 1,
            Seen::Fine => {}
            Seen::Wrong(why) => self.fail(&format!("page {p}: {why}")),
        }
    }

    /// Pages `first..first + n` read by the kernel, copying them into a pipe.
    fn check_kernel(&mut self, first: usize, n: usize) {
        let mut buf = vec![0u8; KERNEL_CHUNK];
        let mut p = first;
        while p < first + n {
            let k = (first + n - p).min(KERNEL_CHUNK / PAGE);
            let copied = {
                let mem = self.region.as_mut_slice();
                match self.pipe.1.write(&mem[p * PAGE..(p + k) * PAGE]) {
                    Ok(c) => c,
                    Err(e) if e.raw_os_error() == Some(libc::EFAULT) => 0,
                    Err(e) => panic!("writing the region into a pipe: {e}"),
                }
            };
            self.pipe.0.read_exact(&mut buf[..copied]).unwrap();
            for (i, got) in buf[..copied / PAGE * PAGE].chunks(PAGE).enumerate() {
                let was_lazy = self.model[p + i].lazy;
                let seen = self.model[p + i].observe(got);
                self.seen(p + i, seen, was_lazy);
            }
            if copied < k * PAGE {
                // The copy stopped at a page the kernel could not fault in.
                assert!(copied.is_multiple_of(PAGE), "copied {copied}");
                let bad = p + copied / PAGE;
                self.found_poisoned(bad);
                p = bad + 1;
            } else {
                p += k;
            }
        }
    }

    /// `bytes` copied into the region at `at` by the kernel (read(2) from a pipe): how many
    /// bytes it copied before a page it could not fault in.
    fn kernel_write(&mut self, at: usize, bytes: &[u8]) -> usize {
        self.pipe.1.write_all(bytes).unwrap();
        let mut done = 0;
        while done < bytes.len() {
            let mem = self.region.as_mut_slice();
            match self.pipe.0.read(&mut mem[at + done..at + bytes.len()]) {
                Ok(0) => unreachable!("the pipe's writer is open"),
                Ok(c) => done += c,
                Err(e) if e.raw_os_error() == Some(libc::EFAULT) => break,
                Err(e) => panic!("reading a pipe into the region: {e}"),
            }
        }
        if done < bytes.len() {
            // Drain what the region did not take.
            let mut rest = vec![0u8; bytes.len() - done];
            self.pipe.0.read_exact(&mut rest).unwrap();
        }
        done
    }

    /// Page `p` faulted for the kernel: it must be poisoned, which only a device read failure
    /// may do; it stays so until discarded.
    fn found_poisoned(&mut self, p: usize) {
        if !self.kernel_only {
            self.fail(&format!(
                "page {p} is poisoned (EFAULT on a kernel access) with no device read failure"
            ));
        }
        if !self.model[p].poisoned {
            // Poisoned only if it still faults on its own.
            let mut one = [0u8; PAGE];
            let mem = self.region.as_mut_slice();
            match self.pipe.1.write(&mem[p * PAGE..(p + 1) * PAGE]) {
                Err(e) if e.raw_os_error() == Some(libc::EFAULT) => {}
                Ok(c) => {
                    self.pipe.0.read_exact(&mut one[..c]).unwrap();
                    self.fail(&format!(
                        "page {p} faulted for the kernel once, then read ({c} bytes)"
                    ));
                }
                Err(e) => panic!("writing the region into a pipe: {e}"),
            }
            self.model[p].poisoned = true;
            self.tally.poisoned += 1;
        }
    }

    // ----- After every step.

    /// Every page against the model, in one of a few orders (a scan forwards or backwards
    /// meets readahead and drop-behind; a shuffled one does not).
    fn check_all(&mut self) {
        let pages = self.setup.pages;
        let mut order: Vec<usize> = (0..pages).collect();
        match self.rng.gen_range(0..4) {
            0 | 1 => {}
            2 => order.reverse(),
            _ => order.shuffle(&mut self.rng),
        }
        if self.kernel_only {
            if order[0] == 0 && order.windows(2).all(|w| w[1] == w[0] + 1) {
                self.check_kernel(0, pages);
            } else {
                for p in order {
                    self.check_kernel(p, 1);
                }
            }
        } else {
            for p in order {
                self.check_user(p);
            }
        }
    }

    /// Whether the region can keep its limit now: writeback on (else what the pool cannot
    /// take has nowhere to go) and device writes working.
    fn limit_kept(&mut self) -> bool {
        if let Some((from, Some(n))) = self.write_faults {
            if self.write_faults_so_far() >= from + n {
                self.write_faults = None;
            }
        }
        self.writeback && self.write_faults.is_none()
    }

    /// The usage against the limit. Where the region can keep it and has been within it
    /// since those conditions last came back (`settled`), it must be within the limit and
    /// the tolerance at every look. Until then it may be anywhere (it went past while writes
    /// failed or writeback was off, and reclaim brings it back in its own time: kswapd
    /// every 20 ms, or the next fault); `settle` at the end of a sequence waits for it.
    /// The region's counters (all of them count up: its latency quantiles aside) and the
    /// engine's event counts, by name.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        let z = self.region.zswap().stats();
        let mut c: Vec<(&'static str, u64)> = self
            .region
            .stats()
            .lines()
            .into_iter()
            .filter(|(name, _)| !name.starts_with("fault_latency"))
            .collect();
        c.extend(ENGINE_COUNTERS.iter().map(|&n| (n, z.get(n))));
        c
    }

    /// After a step: no counter went back (`before`, the counters before it), and those that
    /// count what must not happen have not moved: pages poisoned or device reads failed with
    /// no read failure armed, a page the region lost track of, the process killed.
    fn check_counters(&mut self, before: &[(&'static str, u64)]) {
        let after = self.counters();
        for (&(name, was), &(_, now)) in before.iter().zip(&after) {
            if now < was {
                self.fail(&format!("{name} went back from {was} to {now}"));
            }
        }
        let get = |name: &str| after.iter().find(|(n, _)| *n == name).map_or(0, |c| c.1);
        let mut never = vec!["lost_track", "oom", "oom_kill"];
        if !self.kernel_only {
            never.extend(["poisoned", "swap_read_fail"]);
        }
        for name in never {
            if get(name) != 0 {
                self.fail(&format!("{name} is {}", get(name)));
            }
        }
    }

    fn check_limit(&mut self) {
        if !self.limit_kept() {
            self.settled = false;
            return;
        }
        let tolerance = self.setup.tolerance();
        let (total, limit) = self.usage_and_limit();
        if !self.settled {
            self.settled = total <= limit;
            return;
        }
        self.over(total, limit, tolerance);
        if total > limit + tolerance {
            self.fail(&format!(
                "usage {total} is {} bytes past the limit {limit}, more than the tolerance \
                 {tolerance}",
                total - limit
            ));
        }
    }

    /// The region must get back within its limit once it can keep it.
    fn settle(&mut self) {
        if !self.limit_kept() || self.settled {
            return;
        }
        let t = Instant::now();
        loop {
            let (total, limit) = self.usage_and_limit();
            if total <= limit {
                break;
            }
            if t.elapsed() > Duration::from_secs(5) {
                self.fail(&format!(
                    "usage {total} stays past the limit {limit} 5 s after the sequence ended, \
                     with writeback on and device writes working"
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        self.tally.recoveries += 1;
        self.tally.longest_recovery = self.tally.longest_recovery.max(t.elapsed());
        self.settled = true;
    }

    /// The usage and the region's limit. Looks that find the pool and the region's own
    /// metadata alone past the limit are counted: reclaim then writes the pool back
    /// (`the_pool_alone_over_the_limit_is_written_back`, tests/region.rs).
    fn usage_and_limit(&mut self) -> (u64, u64) {
        let u = self.region.usage();
        let limit = self.region.limit();
        if u.pool + u.metadata > limit {
            self.tally.pool_over += 1;
        }
        (u.total(), limit)
    }

    fn over(&mut self, total: u64, limit: u64, tolerance: u64) {
        let over = total.saturating_sub(limit);
        self.tally.max_over = self.tally.max_over.max(over);
        let of = over as f64 / tolerance as f64;
        if of > self.tally.max_over_of_tolerance {
            self.tally.max_over_of_tolerance = of;
        }
    }
}

/// A source of the numbers operations are drawn from.
type Source = Box<dyn rand::RngCore>;

/// Numbers read from bytes (a fuzzer's input), zeros once they run out: what a fuzzer
/// changes in its input changes the operations drawn.
struct BytesSource {
    bytes: Vec<u8>,
    at: usize,
}

impl BytesSource {
    fn new(bytes: &[u8]) -> Self {
        BytesSource {
            bytes: bytes.to_vec(),
            at: 0,
        }
    }
}

impl rand::RngCore for BytesSource {
    fn next_u32(&mut self) -> u32 {
        self.next_u64() as u32
    }

    fn next_u64(&mut self) -> u64 {
        let mut word = [0u8; 8];
        self.fill_bytes(&mut word);
        u64::from_le_bytes(word)
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for b in dest {
            *b = self.bytes.get(self.at).copied().unwrap_or(0);
            self.at += 1;
        }
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

/// Run one sequence of operations drawn from `bytes`: the first 8 pick the setup (of folios of
/// `folio` bytes), the rest the operations; the region goes to `dropper`. The fuzz target's
/// entry, and a test's.
fn run_bytes(folio: usize, bytes: &[u8], dropper: &mut Dropper) {
    let (seed, rest) = bytes.split_at(bytes.len().min(8));
    let mut word = [0u8; 8];
    word[..seed.len()].copy_from_slice(seed);
    let setup = Setup::draw(u64::from_le_bytes(word), folio);
    let source: Source = Box::new(BytesSource::new(rest));
    run_sequence(&setup, Ops::Drawn(source), &mut Vec::new(), &mut Tally::default(), dropper);
}

/// Where a sequence's operations come from.
enum Ops<'a> {
    /// Drawn from the setup's seed.
    Seeded,
    /// These, in order (a shrink's).
    Script(&'a [Op]),
    /// Drawn from these numbers (a fuzzer's bytes), for the setup's steps.
    Drawn(Source),
}

/// Run one sequence; the region goes to `dropper`. Each operation applied is pushed on
/// `applied` as it starts, so that a failure leaves the sequence that led to it.
fn run_sequence(
    setup: &Setup,
    ops: Ops,
    applied: &mut Vec<Op>,
    tally: &mut Tally,
    dropper: &mut Dropper,
) {
    let (script, source) = match ops {
        Ops::Seeded => (None, None),
        Ops::Script(script) => (Some(script), None),
        Ops::Drawn(source) => (None, Some(source)),
    };
    let trace = std::env::var_os("UZSWAP_MODEL_TRACE").is_some();
    let inner: Arc<dyn BackingDevice> = if setup.file_device {
        Arc::new(
            FileDevice::create_with(None, setup.pages as u32, (setup.folio / PAGE) as u32, true)
                .expect("a swap file in the temporary directory"),
        )
    } else {
        Arc::new(MemoryDevice::new(setup.pages as u32))
    };
    let dev = Arc::new(FaultyDevice::new(inner));
    let config = setup.config.clone().device(dev.clone());
    let region = Region::new(setup.pages * PAGE, config)
        .unwrap_or_else(|e| panic!("{}: Region::new: {e}", setup.describe()));
    let read_faults = setup.read_faults && region.kernel_faults_served();
    if trace {
        let _ = writeln!(std::io::stderr().lock(), "model: {}", setup.describe());
    }
    let mut run = Run {
        setup,
        region,
        dev,
        model: vec![PageModel::zero(); setup.pages],
        rng: source.unwrap_or_else(|| Box::new(SmallRng::seed_from_u64(setup.seed))),
        log: Vec::new(),
        version: 0,
        kernel_only: false,
        pipe: std::io::pipe().unwrap(),
        writeback: setup.config.writeback,
        write_faults: None,
        stuck: !setup.config.writeback,
        writes_armed: false,
        settled: false,
        trace,
        tally,
    };
    let steps = script.map_or(setup.steps, <[Op]>::len);
    for step in 0..steps {
        let mut op = match script {
            Some(script) => script[step].clone(),
            None => run.draw(),
        };
        // Without kernel-mode faults, a poisoned page could only be met by the program
        // itself, which dies of it: no read failures then.
        if !read_faults && matches!(op, Op::FailNextReads(_)) {
            op = Op::Idle(1);
        }
        if !run.region.kernel_faults_served() {
            if let Op::Write { via, .. } | Op::Read { via, .. } = &mut op {
                *via = Via::User;
            }
        }
        // Poisoned pages are never written nor lazily freed: discarded instead, which makes
        // them ordinary memory again.
        let range = match op {
            Op::Write { at, len, .. } => Some((at / PAGE, (at + len).div_ceil(PAGE))),
            Op::FreeLazily { first, n } => Some((first, first + n)),
            _ => None,
        };
        if let Some((a, b)) = range {
            if let Some(p) = (a..b).find(|&p| run.model[p].poisoned) {
                op = Op::Discard { first: p, n: 1 };
            }
        }
        run.note(format!("{op:?}"));
        applied.push(op.clone());
        let counters = run.counters();
        let was_settled = run.settled;
        let t = Instant::now();
        run.apply(&op);
        run.tally.time(op_name(&op), t.elapsed());
        if matches!(op, Op::ReclaimTo(_)) {
            let k = match (run.writeback, run.write_faults.is_some()) {
                (true, false) => "reclaim_to ok",
                (false, _) => "reclaim_to wb off",
                (true, true) => "reclaim_to wfaults",
            };
            run.tally.time(k, t.elapsed());
        }
        let t = Instant::now();
        run.check_limit();
        run.tally.time("check_limit", t.elapsed());
        let t = Instant::now();
        run.check_all();
        run.tally.time("check_all", t.elapsed());
        run.check_limit();
        run.check_counters(&counters);
        // Each time the region comes back under its limit, every page is where the
        // region's counts say (reclaim held off while it is checked).
        if run.settled && !was_settled {
            let t = Instant::now();
            if let Err(e) = run.region.audit() {
                run.fail(&format!("audit after the region settled: {e}"));
            }
            run.tally.time("audit", t.elapsed());
        }
        run.tally.steps += 1;
    }
    run.settle();
    if let Err(e) = run.region.audit() {
        run.fail(&format!("audit: {e}"));
    }
    let s = run.region.stats();
    let z = run.region.zswap().stats();
    let d = run.dev.stats();
    if run.trace {
        let _ = writeln!(
            std::io::stderr().lock(),
            "model {:#x}: done; {s:?}; device {d:?}; pswpout {} written back {}",
            setup.seed,
            z.get("pswpout"),
            z.get("written_back_pages")
        );
    }
    let t = &mut *run.tally;
    t.sequences += 1;
    t.faults += s.faults;
    t.folios_evicted += s.folios_evicted;
    t.zswpout += z.get("zswpout");
    t.pswpout += z.get("pswpout");
    t.written_back += z.get("written_back_pages");
    t.pswpin += z.get("pswpin");
    let injected = d.write_eio + d.write_enospc + d.short_writes;
    t.write_faults += injected;
    t.write_fail_uninjected += z.get("swap_write_fail").saturating_sub(injected);
    t.read_faults += d.read_eio;
    dropper.drop(run.region);
}

/// Drops regions on threads of their own: a drop waits up to 100 ms for the region's
/// threads' poll timeouts, and a sequence takes a few milliseconds.
#[derive(Default)]
struct Dropper(std::collections::VecDeque<std::thread::JoinHandle<()>>);

impl Dropper {
    fn drop(&mut self, region: Region) {
        if self.0.len() >= 8 {
            self.0.pop_front().unwrap().join().unwrap();
        }
        self.0.push_back(std::thread::spawn(move || drop(region)));
    }
}

impl Drop for Dropper {
    fn drop(&mut self) {
        for h in self.0.drain(..) {
            let _ = h.join();
        }
    }
}

fn op_name(op: &Op) -> &'static str {
    match op {
        Op::Write { len, .. } if len % PAGE == 0 => "write pages",
        Op::Write { .. } => "write part",
        Op::Read { .. } => "read",
        Op::Discard { .. } => "discard",
        Op::FreeLazily { .. } => "free_lazily",
        Op::ReclaimTo(0) => "reclaim_to 0",
        Op::ReclaimTo(_) => "reclaim_to",
        Op::Idle(_) => "idle",
        Op::FailNextWrites(..) | Op::FailWrites(_) | Op::FailNextReads(_) | Op::ClearFaults => {
            "device"
        }
        _ => "tunable",
    }
}

fn test_name(folio: usize) -> &'static str {
    match folio {
        4096 => "model_4k_folios",
        16384 => "model_16k_folios",
        65536 => "model_64k_folios",
        _ => "model_2m_folios",
    }
}

