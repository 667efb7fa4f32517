//! What a fault does when the region is over its limit and reclaim has nothing left to take
//! (over_limit.rs says the policy, as memory.high and memory.max): it is counted, then
//! throttled for the kernel's penalty, or, past the hard limit, the process is killed or the
//! fault let through.

use std::sync::atomic::Ordering::Relaxed;

use zswap::{Zswap, ZswapGroup, PAGE_SIZE};

use crate::charge::Meter;
use crate::over_limit::{high_delay, mib, say, OnLimit, OverLimit, OverLimitState, SharedLimit};
use crate::over_limit::{MAX_DELAY, MIN_DELAY};
use crate::reclaim::Reclaim;
use crate::spare::SpareHandlers;
use crate::stats::RegionStats;

/// Over the limit with nothing to reclaim. What it may touch: the parts below.
#[derive(Clone, Copy)]
pub(crate) struct Throttle<'a> {
    /// Waited for past the hard limit, before a kill.
    pub reclaim: Reclaim<'a>,
    pub meter: Meter<'a>,
    pub over_limit_config: OverLimit,
    pub over_limit: &'a OverLimitState,
    pub shared_limit: Option<&'a dyn SharedLimit>,
    /// A sleeping handler leaves the userfaultfd to the spare.
    pub spares: &'a SpareHandlers,
    /// Why reclaim is stuck, as the engine tells.
    pub zswap: &'a Zswap,
    pub group: &'a ZswapGroup,
    /// The program a kill kills, where it is not this process.
    pub program_pid: Option<rustix::process::Pid>,
    pub stats: &'a RegionStats,
}

impl Throttle<'_> {
    /// A fault is about to bring in `need` bytes and reclaim has nothing left to take: count it
    /// and throttle, or carry out `on_limit` past the hard limit. Returns once the fault may go
    /// on (or never, when the process is killed).
    pub(crate) fn handle_over_limit(&self, need: u64) {
        let config = self.over_limit_config;
        let state = &self.over_limit;
        let limit = self.meter.limit();
        let usage = self.meter.usage().total() + need;
        if usage <= limit {
            return;
        }
        self.stats.high.fetch_add(1, Relaxed);
        if state.fork_allowance.load(Relaxed) > 0 {
            // A fork brought pages back and left them shared with a child: reclaim moves them
            // out only once kswapd has unshared them (shared_folios.rs), so it may find nothing
            // to take meanwhile. Throttling or killing the program for them would punish the
            // fork (said when it happened); once the region is back under its limit, it is
            // throttled as before.
            return;
        }
        let new_episode = state.over_high_starts();
        let max = self.meter.memory_max();
        if usage > max {
            // As the OOM killer runs only after reclaim's retries: wait while anyone still frees
            // something, once an episode (past the hard limit with `Exceed`, faults go on at
            // full speed).
            // The wait leaves the userfaultfd to the spare, as a disk read does: the discards it
            // may be waiting for come as events someone must read.
            let (usage, max) = match state.over_max() {
                true => (usage, max),
                false => {
                    self.spares.blocking(|| {
                        self.reclaim
                            .wait_for_reclaim(self.meter.limit().saturating_sub(need))
                    });
                    let usage = self.meter.usage().total();
                    // A shared limit may have moved meanwhile (another process freed or ended).
                    if let Some(shared) = &self.shared_limit {
                        let (limit, max) = shared.share(usage);
                        self.meter.set_limits(limit, max);
                    }
                    (usage + need, self.meter.memory_max())
                }
            };
            if usage > max {
                self.stats.max.fetch_add(1, Relaxed);
                match config.on_limit {
                    OnLimit::Kill => return self.kill(usage, max),
                    OnLimit::Exceed => {
                        if state.over_max_starts() && config.say {
                            say(&format!(
                                "the heap would hold {}, over --memory-max {}, and nothing more \
                                can be reclaimed ({}): letting it grow unthrottled (--on-limit \
                                exceed)",
                                mib(usage),
                                mib(max),
                                self.why_stuck()
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
                mib(self.meter.limit()),
                self.why_stuck()
            ));
        }
        let pages = state.pages_over_high(need.div_ceil(PAGE_SIZE as u64));
        let delay = high_delay(usage, limit, pages);
        if delay < MIN_DELAY {
            return;
        }
        state.slept();
        let delay = delay.min(MAX_DELAY);
        // A handler's sleep leaves the userfaultfd to the spare, as a disk read does: the
        // program's other faults and its madvise calls are throttled by their own turn here,
        // not held behind this one.
        self.spares.blocking(|| std::thread::sleep(delay));
        self.stats
            .throttled_ns
            .fetch_add(delay.as_nanos() as u64, Relaxed);
    }

    /// The process dies as the OOM killer would end it: one line saying why, then SIGKILL. A
    /// program served from outside dies alone: the fault that found it over goes on, into a
    /// process gone.
    fn kill(&self, usage: u64, max: u64) {
        self.stats.oom.fetch_add(1, Relaxed);
        self.stats.oom_kill.fetch_add(1, Relaxed);
        if let Some(shared) = &self.shared_limit {
            shared.killed();
        }
        // Said whatever `say` is: a process that dies must not die in silence.
        say(&format!(
            "the heap would hold {}, over --memory-max {}, and nothing more can be reclaimed \
            ({}): killing the program (--on-limit kill; --on-limit exceed lets it grow)",
            mib(usage),
            mib(max),
            self.why_stuck()
        ));
        let pid = self.program_pid.unwrap_or_else(rustix::process::getpid);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        if self.program_pid.is_some() {
            return;
        }
        // SIGKILL is not blockable: the process is gone before this thread runs again.
        loop {
            std::thread::park();
        }
    }

    /// Why reclaim found nothing to take, as far as the engine's counters tell.
    fn why_stuck(&self) -> String {
        let stats = self.zswap.stats();
        let write_failures = stats.get("swap_write_fail");
        if write_failures > 0 {
            return format!("{write_failures} writes to the swap file failed");
        }
        if !self.group.writeback_enabled() {
            return "writeback is off and the pool is at its share".into();
        }
        "the pool is at its share and nothing resident can go".into()
    }
}
