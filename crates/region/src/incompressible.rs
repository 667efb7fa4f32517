//! Incompressible folios stay resident while compressible ones can go.
//!
//! The pool is charged to the limit, so a folio stored as-is (it did not compress; it keeps
//! its place in writeback order, docs/DESIGN.md section 2) frees nothing until the shrinker
//! writes it to disk, and costs a fault, perhaps a disk read, at its next use. A compressible
//! folio evicted in its place frees most of its size.
//!
//! A folio's verdict, set by each store of the whole folio (a clean eviction keeps it) and
//! forgotten by a discard:
//! - marked (the store found it incompressible, `poor`): resident again, it is a refault;
//!   reclaim passes it over while the region's incompressible data is in use (`keep_marked`);
//! - compressible: not tried before its next store, which most likely compresses it again
//!   (a try would be a second compression of most folios evicted);
//! - none (never stored, or discarded since): while incompressible data is in use and being
//!   found (`found`), reclaim first tries it for compression where it is (`try_in_place`,
//!   through `/proc/self/mem`, no move); one that would be stored as-is is marked and kept.
//!
//! In use: every `EPOCH`, the marked folios that came back in are set against the folios
//! stored as-is the epoch before (added up until there are `MIN_EVIDENCE`); a quarter as many
//! is in use (`decide`). A region starts in use, so the first wave of its incompressible data
//! is kept: stored as-is, it fills the charged pool and sends compressible pages to disk (in
//! `bench mix`, a third of the access rate for some 15 s). Not in use, first stores are as-is,
//! marked folios are not passed over, and cold incompressible data leaves oldest first, as
//! in the kernel.
//!
//! Reclaim never stalls on it:
//! - one folio in `PROBE_EVERY` that would be kept is stored as-is all the same (a probe, at
//!   most `probes_per_epoch`), so the detection goes on and unused kept folios leave;
//! - after a whole queue's length of marked folios passed over in a row, they are evicted as
//!   they come, so a region of nothing but incompressible data still reclaims (counted across
//!   calls: marked folios cluster, and a per-call count would evict from every cluster);
//! - after `KEPT_PER_CALL` folios kept in one call (`KEPT_PER_CALL_KSWAPD` for kswapd, which
//!   no fault waits on), the next is stored as-is, so a fault never lacks room;
//! - folios a sequential scan has passed go whatever they hold.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use zswap::sparse::SparseBitmap;
use zswap::PAGE_SIZE;

/// A folio is incompressible if its store saved less than an eighth of its size.
pub(crate) fn saved_too_little(stored_length: u64, folio_pages: u32) -> bool {
    stored_length * 8 > u64::from(folio_pages) * PAGE_SIZE as u64 * 7
}

/// Two bits a folio: its last store found it incompressible (marked), or found it
/// compressible. Changed under the folio's lock.
#[derive(Debug)]
pub(crate) struct IncompressibleFolios {
    bits: SparseBitmap<512>,
    compressible: SparseBitmap<512>,
    folio_shift: u32,
    /// Marked folios reclaim passed over since it last evicted an unmarked one.
    in_a_row: AtomicU64,
    /// Folios stored as-is this epoch (`EPOCH`); marked folios that came back in since the
    /// last decision; folios stored as-is before this epoch and not yet decided on (the epoch
    /// before, or several added up): the refault detection above.
    stored_as_is: AtomicU64,
    refaulted: AtomicU64,
    stored_before: AtomicU64,
    /// Probes this epoch, and the most an epoch may have (`FOLIOS_PER_PROBE`).
    probes: AtomicU64,
    probes_per_epoch: u64,
    /// Folios found incompressible lately (stored as-is, or kept): while there are none, no
    /// folio is tried before it is moved out (a region of compressible data pays nothing).
    found: AtomicU64,
    /// When the current epoch began, in milliseconds since `born`.
    epoch_began: AtomicU64,
    born: std::time::Instant,
    /// The decision of the last epoch's end: the region's incompressible data is in use.
    in_use: AtomicBool,
    /// Folios that would have been kept, counted for the probes.
    asked_in_use: AtomicU64,
}

/// How often the decision is taken, from the refaults of one epoch against the stores as-is
/// of the epoch before. A time, not a number of stores, and refaults set against earlier
/// stores: a folio comes back a while after its store, so a burst of stores (reclaim meeting
/// a region's incompressible data for the first time) weighed against refaults of the same
/// time would look unused, and switch keeping off for the very wave it is for.
const EPOCH: std::time::Duration = std::time::Duration::from_secs(4);
/// Probes an epoch, at most: one per this many folios of the region (and at least
/// `MIN_EVIDENCE`): enough to decide and to let unused kept folios go, few
/// enough that a scan over a region's incompressible data, met for the first time, stores
/// little of it as-is, and that probing data in use costs little (each probe of a folio in
/// use is a fault).
const FOLIOS_PER_PROBE: u32 = 256;
/// Stores as-is needed (added up over epochs until there are as many) for their refaults to
/// decide anything. Two epochs with nothing ticked (no reclaim, no refault) start the count
/// again (`tick_at`): stores as-is spread thinner than that never decide, and the last
/// decision stands.
const MIN_EVIDENCE: u64 = 32;
/// Of the folios that would be kept, one in this many is stored as-is (a probe), to keep
/// measuring.
const PROBE_EVERY: u64 = 8;

impl IncompressibleFolios {
    pub fn new(nr_pages: u32, folio_pages: u32) -> Self {
        let nr_folios = nr_pages.div_ceil(folio_pages);
        IncompressibleFolios {
            bits: SparseBitmap::new(nr_folios as usize),
            compressible: SparseBitmap::new(nr_folios as usize),
            folio_shift: folio_pages.trailing_zeros(),
            in_a_row: AtomicU64::new(0),
            stored_as_is: AtomicU64::new(0),
            refaulted: AtomicU64::new(0),
            stored_before: AtomicU64::new(0),
            probes: AtomicU64::new(0),
            probes_per_epoch: u64::from(nr_folios / FOLIOS_PER_PROBE).max(MIN_EVIDENCE),
            found: AtomicU64::new(0),
            epoch_began: AtomicU64::new(0),
            // Nothing known yet: assume the region's incompressible data is in use.
            in_use: AtomicBool::new(true),
            born: std::time::Instant::now(),
            asked_in_use: AtomicU64::new(0),
        }
    }

    /// Bytes the bitmaps hold, charged as metadata.
    pub fn bytes(&self) -> u64 {
        self.bits.bytes() + self.compressible.bytes()
    }

    /// The bit of `start`'s folio.
    fn folio(&self, start: u32) -> usize {
        (start >> self.folio_shift) as usize
    }

    pub fn is_marked(&self, start: u32) -> bool {
        self.bits.test(self.folio(start))
    }

    /// The folio's last store compressed it: it is not tried in place before the next
    /// (`try_in_place`), as it most likely compresses again.
    pub fn is_compressible(&self, start: u32) -> bool {
        self.compressible.test(self.folio(start))
    }

    /// Reclaim met a marked folio with `queued` folios left in the queue: pass it over?
    pub fn pass_over(&self, queued: usize) -> bool {
        self.in_a_row.fetch_add(1, Relaxed) <= queued as u64
    }

    /// Reclaim evicted a folio (`marked` before): an unmarked one ends the run of marked
    /// folios passed over. A folio found incompressible and kept is no eviction: while folios
    /// are being kept the run must still grow, or the fallback never comes.
    pub fn evicted(&self, marked: bool) {
        if !marked {
            self.in_a_row.store(0, Relaxed);
        }
    }

    /// A folio was stored as-is (incompressible).
    pub fn stored_as_is(&self) {
        self.tick();
        self.stored_as_is.fetch_add(1, Relaxed);
        self.found.fetch_add(1, Relaxed);
    }

    /// A folio found incompressible was kept resident.
    pub fn kept(&self) {
        self.found.fetch_add(1, Relaxed);
    }

    /// A marked folio came back in (a fault brought it from the engine or from staging).
    pub fn refaulted(&self) {
        self.tick();
        self.refaulted.fetch_add(1, Relaxed);
    }

    /// At an epoch's end (once: the thread that moves the time on does it), decide.
    fn tick(&self) {
        self.tick_at(self.born.elapsed().as_millis() as u64);
    }

    /// `tick` at `now` milliseconds since `born`. After a pause of two epochs or more (the
    /// region idle: nothing ticked), the counts are stale rather than evidence: the stores
    /// as-is before the pause had no time to come back, and a decision from them would
    /// switch keeping off. A new epoch starts with the decision as it was.
    fn tick_at(&self, now: u64) {
        let epoch = EPOCH.as_millis() as u64;
        let last = self.epoch_began.load(Relaxed);
        if now >= last + epoch
            && self
                .epoch_began
                .compare_exchange(last, now, Relaxed, Relaxed)
                .is_ok()
        {
            if now >= last + 2 * epoch {
                for count in [&self.stored_as_is, &self.refaulted, &self.stored_before] {
                    count.store(0, Relaxed);
                }
                self.probes.store(0, Relaxed);
            } else {
                self.decide();
            }
        }
    }

    /// Decide from the refaults since the last decision against the stores as-is before this
    /// epoch (once there are `MIN_EVIDENCE` of them), and start a new epoch.
    fn decide(&self) {
        let before = self.stored_before.load(Relaxed);
        let now = self.stored_as_is.swap(0, Relaxed);
        if before >= MIN_EVIDENCE {
            let refaulted = self.refaulted.swap(0, Relaxed);
            self.in_use.store(refaulted * 4 >= before, Relaxed);
            self.stored_before.store(now, Relaxed);
        } else {
            // Too few stores as-is to tell: the decision stands (in use, to begin with), and
            // the stores and their refaults add up over the epochs until there are enough.
            // Dropped each epoch, they would never be enough in a region that reclaims
            // little, which would keep its incompressible data resident for good.
            self.stored_before.store(before + now, Relaxed);
        }
        self.probes.store(0, Relaxed);
        let _ = self.found.fetch_update(Relaxed, Relaxed, |c| Some(c / 2));
    }

    /// Reclaim met a marked folio: keep it resident? While the region's incompressible data
    /// is in use, but for the probes (`probe`): stored as-is, they tell whether such folios
    /// come back, and a folio kept at its first store that is not used again leaves this way
    /// even while other incompressible data of the region is in use. When none is, every
    /// marked folio goes.
    pub fn keep_marked(&self) -> bool {
        self.tick();
        self.in_use.load(Relaxed) && !self.probe()
    }

    /// Reclaim is about to store an unmarked folio: try it for compression first, to keep it
    /// if it turns out incompressible? While the region's incompressible data is in use, and
    /// only while incompressible folios are being found at all, since finding out costs a
    /// compression before the folio is moved out.
    pub fn try_in_place(&self) -> bool {
        self.tick();
        self.found.load(Relaxed) > 0 && self.in_use.load(Relaxed)
    }

    /// An unmarked folio tried first (`try_in_place`) was found incompressible: keep it? Yes,
    /// but for the probes. They are drawn here, among folios found incompressible, not before
    /// the try: in a region of mostly compressible data most would fall on folios that
    /// compress, and measure nothing.
    pub fn keep_found(&self) -> bool {
        !self.probe()
    }

    /// One folio in `PROBE_EVERY` that would be kept is stored as-is all the same, up to
    /// `probes_per_epoch`: so whether such folios come back goes on being measured, and kept
    /// folios that are not used leave, a few at a time.
    fn probe(&self) -> bool {
        self.asked_in_use.fetch_add(1, Relaxed) % PROBE_EVERY == PROBE_EVERY - 1
            && self.probes.fetch_add(1, Relaxed) < self.probes_per_epoch
    }

    /// A store (or a try in place) found the folio incompressible (`poor`) or not.
    pub fn set(&self, start: u32, poor: bool) {
        let folio = self.folio(start);
        self.compressible.assign(folio, !poor);
        self.bits.assign(folio, poor);
    }

    /// The folio's contents are gone (discarded): nothing is known of what comes next.
    pub fn forget(&self, start: u32) {
        let folio = self.folio(start);
        self.bits.assign(folio, false);
        self.compressible.assign(folio, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_that_saves_an_eighth_is_not_poor() {
        let page = PAGE_SIZE as u64;
        assert!(saved_too_little(page, 1));
        assert!(!saved_too_little(page * 7 / 8, 1));
        assert!(saved_too_little(16 * page - 1, 16));
        // Half the folio zero pages, half random: it saves half.
        assert!(!saved_too_little(8 * page, 16));
    }

    /// Whether to keep the next folio found incompressible, asked `n` times: how many yes.
    fn kept_of(m: &IncompressibleFolios, n: usize) -> usize {
        (0..n)
            .filter(|_| m.try_in_place() && m.keep_found())
            .count()
    }

    #[test]
    fn nothing_is_tried_until_incompressible_data_is_found() {
        let m = IncompressibleFolios::new(1 << 20, 1);
        assert_eq!(
            kept_of(&m, 100),
            0,
            "a region of compressible data pays nothing"
        );
        m.stored_as_is();
        // In use until told otherwise: one in eight is a probe.
        assert_eq!(kept_of(&m, 800), 700);
    }

    /// Stores as-is that come back keep first stores from being as-is; once they stop coming
    /// back (an epoch with at least `MIN_EVIDENCE` stores as-is, and the next with almost no
    /// refaults), first stores are as-is again and marked folios are not passed over.
    #[test]
    fn refaults_decide_an_epoch_later() {
        let m = IncompressibleFolios::new(1 << 20, 1);
        // A burst of stores as-is with no refault yet does not switch keeping off: their
        // refaults are weighed in the next epoch.
        for _ in 0..1000 {
            m.stored_as_is();
        }
        m.decide();
        assert!(m.in_use.load(Relaxed));
        for _ in 0..300 {
            m.refaulted();
        }
        m.decide();
        assert!(
            m.in_use.load(Relaxed),
            "300 refaults of 1000 stores: in use"
        );
        assert!(kept_of(&m, 80) > 60);

        // Probes stored as-is that do not come back: not in use.
        for _ in 0..MIN_EVIDENCE {
            m.stored_as_is();
        }
        m.decide();
        for _ in 0..MIN_EVIDENCE / 8 {
            m.refaulted();
        }
        m.decide();
        assert!(!m.in_use.load(Relaxed));
        assert_eq!(kept_of(&m, 80), 0);

        // Too few stores as-is to tell: the decision stands.
        for _ in 0..MIN_EVIDENCE - 1 {
            m.stored_as_is();
        }
        m.decide();
        m.decide();
        assert!(!m.in_use.load(Relaxed));
    }

    /// A pause of the region between a burst of stores as-is and their refaults is not
    /// evidence that they do not come back.
    #[test]
    fn a_pause_is_not_evidence() {
        let m = IncompressibleFolios::new(1 << 20, 1);
        let epoch = EPOCH.as_millis() as u64;
        m.tick_at(epoch);
        for _ in 0..1000 {
            m.stored_as_is();
        }
        // Ten epochs with nothing ticked, then the next: no decision from stale counts.
        m.tick_at(11 * epoch);
        m.tick_at(12 * epoch);
        assert!(m.in_use.load(Relaxed), "a pause switched keeping off");
        // Epoch by epoch as usual: stores as-is that do not come back do.
        for _ in 0..100 {
            m.stored_as_is();
        }
        m.tick_at(13 * epoch);
        m.tick_at(14 * epoch);
        assert!(!m.in_use.load(Relaxed));
    }

    /// Stores as-is that come a few an epoch still decide, once enough have added up.
    #[test]
    fn little_reclaim_still_decides() {
        let m = IncompressibleFolios::new(1 << 20, 1);
        let per_epoch = MIN_EVIDENCE / 4;
        for _ in 0..4 {
            for _ in 0..per_epoch {
                m.stored_as_is();
            }
            m.decide();
            assert!(m.in_use.load(Relaxed), "decided on too little");
        }
        // None of them came back: not in use.
        m.decide();
        assert!(!m.in_use.load(Relaxed), "never decided");
        // The same with refaults coming back, spread over the epochs: in use again.
        for _ in 0..4 {
            for _ in 0..per_epoch {
                m.stored_as_is();
            }
            for _ in 0..per_epoch / 2 {
                m.refaulted();
            }
            m.decide();
        }
        m.decide();
        assert!(m.in_use.load(Relaxed));
    }

    #[test]
    fn probes_are_bounded_per_epoch() {
        let m = IncompressibleFolios::new(1 << 20, 1);
        m.kept();
        let max = m.probes_per_epoch as usize;
        assert_eq!(max, (1 << 20) / 256);
        let n = max * PROBE_EVERY as usize * 4;
        assert_eq!(n - kept_of(&m, n), max);
        m.kept();
        m.decide();
        assert_eq!(n - kept_of(&m, n), max, "a new epoch");
    }

    /// In a region of mostly compressible data, the probes are drawn among the folios found
    /// incompressible, not among all those tried. Would fail if they were drawn at the try:
    /// where the per-epoch budget binds (as in `bench mix`), it would go mostly to folios
    /// that compress, which measure nothing.
    #[test]
    fn probes_fall_on_incompressible_folios() {
        // 8,192 folios: a budget of `MIN_EVIDENCE` (32) probes an epoch.
        let m = IncompressibleFolios::new(8192, 1);
        assert_eq!(m.probes_per_epoch, MIN_EVIDENCE);
        m.kept();
        // 4,000 folios tried, one in ten incompressible: 400, of which one in eight, 50,
        // would be probes; the budget allows 32. Drawn at the try, the budget would run out
        // after 256 tries, with about 3 probes on incompressible folios.
        let mut probes = 0;
        for i in 0..4000 {
            assert!(m.try_in_place());
            if i % 10 == 0 && !m.keep_found() {
                probes += 1;
            }
        }
        assert_eq!(probes, MIN_EVIDENCE);
    }

    /// A store's verdict is remembered both ways: a folio that compressed is not tried in
    /// place before its next store (it most likely compresses again), one that did not is
    /// marked; a discard forgets both.
    #[test]
    fn a_store_remembers_its_verdict_until_a_discard() {
        let m = IncompressibleFolios::new(1000, 4);
        assert!(
            !m.is_compressible(8) && !m.is_marked(8),
            "nothing known at first"
        );
        m.set(8, false);
        assert!(m.is_compressible(8) && !m.is_marked(8));
        assert!(!m.is_compressible(4) && !m.is_compressible(12));
        m.set(8, true);
        assert!(m.is_marked(8) && !m.is_compressible(8));
        m.set(8, false);
        m.forget(8);
        assert!(!m.is_compressible(8) && !m.is_marked(8));
    }

    #[test]
    fn marks_are_per_folio() {
        let m = IncompressibleFolios::new(1000, 16);
        m.set(16 * 62, true);
        assert!(m.is_marked(16 * 62));
        assert!(!m.is_marked(16 * 61) && !m.is_marked(16 * 63));
        m.set(16 * 62, false);
        assert!(!m.is_marked(16 * 62));
    }
}
