//! `uzswap run`'s options and the launch of the program: the child, its environment, its
//! signals and its exit status.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

use clap::Args;
use zswap::params::WritebackCompressor;

use super::shared_file::SharedFile;
use crate::size::parse_size;

/// Exit status when uzswap itself fails (as `timeout(1)`).
pub const FAILED: u8 = 125;

/// `uzswap run`'s options.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The memory limit: the heap's resident pages, staged folios, compressed pool and
    /// uzswap's metadata stay under it (e.g. 2G, 512M).
    #[arg(long, value_parser = parse_size)]
    pub memory_high: u64,
    /// The hard limit, as a cgroup's memory.max: past --memory-high with nothing left to
    /// reclaim (the swap directory full, the swap file failing) the program's allocations are
    /// throttled (memory.high's sleep, longer the further past), and past this limit
    /// --on-limit is done. Default: --memory-high and an eighth more, at least 8M more.
    #[arg(long, value_parser = parse_size)]
    pub memory_max: Option<u64>,
    /// What happens at --memory-max: kill the program (SIGKILL, as the OOM killer would,
    /// with a line saying why) or let its heap grow past it (exceed; said once, and
    /// counted in `max`).
    #[arg(long, value_name = "POLICY", default_value = "kill", value_parser = on_limit_arg)]
    pub on_limit: region::OnLimit,
    /// Accept a --memory-high larger than this machine's memory and swap together.
    #[arg(long)]
    pub force: bool,
    /// The address space reserved for the heap: the most the program can allocate, at most
    /// 15G. From 4G up its lower half is malloc's and its upper half holds mappings of 1 GiB
    /// or more (a JVM's heap). Default: the largest whose bookkeeping, every page of it in
    /// use, takes at most a quarter of the limit (about 100 times the limit), 1 GiB to 15 GiB.
    #[arg(long, value_parser = parse_size)]
    pub max_heap: Option<u64>,
    /// The pool's codec (lz4, zstd, deflate, ...; `name:level` for a level).
    #[arg(long)]
    pub compressor: Option<String>,
    /// What a page is re-encoded with as it goes to segments: `same` (as the pool holds it,
    /// the default) or a codec. `zstd:-1` writes 1.2-3.6x fewer bytes than lz4 (a cold set
    /// that must fit a cluster's memory, a slow link) for about a third of the throughput
    /// of a program bound by the tier on a 2-CPU machine.
    #[arg(
        long,
        value_name = "CODEC",
        default_value = "same",
        value_parser = writeback_compressor_arg,
    )]
    pub writeback_compressor: WritebackCompressor,
    /// The most of the limit the compressed pool may take, in percent (the kernel's
    /// `max_pool_percent`). Under it the pool's share moves, from 20, toward the side whose
    /// next step would have saved the program more time: a larger pool where pages come
    /// back from the disk soon after the pool wrote them there, a smaller one where hot pages
    /// come back from the pool soon after they left.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub max_pool_percent: u32,
    /// The pool takes up to --max-pool-percent, as in the kernel, instead of a share
    /// sized by its cost.
    #[arg(long)]
    pub fixed_pool_share: bool,
    /// The unit of reclaim and swap-in: a power of two from 4K to 2M. 16K by default: a
    /// program's heap is read in an order of its own, and a larger folio brings in pages it
    /// does not touch (64K brings in 16 pages for one; CPython runs 2.6x slower with it).
    #[arg(long, value_parser = parse_size, default_value = "16K")]
    pub folio_size: u64,
    /// Where the (unnamed) swap file goes. Default: the system temp directory. The same as
    /// `--swap-to file:DIR`.
    #[arg(long, conflicts_with = "swap_to")]
    pub swap_dir: Option<PathBuf>,
    /// Where cold pages go below the pool: `file:DIR`, an unnamed swap file in DIR (the
    /// default, in the system temp directory), or `redis://HOST:PORT[,HOST:PORT...]`, a
    /// Redis Cluster (or Valkey): each segment a key, acknowledged by a replica before its
    /// pages leave memory, leased, and every key of the run deleted when it ends.
    #[arg(long, value_name = "WHERE", value_parser = swap_to_arg)]
    pub swap_to: Option<SwapTo>,
    /// How pages are written below the pool: `segments` (compressed as the pool holds
    /// them, packed 64 KiB at a time, encrypted) or `pages` (decompressed, a page at a
    /// time, as the kernel's zswap writes back).
    #[arg(long, value_name = "FORMAT", default_value = "segments", value_parser = swap_format_arg)]
    pub swap_format: region::SwapFormat,
    /// Write segments in the clear. By default each is encrypted and authenticated
    /// (AES-256-GCM, a key made for the run and never written): a page changed on the swap
    /// device is poisoned (SIGBUS on access, and a line), never handed back.
    #[arg(long)]
    pub no_encrypt: bool,
    /// Write every stored page to the swap file at store time too (Y, the flag alone), or
    /// only while the pool is nearly full and its pages go to disk (auto); N by default.
    /// `uzswap param PID writethrough MODE` changes it while the program runs.
    #[arg(
        long,
        value_name = "MODE",
        num_args = 0..=1,
        default_value = "N",
        default_missing_value = "Y",
        value_parser = writethrough_arg,
    )]
    pub writethrough: region::Writethrough,
    /// Run without kernel-mode userfaultfd: a system call on an evicted buffer then fails
    /// with EFAULT instead of bringing it back.
    #[arg(long)]
    pub user_mode_only: bool,
    /// Serve each fault in the program thread that takes it (from a SIGBUS handler) instead
    /// of waking a uzswap thread: no wake-up across CPUs per fault (tens of microseconds
    /// where idle CPUs halt), and no CPU spent polling. The price: the kernel's own access
    /// to an evicted heap page is not served. uzswap retries the program's read, write, pread, pwrite, readv,
    /// writev, recv, recvfrom, send, sendto, recvmsg and sendmsg once their buffers are
    /// touched; any other system call, and those libc makes internally (stdio's fwrite and
    /// printf on their heap buffers), fail with EFAULT on an evicted page. For programs
    /// that do their I/O through those calls (CPython's own I/O does). SIGBUS stays
    /// uzswap's: the program's SIGBUS handler gets every SIGBUS uzswap does not serve.
    #[arg(long)]
    pub in_thread_faults: bool,
    /// Turn off the working set's protection: refault detection, as mm/workingset.c, by
    /// which a folio that comes back within what the region holds resident is kept out of
    /// reclaim's reach for a while, so that memory used once goes first.
    #[arg(long)]
    pub no_workingset: bool,
    /// Reclaim sees writes (the kernel's referenced bit, for writes): a folio at the head of
    /// reclaim's queue that the program wrote since reclaim last looked stays resident. Read
    /// from the page tables with no fault (userfaultfd's WP_ASYNC and PAGEMAP_SCAN, Linux
    /// 6.7), each look costs a system call, and each write after it a fault the kernel
    /// resolves: fewer faults on most programs, about as much time (BENCHMARKS.md).
    #[arg(long)]
    pub referenced_writes: bool,
    /// Reclaim sees reads as well as writes: the coldest folios are moved out uncompressed
    /// onto an inactive list (1/8 of the limit) and stored only if the program has not used
    /// them by its end; a fault on one there moves it back and keeps it (the kernel's
    /// referenced check, made with a fault). Fewer pages swapped in, but as many faults, and
    /// more moves in and out of the heap: no faster on the programs measured (BENCHMARKS.md).
    #[arg(long)]
    pub inactive_list: bool,
    /// Every fault brings its whole folio back. By default a fault on a page held in the
    /// pool or the swap file brings that page alone, unless it continues a sequential scan,
    /// across folios or within its folio (a page beside it already in).
    #[arg(long)]
    pub no_adaptive_swapin: bool,
    /// Register the heap with userfaultfd as the program starts. By default, under a limit of
    /// 1G or more (512M a CPU), it is registered once the program's anonymous memory (RssAnon
    /// and VmSwap) reaches half the limit: until then the kernel alone serves the heap, at no
    /// cost, and that anonymous memory is what is charged.
    #[arg(long)]
    pub register_at_start: bool,
    /// Print statistics when the program exits (to stderr): a short summary (the limits,
    /// the most held, peak RSS and what was outside the limit, the compression ratio, what
    /// went to the swap file, the time spent waiting on faults and throttled), or with
    /// `--stats=full` every counter (docs/STATISTICS.md; `uzswap stat PID` shows them while
    /// the program runs).
    #[arg(
        long,
        value_name = "FORM",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "summary",
    )]
    pub stats: Option<StatsForm>,
    /// Where a statically linked program's statistics go at its exit, in the form `uzswap
    /// stat` reads (for `bench run`, which runs such a program through `uzswap run`).
    #[arg(long, hide = true)]
    pub stats_file: Option<PathBuf>,
    /// The program and its arguments.
    #[arg(last = true, required = true, num_args = 1..)]
    pub program: Vec<OsString>,
}

impl RunArgs {
    /// The command line that gives these options (`uzswap run` and then these).
    pub fn to_args(&self) -> Vec<OsString> {
        let mut a: Vec<OsString> = Vec::new();
        let mut opt = |name: &str, value: String| {
            a.push(format!("--{name}={value}").into());
        };
        opt("memory-high", self.memory_high.to_string());
        if let Some(m) = self.memory_max {
            opt("memory-max", m.to_string());
        }
        opt("on-limit", self.on_limit.as_str().into());
        if let Some(h) = self.max_heap {
            opt("max-heap", h.to_string());
        }
        if let Some(c) = &self.compressor {
            opt("compressor", c.clone());
        }
        opt(
            "writeback-compressor",
            self.writeback_compressor.to_string(),
        );
        opt("max-pool-percent", self.max_pool_percent.to_string());
        opt("folio-size", self.folio_size.to_string());
        if let Some(d) = &self.swap_dir {
            opt("swap-dir", d.display().to_string());
        }
        match &self.swap_to {
            Some(SwapTo::File(d)) => opt("swap-to", format!("file:{}", d.display())),
            Some(SwapTo::Redis(url)) => opt("swap-to", url.clone()),
            None => {}
        }
        let format = match self.swap_format {
            region::SwapFormat::Segments => "segments",
            region::SwapFormat::Pages => "pages",
        };
        opt("swap-format", format.into());
        opt("writethrough", self.writethrough.as_str().into());
        if let Some(form) = self.stats {
            let form = match form {
                StatsForm::Summary => "summary",
                StatsForm::Full => "full",
            };
            opt("stats", form.into());
        }
        if let Some(f) = &self.stats_file {
            opt("stats-file", f.display().to_string());
        }
        let flags = [
            ("force", self.force),
            ("fixed-pool-share", self.fixed_pool_share),
            ("no-encrypt", self.no_encrypt),
            ("user-mode-only", self.user_mode_only),
            ("in-thread-faults", self.in_thread_faults),
            ("no-workingset", self.no_workingset),
            ("referenced-writes", self.referenced_writes),
            ("inactive-list", self.inactive_list),
            ("no-adaptive-swapin", self.no_adaptive_swapin),
            ("register-at-start", self.register_at_start),
        ];
        for (name, on) in flags {
            if on {
                a.push(format!("--{name}").into());
            }
        }
        a.push("--".into());
        a.extend(self.program.iter().cloned());
        a
    }
}

/// Whether the program `args` runs is held from outside (statically linked: agent.rs)
/// rather than by the preload.
pub fn held_from_outside(args: &RunArgs) -> bool {
    program_path(args)
        .ok()
        .and_then(|path| super::program::check(&path).ok())
        == Some(super::program::Linking::Static)
}

/// Check what `uzswap run` would check before the program starts: the program, the
/// options, and for a program the preload holds, the preload and kernel-mode faults.
pub fn check(args: &RunArgs) -> Result<(), Refusal> {
    match held_from_outside(args) {
        true => region_config(args)
            .map(|_| ())
            .map_err(|line| (FAILED, line)),
        false => command(args, None, None).map(|_| ()),
    }
}

/// What `--stats` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StatsForm {
    /// A few lines (stat/summary.rs).
    Summary,
    /// Every counter, as `uzswap stat` prints them.
    Full,
}

/// `--swap-to`'s value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SwapTo {
    /// An unnamed swap file in a directory.
    File(PathBuf),
    /// A Redis Cluster, as `redis://HOST:PORT[,HOST:PORT...]`.
    Redis(String),
}

fn swap_to_arg(text: &str) -> Result<SwapTo, String> {
    if text.starts_with("redis://") {
        redis_tier::parse_nodes(text).map_err(|e| e.to_string())?;
        return Ok(SwapTo::Redis(text.to_string()));
    }
    match text.split_once(':') {
        Some(("file", dir)) if !dir.is_empty() => Ok(SwapTo::File(dir.into())),
        _ => Err(format!(
            "{text:?} is not file:DIR or redis://HOST:PORT[,HOST:PORT...]"
        )),
    }
}

/// This run's id, for the keys of a Redis Cluster tier: `uzswap:RUN-PID:SEGMENT` for each
/// process of the tree, all deleted once the program has ended.
pub(super) fn run_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(redis_tier::new_run_id)
}

/// `--writeback-compressor`'s value.
fn writeback_compressor_arg(text: &str) -> Result<WritebackCompressor, String> {
    text.parse()
        .map_err(|e: zswap::params::ParamError| e.to_string())
}

/// `--swap-format`'s value.
fn swap_format_arg(text: &str) -> Result<region::SwapFormat, String> {
    match text {
        "segments" => Ok(region::SwapFormat::Segments),
        "pages" => Ok(region::SwapFormat::Pages),
        _ => Err(format!("{text:?} is not segments or pages")),
    }
}

/// `--on-limit`'s value: kill or exceed.
fn on_limit_arg(text: &str) -> Result<region::OnLimit, String> {
    text.parse()
}

/// `--writethrough`'s value: Y, N or auto (or another of the kernel's boolean spellings).
fn writethrough_arg(text: &str) -> Result<region::Writethrough, String> {
    text.parse().map_err(|e| format!("{e}"))
}

/// Run the program; the exit status is the program's (see the module's documentation).
pub fn run(args: &RunArgs) -> ExitCode {
    match start(args) {
        Ok(code) => code,
        Err((status, line)) => {
            crate::report::say(&line);
            ExitCode::from(status)
        }
    }
}

/// A failure before the program ran: its exit status and line.
pub type Refusal = (u8, String);

fn start(args: &RunArgs) -> Result<ExitCode, Refusal> {
    let fail = |line: String| (FAILED, line);
    let path = program_path(args)?;
    let linking = super::program::check(&path).map_err(|e| (e.status(), e.to_string()))?;
    if linking == super::program::Linking::Static {
        return super::agent::run(args, &path);
    }
    let stats = match args.stats {
        Some(_) => Some(SharedFile::new().map_err(fail)?),
        None => None,
    };
    let tree = SharedFile::ledger().map_err(fail)?;
    let mut command = command(
        args,
        stats.as_ref().map(SharedFile::path),
        Some(tree.path()),
    )?;
    // Caught from before the program starts, so that none comes between its start and the
    // forwarding (it would end uzswap and miss the program); the program starts with them
    // at their defaults, as exec leaves a caught signal.
    let signals = catch_signals();
    let mut child = command.spawn().map_err(|e| {
        let status = match e.kind() {
            std::io::ErrorKind::NotFound => 127,
            _ => 126,
        };
        let path = std::path::Path::new(command.get_program());
        (status, format!("{}: {e}", path.display()))
    })?;
    let forwarding = signals.and_then(|s| forward_signals(s, child.id()));
    let status = child
        .wait()
        .map_err(|e| fail(format!("waiting for the program: {e}")))?;
    if let Some(h) = forwarding {
        h.close();
    }
    if let Some(SwapTo::Redis(url)) = &args.swap_to {
        // However the program ended: its processes' keys go now, not when leases run out.
        if let Err(e) = redis_tier::delete_run(url, run_id()) {
            crate::report::say(&format!(
                "warning: the run's keys are left to their lease (a minute): {e}"
            ));
        }
    }
    if let (Some(stats), Some(form)) = (&stats, args.stats) {
        print_stats(&stats.read(), status, form);
    }
    Ok(ExitCode::from(exit_status(status)))
}

/// The program as `uzswap run` starts it, not yet started: found on `PATH` and checked,
/// with the preload library and the region's configuration in its environment. With
/// `stats`, the preload writes its statistics there when the program exits (the lines
/// `--stats` prints). With `tree`, the ledger through which the processes of the program's
/// tree share the limit (crates/preload/src/tree.rs). The program's own stdin, stdout and
/// stderr are left as the caller sets them.
pub fn command(
    args: &RunArgs,
    stats: Option<&std::path::Path>,
    tree: Option<&std::path::Path>,
) -> Result<Command, Refusal> {
    let fail = |line: String| (FAILED, line);
    let path = program_path(args)?;
    let linking = super::program::check(&path).map_err(|e| (e.status(), e.to_string()))?;
    if linking == super::program::Linking::Static {
        return Err((
            126,
            format!(
                "{}: is statically linked: LD_PRELOAD cannot reach it (`uzswap run` holds it \
                 from outside)",
                path.display()
            ),
        ));
    }
    let preload = preload_library().map_err(fail)?;
    if !args.user_mode_only {
        kernel_mode_faults().map_err(fail)?;
    }
    let config = environment(args, stats, tree).map_err(fail)?;

    let mut command = Command::new(&path);
    command
        .arg0(&args.program[0])
        .args(&args.program[1..])
        .env("UZSWAP_RUN", config)
        .env("LD_PRELOAD", ld_preload(&preload))
        // mimalloc (the heap's allocator): purge freed memory with MADV_FREE rather than
        // decommit it, and never ask for huge pages, which the region refuses.
        .env("MIMALLOC_PURGE_DECOMMITS", "0")
        .env("MIMALLOC_ALLOW_THP", "0");
    Ok(command)
}

use std::os::unix::process::CommandExt;

/// The program's path, found as a shell finds it.
fn program_path(args: &RunArgs) -> Result<PathBuf, Refusal> {
    let name = args.program[0]
        .to_str()
        .ok_or_else(|| (FAILED, "the program's name is not UTF-8".to_string()))?;
    super::program::find(name).map_err(|e| (e.status(), e.to_string()))
}

/// The exit status of a shell for a child that ended so: its code, or 128+N for death by
/// signal N.
pub(super) fn exit_status(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => code as u8,
        (None, Some(signal)) => 128u8.wrapping_add(signal as u8),
        _ => FAILED,
    }
}

/// The preload library: next to this binary (a workspace build puts both in the same
/// target directory), or in `../lib/uzswap/` beside its `bin/` (an install).
fn preload_library() -> Result<PathBuf, String> {
    const NAME: &str = "libuzswap_preload.so";
    let exe = std::env::current_exe().map_err(|e| format!("cannot find uzswap's own path: {e}"))?;
    let dir = exe.parent().ok_or("uzswap's path has no directory")?;
    let candidates = [dir.join(NAME), dir.join("../lib/uzswap").join(NAME)];
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| {
            format!(
                "the preload library {NAME} is not next to {} (build the whole workspace: \
                 cargo build --release)",
                exe.display()
            )
        })
}

/// Whether this process may have kernel-mode faults served (system calls on evicted
/// memory); else how to get them.
fn kernel_mode_faults() -> Result<(), String> {
    let uffd = uffd::UffdBuilder::new()
        .create()
        .map_err(|e| format!("userfaultfd is not available: {e}"))?;
    match uffd.user_mode_only() {
        false => Ok(()),
        true => Err(
            "this process may only have user-mode faults served, so a system call \
                     on evicted memory would fail with EFAULT; grant access to \
                     /dev/userfaultfd or CAP_SYS_PTRACE (or set vm.unprivileged_userfaultfd \
                     = 1), or run with --user-mode-only to accept that"
                .into(),
        ),
    }
}

/// The largest heap: what mimalloc manages in one arena (its bitmaps cover 16 GiB of 64 KiB
/// slices, its bookkeeping included: it refuses a region of 16 GiB, and of 16,256 MiB, and
/// takes 15 GiB). A larger region would be several arenas, and the bookkeeping at the start
/// of each is read by every allocating thread, uzswap's own included, which must never fault
/// on the region: only the first arena's is pinned.
const MAX_HEAP: u64 = 15 << 30;

/// The default `--max-heap`: the largest heap whose bookkeeping, were every page of it in
/// use, would take at most a quarter of the limit (about 100 times the limit: a runtime that
/// reserves a large heap up front, a JVM's `-Xmx`, finds room in it), from 1 GiB to 15 GiB.
/// Only address space: the bookkeeping is charged as pages are used.
fn default_max_heap(config: &region::RegionConfig, memory_high: u64) -> u64 {
    let fits = |size: u64| {
        region::Region::min_memory_limit(size as usize, config)
            .is_some_and(|least| least <= memory_high / 4)
    };
    let mut size = MAX_HEAP;
    while size > 1 << 30 && !fits(size) {
        size -= 256 << 20;
    }
    size
}

/// The region's configuration from `args` (its swap device aside), checked for a heap of
/// `--max-heap` (or its default), which comes with it.
pub(super) fn region_config(args: &RunArgs) -> Result<(region::RegionConfig, u64), String> {
    let memory_max = memory_max(args)?;
    let mut config =
        region::RegionConfig::new(args.memory_high).folio_size(args.folio_size as usize);
    if let Some(c) = &args.compressor {
        config = config.compressor(c.parse().map_err(|e| format!("--compressor: {e}"))?);
    }
    config = config
        .max_pool_percent(args.max_pool_percent)
        .in_thread_faults(args.in_thread_faults)
        .workingset(!args.no_workingset)
        .referenced_writes(args.referenced_writes)
        .inactive_list(args.inactive_list)
        .adaptive_swapin(!args.no_adaptive_swapin)
        .lazy_registration(!args.register_at_start)
        .auto_pool_share(!args.fixed_pool_share)
        .writethrough(args.writethrough)
        .swap_format(args.swap_format)
        .writeback_compressor(args.writeback_compressor)
        .encrypt(args.swap_format == region::SwapFormat::Segments && !args.no_encrypt);
    let max_heap = args
        .max_heap
        .unwrap_or_else(|| default_max_heap(&config, args.memory_high));
    if max_heap > MAX_HEAP {
        return Err(format!(
            "--max-heap: {max_heap} bytes is more than the heap's allocator (mimalloc) manages \
             in one arena: at most 15G"
        ));
    }
    config
        .validate(max_heap as usize)
        .map_err(|e| match e.field {
            "memory_limit" => too_small(args, &config, max_heap),
            field => format!("--{}: {}", field.replace('_', "-"), e.reason),
        })?;
    config.swap_dir = match &args.swap_to {
        Some(SwapTo::File(dir)) => Some(dir.clone()),
        Some(SwapTo::Redis(_)) => None,
        None => args.swap_dir.clone(),
    };
    // As a cgroup keeps memory.high and memory.max, and says so on the program's stderr.
    config.over_limit = region::OverLimit {
        throttle: true,
        memory_max: Some(memory_max),
        on_limit: args.on_limit,
        say: true,
    };
    Ok((config, max_heap))
}

/// `UZSWAP_RUN`'s value (crates/preload/src/config.rs reads it).
fn environment(
    args: &RunArgs,
    stats: Option<&std::path::Path>,
    tree: Option<&std::path::Path>,
) -> Result<String, String> {
    let memory_max = memory_max(args)?;
    let (config, max_heap) = region_config(args)?;
    let mut items = vec![
        format!("memory_high={}", args.memory_high),
        format!("max_heap={max_heap}"),
        format!("folio_size={}", args.folio_size),
        format!("max_pool_percent={}", args.max_pool_percent),
        format!("writethrough={}", args.writethrough.as_str()),
        format!("user_mode_only={}", args.user_mode_only as u8),
        format!("in_thread_faults={}", args.in_thread_faults as u8),
        format!("workingset={}", !args.no_workingset as u8),
        format!("referenced_writes={}", args.referenced_writes as u8),
        format!("inactive_list={}", args.inactive_list as u8),
        format!("adaptive_swapin={}", !args.no_adaptive_swapin as u8),
        format!("lazy_registration={}", !args.register_at_start as u8),
        format!("auto_pool_share={}", !args.fixed_pool_share as u8),
        format!("memory_max={memory_max}"),
        format!("on_limit={}", args.on_limit.as_str()),
        format!(
            "swap_format={}",
            match args.swap_format {
                region::SwapFormat::Segments => "segments",
                region::SwapFormat::Pages => "pages",
            }
        ),
        format!("encrypt={}", config.encrypt as u8),
        format!("writeback_compressor={}", args.writeback_compressor),
    ];
    if let Some(c) = &args.compressor {
        items.push(format!("compressor={c}"));
    }
    if stats.is_some() {
        // Only the program itself writes them, not the children it starts.
        items.push(format!("stats_parent={}", std::process::id()));
    }
    let swap_dir = match &args.swap_to {
        Some(SwapTo::File(dir)) => Some(dir.as_path()),
        Some(SwapTo::Redis(url)) => {
            if args.swap_format == region::SwapFormat::Pages {
                return Err("--swap-to redis:// takes segments: leave --swap-format out".into());
            }
            // Reached now, so that a cluster that cannot be used stops the run before the
            // program starts (finding nothing of this new run to delete).
            redis_tier::delete_run(url, run_id()).map_err(|e| format!("--swap-to: {e}"))?;
            if url.contains(';') {
                return Err("--swap-to: an address with ';' is not supported".into());
            }
            items.push(format!("swap_to={url}"));
            items.push(format!("run_id={}", run_id()));
            None
        }
        None => args.swap_dir.as_deref(),
    };
    if !matches!(args.swap_to, Some(SwapTo::Redis(_))) {
        // Each process makes its swap file at its first write (a lazy region's): a directory
        // that cannot hold one is said now, before the program starts.
        zswap::swap::FileDevice::create(swap_dir, zswap::swap::file::MIN_STRIPE_SLOTS)
            .map_err(|e| format!("swap file: {e}"))?;
    }
    for (name, path) in [
        ("swap_dir", swap_dir),
        ("stats_file", stats),
        ("tree_file", tree),
    ] {
        if let Some(p) = path {
            let p = p.to_str().ok_or(format!("{name}: the path is not UTF-8"))?;
            if p.contains(';') {
                return Err(format!("{name}: a path with ';' is not supported"));
            }
            items.push(format!("{name}={p}"));
        }
    }
    Ok(items.join(";"))
}

/// `--memory-max`, or its default: an eighth over `--memory-high`, at least 8 MiB over.
/// Refused below `--memory-high`, and `--memory-high` past this machine's memory and swap
/// without `--force`.
fn memory_max(args: &RunArgs) -> Result<u64, String> {
    use crate::size::fmt_size;
    if !args.force {
        if let Some(machine) = machine_memory() {
            if args.memory_high > machine {
                return Err(format!(
                    "--memory-high: {} is more than this machine's memory and swap ({}); \
                     give at most that, or add --force",
                    fmt_size(args.memory_high),
                    crate::report::mib(machine)
                ));
            }
        }
    }
    let default = args.memory_high + (args.memory_high / 8).max(8 << 20);
    let max = args.memory_max.unwrap_or(default);
    if max < args.memory_high {
        return Err(format!(
            "--memory-max: {} is below --memory-high {}; give at least that",
            fmt_size(max),
            fmt_size(args.memory_high)
        ));
    }
    Ok(max)
}

/// MemTotal and SwapTotal of /proc/meminfo together, in bytes; None where it cannot be read.
fn machine_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib = |field: &str| {
        meminfo
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    Some((kib("MemTotal:")? + kib("SwapTotal:").unwrap_or(0)) * 1024)
}

/// The refusal of a `--memory-high` below what the region needs for itself: one line with
/// the least limit it would accept.
fn too_small(args: &RunArgs, config: &region::RegionConfig, max_heap: u64) -> String {
    use crate::size::fmt_size;
    let least = region::Region::min_memory_limit(max_heap as usize, config);
    match least {
        Some(least) => format!(
            "--memory-high: {} is below the least limit uzswap can keep for a heap of {} \
             (--max-heap) in {} folios: {}; give at least that",
            fmt_size(args.memory_high),
            fmt_size(max_heap),
            fmt_size(args.folio_size),
            crate::report::mib(least.next_multiple_of(1 << 20))
        ),
        None => format!(
            "--memory-high: {} is too small a limit",
            fmt_size(args.memory_high)
        ),
    }
}

/// `LD_PRELOAD` with the library first, before what the environment already preloads.
fn ld_preload(library: &std::path::Path) -> OsString {
    let mut value = OsString::from(library);
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        value.push(":");
        value.push(old);
    }
    value
}

/// The signals passed on to the program: those `timeout(1)` passes on (SIGHUP, SIGINT,
/// SIGQUIT, SIGTERM, SIGALRM) and the others a user sends a program to talk to it (SIGUSR1,
/// SIGUSR2, SIGWINCH).
const FORWARDED: [i32; 8] = [
    signal_hook::consts::SIGHUP,
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGQUIT,
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGALRM,
    signal_hook::consts::SIGUSR1,
    signal_hook::consts::SIGUSR2,
    signal_hook::consts::SIGWINCH,
];

/// The `FORWARDED` signals, caught from now on, for `forward_signals`; those uzswap was
/// started ignoring are left ignored, so that the program inherits them ignored, as it would
/// without uzswap (`nohup`'s SIGHUP; SIGINT in a script's background job). A caught signal
/// is at its default in the program.
pub(super) fn catch_signals() -> Option<signal_hook::iterator::Signals> {
    let ignored = ignored_signals();
    let caught = FORWARDED
        .into_iter()
        .filter(|&signal| ignored & (1 << (signal - 1)) == 0);
    signal_hook::iterator::Signals::new(caught).ok()
}

/// The signals this process ignores, a bit each (bit `n - 1` for signal `n`): the `SigIgn`
/// mask of /proc/self/status (none if it cannot be read).
fn ignored_signals() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let mask = status.lines().find_map(|l| l.strip_prefix("SigIgn:"))?;
            u64::from_str_radix(mask.trim(), 16).ok()
        })
        .unwrap_or(0)
}

/// Pass the signals caught (those that came before too) on to the child until the returned
/// handle is closed.
pub(super) fn forward_signals(
    mut signals: signal_hook::iterator::Signals,
    child: u32,
) -> Option<signal_hook::iterator::Handle> {
    let handle = signals.handle();
    let pid = rustix::process::Pid::from_raw(child as i32)?;
    std::thread::spawn(move || {
        for signal in signals.forever() {
            if let Some(s) = rustix::process::Signal::from_named_raw(signal) {
                let _ = rustix::process::kill_process(pid, s);
            }
        }
    });
    Some(handle)
}

/// Print the statistics the preload wrote at the program's exit (as `uzswap stat` prints
/// them).
fn print_stats(text: &str, status: std::process::ExitStatus, form: StatsForm) {
    use std::os::unix::process::ExitStatusExt;
    match crate::stat::Snapshot::parse(text) {
        _ if text.is_empty() => crate::report::say(&match status.signal() {
            Some(signal) => format!("no statistics: the program was killed by signal {signal}"),
            None => "no statistics: the program ended before writing them".into(),
        }),
        Ok(stats) => match form {
            StatsForm::Summary => eprint!("{}", crate::stat::summary::summary(&stats)),
            StatsForm::Full => eprint!("{}", stats.used_orders_only().text()),
        },
        Err(e) => crate::report::say(&format!("the program's statistics: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `to_args` gives back what was parsed, every option set away from its default.
    #[test]
    fn the_options_go_back_to_a_command_line() {
        #[derive(clap::Parser)]
        struct Run {
            #[command(flatten)]
            run: RunArgs,
        }
        let parse = |args: Vec<OsString>| {
            let mut all: Vec<OsString> = vec!["run".into()];
            all.extend(args);
            <Run as clap::Parser>::try_parse_from(all).unwrap().run
        };
        let given = [
            "--memory-high=64M",
            "--memory-max=80M",
            "--on-limit=exceed",
            "--force",
            "--max-heap=2G",
            "--compressor=zstd:3",
            "--writeback-compressor=zstd:-1",
            "--max-pool-percent=30",
            "--fixed-pool-share",
            "--folio-size=64K",
            "--swap-to=file:/var/tmp",
            "--swap-format=pages",
            "--no-encrypt",
            "--writethrough=auto",
            "--user-mode-only",
            "--no-workingset",
            "--referenced-writes",
            "--inactive-list",
            "--no-adaptive-swapin",
            "--register-at-start",
            "--stats=full",
            "--stats-file=/tmp/s",
            "--",
            "prog",
            "--x",
        ];
        let args = parse(given.iter().map(OsString::from).collect());
        let again = parse(args.to_args());
        assert_eq!(format!("{args:?}"), format!("{again:?}"));
        assert!(args.force && args.no_encrypt && args.stats_file.is_some());
    }

    #[test]
    fn the_default_heap_is_a_hundred_times_the_limit_from_1g_to_15g() {
        let heap = |limit: u64| default_max_heap(&region::RegionConfig::new(limit), limit);
        assert_eq!(heap(8 << 20), 1 << 30, "at least 1 GiB");
        let at_64m = heap(64 << 20);
        assert!(
            (4 << 30..=8 << 30).contains(&at_64m),
            "{} MiB for a limit of 64 MiB",
            at_64m >> 20
        );
        let least =
            region::Region::min_memory_limit(at_64m as usize, &region::RegionConfig::new(64 << 20));
        assert!(
            least.unwrap() <= 16 << 20,
            "its bookkeeping within a quarter of the limit"
        );
        assert_eq!(heap(1 << 30), MAX_HEAP, "at most 15 GiB");
    }
}
