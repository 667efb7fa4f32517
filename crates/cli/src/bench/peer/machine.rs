//! The machine set up for the kernel peers: a swap file turned on, the kernel zswap's
//! parameters and page-cluster as the options say, debugfs mounted for the pool gauges; and
//! every one of them restored when [`PeerMachine`] is dropped, also after an error. Before
//! each run it puts zswap in the state the system needs (on with its compressor, or off), and
//! turns it off again after.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::cgroup::CGROUP_V1_MEMORY;
use super::program::{run_program, KernelRun};
use super::protocol::check_interrupted;
use super::run::run_worker;
use super::setting::{read_trim, write_setting};
use super::{PeerError, PeerOptions, Reclaim};
use crate::bench::stats;
use crate::bench::systems::{System, WorkloadResult};
use crate::bench::workload::WorkloadSpec;

/// The kernel zswap's tunables.
pub const ZSWAP_PARAMS: &str = "/sys/module/zswap/parameters";
/// The zswap parameters saved and restored (all of them that a run may touch, and the rest
/// for the record).
const SAVED_PARAMS: [&str; 5] = [
    "enabled",
    "compressor",
    "max_pool_percent",
    "accept_threshold_percent",
    "shrinker_enabled",
];
/// The kernel's swap readahead setting (log2 of the pages read around a swap-in).
pub const PAGE_CLUSTER: &str = "/proc/sys/vm/page-cluster";
const DEBUGFS: &str = "/sys/kernel/debug";

/// The root check: the peers write kernel settings, swap files and cgroups.
pub fn check_root(euid: u32) -> Result<(), PeerError> {
    match euid {
        0 => Ok(()),
        _ => Err(PeerError::NotRoot),
    }
}

fn zswap_param(name: &str) -> PathBuf {
    Path::new(ZSWAP_PARAMS).join(name)
}

fn run_tool(cmd: &str, args: &[&str]) -> Result<(), PeerError> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|source| PeerError::Tool {
            tool: cmd.to_string(),
            source,
        })?;
    if !out.status.success() {
        return Err(PeerError::ToolFailed {
            command: format!("{cmd} {}", args.join(" ")),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

/// The settings of the machine before the command touched them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedSettings {
    /// The kernel zswap's parameters, name and value as sysfs shows them.
    pub zswap: Vec<(String, String)>,
    /// `/proc/sys/vm/page-cluster`.
    pub page_cluster: String,
}

impl SavedSettings {
    /// Read them from the machine.
    pub fn read() -> Result<SavedSettings, PeerError> {
        let zswap = SAVED_PARAMS
            .iter()
            .map(|p| Ok((p.to_string(), read_trim(&zswap_param(p))?)))
            .collect::<Result<Vec<_>, PeerError>>()?;
        Ok(SavedSettings {
            zswap,
            page_cluster: read_trim(Path::new(PAGE_CLUSTER))?,
        })
    }
}

/// The machine set up for kernel-peer runs; restores everything when dropped.
#[derive(Debug)]
pub struct PeerMachine {
    opts: PeerOptions,
    saved: SavedSettings,
    swap_file: Option<PathBuf>,
    swap_on: bool,
    mounted_debugfs: bool,
    /// The settings recorded with every result (page-cluster, THP, zswap knobs).
    settings: BTreeMap<String, String>,
}

impl PeerMachine {
    /// Set the machine up (needs root and a cgroup v1 memory controller): page-cluster and
    /// `max_pool_percent` as `opts` says, debugfs, and a swap file turned on.
    pub fn new(opts: PeerOptions) -> Result<PeerMachine, PeerError> {
        check_root(rustix::process::geteuid().as_raw())?;
        if !Path::new(CGROUP_V1_MEMORY).join("cgroup.procs").exists() {
            return Err(PeerError::NoCgroupV1);
        }
        let saved = SavedSettings::read().map_err(|e| PeerError::NoZswap(Box::new(e)))?;
        let mut m = PeerMachine {
            opts,
            saved,
            swap_file: None,
            swap_on: false,
            mounted_debugfs: false,
            settings: BTreeMap::new(),
        };
        // Every step from here on is undone by Drop if a later one fails.
        if let Some(pc) = m.opts.page_cluster {
            write_setting(Path::new(PAGE_CLUSTER), &pc.to_string())?;
        }
        if let Some(p) = m.opts.max_pool_percent {
            write_setting(&zswap_param("max_pool_percent"), &p.to_string())?;
        }
        m.mount_debugfs();
        m.make_swap()?;
        m.settings = m.record_settings();
        Ok(m)
    }

    fn mount_debugfs(&mut self) {
        if Path::new(stats::ZSWAP_DEBUGFS).exists() {
            return;
        }
        // Only to read the pool gauges: a failure just leaves them out.
        if run_tool("mount", &["-t", "debugfs", "none", DEBUGFS]).is_ok() {
            self.mounted_debugfs = true;
        }
    }

    fn make_swap(&mut self) -> Result<(), PeerError> {
        let path = self
            .opts
            .swap_dir
            .join(format!("uzswap-peer-{}.swap", std::process::id()));
        let swap_file = |source| PeerError::SwapFile {
            path: path.clone(),
            source,
        };
        let f = std::fs::File::create(&path).map_err(swap_file)?;
        self.swap_file = Some(path.clone());
        f.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(swap_file)?;
        rustix::fs::fallocate(
            &f,
            rustix::fs::FallocateFlags::empty(),
            0,
            self.opts.swap_bytes,
        )
        .map_err(|source| PeerError::SwapSpace {
            path: path.clone(),
            mib: self.opts.swap_bytes >> 20,
            source,
        })?;
        drop(f);
        let p = path.to_string_lossy().into_owned();
        run_tool("mkswap", &[&p])?;
        run_tool("swapon", &[&p])?;
        self.swap_on = true;
        Ok(())
    }

    fn record_settings(&self) -> BTreeMap<String, String> {
        let mut s = BTreeMap::new();
        if let Ok(v) = read_trim(Path::new(PAGE_CLUSTER)) {
            s.insert("page_cluster".into(), v);
        }
        for p in [
            "max_pool_percent",
            "accept_threshold_percent",
            "shrinker_enabled",
        ] {
            if let Ok(v) = read_trim(&zswap_param(p)) {
                s.insert(format!("zswap_{p}"), v);
            }
        }
        for (k, f) in [("thp_enabled", "enabled"), ("thp_defrag", "defrag")] {
            if let Ok(v) = read_trim(&Path::new("/sys/kernel/mm/transparent_hugepage").join(f)) {
                s.insert(k.into(), v);
            }
        }
        s.insert(
            "reclaim".into(),
            match self.opts.reclaim {
                Reclaim::Controller => "controller".into(),
                Reclaim::Limit => "limit".into(),
            },
        );
        if let Some(v) = self.opts.swappiness {
            s.insert("cgroup_swappiness".into(), v.to_string());
        }
        s
    }

    /// Put zswap in the state `system` needs.
    fn configure(&self, system: &System) -> Result<(), PeerError> {
        match system {
            System::KernelZswap { compressor } => {
                // A name the kernel does not know fails the write (ENOENT); one it knows but
                // cannot load is refused silently: read it back in both cases.
                let written = write_setting(&zswap_param("compressor"), compressor);
                let now = read_trim(&zswap_param("compressor"))?;
                if written.is_err() || now != *compressor {
                    return Err(PeerError::CompressorRefused {
                        compressor: compressor.clone(),
                        kept: now,
                    });
                }
                write_setting(&zswap_param("enabled"), "Y")?;
            }
            System::KernelSwap => write_setting(&zswap_param("enabled"), "N")?,
            System::Uzswap(_) => return Err(PeerError::NotKernel(system.to_string())),
        }
        Ok(())
    }

    /// Set zswap up for `system` (a kernel system) and turn it off again: a compressor the
    /// kernel refuses is found before any run.
    pub fn check(&self, system: &System) -> Result<(), PeerError> {
        let r = self.configure(system);
        let _ = write_setting(&zswap_param("enabled"), "N");
        r.map_err(|e| e.in_system(system))
    }

    /// Run `f` with zswap set up for `system` (a kernel system), and off again after it:
    /// nothing of ours should land in it while idle.
    fn with_system<T>(
        &self,
        system: &System,
        f: impl FnOnce() -> Result<T, PeerError>,
    ) -> Result<T, PeerError> {
        check_interrupted()?;
        self.configure(system)?;
        let r = f();
        let _ = write_setting(&zswap_param("enabled"), "N");
        r.map_err(|e| e.in_system(system))
    }

    /// One run of `spec` on `system` (a kernel system).
    pub fn run(
        &mut self,
        system: &System,
        spec: &WorkloadSpec,
    ) -> Result<WorkloadResult, PeerError> {
        let mut r = self.with_system(system, || run_worker(&self.opts, system, spec))?;
        r.settings.extend(self.settings.clone());
        if let System::KernelZswap { compressor } = system {
            r.settings
                .insert("zswap_compressor".into(), compressor.clone());
        }
        Ok(r)
    }

    /// One run of `program` (its name and arguments) on `system` (a kernel system), in a
    /// cgroup of its own under `limit` (`bench run`).
    pub fn run_program(
        &mut self,
        system: &System,
        program: &[OsString],
        limit: u64,
    ) -> Result<KernelRun, PeerError> {
        self.with_system(system, || run_program(&self.opts, program, limit))
    }

    /// The settings recorded with every result (page-cluster, THP, zswap knobs).
    pub fn settings(&self) -> &BTreeMap<String, String> {
        &self.settings
    }
}

impl Drop for PeerMachine {
    fn drop(&mut self) {
        let warn = |what: &str, e: &(dyn std::error::Error + 'static)| {
            eprintln!("uzswap: restoring {what}: {}", crate::report::error_line(e))
        };
        if self.swap_on {
            if let Some(p) = &self.swap_file {
                if let Err(e) = run_tool("swapoff", &[&p.to_string_lossy()]) {
                    warn("swap", &e);
                }
            }
        }
        if let Some(p) = &self.swap_file {
            if let Err(e) = std::fs::remove_file(p) {
                warn("swap file", &e);
            }
        }
        // enabled last: the other knobs are restored while zswap is off.
        let mut params = self.saved.zswap.clone();
        params.sort_by_key(|(k, _)| k == "enabled");
        for (k, v) in &params {
            if read_trim(&zswap_param(k)).ok().as_deref() != Some(v.as_str()) {
                if let Err(e) = write_setting(&zswap_param(k), v) {
                    warn(k, &e);
                }
            }
        }
        if let Err(e) = write_setting(Path::new(PAGE_CLUSTER), &self.saved.page_cluster) {
            warn("page-cluster", &e);
        }
        if self.mounted_debugfs {
            if let Err(e) = run_tool("umount", &[DEBUGFS]) {
                warn("debugfs", &e);
            }
        }
    }
}

/// Swap file size for workloads of at most `area` bytes: every swapped page, zswap's included,
/// holds a swap slot, so the whole area plus headroom.
pub fn swap_bytes_for(area: usize) -> u64 {
    (area as u64 + (512 << 20)).div_ceil(1 << 20) << 20
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_root_is_one_clear_line() {
        let e = check_root(1000).unwrap_err().to_string();
        assert!(e.contains("need root") && !e.contains('\n'), "{e}");
        assert!(check_root(0).is_ok());
    }

    #[test]
    fn swap_covers_the_area() {
        assert!(swap_bytes_for(1 << 30) >= (1 << 30) + (512 << 20));
        assert_eq!(swap_bytes_for(1) % (1 << 20), 0);
    }
}
