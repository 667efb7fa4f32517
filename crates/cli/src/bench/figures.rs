//! The figures of a workload benchmark's runs, by name with their units (sizes in MiB,
//! throughput in MiB/s, time in s, latency in us), their medians, and the one `median` every
//! benchmark takes.

use std::collections::BTreeMap;

use super::systems::WorkloadResult;

/// A statistic or gauge in bytes (the others count pages, folios or events): shown in MiB.
fn in_bytes(name: &str) -> bool {
    name.ends_with("_bytes") || name.ends_with("pool_total_size")
}

/// A statistic's or gauge's name and value as the table shows it: bytes in MiB.
fn named(name: &str, v: i64, suffix: &str) -> (String, f64) {
    match in_bytes(name) {
        true => (
            format!("{} MiB{suffix}", name.trim_end_matches("_bytes")),
            v as f64 / (1 << 20) as f64,
        ),
        false => (format!("{name}{suffix}"), v as f64),
    }
}

/// The figures of one result, in print order, by name, each with its unit: sizes in MiB,
/// throughput in MiB/s, CPU time in s, latency in us; statistics by their kernel names.
pub fn figures(r: &WorkloadResult) -> Vec<(String, f64)> {
    let mut f = Vec::new();
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    // The workload measures KB/s as usemem does (KB = 1024 bytes).
    for p in &r.output.phases {
        f.push((format!("{} MiB/s (total)", p.name), p.total_kb_s / 1024.0));
        if p.per_worker_kb_s.len() > 1 {
            for (i, v) in p.per_worker_kb_s.iter().enumerate() {
                f.push((format!("{} MiB/s worker {i}", p.name), *v / 1024.0));
            }
        }
    }
    if let Some(a) = r.output.accesses_per_s {
        f.push(("accesses/s".into(), a));
    }
    f.push(("cpu user s".into(), r.cpu.user_s));
    f.push(("cpu sys s".into(), r.cpu.sys_s));
    if let Some(h) = r.helper_cpu {
        f.push(("helper cpu user s".into(), h.user_s));
        f.push(("helper cpu sys s".into(), h.sys_s));
    }
    if let Some(v) = r.max_rss_bytes {
        f.push(("max RSS MiB".into(), mib(v)));
        // Exact, where "max RSS MiB" rounds: the limit allows a folio per thread over it.
        let over = v.saturating_sub(r.limit_bytes);
        f.push(("max RSS over limit MiB".into(), mib(over)));
    }
    if let Some(v) = r.max_usage_bytes {
        f.push(("max charged MiB".into(), mib(v)));
    }
    if let Some(v) = r.max_memory_bytes {
        f.push(("max charged + pool MiB".into(), mib(v)));
    }
    if let Some(l) = r.fault_latency {
        f.push(("fault p50 us".into(), l.p50_us));
        f.push(("fault p99 us".into(), l.p99_us));
        f.push(("fault max us".into(), l.max_us));
    }
    if let Some(p) = r.pages_per_fault {
        f.push(("pages/fault".into(), p));
    }
    for (k, v) in &r.stats {
        f.push(named(k, *v, ""));
    }
    for (k, v) in &r.gauges {
        f.push(named(k, *v, " (end)"));
    }
    f
}

/// The median of `v` (the mean of the middle two for an even count); NaN when it is empty.
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Median of every figure over the runs of one system, in first-seen order.
pub fn median_figures(runs: &[WorkloadResult]) -> Vec<(String, f64)> {
    let mut order: Vec<String> = Vec::new();
    let mut vals: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in runs {
        for (k, v) in figures(r) {
            if !vals.contains_key(&k) {
                order.push(k.clone());
            }
            vals.entry(k).or_default().push(v);
        }
    }
    order
        .into_iter()
        .map(|k| {
            let v = median(vals.remove(&k).unwrap_or_default());
            (k, v)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0]), 2.5);
        assert!(median(vec![]).is_nan());
    }
}
