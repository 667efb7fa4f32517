//! What a fault does when the region is over its limit and reclaim has nothing left to take
//! (over_limit.rs says the policy, as memory.high and memory.max): it is counted, then
//! throttled for the kernel's penalty, or, past the hard limit, the process is killed or the
//! fault let through.

use std::sync::atomic::Ordering::Relaxed;

use zswap::PAGE_SIZE;

use crate::inner::Inner;
use crate::over_limit::{high_delay, mib, say, OnLimit, MAX_DELAY, MIN_DELAY};

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
    let new_episode = state.over_high_starts();
    let max = inner.memory_max.load(Relaxed);
    if usage > max {
        // As the OOM killer runs only after reclaim's retries: wait while anyone still frees
        // something, once an episode (past the hard limit with `Exceed`, faults go on at
        // full speed).
        // The wait leaves the userfaultfd to the spare, as a disk read does: the discards it
        // may be waiting for come as events someone must read.
        let (usage, max) = match state.over_max() {
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
                OnLimit::Kill => return kill(inner, usage, max),
                OnLimit::Exceed => {
                    if state.over_max_starts() && config.say {
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
    inner.spares.blocking(|| std::thread::sleep(delay));
    inner
        .stats
        .throttled_ns
        .fetch_add(delay.as_nanos() as u64, Relaxed);
}

/// The process dies as the OOM killer would end it: one line saying why, then SIGKILL. A
/// program served from outside dies alone: the fault that found it over goes on, into a
/// process gone.
fn kill(inner: &Inner, usage: u64, max: u64) {
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
    let pid = inner.program_pid.unwrap_or_else(rustix::process::getpid);
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    if inner.program_pid.is_some() {
        return;
    }
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
