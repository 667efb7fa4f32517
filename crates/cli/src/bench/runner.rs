//! The runner of a workload benchmark: the systems and the workload its arguments name, and
//! the runs, every system in turn, the kernel peers first in each round on a machine set up
//! for them, uzswap then under what they held.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use zswap::PAGE_SIZE;

use super::peer::{self, PeerError, PeerMachine, PeerOptions};
use super::progress::Progress;
use super::systems::{run_uzswap, System, SystemName, WorkloadResult};
use super::workload::{Workload, WorkloadSpec};
use super::workload_args::CommonArgs;

/// The systems to run, each once: `--system` (or `default`) and `--peer`, resolved with the
/// options they take.
pub(super) fn systems(c: &CommonArgs, default: &[&str]) -> Result<Vec<System>> {
    let mut names = c.system.clone();
    if names.is_empty() {
        names = default
            .iter()
            .map(|s| s.parse())
            .collect::<Result<Vec<SystemName>, _>>()?;
    }
    names.extend(c.peer.iter().cloned());
    if names.iter().any(|n| n.name == "uzswap-redis") && c.redis_cluster.is_none() {
        anyhow::bail!(
            "uzswap-redis needs --redis-cluster redis://HOST:PORT[,...] (scripts/redis-cluster start)"
        );
    }
    let mut out: Vec<System> = Vec::new();
    for n in names {
        let mut s = n.resolve(
            &c.compressor,
            &c.kernel_compressor,
            c.uzswap_max_pool_percent,
            c.redis_cluster.as_deref(),
        );
        if let System::Uzswap(config) = &mut s {
            config.faults = c.uzswap_faults;
            config.compress_threads = c.uzswap_compress_threads;
            config.workingset = !c.uzswap_no_workingset;
        }
        if !out.contains(&s) {
            out.push(s);
        }
    }
    Ok(out)
}

/// The systems of one command and the machine set up for the kernel ones.
pub(super) struct Runner {
    peer: Option<PeerMachine>,
    uzswap_memory_high: Option<u64>,
    /// `--same-limit`: uzswap is not given what the kernel peers held.
    same_limit: bool,
}

impl Runner {
    pub(super) fn new(c: &CommonArgs, systems: &[System], max_area: usize) -> Result<Runner> {
        let peer = if systems.iter().any(System::is_kernel) {
            peer::check_root(rustix::process::geteuid().as_raw())?;
            peer::install_interrupt_handler()?;
            let machine = PeerMachine::new(PeerOptions {
                swap_dir: c.swap_dir.clone(),
                swap_bytes: peer::swap_bytes_for(max_area),
                page_cluster: c.page_cluster,
                max_pool_percent: c.max_pool_percent,
                reclaim: c.peer_reclaim,
                swappiness: c.peer_swappiness,
                worker_exe: std::env::current_exe()?,
            })?;
            // A compressor the kernel refuses, before any run.
            for s in systems.iter().filter(|s| s.is_kernel()) {
                machine.check(s)?;
            }
            Some(machine)
        } else {
            None
        };
        Ok(Runner {
            peer,
            uzswap_memory_high: c.uzswap_memory_high,
            same_limit: c.same_limit,
        })
    }

    /// Run `system` on `spec`; a uzswap system under `--uzswap-memory-high`, or else under
    /// `kernel_held` (what the kernel peers held in this round) unless `--same-limit`.
    fn run(
        &mut self,
        system: &System,
        spec: &WorkloadSpec,
        kernel_held: Option<u64>,
    ) -> Result<WorkloadResult> {
        let equal = kernel_held.filter(|_| !self.same_limit);
        match system {
            System::Uzswap(cfg) => {
                run_uzswap(&uzswap_spec(self.uzswap_memory_high.or(equal), spec), cfg)
                    .with_context(|| system.to_string())
            }
            _ => Ok(self
                .peer
                .as_mut()
                .expect("peer machine set up for kernel systems")
                .run(system, spec)?),
        }
    }

    pub(super) fn settings(&self) -> BTreeMap<String, String> {
        let mut s = self
            .peer
            .as_ref()
            .map(|p| p.settings().clone())
            .unwrap_or_default();
        let memory = match (self.uzswap_memory_high, self.same_limit) {
            (Some(l), _) => l.to_string(),
            (None, true) => "same-limit".into(),
            (None, false) => "equal".into(),
        };
        s.insert("uzswap_memory_high".into(), memory);
        if !s.contains_key("page_cluster") {
            if let Ok(v) = std::fs::read_to_string(peer::PAGE_CLUSTER) {
                s.insert("page_cluster".into(), v.trim().to_string());
            }
        }
        s
    }
}

/// `spec` as the uzswap side runs it: under `--uzswap-memory-high` if given.
pub(super) fn uzswap_spec(uzswap_memory_high: Option<u64>, spec: &WorkloadSpec) -> WorkloadSpec {
    WorkloadSpec {
        memory_high: uzswap_memory_high.unwrap_or(spec.memory_high),
        ..spec.clone()
    }
}

/// The spec of `workload` under the options: folios of 2M for usemem, of a page for the others,
/// unless `--folio-size`.
pub(super) fn spec(c: &CommonArgs, workload: Workload) -> WorkloadSpec {
    let default_folio = match workload {
        Workload::Usemem { .. } => 2 << 20,
        Workload::Mix { .. } | Workload::Heap { .. } | Workload::JavaHeap { .. } => PAGE_SIZE,
    };
    WorkloadSpec {
        workload,
        memory_high: c.memory_high,
        folio_size: c.folio_size.unwrap_or(default_folio),
        corpus: c.corpus.clone(),
        seed: c.seed,
    }
}

/// The runs of every system, by system, in system order: what each run gave, and why the
/// runs left out failed.
pub(super) type Runs = (Vec<Vec<WorkloadResult>>, Vec<Vec<String>>);

/// Run every system `runs` times, alternating. A kernel peer's run whose worker could not be
/// held to the limit ([`PeerError::left_out`]: an OOM wait over 10 s, a charge that failed at
/// the hard stop, or the OOM killer, were it on) is left out, and said so, and the runs that did
/// finish stand. Any other failure (a setup refused, a check of the data that failed) stops
/// the benchmark. `cell` names the sweep's cell in the progress, if any.
pub(super) fn alternate(
    runner: &mut Runner,
    systems: &[System],
    spec: &WorkloadSpec,
    runs: usize,
    progress: &Progress,
    cell: &str,
) -> Result<Runs> {
    let mut out: Vec<Vec<WorkloadResult>> = vec![Vec::new(); systems.len()];
    let mut failed: Vec<Vec<String>> = vec![Vec::new(); systems.len()];
    // The kernel peers first in each round: uzswap then runs under what they held.
    let mut order: Vec<usize> = (0..systems.len()).collect();
    order.sort_by_key(|&i| !systems[i].is_kernel());
    for run in 0..runs {
        let mut kernel_held: Option<u64> = None;
        for &i in &order {
            let s = &systems[i];
            let what = format!("{cell}run {}/{runs} {s}", run + 1);
            progress.start(&what);
            let r = match runner.run(s, spec, kernel_held) {
                Ok(r) => r,
                Err(e)
                    if e.downcast_ref::<PeerError>()
                        .is_some_and(PeerError::left_out) =>
                {
                    progress.failed(&format!("{what}: failed, left out: {e:#}"));
                    failed[i].push(format!("{e:#}"));
                    continue;
                }
                Err(e) => return Err(e),
            };
            let main = r
                .output
                .accesses_per_s
                .map(|a| format!("{a:.0} accesses/s"))
                .unwrap_or_else(|| {
                    r.output
                        .phases
                        .iter()
                        .map(|p| format!("{} {:.0} MiB/s", p.name, p.total_kb_s / 1024.0))
                        .collect::<Vec<_>>()
                        .join(", ")
                });
            progress.done(&format!("{what}: {main}"));
            if s.is_kernel() {
                let held = r.max_memory_bytes.or(r.max_usage_bytes);
                // Whole pages: a region's limit is counted in them.
                let held = held.map(|h| h.next_multiple_of(PAGE_SIZE as u64));
                kernel_held = kernel_held.max(held);
            }
            out[i].push(r);
        }
    }
    Ok((out, failed))
}
