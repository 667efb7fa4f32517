//! The swap file: a backing device on an unnamed, sparse file.
//!
//! Why it looks the way it does (DESIGN invariant 10, reliability note section 4):
//! - it is created with `O_TMPFILE | O_EXCL`: it never has a name, so no other process can
//!   open it by path, no symlink or TOCTOU games are possible, `O_EXCL` forbids ever linking
//!   it into the tree, and the kernel frees it when we exit or crash;
//! - its mode is 0600, set with fchmod so the umask cannot widen or vary it;
//! - a filesystem without O_TMPFILE is an error naming the directory; we never fall back to a
//!   named file;
//! - it is sized to the capacity up front and sparse: a slot never written reads as zeros and
//!   costs no disk; a discarded slot gets its blocks punched out, so old bytes neither stay on
//!   disk nor reach the next reader of that slot;
//! - it is striped over up to [`NR_FILES`] such files, a stripe at a time: writes to one
//!   file serialize on its inode lock, so with several threads writing back one file would
//!   be the bottleneck. A stripe is the owner's write unit, at least 64 KiB (16 slots,
//!   [`FileDevice::create`]; a region's is its folio size): writers take neighbouring slots
//!   of one cluster, which a stripe larger than their folios would put on one file's lock,
//!   and a folio stays one write, where a direct write into a hole takes the inode lock
//!   exclusively and converts an unwritten extent for each stripe it covers (figures:
//!   DESIGN.md section 6);
//! - it is opened with `O_DIRECT` where the filesystem allows: swapped-out pages must leave
//!   memory, as the kernel's swap writes do, not linger in the page cache outside every
//!   limit. Buffers that are not page aligned go through an aligned bounce buffer,
//!   [`BOUNCE_BYTES`] at a time.

use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{FallocateFlags, Mode, OFlags};
use rustix::io::Errno;

use super::device::{check_pages, check_range, BackingDevice, DeviceError};
use super::slots::SwapSlot;
use crate::PAGE_SIZE;

/// The most files a device stripes its slots over.
pub const NR_FILES: u32 = 4;
/// Slots per stripe of `FileDevice::create` (64 KiB), and the least any device takes.
pub const MIN_STRIPE_SLOTS: u32 = 16;

/// The swap file: a backing device on up to [`NR_FILES`] unnamed, sparse files (see the
/// module documentation).
#[derive(Debug)]
pub struct FileDevice {
    /// Stripe `s` (slots `s * stripe_slots..`) lives in file `s % files.len()`.
    files: Vec<File>,
    stripe_slots: u32,
    capacity: u32,
    dir: PathBuf,
    /// Set once the filesystem refused to punch holes; discards then overwrite with zeros,
    /// which costs disk but still keeps old bytes from a later reader.
    no_punch: AtomicBool,
    /// Opened with O_DIRECT: I/O bypasses the page cache and needs page-aligned buffers.
    direct: bool,
}

thread_local! {
    /// Bounce buffer for direct I/O from or to a buffer that is not aligned (`page_aligned`).
    static BOUNCE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `scratch::touch_thread_locals`, for this module's.
pub(crate) fn touch_thread_locals() {
    BOUNCE.with(|_| ());
}

/// `len` bytes of `buf` from a page boundary, in safe Rust: `buf` grown to `len` plus a page
/// and used from its first aligned byte (recomputed each call, since growing may move it).
/// The bytes are whatever the last use left. For direct I/O, which needs aligned memory: a
/// large `Vec` from the allocator starts 16 bytes into a page.
pub fn page_aligned(buf: &mut Vec<u8>, len: usize) -> &mut [u8] {
    if buf.len() < len + PAGE_SIZE {
        buf.resize(len + PAGE_SIZE, 0);
    }
    let addr = buf.as_ptr() as usize;
    let skip = addr.next_multiple_of(PAGE_SIZE) - addr;
    &mut buf[skip..skip + len]
}

fn is_aligned(buf: &[u8]) -> bool {
    (buf.as_ptr() as usize).is_multiple_of(PAGE_SIZE)
}

impl FileDevice {
    /// An unnamed swap file of `capacity_pages` pages in `dir`, or in the system's temporary
    /// directory when `dir` is None; direct I/O where the filesystem supports it.
    pub fn create(dir: Option<&Path>, capacity_pages: u32) -> Result<FileDevice, DeviceError> {
        Self::create_with(dir, capacity_pages, MIN_STRIPE_SLOTS, true)
    }

    /// As `create`, striped `stripe_slots` slots at a time (the largest write the owner makes,
    /// rounded up to a power of two of at least `MIN_STRIPE_SLOTS`), and with buffered I/O
    /// (through the page cache) when `direct` is false.
    pub fn create_with(
        dir: Option<&Path>,
        capacity_pages: u32,
        stripe_slots: u32,
        direct: bool,
    ) -> Result<FileDevice, DeviceError> {
        let stripe_slots = stripe_slots.max(MIN_STRIPE_SLOTS).next_power_of_two();
        let dir = dir
            .map(Path::to_path_buf)
            .unwrap_or_else(std::env::temp_dir);
        let create_err = |errno: Errno| DeviceError::Create {
            reason: create_reason(errno),
            dir: dir.clone(),
            source: errno.into(),
        };
        let flags = OFlags::TMPFILE | OFlags::RDWR | OFlags::EXCL | OFlags::CLOEXEC;
        let open = |direct: bool| {
            let flags = if direct {
                flags | OFlags::DIRECT
            } else {
                flags
            };
            rustix::fs::open(&dir, flags, Mode::from_raw_mode(0o600))
        };
        // A filesystem without direct I/O (EINVAL) gets buffered I/O.
        let (first, direct) = match open(direct) {
            Ok(fd) => (fd, direct),
            Err(Errno::INVAL) if direct => (open(false).map_err(create_err)?, false),
            Err(e) => return Err(create_err(e)),
        };
        let mut first = Some(first);
        let nr_stripes = capacity_pages.div_ceil(stripe_slots).max(1);
        let nr_files = nr_stripes.min(NR_FILES);
        let mut files = Vec::with_capacity(nr_files as usize);
        for f in 0..nr_files {
            let fd = match first.take() {
                Some(fd) => fd,
                None => open(direct).map_err(create_err)?,
            };
            // O_TMPFILE's mode goes through the umask; fchmod makes it exactly 0600.
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o600)).map_err(create_err)?;
            // Sized up front so every slot inside the capacity is readable (as a hole:
            // zeros), and a read that meets EOF inside it means the file was cut under us.
            let pages: u32 = (f..nr_stripes)
                .step_by(nr_files as usize)
                .map(|s| (capacity_pages - s * stripe_slots).min(stripe_slots))
                .sum();
            rustix::fs::ftruncate(&fd, u64::from(pages) * PAGE_SIZE as u64).map_err(create_err)?;
            files.push(File::from(uffd::descriptors::out_of_reach(fd)));
        }
        Ok(FileDevice {
            files,
            stripe_slots,
            capacity: capacity_pages,
            dir,
            no_punch: AtomicBool::new(false),
            direct,
        })
    }

    /// Whether I/O bypasses the page cache (O_DIRECT).
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// The files behind the device, in stripe order.
    pub fn files(&self) -> &[File] {
        &self.files
    }

    /// 512-byte blocks the files hold on disk (what hole punching gives back).
    pub fn disk_blocks(&self) -> u64 {
        self.files
            .iter()
            .filter_map(|f| rustix::fs::fstat(f).ok())
            .map(|st| st.st_blocks as u64)
            .sum()
    }

    /// Where the `nr` slots from `slot` live: pieces that each stay inside one stripe, as
    /// (file, byte offset in it, index of the piece's first page among the `nr`, pages).
    fn pieces(&self, slot: SwapSlot, nr: u32) -> impl Iterator<Item = (&File, u64, usize, usize)> {
        let nr_files = self.files.len() as u32;
        let mut s = slot.0;
        let end = slot.0 + nr;
        std::iter::from_fn(move || {
            if s >= end {
                return None;
            }
            let stripe = s / self.stripe_slots;
            let n = (self.stripe_slots - s % self.stripe_slots).min(end - s);
            let in_file = (stripe / nr_files) * self.stripe_slots + s % self.stripe_slots;
            let piece = (
                &self.files[(stripe % nr_files) as usize],
                u64::from(in_file) * PAGE_SIZE as u64,
                (s - slot.0) as usize,
                n as usize,
            );
            s += n;
            Some(piece)
        })
    }

    /// Pages the device holds.
    pub fn capacity_pages(&self) -> u32 {
        self.capacity
    }

    /// The directory whose filesystem holds the file (it has no name of its own).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn write_zeros(&self, slot: SwapSlot, nr_pages: u32) -> Result<(), DeviceError> {
        let zeros = [0u8; PAGE_SIZE];
        for i in 0..nr_pages {
            self.write(SwapSlot(slot.0 + i), &zeros)?;
        }
        Ok(())
    }
}

/// What to tell the user about a failed O_TMPFILE open.
fn create_reason(errno: Errno) -> String {
    match errno {
        Errno::OPNOTSUPP => "its filesystem does not support O_TMPFILE".into(),
        // Kernels without O_TMPFILE see only the O_DIRECTORY bit inside it.
        Errno::ISDIR => "the kernel does not support O_TMPFILE".into(),
        Errno::NOENT => "the directory does not exist".into(),
        Errno::NOTDIR => "not a directory".into(),
        Errno::ACCESS | Errno::PERM => "permission denied".into(),
        Errno::ROFS => "read-only filesystem".into(),
        other => std::io::Error::from(other).to_string(),
    }
}

fn write_all_at(file: &File, data: &[u8], offset: u64) -> Result<(), DeviceError> {
    let mut done = 0;
    while done < data.len() {
        match file.write_at(&data[done..], offset + done as u64) {
            // The OS wrote nothing and gave no error: it will not make progress.
            Ok(0) => {
                return Err(DeviceError::ShortWrite {
                    written: done,
                    expected: data.len(),
                })
            }
            Ok(n) => done += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

fn read_exact_at(file: &File, out: &mut [u8], offset: u64) -> Result<(), DeviceError> {
    let expected = out.len();
    let mut done = 0;
    while done < expected {
        match file.read_at(&mut out[done..], offset + done as u64) {
            // EOF inside the capacity: the file was truncated under us. Never hand out zeros
            // for data we lost (invariant 7).
            Ok(0) => {
                return Err(DeviceError::ShortRead {
                    read: done,
                    expected,
                })
            }
            Ok(n) => done += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// The most a bounce buffer holds: unaligned I/O larger than this goes through it in parts,
/// so each thread's bounce buffer stays this small whatever the stripe (an owner charges it).
pub const BOUNCE_BYTES: usize = 64 << 10;

/// Whether this thread holds a bounce buffer (it has done I/O from or to an unaligned buffer:
/// the bounce buffer is allocated on first use and kept).
pub fn bounce_held() -> bool {
    BOUNCE
        .try_with(|b| b.try_borrow().is_ok_and(|b| b.capacity() > 0))
        .unwrap_or(false)
}

/// `write_all_at` of an unaligned `chunk` through this thread's bounce buffer, a part of at
/// most `BOUNCE_BYTES` at a time.
fn write_bounced(file: &File, chunk: &[u8], offset: u64) -> Result<(), DeviceError> {
    crate::scratch::with(&BOUNCE, Default::default, |b| {
        let mut b = b.borrow_mut();
        for (k, part) in chunk.chunks(BOUNCE_BYTES).enumerate() {
            let at = k * BOUNCE_BYTES;
            let bounce = page_aligned(&mut b, part.len());
            bounce.copy_from_slice(part);
            write_all_at(file, bounce, offset + at as u64).map_err(|e| match e {
                DeviceError::ShortWrite { written, .. } => DeviceError::ShortWrite {
                    written: at + written,
                    expected: chunk.len(),
                },
                e => e,
            })?;
        }
        Ok(())
    })
}

/// `read_exact_at` into an unaligned `chunk` through this thread's bounce buffer, a part of
/// at most `BOUNCE_BYTES` at a time.
fn read_bounced(file: &File, chunk: &mut [u8], offset: u64) -> Result<(), DeviceError> {
    crate::scratch::with(&BOUNCE, Default::default, |b| {
        let mut b = b.borrow_mut();
        let expected = chunk.len();
        for (k, part) in chunk.chunks_mut(BOUNCE_BYTES).enumerate() {
            let at = k * BOUNCE_BYTES;
            let bounce = page_aligned(&mut b, part.len());
            read_exact_at(file, bounce, offset + at as u64).map_err(|e| match e {
                DeviceError::ShortRead { read, .. } => DeviceError::ShortRead {
                    read: at + read,
                    expected,
                },
                e => e,
            })?;
            part.copy_from_slice(bounce);
        }
        Ok(())
    })
}

impl BackingDevice for FileDevice {
    fn write(&self, slot: SwapSlot, data: &[u8]) -> Result<(), DeviceError> {
        check_range(slot, data.len(), self.capacity)?;
        for (file, offset, first, n) in self.pieces(slot, (data.len() / PAGE_SIZE) as u32) {
            let chunk = &data[first * PAGE_SIZE..(first + n) * PAGE_SIZE];
            let written = if self.direct && !is_aligned(chunk) {
                write_bounced(file, chunk, offset)
            } else {
                write_all_at(file, chunk, offset)
            };
            written.map_err(|e| match e {
                DeviceError::ShortWrite { written, .. } => DeviceError::ShortWrite {
                    written: first * PAGE_SIZE + written,
                    expected: data.len(),
                },
                e => e,
            })?;
        }
        Ok(())
    }

    fn read(&self, slot: SwapSlot, out: &mut [u8]) -> Result<(), DeviceError> {
        check_range(slot, out.len(), self.capacity)?;
        let expected = out.len();
        for (file, offset, first, n) in self.pieces(slot, (out.len() / PAGE_SIZE) as u32) {
            let chunk = &mut out[first * PAGE_SIZE..(first + n) * PAGE_SIZE];
            let read = if self.direct && !is_aligned(chunk) {
                read_bounced(file, chunk, offset)
            } else {
                read_exact_at(file, chunk, offset)
            };
            read.map_err(|e| match e {
                DeviceError::ShortRead { read, .. } => DeviceError::ShortRead {
                    read: first * PAGE_SIZE + read,
                    expected,
                },
                e => e,
            })?;
        }
        Ok(())
    }

    fn discard(&self, slot: SwapSlot, nr_pages: u32) -> Result<(), DeviceError> {
        check_pages(slot, u64::from(nr_pages), self.capacity)?;
        if nr_pages == 0 {
            return Ok(());
        }
        if !self.no_punch.load(Ordering::Relaxed) {
            for (file, offset, _, n) in self.pieces(slot, nr_pages) {
                loop {
                    match rustix::fs::fallocate(
                        file,
                        FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
                        offset,
                        (n * PAGE_SIZE) as u64,
                    ) {
                        Ok(()) => break,
                        Err(Errno::INTR) => continue,
                        Err(Errno::OPNOTSUPP) => {
                            self.no_punch.store(true, Ordering::Relaxed);
                            return self.write_zeros(slot, nr_pages);
                        }
                        Err(e) => return Err(std::io::Error::from(e).into()),
                    }
                }
            }
            return Ok(());
        }
        self.write_zeros(slot, nr_pages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn size(dev: &FileDevice) -> u64 {
        dev.files()
            .iter()
            .map(|f| rustix::fs::fstat(f).unwrap().st_size as u64)
            .sum()
    }

    fn page(seed: u8) -> Vec<u8> {
        (0..PAGE_SIZE)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    fn pages(seed: u8, n: usize) -> Vec<u8> {
        (0..n)
            .flat_map(|i| page(seed.wrapping_add(i as u8)))
            .collect()
    }

    #[test]
    fn file_has_no_name() {
        let dev = FileDevice::create(None, 4096).unwrap();
        assert_eq!(dev.files().len(), NR_FILES as usize);
        for f in dev.files() {
            let st = rustix::fs::fstat(f).unwrap();
            assert_eq!(st.st_nlink, 0);
            assert_eq!(st.st_mode & 0o7777, 0o600);
            let link = std::fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd())).unwrap();
            let link = link.to_string_lossy();
            assert!(
                link.ends_with("(deleted)") || link.starts_with("/#"),
                "fd points at {link}"
            );
        }
        assert_eq!(size(&dev), 4096 * PAGE_SIZE as u64);
    }

    #[test]
    fn mode_is_0600() {
        let dev = FileDevice::create(None, 1).unwrap();
        assert_eq!(dev.files().len(), 1);
        let st = rustix::fs::fstat(&dev.files()[0]).unwrap();
        assert_eq!(st.st_mode & 0o7777, 0o600);
        assert_eq!(st.st_size as u64, PAGE_SIZE as u64);
    }

    #[test]
    fn round_trip_at_various_slots() {
        let dev = FileDevice::create(None, 1024).unwrap();
        let cases = [
            (0u32, 1usize),
            (1, 4),
            (7, 16),
            (400, 512),
            (1023, 1),
            (100, 3),
        ];
        for (i, &(slot, n)) in cases.iter().enumerate() {
            dev.write(SwapSlot(slot), &pages(i as u8, n)).unwrap();
        }
        // Read back in another order, after everything is written.
        let mut out = vec![0u8; 512 * PAGE_SIZE];
        dev.read(SwapSlot(400), &mut out).unwrap();
        assert!(out == pages(3, 512));
        let mut out = vec![0u8; 3 * PAGE_SIZE];
        dev.read(SwapSlot(100), &mut out).unwrap();
        assert!(out == pages(5, 3));
        let mut out = vec![0u8; 16 * PAGE_SIZE];
        dev.read(SwapSlot(7), &mut out).unwrap();
        assert!(out == pages(2, 16));
        let mut out = vec![0u8; PAGE_SIZE];
        dev.read(SwapSlot(1023), &mut out).unwrap();
        assert!(out == page(4));
        dev.read(SwapSlot(0), &mut out).unwrap();
        assert!(out == page(0));
    }

    #[test]
    fn runs_across_stripes_and_files_round_trip() {
        // For the default stripe and a 2 MiB one (a region of 2 MiB folios), and one asked
        // for that is not a power of two: stripes over 4 files three times round, the last
        // one short; every slot addressable, none aliased.
        for (asked, stripe) in [(MIN_STRIPE_SLOTS, 16u32), (512, 512), (100, 128)] {
            let cap = 12 * stripe + 5;
            let dev = FileDevice::create_with(None, cap, asked, true).unwrap();
            assert_eq!(size(&dev), u64::from(cap) * PAGE_SIZE as u64);
            // A whole stripe is one write, into one file.
            assert_eq!(dev.pieces(SwapSlot(stripe), stripe).count(), 1);
            assert_eq!(dev.pieces(SwapSlot(stripe - 1), 2).count(), 2);
            let all = pages(1, cap as usize);
            // Written in unaligned runs that cross stripe (and file) boundaries.
            let mut slot = 0u32;
            for n in [3u32, 37, 1, 15, 17, 16, 64, stripe + 3].iter().cycle() {
                let n = (*n).min(cap - slot);
                let range = slot as usize * PAGE_SIZE..(slot + n) as usize * PAGE_SIZE;
                dev.write(SwapSlot(slot), &all[range]).unwrap();
                slot += n;
                if slot == cap {
                    break;
                }
            }
            let mut out = vec![0u8; all.len()];
            dev.read(SwapSlot(0), &mut out).unwrap();
            assert!(out == all, "stripe {stripe}");
            let gone = stripe as usize - 3..3 * stripe as usize + 6;
            dev.discard(SwapSlot(gone.start as u32), gone.len() as u32)
                .unwrap();
            dev.read(SwapSlot(0), &mut out).unwrap();
            for (i, (got, want)) in out.chunks(PAGE_SIZE).zip(all.chunks(PAGE_SIZE)).enumerate() {
                if gone.contains(&i) {
                    assert!(
                        got.iter().all(|&b| b == 0),
                        "slot {i} kept data after discard (stripe {stripe})"
                    );
                } else {
                    assert!(got == want, "slot {i} (stripe {stripe})");
                }
            }
        }
    }

    #[test]
    fn unaligned_buffers_round_trip_with_and_without_direct_io() {
        for direct in [true, false] {
            let dev = FileDevice::create_with(None, 64, MIN_STRIPE_SLOTS, direct).unwrap();
            // Off by one byte from any alignment the allocator gave.
            let mut data = vec![0u8; 3 * PAGE_SIZE + 1];
            data[1..].copy_from_slice(&pages(5, 3));
            dev.write(SwapSlot(14), &data[1..]).unwrap(); // across a stripe boundary
            let mut out = vec![0u8; 3 * PAGE_SIZE + 1];
            dev.read(SwapSlot(14), &mut out[1..]).unwrap();
            assert!(out[1..] == data[1..], "direct {direct}");
        }
        // This machine's temp dir (ext4, tmpfs) does direct I/O; the page cache stays clean.
        assert!(FileDevice::create(None, 1).unwrap().is_direct());
    }

    /// A 2 MiB piece (a 512-slot stripe) from and to unaligned memory goes through the bounce
    /// buffer a part at a time: the buffer stays `BOUNCE_BYTES`, what an owner charges for it,
    /// however wide the stripe.
    #[test]
    fn unaligned_io_bounces_a_part_at_a_time() {
        let dev = FileDevice::create_with(None, 1024, 512, true).unwrap();
        assert!(dev.is_direct());
        let mut data = vec![0u8; 512 * PAGE_SIZE + 1];
        data[1..].copy_from_slice(&pages(9, 512));
        dev.write(SwapSlot(512), &data[1..]).unwrap();
        let mut out = vec![0u8; 512 * PAGE_SIZE + 1];
        dev.read(SwapSlot(512), &mut out[1..]).unwrap();
        assert!(out[1..] == data[1..]);
        let held = crate::scratch::with(&BOUNCE, Default::default, |b| b.borrow().len());
        assert!(
            held <= BOUNCE_BYTES + PAGE_SIZE,
            "bounce buffer of {held} bytes"
        );
    }

    #[test]
    fn never_written_slot_reads_zeros() {
        let dev = FileDevice::create(None, 8).unwrap();
        let mut out = vec![0xaau8; 2 * PAGE_SIZE];
        dev.read(SwapSlot(6), &mut out).unwrap();
        assert!(out.iter().all(|&b| b == 0));
    }

    #[test]
    fn discard_frees_blocks_and_reads_zeros() {
        let dev = FileDevice::create(None, 256).unwrap();
        dev.write(SwapSlot(0), &pages(9, 256)).unwrap();
        let before = dev.disk_blocks();
        dev.discard(SwapSlot(64), 128).unwrap();
        let after = dev.disk_blocks();
        assert!(after < before, "st_blocks {before} -> {after}");
        let mut out = vec![0xffu8; 128 * PAGE_SIZE];
        dev.read(SwapSlot(64), &mut out).unwrap();
        assert!(out.iter().all(|&b| b == 0));
        // The neighbours keep their data.
        let mut out = vec![0u8; PAGE_SIZE];
        dev.read(SwapSlot(63), &mut out).unwrap();
        assert!(out == page(9u8.wrapping_add(63)));
        dev.read(SwapSlot(192), &mut out).unwrap();
        assert!(out == page(9u8.wrapping_add(192)));
        // Size is kept: the slots stay addressable.
        assert_eq!(size(&dev), 256 * PAGE_SIZE as u64);
    }

    #[test]
    fn missing_directory_is_a_clear_error() {
        let dir = Path::new("/nonexistent/uzswap-test-dir");
        let err = FileDevice::create(Some(dir), 4).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("/nonexistent/uzswap-test-dir"), "{msg}");
        assert!(msg.contains("does not exist"), "{msg}");
        assert!(matches!(err, DeviceError::Create { .. }));
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
    }

    #[test]
    fn regular_file_as_directory_is_a_clear_error() {
        let err = FileDevice::create(Some(Path::new("/proc/self/status")), 4).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("/proc/self/status"), "{msg}");
        assert!(matches!(err, DeviceError::Create { .. }));
    }

    #[test]
    fn filesystem_without_tmpfile_is_refused() {
        // procfs has no O_TMPFILE; the error must name the directory, and no file appears.
        let err = FileDevice::create(Some(Path::new("/proc")), 4).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("/proc"), "{msg}");
        assert!(msg.contains("O_TMPFILE"), "{msg}");
        // Unsupported (as root) or refused (the directory is not writable by others).
        assert!(
            matches!(
                err.raw_os_error(),
                Some(libc::EOPNOTSUPP) | Some(libc::EACCES)
            ),
            "{msg}"
        );
    }

    #[test]
    fn out_of_range_and_bad_lengths_are_refused() {
        let dev = FileDevice::create(None, 4).unwrap();
        assert!(matches!(
            dev.write(SwapSlot(4), &page(0)),
            Err(DeviceError::OutOfRange { .. })
        ));
        assert!(matches!(
            dev.write(SwapSlot(3), &pages(0, 2)),
            Err(DeviceError::OutOfRange { .. })
        ));
        assert!(matches!(
            dev.write(SwapSlot(0), &[0u8; 100]),
            Err(DeviceError::BadLength { len: 100 })
        ));
        assert!(matches!(
            dev.read(SwapSlot(0), &mut []),
            Err(DeviceError::BadLength { len: 0 })
        ));
        assert!(matches!(
            dev.discard(SwapSlot(2), 3),
            Err(DeviceError::OutOfRange { .. })
        ));
        // The file did not grow past its capacity.
        assert_eq!(size(&dev), 4 * PAGE_SIZE as u64);
    }
}
