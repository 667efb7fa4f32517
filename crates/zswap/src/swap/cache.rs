//! The swap cache: one state word per page of a swap space, and the only place that says who
//! owns a page. Store, load, writeback, invalidate and concurrent faults all meet here: a
//! caller either takes ownership of a folio ([`FolioLock`]) or waits for its owner, on a
//! hashed wait queue as the kernel waits on a locked folio. Nobody spins and nobody sleeps
//! for a fixed time.
//!
//! A large folio holds one lock, in its head page's word, while it is whole: every page of
//! a folio carries the folio's order, so any page leads to the head. The word also records
//! where the page's data is (the entry: zero mark, pool handle, disk) and its shadow: the
//! eviction counter value at the time it was evicted, from which the region computes a
//! refault distance, and which doubles as the generation number that tells a reused entry
//! apart from the one a reader saw earlier.
//!
//! Word layout (u64): kind 3 | LOCKED 1 | WAITERS 1 | REFERENCED 1 | codec 4 | order 4 |
//! HAS_SLOT 1 | shadow 17 | payload 32. The payload is a pool handle (Stored) or a fill value
//! (Zero). A page with a copy on the backing device (on disk, or written through) has
//! HAS_SLOT set and its slot in a side map: few pages have one, and 8 bytes a page is what
//! the table costs then.
//!
//! Lock rules:
//! 1. Only the owner (the holder of the head's LOCKED bit) changes kind, payload, codec,
//!    order or slot of the folio's pages. Everyone else changes only WAITERS (waiters) and
//!    REFERENCED (the shrinker's second chance, by compare-and-swap on an unlocked word).
//! 2. Folios are locked in ascending offset order, and nobody waits for a folio while holding
//!    one at a lower offset, so lock waits cannot form a cycle.
//! 3. Changing a folio's shape (merge, split) needs the locks of every page involved; waiters
//!    of a head that stops being one are woken so they look again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sparse::SparseArray;

use parking_lot::{Condvar, Mutex};

use crate::lock_order;

use super::slots::SwapSlot;

const KIND_MASK: u64 = 0b111;
const LOCKED: u64 = 1 << 3;
const WAITERS: u64 = 1 << 4;
const REFERENCED: u64 = 1 << 5;
const CODEC_SHIFT: u32 = 6;
const CODEC_MASK: u64 = 0xf << CODEC_SHIFT;
const ORDER_SHIFT: u32 = 10;
const ORDER_MASK: u64 = 0xf << ORDER_SHIFT;
const HAS_SLOT: u64 = 1 << 14;
const SHADOW_SHIFT: u32 = 15;
/// Shadows (eviction counter values) keep this many bits: refault distances are modulo 2^17
/// pages (512 MiB), beyond which a refault counts as far anyway.
pub const SHADOW_BITS: u32 = 17;
const SHADOW_MASK: u64 = ((1 << SHADOW_BITS) - 1) << SHADOW_SHIFT;
const PAYLOAD_SHIFT: u32 = 32;

/// Shards of the slot side map: folios lock different shards, so they rarely contend.
const SLOT_SHARDS: usize = 64;

/// The largest folio order: 512 pages, 2 MiB.
pub const MAX_ORDER: u8 = 9;

/// Where a page's data is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Nothing here: the page is resident in its mapping, or was never written, or discarded.
    Empty = 0,
    /// A same-filled page, recorded by its 32-bit fill value; no storage.
    Zero = 1,
    /// In the compressed pool; payload is the pool handle, codec says how it is encoded
    /// (an object of exactly PAGE_SIZE bytes is the raw page).
    Stored = 2,
    /// Only on the backing device, at the page's slot.
    OnDisk = 3,
    /// Its data could not be read back; it must fault as SIGBUS until it is discarded.
    Poisoned = 4,
}

impl Kind {
    fn from_bits(b: u64) -> Kind {
        match b & KIND_MASK {
            0 => Kind::Empty,
            1 => Kind::Zero,
            2 => Kind::Stored,
            3 => Kind::OnDisk,
            4 => Kind::Poisoned,
            _ => unreachable!("kind bits are only ever written from a Kind"),
        }
    }
}

/// The decoded state of one page (its entry), without the lock bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageState {
    /// Where the page's data is.
    pub kind: Kind,
    /// Second chance: set at store, cleared by the shrinker's first visit.
    pub referenced: bool,
    /// Index of the compressor (in the zswap instance's registry) for Stored pages.
    pub codec: u8,
    /// Order of the folio this page belongs to.
    pub order: u8,
    /// Eviction counter value when the page was evicted (its shadow and generation).
    pub shadow: u32,
    /// Pool handle (Stored) or fill value (Zero).
    pub payload: u32,
}

impl PageState {
    /// The state of a page that holds nothing: `Kind::Empty`, every field zero.
    pub const EMPTY: PageState = PageState {
        kind: Kind::Empty,
        referenced: false,
        codec: 0,
        order: 0,
        shadow: 0,
        payload: 0,
    };

    fn decode(w: u64) -> PageState {
        PageState {
            kind: Kind::from_bits(w),
            referenced: w & REFERENCED != 0,
            codec: ((w & CODEC_MASK) >> CODEC_SHIFT) as u8,
            order: ((w & ORDER_MASK) >> ORDER_SHIFT) as u8,
            shadow: ((w & SHADOW_MASK) >> SHADOW_SHIFT) as u32,
            payload: (w >> PAYLOAD_SHIFT) as u32,
        }
    }

    /// The word for this state, lock bits clear.
    fn encode(&self) -> u64 {
        debug_assert!(self.codec < 16 && self.order <= MAX_ORDER);
        (self.kind as u64)
            | if self.referenced { REFERENCED } else { 0 }
            | (u64::from(self.codec) << CODEC_SHIFT)
            | (u64::from(self.order) << ORDER_SHIFT)
            | ((u64::from(self.shadow) << SHADOW_SHIFT) & SHADOW_MASK)
            | (u64::from(self.payload) << PAYLOAD_SHIFT)
    }
}

fn order_of(w: u64) -> u8 {
    ((w & ORDER_MASK) >> ORDER_SHIFT) as u8
}

fn head_of(offset: u32, order: u8) -> u32 {
    offset & !((1u32 << order) - 1)
}

/// Hashed wait queues, as the kernel's folio wait table: waiters of many pages share a few
/// queues and re-check their own page when woken.
struct WaitQueues {
    buckets: Box<[(Mutex<()>, Condvar)]>,
}

const WAIT_BUCKETS: usize = 64;

/// Pages a leaf of state words covers: 4096 (32 KiB of words, 16 MiB of pages), so that
/// the leaf table of a 64 GiB space is 96 KiB, and a folio (at most 512 pages, aligned)
/// lies in one leaf.
const WORDS_LEAF: usize = 4096;

impl WaitQueues {
    fn new() -> Self {
        WaitQueues {
            buckets: (0..WAIT_BUCKETS)
                .map(|_| (Mutex::new(()), Condvar::new()))
                .collect(),
        }
    }

    fn bucket(&self, offset: u32) -> &(Mutex<()>, Condvar) {
        // Fibonacci hashing spreads neighbouring folios over the buckets.
        let h = (offset as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58;
        &self.buckets[h as usize % WAIT_BUCKETS]
    }
}

/// The per-page state table of one swap space.
pub struct SwapCache {
    /// One word a page, allocated for the pages that have been locked (sparse.rs): a page
    /// never locked is `Kind::Empty`, unlocked, without a slot, and costs its share of the
    /// leaf table only.
    words: SparseArray<AtomicU64, WORDS_LEAF>,
    /// Disk slots of the pages whose word has HAS_SLOT, changed only by the page's owner.
    slots: Box<[Mutex<HashMap<u32, u32>>]>,
    /// Entries in the slot side map, for the metadata figure without taking every shard.
    slot_entries: AtomicU64,
    waitq: WaitQueues,
}

impl std::fmt::Debug for SwapCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SwapCache")
            .field("nr_pages", &self.words.len())
            .finish()
    }
}

/// Why a page could not be locked without waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Busy {
    /// Head of the folio that someone else owns.
    pub head: u32,
}

impl SwapCache {
    /// A table of `nr_pages` pages, every one `Kind::Empty`, unlocked and without a slot.
    pub fn new(nr_pages: u32) -> Self {
        SwapCache {
            words: SparseArray::new(nr_pages as usize),
            slots: (0..SLOT_SHARDS)
                .map(|_| Mutex::new(HashMap::new()))
                .collect(),
            slot_entries: AtomicU64::new(0),
            waitq: WaitQueues::new(),
        }
    }

    /// The number of pages (offsets) the table covers.
    pub fn nr_pages(&self) -> u32 {
        self.words.len() as u32
    }

    /// Bytes of metadata held now: the state words allocated (8 bytes a page, in leaves of
    /// `WORDS_LEAF` pages) and their table, and the slot side map (counted at 18 bytes an
    /// entry: 8 of key and value, 1 of control, at the map's lowest load factor).
    pub fn metadata_bytes(&self) -> u64 {
        self.words.bytes() + self.slot_entries.load(Ordering::Relaxed) * 18
    }

    /// What a table of `nr_pages` pages holds before a page is locked.
    pub fn table_bytes(nr_pages: u32) -> u64 {
        SparseArray::<AtomicU64, WORDS_LEAF>::table_bytes(nr_pages as usize)
    }

    /// The page's word as it is now; a page whose word was never allocated reads 0 (Empty,
    /// unlocked).
    #[inline]
    fn load(&self, offset: u32) -> u64 {
        self.words
            .get(offset as usize)
            .map_or(0, |w| w.load(Ordering::Acquire))
    }

    /// The page's word, allocated if need be: for the lock, and for changes under it.
    #[inline]
    fn word(&self, offset: u32) -> &AtomicU64 {
        self.words.entry(offset as usize)
    }

    /// The ranges of pages that may be other than Empty: every page outside them is Empty,
    /// unlocked and without a slot. For scans over the whole table.
    pub fn populated(&self) -> impl Iterator<Item = std::ops::Range<u32>> + '_ {
        self.words.populated().map(|r| r.start as u32..r.end as u32)
    }

    /// The first page at or after `offset` in `populated`, if any.
    pub fn next_populated(&self, offset: u32) -> Option<u32> {
        self.words.next_populated(offset as usize).map(|o| o as u32)
    }

    fn slot_shard(&self, offset: u32) -> &Mutex<HashMap<u32, u32>> {
        &self.slots[offset as usize % SLOT_SHARDS]
    }

    /// The page's state as it is now, without locking: for scans and statistics. Anything
    /// acted on must be re-checked under the lock.
    pub fn peek(&self, offset: u32) -> PageState {
        PageState::decode(self.load(offset))
    }

    /// Whether some owner holds the folio that contains `offset` right now.
    pub fn is_locked(&self, offset: u32) -> bool {
        let w = self.load(offset);
        let head = head_of(offset, order_of(w));
        self.load(head) & LOCKED != 0
    }

    /// Take the lock of the folio that holds `offset` if nobody owns it; otherwise say whose
    /// folio is busy.
    pub fn try_lock_page(&self, offset: u32) -> Result<FolioLock<'_>, Busy> {
        loop {
            match self.try_lock_once(offset) {
                Attempt::Locked(l) => return Ok(l),
                Attempt::Busy(head, _) => return Err(Busy { head }),
                Attempt::Changed => continue,
            }
        }
    }

    /// Lock the folio that holds `offset`, waiting for its owner if there is one.
    pub fn lock_page(&self, offset: u32) -> FolioLock<'_> {
        lock_order::will_wait(&lock_order::FOLIO);
        self.lock_page_in_order(offset)
    }

    /// `lock_page` where the order is checked already: the pieces of one folio, taken in
    /// ascending order (`lock_folio`), never deadlock with each other.
    fn lock_page_in_order(&self, offset: u32) -> FolioLock<'_> {
        loop {
            match self.try_lock_once(offset) {
                Attempt::Locked(l) => return l,
                Attempt::Busy(head, seen) => self.wait(head, seen),
                Attempt::Changed => continue,
            }
        }
    }

    fn try_lock_once(&self, offset: u32) -> Attempt<'_> {
        let w = self.load(offset);
        let order = order_of(w);
        let head = head_of(offset, order);
        let hw = self.load(head);
        if order_of(hw) != order {
            return Attempt::Changed;
        }
        if hw & LOCKED != 0 {
            return Attempt::Busy(head, hw);
        }
        if self
            .word(head)
            .compare_exchange(hw, hw | LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return Attempt::Changed;
        }
        let lock = FolioLock::taken(self, head, order);
        // Shape changes need the head's lock (rule 3), so if `offset` still carries `order`
        // it is in the folio we now hold. If not, it changed between the two loads above.
        if order_of(self.load(offset)) != order {
            drop(lock);
            return Attempt::Changed;
        }
        Attempt::Locked(lock)
    }

    /// Sleep until the word of `head` changes from `seen` (its owner unlocks it).
    fn wait(&self, head: u32, seen: u64) {
        let (mutex, cond) = self.waitq.bucket(head);
        let mut guard = mutex.lock();
        let word = self.word(head);
        let cur = word.load(Ordering::Acquire);
        if cur != seen && cur != seen | WAITERS {
            return; // it moved on: look again
        }
        if cur & WAITERS == 0
            && word
                .compare_exchange(cur, cur | WAITERS, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        // The unlocker takes this bucket's mutex before notifying, and we hold it from
        // setting WAITERS until we sleep, so the wake-up cannot slip between the two.
        cond.wait(&mut guard);
    }

    fn wake(&self, offset: u32) {
        let (mutex, cond) = self.waitq.bucket(offset);
        let _g = mutex.lock();
        cond.notify_all();
    }

    fn unlock(&self, head: u32) {
        let old = self
            .word(head)
            .fetch_and(!(LOCKED | WAITERS), Ordering::Release);
        debug_assert!(old & LOCKED != 0, "unlocking a folio nobody held");
        if old & WAITERS != 0 {
            self.wake(head);
        }
    }

    /// The end of the folio `[start, start + 2^order)`, which must be aligned and inside the
    /// table.
    fn folio_end(&self, start: u32, order: u8) -> u32 {
        assert!(order <= MAX_ORDER, "folio order {order} above {MAX_ORDER}");
        let nr = 1u32 << order;
        assert!(
            start.is_multiple_of(nr) && start as u64 + nr as u64 <= self.words.len() as u64,
            "folio {start}+{nr} is not aligned or not inside the {} pages",
            self.words.len()
        );
        start + nr
    }

    /// Lock exactly the folio `[start, start + 2^order)`, waiting for owners as needed, and
    /// make it one folio: pieces of it that were locked separately are merged under the
    /// head's lock; a larger folio around it is split into single pages first.
    pub fn lock_folio(&self, start: u32, order: u8) -> FolioLock<'_> {
        let end = self.folio_end(start, order);
        lock_order::will_wait(&lock_order::FOLIO);
        let mut pieces: Vec<FolioLock<'_>> = Vec::new();
        let mut off = start;
        while off < end {
            let lock = self.lock_page_in_order(off);
            if lock.start == start && lock.order == order {
                return lock; // already exactly this folio
            }
            if lock.start < start || lock.end() > end {
                // A larger folio holds the range: split it, keep our pages, free the rest.
                for piece in lock.split() {
                    if piece.start >= start && piece.start < end {
                        pieces.push(piece);
                    }
                }
                off = end.min(pieces.last().map_or(end, |p| p.end()));
                continue;
            }
            off = lock.end();
            pieces.push(lock);
        }
        self.merge(pieces, start, order)
    }

    /// `lock_folio` without waiting: None if an owner holds any piece of the range, or a
    /// larger folio holds it (left as it is). For a thread holding other folios' locks.
    pub fn try_lock_folio(&self, start: u32, order: u8) -> Option<FolioLock<'_>> {
        let end = self.folio_end(start, order);
        let mut pieces: Vec<FolioLock<'_>> = Vec::new();
        let mut off = start;
        while off < end {
            let lock = self.try_lock_page(off).ok()?;
            if lock.start == start && lock.order == order {
                return Some(lock);
            }
            if lock.start < start || lock.end() > end {
                return None;
            }
            off = lock.end();
            pieces.push(lock);
        }
        Some(self.merge(pieces, start, order))
    }

    /// Turn the held pieces covering `[start, start + 2^order)` into one folio.
    fn merge<'a>(&'a self, pieces: Vec<FolioLock<'a>>, start: u32, order: u8) -> FolioLock<'a> {
        let nr = 1u32 << order;
        debug_assert_eq!(pieces.iter().map(|p| p.nr_pages()).sum::<u32>(), nr);
        // From here the pages' shapes are ours to rewrite; the pieces' locks become the one
        // lock of the head, so they must not unlock on drop.
        let mut woken = Vec::new();
        for p in pieces {
            if p.start != start {
                woken.push(p.start);
            }
            std::mem::forget(p);
            lock_order::released(&lock_order::FOLIO);
        }
        for off in start..start + nr {
            let word = self.word(off);
            let mut had_waiters = false;
            word.fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                had_waiters = w & WAITERS != 0;
                let keep = if off == start {
                    w & (LOCKED | WAITERS)
                } else {
                    0
                };
                Some(
                    (w & !(ORDER_MASK | LOCKED | WAITERS))
                        | keep
                        | (u64::from(order) << ORDER_SHIFT),
                )
            })
            .expect("closure always returns Some");
            if off != start && had_waiters {
                self.wake(off);
            }
        }
        for off in woken {
            self.wake(off); // waiters of a former head look again and find the new one
        }
        FolioLock::taken(self, start, order)
    }

    /// Clear the second-chance bit of an unlocked page if its word is still `seen`.
    pub(crate) fn clear_referenced(&self, offset: u32) -> bool {
        let word = self.word(offset);
        let w = word.load(Ordering::Acquire);
        if w & (LOCKED | REFERENCED) != REFERENCED {
            return false;
        }
        word.compare_exchange(w, w & !REFERENCED, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }
}

enum Attempt<'a> {
    Locked(FolioLock<'a>),
    Busy(u32, u64),
    Changed,
}

/// Ownership of the folio `[start, start + 2^order)`: while it lives, nobody else reads or
/// changes these pages' entries. Dropping it releases the folio and wakes its waiters.
#[must_use = "dropping the lock releases the folio at once"]
pub struct FolioLock<'a> {
    cache: &'a SwapCache,
    start: u32,
    order: u8,
}

impl std::fmt::Debug for FolioLock<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FolioLock({}+{})", self.start, self.nr_pages())
    }
}

impl<'a> FolioLock<'a> {
    /// The lock of `[start, start + 2^order)`, just taken (its word's `LOCKED` bit set by
    /// this thread), counted in the lock order.
    fn taken(cache: &'a SwapCache, start: u32, order: u8) -> Self {
        lock_order::taken(&lock_order::FOLIO);
        FolioLock {
            cache,
            start,
            order,
        }
    }

    /// Offset of the folio's head page.
    pub fn start(&self) -> u32 {
        self.start
    }
    /// The folio's order: it spans `1 << order` pages.
    pub fn order(&self) -> u8 {
        self.order
    }
    /// The number of pages in the folio.
    pub fn nr_pages(&self) -> u32 {
        1 << self.order
    }
    /// The offset one past the folio's last page.
    pub fn end(&self) -> u32 {
        self.start + self.nr_pages()
    }
    /// The offsets of the folio's pages.
    pub fn offsets(&self) -> std::ops::Range<u32> {
        self.start..self.end()
    }
    pub(crate) fn cache(&self) -> &'a SwapCache {
        self.cache
    }

    fn check(&self, offset: u32) -> u32 {
        assert!(
            (self.start..self.end()).contains(&offset),
            "page {offset} is not in {self:?}"
        );
        offset
    }

    /// The state of one page of the folio.
    pub fn state(&self, offset: u32) -> PageState {
        PageState::decode(self.cache.load(self.check(offset)))
    }

    /// Set the entry of one page of the folio. The folio's order and the lock bits are kept.
    pub fn set_state(&self, offset: u32, state: PageState) {
        let order = self.order;
        let new = PageState { order, ..state }.encode();
        self.cache
            .word(self.check(offset))
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                Some(new | (w & (LOCKED | WAITERS | HAS_SLOT)))
            })
            .expect("closure always returns Some");
    }

    /// The page's copy on the backing device, if it has one.
    pub fn slot(&self, offset: u32) -> Option<SwapSlot> {
        let w = self.cache.load(self.check(offset));
        if w & HAS_SLOT == 0 {
            return None;
        }
        let slot = self.cache.slot_shard(offset).lock().get(&offset).copied();
        Some(SwapSlot(slot.expect("HAS_SLOT pages have a slot")))
    }

    /// Record (`Some`) or forget (`None`) the page's copy on the backing device. Only the slot
    /// map and `HAS_SLOT` change; freeing the old slot is the caller's job.
    pub fn set_slot(&self, offset: u32, slot: Option<SwapSlot>) {
        let word = self.cache.word(self.check(offset));
        let mut shard = self.cache.slot_shard(offset).lock();
        match slot {
            Some(s) => {
                if shard.insert(offset, s.0).is_none() {
                    self.cache.slot_entries.fetch_add(1, Ordering::Relaxed);
                }
                word.fetch_or(HAS_SLOT, Ordering::AcqRel);
            }
            None => {
                if shard.remove(&offset).is_some() {
                    self.cache.slot_entries.fetch_sub(1, Ordering::Relaxed);
                }
                word.fetch_and(!HAS_SLOT, Ordering::AcqRel);
            }
        }
    }

    /// Break the folio into single pages, each locked on its own.
    pub fn split(self) -> Vec<FolioLock<'a>> {
        let (cache, start, nr) = (self.cache, self.start, self.nr_pages());
        std::mem::forget(self);
        lock_order::released(&lock_order::FOLIO);
        let mut had_waiters = false;
        for off in start..start + nr {
            cache
                .word(off)
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                    if off == start {
                        had_waiters = w & WAITERS != 0;
                    }
                    Some((w & !(ORDER_MASK | WAITERS)) | LOCKED)
                })
                .expect("closure always returns Some");
        }
        if had_waiters {
            cache.wake(start);
        }
        (start..start + nr)
            .map(|off| FolioLock::taken(cache, off, 0))
            .collect()
    }
}

impl Drop for FolioLock<'_> {
    fn drop(&mut self) {
        self.cache.unlock(self.start);
        lock_order::released(&lock_order::FOLIO);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    fn stored(payload: u32) -> PageState {
        PageState {
            kind: Kind::Stored,
            referenced: true,
            codec: 3,
            order: 0,
            shadow: 12345,
            payload,
        }
    }

    #[test]
    fn state_round_trips_through_the_word() {
        let c = SwapCache::new(8);
        let l = c.lock_page(5);
        l.set_state(5, stored(0xdead_beef));
        assert_eq!(l.state(5), stored(0xdead_beef));
        drop(l);
        assert_eq!(c.peek(5), stored(0xdead_beef));
        assert!(!c.is_locked(5));
    }

    #[test]
    fn a_locked_page_is_busy_for_others() {
        let c = SwapCache::new(8);
        let l = c.lock_page(3);
        assert_eq!(c.try_lock_page(3).unwrap_err(), Busy { head: 3 });
        assert!(c.try_lock_page(4).is_ok());
        drop(l);
        assert!(c.try_lock_page(3).is_ok());
    }

    #[test]
    fn a_large_folio_has_one_lock() {
        let c = SwapCache::new(64);
        let l = c.lock_folio(16, 4);
        assert_eq!((l.start(), l.nr_pages()), (16, 16));
        for off in 16..32 {
            assert_eq!(c.try_lock_page(off).unwrap_err(), Busy { head: 16 });
        }
        assert!(c.try_lock_page(15).is_ok());
        assert!(c.try_lock_page(32).is_ok());
        drop(l);
        // Whole while nobody splits it: any page leads to the same folio.
        let l = c.lock_page(21);
        assert_eq!((l.start(), l.order()), (16, 4));
    }

    #[test]
    fn locking_a_smaller_folio_inside_a_large_one_splits_it() {
        let c = SwapCache::new(64);
        drop(c.lock_folio(0, 4));
        let l = c.lock_folio(4, 2);
        assert_eq!((l.start(), l.order()), (4, 2));
        // The rest of the old folio is free, single pages.
        let other = c.try_lock_page(0).unwrap();
        assert_eq!(other.order(), 0);
        assert!(c.try_lock_page(8).is_ok());
        assert_eq!(c.try_lock_page(6).unwrap_err(), Busy { head: 4 });
    }

    #[test]
    fn try_lock_folio_merges_free_pieces_and_leaves_a_held_one() {
        let c = SwapCache::new(64);
        let held = c.lock_page(21);
        assert!(c.try_lock_folio(16, 3).is_none(), "page 21 is held");
        // What it tried is free again, in its old shape.
        assert_eq!(c.try_lock_page(16).unwrap().order(), 0);
        drop(held);
        let l = c.try_lock_folio(16, 3).unwrap();
        assert_eq!((l.start(), l.order()), (16, 3));
        assert_eq!(c.try_lock_page(23).unwrap_err(), Busy { head: 16 });
        drop(l);
        // A larger folio around the range is left whole.
        drop(c.lock_folio(32, 4));
        assert!(c.try_lock_folio(36, 2).is_none());
        assert_eq!(c.try_lock_page(36).unwrap().order(), 4);
    }

    #[test]
    fn split_keeps_every_page_locked() {
        let c = SwapCache::new(16);
        let l = c.lock_folio(8, 3);
        let pages = l.split();
        assert_eq!(pages.len(), 8);
        for off in 8..16 {
            assert!(c.try_lock_page(off).is_err());
        }
        drop(pages);
        for off in 8..16 {
            assert_eq!(c.try_lock_page(off).unwrap().order(), 0);
        }
    }

    #[test]
    fn waiters_sleep_until_the_owner_unlocks() {
        let c = Arc::new(SwapCache::new(16));
        let l = c.lock_page(7);
        let woke = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (c, woke) = (c.clone(), woke.clone());
                std::thread::spawn(move || {
                    let l = c.lock_page(7);
                    woke.fetch_add(1, Ordering::SeqCst);
                    drop(l);
                })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(woke.load(Ordering::SeqCst), 0, "nobody gets a locked page");
        drop(l);
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(woke.load(Ordering::SeqCst), 4);
    }

    #[test]
    fn waiters_of_a_page_merged_into_a_folio_find_the_new_head() {
        let c = Arc::new(SwapCache::new(32));
        let tail = c.lock_page(9);
        let c2 = c.clone();
        let waiter = std::thread::spawn(move || {
            let l = c2.lock_page(9);
            (l.start(), l.order())
        });
        std::thread::sleep(std::time::Duration::from_millis(20));
        // Lock the rest of 8..16 (nobody holds it: try-locks, as one folio lock is waited
        // for at a time) and merge it with the piece we hold.
        let mut pieces = vec![c.try_lock_page(8).unwrap(), tail];
        for off in 10..16 {
            pieces.push(c.try_lock_page(off).unwrap());
        }
        let folio = c.merge(pieces, 8, 3);
        std::thread::sleep(std::time::Duration::from_millis(20));
        drop(folio);
        assert_eq!(waiter.join().unwrap(), (8, 3));
    }

    /// Many threads lock random folios and pages; a per-page owner count proves that nobody
    /// ever shares a page, and every thread finishes (no lost wake-ups, no deadlock).
    #[test]
    fn concurrent_locking_is_exclusive() {
        const PAGES: u32 = 256;
        let c = Arc::new(SwapCache::new(PAGES));
        let owners: Arc<Vec<AtomicUsize>> =
            Arc::new((0..PAGES).map(|_| AtomicUsize::new(0)).collect());
        let threads: Vec<_> = (0..8u64)
            .map(|t| {
                let (c, owners) = (c.clone(), owners.clone());
                std::thread::spawn(move || {
                    let mut x = t.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                    for _ in 0..3000 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let order = (x % 5) as u8;
                        let start = head_of((x >> 8) as u32 % PAGES, order);
                        let l = if x % 3 == 0 {
                            c.lock_page(start)
                        } else {
                            c.lock_folio(start, order)
                        };
                        for off in l.offsets() {
                            assert_eq!(owners[off as usize].fetch_add(1, Ordering::SeqCst), 0);
                        }
                        std::hint::spin_loop();
                        for off in l.offsets() {
                            owners[off as usize].fetch_sub(1, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
