//! `Uffd`: one userfaultfd and the operations on it (register, copy, zeropage, move, poison,
//! write-protect, wake, continue) and reading its events.
//!
//! # Soundness
//!
//! The fill operations (copy, zeropage, poison, continue) and the destination of a move change
//! memory only inside ranges registered with a userfaultfd: the kernel refuses any other
//! destination with `ENOENT` (`find_dst_vma` in mm/userfaultfd.c), and it only fills pages that
//! are not present (`EEXIST` otherwise). The safe [`Uffd::register`] only registers ranges of a
//! [`RawRegion`], which never hands out references into its memory. So, as long as ranges are
//! registered only through this crate's safe API, no Rust reference can observe a change made
//! by these operations, and they are safe for any address. Whoever uses
//! [`Uffd::register_range`] (unsafe) takes on that guarantee for the range they register: no
//! Rust reference into it may be held while it is registered.
//!
//! The *source* of a move is different: the kernel takes any anonymous private page of the
//! process, registered or not, so a move out of arbitrary memory could pull pages out from under
//! a live reference. The safe [`Uffd::move_from`] therefore takes the source as a `RawRegion`;
//! [`Uffd::move_pages`] with a raw source address is `unsafe`.
//!
//! Addresses are never dereferenced by this crate: the kernel validates them and answers
//! `EFAULT`/`ENOENT`/`EINVAL` for bad ones.

use crate::error::{RawRegionError, UffdError};
use crate::event::{decode, Event, RawEvent};
use crate::features::{Features, Ioctls, RegisterMode};
use crate::raw_region::{LateRegistration, RawRegion};
use crate::sys;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// How many `uffd_msg` one `read(2)` asks for: enough to drain a burst of faults from many
/// threads in one system call, small enough (2 KiB) for the stack.
pub const EVENT_BATCH: usize = 64;

/// The result of a fill (copy, zeropage, move, poison, continue) that did not fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Filled {
    /// The whole range was filled (and woken, unless DONTWAKE was asked).
    All,
    /// `EEXIST`: a page was already present `done` bytes into the range. The `done` bytes before
    /// it were filled (and woken); the rest was not attempted. An expected race (another thread
    /// served the same fault first): callers count it, and usually `wake` the faulting address,
    /// since a failed fill wakes no one.
    PageExists {
        /// Bytes filled before the page that was present.
        done: usize,
    },
}

/// Modes of [`Uffd::copy`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CopyMode {
    /// Do not wake the threads waiting on the range (wake them later with one `wake`).
    pub dont_wake: bool,
    /// Install the pages write-protected (range registered with WP).
    pub write_protect: bool,
}

/// Modes of [`Uffd::move_from`] / [`Uffd::move_pages`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MoveMode {
    /// Do not wake the threads waiting on the destination.
    pub dont_wake: bool,
    /// Skip holes in the source instead of failing with `ENOENT` (`RangeGone`).
    pub allow_src_holes: bool,
}

/// One userfaultfd, closed on drop. `Send + Sync`: the kernel serialises what needs it, so
/// several threads may issue operations (and one may read events) at once.
///
/// Rules for the reader of events (all from the kernel's non-cooperative event design):
/// - Fork, remap, remove and unmap events block the thread that caused them until they are
///   read. The reader must never cause one itself (never `madvise`/`munmap`/`mremap` a
///   registered range), nor wait for a thread that may be blocked on one.
/// - Unmapping a registered range (dropping its [`RawRegion`]) with `EVENT_UNMAP` while no
///   thread reads events hangs: unregister the range, or drop the `Uffd` first (closing it
///   releases all its registrations).
/// - While such an event is queued, operations return [`UffdError::MappingChanging`]: read the
///   events, then retry what is still mapped.
#[derive(Debug)]
pub struct Uffd {
    fd: OwnedFd,
    features: Features,
    supported: Features,
    api_ioctls: Ioctls,
    user_mode_only: bool,
}

/// The signed result field of a fill ioctl, and what became of the call.
struct Fill {
    rc: libc::c_int,
    errno: i32,
    /// Bytes done (> 0), a negative errno, or 0 if the kernel never wrote it (early `EINVAL`).
    field: i64,
}

impl Uffd {
    pub(crate) fn new(
        fd: OwnedFd,
        features: Features,
        supported: Features,
        api_ioctls: Ioctls,
        user_mode_only: bool,
    ) -> Self {
        Self {
            fd,
            features,
            supported,
            api_ioctls,
            user_mode_only,
        }
    }

    /// Another handle on this userfaultfd (a duplicate descriptor: the same registrations,
    /// events and features).
    pub fn try_clone(&self) -> Result<Self, UffdError> {
        let fd = self.fd.try_clone().map_err(|source| UffdError::Os {
            op: "dup userfaultfd",
            source,
        })?;
        Ok(Self {
            fd: crate::descriptors::out_of_reach(fd),
            ..*self
        })
    }

    /// Shorthand for `UffdBuilder::new().create()`.
    pub fn new_default() -> Result<Self, UffdError> {
        crate::UffdBuilder::new().create()
    }

    /// The features negotiated for this userfaultfd.
    pub fn features(&self) -> Features {
        self.features
    }

    /// Everything the kernel supports (a superset of [`features`](Self::features)).
    pub fn supported_features(&self) -> Features {
        self.supported
    }

    /// The ioctls the handshake reported (REGISTER, UNREGISTER, API). The range ioctls come
    /// from [`register`](Self::register).
    pub fn api_ioctls(&self) -> Ioctls {
        self.api_ioctls
    }

    /// Whether faults raised by the kernel on the program's behalf go unreported (they fail with
    /// `EFAULT`): see [`USER_MODE_ONLY_WARNING`](crate::USER_MODE_ONLY_WARNING).
    pub fn user_mode_only(&self) -> bool {
        self.user_mode_only
    }

    /// A one-line warning for the log when [`user_mode_only`](Self::user_mode_only).
    pub fn mode_warning(&self) -> Option<&'static str> {
        self.user_mode_only
            .then_some(crate::features::USER_MODE_ONLY_WARNING)
    }

    /// Issue `req` on this userfaultfd with `arg`; returns the result and errno (0 on success).
    ///
    /// # Safety
    /// `T` is the `#[repr(C)]` struct of sys.rs that `req` takes (its size is encoded in `req`
    /// and asserted in sys.rs), and what the operation does to memory at the addresses inside
    /// `arg` is sound (each caller argues it).
    unsafe fn ioctl<T>(&self, req: u64, arg: &mut T) -> (libc::c_int, i32) {
        // SAFETY: `arg` is a live, exclusive `&mut T`, and `T` is the struct `req` takes (our
        // contract), so the kernel reads and writes only its bytes, during the call; it
        // validates the addresses inside it itself, and what it does there is our caller's part.
        let rc = unsafe { libc::ioctl(self.fd.as_raw_fd(), req as _, arg as *mut T) };
        let errno = if rc < 0 {
            io::Error::last_os_error().raw_os_error().unwrap_or(0)
        } else {
            0
        };
        (rc, errno)
    }

    fn simple(&self, op: &'static str, rc: libc::c_int, errno: i32) -> Result<(), UffdError> {
        if rc < 0 {
            Err(UffdError::from_errno(op, errno, 0))
        } else {
            Ok(())
        }
    }

    /// Register `offset..offset+len` (page aligned) of `region` in `mode`; returns the ioctls
    /// allowed on the range (COPY, ZEROPAGE, MOVE, WRITEPROTECT, POISON, ...).
    ///
    /// Accesses to missing (or, with WP, write-protected) pages of the range then block until
    /// served, so a thread that reads this userfaultfd's events must exist before the program
    /// touches the range.
    pub fn register(
        &self,
        region: &RawRegion,
        offset: usize,
        len: usize,
        mode: RegisterMode,
    ) -> Result<Ioctls, UffdError> {
        let start = region
            .page_range(offset, len)
            .map_err(region_err("UFFDIO_REGISTER"))?;
        // SAFETY: the range lies in a RawRegion, which never hands out references into its
        // memory; that is the guarantee `register_range` asks for.
        unsafe { self.register_range(start, len, mode) }
    }

    /// Register the whole range of the region `late` was taken from (`RawRegion::
    /// late_registration`), as `register` of the whole region; None when the region is gone,
    /// or has moved.
    pub fn register_late(
        &self,
        late: &LateRegistration,
        mode: RegisterMode,
    ) -> Option<Result<Ioctls, UffdError>> {
        let (start, len, _held) = late.hold()?;
        // SAFETY: while `_held` lives the range is still the RawRegion's (neither unmapped nor
        // moved), which never hands out references into its memory: the guarantee
        // `register_range` asks for.
        Some(unsafe { self.register_range(start, len, mode) })
    }

    /// Register any `start..start+len` (page aligned, anonymous private memory for MISSING/WP).
    ///
    /// # Safety
    /// While the range is registered, no Rust reference may point into it: copy, zeropage,
    /// move and poison (all safe methods, on any `Uffd` of the process) may change its contents.
    /// The range must also not be memory Rust code relies on (stack, heap, statics).
    pub unsafe fn register_range(
        &self,
        start: usize,
        len: usize,
        mode: RegisterMode,
    ) -> Result<Ioctls, UffdError> {
        let mut arg = sys::uffdio_register {
            range: range(start, len),
            mode: mode.bits(),
            ioctls: 0,
        };
        // SAFETY: `arg` is the `uffdio_register` UFFDIO_REGISTER takes. Registration changes
        // no memory; the fills it enables are covered by our caller's contract.
        let (rc, errno) = unsafe { self.ioctl(sys::UFFDIO_REGISTER, &mut arg) };
        self.simple("UFFDIO_REGISTER", rc, errno)?;
        Ok(Ioctls::from_bits(arg.ioctls))
    }

    /// Unregister `start..start+len`: threads waiting there are woken and fault normally
    /// (missing pages then read as zero). Safe: it changes no memory.
    pub fn unregister(&self, start: usize, len: usize) -> Result<(), UffdError> {
        let mut arg = range(start, len);
        // SAFETY: `arg` is the `uffdio_range` UFFDIO_UNREGISTER takes; unregistering changes no
        // memory.
        let (rc, errno) = unsafe { self.ioctl(sys::UFFDIO_UNREGISTER, &mut arg) };
        self.simple("UFFDIO_UNREGISTER", rc, errno)
    }

    /// Wake the threads waiting on `start..start+len` (after DONTWAKE fills, or after
    /// [`Filled::PageExists`]). Safe: a woken thread retries its access; no memory changes.
    pub fn wake(&self, start: usize, len: usize) -> Result<(), UffdError> {
        let mut arg = range(start, len);
        // SAFETY: `arg` is the `uffdio_range` UFFDIO_WAKE takes; waking changes no memory.
        let (rc, errno) = unsafe { self.ioctl(sys::UFFDIO_WAKE, &mut arg) };
        self.simple("UFFDIO_WAKE", rc, errno)
    }

    /// Run a fill ioctl until done: `issue(done)` performs the call for the remainder starting
    /// `done` bytes in. A partial result (a positive count with `EAGAIN`) is progress, retried
    /// from the remainder at once; a negative result field is `-errno`.
    fn fill_loop(
        op: &'static str,
        len: usize,
        mut issue: impl FnMut(usize) -> Fill,
    ) -> Result<Filled, UffdError> {
        let mut done = 0usize;
        loop {
            let f = issue(done);
            if f.rc >= 0 {
                return Ok(Filled::All);
            }
            if f.field > 0 {
                // Partial: the kernel stopped early (e.g. a page needed a retry); every retry
                // makes progress, so this loop ends.
                done += f.field as usize;
                if done >= len {
                    return Ok(Filled::All);
                }
                continue;
            }
            // The field holds -errno when the kernel got far enough to write it; otherwise (an
            // early EINVAL/EFAULT) it is still 0 and errno is the answer.
            let errno = if f.field < 0 {
                (-f.field) as i32
            } else {
                f.errno
            };
            if errno == libc::EEXIST {
                return Ok(Filled::PageExists { done });
            }
            return Err(UffdError::from_errno(op, errno, done));
        }
    }

    /// `UFFDIO_COPY`: copy `src` into the missing pages at `dst` (page aligned,
    /// `src.len()` a multiple of the page size) and wake the faulting threads.
    ///
    /// Safe for any `dst`: the kernel writes only into missing pages of ranges registered with
    /// this userfaultfd (see the module's Soundness section), and reads `src` as bytes.
    pub fn copy(&self, dst: usize, src: &[u8], mode: CopyMode) -> Result<Filled, UffdError> {
        let mut m = 0;
        if mode.dont_wake {
            m |= sys::UFFDIO_COPY_MODE_DONTWAKE;
        }
        if mode.write_protect {
            m |= sys::UFFDIO_COPY_MODE_WP;
        }
        let len = src.len();
        let src = src.as_ptr() as usize;
        Self::fill_loop("UFFDIO_COPY", len, |done| {
            let mut arg = sys::uffdio_copy {
                dst: (dst + done) as u64,
                src: (src + done) as u64,
                len: (len - done) as u64,
                mode: m,
                copy: 0,
            };
            // SAFETY: `arg` is the `uffdio_copy` UFFDIO_COPY takes. The kernel only reads the
            // source, which lies in the borrowed `src`, and writes only missing pages of ranges
            // registered with this userfaultfd, which no reference covers (module Soundness).
            let (rc, errno) = unsafe { self.ioctl(sys::UFFDIO_COPY, &mut arg) };
            Fill {
                rc,
                errno,
                field: arg.copy,
            }
        })
    }

    /// `UFFDIO_ZEROPAGE`: map zero pages at the missing pages of `start..start+len`.
    /// Safe: as `copy` (and the pages read as zero before and after).
    pub fn zeropage(&self, start: usize, len: usize, dont_wake: bool) -> Result<Filled, UffdError> {
        let m = if dont_wake {
            sys::UFFDIO_ZEROPAGE_MODE_DONTWAKE
        } else {
            0
        };
        Self::fill_loop("UFFDIO_ZEROPAGE", len, |done| {
            let mut arg = sys::uffdio_zeropage {
                range: range(start + done, len - done),
                mode: m,
                zeropage: 0,
            };
            // SAFETY: `arg` is the `uffdio_zeropage` UFFDIO_ZEROPAGE takes; it maps zero pages
            // only at missing pages of registered ranges, which read as zero already.
            let (rc, errno) = unsafe { self.ioctl(sys::UFFDIO_ZEROPAGE, &mut arg) };
            Fill {
                rc,
                errno,
                field: arg.zeropage,
            }
        })
    }

    /// `UFFDIO_MOVE` from `src_offset..src_offset+len` of `src` (page aligned) to `dst`, which
    /// must be registered with this userfaultfd (missing pages only: `PageExists` otherwise).
    /// The source pages leave `src` (it reads as zero, or faults as missing if registered).
    ///
    /// Source pages must be exclusive to this process, else [`UffdError::Busy`]
    /// (see [`RawRegion::dont_fork`]).
    pub fn move_from(
        &self,
        dst: usize,
        src: &RawRegion,
        src_offset: usize,
        len: usize,
        mode: MoveMode,
    ) -> Result<Filled, UffdError> {
        let src = src
            .page_range(src_offset, len)
            .map_err(region_err("UFFDIO_MOVE"))?;
        // SAFETY: the source lies in a RawRegion, which never hands out references into its
        // memory, so taking its pages away is invisible to Rust; the destination is argued as
        // for `copy`.
        unsafe { self.move_pages(dst, src, len, mode) }
    }

    /// `UFFDIO_MOVE` with a raw source address.
    ///
    /// # Safety
    /// No Rust reference may point into `src..src+len`, and it must not be memory Rust code
    /// relies on: its pages are taken away (the range then reads as zero, or faults as missing
    /// if registered). The destination needs no guarantee (see `copy`).
    pub unsafe fn move_pages(
        &self,
        dst: usize,
        src: usize,
        len: usize,
        mode: MoveMode,
    ) -> Result<Filled, UffdError> {
        let mut m = 0;
        if mode.dont_wake {
            m |= sys::UFFDIO_MOVE_MODE_DONTWAKE;
        }
        if mode.allow_src_holes {
            m |= sys::UFFDIO_MOVE_MODE_ALLOW_SRC_HOLES;
        }
        Self::fill_loop("UFFDIO_MOVE", len, |done| {
            let mut arg = sys::uffdio_move {
                dst: (dst + done) as u64,
                src: (src + done) as u64,
                len: (len - done) as u64,
                mode: m,
                move_: 0,
            };
            // SAFETY: `arg` is the `uffdio_move` UFFDIO_MOVE takes. No reference points into
            // the source range (our caller's contract), and the destination is only missing
            // pages of registered ranges (module Soundness).
            let (rc, errno) = unsafe { self.ioctl(sys::UFFDIO_MOVE, &mut arg) };
            Fill {
                rc,
                errno,
                field: arg.move_,
            }
        })
    }

    /// `UFFDIO_POISON`: mark the missing pages of `start..start+len` poisoned; an access then
    /// raises SIGBUS (for a page whose data is lost: never hand back zeros instead).
    /// Safe: it fills only missing pages of registered ranges, and an access to them kills
    /// (SIGBUS) rather than reading anything.
    pub fn poison(&self, start: usize, len: usize, dont_wake: bool) -> Result<Filled, UffdError> {
        let m = if dont_wake {
            sys::UFFDIO_POISON_MODE_DONTWAKE
        } else {
            0
        };
        Self::fill_loop("UFFDIO_POISON", len, |done| {
            let mut arg = sys::uffdio_poison {
                range: range(start + done, len - done),
                mode: m,
                updated: 0,
            };
            // SAFETY: `arg` is the `uffdio_poison` UFFDIO_POISON takes; it marks only missing
            // pages of registered ranges, which no reference covers.
            let (rc, errno) = unsafe { self.ioctl(sys::UFFDIO_POISON, &mut arg) };
            Fill {
                rc,
                errno,
                field: arg.updated,
            }
        })
    }

    /// `UFFDIO_CONTINUE`: map the page-cache pages already present behind `start..start+len`
    /// (MINOR faults on shmem/hugetlbfs; not used for anonymous memory).
    /// Safe: it maps the existing contents, changing what no reference could see.
    pub fn continue_range(
        &self,
        start: usize,
        len: usize,
        dont_wake: bool,
    ) -> Result<Filled, UffdError> {
        let m = if dont_wake {
            sys::UFFDIO_CONTINUE_MODE_DONTWAKE
        } else {
            0
        };
        Self::fill_loop("UFFDIO_CONTINUE", len, |done| {
            let mut arg = sys::uffdio_continue {
                range: range(start + done, len - done),
                mode: m,
                mapped: 0,
            };
            // SAFETY: `arg` is the `uffdio_continue` UFFDIO_CONTINUE takes; it maps the
            // contents already behind registered pages, so no value a reference could see
            // changes.
            let (rc, errno) = unsafe { self.ioctl(sys::UFFDIO_CONTINUE, &mut arg) };
            Fill {
                rc,
                errno,
                field: arg.mapped,
            }
        })
    }

    /// Write-protect `start..start+len` (registered with WP): a later write raises a pagefault
    /// event with `flags.wp`. Safe: contents do not change.
    pub fn write_protect(&self, start: usize, len: usize) -> Result<(), UffdError> {
        let mut arg = sys::uffdio_writeprotect {
            range: range(start, len),
            mode: sys::UFFDIO_WRITEPROTECT_MODE_WP,
        };
        // SAFETY: `arg` is the `uffdio_writeprotect` UFFDIO_WRITEPROTECT takes; changing the
        // protection leaves the contents as they are.
        let (rc, errno) = unsafe { self.ioctl(sys::UFFDIO_WRITEPROTECT, &mut arg) };
        self.simple("UFFDIO_WRITEPROTECT", rc, errno)
    }

    /// Remove write protection from `start..start+len`, waking the writers blocked there unless
    /// `dont_wake`. Safe: contents do not change.
    pub fn write_unprotect(
        &self,
        start: usize,
        len: usize,
        dont_wake: bool,
    ) -> Result<(), UffdError> {
        let mut arg = sys::uffdio_writeprotect {
            range: range(start, len),
            mode: if dont_wake {
                sys::UFFDIO_WRITEPROTECT_MODE_DONTWAKE
            } else {
                0
            },
        };
        // SAFETY: `arg` is the `uffdio_writeprotect` UFFDIO_WRITEPROTECT takes; changing the
        // protection leaves the contents as they are.
        let (rc, errno) = unsafe { self.ioctl(sys::UFFDIO_WRITEPROTECT, &mut arg) };
        self.simple("UFFDIO_WRITEPROTECT", rc, errno)
    }

    /// Read up to [`EVENT_BATCH`] events with one `read(2)` and append them to `out`; returns how
    /// many were appended. A blocking userfaultfd waits for the first one; a non-blocking one
    /// returns 0 when none is pending. `EINTR` is retried.
    ///
    /// Keep `EVENT_BATCH` spare capacity in `out` (reserve once, reuse the Vec) so that reading
    /// never allocates: with `EVENT_FORK`, glibc's `fork` holds the malloc locks while the forking
    /// thread waits for this reader, and a reader that allocates before reading deadlocks.
    pub fn read_events(&self, out: &mut Vec<Event>) -> Result<usize, UffdError> {
        let mut buf = [sys::uffd_msg::default(); EVENT_BATCH];
        let n = loop {
            // SAFETY: `buf` is a live, writable array of EVENT_BATCH `uffd_msg` (plain integers,
            // any bit pattern valid); the kernel writes at most size_of_val(&buf) bytes.
            let rc = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    std::mem::size_of_val(&buf),
                )
            };
            if rc >= 0 {
                break rc as usize;
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => return Ok(0),
                _ => {
                    return Err(UffdError::Os {
                        op: "read",
                        source: err,
                    })
                }
            }
        };
        let count = n / size_of::<sys::uffd_msg>();
        let thread_id = self.features.contains(Features::THREAD_ID);
        for msg in &buf[..count] {
            out.push(match decode(msg, thread_id) {
                RawEvent::Event(e) => e,
                RawEvent::Fork { fd } => Event::Fork {
                    uffd: self.child(fd),
                },
            });
        }
        Ok(count)
    }

    /// Read one event (blocking unless non-blocking; `None` when none is pending).
    pub fn read_event(&self) -> Result<Option<Event>, UffdError> {
        // A one-message read: events beyond it stay queued for the next call.
        let mut msg = sys::uffd_msg::default();
        loop {
            // SAFETY: `msg` is a live, writable `uffd_msg`; the kernel writes one message at most.
            let rc = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    (&mut msg as *mut sys::uffd_msg).cast(),
                    size_of::<sys::uffd_msg>(),
                )
            };
            if rc >= 0 {
                break;
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => return Ok(None),
                _ => {
                    return Err(UffdError::Os {
                        op: "read",
                        source: err,
                    })
                }
            }
        }
        Ok(Some(
            match decode(&msg, self.features.contains(Features::THREAD_ID)) {
                RawEvent::Event(e) => e,
                RawEvent::Fork { fd } => Event::Fork {
                    uffd: self.child(fd),
                },
            },
        ))
    }

    /// Wait until an event is pending (`true`) or `timeout` passes (`false`; `None` waits
    /// forever). For a non-blocking userfaultfd in a loop that also does other work.
    pub fn wait_readable(&self, timeout: Option<Duration>) -> Result<bool, UffdError> {
        let mut pfd = [pollin(self.fd.as_raw_fd())];
        poll(&mut pfd, timeout)
    }

    /// As `wait_readable`, but also woken when `bell` is rung (true then too, and the bell
    /// is cleared): for a handler that also serves events other threads read.
    pub fn wait_readable_or_rung(
        &self,
        bell: &crate::Doorbell,
        timeout: Option<Duration>,
    ) -> Result<bool, UffdError> {
        let mut pfds = [pollin(self.fd.as_raw_fd()), pollin(bell.raw_fd())];
        let ready = poll(&mut pfds, timeout)?;
        if pfds[1].revents != 0 {
            bell.clear();
        }
        Ok(ready)
    }

    /// The userfaultfd of a forked child: the kernel gives it the parent's features and flags.
    fn child(&self, fd: RawFd) -> Uffd {
        Uffd {
            // SAFETY: the kernel installed this descriptor in our table while delivering the
            // fork event (resolve_userfault_fork) and hands its ownership to the reader.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            features: self.features,
            supported: self.supported,
            api_ioctls: self.api_ioctls,
            user_mode_only: self.user_mode_only,
        }
    }
}

impl AsFd for Uffd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for Uffd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

fn range(start: usize, len: usize) -> sys::uffdio_range {
    sys::uffdio_range {
        start: start as u64,
        len: len as u64,
    }
}

fn region_err(op: &'static str) -> impl Fn(RawRegionError) -> UffdError {
    move |_| UffdError::InvalidArgument { op }
}

fn pollin(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

/// `poll(2)` until one of `pfds` is ready (true) or `timeout` passes (false; `None` waits
/// forever), retrying on EINTR.
fn poll(pfds: &mut [libc::pollfd], timeout: Option<Duration>) -> Result<bool, UffdError> {
    let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32);
    loop {
        // SAFETY: `pfds` is a live, writable slice of pollfds and its length is the count.
        let rc = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
        if rc >= 0 {
            return Ok(rc > 0);
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(UffdError::Os {
                op: "poll",
                source: err,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(
        results: Vec<(libc::c_int, i32, i64)>,
        len: usize,
    ) -> (Result<Filled, UffdError>, Vec<usize>) {
        let mut it = results.into_iter();
        let mut starts = Vec::new();
        let r = Uffd::fill_loop("TEST", len, |done| {
            starts.push(done);
            let (rc, errno, field) = it.next().expect("no more results");
            Fill { rc, errno, field }
        });
        (r, starts)
    }

    #[test]
    fn partial_fill_is_retried_from_the_remainder() {
        let (r, starts) = run(
            vec![
                (-1, libc::EAGAIN, 4096),
                (-1, libc::EAGAIN, 4096),
                (0, 0, 8192),
            ],
            16384,
        );
        assert_eq!(r.unwrap(), Filled::All);
        assert_eq!(starts, vec![0, 4096, 8192]);
    }

    #[test]
    fn negative_field_is_an_errno_not_a_byte_count() {
        // The userfaultfd-rs bug: -EAGAIN read as usize is a huge "copied" count.
        let (r, _) = run(vec![(-1, libc::EAGAIN, -(libc::EAGAIN as i64))], 4096);
        assert!(matches!(r, Err(UffdError::MappingChanging { done: 0, .. })));
        let (r, _) = run(
            vec![
                (-1, libc::EAGAIN, 4096),
                (-1, libc::EAGAIN, -(libc::EAGAIN as i64)),
            ],
            8192,
        );
        assert!(matches!(
            r,
            Err(UffdError::MappingChanging { done: 4096, .. })
        ));
    }

    #[test]
    fn eexist_is_an_outcome_with_progress() {
        let (r, _) = run(
            vec![
                (-1, libc::EAGAIN, 8192),
                (-1, libc::EEXIST, -(libc::EEXIST as i64)),
            ],
            16384,
        );
        assert_eq!(r.unwrap(), Filled::PageExists { done: 8192 });
    }

    #[test]
    fn unwritten_field_falls_back_to_errno() {
        let (r, _) = run(vec![(-1, libc::EINVAL, 0)], 4096);
        assert!(matches!(r, Err(UffdError::InvalidArgument { .. })));
        let (r, _) = run(vec![(-1, libc::ESRCH, -(libc::ESRCH as i64))], 4096);
        assert!(matches!(r, Err(UffdError::ProcessGone { .. })));
        let (r, _) = run(vec![(-1, libc::ENOENT, -(libc::ENOENT as i64))], 4096);
        assert!(matches!(r, Err(UffdError::RangeGone { .. })));
        let (r, _) = run(vec![(-1, libc::EBUSY, -(libc::EBUSY as i64))], 4096);
        assert!(matches!(r, Err(UffdError::Busy { .. })));
    }
}
