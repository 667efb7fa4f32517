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
//!   disk nor reach the next reader of that slot.

use std::fs::File;
use std::io::ErrorKind;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{FallocateFlags, Mode, OFlags};
use rustix::io::Errno;

use super::device::{check_pages, check_range, BackingDevice, DeviceError};
use super::slots::SwapSlot;
use crate::PAGE_SIZE;

#[derive(Debug)]
pub struct FileDevice {
    file: File,
    capacity: u32,
    dir: PathBuf,
    /// Set once the filesystem refused to punch holes; discards then overwrite with zeros,
    /// which costs disk but still keeps old bytes from a later reader.
    no_punch: AtomicBool,
}

impl FileDevice {
    /// An unnamed swap file of `capacity_pages` pages in `dir`, or in the system's temporary
    /// directory when `dir` is None.
    pub fn create(dir: Option<&Path>, capacity_pages: u32) -> Result<FileDevice, DeviceError> {
        let dir = dir
            .map(Path::to_path_buf)
            .unwrap_or_else(std::env::temp_dir);
        let create_err = |errno: Errno| DeviceError::Create {
            reason: create_reason(errno),
            dir: dir.clone(),
            source: errno.into(),
        };
        let fd = rustix::fs::open(
            &dir,
            OFlags::TMPFILE | OFlags::RDWR | OFlags::EXCL | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .map_err(create_err)?;
        // O_TMPFILE's mode goes through the umask; fchmod makes it exactly 0600.
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o600)).map_err(create_err)?;
        // Sized up front so every slot inside the capacity is readable (as a hole: zeros),
        // and a read that meets EOF inside it means the file was cut under us, an error.
        rustix::fs::ftruncate(&fd, u64::from(capacity_pages) * PAGE_SIZE as u64)
            .map_err(create_err)?;
        Ok(FileDevice {
            file: File::from(fd),
            capacity: capacity_pages,
            dir,
            no_punch: AtomicBool::new(false),
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

impl AsFd for FileDevice {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

impl BackingDevice for FileDevice {
    fn write(&self, slot: SwapSlot, data: &[u8]) -> Result<(), DeviceError> {
        check_range(slot, data.len(), self.capacity)?;
        let offset = slot.byte_offset();
        let mut done = 0;
        while done < data.len() {
            match self.file.write_at(&data[done..], offset + done as u64) {
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

    fn read(&self, slot: SwapSlot, out: &mut [u8]) -> Result<(), DeviceError> {
        check_range(slot, out.len(), self.capacity)?;
        let offset = slot.byte_offset();
        let expected = out.len();
        let mut done = 0;
        while done < expected {
            match self.file.read_at(&mut out[done..], offset + done as u64) {
                // EOF inside the capacity: the file was truncated under us. Never hand out
                // zeros for data we lost (invariant 7).
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

    fn discard(&self, slot: SwapSlot, nr_pages: u32) -> Result<(), DeviceError> {
        check_pages(slot, u64::from(nr_pages), self.capacity)?;
        if nr_pages == 0 {
            return Ok(());
        }
        if !self.no_punch.load(Ordering::Relaxed) {
            let len = u64::from(nr_pages) * PAGE_SIZE as u64;
            match rustix::fs::fallocate(
                &self.file,
                FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
                slot.byte_offset(),
                len,
            ) {
                Ok(()) => return Ok(()),
                Err(Errno::OPNOTSUPP) => self.no_punch.store(true, Ordering::Relaxed),
                Err(Errno::INTR) => return self.discard(slot, nr_pages),
                Err(e) => return Err(std::io::Error::from(e).into()),
            }
        }
        self.write_zeros(slot, nr_pages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

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
        let dev = FileDevice::create(None, 16).unwrap();
        let st = rustix::fs::fstat(&dev).unwrap();
        assert_eq!(st.st_nlink, 0);
        let link =
            std::fs::read_link(format!("/proc/self/fd/{}", dev.as_fd().as_raw_fd())).unwrap();
        let link = link.to_string_lossy();
        assert!(
            link.ends_with("(deleted)") || link.starts_with("/#"),
            "fd points at {link}"
        );
    }

    #[test]
    fn mode_is_0600() {
        let dev = FileDevice::create(None, 1).unwrap();
        let st = rustix::fs::fstat(&dev).unwrap();
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
        let before = rustix::fs::fstat(&dev).unwrap().st_blocks;
        dev.discard(SwapSlot(64), 128).unwrap();
        let after = rustix::fs::fstat(&dev).unwrap().st_blocks;
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
        assert_eq!(
            rustix::fs::fstat(&dev).unwrap().st_size as u64,
            256 * PAGE_SIZE as u64
        );
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
        assert_eq!(
            rustix::fs::fstat(&dev).unwrap().st_size as u64,
            4 * PAGE_SIZE as u64
        );
    }
}
