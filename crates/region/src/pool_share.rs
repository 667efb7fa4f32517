//! The pool's share of the limit, sized by what refaults cost the program
//! (`auto_pool_share`).
//!
//! The limit holds resident pages and the compressed pool. A larger pool keeps more pages off
//! the disk (a refault from the pool costs a decompression, one from the disk a read); a
//! larger resident share keeps more pages out of the pool (a resident page costs nothing).
//! Which side saves more is read from the refaults themselves, as the kernel balances its
//! LRU lists by the cost of the refaults each causes (`lru_note_cost`, mm/workingset.c). Over
//! an epoch, with a step being `STEP` percent of the limit:
//!
//! - **A step more pool**: a page read back from the disk `w` pages after it left the pool
//!   (its writeback distance, `ZswapGroup::writeback_distance`; the pool writes back its
//!   oldest first) would still be in a pool larger by `w` pages. Those within a step (in the
//!   pool's pages: the step's bytes over what a stored page takes on average) would have
//!   been pool refaults instead. Seen from below as well: a refault from the pool's oldest
//!   step (the far end of the evictions its pages span, `ZswapGroup::pool_span`) would have
//!   read the disk with a step less pool. A pool that has not written back yet shows only
//!   the second; one past the pages asked for, only the first: the larger of the two counts,
//!   each at a disk read less a pool refault.
//! - **A step more resident**: a folio that comes back `d` evictions after it left (its
//!   refault distance, workingset.rs) would have stayed had `d` more pages been resident, for
//!   that trip. But reclaim here takes folios in fault order (lru.rs): a hot folio leaves
//!   after as many evictions as there are resident pages, whatever its use, and comes back at
//!   once, at a short distance however large the resident share. A step more resident makes
//!   its trips longer by a step, and its refaults fewer by a step over the resident pages and
//!   the step (`scale`). A folio used once a trip, on the other hand, comes back anywhere
//!   within the step, and a step more resident saves it. So the refaults within a step are
//!   counted by halves: the farther half, and as many of the nearer, are taken for folios
//!   used once a trip and count in full; the nearer half's excess, for hot folios, counts at
//!   `scale`; each at its cost (a pool refault's or a disk read's).
//!
//! At the end of each epoch (`EPOCH`, and `MIN_SWAPINS` refaults to judge by) the share moves
//! a step toward the side that saves more, between `MIN_PERCENT` and the ceiling
//! (`max_pool_percent`), when that side saves clearly more (`MARGIN`) and enough to matter
//! (`MIN_GAIN` of the epoch's time); else it stays. The costs are the medians of the region's
//! own fault service times from each place, and until there are any, this machine's figures
//! (`DEFAULT_POOL_COST`, `DEFAULT_DISK_COST`). It starts at the kernel's default
//! (`START_PERCENT`).
//!
//! A policy: the fault path counts (`refaulted`), kswapd decides (`tick`), and the engine
//! keeps its pool under the share (`Zswap::set_pool_share_percent`).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU32, AtomicU64};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use zswap::PAGE_SIZE;

/// The shortest time between two moves of the share.
pub(crate) const EPOCH: Duration = Duration::from_secs(1);
/// Percent of the limit a move changes the share by.
pub(crate) const STEP: u32 = 10;
/// The share it starts at: the kernel's `max_pool_percent` default.
pub(crate) const START_PERCENT: u32 = 20;
/// The smallest share: room for a few folios' stores while the pool writes back.
pub(crate) const MIN_PERCENT: u32 = 5;
/// Pages brought back from the pool or the disk an epoch waits for: fewer say too little
/// about where the refaults fall.
pub(crate) const MIN_SWAPINS: u64 = 256;
/// How much more one side must save than the other for the share to move: less is within
/// what an epoch's sample tells apart, and a move costs (a smaller pool writes back at once).
pub(crate) const MARGIN: f64 = 1.25;
/// The least saving, as a share of the epoch's time, worth a move.
pub(crate) const MIN_GAIN: f64 = 0.01;
/// A refault from the pool, until the region has measured one (a handler's service time
/// on this machine, DESIGN.md section 6).
pub(crate) const DEFAULT_POOL_COST: Duration = Duration::from_micros(25);
/// A refault from the disk, until the region has measured one.
pub(crate) const DEFAULT_DISK_COST: Duration = Duration::from_micros(100);

/// What kswapd reads at an epoch's end and hands to `PoolShare::tick`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Sample {
    /// Pages brought back from the pool or the disk so far (`zswpin` + `pswpin`).
    pub swapins: u64,
    /// The limit the share is a percent of, in bytes.
    pub limit_bytes: u64,
    /// The pool's size and the pages it holds now: what a stored page takes on average.
    pub pool_bytes: u64,
    pub stored_pages: u64,
    /// The evictions the pool's pages span (`ZswapGroup::pool_span`).
    pub pool_span: u32,
    /// Pages resident now.
    pub resident_pages: u64,
}

/// What a refault costs the program, from each place (the medians of the region's fault
/// latencies; zero where none was measured yet).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Costs {
    pub pool: Duration,
    pub disk: Duration,
}

/// A refault the fault path tells the share about (`PoolShare::refaulted`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refault {
    /// Whether it reads the disk (else the pool).
    pub from_disk: bool,
    /// Evictions since the folio left (workingset.rs).
    pub distance: u32,
    /// Pages that left the pool for the disk since this one did, for a page read from the
    /// disk that went there from the pool.
    pub writeback_distance: Option<u32>,
}

/// The share (module comment).
#[derive(Debug)]
pub(crate) struct PoolShare {
    /// This epoch's refaults within a step of evictions, by where from (the pool, the disk)
    /// and by half of the step (the nearer, the farther).
    near_resident: [[AtomicU64; 2]; 2],
    /// This epoch's disk reads a step more pool would have saved.
    near_pool: AtomicU64,
    /// This epoch's refaults from the pool's oldest step: a step less pool would have read
    /// them from the disk.
    oldest_pool: AtomicU64,
    /// A step, in resident pages and in pool pages, as the last epoch's end measured it.
    steps: AtomicU64,
    /// The refault distance from which a page in the pool is in its oldest step.
    oldest_from: AtomicU32,
    /// A step over the resident pages and the step: the share of a hot page's refaults a
    /// step more resident saves, in millionths.
    resident_scale: AtomicU32,
    epoch: Mutex<Epoch>,
}

#[derive(Debug)]
struct Epoch {
    /// The share now, in percent of the limit.
    percent: u32,
    /// When this epoch began, and the engine's swap-ins then.
    start: Option<(Instant, u64)>,
}

impl Default for PoolShare {
    fn default() -> PoolShare {
        PoolShare {
            near_resident: Default::default(),
            near_pool: AtomicU64::new(0),
            oldest_pool: AtomicU64::new(0),
            steps: AtomicU64::new(0),
            oldest_from: AtomicU32::new(u32::MAX),
            resident_scale: AtomicU32::new(0),
            epoch: Mutex::new(Epoch {
                percent: START_PERCENT,
                start: None,
            }),
        }
    }
}

/// What `near` refaults saved at `each` come to, in seconds.
fn saves(near: u64, each: Duration) -> f64 {
    near as f64 * each.as_secs_f64()
}

impl PoolShare {
    /// The share now, in percent of the limit (the engine takes the lower of it and
    /// `max_pool_percent`).
    pub(crate) fn percent(&self) -> u32 {
        self.epoch.lock().percent
    }

    /// The fault path: a folio came back from the engine for a fault. Counted where a step
    /// more of either side would have kept it. Says which: (resident, pool).
    pub(crate) fn refaulted(&self, r: Refault) -> (bool, bool) {
        let steps = self.steps.load(Relaxed);
        let (resident_step, pool_step) = ((steps >> 32) as u32, steps as u32);
        let near_resident = r.distance <= resident_step;
        let near_pool = r.from_disk && r.writeback_distance.is_some_and(|w| w <= pool_step);
        if near_resident {
            let farther = r.distance > resident_step / 2;
            self.near_resident[usize::from(r.from_disk)][usize::from(farther)]
                .fetch_add(1, Relaxed);
        }
        if near_pool {
            self.near_pool.fetch_add(1, Relaxed);
        }
        if !r.from_disk && r.distance >= self.oldest_from.load(Relaxed) {
            self.oldest_pool.fetch_add(1, Relaxed);
        }
        (near_resident, near_pool)
    }

    /// Called by kswapd's threads on each pass, with the ceiling (`max_pool_percent`, which
    /// may change at run time), the engine's figures (`sample`, read each time an epoch could
    /// end) and the refaults' costs (`costs`, read at an epoch's end): at the end of an
    /// epoch, move the share. Returns the new share when it moved.
    pub(crate) fn tick(
        &self,
        now: Instant,
        ceiling: u32,
        sample: impl FnOnce() -> Sample,
        costs: impl FnOnce() -> Costs,
    ) -> Option<u32> {
        // One kswapd thread decides; the others go on.
        let mut e = self.epoch.try_lock()?;
        let Some((started, swapins)) = e.start else {
            let s = sample();
            self.begin(&mut e, now, s);
            return None;
        };
        let took = now.saturating_duration_since(started);
        if took < EPOCH {
            return None;
        }
        let s = sample();
        if s.swapins.saturating_sub(swapins) < MIN_SWAPINS {
            return None; // the epoch goes on until there is enough to judge by
        }
        let measured = costs();
        let costs = Costs {
            pool: nonzero_or(measured.pool, DEFAULT_POOL_COST),
            disk: nonzero_or(measured.disk, DEFAULT_DISK_COST),
        };
        let scale = f64::from(self.resident_scale.load(Relaxed)) / 1e6;
        let resident: f64 = [costs.pool, costs.disk]
            .into_iter()
            .zip(&self.near_resident)
            .map(|(cost, [nearer, farther])| {
                let (nearer, farther) = (nearer.load(Relaxed), farther.load(Relaxed));
                // Folios used once a trip come back spread over the step, as many in each
                // half, and a step saves them all; the nearer half's excess is hot folios,
                // of whose refaults a step saves `scale`.
                saves(2 * farther, cost) + scale * saves(nearer.saturating_sub(farther), cost)
            })
            .sum();
        let near_pool = self.near_pool.load(Relaxed);
        let pool = saves(
            near_pool.max(self.oldest_pool.load(Relaxed)),
            costs.disk.saturating_sub(costs.pool),
        );
        self.begin(&mut e, now, s);
        let least = took.as_secs_f64() * MIN_GAIN;
        let grow = if pool > resident * MARGIN && pool - resident > least {
            true
        } else if resident > pool * MARGIN && resident - pool > least {
            false
        } else {
            return None;
        };
        let from = e.percent.min(ceiling);
        e.percent = match grow {
            true => (from + STEP).min(ceiling),
            false => from.saturating_sub(STEP).max(MIN_PERCENT.min(ceiling)),
        };
        (e.percent != from).then_some(e.percent)
    }

    /// A new epoch from `now`: its counts from zero, a step's pages from the sizes now.
    fn begin(&self, e: &mut Epoch, now: Instant, s: Sample) {
        e.start = Some((now, s.swapins));
        for n in self.near_resident.iter().flatten() {
            n.store(0, Relaxed);
        }
        self.near_pool.store(0, Relaxed);
        self.oldest_pool.store(0, Relaxed);
        let step = s.limit_bytes * u64::from(STEP) / 100;
        // Until the pool holds anything, a stored page is taken for half a page.
        let per_stored = match s.stored_pages {
            0 => PAGE_SIZE as u64 / 2,
            n => (s.pool_bytes / n).max(1),
        };
        let resident_step = (step / PAGE_SIZE as u64).min(u64::from(u32::MAX));
        let pool_step = (step / per_stored).min(u64::from(u32::MAX));
        self.steps.store(resident_step << 32 | pool_step, Relaxed);
        let scale = resident_step as f64 / (s.resident_pages + resident_step).max(1) as f64;
        self.resident_scale.store((scale * 1e6) as u32, Relaxed);
        // The pool's pages spread over its span: its oldest step is the part of the span
        // that many pages take, from the far end.
        let oldest = match s.stored_pages {
            0 => 0,
            n => u64::from(s.pool_span) * pool_step.min(n) / n,
        };
        self.oldest_from
            .store(s.pool_span.saturating_sub(oldest as u32), Relaxed);
    }
}

fn nonzero_or(d: Duration, default: Duration) -> Duration {
    if d.is_zero() {
        default
    } else {
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: u64 = 100 << 20;
    /// A step: 10 MiB, 2,560 resident pages; the pool's pages a quarter of a page each,
    /// 10,240 of them.
    const RESIDENT_STEP: u32 = 2560;
    const POOL_STEP: u32 = 10240;
    /// The pool's 40,960 pages span 81,920 evictions: its oldest step, the last quarter.
    const OLDEST_FROM: u32 = 61440;

    /// 80 MiB resident: a step more saves a hot page's refaults 2,560 / 23,040 of the time.
    fn sample(swapins: u64) -> Sample {
        Sample {
            swapins,
            limit_bytes: LIMIT,
            pool_bytes: 40 << 20,
            stored_pages: 40960,
            pool_span: 81920,
            resident_pages: 20480,
        }
    }

    fn costs() -> Costs {
        Costs {
            pool: Duration::from_micros(20),
            disk: Duration::from_micros(120),
        }
    }

    /// Epochs in which `refaults` come back; the shares it took.
    fn epochs(share: &PoolShare, ceiling: u32, n: u32, refaults: &[Refault]) -> Vec<u32> {
        let t0 = Instant::now();
        let mut swapins = 0;
        share.tick(t0, ceiling, || sample(swapins), costs);
        let mut seen = Vec::new();
        for e in 1..=n {
            for &r in refaults {
                share.refaulted(r);
            }
            swapins += refaults.len() as u64;
            share.tick(t0 + EPOCH * e, ceiling, || sample(swapins), costs);
            seen.push(share.percent());
        }
        seen
    }

    fn pool(distance: u32) -> Refault {
        Refault {
            from_disk: false,
            distance,
            writeback_distance: None,
        }
    }

    fn disk(distance: u32, writeback_distance: u32) -> Refault {
        Refault {
            from_disk: true,
            distance,
            writeback_distance: Some(writeback_distance),
        }
    }

    #[test]
    fn a_step_is_counted_in_each_sides_pages() {
        let share = PoolShare::default();
        share.tick(Instant::now(), 60, || sample(0), costs);
        assert_eq!(share.refaulted(pool(RESIDENT_STEP)), (true, false));
        assert_eq!(share.refaulted(pool(RESIDENT_STEP + 1)), (false, false));
        assert_eq!(share.refaulted(disk(1 << 20, POOL_STEP)), (false, true));
        assert_eq!(
            share.refaulted(disk(1 << 20, POOL_STEP + 1)),
            (false, false)
        );
        assert_eq!(share.refaulted(disk(1, 1)), (true, true));
        assert_eq!(share.oldest_pool.load(Relaxed), 0);
        share.refaulted(pool(OLDEST_FROM - 1));
        assert_eq!(share.oldest_pool.load(Relaxed), 0);
        share.refaulted(pool(OLDEST_FROM));
        assert_eq!(share.oldest_pool.load(Relaxed), 1);
    }

    #[test]
    fn disk_reads_a_larger_pool_would_save_grow_it_to_the_ceiling() {
        // Pages come back from the disk soon after the pool wrote them, and from the pool
        // far beyond what a step more resident would keep.
        let share = PoolShare::default();
        let mut refaults = vec![disk(1 << 20, 100); 300];
        refaults.extend(vec![pool(30_000); 3000]);
        let seen = epochs(&share, 60, 8, &refaults);
        assert_eq!(seen, [30, 40, 50, 60, 60, 60, 60, 60]);
    }

    #[test]
    fn refaults_a_larger_resident_share_would_save_shrink_the_pool_to_its_floor() {
        // A hot set that leaves and comes right back, and disk reads of pages the pool wrote
        // back long ago.
        let share = PoolShare::default();
        let mut refaults = vec![pool(100); 30_000];
        refaults.extend(vec![disk(1 << 20, 1 << 20); 300]);
        let seen = epochs(&share, 60, 4, &refaults);
        assert_eq!(seen, [10, MIN_PERCENT, MIN_PERCENT, MIN_PERCENT]);
    }

    #[test]
    fn it_moves_only_on_a_clear_and_worthwhile_difference() {
        // Each side would save about as much (30,000 x 20 us x 2,560 / 23,040 against
        // 600 x 100 us): no move.
        let share = PoolShare::default();
        let mut refaults = vec![pool(100); 30_000];
        refaults.extend(vec![disk(1 << 20, 100); 600]);
        assert_eq!(epochs(&share, 60, 4, &refaults), [20; 4]);
        // Clearly more on one side, but a few microseconds a second: no move either.
        let share = PoolShare::default();
        let refaults = vec![pool(100); 300];
        assert_eq!(epochs(&share, 60, 4, &refaults), [20; 4]);
    }

    #[test]
    fn refaults_spread_over_the_step_count_in_full_hot_ones_at_a_step_over_the_trip() {
        // Disk reads a step more pool would save (30 ms an epoch), against as many refaults
        // within a step of evictions (60 ms at full cost): spread over the step, as folios
        // used once a trip come back, they are all saved by a step more resident, and the
        // pool shrinks; all in its nearer half, as hot folios come back, a step saves only
        // 2,560 / 23,040 of them, and the pool grows.
        let near_pool = vec![disk(1 << 20, 100); 300];
        let mut spread = near_pool.clone();
        spread.extend(vec![pool(RESIDENT_STEP); 1500]);
        spread.extend(vec![pool(RESIDENT_STEP / 4); 1500]);
        assert_eq!(epochs(&PoolShare::default(), 60, 1, &spread), [10]);
        let mut hot = near_pool;
        hot.extend(vec![pool(RESIDENT_STEP / 4); 3000]);
        assert_eq!(epochs(&PoolShare::default(), 60, 1, &hot), [30]);
    }

    #[test]
    fn refaults_from_the_pools_oldest_step_keep_the_pool() {
        // Nothing is read from the disk yet (the pool has not written back what is asked
        // for), but a pool smaller by a step would have sent these pages there first.
        let share = PoolShare::default();
        let mut refaults = vec![pool(OLDEST_FROM); 3000];
        refaults.extend(vec![pool(100); 30_000]);
        assert_eq!(epochs(&share, 60, 3, &refaults), [30, 40, 50]);
    }

    #[test]
    fn an_epoch_waits_for_refaults_enough_to_judge_by() {
        let share = PoolShare::default();
        let t0 = Instant::now();
        share.tick(t0, 60, || sample(0), costs);
        for _ in 0..20_000 {
            share.refaulted(pool(1));
        }
        // Not yet an epoch: nothing is read.
        let unread = || -> Sample { panic!("read the engine before an epoch's time") };
        assert_eq!(share.tick(t0 + EPOCH / 2, 60, unread, costs), None);
        // An epoch's time, too few swap-ins: it goes on, counting.
        let uncosted = || -> Costs { panic!("costed an epoch with too little to judge by") };
        let few = MIN_SWAPINS - 1;
        assert_eq!(share.tick(t0 + EPOCH, 60, || sample(few), uncosted), None);
        assert_eq!(
            share.tick(t0 + EPOCH * 2, 60, || sample(MIN_SWAPINS), costs),
            Some(START_PERCENT - STEP)
        );
    }

    #[test]
    fn the_share_stays_between_the_floor_and_the_ceiling() {
        let share = PoolShare::default();
        let seen = epochs(&share, 30, 5, &vec![disk(1 << 20, 1); 1000]);
        assert_eq!(seen, [30; 5]);
        // A lower ceiling (max_pool_percent changed at run time), then a floor above it.
        let share = PoolShare::default();
        assert_eq!(
            epochs(&share, 10, 3, &vec![disk(1 << 20, 1); 1000]),
            [10; 3]
        );
        let share = PoolShare::default();
        let seen = epochs(&share, 3, 3, &vec![pool(1); 30_000]);
        assert_eq!(seen, [3; 3]);
    }

    #[test]
    fn unmeasured_costs_are_this_machines() {
        // No disk read measured yet: a disk read a step more pool would save is taken at
        // `DEFAULT_DISK_COST` (less a pool refault), not at nothing.
        let share = PoolShare::default();
        let t0 = Instant::now();
        share.tick(t0, 60, || sample(0), costs);
        for _ in 0..MIN_SWAPINS {
            share.refaulted(disk(1 << 20, 1));
        }
        let unmeasured = || Costs {
            pool: Duration::ZERO,
            disk: Duration::ZERO,
        };
        let moved = share.tick(t0 + EPOCH, 60, || sample(MIN_SWAPINS), unmeasured);
        assert_eq!(moved, Some(START_PERCENT + STEP));
    }
}
