//! The page arena: the pool's 4 KiB pages, carved from 2 MiB anonymous mappings (chunks) that are
//! mapped on demand. A page is named by a `PageId` (chunk × 512 + page in chunk). Freed pages go
//! back to the OS (MADV_DONTNEED, adjacent pages coalesced into one call) and a chunk with no
//! page in use is unmapped, so the process's RSS follows `total_size()`.
//!
//! The one exception is a reserve of freed pages (at most `RESERVE_PAGES`, 4 MiB, or less as
//! the pool's owner sets: `set_reserve_max`) kept resident for the next allocation: giving
//! every page back at once makes a malloc/free churn pay a madvise with its TLB flush and a
//! page fault for each page, most of what it costs (DESIGN.md section 6). The reserve is not in
//! `total_size()` (the kernel's pool_total_size counts zspage pages only) but is reported by
//! `reserved_bytes()`, which a region charges to its limit; `trim` (called by compaction)
//! empties it.

use uffd::AnonMapping;

use super::AllocError;
use crate::PAGE_SIZE;

/// Pages per chunk: 2 MiB mappings keep the number of mmaps small without pinning much address
/// space, and a 512-bit bitmap per chunk stays cheap to scan.
const CHUNK_PAGES: usize = 512;
const CHUNK_WORDS: usize = CHUNK_PAGES / 64;
/// Freed pages kept resident for reuse (see above).
const RESERVE_PAGES: usize = 1024;

/// A page of the arena. Conversions to chunk and offset live here only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct PageId(pub u32);

impl PageId {
    #[inline]
    fn chunk(self) -> usize {
        self.0 as usize / CHUNK_PAGES
    }
    #[inline]
    fn index(self) -> usize {
        self.0 as usize % CHUNK_PAGES
    }
    /// Byte offset of the page inside its chunk's mapping.
    #[inline]
    fn byte_offset(self) -> usize {
        self.index() * PAGE_SIZE
    }
}

#[derive(Debug)]
struct Chunk {
    map: AnonMapping,
    /// Bit i set: page i is held by a span or sits in the reserve.
    used: [u64; CHUNK_WORDS],
    nr_used: u32,
}

#[derive(Debug, Default)]
pub(crate) struct PageArena {
    /// Chunk slots; `None` is an unmapped chunk, so page ids stay stable when chunks come and go.
    chunks: Vec<Option<Chunk>>,
    /// Lowest chunk that may have a free page: allocation prefers low chunks so high ones empty
    /// out and get unmapped.
    hint: usize,
    /// Pages held by spans (not counting the reserve).
    nr_used: u64,
    max_pages: Option<u64>,
    /// Freed pages still resident and still marked in their chunk, reused first.
    reserve: Vec<PageId>,
    /// The most `reserve` holds (`RESERVE_PAGES` unless set lower).
    reserve_max: Option<usize>,
    /// The most `charged()` has been since `take_peak_charged` (for tests of compaction).
    peak_charged: u64,
}

impl PageArena {
    /// Pages currently held (allocated and not freed).
    pub(crate) fn nr_used(&self) -> u64 {
        self.nr_used
    }

    pub(crate) fn set_max_pages(&mut self, max: Option<u64>) {
        self.max_pages = max;
    }

    /// Whether `n` more pages would stay within the cap.
    #[inline]
    pub(crate) fn can_alloc(&self, n: u64) -> bool {
        match self.max_pages {
            None => true,
            Some(max) => self.nr_used + n <= max,
        }
    }

    /// Pages the arena holds resident: in spans and in the reserve (what a region charges).
    pub(crate) fn charged(&self) -> u64 {
        self.nr_used + self.reserve.len() as u64
    }

    /// `charged()` once `n` more pages are allocated: the reserve serves them first.
    pub(crate) fn charged_after(&self, n: u64) -> u64 {
        self.nr_used + n.max(self.reserve.len() as u64)
    }

    /// The most `charged()` has been since the last call (or since the arena was made).
    #[cfg(test)]
    pub(crate) fn take_peak_charged(&mut self) -> u64 {
        let now = self.charged();
        std::mem::replace(&mut self.peak_charged, now)
    }

    pub(crate) fn alloc(&mut self) -> Result<PageId, AllocError> {
        if !self.can_alloc(1) {
            return Err(AllocError::PoolFull);
        }
        if let Some(p) = self.reserve.pop() {
            self.nr_used += 1;
            return Ok(p);
        }
        let mut c = self.hint;
        loop {
            if c == self.chunks.len() {
                self.chunks.push(None);
            }
            match &mut self.chunks[c] {
                Some(chunk) if chunk.nr_used as usize == CHUNK_PAGES => c += 1,
                Some(chunk) => {
                    let w = chunk
                        .used
                        .iter()
                        .position(|&w| w != u64::MAX)
                        .expect("a chunk with free pages has a free bit");
                    let bit = (!chunk.used[w]).trailing_zeros() as usize;
                    chunk.used[w] |= 1 << bit;
                    chunk.nr_used += 1;
                    self.nr_used += 1;
                    self.hint = c;
                    self.peak_charged = self.peak_charged.max(self.charged());
                    return Ok(PageId((c * CHUNK_PAGES + w * 64 + bit) as u32));
                }
                slot @ None => {
                    let map = AnonMapping::new(CHUNK_PAGES * PAGE_SIZE)
                        .map_err(|e| AllocError::NoMemory(e.to_string()))?;
                    *slot = Some(Chunk {
                        map,
                        used: [0; CHUNK_WORDS],
                        nr_used: 0,
                    });
                }
            }
        }
    }

    fn reserve_max(&self) -> usize {
        self.reserve_max.unwrap_or(RESERVE_PAGES)
    }

    /// Keep at most `max` freed pages (at most `RESERVE_PAGES`) for reuse; those past it go
    /// back now.
    pub(crate) fn set_reserve_max(&mut self, max: usize) {
        let max = max.min(RESERVE_PAGES);
        self.reserve_max = Some(max);
        if self.reserve.len() > max {
            let mut past = self.reserve.split_off(max);
            self.release(&mut past);
        }
    }

    /// Free `pages` (sorted here) and hand them back to the OS: runs of adjacent pages are
    /// discarded with one madvise each, and a chunk left with no page in use is unmapped.
    pub(crate) fn free(&mut self, pages: &mut [PageId]) {
        self.nr_used -= pages.len() as u64;
        let max = self.reserve_max();
        let keep = max.saturating_sub(self.reserve.len()).min(pages.len());
        if self.reserve.capacity() == 0 {
            self.reserve.reserve_exact(max);
        }
        self.reserve.extend_from_slice(&pages[..keep]);
        self.release(&mut pages[keep..]);
    }

    /// Give the reserve back to the OS, so RSS matches `total_size()` exactly.
    pub(crate) fn trim(&mut self) {
        let mut reserve = std::mem::take(&mut self.reserve);
        self.release(&mut reserve);
    }

    /// Unmark `pages` in their chunks and give them back to the OS.
    fn release(&mut self, pages: &mut [PageId]) {
        pages.sort_unstable();
        let mut i = 0;
        while i < pages.len() {
            let c = pages[i].chunk();
            let mut j = i;
            while j < pages.len() && pages[j].chunk() == c {
                j += 1;
            }
            self.free_in_chunk(c, &pages[i..j]);
            i = j;
        }
    }

    /// Free sorted `pages`, all in chunk `c`.
    fn free_in_chunk(&mut self, c: usize, pages: &[PageId]) {
        let chunk = self.chunks[c]
            .as_mut()
            .expect("freeing a page of an unmapped chunk");
        for p in pages {
            let (w, bit) = (p.index() / 64, p.index() % 64);
            assert!(chunk.used[w] & (1 << bit) != 0, "double free of page {p:?}");
            chunk.used[w] &= !(1 << bit);
        }
        chunk.nr_used -= pages.len() as u32;
        self.hint = self.hint.min(c);
        if chunk.nr_used == 0 {
            // Unmapping returns the pages and the address space in one call.
            self.chunks[c] = None;
            while matches!(self.chunks.last(), Some(None)) {
                self.chunks.pop();
            }
            return;
        }
        let mut i = 0;
        while i < pages.len() {
            let mut j = i + 1;
            while j < pages.len() && pages[j].0 == pages[j - 1].0 + 1 {
                j += 1;
            }
            // madvise on a range of our own mapping can only fail on a kernel bug; the pages are
            // free either way (they merely stay resident), so losing the error is harmless.
            let _ = chunk
                .map
                .discard(pages[i].byte_offset(), (j - i) * PAGE_SIZE);
            i = j;
        }
    }

    #[inline]
    pub(crate) fn page(&self, id: PageId) -> &[u8] {
        let chunk = self.chunks[id.chunk()]
            .as_ref()
            .expect("page of an unmapped chunk");
        let off = id.byte_offset();
        &chunk.map.as_slice()[off..off + PAGE_SIZE]
    }

    #[inline]
    pub(crate) fn page_mut(&mut self, id: PageId) -> &mut [u8] {
        let chunk = self.chunks[id.chunk()]
            .as_mut()
            .expect("page of an unmapped chunk");
        let off = id.byte_offset();
        &mut chunk.map.as_mut_slice()[off..off + PAGE_SIZE]
    }

    /// Pages in the reserve (for the consistency check).
    pub(crate) fn reserve(&self) -> &[PageId] {
        &self.reserve
    }

    /// Whether `id` is currently allocated or reserved (for the consistency check).
    pub(crate) fn is_used(&self, id: PageId) -> bool {
        self.chunks
            .get(id.chunk())
            .and_then(Option::as_ref)
            .is_some_and(|c| c.used[id.index() / 64] & (1 << (id.index() % 64)) != 0)
    }

    /// Heap bytes of the arena's bookkeeping (the chunk table; page memory is not metadata).
    pub(crate) fn metadata_bytes(&self) -> u64 {
        (self.chunks.capacity() * std::mem::size_of::<Option<Chunk>>()
            + self.reserve.capacity() * std::mem::size_of::<PageId>()) as u64
    }

    /// Number of chunks currently mapped.
    #[cfg(test)]
    pub(crate) fn nr_chunks_mapped(&self) -> usize {
        self.chunks.iter().filter(|c| c.is_some()).count()
    }
}
