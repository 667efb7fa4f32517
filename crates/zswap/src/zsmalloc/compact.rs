//! Compaction (the kernel's zs_compact), with packed spans in the picture. For each class:
//! N = its live objects (in class spans and in packed spans), K = N / objs_per_span. The K
//! fullest class spans are kept (new ones are made if fewer exist) and filled, first from the
//! class's other class spans, then from packed spans; what is left in the other class spans is
//! appended to the open packed span, and they are freed. Then every packed span whose dead
//! bytes exceed 1/16 of what it holds is evacuated (its live objects re-appended) and freed.
//!
//! Nothing keeps a back-reference from a slot to its handle (that would cost metadata on every
//! object all the time); the reverse map is built here, by one scan of the handle table. Every
//! move rewrites the handle's entry only, so handles stay valid, and every move re-reads the
//! entry, so spans freed and descriptors reused during the pass cannot mislead it.

use std::cmp::Reverse;

use super::class::{class_of, geometry, NR_CLASSES};
use super::handle::{HandleEntry, Location, NIL};
use super::pool::PoolState;
use super::span::SpanKind;
use super::AllocError;
use crate::PAGE_SIZE;

/// Objects one compaction step moves at most. The pool is locked for a step (1-2 ms at this
/// size): moving a whole 200 MB pool at once held every load and store off for 125 ms.
pub(crate) const STEP_BUDGET: u64 = 1024;

impl PoolState {
    /// One step of compaction: at most `budget` objects moved. True when the pool is fully
    /// compacted (the step stopped short of its budget). Every step starts from the pool as it
    /// is, so steps may be interleaved with mallocs and frees; a step stopped part way leaves
    /// no empty span behind (a new class span is made only for an object about to move in).
    pub(crate) fn compact_step(&mut self, budget: u64) -> (u64, bool) {
        let mut left = budget;
        // An open packed span left empty holds a page for nothing.
        if self.open_packed != NIL && self.spans[self.open_packed].live == 0 {
            self.free_span(self.open_packed);
        }

        // Reverse map: the handles of span-held objects, grouped by class (a counting sort).
        let mut start = vec![0usize; NR_CLASSES + 1];
        for (_, e) in self.handles.iter_live() {
            if let Location::Span { .. } = e.location() {
                start[class_of(e.len()) + 1] += 1;
            }
        }
        for c in 0..NR_CLASSES {
            start[c + 1] += start[c];
        }
        let mut order = vec![0u32; start[NR_CLASSES]];
        let mut fill = start.clone();
        for (h, e) in self.handles.iter_live() {
            if let Location::Span { .. } = e.location() {
                let c = class_of(e.len());
                order[fill[c]] = h;
                fill[c] += 1;
            }
        }
        let mut keeper = Vec::new();
        for class in 0..NR_CLASSES {
            if left == 0 {
                break;
            }
            let hs = &order[start[class]..start[class + 1]];
            self.compact_class(class, hs, &mut keeper, &mut left);
        }
        // Done when the classes left budget over, and the packed spans were all cleaned
        // with budget still left (a step that used it all up may have more to do).
        let classes_done = left > 0;
        let done = classes_done && self.clean_packed(&mut left) && left > 0;
        if done {
            // O(table) each: once, at the end, not every step.
            self.handles.tidy();
            self.spans.tidy();
        }
        self.arena.trim();
        (budget - left, done)
    }

    /// Compact one class whose live span-held objects are `hs`, moving at most `left` objects
    /// (decremented per move). `keeper` is scratch space (indexed by span, all false on entry
    /// and on return).
    fn compact_class(&mut self, class: usize, hs: &[u32], keeper: &mut Vec<bool>, left: &mut u64) {
        if hs.is_empty() {
            return;
        }
        let objs = geometry(class).objs as usize;
        let target = hs.len() / objs;
        let mut class_spans = Vec::new();
        let mut in_packed = 0;
        for &h in hs {
            if let Location::Span { span, .. } = self.handles.get(h).location() {
                match self.spans[span].kind {
                    SpanKind::Class => class_spans.push(span),
                    _ => in_packed += 1,
                }
            }
        }
        class_spans.sort_unstable();
        class_spans.dedup();
        class_spans.sort_by_key(|&s| (Reverse(self.spans[s].live), s));
        let nkeep = target.min(class_spans.len());
        let free_in_keepers: usize = class_spans[..nkeep]
            .iter()
            .map(|&s| objs - self.spans[s].live as usize)
            .sum();
        let settled = class_spans.len() == target && (free_in_keepers == 0 || in_packed == 0);
        if settled {
            return;
        }
        let mut keepers = Keepers {
            class,
            target,
            spans: class_spans,
            cursor: 0,
        };
        keepers.spans.truncate(nkeep);
        for &s in &keepers.spans {
            mark(keeper, s, true);
        }
        let is_keeper = |keeper: &[bool], s: u32| keeper.get(s as usize).copied().unwrap_or(false);

        // 1. Empty the other class spans: into the keepers while they have room, then packed.
        for &h in hs {
            if *left == 0 {
                break;
            }
            let Location::Span { span, .. } = self.handles.get(h).location() else {
                continue;
            };
            if self.spans[span].kind != SpanKind::Class || is_keeper(keeper, span) {
                continue;
            }
            if let Some(dst) = self.take_keeper_slot(&mut keepers, keeper) {
                self.move_to_slot(h, dst);
            } else if self.move_to_packed(h).is_err() {
                break;
            }
            *left -= 1;
        }
        // 2. Fill the keepers' remaining slots from packed spans.
        for &h in hs {
            if *left == 0 {
                break;
            }
            let Location::Span { span, .. } = self.handles.get(h).location() else {
                continue;
            };
            if self.spans[span].kind != SpanKind::Packed {
                continue;
            }
            match self.take_keeper_slot(&mut keepers, keeper) {
                Some(dst) => self.move_to_slot(h, dst),
                None => break,
            }
            *left -= 1;
        }
        for &s in &keepers.spans {
            mark(keeper, s, false);
        }
    }

    /// A free slot in the first keeper (from the cursor on) that has one; a new class span
    /// when all are full and the class is owed more (made only now, so a step that stops
    /// leaves no empty span behind).
    fn take_keeper_slot(&mut self, k: &mut Keepers, keeper: &mut Vec<bool>) -> Option<(u32, u16)> {
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
            mark(keeper, s, true);
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

    /// Evacuate the packed spans with more than 1/16 dead bytes into the open packed span.
    /// True when every victim was taken in this step.
    fn clean_packed(&mut self, left: &mut u64) -> bool {
        let victims: Vec<u32> = self
            .spans
            .iter_used()
            .filter(|(_, s)| s.kind == SpanKind::Packed && (s.bump - s.live_bytes) * 16 > s.bump)
            .map(|(i, _)| i)
            .collect();
        if victims.is_empty() {
            return true;
        }
        // Appending to a span being evacuated would keep it alive: start a fresh one.
        if victims.contains(&self.open_packed) {
            self.open_packed = NIL;
        }
        if victims.contains(&self.tail_packed) {
            self.tail_packed = NIL;
        }
        // As many victims as this step's budget evacuates (at least one): gathering and
        // sorting every victim's objects each step made a step of a large pool take ~10 ms.
        let mut is_victim = vec![false; self.spans.len()];
        let mut taken = 0u64;
        let mut all = true;
        for &v in &victims {
            if taken > 0 && taken + u64::from(self.spans[v].live) > *left {
                all = false;
                break;
            }
            taken += u64::from(self.spans[v].live);
            is_victim[v as usize] = true;
        }
        // Objects of the victims in span order, so their new home keeps the old neighbourhood.
        let mut objs: Vec<(u32, u16, u32)> = self
            .handles
            .iter_live()
            .filter_map(|(h, e)| match e.location() {
                Location::Span { span, off } if is_victim[span as usize] => Some((span, off, h)),
                _ => None,
            })
            .collect();
        objs.sort_unstable();
        for (_, _, h) in objs {
            if *left == 0 || self.move_to_packed(h).is_err() {
                return false;
            }
            *left -= 1;
        }
        all
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

fn mark(keeper: &mut Vec<bool>, span: u32, on: bool) {
    if keeper.len() <= span as usize {
        keeper.resize(span as usize + 1, false);
    }
    keeper[span as usize] = on;
}
