//! The pool's share of the limit, sized by what it costs the program (`auto_pool_share`).
//!
//! The limit holds resident pages and the compressed pool. A larger pool keeps more pages off
//! the disk (a refault from the pool costs a decompression, one from the disk a read, and the
//! write before it); a larger resident share keeps more pages out of the pool (a resident page
//! costs nothing). Which side saves more depends on the program: where its accesses fall, and
//! whether reclaim, which does not see accesses (lru.rs), keeps its hot pages anyway. A
//! refault distance cannot answer it here: under fault-order reclaim a hot page leaves and
//! comes back at a short distance however large the resident share is. So the share is found
//! by measuring the cost itself: what the program gets done.
//!
//! The measure is the program's user time per second of wall time (its own threads', not
//! uzswap's): a program waiting on faults, or sharing its CPUs with writeback, gets less done
//! a second. Not its system time, which grows with the faults themselves. At the end of each
//! epoch (`EPOCH`, longer while the program has hardly run) spent under pressure, the share
//! moves one step (`STEP` percent of the limit) between `MIN_PERCENT` and the ceiling
//! (`max_pool_percent`): a hill climb, on in one direction until the measure clearly falls
//! (by more than `NOISE`), then back. It starts at the kernel's default (`START_PERCENT`).
//! The pool is preferred to the disk, as the kernel's zswap keeps pages until its shrinker
//! needs the room: while pages are read from the disk, a smaller pool must show a clear gain
//! to go on shrinking, and the first move is up where the pool writes back or the disk is
//! read. An epoch with too few swap-ins to measure by forgets the last measure and holds the
//! share, unless the pool wrote back meanwhile (pages nobody has asked for yet, which may be
//! asked for later, while the resident pages a larger pool displaces are not being missed):
//! then it grows.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// The shortest time between two moves of the share.
pub(crate) const EPOCH: Duration = Duration::from_secs(1);
/// The longest: an epoch lasts until the program has run `MIN_PROGRAM_CPU` (user time is
/// counted in ticks of 10 ms: a program that mostly waits on faults runs a few a second, too
/// few to compare two epochs by), or this long.
pub(crate) const MAX_EPOCH: Duration = Duration::from_secs(4);
/// The program's user time an epoch waits for, up to `MAX_EPOCH`: 25 ticks.
pub(crate) const MIN_PROGRAM_CPU: Duration = Duration::from_millis(250);
/// Percent of the limit a move changes the share by.
pub(crate) const STEP: u32 = 10;
/// The share it starts at: the kernel's `max_pool_percent` default.
pub(crate) const START_PERCENT: u32 = 20;
/// The change in the measure between two epochs that is taken for a change: less is noise
/// (user time is counted in ticks, and the program's phases move it too).
pub(crate) const NOISE: f64 = 0.1;
/// How often an epoch past `EPOCH` that waits for the program to run looks again: each
/// look reads a file a thread under `/proc`.
pub(crate) const LOOK_EVERY: Duration = Duration::from_millis(100);
/// The smallest share: room for a few folios' stores while the pool writes back.
pub(crate) const MIN_PERCENT: u32 = 5;
/// Pages brought back from the pool or the disk in an epoch under which its measure is not
/// compared: the pool's size then costs the program too little to measure.
pub(crate) const MIN_SWAPINS: u64 = 256;

/// What kswapd reads at an epoch's ends and hands to `PoolShare::tick`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Sample {
    /// The program's user time so far (its threads', not uzswap's), in nanoseconds.
    pub program_cpu_ns: u64,
    /// Pages brought back from the pool or the disk so far (`zswpin` + `pswpin`).
    pub swapins: u64,
    /// Pages read from the disk so far (`pswpin`).
    pub disk_reads: u64,
    /// Pages the pool has written back so far (`zswpwb`).
    pub written_back: u64,
}

/// The share's hill climb (module comment).
#[derive(Debug)]
pub(crate) struct PoolShare {
    climb: Mutex<Climb>,
}

#[derive(Debug)]
struct Climb {
    /// The share now, in percent of the limit.
    percent: u32,
    /// Direction of the last move: true for a larger pool.
    growing: bool,
    /// The measure over the last epoch under pressure, if the one before this was one.
    last_rate: Option<f64>,
    /// When this epoch began, and the sample then.
    start: Option<(Instant, Sample)>,
    /// When an epoch that waits for the program to run looks again (`LOOK_EVERY`).
    next_look: Option<Instant>,
}

impl Default for PoolShare {
    fn default() -> PoolShare {
        PoolShare {
            climb: Mutex::new(Climb {
                percent: START_PERCENT,
                growing: true,
                last_rate: None,
                start: None,
                next_look: None,
            }),
        }
    }
}

impl PoolShare {
    /// The share now, in percent of the limit (the engine takes the lower of it and
    /// `max_pool_percent`).
    pub(crate) fn percent(&self) -> u32 {
        self.climb.lock().percent
    }

    /// Called by kswapd's threads on each pass, with the ceiling (`max_pool_percent`, which may change
    /// at run time), the engine's counters (`counters`, read each time an epoch could end;
    /// its `program_cpu_ns` is not read) and the program's user time (`program_cpu_ns`, read
    /// from /proc only at an epoch's start and where its end has swap-ins enough to measure):
    /// at the end of an epoch, move the share. Returns the new share when it moved.
    pub(crate) fn tick(
        &self,
        now: Instant,
        ceiling: u32,
        counters: impl FnOnce() -> Sample,
        program_cpu_ns: impl FnOnce() -> u64,
    ) -> Option<u32> {
        // One kswapd thread decides; the others go on rather than wait on its /proc reads.
        let mut c = self.climb.try_lock()?;
        let Some((started, was)) = c.start else {
            let sample = Sample {
                program_cpu_ns: program_cpu_ns(),
                ..counters()
            };
            c.start = Some((now, sample));
            return None;
        };
        let took = now.saturating_duration_since(started);
        if took < EPOCH || c.next_look.is_some_and(|at| now < at) {
            return None;
        }
        let mut sample = counters();
        let writing_back = sample.written_back > was.written_back;
        if sample.swapins.saturating_sub(was.swapins) < MIN_SWAPINS {
            // Nothing to measure, and no need to read /proc: the next epoch starts at the
            // next pass. A pool that writes back pages nobody has asked for yet grows: they
            // may be asked for later, and the resident pages it displaces are not being
            // missed now.
            c.next_look = None;
            c.start = None;
            c.last_rate = None;
            c.growing = true;
            if !writing_back {
                return None;
            }
        } else {
            sample.program_cpu_ns = program_cpu_ns();
            let ran = sample.program_cpu_ns.saturating_sub(was.program_cpu_ns);
            if took < MAX_EPOCH && ran < MIN_PROGRAM_CPU.as_nanos() as u64 {
                c.next_look = Some(now + LOOK_EVERY);
                return None;
            }
            c.next_look = None;
            c.start = Some((now, sample));
            let rate = ran as f64 / took.as_nanos() as f64;
            let reading_disk = sample.disk_reads > was.disk_reads;
            c.growing = match c.last_rate {
                // The first epoch under pressure: a larger pool only if it has been writing
                // back or reading the disk.
                None => writing_back || reading_disk,
                // A clear fall: back the other way.
                Some(last) if rate < last * (1.0 - NOISE) => !c.growing,
                // A smaller pool that gained nothing clear while pages come from the disk:
                // grow again.
                Some(last) if !c.growing && reading_disk && rate < last * (1.0 + NOISE) => true,
                Some(_) => c.growing,
            };
            c.last_rate = Some(rate);
        }
        let from = c.percent.min(ceiling);
        c.percent = if c.growing {
            (from + STEP).min(ceiling)
        } else {
            from.saturating_sub(STEP).max(MIN_PERCENT.min(ceiling))
        };
        if c.percent == from {
            // At a bound: the next move is back the other way.
            c.growing = !c.growing;
            return None;
        }
        Some(c.percent)
    }
}

/// The program's CPU time so far, in nanoseconds: the user time of the threads in `tasks`
/// (`/proc/self/task`, or a program's served from here) but uzswap's own (named `uzswap-...`
/// and `zswap-...`). None where `/proc` cannot be read.
pub(crate) fn program_cpu_ns(tasks: &std::path::Path) -> Option<u64> {
    /// `/proc`'s clock ticks a second (USER_HZ, fixed by the kernel's ABI).
    const USER_HZ: u64 = 100;
    let mut ticks = 0u64;
    for task in std::fs::read_dir(tasks).ok()?.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue; // the thread ended meanwhile
        };
        ticks += program_ticks(&stat).unwrap_or(0);
    }
    Some(ticks * (1_000_000_000 / USER_HZ))
}

/// A thread's user time from its `stat` line, or None if it is uzswap's own thread.
fn program_ticks(stat: &str) -> Option<u64> {
    // "tid (comm) state ...": comm may hold spaces and parentheses; it ends at the last ')'.
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = &stat[open + 1..close];
    if comm.starts_with("uzswap-") || comm.starts_with("zswap-") {
        return None;
    }
    // Fields after the comm, from field 3 (state): utime is field 14. Not stime: a fault's
    // own kernel time is system time of the thread that faults, so more faults would look
    // like more work done.
    let mut fields = stat[close + 1..].split_ascii_whitespace().skip(11);
    fields.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Epochs under pressure, pages read from the disk in each if `disk`, with the measure
    /// given by `rate(percent)`; the shares it took.
    fn climb(
        share: &PoolShare,
        ceiling: u32,
        epochs: u32,
        disk: bool,
        rate: impl Fn(u32) -> f64,
    ) -> Vec<u32> {
        let t0 = Instant::now();
        let mut s = Sample::default();
        share.tick(t0, ceiling, || s, || s.program_cpu_ns);
        let mut seen = Vec::new();
        for e in 1..=epochs {
            s.program_cpu_ns += (rate(share.percent()) * 1e9) as u64;
            s.swapins += 1000;
            s.disk_reads += u64::from(disk) * 100;
            s.written_back += 100;
            share.tick(t0 + EPOCH * e, ceiling, || s, || s.program_cpu_ns);
            seen.push(share.percent());
        }
        seen
    }

    #[test]
    fn the_share_climbs_to_where_the_program_runs_fastest() {
        // Best at 50%: the share goes there from 20% and stays within a step of it.
        for disk in [false, true] {
            let share = PoolShare::default();
            let seen = climb(&share, 75, 30, disk, |p| {
                (1.0 - (f64::from(p) - 50.0).abs() / 25.0).max(0.3)
            });
            let up = ((50 - START_PERCENT) / STEP) as usize;
            assert!(seen[..up].windows(2).all(|w| w[1] > w[0]), "{seen:?}");
            let near = 50 - STEP..=50 + STEP;
            assert!(seen[10..].iter().all(|p| near.contains(p)), "{seen:?}");
        }
        // Best at the floor: down it goes, however much the disk is read.
        for disk in [false, true] {
            let share = PoolShare::default();
            let seen = climb(&share, 75, 20, disk, |p| 1.0 - f64::from(p) / 80.0);
            let low = MIN_PERCENT..=MIN_PERCENT + STEP;
            assert!(seen[8..].iter().all(|p| low.contains(p)), "{seen:?}");
        }
    }

    #[test]
    fn where_it_makes_no_clear_difference_the_pool_keeps_pages_off_the_disk() {
        // Within the noise everywhere, pages read from the disk: the pool grows to its
        // ceiling and stays there.
        let share = PoolShare::default();
        let seen = climb(&share, 60, 20, true, |p| 1.0 + f64::from(p % 20) / 1000.0);
        assert!(seen[4..].iter().all(|&p| p == 60), "{seen:?}");
    }

    #[test]
    fn the_share_stays_between_the_floor_and_the_ceiling() {
        let share = PoolShare::default();
        let seen = climb(&share, 30, 20, false, f64::from);
        assert!(
            seen.iter().all(|&p| (MIN_PERCENT..=30).contains(&p)),
            "{seen:?}"
        );
        assert_eq!(seen.iter().max(), Some(&30));
        // A lower ceiling (max_pool_percent changed at run time): the share goes under it.
        let share = PoolShare::default();
        let seen = climb(&share, 10, 6, false, f64::from);
        assert!(seen.iter().all(|&p| p <= 10), "{seen:?}");
    }

    #[test]
    fn no_move_without_pressure_nor_a_larger_pool_without_writeback() {
        let share = PoolShare::default();
        let t0 = Instant::now();
        let mut s = Sample::default();
        let cpu_unread = || -> u64 { panic!("read /proc with nothing to measure") };
        share.tick(t0, 75, || s, || s.program_cpu_ns);
        // A few swap-ins: nothing moves, /proc is not read, and the next epoch starts at the
        // next pass.
        s.swapins += MIN_SWAPINS - 1;
        s.program_cpu_ns += 1_000_000_000;
        assert_eq!(share.tick(t0 + EPOCH, 75, || s, cpu_unread), None);
        let t1 = t0 + EPOCH + LOOK_EVERY;
        assert_eq!(share.tick(t1, 75, || s, || s.program_cpu_ns), None);
        // Under pressure, not yet an epoch: nothing moves.
        s.swapins += MIN_SWAPINS;
        assert_eq!(share.tick(t1 + EPOCH / 2, 75, || s, cpu_unread), None);
        // An epoch's time, but the program has hardly run: the epoch goes on, and the next
        // look at /proc is no sooner than LOOK_EVERY.
        assert_eq!(share.tick(t1 + EPOCH, 75, || s, || s.program_cpu_ns), None);
        let soon = t1 + EPOCH + LOOK_EVERY / 2;
        assert_eq!(
            share.tick(soon, 75, || panic!("looked again at once"), cpu_unread),
            None
        );
        s.program_cpu_ns += MIN_PROGRAM_CPU.as_nanos() as u64;
        // An epoch under pressure with nothing written back: the first move is down.
        assert_eq!(
            share.tick(t1 + EPOCH + LOOK_EVERY, 75, || s, || s.program_cpu_ns),
            Some(START_PERCENT - STEP)
        );
    }

    #[test]
    fn only_the_programs_threads_count() {
        let line = |comm: &str| format!("42 ({comm}) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 0 0");
        assert_eq!(program_ticks(&line("python3")), Some(7));
        assert_eq!(program_ticks(&line("a) b (c")), Some(7));
        assert_eq!(program_ticks(&line("uzswap-fault-0")), None);
        assert_eq!(program_ticks(&line("zswap-shrink")), None);
        assert!(program_cpu_ns("/proc/self/task".as_ref()).is_some());
    }
}
