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
    /// The most a fork brought back into memory (`Region::prepare_fork`), until kswapd sees
    /// the region back under its limit: meanwhile it is neither throttled nor killed, as
    /// kswapd must unshare what the fork left shared before reclaim can move it out
    /// (shared_folios.rs; never, for a program served from outside: its allowance stays).
    /// `uzswap run` says so at the fork.
    pub fork_allowance: AtomicU64,
}

impl OverLimitState {
    /// A fault found room under the limit: any episode is over.
    pub fn back_under(&self) {
        if self.over_high.load(Relaxed) {
            self.over_high.store(false, Relaxed);
            self.over_max.store(false, Relaxed);
            PAGES_OVER_HIGH.with(|p| p.set(0));
        }
    }

    /// The region is back under its limit, and reclaim can unshare what a fork left shared
    /// (kswapd's look): the fork's allowance ends.
    pub fn fork_reclaimed(&self) {
        if self.fork_allowance.load(Relaxed) != 0 {
            self.fork_allowance.store(0, Relaxed);
        }
    }

    /// A fault found the region over its limit with nothing to reclaim: true if that starts
    /// an episode.
    pub fn over_high_starts(&self) -> bool {
        !self.over_high.swap(true, Relaxed)
    }

    /// Past the hard limit, let grow (`OnLimit::Exceed`) since the episode began.
    pub fn over_max(&self) -> bool {
        self.over_max.load(Relaxed)
    }

    /// Past the hard limit, let grow from now on: true if that starts the episode.
    pub fn over_max_starts(&self) -> bool {
        !self.over_max.swap(true, Relaxed)
    }

    /// This thread brought `pages` more in over the limit: how many since it last slept.
    pub fn pages_over_high(&self, pages: u64) -> u64 {
        PAGES_OVER_HIGH.with(|p| {
            p.set(p.get() + pages);
            p.get()
        })
    }

    /// This thread slept for its pages over the limit.
    pub fn slept(&self) {
        PAGES_OVER_HIGH.with(|p| p.set(0));
    }

    /// Say it once when writes to the swap device have started failing since last said
    /// (kswapd looks after each pass, with `swap_write_fail` so far): the pool then keeps
    /// what it cannot write, and the limit may follow.
    pub fn watch_device(&self, config: &OverLimit, write_failures: impl FnOnce() -> u64) {
        if !config.say {
            return;
        }
        let failures = write_failures();
        let said = self.write_failures_said.load(Relaxed);
        if failures > said
            && self
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
}

/// The least sleep worth taking, and the most one sleep takes (the kernel's `HZ / 100`
/// and `MEMCG_MAX_HIGH_DELAY_JIFFIES`).
pub(crate) const MIN_DELAY: Duration = Duration::from_millis(10);
pub(crate) const MAX_DELAY: Duration = Duration::from_secs(2);

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

/// `bytes` in MiB, as a line says it.
pub(crate) fn mib(bytes: u64) -> String {
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
