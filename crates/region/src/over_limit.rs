//! The limit past reclaim, as a memory cgroup keeps memory.high and memory.max
//! (mm/memcontrol.c): a fault that finds the region over its limit with nothing left to
//! reclaim (the swap device full or failing, the pool at its ceiling with nowhere to write
//! back, every folio in flight) is throttled, and past the hard limit the region does what
//! the configuration says: kill the process, as the OOM killer would, or let it grow.
//!
//! - **memory.high**: the thread that serves the fault sleeps for the kernel's penalty
//!   (`calculate_high_delay`): the excess over the limit as a fraction of it, squared, times
//!   the pages charged, in seconds; nothing under 10 ms, at most 2 s a sleep. A program that
//!   keeps allocating slows down the further it goes past the limit.
//! - **memory.max**: once the region is past `memory_max` and reclaim has freed nothing for
//!   `RECLAIM_PATIENCE` (the OOM killer's retries), `OnLimit::Kill` kills the process with
//!   SIGKILL, `OnLimit::Exceed` lets the fault through unthrottled.
//!
//! Counted with memory.events' names (`high`, `max`, `oom`, `oom_kill`) and the time slept
//! (`throttled_ns`); with `OverLimit::say`, the start of each episode (throttling, excess,
//! a failing swap device, the kill) is one line on stderr, saying why and what is done. An
//! episode ends when a fault finds room under the limit again.

use std::cell::Cell;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use zswap::PAGE_SIZE;

use crate::inner::Inner;

/// What the region does past `OverLimit::memory_max` with nothing left to reclaim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnLimit {
    /// Kill the process (SIGKILL), as the OOM killer kills a task of a cgroup at memory.max.
    #[default]
    Kill,
    /// Let the region grow past the hard limit (counted and said).
    Exceed,
}

impl OnLimit {
    /// The spelling `FromStr` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            OnLimit::Kill => "kill",
            OnLimit::Exceed => "exceed",
        }
    }
}

impl std::str::FromStr for OnLimit {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "kill" => Ok(OnLimit::Kill),
            "exceed" => Ok(OnLimit::Exceed),
            _ => Err(format!("{s:?} is not kill or exceed")),
        }
    }
}

/// A limit a region shares with other regions (those of one process tree under `uzswap run`),
/// as a cgroup's tasks share theirs: each time a fault makes room, the region says what it
/// holds and takes its share of the limit and of the hard limit (`RegionConfig::shared_limit`).
pub trait SharedLimit: Send + Sync + std::fmt::Debug {
    /// This region holds `held` bytes: record it, and return the region's limit and hard
    /// limit now (the shared ones less what the others hold).
    fn share(&self, held: u64) -> (u64, Option<u64>);

    /// The region is about to kill its process at the hard limit: record it where the others
    /// see it (the process will not get to).
    fn killed(&self) {}
}

/// How a region keeps its limit when reclaim cannot (`RegionConfig::over_limit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OverLimit {
    /// Throttle faults over the limit with nothing left to reclaim (memory.high's sleep).
    /// Default: off (a fault then takes the region past its limit unthrottled).
    pub throttle: bool,
    /// The hard limit in bytes (memory.max), at least `memory_limit` (`Region::set_limits`
    /// changes it). Default: None.
    pub memory_max: Option<u64>,
    /// What is done past `memory_max`. Default: kill.
    pub on_limit: OnLimit,
    /// Say on stderr, one line each, when an episode starts. Default: off.
    pub say: bool,
}

/// The episodes under way, so that each is said once.
#[derive(Debug, Default)]
pub(crate) struct OverLimitState {
    /// A fault found the region over its limit with nothing to reclaim, and none has found
    /// room since.
    over_high: AtomicBool,
    /// The same past `memory_max`.
    over_max: AtomicBool,
    /// `swap_write_fail` when the device's failures were last said.
    write_failures_said: AtomicU64,
    /// The most a fork brought back into memory (`Region::prepare_fork`): pages shared with a
    /// child cannot be moved out, so once a fork brought any back the region is neither
    /// throttled nor killed (`uzswap run` says so at the fork).
    pub fork_allowance: AtomicU64,
}

/// The least sleep worth taking, and the most one sleep takes (the kernel's `HZ / 100`
/// and `MEMCG_MAX_HIGH_DELAY_JIFFIES`).
const MIN_DELAY: Duration = Duration::from_millis(10);
const MAX_DELAY: Duration = Duration::from_secs(2);

thread_local! {
    /// Pages this thread brought in over the limit since it last slept (the kernel's
    /// `current->memcg_nr_pages_over_high`).
    static PAGES_OVER_HIGH: Cell<u64> = const { Cell::new(0) };
}

/// memory.high's penalty for charging `pages` with the region at `usage` against `high`:
/// `(excess / high)^2 * pages` seconds, as `calculate_high_delay` works it out (the overage
/// squared times 64 s, times the pages over `MEMCG_CHARGE_BATCH`, 64).
pub(crate) fn high_delay(usage: u64, high: u64, pages: u64) -> Duration {
    if usage <= high {
        return Duration::ZERO;
    }
    let overage = (usage - high) as f64 / high.max(PAGE_SIZE as u64) as f64;
    Duration::from_secs_f64((overage * overage * pages as f64).min(3600.0))
}

/// A fault found room under the limit: any episode is over.
pub(crate) fn back_under(inner: &Inner) {
    let state = &inner.over_limit;
    if state.over_high.load(Relaxed) {
        state.over_high.store(false, Relaxed);
        state.over_max.store(false, Relaxed);
        PAGES_OVER_HIGH.with(|p| p.set(0));
    }
}

/// A fault is about to bring in `need` bytes and reclaim has nothing left to take: count it
/// and throttle, or carry out `on_limit` past the hard limit. Returns once the fault may go
/// on (or never, when the process is killed).
pub(crate) fn handle_over_limit(inner: &Inner, need: u64) {
    let config = inner.over_limit_config;
    let state = &inner.over_limit;
    let limit = inner.limit();
    let usage = inner.usage().total() + need;
    if usage <= limit {
        return;
    }
    inner.stats.high.fetch_add(1, Relaxed);
    if state.fork_allowance.load(Relaxed) > 0 {
        // A fork left pages shared with a child, which reclaim cannot move out; it takes
        // them in turn with the rest, so it may find nothing to take while they are the
        // coldest. Throttling or killing the program for them would punish the fork (said
        // when it happened).
        return;
    }
    let new_episode = !state.over_high.swap(true, Relaxed);
    let max = inner.memory_max.load(Relaxed);
    if usage > max {
        // As the OOM killer runs only after reclaim's retries: wait while anyone still frees
        // something, once an episode (past the hard limit with `Exceed`, faults go on at
        // full speed).
        // The wait leaves the userfaultfd to the spare, as a disk read does: the discards it
        // may be waiting for come as events someone must read.
        let (usage, max) = match state.over_max.load(Relaxed) {
            true => (usage, max),
            false => {
                inner.spares.blocking(|| {
                    crate::reclaim::wait_for_reclaim(inner, inner.limit().saturating_sub(need))
                });
                let usage = inner.usage().total();
                // A shared limit may have moved meanwhile (another process freed or ended).
                if let Some(shared) = &inner.shared_limit {
                    let (limit, max) = shared.share(usage);
                    inner.set_limits(limit, max);
                }
                (usage + need, inner.memory_max.load(Relaxed))
            }
        };
        if usage > max {
            inner.stats.max.fetch_add(1, Relaxed);
            match config.on_limit {
                OnLimit::Kill => kill(inner, usage, max),
                OnLimit::Exceed => {
                    if !state.over_max.swap(true, Relaxed) && config.say {
                        say(&format!(
                            "the heap would hold {}, over --memory-max {}, and nothing more \
                             can be reclaimed ({}): letting it grow unthrottled (--on-limit \
                             exceed)",
                            mib(usage),
                            mib(max),
                            why_stuck(inner)
                        ));
                    }
                    // Throttling has had its chance to let reclaim catch up: past the hard
                    // limit the program runs at full speed, as the user chose.
                    return;
                }
            }
        }
    }
    if !config.throttle {
        return;
    }
    if new_episode && config.say {
        say(&format!(
            "the heap would hold {}, over --memory-high {}, and nothing more can be reclaimed \
             ({}): throttling the program's allocations",
            mib(usage),
            mib(inner.limit()),
            why_stuck(inner)
        ));
    }
    let pages = PAGES_OVER_HIGH.with(|p| {
        p.set(p.get() + need.div_ceil(PAGE_SIZE as u64));
        p.get()
    });
    let delay = high_delay(usage, limit, pages);
    if delay < MIN_DELAY {
        return;
    }
    PAGES_OVER_HIGH.with(|p| p.set(0));
    let delay = delay.min(MAX_DELAY);
    // A handler's sleep leaves the userfaultfd to the spare, as a disk read does: the
    // program's other faults and its madvise calls are throttled by their own turn here,
    // not held behind this one.
    inner.spares.blocking(|| std::thread::sleep(delay));
    inner
        .stats
        .throttled_ns
        .fetch_add(delay.as_nanos() as u64, Relaxed);
}

/// Say it once when writes to the swap device have started failing since last said (kswapd
/// looks after each pass): the pool then keeps what it cannot write, and the limit may follow.
pub(crate) fn watch_device(inner: &Inner) {
    if !inner.over_limit_config.say {
        return;
    }
    let failures = inner.zswap.stats().get("swap_write_fail");
    let said = inner.over_limit.write_failures_said.load(Relaxed);
    if failures > said
        && inner
            .over_limit
            .write_failures_said
            .compare_exchange(said, failures, Relaxed, Relaxed)
            .is_ok()
        && said == 0
    {
        say(&format!(
            "writes to the swap file fail ({failures} so far; is its directory full? \
             --swap-dir chooses another): the pool keeps those pages, and past its share the \
             limit cannot be kept"
        ));
    }
}

/// The process dies as the OOM killer would end it: one line saying why, then SIGKILL.
fn kill(inner: &Inner, usage: u64, max: u64) -> ! {
    inner.stats.oom.fetch_add(1, Relaxed);
    inner.stats.oom_kill.fetch_add(1, Relaxed);
    if let Some(shared) = &inner.shared_limit {
        shared.killed();
    }
    // Said whatever `say` is: a process that dies must not die in silence.
    say(&format!(
        "the heap would hold {}, over --memory-max {}, and nothing more can be reclaimed \
         ({}): killing the program (--on-limit kill; --on-limit exceed lets it grow)",
        mib(usage),
        mib(max),
        why_stuck(inner)
    ));
    let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    // SIGKILL is not blockable: the process is gone before this thread runs again.
    loop {
        std::thread::park();
    }
}

/// Why reclaim found nothing to take, as far as the engine's counters tell.
fn why_stuck(inner: &Inner) -> String {
    let stats = inner.zswap.stats();
    let write_failures = stats.get("swap_write_fail");
    if write_failures > 0 {
        return format!("{write_failures} writes to the swap file failed");
    }
    if !inner.group.writeback_enabled() {
        return "writeback is off and the pool is at its share".into();
    }
    "the pool is at its share and nothing resident can go".into()
}

fn mib(bytes: u64) -> String {
    let m = bytes as f64 / (1 << 20) as f64;
    match bytes.is_multiple_of(1 << 20) {
        true => format!("{m:.0} MiB"),
        false => format!("{m:.1} MiB"),
    }
}

/// One line on stderr, as `uzswap: ...`, written whole.
pub(crate) fn say(line: &str) {
    let _ = std::io::stderr().write_all(format!("uzswap: {line}\n").as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_penalty_is_the_kernels_calculate_high_delay() {
        let mib = 1u64 << 20;
        assert_eq!(high_delay(100 * mib, 100 * mib, 64), Duration::ZERO);
        // 10% over, 64 pages (MEMCG_CHARGE_BATCH): 64 s * 0.01 = 0.64 s.
        let d = high_delay(110 * mib, 100 * mib, 64);
        assert!((d.as_secs_f64() - 0.64).abs() < 1e-6, "{d:?}");
        // Four times the pages, four times the sleep; twice the excess, four times too.
        assert_eq!(high_delay(110 * mib, 100 * mib, 256), d * 4);
        let d2 = high_delay(120 * mib, 100 * mib, 64).as_secs_f64();
        assert!((d2 - 4.0 * d.as_secs_f64()).abs() < 1e-6, "{d2}");
        // A small excess on one folio is under the least sleep: no throttling at all.
        assert!(high_delay(101 * mib, 100 * mib, 4) < MIN_DELAY);
    }

    #[test]
    fn on_limit_parses_its_two_spellings() {
        assert_eq!("kill".parse(), Ok(OnLimit::Kill));
        assert_eq!("exceed".parse(), Ok(OnLimit::Exceed));
        assert!("oom"
            .parse::<OnLimit>()
            .unwrap_err()
            .contains("kill or exceed"));
        assert_eq!(OnLimit::Exceed.as_str().parse(), Ok(OnLimit::Exceed));
    }
}
