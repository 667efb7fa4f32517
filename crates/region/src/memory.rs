//! Where a region's memory is: a mapping of this process's (`Region::new`), or a range of a
//! program served from here (`RemoteRegion`, uffd::remote). The parts that differ between
//! the two are chosen here, once, when the region is made: how the range is registered, the
//! staging area's place, how its pages and the program's memory and CPU time are read.

use std::sync::Arc;

use uffd::process::ProcessMemory;
#[cfg(target_arch = "x86_64")]
use uffd::remote::RemoteProcess;
use uffd::{PageTables, RawRegion, RegisterMode, Staging, Uffd, UffdError, WrittenPages};

/// The region's memory.
pub(crate) enum Memory {
    /// A mapping of this process. Only its address is shared with the region's threads; the
    /// memory itself is reached from Rust only through `Region::as_mut_slice`.
    Own(RawRegion),
    /// `range` in `process`.
    #[cfg(target_arch = "x86_64")]
    Program {
        process: Arc<RemoteProcess>,
        range: std::ops::Range<usize>,
    },
}

impl Memory {
    /// The mapping of this process. A region in a program is only reached through
    /// `RemoteRegion`, which never asks for it.
    pub fn own(&self) -> &RawRegion {
        match self {
            Memory::Own(mem) => mem,
            #[cfg(target_arch = "x86_64")]
            Memory::Program { .. } => unreachable!("a region in a program has no mapping here"),
        }
    }

    /// As `own`, to write.
    pub fn own_mut(&mut self) -> &mut RawRegion {
        match self {
            Memory::Own(mem) => mem,
            #[cfg(target_arch = "x86_64")]
            Memory::Program { .. } => unreachable!("a region in a program has no mapping here"),
        }
    }

    /// Where the range starts.
    pub fn addr(&self) -> usize {
        match self {
            Memory::Own(mem) => mem.addr(),
            #[cfg(target_arch = "x86_64")]
            Memory::Program { range, .. } => range.start,
        }
    }

    /// Register the whole range with `uffd` (the region's: for a program, a handle on the
    /// program's userfaultfd).
    pub fn register(&self, uffd: &Uffd, mode: RegisterMode) -> Result<(), UffdError> {
        match self {
            Memory::Own(mem) => uffd.register(mem, 0, mem.len(), mode).map(|_| ()),
            #[cfg(target_arch = "x86_64")]
            Memory::Program { process, range } => process.register(range.start, range.len(), mode),
        }
    }

    /// A staging area of `nr_slots` slots of `slot_bytes`, where the range's folios can move
    /// (the same process).
    pub fn staging(
        &self,
        nr_slots: u32,
        slot_bytes: usize,
        batch_slots: usize,
    ) -> Result<Arc<Staging>, UffdError> {
        match self {
            Memory::Own(_) => Staging::new(nr_slots, slot_bytes, batch_slots),
            #[cfg(target_arch = "x86_64")]
            Memory::Program { process, .. } => {
                Staging::in_program(process.clone(), nr_slots, slot_bytes, batch_slots)
            }
        }
    }

    /// The page tables the range is in.
    pub fn page_tables(&self) -> std::io::Result<PageTables> {
        match self {
            Memory::Own(_) => Ok(PageTables::Own),
            #[cfg(target_arch = "x86_64")]
            Memory::Program { process, .. } => PageTables::of(process.pid()),
        }
    }

    /// The pagemap of the process the range is in, to scan for written pages.
    pub fn written_pages(&self) -> std::io::Result<WrittenPages> {
        match self {
            Memory::Own(_) => WrittenPages::own(),
            #[cfg(target_arch = "x86_64")]
            Memory::Program { process, .. } => WrittenPages::of(process.pid()),
        }
    }

    /// The memory of the process the range is in, to read (None where `/proc` cannot be
    /// read).
    pub fn process_memory(&self) -> Option<ProcessMemory> {
        match self {
            Memory::Own(_) => ProcessMemory::own().ok(),
            #[cfg(target_arch = "x86_64")]
            Memory::Program { process, .. } => ProcessMemory::of(process.pid()).ok(),
        }
    }

    /// The program, where it is not this process.
    pub fn program_pid(&self) -> Option<rustix::process::Pid> {
        match self {
            Memory::Own(_) => None,
            #[cfg(target_arch = "x86_64")]
            Memory::Program { process, .. } => rustix::process::Pid::from_raw(process.pid()),
        }
    }

    /// A registration of the range to be made later (registration.rs).
    pub fn late_registration(&self) -> LateRegistration {
        match self {
            Memory::Own(mem) => LateRegistration::Own(mem.late_registration()),
            #[cfg(target_arch = "x86_64")]
            Memory::Program { process, range } => LateRegistration::Program {
                process: process.clone(),
                range: range.clone(),
            },
        }
    }

    /// How reclaim makes a folio a fork left shared the region's own again
    /// (shared_folios.rs).
    pub fn unshare(&self) -> crate::shared_folios::Unshare {
        match self {
            Memory::Own(_) => crate::shared_folios::Unshare::Own,
            #[cfg(target_arch = "x86_64")]
            Memory::Program { .. } => crate::shared_folios::Unshare::Never,
        }
    }
}

/// The range's registration, to be made later from any thread (registration.rs).
pub(crate) enum LateRegistration {
    /// This process's mapping: made only while the region's mapping is where it was.
    Own(uffd::LateRegistration),
    #[cfg(target_arch = "x86_64")]
    Program {
        process: Arc<RemoteProcess>,
        range: std::ops::Range<usize>,
    },
}

impl LateRegistration {
    /// Register the whole range with `uffd` (the region's) in `mode`; an error for a region
    /// gone meanwhile.
    pub fn register(&self, uffd: &Uffd, mode: RegisterMode) -> Result<(), UffdError> {
        match self {
            LateRegistration::Own(late) => match uffd.register_late(late, mode) {
                Some(r) => r.map(|_| ()),
                None => Err(UffdError::Os {
                    op: "UFFDIO_REGISTER",
                    source: std::io::Error::from_raw_os_error(libc::ENOENT),
                }),
            },
            #[cfg(target_arch = "x86_64")]
            LateRegistration::Program { process, range } => {
                process.register(range.start, range.len(), mode)
            }
        }
    }

    /// The anonymous memory of the process the range is in, resident or swapped out by the
    /// kernel (`RssAnon` and `VmSwap` of its `status`), in bytes; None where `/proc` cannot
    /// be read. For a region that is the process's heap, at least what the region's pages
    /// take (registration.rs).
    pub fn anon_bytes(&self) -> Option<u64> {
        let path = match self {
            LateRegistration::Own(_) => "/proc/self/status".to_string(),
            #[cfg(target_arch = "x86_64")]
            LateRegistration::Program { process, .. } => format!("/proc/{}/status", process.pid()),
        };
        let status = std::fs::read_to_string(path).ok()?;
        let kib = |name: &str| -> Option<u64> {
            let line = status.lines().find(|l| l.starts_with(name))?;
            line[name.len()..]
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .ok()
        };
        Some((kib("RssAnon:")? + kib("VmSwap:").unwrap_or(0)) << 10)
    }
}
