//! The compressors entries are encoded with: the kernel's `zswap_pool` list. Changing the
//! `compressor` tunable makes a new compressor current; entries stored earlier keep the index
//! of the one that encoded them (4 bits in the entry), so the load path never consults the
//! tunable (invariant 5). An index is reused only once no entry refers to it any more.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::compress::{Compressor, CompressorSpec};

/// Compressors alive at once, old ones with entries included (the codec field's width).
pub const MAX_COMPRESSORS: usize = 16;

/// A compressor switch refused: every one of the [`MAX_COMPRESSORS`] indexes still has stored
/// pages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{MAX_COMPRESSORS} compressors still have stored pages; free some before switching again")]
pub struct TooManyCompressors;

#[derive(Debug)]
struct Slot {
    compressor: Arc<dyn Compressor>,
}

#[derive(Debug)]
struct Registry {
    slots: Vec<Option<Slot>>,
    current: u8,
}

/// The compressor registry of one zswap instance.
#[derive(Debug)]
pub(crate) struct Compressors {
    inner: RwLock<Registry>,
    /// Per index: stored pages encoded with it, plus stores in flight that may use it. Taken
    /// under the read lock; an index is only reassigned under the write lock when its count
    /// is zero.
    users: [AtomicU64; MAX_COMPRESSORS],
}

impl Compressors {
    pub(crate) fn new(spec: CompressorSpec) -> Self {
        let mut slots: Vec<Option<Slot>> = (0..MAX_COMPRESSORS).map(|_| None).collect();
        slots[0] = Some(Slot {
            compressor: spec.build(),
        });
        Compressors {
            inner: RwLock::new(Registry { slots, current: 0 }),
            users: Default::default(),
        }
    }

    /// Make `spec` current, reusing its index if it is still alive.
    pub(crate) fn set_current(&self, spec: CompressorSpec) -> Result<(), TooManyCompressors> {
        let mut r = self.inner.write();
        let id = match Self::alive(&r, spec) {
            Some(id) => id,
            None => self.make_alive(&mut r, spec).ok_or(TooManyCompressors)?,
        };
        r.current = id as u8;
        Ok(())
    }

    /// The index `spec` is alive at, if it is.
    fn alive(r: &Registry, spec: CompressorSpec) -> Option<usize> {
        r.slots
            .iter()
            .position(|s| s.as_ref().is_some_and(|s| s.compressor.spec() == spec))
    }

    /// Build `spec` in an index that is not current and that no entry uses; None if there
    /// is none.
    fn make_alive(&self, r: &mut Registry, spec: CompressorSpec) -> Option<usize> {
        let current = r.current as usize;
        let free = (0..MAX_COMPRESSORS).find(|&i| {
            i != current && (r.slots[i].is_none() || self.users[i].load(Relaxed) == 0)
        })?;
        r.slots[free] = Some(Slot {
            compressor: spec.build(),
        });
        Some(free)
    }

    /// The current compressor, with `nr` uses reserved on it so that its index cannot be
    /// given to another compressor while a store is encoding with it.
    pub(crate) fn acquire_current(&self, nr: u64) -> (u8, Arc<dyn Compressor>) {
        let r = self.inner.read();
        let id = r.current;
        let slot = r.slots[id as usize].as_ref().expect("current slot is set");
        self.users[id as usize].fetch_add(nr, Relaxed);
        (id, slot.compressor.clone())
    }

    /// `spec`'s index, made alive in a free index if it is not (without making it current),
    /// with `nr` uses reserved on it: writeback's codec. None when every index is in use.
    pub(crate) fn acquire(
        &self,
        spec: CompressorSpec,
        nr: u64,
    ) -> Option<(u8, Arc<dyn Compressor>)> {
        {
            let r = self.inner.read();
            if let Some(found) = self.reserve_alive(&r, spec, nr) {
                return Some(found);
            }
        }
        let mut r = self.inner.write();
        if Self::alive(&r, spec).is_none() {
            self.make_alive(&mut r, spec)?;
        }
        self.reserve_alive(&r, spec, nr)
    }

    fn reserve_alive(
        &self,
        r: &Registry,
        spec: CompressorSpec,
        nr: u64,
    ) -> Option<(u8, Arc<dyn Compressor>)> {
        let id = Self::alive(r, spec)?;
        self.users[id].fetch_add(nr, Relaxed);
        let slot = r.slots[id].as_ref().expect("found alive");
        Some((id as u8, slot.compressor.clone()))
    }

    /// Give back `nr` uses of index `id` (stores that did not use them, freed entries).
    /// No lock: a use count only matters to `set_current`, which reassigns an index under
    /// the write lock when its count is zero, and a release only brings that moment closer.
    pub(crate) fn release(&self, id: u8, nr: u64) {
        if nr == 0 {
            return;
        }
        let before = self.users[id as usize].fetch_sub(nr, Relaxed);
        assert!(before >= nr, "released more uses than were acquired");
    }

    /// Run `f` with the compressor behind index `id` (held by an entry, so alive), under the
    /// read lock rather than cloning it: the load path's per-page cost.
    pub(crate) fn with<R>(&self, id: u8, f: impl FnOnce(&dyn Compressor) -> R) -> R {
        let r = self.inner.read();
        let c = &r.slots[id as usize]
            .as_ref()
            .expect("an entry refers to a compressor that is gone")
            .compressor;
        f(c.as_ref())
    }

    /// Total uses held: for consistency checks.
    pub(crate) fn total_users(&self) -> u64 {
        self.users.iter().map(|u| u.load(Relaxed)).sum()
    }
}
