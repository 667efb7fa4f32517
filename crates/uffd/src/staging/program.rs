//! Staging in a program served from outside (`Staging::in_program`): a folio moves out into a
//! slot in the program on its parasite, its pages are copied here at once and the slot is
//! freed; moving back is a `UFFDIO_COPY` of the copy, which works from outside.

use std::sync::Arc;

use super::{StageError, StagedFolio};
use crate::error::UffdError;
use crate::raw_region::page_size;
use crate::remote::RemoteProcess;
use crate::userfaultfd::{CopyMode, Filled, Uffd};

/// A staged folio's pages, copied out of its slot in the program.
#[derive(Debug)]
pub(super) struct Copied {
    pub(super) bytes: Box<[u8]>,
    /// Which pages the slot held (a move stopped part way leaves holes).
    pub(super) present: Box<[bool]>,
}

/// `Staging::stage` for a program's staging area: `folio` owns a free slot.
pub(super) fn stage(
    process: &Arc<RemoteProcess>,
    mut folio: StagedFolio,
    src: usize,
) -> Result<StagedFolio, StageError> {
    let ps = page_size();
    let len = folio.len;
    let slot = folio.staging.slot_addr(folio.slot);
    let moved = process.move_out(slot, src, len, false);
    let mut copy = Copied {
        bytes: vec![0u8; len].into_boxed_slice(),
        present: vec![false; len / ps].into_boxed_slice(),
    };
    // What the slot holds is what moved, whatever the count says (a slot is empty when it
    // is taken, `Staging::stage`). All of it in one read after a complete move; else a page
    // at a time, an empty page failing its read at once (nobody serves the staging area).
    let whole = matches!(moved, Ok(n) if n == len) && process.read(slot, &mut copy.bytes).is_ok();
    if whole {
        copy.present.fill(true);
    } else {
        for (i, page) in copy.bytes.chunks_mut(ps).enumerate() {
            copy.present[i] = process.read(slot + i * ps, page).is_ok();
        }
    }
    // The pages are here now: the slot goes to the next batched discard.
    folio.staging.release(folio.slot, true);
    folio.copy = Some(copy);
    match moved {
        Ok(_) if whole => Ok(folio),
        Ok(n) => Err(StageError::Partial {
            folio: Box::new(folio),
            source: UffdError::Os {
                op: "reading a staging slot in the program",
                source: std::io::Error::other(format!("{n} bytes moved, not all of them read")),
            },
        }),
        Err(source) => Err(StageError::Partial {
            folio: Box::new(folio),
            source,
        }),
    }
}

/// `StagedFolio::move_back` for a copy: each run of pages the slot held, copied into
/// `dst` without waking, from `folio.moved_back` on.
pub(super) fn move_back(
    folio: &mut StagedFolio,
    dst_uffd: &Uffd,
    dst: usize,
) -> Result<Filled, UffdError> {
    let ps = page_size();
    let copy = folio.copy.as_ref().expect("a copied folio");
    let mode = CopyMode {
        dont_wake: true,
        write_protect: false,
    };
    let mut page_at_a_time = false;
    while folio.moved_back < folio.len {
        let from = folio.moved_back;
        let first = from / ps;
        if !copy.present[first] {
            folio.moved_back += ps; // a hole: nothing to bring back
            continue;
        }
        let run = match page_at_a_time {
            true => 1,
            false => copy.present[first..].iter().take_while(|&&p| p).count(),
        };
        let to = from + run * ps;
        match dst_uffd.copy(dst + from, &copy.bytes[from..to], mode) {
            Ok(Filled::All) => folio.moved_back = to,
            Ok(Filled::PageExists { done }) => {
                // Present on both sides: the caller's to judge (as for a move).
                folio.moved_back = from + done;
                return Ok(Filled::PageExists {
                    done: folio.moved_back,
                });
            }
            // The destination spans mappings of different protections: a page at a time.
            Err(UffdError::RangeGone { .. }) if run > 1 => page_at_a_time = true,
            Err(UffdError::MappingChanging { op, done }) => {
                folio.moved_back = from + done;
                return Err(UffdError::MappingChanging {
                    op,
                    done: folio.moved_back,
                });
            }
            Err(e) => return Err(e),
        }
    }
    folio.len = 0;
    folio.moved_back = 0;
    Ok(Filled::All)
}

/// `StagedFolio::move_back_page` for a copy.
pub(super) fn move_back_page(
    folio: &StagedFolio,
    dst_uffd: &Uffd,
    dst: usize,
    index: usize,
) -> Result<Filled, UffdError> {
    let ps = page_size();
    let copy = folio.copy.as_ref().expect("a copied folio");
    if !copy.present.get(index).copied().unwrap_or(false) {
        return Ok(Filled::All); // that page never moved in
    }
    let page = &copy.bytes[index * ps..(index + 1) * ps];
    let mode = CopyMode {
        dont_wake: true,
        write_protect: false,
    };
    dst_uffd.copy(dst, page, mode)
}
