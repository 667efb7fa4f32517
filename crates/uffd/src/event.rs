//! Events read from a userfaultfd: the kernel's `struct uffd_msg` decoded into a typed enum.

use crate::sys;
use crate::userfaultfd::Uffd;

/// Why a page fault was reported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PagefaultFlags {
    /// The access was a write (`UFFD_PAGEFAULT_FLAG_WRITE`); otherwise a read.
    pub write: bool,
    /// A write to a write-protected page (`UFFD_PAGEFAULT_FLAG_WP`); otherwise a missing page.
    pub wp: bool,
    /// A minor fault (page in the page cache, not mapped); only with MINOR registration.
    pub minor: bool,
}

impl PagefaultFlags {
    fn from_bits(bits: u64) -> Self {
        Self {
            write: bits & sys::UFFD_PAGEFAULT_FLAG_WRITE != 0,
            wp: bits & sys::UFFD_PAGEFAULT_FLAG_WP != 0,
            minor: bits & sys::UFFD_PAGEFAULT_FLAG_MINOR != 0,
        }
    }
}

/// One event of a userfaultfd.
///
/// Every non-pagefault event (fork, remap, remove, unmap) is synchronous on the kernel side: the
/// thread that caused it blocks until the event is read. So the reader must never wait for such
/// a thread (for instance, never `madvise` a registered range from the reading thread).
#[derive(Debug)]
#[non_exhaustive]
pub enum Event {
    /// A thread touched a missing page (or wrote to a write-protected one) and sleeps until the
    /// page is served (copy, zeropage, move, write-unprotect) or woken.
    Pagefault {
        /// The faulting address: exact with `Features::EXACT_ADDRESS`, else page aligned.
        addr: usize,
        /// What kind of fault it was.
        flags: PagefaultFlags,
        /// The faulting thread's id, with `Features::THREAD_ID`.
        thread_id: Option<u32>,
    },
    /// The process forked; `uffd` manages the child's copy of the registered ranges.
    Fork {
        /// The child's userfaultfd.
        uffd: Uffd,
    },
    /// `mremap` moved `len` bytes of a registered range from `from` to `to`; the registration
    /// moved with them.
    Remap {
        /// The old start address.
        from: usize,
        /// The new start address.
        to: usize,
        /// Bytes moved.
        len: usize,
    },
    /// `madvise(MADV_DONTNEED/MADV_FREE/MADV_REMOVE)` dropped `start..end`: it reads as zero (or
    /// faults as missing) from now on; whatever backs it elsewhere is stale.
    Remove {
        /// The first address dropped.
        start: usize,
        /// The address one past the last dropped.
        end: usize,
    },
    /// `munmap` (or `mmap(MAP_FIXED)`, `mremap` shrinking) removed `start..end`.
    Unmap {
        /// The first address unmapped.
        start: usize,
        /// The address one past the last unmapped.
        end: usize,
    },
    /// An event type this crate does not know (a newer kernel).
    Unknown {
        /// The message's `event` number.
        event: u8,
    },
}

fn u64_at(arg: &[u8; 24], i: usize) -> u64 {
    u64::from_ne_bytes(arg[i * 8..i * 8 + 8].try_into().expect("8 bytes"))
}

fn u32_at(arg: &[u8; 24], byte: usize) -> u32 {
    u32::from_ne_bytes(arg[byte..byte + 4].try_into().expect("4 bytes"))
}

/// What a message says, before a fork's file descriptor is wrapped into an owned [`Uffd`].
pub(crate) enum RawEvent {
    Event(Event),
    Fork { fd: i32 },
}

/// Decode one message. `thread_id` says whether THREAD_ID was negotiated (otherwise the field is
/// zero and means nothing).
pub(crate) fn decode(msg: &sys::uffd_msg, thread_id: bool) -> RawEvent {
    let a = &msg.arg;
    let ev = match msg.event {
        // pagefault: { u64 flags; u64 address; union { u32 ptid } feat }
        sys::UFFD_EVENT_PAGEFAULT => Event::Pagefault {
            addr: u64_at(a, 1) as usize,
            flags: PagefaultFlags::from_bits(u64_at(a, 0)),
            thread_id: thread_id.then(|| u32_at(a, 16)),
        },
        // fork: { u32 ufd }
        sys::UFFD_EVENT_FORK => {
            return RawEvent::Fork {
                fd: u32_at(a, 0) as i32,
            }
        }
        // remap: { u64 from; u64 to; u64 len }
        sys::UFFD_EVENT_REMAP => Event::Remap {
            from: u64_at(a, 0) as usize,
            to: u64_at(a, 1) as usize,
            len: u64_at(a, 2) as usize,
        },
        // remove/unmap: { u64 start; u64 end }
        sys::UFFD_EVENT_REMOVE => Event::Remove {
            start: u64_at(a, 0) as usize,
            end: u64_at(a, 1) as usize,
        },
        sys::UFFD_EVENT_UNMAP => Event::Unmap {
            start: u64_at(a, 0) as usize,
            end: u64_at(a, 1) as usize,
        },
        event => Event::Unknown { event },
    };
    RawEvent::Event(ev)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(event: u8, words: [u64; 3]) -> sys::uffd_msg {
        let mut arg = [0u8; 24];
        for (i, w) in words.iter().enumerate() {
            arg[i * 8..i * 8 + 8].copy_from_slice(&w.to_ne_bytes());
        }
        sys::uffd_msg {
            event,
            arg,
            ..Default::default()
        }
    }

    #[test]
    fn decodes_pagefault_with_thread_id() {
        let m = msg(
            sys::UFFD_EVENT_PAGEFAULT,
            [
                sys::UFFD_PAGEFAULT_FLAG_WRITE | sys::UFFD_PAGEFAULT_FLAG_WP,
                0x7000_1000,
                1234,
            ],
        );
        match decode(&m, true) {
            RawEvent::Event(Event::Pagefault {
                addr,
                flags,
                thread_id,
            }) => {
                assert_eq!(addr, 0x7000_1000);
                assert!(flags.write && flags.wp && !flags.minor);
                assert_eq!(thread_id, Some(1234));
            }
            _ => panic!("not a pagefault"),
        }
        assert!(matches!(
            decode(&m, false),
            RawEvent::Event(Event::Pagefault {
                thread_id: None,
                ..
            })
        ));
    }

    #[test]
    fn decodes_range_events() {
        let m = msg(sys::UFFD_EVENT_REMAP, [0x1000, 0x9000, 0x2000]);
        assert!(matches!(
            decode(&m, false),
            RawEvent::Event(Event::Remap {
                from: 0x1000,
                to: 0x9000,
                len: 0x2000
            })
        ));
        let m = msg(sys::UFFD_EVENT_REMOVE, [0x1000, 0x3000, 0]);
        assert!(matches!(
            decode(&m, false),
            RawEvent::Event(Event::Remove {
                start: 0x1000,
                end: 0x3000
            })
        ));
        let m = msg(sys::UFFD_EVENT_UNMAP, [0x1000, 0x3000, 0]);
        assert!(matches!(
            decode(&m, false),
            RawEvent::Event(Event::Unmap {
                start: 0x1000,
                end: 0x3000
            })
        ));
        let m = msg(0x7f, [0; 3]);
        assert!(matches!(
            decode(&m, false),
            RawEvent::Event(Event::Unknown { event: 0x7f })
        ));
        let m = msg(sys::UFFD_EVENT_FORK, [7, 0, 0]);
        assert!(matches!(decode(&m, false), RawEvent::Fork { fd: 7 }));
    }
}
