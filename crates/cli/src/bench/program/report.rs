//! What `bench run` prints: a table for each side, a row per run and the medians; the ratio
//! of the wall times; whether the program printed the same in every run. The figures are
//! columns of numbers by name (sizes in MiB, times in s, statistics by their kernel names),
//! the same names in the JSON.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::child::Exited;
use super::uzswap::UzswapRun;
use crate::bench::figures::median;
use crate::bench::peer::KernelRun;

/// The kernel-named statistics each side reports.
pub const STATS: [&str; 5] = ["zswpout", "zswpin", "zswpwb", "pswpout", "pswpin"];

const MIB: f64 = (1u64 << 20) as f64;

/// One figure over the runs: its name (with its unit), its decimals, a value per run (NaN
/// where a run did not give it).
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// Name and unit: "wall s", "held MiB", "zswpout".
    pub name: &'static str,
    /// Decimals printed.
    pub decimals: usize,
    /// A value per run.
    pub values: Vec<f64>,
}

impl Figure {
    fn new(name: &'static str, decimals: usize, values: impl Iterator<Item = f64>) -> Figure {
        Figure {
            name,
            decimals,
            values: values.collect(),
        }
    }

    /// The median over the runs that gave it; NaN if none did.
    pub fn median(&self) -> f64 {
        median(
            self.values
                .iter()
                .copied()
                .filter(|v| !v.is_nan())
                .collect(),
        )
    }

    fn cell(&self, v: f64) -> String {
        match v.is_nan() {
            true => "-".into(),
            false => format!("{v:.*}", self.decimals),
        }
    }
}

fn wall(e: &Exited) -> f64 {
    e.wall.as_secs_f64()
}

fn cpu(e: &Exited, sys: bool) -> f64 {
    e.cpu
        .map(|c| if sys { c.sys_s } else { c.user_s })
        .unwrap_or(f64::NAN)
}

/// The kernel side's figures: what it held (charged plus pool, sampled together), each
/// part's peak, its largest RSS, CPU, and the `/proc/vmstat` deltas.
pub fn kernel_figures(runs: &[KernelRun]) -> Vec<Figure> {
    let mib = |f: fn(&KernelRun) -> u64| runs.iter().map(move |r| f(r) as f64 / MIB);
    let mut f = vec![
        Figure::new("wall s", 3, runs.iter().map(|r| wall(&r.exited))),
        Figure::new("held MiB", 1, mib(|r| r.held)),
        Figure::new("charged MiB", 1, mib(|r| r.max_charged)),
        Figure::new("pool MiB", 1, mib(|r| r.max_pool)),
        Figure::new("max RSS MiB", 1, mib(|r| r.max_rss)),
        Figure::new("user s", 2, runs.iter().map(|r| cpu(&r.exited, false))),
        Figure::new("sys s", 2, runs.iter().map(|r| cpu(&r.exited, true))),
    ];
    for s in STATS {
        f.push(Figure::new(
            s,
            0,
            runs.iter()
                .map(|r| r.stats.get(s).map_or(f64::NAN, |v| *v as f64)),
        ));
    }
    f
}

/// The uzswap side's figures: its limit, the process's peak RSS, what the region held at
/// exit and its pool then, CPU, and uzswap's own kernel-named statistics.
pub fn uzswap_figures(runs: &[UzswapRun]) -> Vec<Figure> {
    let stat_mib = |name: &'static str| {
        runs.iter()
            .map(move |r| r.stat(name).map_or(f64::NAN, |v| v / MIB))
    };
    let mut f = vec![
        Figure::new("wall s", 3, runs.iter().map(|r| wall(&r.exited))),
        Figure::new("limit MiB", 1, runs.iter().map(|r| r.limit as f64 / MIB)),
        Figure::new("peak RSS MiB", 1, stat_mib("peak_rss_bytes")),
        Figure::new(
            "region MiB",
            1,
            runs.iter()
                .map(|r| r.region_bytes().map_or(f64::NAN, |v| v / MIB)),
        ),
        Figure::new("pool MiB", 1, stat_mib("region_pool_bytes")),
        Figure::new("user s", 2, runs.iter().map(|r| cpu(&r.exited, false))),
        Figure::new("sys s", 2, runs.iter().map(|r| cpu(&r.exited, true))),
    ];
    for s in STATS {
        f.push(Figure::new(
            s,
            0,
            runs.iter().map(|r| r.stat(s).unwrap_or(f64::NAN)),
        ));
    }
    f
}

/// A table: a header, a row per run, the medians; numbers right-aligned under their names.
pub fn table(figures: &[Figure]) -> Vec<String> {
    let runs = figures.first().map_or(0, |f| f.values.len());
    let mut rows: Vec<Vec<String>> = vec![std::iter::once("run".to_string())
        .chain(figures.iter().map(|f| f.name.to_string()))
        .collect()];
    for i in 0..runs {
        rows.push(
            std::iter::once((i + 1).to_string())
                .chain(figures.iter().map(|f| f.cell(f.values[i])))
                .collect(),
        );
    }
    if runs > 1 {
        rows.push(
            std::iter::once("median".to_string())
                .chain(figures.iter().map(|f| f.cell(f.median())))
                .collect(),
        );
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    rows.iter()
        .map(|r| {
            let cells: Vec<String> = r
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(c, (v, w))| match c {
                    0 => format!("{v:<w$}"),
                    _ => format!("{v:>w$}"),
                })
                .collect();
            format!("  {}", cells.join("  "))
        })
        .collect()
}

/// The figures as JSON: each run's, and the medians, by name.
pub fn figures_json(figures: &[Figure]) -> Value {
    let runs = figures.first().map_or(0, |f| f.values.len());
    let num = |v: f64| match v.is_nan() {
        true => Value::Null,
        false => json!(v),
    };
    let per_run: Vec<BTreeMap<&str, Value>> = (0..runs)
        .map(|i| figures.iter().map(|f| (f.name, num(f.values[i]))).collect())
        .collect();
    let medians: BTreeMap<&str, Value> =
        figures.iter().map(|f| (f.name, num(f.median()))).collect();
    json!({ "runs": per_run, "median": medians })
}

/// The median of a named figure.
pub fn median_of(figures: &[Figure], name: &str) -> f64 {
    figures
        .iter()
        .find(|f| f.name == name)
        .map_or(f64::NAN, Figure::median)
}

/// Whether every run printed the same on stdout as the first: one line to say so, naming
/// the runs that did not. `runs` are each run's name and output, in the order they ran.
pub fn stdout_verdict(runs: &[(String, &[u8])]) -> (bool, String) {
    let Some((first_name, first)) = runs.first() else {
        return (true, "stdout: no runs".into());
    };
    let differ: Vec<&str> = runs
        .iter()
        .filter(|(_, out)| out != first)
        .map(|(n, _)| n.as_str())
        .collect();
    match (differ.is_empty(), runs.len()) {
        (true, 1) => (
            true,
            format!(
                "stdout: {} bytes (1 run, nothing to compare it with)",
                first.len()
            ),
        ),
        (true, n) => (
            true,
            format!("stdout: identical in all {n} runs ({} bytes)", first.len()),
        ),
        (false, _) => (
            false,
            format!(
                "stdout: NOT identical: {} printed otherwise than {first_name} (--show-output \
                 prints it)",
                differ.join(", ")
            ),
        ),
    }
}

/// The program's command line for a title: shell-quoted where needed, on one line, cut at
/// 100 characters.
pub fn command_line(program: &[std::ffi::OsString]) -> String {
    let words: Vec<String> = program
        .iter()
        .map(|a| {
            let a = a.to_string_lossy();
            let a = a.split_whitespace().collect::<Vec<_>>().join(" ");
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
            match plain {
                true => a,
                false => format!("'{}'", a.replace('\'', "'\\''")),
            }
        })
        .collect();
    let line = words.join(" ");
    match line.char_indices().nth(100) {
        Some((i, _)) => format!("{}...", &line[..i]),
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_has_a_row_per_run_and_the_medians() {
        let f = vec![
            Figure::new("wall s", 3, [1.0, 3.0, 2.0].into_iter()),
            Figure::new("zswpout", 0, [10.0, f64::NAN, 30.0].into_iter()),
        ];
        let t = table(&f);
        assert_eq!(
            t,
            vec![
                "  run     wall s  zswpout",
                "  1        1.000       10",
                "  2        3.000        -",
                "  3        2.000       30",
                "  median   2.000       20",
            ]
        );
        let j = figures_json(&f);
        assert_eq!(j["median"]["wall s"], 2.0);
        assert_eq!(j["runs"][1]["zswpout"], Value::Null);
        assert_eq!(median_of(&f, "zswpout"), 20.0);
        assert!(median_of(&f, "nothing").is_nan());
        // One run: no median row.
        let one = vec![Figure::new("wall s", 1, [1.0].into_iter())];
        assert_eq!(table(&one).len(), 2);
    }

    #[test]
    fn stdout_is_compared_with_the_first_run() {
        let a: &[u8] = b"x\n";
        let b: &[u8] = b"y\n";
        let runs = vec![
            ("kernel run 1".to_string(), a),
            ("uzswap run 1".to_string(), a),
        ];
        assert_eq!(
            stdout_verdict(&runs),
            (true, "stdout: identical in all 2 runs (2 bytes)".into())
        );
        let runs = vec![
            ("kernel run 1".to_string(), a),
            ("uzswap run 1".to_string(), b),
            ("uzswap run 2".to_string(), b),
        ];
        let (same, line) = stdout_verdict(&runs);
        assert!(!same);
        assert!(
            line.starts_with("stdout: NOT identical: uzswap run 1, uzswap run 2 printed otherwise than kernel run 1"),
            "{line}"
        );
        assert!(stdout_verdict(&runs[..1]).1.contains("1 run"));
    }

    #[test]
    fn a_command_line_is_quoted_and_cut() {
        let p: Vec<std::ffi::OsString> = ["python3", "-c", "print('a b')\nx=1"]
            .iter()
            .map(Into::into)
            .collect();
        assert_eq!(command_line(&p), r#"python3 -c 'print('\''a b'\'') x=1'"#);
        let long: Vec<std::ffi::OsString> = vec!["x".repeat(150).into()];
        assert_eq!(command_line(&long).len(), 103);
    }
}
