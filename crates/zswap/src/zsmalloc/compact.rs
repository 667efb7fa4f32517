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
//! Source spans are emptied one at a time, each before the next is touched, so the pool never
//! holds much more than it did: the new spans an object moves into are paid for by the span it
//! leaves, one span behind, plus at most one partly filled keeper per class. (Moving class by
//! class instead left every packed span alive until the last class was done: the pool grew by
//! what was moved, 20 MiB on a 240 MiB pool, and took its region that far over its limit.)
//!
//! Compaction runs in steps of a bounded number of moves (`STEP_BUDGET`); the pool's lock is
//! given up between steps, and each step starts from the pool as it is then. At the pool's
//! page cap nothing can be re-appended, and the compaction ends.
//!
//! Nothing keeps a back-reference from a slot to its handle (that would cost metadata on every
//! object all the time); the reverse map is built at each step, by one scan of the handle
//! table, grouped by span. Every move rewrites the handle's entry only, so handles stay valid.

use std::cmp::Reverse;

use super::class::{class_of, geometry, NR_CLASSES};
use super::handle::{HandleEntry, Location, NIL};
use super::pool::PoolState;
use super::span::SpanKind;
use super::AllocError;
use crate::PAGE_SIZE;

/// Objects one compaction step moves at most. The pool is locked for a step (1-4 ms at this
/// size): moving a whole 200 MB pool at once held every load and store off for 125 ms.
pub(crate) const STEP_BUDGET: u64 = 1024;

/// The handles of the span-held objects, grouped by span (a counting sort by span index).
struct BySpan {
    start: Vec<usize>,
    handles: Vec<u32>,
}

impl BySpan {
    fn of(&self, span: u32) -> &[u32] {
        let s = span as usize;
        &self.handles[self.start[s]..self.start[s + 1]]
    }
}

/// Why a compaction step stopped.
#[derive(PartialEq, Eq)]
enum Stop {
    /// Its budget of moves is spent.
    Budget,
    /// The pool is at its page cap: nothing can be appended.
    Full,
}

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
        let by_span = self.objects_by_span();
        let done = match self.compact_with(&by_span, &mut left) {
            Ok(()) => left > 0,
            // At the page cap nothing can be re-appended: stepping again would meet the same
            // wall. What moved stays moved; the compaction ends here.
            Err(Stop::Full) => true,
            Err(Stop::Budget) => false,
        };
        if done {
            // O(table) each: once, at the end, not every step.
            self.handles.tidy();
            self.spans.tidy();
        }
        self.arena.trim();
        (budget - left, done)
    }

    fn objects_by_span(&self) -> BySpan {
        let mut start = vec![0usize; self.spans.len() + 1];
        for (_, e) in self.handles.iter_live() {
            if let Location::Span { span, .. } = e.location() {
                start[span as usize + 1] += 1;
            }
        }
        for s in 0..self.spans.len() {
            start[s + 1] += start[s];
        }
        let mut handles = vec![0u32; start[self.spans.len()]];
        let mut fill = start.clone();
        for (h, e) in self.handles.iter_live() {
            if let Location::Span { span, .. } = e.location() {
                handles[fill[span as usize]] = h;
                fill[span as usize] += 1;
            }
        }
        BySpan { start, handles }
    }

    fn compact_with(&mut self, by_span: &BySpan, left: &mut u64) -> Result<(), Stop> {
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
                        return Err(Stop::Budget);
                    }
                    match self.take_keeper_slot(&mut k) {
                        Some(dst) => self.move_to_slot(h, dst),
                        None => self.move_to_packed(h).map_err(|_| Stop::Full)?,
                    }
                    *left -= 1;
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
            for &h in by_span.of(s) {
                if !self.still_in(h, s) {
                    continue;
                }
                if *left == 0 {
                    return Err(Stop::Budget);
                }
                let class = class_of(self.handles.get(h).len());
                let slot = keepers[class]
                    .as_mut()
                    .and_then(|k| self.take_keeper_slot(k));
                match slot {
                    Some(dst) => self.move_to_slot(h, dst),
                    None => self.move_to_packed(h).map_err(|_| Stop::Full)?,
                }
                *left -= 1;
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
        let objs = geometry(k.class).objs as usize;
        let free: usize = k
            .spans
            .iter()
            .map(|&s| objs - self.spans[s].live as usize)
            .sum();
        free + k.target.saturating_sub(k.spans.len()) * objs
    }

    /// A free slot in the first keeper (from the cursor on) that has one; a new class span
    /// when all are full and the class is owed more (made only now, for an object about to
    /// move in, so a step that stops leaves no empty span behind).
    fn take_keeper_slot(&mut self, k: &mut Keepers) -> Option<(u32, u16)> {
        loop {
            if let Some(&s) = k.spans.get(k.cursor) {
                let objs = geometry(self.spans[s].class as usize).objs;
                if self.spans[s].live < objs {
                    return Some((s, self.class_slot_alloc(s)));
                }
                k.cursor += 1;
                continue;
            }
            if k.spans.len() >= k.target {
                return None;
            }
            // Over the page cap: keep what we have; the class is compacted less, not wrongly.
            let s = self.new_class_span(k.class).ok()?;
            k.spans.push(s);
        }
    }

    /// Move the object of `h` into the (already taken) slot `dst`.
    fn move_to_slot(&mut self, h: u32, (span, slot): (u32, u16)) {
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
    }

    /// Re-append the object of `h` to the open packed span.
    fn move_to_packed(&mut self, h: u32) -> Result<(), AllocError> {
        let e = self.handles.get(h);
        let mut buf = [0u8; PAGE_SIZE];
        let buf = &mut buf[..e.len()];
        self.read_entry(e, buf);
        let loc = self.packed_append(buf)?;
        self.release_location(e);
        self.handles.set(h, HandleEntry::new(loc, e.len()));
        Ok(())
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
