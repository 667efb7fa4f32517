//! Staging in a program served from outside (`Staging::in_program`): a folio moves out into a
//! slot in the program on its parasite, its pages are copied here at once and the slot is
//! freed; moving back is a `UFFDIO_COPY` of the copy, which works from outside.

use std::sync::Arc;

use super::{StageError, StagedFolio};
use crate::error::UffdError;
use crate::page_tables::PageTables;
use crate::process::ProcessMemory;
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

/// The program's staging area, as `Staging` holds it: the program, and its memory open for
/// reading (`/proc/PID/mem`: the right to read it is checked once, when it is opened, so a
/// program that makes itself undumpable later is read all the same).
#[derive(Debug)]
pub(super) struct ProgramArea {
    pub(super) process: Arc<RemoteProcess>,
    pub(super) memory: ProcessMemory,
    /// Its page tables: whether a page that cannot be read is there.
    pub(super) tables: PageTables,
    pub(super) range: std::ops::Range<usize>,
}

/// `Staging::stage` for a program's staging area: `folio` owns a free slot.
pub(super) fn stage(
    area: &ProgramArea,
    mut folio: StagedFolio,
    src: usize,
) -> Result<StagedFolio, StageError> {
    let ps = page_size();
    let len = folio.len;
    let slot = folio.staging.slot_addr(folio.slot);
    let moved = area.process.move_out(slot, src, len, false);
    let mut copy = Copied {
        bytes: vec![0u8; len].into_boxed_slice(),
        present: vec![false; len / ps].into_boxed_slice(),
    };
    // What the slot holds is what moved, whatever the count says (a slot is empty when it
    // is taken, `Staging::stage`). All of it in one read after a complete move; else a page
    // at a time: an empty page fails its read at once (`EIO`: nobody serves the staging
    // area). A page there that cannot be read otherwise is not let go of: the slot is kept.
    let read =
        |at: usize, buf: &mut [u8]| matches!(area.memory.read(at, buf), Ok(n) if n == buf.len());
    let whole = matches!(moved, Ok(n) if n == len) && read(slot, &mut copy.bytes);
    let mut unreadable = false;
    if whole {
        copy.present.fill(true);
    } else {
        for (i, page) in copy.bytes.chunks_mut(ps).enumerate() {
            copy.present[i] = read(slot + i * ps, page);
            unreadable |=
                !copy.present[i] && area.tables.in_mapping(slot + i * ps).unwrap_or(false);
        }
    }
    if unreadable {
        // Pages moved out that this process cannot read: they stay where they are, a
        // program gone by now, or a bug to stop at rather than lose them quietly.
        panic!("a page moved out of the program into staging at {slot:#x} cannot be read");
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
    let mode = CopyMode {
        dont_wake: true,
        write_protect: false,
    };
    let mut page_at_a_time = false;
    while folio.moved_back < folio.len {
        let copy = folio.copy.as_mut().expect("a copied folio");
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
        let r = dst_uffd.copy(dst + from, &copy.bytes[from..to], mode);
        // What went in is no longer in the copy, as a page moved back leaves its slot.
        let done = match r {
            Ok(Filled::All) => to - from,
            Ok(Filled::PageExists { done }) | Err(UffdError::MappingChanging { done, .. }) => done,
            Err(_) => 0,
        };
        copy.present[first..first + done / ps].fill(false);
        match r {
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

/// `StagedFolio::move_back_page` for a copy: the page leaves the copy once it is in.
pub(super) fn move_back_page(
    folio: &mut StagedFolio,
    dst_uffd: &Uffd,
    dst: usize,
    index: usize,
) -> Result<Filled, UffdError> {
    let ps = page_size();
    let copy = folio.copy.as_mut().expect("a copied folio");
    if !copy.present.get(index).copied().unwrap_or(false) {
        return Ok(Filled::All); // not in the copy: never moved in, or back already
    }
    let page = &copy.bytes[index * ps..(index + 1) * ps];
    let mode = CopyMode {
        dont_wake: true,
        write_protect: false,
    };
    let r = dst_uffd.copy(dst, page, mode);
    if matches!(r, Ok(Filled::All)) {
        copy.present[index] = false;
    }
    r
}
