//! The configuration `uzswap run` passes in the environment: `UZSWAP_RUN`, a list of
//! `name=value` separated by `;` (sizes in bytes). The variable and `LD_PRELOAD` stay in the
//! environment: a child that execs a program keeps them, and that program gets a region of
//! its own under the same limit.

use region::RegionConfig;

/// The environment variable that carries the configuration.
pub const ENV: &str = "UZSWAP_RUN";

/// What the preload makes.
#[derive(Debug)]
pub struct RunConfig {
    pub region: RegionConfig,
    /// A Redis Cluster to write back to (`uzswap run --swap-to redis://...`), and the run's
    /// id for its keys.
    pub swap_to: Option<(String, String)>,
    /// Bytes of address space the region reserves for the heap.
    pub max_heap: u64,
    /// Where to write the statistics when the program exits (`uzswap run --stats`).
    pub stats_file: Option<std::path::PathBuf>,
    /// The process tree's ledger (tree.rs), `uzswap run`'s `/proc/PID/fd/N`.
    pub tree_file: Option<std::path::PathBuf>,
    /// The hard limit, as given (`region.over_limit.memory_max` is the same at the start).
    pub memory_max: Option<u64>,
    /// Only the process whose parent this is (`uzswap run` itself) writes them: the program,
    /// through any exec, and not the children it starts.
    pub stats_parent: Option<u32>,
}

/// Parse `UZSWAP_RUN`'s value.
pub fn parse(text: &str) -> Result<RunConfig, String> {
    let mut limit = None;
    let mut max_heap = None;
    let mut stats_file = None;
    let mut tree_file = None;
    let mut stats_parent = None;
    let mut memory_max = None;
    let mut swap_to = None;
    let mut run_id = None;
    let mut on_limit = region::OnLimit::default();
    let mut region = RegionConfig::new(0);
    for item in text.split(';').filter(|s| !s.is_empty()) {
        let (name, value) = item
            .split_once('=')
            .ok_or_else(|| format!("{item:?} is not name=value"))?;
        let bytes = || {
            value
                .parse::<u64>()
                .map_err(|_| format!("{name}: {value:?} is not a number of bytes"))
        };
        let on = || match value {
            "0" => Ok(false),
            "1" => Ok(true),
            _ => Err(format!("{name}: {value:?} is not 0 or 1")),
        };
        match name {
            "memory_high" => limit = Some(bytes()?),
            "max_heap" => max_heap = Some(bytes()?),
            "folio_size" => region.folio_size = bytes()? as usize,
            "compressor" => {
                region.compressor = value.parse().map_err(|e| format!("compressor: {e}"))?
            }
            "writeback_compressor" => {
                region.writeback_compressor = value
                    .parse()
                    .map_err(|e| format!("writeback_compressor: {e}"))?
            }
            "max_pool_percent" => region.max_pool_percent = bytes()? as u32,
            "writethrough" => {
                region.writethrough = value.parse().map_err(|e| format!("writethrough: {e}"))?
            }
            "user_mode_only" => region.user_mode_only = on()?,
            "in_thread_faults" => region.in_thread_faults = on()?,
            "workingset" => region.policies.workingset = on()?,
            "referenced_writes" => region.policies.referenced_writes = on()?,
            "inactive_list" => region.policies.inactive_list = on()?,
            "adaptive_swapin" => region.policies.adaptive_swapin = on()?,
            "lazy_registration" => region.lazy_registration = on()?,
            "auto_pool_share" => region.policies.auto_pool_share = on()?,
            "memory_max" => memory_max = Some(bytes()?),
            "on_limit" => on_limit = value.parse().map_err(|e| format!("on_limit: {e}"))?,
            "swap_dir" => region.swap_dir = Some(value.into()),
            "swap_format" => {
                region.swap_format = match value {
                    "segments" => region::SwapFormat::Segments,
                    "pages" => region::SwapFormat::Pages,
                    _ => return Err(format!("swap_format: {value:?} is not segments or pages")),
                }
            }
            "encrypt" => region.encrypt = on()?,
            "swap_to" => swap_to = Some(value.to_string()),
            "run_id" => run_id = Some(value.to_string()),
            "stats_file" => stats_file = Some(value.into()),
            "tree_file" => tree_file = Some(value.into()),
            "stats_parent" => stats_parent = Some(bytes()? as u32),
            _ => return Err(format!("unknown setting {name:?}")),
        }
    }
    region.memory_limit = limit.ok_or("memory_high is missing")?;
    // As a cgroup keeps memory.high and memory.max, and says so on the program's stderr.
    region.over_limit = region::OverLimit {
        throttle: true,
        memory_max,
        on_limit,
        say: true,
    };
    let max_heap = max_heap.ok_or("max_heap is missing")?;
    let swap_to = match (swap_to, run_id) {
        (Some(url), Some(run)) => Some((url, run)),
        (None, _) => None,
        (Some(_), None) => return Err("swap_to without run_id".into()),
    };
    Ok(RunConfig {
        region,
        swap_to,
        max_heap,
        stats_file,
        tree_file,
        memory_max,
        stats_parent,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_configuration_parses_and_errors_name_the_setting() {
        let c = parse(
            "memory_high=1048576;max_heap=4194304;folio_size=16384;compressor=zstd;writethrough=1",
        )
        .unwrap();
        assert_eq!((c.region.memory_limit, c.max_heap), (1 << 20, 4 << 20));
        assert_eq!(c.region.folio_size, 16 << 10);
        assert_eq!(c.region.writethrough, region::Writethrough::On);
        assert!(parse("max_heap=1").unwrap_err().contains("memory_high"));
        assert!(parse("memory_high=x;max_heap=1")
            .unwrap_err()
            .starts_with("memory_high"));
        assert!(parse("memory_high=1;max_heap=1;colour=red")
            .unwrap_err()
            .contains("colour"));
    }
}
