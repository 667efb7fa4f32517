//! Compaction (the kernel's zs_compact), with packed spans in the picture. For each class:
//! N = its live objects (in class spans and in packed spans), K = N / objs_per_span. The K
//! fullest class spans are kept (new ones are made as they are needed) and filled, first from
//! the class's other class spans, each emptied whole in turn (what does not fit is appended to
//! a packed span); then the packed spans are drained in turn. A packed span is drained when
//! most of its objects find room in a keeper, or more than 1/16 of its bytes are dead, and
//! only if what it holds then takes no more pages than it frees (class slots round objects
//! up: small objects can cost more pages classified than packed). Draining moves its objects
//! into the keepers, re-appends the rest to a packed span not being drained, and frees it.
//!
//! Compaction never takes the pool's charge (pages in spans plus the reserve of freed pages)
//! more than its headroom (`compact_headroom`: 128 KiB, less for a pool of fewer pages) above
//! where it was when the step began, and the pool charges that headroom to its region all the
//! time (`ZsPool::charged_bytes`), so no moment of a compaction takes a region past its
//! limit. Source spans are emptied one at a time, each before the next is touched, so what
//! one frees pays for what the next takes (the reserve keeps freed pages from step to step). A packed span is drained only if the drain can finish
//! under the ceiling: with the keeper spans it needs made, or else by re-appending what it
//! holds; a drain left half done would free nothing and hold the headroom. An object with no
//! room under the ceiling or the page cap stays where it is. (Moving class by class instead
//! would leave every packed span alive until the last class was done: the pool would grow by
//! what was moved, and take its region that far over its limit.)
//!
//! Compaction runs in steps of a bounded number of moves (`STEP_BUDGET`); the pool's lock is
//! given up between steps, and each step starts from the pool as it is then.
//!
//! Nothing keeps a back-reference from a slot to its handle (that would cost metadata on every
//! object all the time); the reverse map is built at each step, by one scan of the handle
//! table, grouped by span. Every move rewrites the handle's entry only, so handles stay valid.

use std::cmp::Reverse;

use super::class::{class_of, geometry, MAX_SPAN_PAGES, NR_CLASSES};
use super::handle::{HandleEntry, Location, NIL};
use super::pool::PoolState;
use super::span::SpanKind;
use crate::PAGE_SIZE;

/// Objects one compaction step moves at most. The pool is locked for a step and every load
/// and store waits behind it, so a step moves a bounded part of the pool, never all of it
/// (figures: DESIGN.md section 6).
pub(crate) const STEP_BUDGET: u64 = 1024;

/// Pages a compaction step may hold above the pool's charge when it began, at most: what
/// draining a packed span re-appends before the span is freed (at most a span, 16 pages, and
/// a page for a span closed on the way), with room to spare for the keeper spans a drain
/// makes. A small pool gets less (`compact_headroom`).
pub(crate) const HEADROOM_PAGES: u64 = 2 * MAX_SPAN_PAGES as u64;

/// The handles of the span-held objects, grouped by span (a counting sort by span index).
/// Kept in the pool between steps and charged as metadata: built afresh by every step, a
/// map of a large pool (half a megabyte at 130,000 objects) would leave that much freed
/// memory in the allocator of every thread that compacts, resident and charged to nobody.
#[derive(Debug, Default)]
pub(crate) struct BySpan {
    start: Vec<u32>,
    handles: Vec<u32>,
}

impl BySpan {
    pub(crate) fn bytes(&self) -> u64 {
        ((self.start.capacity() + self.handles.capacity()) * std::mem::size_of::<u32>()) as u64
    }

    /// Give back the memory of a map much larger than the pool now needs (at the end of a
    /// compaction, after frees shrank the pool).
    pub(crate) fn trim(&mut self, nr_spans: usize, nr_objects: usize) {
        if self.start.capacity() > 2 * (nr_spans + 1) + 1024 {
            self.start = Vec::new();
        }
        if self.handles.capacity() > 2 * nr_objects + 1024 {
            self.handles = Vec::new();
        }
    }

    fn of(&self, span: u32) -> &[u32] {
        let s = span as usize;
        &self.handles[self.start[s] as usize..self.start[s + 1] as usize]
    }
}

/// A compaction step stopped because its budget of moves is spent.
struct BudgetSpent;

impl PoolState {
    /// One step of compaction: at most `budget` objects moved. True when the pool is fully
    /// compacted (the step finished with budget to spare). Steps may be interleaved with
    /// mallocs and frees.
    pub(crate) fn compact_step(&mut self, budget: u64) -> (u64, bool) {
        let mut left = budget;
        // An open packed span left empty holds a page for nothing.
        if self.open_packed != NIL && self.spans[self.open_packed].live == 0 {
            self.free_span(self.open_packed);
        }
        let mut by_span = std::mem::take(&mut self.by_span);
        self.objects_by_span(&mut by_span);
        self.compact_ceiling = Some(self.arena.charged() + self.compact_headroom());
        let done = self.compact_with(&by_span, &mut left).is_ok() && left > 0;
        self.compact_ceiling = None;
        self.by_span = by_span;
        if done {
            self.compact_end(true);
        }
        (budget - left, done)
    }

    /// Pages a compaction step may hold above the pool's charge when it begins, and that the
    /// pool charges its owner for: `HEADROOM_PAGES`, or, for a pool of fewer pages, one more
    /// than it holds (a drain re-appends at most what the pool holds, and a page for a span
    /// closed on the way); none for an empty pool. It grows with the pool, page by page, so
    /// the charge never jumps by it.
    pub(crate) fn compact_headroom(&self) -> u64 {
        match self.arena.nr_used() {
            0 => 0,
            n => HEADROOM_PAGES.min(n + 1),
        }
    }

    /// What ends a compaction, done or not: the tables tidied (O(table) each: once, not every
    /// step) and the reserve given back (between steps it keeps the pages they free, for the
    /// spans later steps make); the slack a `finished` compaction left is remembered
    /// (`ZsPool::compact_if_fragmented`).
    pub(crate) fn compact_end(&mut self, finished: bool) {
        self.handles.tidy();
        self.spans.tidy();
        self.arena.trim();
        self.by_span
            .trim(self.spans.len(), self.nr_objects as usize);
        // Only a compaction that ran out of work shows what it cannot remove.
        let slack = self.total_size().saturating_sub(self.stored_bytes);
        self.slack_after_compaction = if finished {
            slack * 1000 / self.stored_bytes.max(1)
        } else {
            0
        };
    }

    /// Fill `map` with the span-held objects as they are now. Its vectors are reused: they
    /// grow to the pool's size once and stay (charged), instead of a fresh allocation a step.
    fn objects_by_span(&self, map: &mut BySpan) {
        let BySpan { start, handles } = map;
        let nr_spans = self.spans.len();
        start.clear();
        start.resize(nr_spans + 1, 0);
        for (_, e) in self.handles.iter_live() {
            if let Location::Span { span, .. } = e.location() {
                start[span as usize + 1] += 1;
            }
        }
        for s in 0..nr_spans {
            start[s + 1] += start[s];
        }
        handles.clear();
        handles.resize(start[nr_spans] as usize, 0);
        // Each span's next free place; `start` ends shifted down by one span, and is shifted
        // back below.
        for (h, e) in self.handles.iter_live() {
            if let Location::Span { span, .. } = e.location() {
                let at = &mut start[span as usize];
                handles[*at as usize] = h;
                *at += 1;
            }
        }
        start.copy_within(0..nr_spans, 1);
        start[0] = 0;
    }

    fn compact_with(&mut self, by_span: &BySpan, left: &mut u64) -> Result<(), BudgetSpent> {
        // Per class: its live span-held objects, and its class spans.
        let mut n_class = [0usize; NR_CLASSES];
        let mut class_spans: Vec<Vec<u32>> = vec![Vec::new(); NR_CLASSES];
        let mut packed = Vec::new();
        for (i, s) in self.spans.iter_used() {
            match s.kind {
                SpanKind::Class => {
                    n_class[s.class as usize] += s.live as usize;
                    class_spans[s.class as usize].push(i);
                }
                SpanKind::Packed => packed.push(i),
                SpanKind::Free => {}
            }
        }
        for &s in &packed {
            for &h in by_span.of(s) {
                n_class[class_of(self.handles.get(h).len())] += 1;
            }
        }

        // 1. Each class: choose its keepers, and empty its other class spans into them.
        let mut keepers: Vec<Option<Keepers>> = (0..NR_CLASSES).map(|_| None).collect();
        for class in 0..NR_CLASSES {
            let n = n_class[class];
            if n == 0 {
                continue;
            }
            let objs = geometry(class).objs as usize;
            let target = n / objs;
            let mut spans = std::mem::take(&mut class_spans[class]);
            spans.sort_by_key(|&s| (Reverse(self.spans[s].live), s));
            let nkeep = target.min(spans.len());
            let in_class_spans: usize = spans.iter().map(|&s| self.spans[s].live as usize).sum();
            let free_in_keepers: usize = spans[..nkeep]
                .iter()
                .map(|&s| objs - self.spans[s].live as usize)
                .sum();
            let in_packed = n - in_class_spans;
            if spans.len() == target && (free_in_keepers == 0 || in_packed == 0) {
                continue; // settled
            }
            let others = spans.split_off(nkeep);
            let mut k = Keepers {
                class,
                target,
                spans,
                cursor: 0,
            };
            // Emptiest first: the spans that cost the fewest moves to free.
            for &s in others.iter().rev() {
                for &h in by_span.of(s) {
                    if !self.still_in(h, s) {
                        continue;
                    }
                    if *left == 0 {
                        return Err(BudgetSpent);
                    }
                    let moved = match self.take_keeper_slot(&mut k, true) {
                        Some(dst) => self.move_to_slot(h, dst),
                        None => self.move_to_packed(h),
                    };
                    *left -= u64::from(moved);
                }
            }
            keepers[class] = Some(k);
        }

        // 2. The packed spans, each drained whole in turn when worth it: most of its objects
        // find room in a keeper, or much of it is dead; and only when what it holds fits in
        // as many pages as it frees (a class span's slots can cost more pages than the same
        // objects packed: the dead bytes must pay for that, or the pool would grow).
        let mut room: Vec<usize> = keepers
            .iter()
            .map(|k| k.as_ref().map_or(0, |k| self.room(k)))
            .collect();
        let mut drain = Vec::new();
        for s in packed {
            let mut took = Vec::new();
            // Pages what it holds will take: a class slot at its span's pages per object,
            // a re-appended object at its bytes.
            let mut need = 0f64;
            for &h in by_span.of(s) {
                let len = self.handles.get(h).len();
                let class = class_of(len);
                if room[class] > 0 {
                    room[class] -= 1;
                    took.push(class);
                    let geo = geometry(class);
                    need += f64::from(geo.pages) / f64::from(geo.objs);
                } else {
                    need += len as f64 / PAGE_SIZE as f64;
                }
            }
            let span = &self.spans[s];
            let dead = (span.bump - span.live_bytes) * 16 > span.bump;
            let worth = dead || took.len() * 2 >= span.live as usize;
            if worth && need <= f64::from(span.nr_pages) + 1e-9 {
                drain.push(s);
            } else {
                for class in took {
                    room[class] += 1;
                }
            }
        }
        // Objects that stay packed go to a span not drained: appended to one being drained,
        // they would keep it alive, holes and all.
        if drain.contains(&self.open_packed) {
            self.open_packed = NIL;
        }
        if drain.contains(&self.tail_packed) {
            self.tail_packed = NIL;
        }
        for &s in &drain {
            if self.spans[s].live as usize != by_span.of(s).len() {
                // Objects re-appended to it in phase 1 are not in the map: draining the rest
                // would not free it.
                continue;
            }
            // A drain takes pages (new keeper spans, re-appended bytes) before it frees the
            // span. It goes ahead only if it can finish under the ceiling: with new keeper
            // spans if they fit, else by re-appending (one packed span's contents fit in the
            // headroom); a drain left half done would free nothing and hold the headroom.
            let ceiling = self.compact_ceiling.unwrap_or(u64::MAX);
            let fits = |make_spans| {
                let cost = self.drain_cost(s, by_span.of(s), &keepers, make_spans);
                self.arena.charged_after(cost) <= ceiling
            };
            let make_spans = if fits(true) {
                true
            } else if fits(false) {
                false
            } else {
                continue;
            };
            for &h in by_span.of(s) {
                if !self.still_in(h, s) {
                    continue;
                }
                if *left == 0 {
                    return Err(BudgetSpent);
                }
                let class = class_of(self.handles.get(h).len());
                let slot = keepers[class]
                    .as_mut()
                    .and_then(|k| self.take_keeper_slot(k, make_spans));
                let moved = match slot {
                    Some(dst) => self.move_to_slot(h, dst),
                    None => self.move_to_packed(h),
                };
                *left -= u64::from(moved);
            }
        }
        Ok(())
    }

    /// Whether the object of `h` is still in span `s`. Within a step nothing else moves or
    /// frees objects, and each source span is visited once, so this holds; checked all the
    /// same, since a move from the wrong place would corrupt two objects.
    fn still_in(&self, h: u32, s: u32) -> bool {
        matches!(self.handles.get(h).location(), Location::Span { span, .. } if span == s)
    }

    /// Free slots the keepers of a class can still take: in its keepers, and in the spans it
    /// is owed but has not made yet.
    fn room(&self, k: &Keepers) -> usize {
        let (free, owed) = self.keeper_slots(k);
        free + owed * geometry(k.class).objs as usize
    }

    /// A class's keepers: free slots in the spans made, and spans owed but not made yet.
    fn keeper_slots(&self, k: &Keepers) -> (usize, usize) {
        let objs = geometry(k.class).objs as usize;
        let free = k
            .spans
            .iter()
            .map(|&s| objs - self.spans[s].live as usize)
            .sum();
        (free, k.target.saturating_sub(k.spans.len()))
    }

    /// Pages draining packed span `s` (its objects `handles`) takes before the span is freed:
    /// the keeper spans it makes (if `make_spans`) and the pages its re-appended objects
    /// fill, one more for the tail of a packed span closed on the way. It follows the moves
    /// the drain makes (`take_keeper_slot`, else `move_to_packed`).
    fn drain_cost(
        &self,
        s: u32,
        handles: &[u32],
        keepers: &[Option<Keepers>],
        make_spans: bool,
    ) -> u64 {
        // (class, free slots, spans owed) of the classes met so far: few per span.
        let mut slots: Vec<(usize, usize, usize)> = Vec::new();
        let (mut pages, mut appended) = (0u64, 0usize);
        for &h in handles {
            if !self.still_in(h, s) {
                continue;
            }
            let len = self.handles.get(h).len();
            let class = class_of(len);
            let Some(k) = &keepers[class] else {
                appended += len;
                continue;
            };
            let i = match slots.iter().position(|e| e.0 == class) {
                Some(i) => i,
                None => {
                    let (free, owed) = self.keeper_slots(k);
                    slots.push((class, free, owed));
                    slots.len() - 1
                }
            };
            let (_, free, owed) = &mut slots[i];
            if *free > 0 {
                *free -= 1;
            } else if make_spans && *owed > 0 {
                let geo = geometry(class);
                *owed -= 1;
                *free = geo.objs as usize - 1;
                pages += u64::from(geo.pages);
            } else {
                appended += len;
            }
        }
        pages + appended.div_ceil(PAGE_SIZE) as u64 + 1
    }

    /// A free slot in the first keeper (from the cursor on) that has one; a new class span
    /// when all are full and the class is owed more (made only now, for an object about to
    /// move in, so a step that stops leaves no empty span behind), if `make_spans` and the
    /// step's ceiling allow it.
    fn take_keeper_slot(&mut self, k: &mut Keepers, make_spans: bool) -> Option<(u32, u16)> {
        loop {
            if let Some(&s) = k.spans.get(k.cursor) {
                let objs = geometry(self.spans[s].class as usize).objs;
                if self.spans[s].live < objs {
                    return Some((s, self.class_slot_alloc(s)));
                }
                k.cursor += 1;
                continue;
            }
            if !make_spans || k.spans.len() >= k.target {
                return None;
            }
            // Over the ceiling or the page cap: keep what we have; the class is compacted
            // less, not wrongly.
            let s = self.new_class_span(k.class).ok()?;
            k.spans.push(s);
        }
    }

    /// Move the object of `h` into the (already taken) slot `dst`. True (it always moves).
    fn move_to_slot(&mut self, h: u32, (span, slot): (u32, u16)) -> bool {
        let e = self.handles.get(h);
        let mut buf = [0u8; PAGE_SIZE];
        let buf = &mut buf[..e.len()];
        self.read_entry(e, buf);
        self.write_obj(span, slot, buf);
        self.release_location(e);
        self.handles.set(
            h,
            HandleEntry::new(Location::Span { span, off: slot }, e.len()),
        );
        true
    }

    /// Re-append the object of `h` to the open packed span. False, with the object left where
    /// it is, when that takes pages over the step's ceiling or the page cap (or memory cannot
    /// be had).
    fn move_to_packed(&mut self, h: u32) -> bool {
        let e = self.handles.get(h);
        let mut buf = [0u8; PAGE_SIZE];
        let buf = &mut buf[..e.len()];
        self.read_entry(e, buf);
        let Ok(loc) = self.packed_append(buf) else {
            return false;
        };
        self.release_location(e);
        self.handles.set(h, HandleEntry::new(loc, e.len()));
        true
    }
}

/// The class spans one class is being compacted into.
struct Keepers {
    class: usize,
    /// How many full spans the class's objects fill.
    target: usize,
    spans: Vec<u32>,
    /// The first of `spans` that may have a free slot.
    cursor: usize,
}
