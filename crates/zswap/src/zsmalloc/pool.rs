//! The pool state behind the `ZsPool` lock: malloc, free, read, and the bookkeeping that ties
//! pages, spans, fullness lists and handles together (including the consistency check the tests
//! run after every step).
//!
//! Where a new object goes:
//! 1. 4081..=4096 bytes: a page of its own (huge class).
//! 2. A free slot in a class span of its class, fullest span first.
//! 3. Otherwise the open packed span (appended at the bump pointer; a new packed span is opened
//!    when it does not fit). Class spans are only made by compaction (filled one at a time),
//!    so a pool that only grows wastes nothing but the tail of its open packed span.

use super::class::{class_of, geometry, MAX_CLASS_SIZE, NR_CLASSES};
use super::fullness::{FullnessLists, GROUP_FULL, GROUP_NONE, NR_GROUPS};
use super::handle::{HandleEntry, HandleTable, Location, NIL};
use super::pages::{PageArena, PageId};
use super::span::{read_bytes, write_bytes, Span, SpanKind, SpanTable, NO_SLOT, SPAN_BYTES};
use super::AllocError;
use crate::PAGE_SIZE;

#[derive(Debug)]
pub(crate) struct PoolState {
    pub(super) arena: PageArena,
    pub(super) spans: SpanTable,
    pub(super) handles: HandleTable,
    /// Per class: its non-full class spans by fullness.
    pub(super) lists: Vec<FullnessLists>,
    /// The packed span new packed objects are appended to, or NIL.
    pub(super) open_packed: u32,
    /// The previous open packed span, or NIL. Objects that fit in the rest of its last page go
    /// there first: it closed because one object did not fit, and without this the hole it
    /// left would stay empty for its life (about 1% of the pool).
    pub(super) tail_packed: u32,
    pub(super) stored_bytes: u64,
    pub(super) nr_objects: u64,
    /// While a compaction step runs, the charged pages (`PageArena::charged`) it may take
    /// the pool to (compact.rs); `None` otherwise.
    pub(super) compact_ceiling: Option<u64>,
    /// Slack (bytes of pages beyond the objects' bytes) that the last compaction that ran to
    /// its end left, per 1000 bytes stored: it could not remove it, and the next would not
    /// either (`ZsPool::compact_if_fragmented` looks past it). Forgotten when the page cap
    /// changes, since what compaction can do changes with it.
    pub(super) slack_after_compaction: u64,
    /// Slack below which the pool is never compacted for fragmentation (`set_served_memory`).
    pub(super) slack_floor: u64,
    /// Compaction's reverse map, kept between steps (compact.rs).
    pub(super) by_span: super::compact::BySpan,
}

impl Default for PoolState {
    fn default() -> Self {
        PoolState {
            arena: PageArena::default(),
            spans: SpanTable::default(),
            handles: HandleTable::default(),
            lists: vec![FullnessLists::default(); NR_CLASSES],
            open_packed: NIL,
            tail_packed: NIL,
            stored_bytes: 0,
            nr_objects: 0,
            compact_ceiling: None,
            slack_after_compaction: 0,
            slack_floor: super::SLACK_FLOOR,
            by_span: Default::default(),
        }
    }
}

/// Byte offset of `slot` in a class span of `class`.
#[inline]
fn slot_offset(class: usize, slot: u16) -> usize {
    slot as usize * geometry(class).size as usize
}

impl PoolState {
    pub(crate) fn malloc(&mut self, data: &[u8]) -> Result<u32, AllocError> {
        let len = data.len();
        if len == 0 || len > PAGE_SIZE {
            return Err(AllocError::BadSize(len));
        }
        let loc = if len > MAX_CLASS_SIZE {
            let page = self.arena.alloc()?;
            self.arena.page_mut(page)[..len].copy_from_slice(data);
            Location::Huge(page)
        } else {
            let class = class_of(len);
            match self.lists[class].fullest() {
                Some(span) => {
                    let slot = self.class_slot_alloc(span);
                    self.write_obj(span, slot, data);
                    Location::Span { span, off: slot }
                }
                None => self.packed_append(data)?,
            }
        };
        self.stored_bytes += len as u64;
        self.nr_objects += 1;
        Ok(self.handles.alloc(HandleEntry::new(loc, len)))
    }

    pub(crate) fn reserved_pages(&self) -> u64 {
        self.arena.reserve().len() as u64
    }

    pub(crate) fn free(&mut self, handle: u32) -> usize {
        let entry = self.handles.get(handle);
        self.release_location(entry);
        self.stored_bytes -= entry.len() as u64;
        self.nr_objects -= 1;
        self.handles.free(handle);
        entry.len()
    }

    /// Copy the object of `handle` into `out`; returns its length.
    pub(crate) fn read(&self, handle: u32, out: &mut [u8]) -> usize {
        let entry = self.handles.get(handle);
        let len = entry.len();
        assert!(out.len() >= len, "read buffer of {} < {len}", out.len());
        self.read_entry(entry, &mut out[..len]);
        len
    }

    /// The object's bytes where they lie in one page; None when they straddle two.
    pub(crate) fn object_in_place(&self, handle: u32) -> Option<&[u8]> {
        let entry = self.handles.get(handle);
        let len = entry.len();
        match entry.location() {
            Location::Huge(page) => Some(&self.arena.page(page)[..len]),
            Location::Span { span, off } => {
                let s = &self.spans[span];
                let byte_off = match s.kind {
                    SpanKind::Class => slot_offset(s.class as usize, off),
                    _ => off as usize,
                };
                let (p, in_page) = (byte_off / crate::PAGE_SIZE, byte_off % crate::PAGE_SIZE);
                (in_page + len <= crate::PAGE_SIZE)
                    .then(|| &self.arena.page(s.pages()[p])[in_page..in_page + len])
            }
        }
    }

    pub(crate) fn obj_len(&self, handle: u32) -> usize {
        self.handles.get(handle).len()
    }

    #[cfg(test)]
    pub(crate) fn location(&self, handle: u32) -> Location {
        self.handles.get(handle).location()
    }

    pub(super) fn read_entry(&self, entry: HandleEntry, out: &mut [u8]) {
        match entry.location() {
            Location::Huge(page) => out.copy_from_slice(&self.arena.page(page)[..out.len()]),
            Location::Span { span, off } => {
                let s = &self.spans[span];
                let byte_off = match s.kind {
                    SpanKind::Class => slot_offset(s.class as usize, off),
                    _ => off as usize,
                };
                read_bytes(&self.arena, s.pages(), byte_off, out);
            }
        }
    }

    /// Give up the memory of the object `entry` describes (its slot, its packed bytes or its
    /// page), freeing a span that this empties.
    pub(super) fn release_location(&mut self, entry: HandleEntry) {
        match entry.location() {
            Location::Huge(page) => self.arena.free(&mut [page]),
            Location::Span { span, off } => match self.spans[span].kind {
                SpanKind::Class => self.class_slot_free(span, off),
                SpanKind::Packed => self.packed_remove(span, off, entry.len()),
                SpanKind::Free => unreachable!("handle points into a free span"),
            },
        }
    }

    #[inline]
    pub(super) fn write_obj(&mut self, span: u32, slot: u16, data: &[u8]) {
        let s = &self.spans[span];
        let off = slot_offset(s.class as usize, slot);
        write_bytes(&mut self.arena, s.pages(), off, data);
    }

    /// Take a free slot of class span `span` (which must have one).
    pub(super) fn class_slot_alloc(&mut self, span: u32) -> u16 {
        let s = &self.spans[span];
        let class = s.class as usize;
        let geo = geometry(class);
        let slot = if s.free_head != NO_SLOT {
            let slot = s.free_head;
            let mut next = [0u8; 2];
            read_bytes(&self.arena, s.pages(), slot_offset(class, slot), &mut next);
            self.spans[span].free_head = u16::from_le_bytes(next);
            slot
        } else {
            let slot = s.fresh;
            debug_assert!((slot as u32) < geo.objs);
            self.spans[span].fresh += 1;
            slot
        };
        self.spans[span].live += 1;
        self.lists[class].update(&mut self.spans, span, geo.objs);
        slot
    }

    /// Return `slot` to class span `span`; the span is freed with its last object.
    fn class_slot_free(&mut self, span: u32, slot: u16) {
        let class = self.spans[span].class as usize;
        let s = &mut self.spans[span];
        s.live -= 1;
        if s.live == 0 {
            self.lists[class].unlink(&mut self.spans, span);
            self.free_span(span);
            return;
        }
        // The slot's first two bytes link it into the free list: slots are 16-byte aligned, so
        // they never straddle a page. This costs no metadata per slot.
        let head = s.free_head.to_le_bytes();
        s.free_head = slot;
        let s = &self.spans[span];
        write_bytes(&mut self.arena, s.pages(), slot_offset(class, slot), &head);
        self.lists[class].update(&mut self.spans, span, geometry(class).objs);
    }

    /// Make a class span of `class` with all its pages attached and put it in the fullness
    /// lists. Fails (taking nothing) if the pages are over the cap.
    pub(super) fn new_class_span(&mut self, class: usize) -> Result<u32, AllocError> {
        let geo = geometry(class);
        if !self.may_take(geo.pages as u64) {
            return Err(AllocError::PoolFull);
        }
        let mut span = Span::new_class(class);
        for i in 0..geo.pages as usize {
            match self.arena.alloc() {
                Ok(p) => span.pages[i] = p,
                Err(e) => {
                    self.arena.free(&mut span.pages[..i]);
                    return Err(e);
                }
            }
            span.nr_pages += 1;
        }
        let idx = self.spans.alloc(span);
        self.lists[class].update(&mut self.spans, idx, geo.objs);
        Ok(idx)
    }

    /// Append `data` to the open packed span, opening a new one if it does not fit, and
    /// attaching pages up to the new bump pointer.
    pub(super) fn packed_append(&mut self, data: &[u8]) -> Result<Location, AllocError> {
        let len = data.len();
        let tail = self.tail_packed;
        if tail != NIL {
            let s = &self.spans[tail];
            if s.bump as usize + len <= s.nr_pages as usize * PAGE_SIZE {
                return Ok(self.packed_write(tail, data));
            }
        }
        let open = self.open_packed;
        let fits = open != NIL && self.spans[open].bump as usize + len <= SPAN_BYTES;
        let (start, have) = if fits {
            let s = &self.spans[open];
            (s.bump as usize, s.nr_pages as usize)
        } else {
            (0, 0)
        };
        let need = (start + len).div_ceil(PAGE_SIZE) - have.min((start + len).div_ceil(PAGE_SIZE));
        if !self.may_take(need as u64) {
            return Err(AllocError::PoolFull);
        }
        let span = if fits {
            open
        } else {
            // The old open span keeps its tail unused; its pages past the bump were never
            // attached, so that costs at most the rest of its last page.
            let idx = self.spans.alloc(Span::new_packed());
            self.tail_packed = open;
            self.open_packed = idx;
            idx
        };
        for _ in 0..need {
            let page = match self.arena.alloc() {
                Ok(p) => p,
                Err(e) => {
                    // Only NoMemory gets here (the cap was checked): drop what this call made.
                    if self.spans[span].live == 0 {
                        self.free_span(span);
                    }
                    return Err(e);
                }
            };
            let s = &mut self.spans[span];
            s.pages[s.nr_pages as usize] = page;
            s.nr_pages += 1;
        }
        Ok(self.packed_write(span, data))
    }

    /// Whether `n` more pages stay within the page cap and, during a compaction step, its
    /// ceiling.
    fn may_take(&self, n: u64) -> bool {
        self.arena.can_alloc(n)
            && self
                .compact_ceiling
                .is_none_or(|c| self.arena.charged_after(n) <= c)
    }

    /// Write `data` at the bump pointer of packed span `span`, whose pages must reach that far.
    fn packed_write(&mut self, span: u32, data: &[u8]) -> Location {
        let s = &mut self.spans[span];
        let start = s.bump as usize;
        debug_assert!(start + data.len() <= s.nr_pages as usize * PAGE_SIZE);
        s.bump += data.len() as u32;
        s.live += 1;
        s.live_bytes += data.len() as u32;
        let s = &self.spans[span];
        write_bytes(&mut self.arena, s.pages(), start, data);
        Location::Span {
            span,
            off: start as u16,
        }
    }

    /// Remove the `len`-byte object at byte `off` of packed span `span`.
    pub(super) fn packed_remove(&mut self, span: u32, off: u16, len: usize) {
        let is_open = span == self.open_packed;
        let s = &mut self.spans[span];
        s.live -= 1;
        s.live_bytes -= len as u32;
        if off as usize + len == s.bump as usize {
            // The last object appended: its bytes can be handed out again at once.
            s.bump = off as u32;
        }
        if s.live > 0 {
            // Only pages holding bytes count: drop those the rollback emptied.
            let keep = (s.bump as usize).div_ceil(PAGE_SIZE);
            let n = s.nr_pages as usize;
            if keep < n {
                s.nr_pages = keep as u8;
                let mut rest = s.pages;
                self.arena.free(&mut rest[keep..n]);
            }
            return;
        }
        if !is_open {
            self.free_span(span);
            return;
        }
        // The open span keeps its first page, so a malloc/free pair on an idle pool does not
        // cost an munmap/madvise and a page fault each time. Compaction frees it if still empty.
        s.bump = 0;
        if s.nr_pages > 1 {
            let n = s.nr_pages as usize;
            s.nr_pages = 1;
            let mut rest = s.pages;
            self.arena.free(&mut rest[1..n]);
        }
    }

    /// Give back the pages kept for reuse: an open packed span left empty and the arena's
    /// reserve of freed pages. No object moves.
    pub(super) fn give_back_kept(&mut self) {
        if self.open_packed != NIL && self.spans[self.open_packed].live == 0 {
            self.free_span(self.open_packed);
        }
        self.arena.trim();
    }

    /// Free span `span`'s pages and descriptor (it must be out of the fullness lists).
    pub(super) fn free_span(&mut self, span: u32) {
        debug_assert!(self.spans[span].group >= GROUP_FULL);
        if span == self.open_packed {
            self.open_packed = NIL;
        }
        if span == self.tail_packed {
            self.tail_packed = NIL;
        }
        let s = &self.spans[span];
        let n = s.nr_pages as usize;
        let mut pages = s.pages;
        self.arena.free(&mut pages[..n]);
        self.spans.release(span);
    }

    pub(crate) fn total_size(&self) -> u64 {
        self.arena.nr_used() * PAGE_SIZE as u64
    }

    pub(crate) fn metadata_bytes(&self) -> u64 {
        self.handles.metadata_bytes()
            + self.spans.metadata_bytes()
            + (self.lists.capacity() * std::mem::size_of::<FullnessLists>()) as u64
            + self.arena.metadata_bytes()
            + self.by_span.bytes()
    }

    pub(crate) fn set_max_pages(&mut self, max: Option<u64>) {
        self.slack_after_compaction = 0;
        self.arena.set_max_pages(max);
    }

    pub(crate) fn set_reserve_max(&mut self, max: usize) {
        self.arena.set_reserve_max(max);
    }

    /// Check every invariant that ties the structures together; returns what is broken.
    pub(crate) fn check_consistency(&self) -> Result<(), String> {
        self.handles.check()?;
        self.spans.check()?;
        // Per span: what the handles say lives there.
        let n = self.spans.len();
        let mut live = vec![0u32; n];
        let mut bytes = vec![0u64; n];
        let mut objs: Vec<(u32, usize, usize)> = Vec::new(); // (span, byte offset, len)
        let mut slots: Vec<(u32, u16)> = Vec::new();
        let (mut nr, mut stored, mut huge_pages) = (0u64, 0u64, Vec::new());
        for (h, e) in self.handles.iter_live() {
            nr += 1;
            stored += e.len() as u64;
            match e.location() {
                Location::Huge(p) => {
                    if e.len() <= MAX_CLASS_SIZE {
                        return Err(format!("handle {h}: {} bytes in a huge page", e.len()));
                    }
                    huge_pages.push(p);
                }
                Location::Span { span, off } => {
                    if span as usize >= n || self.spans[span].kind == SpanKind::Free {
                        return Err(format!("handle {h} points to free span {span}"));
                    }
                    let s = &self.spans[span];
                    live[span as usize] += 1;
                    bytes[span as usize] += e.len() as u64;
                    match s.kind {
                        SpanKind::Class => {
                            let class = s.class as usize;
                            if class_of(e.len()) != class {
                                return Err(format!(
                                    "handle {h}: len {} in class {class}",
                                    e.len()
                                ));
                            }
                            if off >= s.fresh {
                                return Err(format!("handle {h}: slot {off} never handed out"));
                            }
                            slots.push((span, off));
                        }
                        _ => {
                            if off as usize + e.len() > s.bump as usize {
                                return Err(format!("handle {h}: past the bump of span {span}"));
                            }
                            objs.push((span, off as usize, e.len()));
                        }
                    }
                }
            }
        }
        if nr != self.nr_objects || stored != self.stored_bytes {
            return Err(format!(
                "counted {nr} objects / {stored} bytes, kept {} / {}",
                self.nr_objects, self.stored_bytes
            ));
        }
        slots.sort_unstable();
        if slots.windows(2).any(|w| w[0] == w[1]) {
            return Err("two handles share a slot".into());
        }
        objs.sort_unstable();
        if objs
            .windows(2)
            .any(|w| w[0].0 == w[1].0 && w[0].1 + w[0].2 > w[1].1)
        {
            return Err("two packed objects overlap".into());
        }
        // Spans: counts, pages, lists.
        let mut pages: Vec<PageId> = huge_pages;
        let mut in_lists = vec![u8::MAX; n];
        for (class, lists) in self.lists.iter().enumerate() {
            for g in 0..NR_GROUPS {
                for i in lists.members(&self.spans, g) {
                    let s = &self.spans[i];
                    if s.kind != SpanKind::Class || s.class as usize != class {
                        return Err(format!("span {i} in the wrong fullness list"));
                    }
                    in_lists[i as usize] = g as u8;
                }
            }
        }
        for (i, s) in self.spans.iter_used() {
            let iu = i as usize;
            if s.live != live[iu] {
                return Err(format!(
                    "span {i}: live {} but {} handles",
                    s.live, live[iu]
                ));
            }
            pages.extend_from_slice(s.pages());
            match s.kind {
                SpanKind::Class => {
                    let geo = geometry(s.class as usize);
                    if s.nr_pages as u32 != geo.pages || s.live == 0 {
                        return Err(format!(
                            "class span {i}: {} pages, {} live",
                            s.nr_pages, s.live
                        ));
                    }
                    let expect = super::fullness::group_of(s.live, geo.objs);
                    if s.group != expect {
                        return Err(format!("span {i}: group {} not {expect}", s.group));
                    }
                    if (expect == GROUP_FULL) != (in_lists[iu] == u8::MAX)
                        || (expect != GROUP_FULL && in_lists[iu] != expect)
                    {
                        return Err(format!("span {i}: not in its fullness list"));
                    }
                    // Free list + never-used slots + live slots = all slots.
                    let mut free = 0u32;
                    let mut slot = s.free_head;
                    while slot != NO_SLOT {
                        if slot >= s.fresh || free > geo.objs {
                            return Err(format!("span {i}: bad free slot {slot}"));
                        }
                        if slots.binary_search(&(i, slot)).is_ok() {
                            return Err(format!("span {i}: live slot {slot} on the free list"));
                        }
                        free += 1;
                        let mut next = [0u8; 2];
                        read_bytes(
                            &self.arena,
                            s.pages(),
                            slot_offset(s.class as usize, slot),
                            &mut next,
                        );
                        slot = u16::from_le_bytes(next);
                    }
                    if free + s.live + (geo.objs - s.fresh as u32) != geo.objs {
                        return Err(format!("span {i}: slots do not add up"));
                    }
                }
                SpanKind::Packed => {
                    if s.group != GROUP_NONE || in_lists[iu] != u8::MAX {
                        return Err(format!("packed span {i} in a fullness list"));
                    }
                    if s.live_bytes as u64 != bytes[iu] {
                        return Err(format!("packed span {i}: live bytes off"));
                    }
                    let need = (s.bump as usize).div_ceil(PAGE_SIZE);
                    let open_keeps = i == self.open_packed && s.nr_pages == 1;
                    if s.nr_pages as usize != need && !open_keeps {
                        return Err(format!(
                            "packed span {i}: {} pages for {} bytes",
                            s.nr_pages, s.bump
                        ));
                    }
                    if s.live == 0 && i != self.open_packed {
                        return Err(format!("packed span {i} is empty"));
                    }
                }
                SpanKind::Free => unreachable!(),
            }
        }
        for (what, span) in [("open", self.open_packed), ("tail", self.tail_packed)] {
            if span != NIL && self.spans[span].kind != SpanKind::Packed {
                return Err(format!("the {what} packed span is not a packed span"));
            }
        }
        let total = pages.len();
        pages.extend_from_slice(self.arena.reserve());
        pages.sort_unstable();
        pages.dedup();
        if pages.len() != total + self.arena.reserve().len() {
            return Err("a page is in two places (or held and in the reserve)".into());
        }
        if total as u64 != self.arena.nr_used() {
            return Err(format!(
                "{total} pages held, arena says {}",
                self.arena.nr_used()
            ));
        }
        if let Some(p) = pages.iter().find(|p| !self.arena.is_used(**p)) {
            return Err(format!("page {p:?} held but free in the arena"));
        }
        Ok(())
    }
}
