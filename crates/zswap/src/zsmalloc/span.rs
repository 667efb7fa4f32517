//! Spans (the kernel's zspages): a chain of up to 16 pages, not necessarily contiguous, that
//! holds objects. A *class span* holds fixed-size slots of one class; a *packed span* holds
//! objects of any class back to back (bump allocation), attaching pages as the bump pointer
//! advances. This file owns the span descriptor, the span table (indexed by `u32`, with a free
//! list of descriptors) and the byte copies in and out of a span, which split an object that
//! straddles a page boundary into two pieces.

use super::class::MAX_SPAN_PAGES;
use super::handle::NIL;
use super::pages::{PageArena, PageId};
use crate::PAGE_SIZE;

/// Bytes a span can address: offsets fit in the handle entry's u16.
pub(crate) const SPAN_BYTES: usize = MAX_SPAN_PAGES * PAGE_SIZE;

/// No slot (end of a class span's free-slot list).
pub(crate) const NO_SLOT: u16 = u16::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SpanKind {
    /// A descriptor on the free list; `next` links the list.
    Free,
    /// Fixed slots of one class, all pages attached when the span is made.
    Class,
    /// Objects of any class back to back; pages attached lazily.
    Packed,
}

#[derive(Debug, Clone)]
pub(crate) struct Span {
    /// The first `nr_pages` entries are the span's pages, in span order.
    pub pages: [PageId; MAX_SPAN_PAGES],
    /// Links in the class's fullness list (class spans), or the descriptor free list.
    pub prev: u32,
    pub next: u32,
    /// Live objects.
    pub live: u32,
    /// Packed: bytes handed out so far (the bump pointer). Class: unused.
    pub bump: u32,
    /// Packed: sum of the lengths of the live objects; `bump - live_bytes` is dead.
    pub live_bytes: u32,
    /// Class: head of the free-slot list, threaded through the free slots' first two bytes.
    pub free_head: u16,
    /// Class: slots at or past `fresh` have never been used, so they are free without being on
    /// the list; a new span needs no list built through its memory.
    pub fresh: u16,
    pub nr_pages: u8,
    pub kind: SpanKind,
    pub class: u8,
    /// Fullness group (class spans), see fullness.rs.
    pub group: u8,
}

impl Span {
    fn blank(kind: SpanKind) -> Self {
        Span {
            pages: [PageId(0); MAX_SPAN_PAGES],
            prev: NIL,
            next: NIL,
            live: 0,
            bump: 0,
            live_bytes: 0,
            free_head: NO_SLOT,
            fresh: 0,
            nr_pages: 0,
            kind,
            class: 0,
            group: super::fullness::GROUP_NONE,
        }
    }

    pub(crate) fn new_class(class: usize) -> Self {
        Span {
            class: class as u8,
            ..Span::blank(SpanKind::Class)
        }
    }

    pub(crate) fn new_packed() -> Self {
        Span::blank(SpanKind::Packed)
    }

    #[inline]
    pub(crate) fn pages(&self) -> &[PageId] {
        &self.pages[..self.nr_pages as usize]
    }
}

#[derive(Debug)]
pub(crate) struct SpanTable {
    spans: Vec<Span>,
    free_head: u32,
}

impl Default for SpanTable {
    fn default() -> Self {
        SpanTable {
            spans: Vec::new(),
            free_head: NIL,
        }
    }
}

impl std::ops::Index<u32> for SpanTable {
    type Output = Span;
    #[inline]
    fn index(&self, idx: u32) -> &Span {
        &self.spans[idx as usize]
    }
}

impl std::ops::IndexMut<u32> for SpanTable {
    #[inline]
    fn index_mut(&mut self, idx: u32) -> &mut Span {
        &mut self.spans[idx as usize]
    }
}

impl SpanTable {
    pub(crate) fn alloc(&mut self, span: Span) -> u32 {
        if self.free_head != NIL {
            let idx = self.free_head;
            self.free_head = self.spans[idx as usize].next;
            self.spans[idx as usize] = span;
            return idx;
        }
        if self.spans.len() == self.spans.capacity() {
            // Grow by a quarter: descriptors are a fair share of the metadata.
            let extra = (self.spans.len() / 4).max(16);
            self.spans.reserve_exact(extra);
        }
        self.spans.push(span);
        (self.spans.len() - 1) as u32
    }

    /// Put a descriptor (whose pages the caller has freed) on the free list.
    pub(crate) fn release(&mut self, idx: u32) {
        let mut blank = Span::blank(SpanKind::Free);
        blank.next = self.free_head;
        self.spans[idx as usize] = blank;
        self.free_head = idx;
    }

    pub(crate) fn len(&self) -> usize {
        self.spans.len()
    }

    /// Descriptors in use, with their indexes.
    pub(crate) fn iter_used(&self) -> impl Iterator<Item = (u32, &Span)> + '_ {
        self.spans
            .iter()
            .enumerate()
            .filter(|(_, s)| s.kind != SpanKind::Free)
            .map(|(i, s)| (i as u32, s))
    }

    /// Cut free descriptors off the end, give back spare capacity and rebuild the free list in
    /// ascending order (see `HandleTable::tidy`).
    pub(crate) fn tidy(&mut self) {
        while self.spans.last().is_some_and(|s| s.kind == SpanKind::Free) {
            self.spans.pop();
        }
        let len = self.spans.len();
        if self.spans.capacity() > len + len / 4 + 16 {
            self.spans.shrink_to(len + len / 8);
        }
        self.free_head = NIL;
        for i in (0..len).rev() {
            if self.spans[i].kind == SpanKind::Free {
                self.spans[i].next = self.free_head;
                self.free_head = i as u32;
            }
        }
    }

    pub(crate) fn metadata_bytes(&self) -> u64 {
        (self.spans.capacity() * std::mem::size_of::<Span>()) as u64
    }

    /// Check the free list covers exactly the free descriptors.
    pub(crate) fn check(&self) -> Result<(), String> {
        let mut n = 0;
        let mut i = self.free_head;
        while i != NIL {
            let s = self
                .spans
                .get(i as usize)
                .ok_or(format!("span free list points past the table: {i}"))?;
            if s.kind != SpanKind::Free {
                return Err(format!("span free list holds live span {i}"));
            }
            n += 1;
            if n > self.spans.len() {
                return Err("span free list has a cycle".into());
            }
            i = s.next;
        }
        let free = self
            .spans
            .iter()
            .filter(|s| s.kind == SpanKind::Free)
            .count();
        if n != free {
            return Err(format!("span free list {n}, free descriptors {free}"));
        }
        Ok(())
    }
}

/// Copy `out.len()` bytes at byte `off` of the span made of `pages` into `out`.
#[inline]
pub(crate) fn read_bytes(arena: &PageArena, pages: &[PageId], off: usize, out: &mut [u8]) {
    let mut done = 0;
    let mut off = off;
    while done < out.len() {
        let (p, in_page) = (off / PAGE_SIZE, off % PAGE_SIZE);
        let n = (PAGE_SIZE - in_page).min(out.len() - done);
        out[done..done + n].copy_from_slice(&arena.page(pages[p])[in_page..in_page + n]);
        done += n;
        off += n;
    }
}

/// Copy `data` to byte `off` of the span made of `pages`.
#[inline]
pub(crate) fn write_bytes(arena: &mut PageArena, pages: &[PageId], off: usize, data: &[u8]) {
    let mut done = 0;
    let mut off = off;
    while done < data.len() {
        let (p, in_page) = (off / PAGE_SIZE, off % PAGE_SIZE);
        let n = (PAGE_SIZE - in_page).min(data.len() - done);
        arena.page_mut(pages[p])[in_page..in_page + n].copy_from_slice(&data[done..done + n]);
        done += n;
        off += n;
    }
}
