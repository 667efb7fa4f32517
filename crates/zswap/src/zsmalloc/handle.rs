//! The handle table: what a `Handle` names. One 8-byte entry per handle says where its object
//! lives (span and slot, span and byte offset, or a huge page) and how long it is. Handles are
//! indexes into the table, so compaction moves an object by rewriting its entry and the handle
//! the caller holds stays valid. Free entries form a list threaded through the table.

use super::pages::PageId;

/// No entry / end of the free list.
pub(crate) const NIL: u32 = u32::MAX;

/// `len` bit saying the object is a huge-class page: `span` is then a `PageId`.
const HUGE_BIT: u16 = 0x8000;

/// Where an object lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Location {
    /// In span `span`: at slot `off` of a class span, or at byte `off` of a packed span.
    Span { span: u32, off: u16 },
    /// Alone in a page (4081..=4096 bytes).
    Huge(PageId),
}

/// One handle's entry. `len == 0` marks a free entry, whose `span` is then the next free index.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HandleEntry {
    span: u32,
    off: u16,
    len: u16,
}

impl HandleEntry {
    pub(crate) fn new(loc: Location, len: usize) -> Self {
        debug_assert!((1..=crate::PAGE_SIZE).contains(&len));
        match loc {
            Location::Span { span, off } => HandleEntry {
                span,
                off,
                len: len as u16,
            },
            Location::Huge(page) => HandleEntry {
                span: page.0,
                off: 0,
                len: len as u16 | HUGE_BIT,
            },
        }
    }
    #[inline]
    pub(crate) fn is_free(self) -> bool {
        self.len == 0
    }
    #[inline]
    pub(crate) fn len(self) -> usize {
        (self.len & !HUGE_BIT) as usize
    }
    #[inline]
    pub(crate) fn location(self) -> Location {
        if self.len & HUGE_BIT != 0 {
            Location::Huge(PageId(self.span))
        } else {
            Location::Span {
                span: self.span,
                off: self.off,
            }
        }
    }
    fn free_link(next: u32) -> Self {
        HandleEntry {
            span: next,
            off: 0,
            len: 0,
        }
    }
}

#[derive(Debug)]
pub(crate) struct HandleTable {
    entries: Vec<HandleEntry>,
    free_head: u32,
    nr_free: usize,
}

impl Default for HandleTable {
    fn default() -> Self {
        HandleTable {
            entries: Vec::new(),
            free_head: NIL,
            nr_free: 0,
        }
    }
}

impl HandleTable {
    pub(crate) fn alloc(&mut self, entry: HandleEntry) -> u32 {
        if self.free_head != NIL {
            let idx = self.free_head;
            self.free_head = self.entries[idx as usize].span;
            self.nr_free -= 1;
            self.entries[idx as usize] = entry;
            return idx;
        }
        if self.entries.len() == self.entries.capacity() {
            // Grow by an eighth rather than doubling: the table is most of the pool's metadata
            // and doubling would leave up to half of it unused. Still amortized O(1).
            let extra = (self.entries.len() / 8).max(64);
            self.entries.reserve_exact(extra);
        }
        assert!(self.entries.len() < NIL as usize, "handle table full");
        self.entries.push(entry);
        (self.entries.len() - 1) as u32
    }

    pub(crate) fn free(&mut self, idx: u32) {
        debug_assert!(!self.entries[idx as usize].is_free());
        self.entries[idx as usize] = HandleEntry::free_link(self.free_head);
        self.free_head = idx;
        self.nr_free += 1;
    }

    /// The live entry of `idx`; panics on a free or unknown handle (a use after free).
    #[inline]
    pub(crate) fn get(&self, idx: u32) -> HandleEntry {
        match self.entries.get(idx as usize) {
            Some(e) if !e.is_free() => *e,
            _ => panic!("zsmalloc: handle {idx} is not allocated"),
        }
    }

    #[inline]
    pub(crate) fn set(&mut self, idx: u32, entry: HandleEntry) {
        debug_assert!(!self.entries[idx as usize].is_free());
        self.entries[idx as usize] = entry;
    }

    /// Live entries with their indexes.
    pub(crate) fn iter_live(&self) -> impl Iterator<Item = (u32, HandleEntry)> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| !e.is_free())
            .map(|(i, e)| (i as u32, *e))
    }

    /// Cut free entries off the end, give back spare capacity, and rebuild the free list in
    /// ascending order so new objects fill the lowest holes and the tail can be cut next time.
    pub(crate) fn tidy(&mut self) {
        while self.entries.last().is_some_and(|e| e.is_free()) {
            self.entries.pop();
        }
        let len = self.entries.len();
        if self.entries.capacity() > len + len / 8 + 64 {
            self.entries.shrink_to(len + len / 16);
        }
        self.free_head = NIL;
        self.nr_free = 0;
        for i in (0..len).rev() {
            if self.entries[i].is_free() {
                self.entries[i] = HandleEntry::free_link(self.free_head);
                self.free_head = i as u32;
                self.nr_free += 1;
            }
        }
    }

    pub(crate) fn metadata_bytes(&self) -> u64 {
        (self.entries.capacity() * std::mem::size_of::<HandleEntry>()) as u64
    }

    /// Check the free list covers exactly the free entries.
    pub(crate) fn check(&self) -> Result<(), String> {
        let mut n = 0;
        let mut i = self.free_head;
        while i != NIL {
            let e = self
                .entries
                .get(i as usize)
                .ok_or(format!("free list points past the table: {i}"))?;
            if !e.is_free() {
                return Err(format!("free list holds live handle {i}"));
            }
            n += 1;
            if n > self.entries.len() {
                return Err("free list has a cycle".into());
            }
            i = e.span;
        }
        let free = self.entries.iter().filter(|e| e.is_free()).count();
        if n != free || n != self.nr_free {
            return Err(format!(
                "free list {n}, free entries {free}, counted {}",
                self.nr_free
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_is_eight_bytes() {
        assert_eq!(std::mem::size_of::<HandleEntry>(), 8);
    }

    #[test]
    fn entry_round_trips_locations() {
        let e = HandleEntry::new(
            Location::Span {
                span: 7,
                off: 65535,
            },
            4080,
        );
        assert_eq!(
            e.location(),
            Location::Span {
                span: 7,
                off: 65535
            }
        );
        assert_eq!(e.len(), 4080);
        let e = HandleEntry::new(Location::Huge(PageId(9)), 4096);
        assert_eq!(e.location(), Location::Huge(PageId(9)));
        assert_eq!(e.len(), 4096);
    }
}
