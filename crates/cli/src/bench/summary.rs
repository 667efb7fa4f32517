//! What a workload benchmark prints when its runs are done: the side-by-side table of medians
//! (sizes in MiB, throughput in MiB/s, time in s, latency in us), marks on the figures a
//! limit affects with a footnote for each, a hint when the folio size leaves a small limit
//! little room for data, and a last line, the verdict: what was verified, the headline
//! figures, and the ratios against the peers.

use std::collections::BTreeMap;

use zswap::PAGE_SIZE;

use super::systems::{System, WorkloadResult};
use crate::size::fmt_unit;

const MIB: f64 = (1u64 << 20) as f64;

/// Mark on a memory figure above its system's limit.
pub const OVER_MARK: &str = "*";
/// Mark on a ratio against a system that held more memory than the other could.
pub const RATIO_MARK: &str = "!";

fn mib(bytes: u64) -> f64 {
    bytes as f64 / MIB
}

/// The runs of one system.
pub struct Column<'a> {
    /// The system that ran them.
    pub system: &'a System,
    /// The runs that finished.
    pub runs: &'a [WorkloadResult],
    /// Runs left out (failed).
    pub failed: usize,
    /// Median of every figure over `runs`, in print order.
    pub figures: Vec<(String, f64)>,
}

impl Column<'_> {
    fn name(&self) -> String {
        self.system.to_string()
    }

    fn get(&self, figure: &str) -> f64 {
        self.figures
            .iter()
            .find(|(n, _)| n == figure)
            .map_or(f64::NAN, |(_, v)| *v)
    }

    /// The limit the runs ran under: the largest, where it changed from run to run (uzswap
    /// under what a kernel peer held in each round).
    fn limit(&self) -> Option<u64> {
        self.runs.iter().map(|r| r.limit_bytes).max()
    }

    /// The most any run held (uzswap: its charge, pool included; a kernel peer: its
    /// cgroup's usage plus the zswap pool, which a v1 cgroup does not charge).
    fn held(&self) -> Option<u64> {
        self.runs
            .iter()
            .filter_map(|r| r.max_memory_bytes.or(r.max_usage_bytes))
            .max()
    }

    /// Bytes held over the limit, at the most.
    fn over(&self) -> u64 {
        match (self.held(), self.limit()) {
            (Some(h), Some(l)) => h.saturating_sub(l),
            _ => 0,
        }
    }

    /// The uzswap side's folio size, from its settings.
    fn folio_size(&self) -> Option<u64> {
        self.runs
            .first()
            .and_then(|r| r.settings.get("folio_size")?.parse().ok())
    }

    /// What the system may hold over its limit and still be at it: 1 MiB of sampling
    /// slack, or for uzswap a folio per thread bringing one in (taken as four, as the least
    /// limit counts them) if that is more.
    fn allowance(&self) -> u64 {
        let folios = match self.system {
            System::Uzswap(_) => 4 * self.folio_size().unwrap_or(PAGE_SIZE as u64),
            _ => 0,
        };
        folios.max(1 << 20)
    }

    /// Held more over its limit than its allowance: its figures had more memory.
    fn notably_over(&self) -> bool {
        self.over() > self.allowance()
    }
}

/// The figures a limit bears on: the memory ones, marked when above the limit.
fn is_memory_figure(name: &str) -> bool {
    matches!(
        name,
        "max RSS MiB" | "max charged MiB" | "max charged + pool MiB"
    )
}

/// The headline figures: accesses/s where there are any, else each phase's total MiB/s.
fn headline(cols: &[Column]) -> Vec<String> {
    let names: Vec<&String> = cols
        .iter()
        .flat_map(|c| c.figures.iter().map(|(n, _)| n))
        .collect();
    if names.iter().any(|n| *n == "accesses/s") {
        return vec!["accesses/s".into()];
    }
    let mut out: Vec<String> = Vec::new();
    for n in names {
        if n.ends_with(" MiB/s (total)") && !out.contains(n) {
            out.push(n.clone());
        }
    }
    out
}

/// A figure as printed: whole above 1000 or when whole, else three decimals; `-` for none.
pub fn fmt_num(v: f64) -> String {
    if v.is_nan() {
        "-".into()
    } else if v.abs() >= 1000.0 || v == v.trunc() {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// A ratio's flag: which of the two systems held memory past its limit that the other did
/// not have, and how much over its own limit.
fn ratio_flag(a: &Column, b: &Column) -> Option<(String, u64)> {
    let more_than = |x: &Column, y: &Column| {
        x.notably_over() && x.held().unwrap_or(0) > y.limit().unwrap_or(0) + y.allowance()
    };
    if more_than(a, b) {
        Some((a.name(), a.over()))
    } else if more_than(b, a) {
        Some((b.name(), b.over()))
    } else {
        None
    }
}

/// The table, its footnotes and the hint, and the verdict, as lines.
#[derive(Debug)]
pub struct Summary {
    /// The table's lines.
    pub table: Vec<String>,
    /// Footnotes (figures flagged over a limit) and hints.
    pub notes: Vec<String>,
    /// The one-line verdict.
    pub verdict: String,
}

/// The side-by-side summary of a workload's runs: one column per system, then each system's
/// ratio to the first. `verified` says what every finished run checked ("every byte of 2 x
/// 256 MiB read back correctly"); `runs` is the runs asked of each system.
pub fn side_by_side(cols: &[Column], runs: usize, verified: &str, hint: Option<String>) -> Summary {
    let mut rows: Vec<String> = Vec::new();
    for c in cols {
        for (k, _) in &c.figures {
            if !rows.contains(k) {
                rows.push(k.clone());
            }
        }
    }
    let any_failed = cols.iter().any(|c| c.failed > 0);
    let mut header = vec![match any_failed {
        false => format!("figure (median of {})", plural(runs, "run")),
        true => "figure (median of the runs that finished)".to_string(),
    }];
    header.extend(cols.iter().map(Column::name));
    let base = &cols[0];
    header.extend(
        cols.iter()
            .skip(1)
            .map(|c| format!("{}/{}", c.name(), base.name())),
    );
    let headline = headline(cols);
    let flags: Vec<Option<(String, u64)>> =
        cols.iter().skip(1).map(|c| ratio_flag(c, base)).collect();
    let mut table = vec![header];
    if any_failed {
        let mut line = vec!["runs left out (failed)".to_string()];
        line.extend(cols.iter().map(|c| c.failed.to_string()));
        line.extend(cols.iter().skip(1).map(|_| "-".to_string()));
        table.push(line);
    }
    for k in &rows {
        let mut line = vec![k.clone()];
        for c in cols {
            let v = c.get(k);
            let over = is_memory_figure(k) && c.limit().is_some_and(|l| v > mib(l));
            line.push(format!(
                "{}{}",
                fmt_num(v),
                if over { OVER_MARK } else { "" }
            ));
        }
        let b = base.get(k);
        for (c, flag) in cols.iter().skip(1).zip(&flags) {
            let v = c.get(k);
            line.push(if b != 0.0 && !b.is_nan() && !v.is_nan() {
                let mark = match flag {
                    Some(_) if headline.contains(k) => RATIO_MARK,
                    _ => "",
                };
                format!("{:.2}{mark}", v / b)
            } else {
                "-".into()
            });
        }
        table.push(line);
    }
    let mut notes = Vec::new();
    let uzswap_limit = cols
        .iter()
        .filter(|c| !c.system.is_kernel())
        .filter_map(Column::limit)
        .max();
    for c in cols.iter().filter(|c| c.over() > 0) {
        notes.push(over_note(c, uzswap_limit));
    }
    if flags.iter().any(Option::is_some) && !headline.is_empty() {
        notes.push(format!(
            "{RATIO_MARK} a ratio between systems that did not have the same memory: one held \
             more over its limit than the other's limit allowed (see above)"
        ));
    }
    notes.extend(hint);
    Summary {
        table: align(&table),
        notes,
        verdict: verdict(cols, runs, verified, &headline, &flags),
    }
}

fn plural(n: usize, what: &str) -> String {
    match n {
        1 => format!("1 {what}"),
        _ => format!("{n} {what}s"),
    }
}

/// The footnote of a system that held memory over its limit (`uzswap_limit`: the limit of a
/// uzswap system that ran beside it, which may have been given as much).
fn over_note(c: &Column, uzswap_limit: Option<u64>) -> String {
    let (over, limit) = (mib(c.over()), mib(c.limit().unwrap_or(0)));
    let head = format!(
        "{OVER_MARK} {} held up to {over:.1} MiB over its {limit:.0} MiB limit",
        c.name()
    );
    match c.system {
        System::Uzswap(_) => {
            let folio = fmt_unit(c.folio_size().unwrap_or(PAGE_SIZE as u64));
            if c.notably_over() {
                format!(
                    "{head}: more than the folios in flight explain (a {folio} folio per thread \
                     bringing one in)"
                )
            } else {
                format!(
                    "{head}: a fault brings its folio in once reclaim has made what room it \
                     can, so each thread bringing one in may have a folio ({folio}) in flight"
                )
            }
        }
        _ => {
            let controller = c
                .runs
                .first()
                .and_then(|r| r.settings.get("reclaim"))
                .is_some_and(|r| r == "controller");
            let why = match controller {
                true => {
                    "cgroup usage plus the zswap pool, which a v1 cgroup does not charge; the \
                     page-out controller lets usage run up to 64 MiB past the limit"
                }
                false => "cgroup usage plus the zswap pool, which a v1 cgroup does not charge",
            };
            let held = c.held().unwrap_or(0).div_ceil(1 << 20);
            match uzswap_limit {
                Some(l) if l > c.limit().unwrap_or(0) => format!(
                    "{head} ({why}); uzswap ran under what the kernel held in the same round \
                     (equal memory)"
                ),
                Some(_) => format!(
                    "{head} ({why}); to give uzswap as much: leave out --same-limit, or \
                     --uzswap-memory-high {held}M"
                ),
                None => format!("{head} ({why})"),
            }
        }
    }
}

/// Columns padded to one width each: the first left-aligned, the rest right-aligned.
pub fn align(table: &[Vec<String>]) -> Vec<String> {
    let widths: Vec<usize> = (0..table.first().map_or(0, Vec::len))
        .map(|i| table.iter().map(|l| l[i].len()).max().unwrap_or(0))
        .collect();
    table
        .iter()
        .map(|l| {
            l.iter()
                .enumerate()
                .map(|(i, c)| match i {
                    0 => format!("{c:<w$}", w = widths[i]),
                    _ => format!("{c:>w$}", w = widths[i]),
                })
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_string()
        })
        .collect()
}

/// A headline figure as the verdict says it: "write 679 MiB/s", "152345 accesses/s".
fn say_figure(name: &str, v: f64) -> String {
    match name.strip_suffix(" MiB/s (total)") {
        Some(phase) => format!("{phase} {v:.0} MiB/s"),
        None => format!("{v:.0} {name}"),
    }
}

fn verdict(
    cols: &[Column],
    runs: usize,
    verified: &str,
    headline: &[String],
    flags: &[Option<(String, u64)>],
) -> String {
    let mut left_out: Vec<String> = Vec::new();
    for c in cols.iter().filter(|c| c.failed > 0) {
        left_out.push(match c.runs.len() {
            0 => format!("{}: no run finished", c.name()),
            _ => format!("{}: {} left out", c.name(), plural(c.failed, "run")),
        });
    }
    let each = match cols.len() {
        1 => "",
        _ => " of each system",
    };
    let mut s = format!("verified: {verified} ({}{each}", plural(runs, "run"));
    if !left_out.is_empty() {
        s.push_str(&format!("; {}", left_out.join(", ")));
    }
    s.push(')');
    let base = &cols[0];
    if !base.runs.is_empty() {
        let figs: Vec<String> = headline
            .iter()
            .map(|h| say_figure(h, base.get(h)))
            .collect();
        s.push_str(&format!("; {} {}", base.name(), figs.join(", ")));
    }
    for (c, flag) in cols.iter().skip(1).zip(flags) {
        if c.runs.is_empty() || base.runs.is_empty() {
            continue;
        }
        let ratios: Vec<String> = headline
            .iter()
            .map(|h| format!("{:.2}x", c.get(h) / base.get(h)))
            .collect();
        s.push_str(&format!("; {} {}", c.name(), ratios.join(", ")));
        if let Some((who, over)) = flag {
            s.push_str(&format!(
                " ({who} held {:.0} MiB over its limit)",
                mib(*over).ceil()
            ));
        }
    }
    s
}

/// The sweep's table: a row per heap size, a column per system, each cell its median
/// accesses/s relative to the best cell (and the figure itself); then the verdict.
pub fn sweep(
    systems: &[System],
    sizes: &[(f64, u64)],
    cells: &[Vec<SweepCell>],
    runs: usize,
) -> Summary {
    let best = best_cell(cells);
    let mut table = vec![{
        let mut h = vec!["heap %".to_string(), "heap MiB".to_string()];
        h.extend(
            systems
                .iter()
                .map(|s| format!("{s} (accesses/s; MiB held)")),
        );
        h
    }];
    for ((pct, size), row) in sizes.iter().zip(cells) {
        let mut line = vec![format!("{pct:.1}"), format!("{}", size >> 20)];
        line.extend(row.iter().map(|c| {
            let v = c.accesses_per_s;
            format!(
                "{:.3} ({v:.0}; {:.0})",
                v / best,
                c.held_bytes / (1 << 20) as f64
            )
        }));
        table.push(line);
    }
    let mut verdict = format!(
        "verified: every heap read back correctly after its accesses ({} cells x {} x {})",
        sizes.len(),
        plural(systems.len(), "system"),
        plural(runs, "run")
    );
    if let (Some((pct, _)), Some(last)) = (sizes.last(), cells.last()) {
        let at: Vec<String> = systems
            .iter()
            .zip(last)
            .map(|(s, c)| format!("{s} {:.3}", c.accesses_per_s / best))
            .collect();
        verdict.push_str(&format!(
            "; at {pct:.1}% of the limit: {} of the best cell ({best:.0} accesses/s)",
            at.join(", ")
        ));
    }
    Summary {
        table: align(&table),
        notes: Vec::new(),
        verdict,
    }
}

/// One cell of the sweep for one system: its median accesses/s, and the median of the most
/// memory each run held (charged, and for a kernel peer its uncharged pool too).
#[derive(Debug, Clone, Copy)]
pub struct SweepCell {
    /// Median accesses per second.
    pub accesses_per_s: f64,
    /// Median of the runs' most memory held, in bytes.
    pub held_bytes: f64,
}

/// The best median accesses/s over every cell.
pub fn best_cell(cells: &[Vec<SweepCell>]) -> f64 {
    cells
        .iter()
        .flatten()
        .map(|c| c.accesses_per_s)
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
}

/// The `name value` map of a column's figures, for JSON.
pub fn figure_map(figures: &[(String, f64)]) -> BTreeMap<String, f64> {
    figures.iter().cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::figures::median_figures;
    use crate::bench::systems::{UzswapConfig, UzswapMode};
    use crate::bench::workload::{Phase, WorkloadOutput};

    fn uzswap() -> System {
        System::Uzswap(UzswapConfig {
            compressor: "lz4".into(),
            mode: UzswapMode::Writeback,
            max_pool_percent: 20,
            faults: Default::default(),
            compress_threads: 1,
            workingset: true,
            tier: Default::default(),
        })
    }

    /// A usemem run writing and re-reading at `mib_s` MiB/s, holding `held` bytes at most.
    fn run(system: &System, mib_s: f64, limit: u64, held: u64) -> WorkloadResult {
        let phase = |name: &str| Phase {
            name: name.into(),
            bytes: 1 << 30,
            seconds: 1.0,
            per_worker_kb_s: vec![mib_s * 1024.0],
            total_kb_s: mib_s * 1024.0,
        };
        let output = WorkloadOutput {
            phases: vec![phase("write"), phase("reread")],
            verified: true,
            ..Default::default()
        };
        let mut r = WorkloadResult::new(system, output, limit);
        r.max_usage_bytes = Some(held);
        r.max_memory_bytes = Some(held);
        r.settings
            .insert("folio_size".into(), (2 << 20).to_string());
        r.settings.insert("reclaim".into(), "controller".into());
        r
    }

    fn column<'a>(system: &'a System, runs: &'a [WorkloadResult]) -> Column<'a> {
        Column {
            system,
            runs,
            failed: 0,
            figures: median_figures(runs),
        }
    }

    #[test]
    fn a_peer_over_its_limit_is_flagged_on_its_ratios_and_in_the_verdict() {
        let (uz, kz) = (
            uzswap(),
            System::KernelZswap {
                compressor: "lzo".into(),
            },
        );
        let limit = 256 << 20;
        // uzswap 1.5 MiB over (folios in flight), the kernel 65 MiB over.
        let uz_runs = [run(&uz, 100.0, limit, limit + (3 << 19))];
        let kz_runs = [run(&kz, 3386.0, limit, limit + (65 << 20))];
        let cols = [column(&uz, &uz_runs), column(&kz, &kz_runs)];
        let s = side_by_side(
            &cols,
            1,
            "every byte of 1 worker x 2048 MiB read back",
            None,
        );
        let row = |name: &str| {
            s.table
                .iter()
                .find(|l| l.starts_with(name))
                .unwrap_or_else(|| panic!("no {name} in {:#?}", s.table))
                .clone()
        };
        assert!(s.table[0].contains("kernel-zswap:lzo/uzswap:lz4"), "{s:?}");
        assert!(row("write MiB/s (total)").ends_with("33.86!"), "{s:?}");
        assert!(row("max charged MiB ").contains("257.500*"), "{s:?}");
        assert!(row("max charged MiB ").contains(" 321*"), "{s:?}");
        assert!(s.notes[0].contains("uzswap:lz4 held up to 1.5 MiB over its 256 MiB limit"));
        assert!(s.notes[0].contains("(2 MiB) in flight"), "{s:?}");
        assert!(s.notes[1].contains("--uzswap-memory-high 321M"), "{s:?}");
        assert!(s.notes[2].starts_with(RATIO_MARK), "{s:?}");
        assert_eq!(
            s.verdict,
            "verified: every byte of 1 worker x 2048 MiB read back (1 run of each system); \
             uzswap:lz4 write 100 MiB/s, reread 100 MiB/s; kernel-zswap:lzo 33.86x, 33.86x \
             (kernel-zswap:lzo held 65 MiB over its limit)"
        );
    }

    #[test]
    fn one_system_within_its_limit_has_no_ratios_and_no_notes() {
        let uz = uzswap();
        let runs = [run(&uz, 500.0, 64 << 20, 60 << 20)];
        let s = side_by_side(&[column(&uz, &runs)], 1, "it all", Some("hint: x".into()));
        assert_eq!(s.table[0], "figure (median of 1 run)  uzswap:lz4");
        assert_eq!(s.notes, ["hint: x"]);
        assert_eq!(
            s.verdict,
            "verified: it all (1 run); uzswap:lz4 write 500 MiB/s, reread 500 MiB/s"
        );
    }

    fn cell(accesses_per_s: f64, held_mib: u64) -> SweepCell {
        SweepCell {
            accesses_per_s,
            held_bytes: (held_mib << 20) as f64,
        }
    }

    #[test]
    fn the_sweep_says_the_last_cell_against_the_best() {
        let systems = [uzswap()];
        let s = sweep(
            &systems,
            &[(75.0, 3 << 20), (175.0, 7 << 20)],
            &[vec![cell(200.0, 3)], vec![cell(50.0, 7)]],
            3,
        );
        assert!(
            s.table[0].contains("uzswap:lz4 (accesses/s; MiB held)"),
            "{s:?}"
        );
        assert!(s.table[2].ends_with("0.250 (50; 7)"), "{s:?}");
        assert!(
            s.verdict.ends_with(
                "at 175.0% of the limit: uzswap:lz4 0.250 of the best cell (200 accesses/s)"
            ),
            "{}",
            s.verdict
        );
    }
}
