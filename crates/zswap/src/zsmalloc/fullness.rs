//! Fullness groups: each class keeps its non-full class spans in four lists by how full they
//! are (<25%, <50%, <75%, <100%), and allocation takes a slot from the fullest, as the kernel's
//! zsmalloc does, so that sparse spans drain and can be freed. Full spans are in no list (the
//! allocator never looks at them; compaction finds them in the span table), and empty
//! spans do not exist: a class span is freed with its last object.

use super::handle::NIL;
use super::span::SpanTable;

pub(crate) const NR_GROUPS: usize = 4;
/// A full class span: in no list.
pub(crate) const GROUP_FULL: u8 = NR_GROUPS as u8;
/// Not in any fullness list (packed spans, spans being made).
pub(crate) const GROUP_NONE: u8 = u8::MAX;

/// The group of a class span with `live` of `objs` slots in use.
#[inline]
pub(crate) fn group_of(live: u32, objs: u32) -> u8 {
    if live >= objs {
        GROUP_FULL
    } else {
        (live as u64 * NR_GROUPS as u64 / objs as u64) as u8
    }
}

/// The heads of one class's fullness lists.
#[derive(Debug, Clone)]
pub(crate) struct FullnessLists {
    heads: [u32; NR_GROUPS],
}

impl Default for FullnessLists {
    fn default() -> Self {
        FullnessLists {
            heads: [NIL; NR_GROUPS],
        }
    }
}

impl FullnessLists {
    /// The fullest span with a free slot.
    #[inline]
    pub(crate) fn fullest(&self) -> Option<u32> {
        self.heads.iter().rev().copied().find(|&h| h != NIL)
    }

    /// Move span `idx` to the group its fill says (`objs` slots per span).
    #[inline]
    pub(crate) fn update(&mut self, spans: &mut SpanTable, idx: u32, objs: u32) {
        let group = group_of(spans[idx].live, objs);
        if group != spans[idx].group {
            self.unlink(spans, idx);
            if group != GROUP_FULL {
                self.link(spans, idx, group);
            }
            spans[idx].group = group;
        }
    }

    fn link(&mut self, spans: &mut SpanTable, idx: u32, group: u8) {
        let head = self.heads[group as usize];
        spans[idx].prev = NIL;
        spans[idx].next = head;
        if head != NIL {
            spans[head].prev = idx;
        }
        self.heads[group as usize] = idx;
    }

    /// Take span `idx` out of whatever list it is in.
    pub(crate) fn unlink(&mut self, spans: &mut SpanTable, idx: u32) {
        let group = spans[idx].group;
        if group as usize >= NR_GROUPS {
            return;
        }
        let (prev, next) = (spans[idx].prev, spans[idx].next);
        if prev != NIL {
            spans[prev].next = next;
        } else {
            self.heads[group as usize] = next;
        }
        if next != NIL {
            spans[next].prev = prev;
        }
        spans[idx].prev = NIL;
        spans[idx].next = NIL;
        spans[idx].group = GROUP_NONE;
    }

    /// Spans in group `g`, for the consistency check.
    pub(crate) fn members(&self, spans: &SpanTable, g: usize) -> Vec<u32> {
        let mut out = Vec::new();
        let mut i = self.heads[g];
        while i != NIL && out.len() <= spans.len() {
            out.push(i);
            i = spans[i].next;
        }
        out
    }
}
