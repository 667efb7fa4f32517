//! The reservation a static program's mappings are placed in (agent.rs): which parts of it
//! the program has mapped and which are free, and the protection of each mapped part, as the
//! kernel keeps a process's address space. A mapping is placed first fit; an unmap frees
//! exactly what it names, a part of a mapping as well as several, and freeing free space is
//! nothing, as `munmap` of unmapped memory is.

use std::collections::BTreeMap;
use std::ops::Range;

/// `PROT_READ | PROT_WRITE`: the protection of every mapped part not in `protected`.
pub const READ_WRITE: i32 = libc::PROT_READ | libc::PROT_WRITE;

/// The protection of a part whose change failed part way: not known (no range with such a
/// part in it has one protection).
pub const UNKNOWN_PROTECTION: i32 = -1;

/// The free parts of a reservation, and the protections of the mapped ones.
#[derive(Debug)]
pub struct AddressSpace {
    range: Range<usize>,
    /// Free ranges, start to end, neither overlapping nor touching.
    free: BTreeMap<usize, usize>,
    /// Mapped ranges under another protection than read-write: start to (end, protection),
    /// not overlapping.
    protected: BTreeMap<usize, (usize, i32)>,
}

impl AddressSpace {
    /// `range`, all of it free.
    pub fn new(range: Range<usize>) -> Self {
        let free = BTreeMap::from([(range.start, range.end)]);
        AddressSpace {
            range,
            free,
            protected: BTreeMap::new(),
        }
    }

    /// Whether `start..start + len` lies inside the reservation.
    pub fn contains(&self, start: usize, len: usize) -> bool {
        start >= self.range.start && start.checked_add(len).is_some_and(|e| e <= self.range.end)
    }

    /// Whether `start..start + len` overlaps the reservation.
    pub fn overlaps(&self, start: usize, len: usize) -> bool {
        start < self.range.end && start.saturating_add(len) > self.range.start
    }

    /// Whether all of `start..start + len` is free.
    pub fn is_free(&self, start: usize, len: usize) -> bool {
        self.free
            .range(..=start)
            .next_back()
            .is_some_and(|(_, &end)| start + len <= end)
    }

    /// Whether all of `start..start + len` is mapped (no part of it free).
    pub fn is_mapped(&self, start: usize, len: usize) -> bool {
        let end = start + len;
        !self
            .free
            .range(..end)
            .next_back()
            .is_some_and(|(&s, &e)| e > start && s < end)
    }

    /// The first free place of `len` bytes, taken; None if there is none.
    pub fn place(&mut self, len: usize) -> Option<usize> {
        let (&start, _) = self.free.iter().find(|(&s, &e)| e - s >= len)?;
        self.take(start, len);
        Some(start)
    }

    /// Mark `start..start + len` mapped, whatever of it was free.
    pub fn take(&mut self, start: usize, len: usize) {
        let end = start + len;
        let overlapping: Vec<(usize, usize)> = self
            .free
            .range(..end)
            .rev()
            .take_while(|(_, &e)| e > start)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in overlapping {
            self.free.remove(&s);
            if s < start {
                self.free.insert(s, start);
            }
            if e > end {
                self.free.insert(end, e);
            }
        }
    }

    /// The protection of `start..start + len`, if it is the same over all of it (a range
    /// the program mapped with one protection, or changed with one `mprotect`).
    pub fn protection(&self, start: usize, len: usize) -> Option<i32> {
        let end = start + len;
        let mut at = start;
        let mut prot = None;
        let before = self
            .protected
            .range(..start)
            .next_back()
            .filter(|(_, &(e, _))| e > start);
        for (&s, &(e, p)) in before.into_iter().chain(self.protected.range(start..end)) {
            // A read-write gap before this part, a part of another protection, or of none known.
            if s > at || prot.is_some_and(|q| q != p) || p == UNKNOWN_PROTECTION {
                return None;
            }
            prot = Some(p);
            at = e;
        }
        match prot {
            None => Some(READ_WRITE),
            Some(p) if at >= end => Some(p),
            Some(_) => None,
        }
    }

    /// Whether any page of `start..start + len` is under another protection than read-write,
    /// or one not known.
    pub fn any_protected(&self, start: usize, len: usize) -> bool {
        self.protected
            .range(..start + len)
            .next_back()
            .is_some_and(|(_, &(e, _))| e > start)
    }

    /// Record `prot` as the protection of `start..start + len`.
    pub fn set_protection(&mut self, start: usize, len: usize, prot: i32) {
        let end = start + len;
        let overlapping: Vec<(usize, (usize, i32))> = self
            .protected
            .range(..end)
            .rev()
            .take_while(|(_, &(e, _))| e > start)
            .map(|(&s, &v)| (s, v))
            .collect();
        for (s, (e, p)) in overlapping {
            self.protected.remove(&s);
            if s < start {
                self.protected.insert(s, (start, p));
            }
            if e > end {
                self.protected.insert(end, (e, p));
            }
        }
        if prot != READ_WRITE {
            self.protected.insert(start, (end, prot));
        }
    }

    /// Mark `start..start + len` free (clamped to the reservation), joined to the free space
    /// around it; free space has no protection.
    pub fn free(&mut self, start: usize, len: usize) {
        self.set_protection(start, len, READ_WRITE);
        let mut start = start.max(self.range.start);
        let mut end = start.saturating_add(len).min(self.range.end);
        if start >= end {
            return;
        }
        let touching: Vec<(usize, usize)> = self
            .free
            .range(..=end)
            .rev()
            .take_while(|(_, &e)| e >= start)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in touching {
            self.free.remove(&s);
            start = start.min(s);
            end = end.max(e);
        }
        self.free.insert(start, end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: usize = 4096;

    #[test]
    fn mappings_are_placed_first_fit_and_freed_in_any_part() {
        let mut space = AddressSpace::new(P..101 * P);
        let a = space.place(10 * P).unwrap();
        let b = space.place(20 * P).unwrap();
        assert_eq!((a, b), (P, 11 * P));
        assert!(space.is_free(31 * P, 70 * P) && !space.is_free(30 * P, P));
        // An unmap of the middle of a mapping frees that part only.
        space.free(a + 2 * P, 3 * P);
        assert!(space.is_free(a + 2 * P, 3 * P) && !space.is_free(a + P, 2 * P));
        // First fit: the hole takes what fits in it.
        assert_eq!(space.place(3 * P), Some(a + 2 * P));
        assert_eq!(space.place(4 * P), Some(31 * P));
        // Freeing free space, and beyond the reservation, is nothing.
        space.free(0, 200 * P);
        assert_eq!(
            space.free.len(),
            1,
            "one free range again: {:?}",
            space.free
        );
        assert!(space.is_free(P, 100 * P));
        assert_eq!(space.place(100 * P), Some(P));
        assert_eq!(space.place(P), None);
    }

    /// Protections are kept per part, split by a change of part of a range, and gone with
    /// what is freed; a range of mixed protections has none.
    #[test]
    fn protections_are_kept_per_part() {
        let mut space = AddressSpace::new(0..100 * P);
        space.take(0, 50 * P);
        assert_eq!(space.protection(0, 50 * P), Some(READ_WRITE));
        space.set_protection(10 * P, 20 * P, libc::PROT_NONE);
        assert_eq!(space.protection(10 * P, 20 * P), Some(libc::PROT_NONE));
        assert_eq!(space.protection(12 * P, P), Some(libc::PROT_NONE));
        assert_eq!(space.protection(9 * P, 2 * P), None);
        assert_eq!(space.protection(29 * P, 2 * P), None);
        // The middle made read-only: three parts, two protections.
        space.set_protection(15 * P, 5 * P, libc::PROT_READ);
        assert_eq!(space.protection(15 * P, 5 * P), Some(libc::PROT_READ));
        assert_eq!(space.protection(10 * P, 5 * P), Some(libc::PROT_NONE));
        assert_eq!(space.protection(20 * P, 10 * P), Some(libc::PROT_NONE));
        assert_eq!(space.protection(10 * P, 20 * P), None);
        // Two neighbours of one protection read as one.
        space.set_protection(15 * P, 5 * P, libc::PROT_NONE);
        assert_eq!(space.protection(10 * P, 20 * P), Some(libc::PROT_NONE));
        // Freed: read-write when mapped again.
        space.free(0, 25 * P);
        space.take(0, 25 * P);
        assert_eq!(space.protection(0, 25 * P), Some(READ_WRITE));
        assert_eq!(space.protection(25 * P, 5 * P), Some(libc::PROT_NONE));
        assert!(space.any_protected(24 * P, 2 * P) && !space.any_protected(0, 25 * P));
        // Not known: no protection for a range with it, and protected.
        space.set_protection(40 * P, P, UNKNOWN_PROTECTION);
        assert_eq!(space.protection(40 * P, P), None);
        assert!(space.any_protected(39 * P, 2 * P) && !space.any_protected(41 * P, P));
        // A change over two parts and the gap between them.
        space.set_protection(27 * P, 5 * P, libc::PROT_READ);
        assert_eq!(space.protection(25 * P, 2 * P), Some(libc::PROT_NONE));
        assert_eq!(space.protection(27 * P, 5 * P), Some(libc::PROT_READ));
        assert_eq!(space.protection(32 * P, P), Some(READ_WRITE));
    }

    #[test]
    fn a_fixed_mapping_takes_what_it_covers() {
        let mut space = AddressSpace::new(0..100 * P);
        space.take(10 * P, 10 * P);
        space.take(15 * P, 10 * P);
        assert!(!space.is_free(10 * P, P) && !space.is_free(24 * P, P));
        assert!(space.is_free(25 * P, 75 * P) && space.is_free(0, 10 * P));
        assert!(space.is_mapped(10 * P, 15 * P) && space.is_mapped(12 * P, P));
        assert!(!space.is_mapped(9 * P, 2 * P) && !space.is_mapped(24 * P, 2 * P));
        assert!(space.contains(0, 100 * P) && !space.contains(P, 100 * P));
        assert!(space.overlaps(99 * P, 2 * P) && !space.overlaps(100 * P, P));
    }
}
