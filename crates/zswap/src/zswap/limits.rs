//! Limits: the global pool limit (`max_pool_percent` of the configured memory, or the owner's
//! lower `pool_share_percent`, with the `accept_threshold_percent` hysteresis and
//! `pool_limit_hit`) and each group's `zswap_max` (memory.zswap.max). Both are checked once per folio, before any page is compressed, so a
//! large folio may overshoot by its own size, as in the kernel.

use std::sync::atomic::Ordering::Relaxed;

use crate::params::Writethrough;
use crate::stats::Stats;

use super::store::StoreError;
use super::{Shared, ZswapGroup};

impl Shared {
    pub(crate) fn max_pool_bytes(&self) -> u64 {
        let total = self.total_memory.load(Relaxed);
        let percent = self
            .params
            .max_pool_percent()
            .min(self.pool_share_percent.load(Relaxed));
        (u128::from(total) * u128::from(percent) / 100) as u64
    }

    pub(crate) fn accept_bytes(&self) -> u64 {
        (u128::from(self.max_pool_bytes()) * u128::from(self.params.accept_threshold_percent())
            / 100) as u64
    }

    /// zswap_check_limits: once the pool reaches its maximum, refuse stores until the
    /// shrinker brings it down to the accept threshold, so it does not flap at the edge.
    pub(crate) fn check_pool_limit(&self) -> Result<(), StoreError> {
        let cur = self.pool.total_size();
        if cur >= self.max_pool_bytes() {
            Stats::inc(&self.stats.pool_limit_hit);
            self.reached_full.store(true, Relaxed);
        } else if self.reached_full.load(Relaxed) && cur <= self.accept_bytes() {
            self.reached_full.store(false, Relaxed);
        }
        if self.reached_full.load(Relaxed) {
            self.queue_shrink_work();
            return Err(StoreError::PoolLimit);
        }
        Ok(())
    }

    /// Whether the pool is above the point where the shrink worker stops.
    pub(crate) fn above_accept_threshold(&self) -> bool {
        self.pool.total_size() > self.accept_bytes()
    }

    /// Whether a store now writes its pages through (`Writethrough`): always, never, or
    /// (auto) while the pool is above its accept threshold or full and its pages have been
    /// going to the disk (adaptive.rs).
    pub(crate) fn writes_through(&self) -> bool {
        match self.params.writethrough() {
            Writethrough::Off => false,
            Writethrough::On => true,
            Writethrough::Auto => {
                (self.is_full() || self.above_accept_threshold()) && self.disk_share.disk_bound()
            }
        }
    }

    /// Pages were stored: `writethrough=auto` measures where the pool's pages go.
    pub(crate) fn count_stored_for_auto(&self) {
        if self.params.writethrough() == Writethrough::Auto {
            self.disk_share.stored(&self.stats);
        }
    }

    /// Whether stores are being refused for the pool limit right now.
    pub(crate) fn is_full(&self) -> bool {
        self.reached_full.load(Relaxed)
    }
}

impl ZswapGroup {
    /// obj_cgroup_may_zswap: over `zswap_max`, write back some of this group's pages once;
    /// if that frees nothing, refuse.
    pub(crate) fn check_group_limit(&self, nr_pages: u32) -> Result<(), StoreError> {
        let max = self.zswap_max();
        if max == u64::MAX || self.zswap_bytes() < max {
            return Ok(());
        }
        if max > 0 && self.shrink(nr_pages).written > 0 && self.zswap_bytes() < max {
            return Ok(());
        }
        Stats::inc(&self.shared.stats.reject_reclaim_fail);
        Err(StoreError::GroupLimit)
    }
}
