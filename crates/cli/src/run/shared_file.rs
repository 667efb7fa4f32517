//! Files `uzswap run` shares with the program's processes: where the preload writes the
//! program's statistics when it exits (`uzswap run --stats`, `uzswap bench run`), and the
//! ledger of the process tree (crates/preload/src/tree.rs). Each is a memfd of this process,
//! which the preload opens by its `/proc/PID/fd/N` path. Nothing is made in any directory, so
//! nothing is left behind whatever ends this process (`kill -9` included), and once this
//! process is gone the path opens nothing. Only this process's user and root may open it
//! (the `/proc/PID/fd` access check).

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// One such file.
pub struct SharedFile {
    /// Held open for the path to stay valid; close-on-exec, so the program does not get it.
    file: std::fs::File,
    path: PathBuf,
}

/// The tree's ledger's size, and its header's magic and where it is (crates/preload/src/tree.rs:
/// `LEDGER_BYTES`, `MAGIC`, `Header::magic`).
pub const LEDGER_BYTES: u64 = 64 << 10;
const LEDGER_MAGIC: u64 = u64::from_le_bytes(*b"uzswtree");
const LEDGER_MAGIC_OFFSET: u64 = 16;

impl SharedFile {
    /// A new, empty one, for the statistics at exit.
    pub fn new() -> Result<SharedFile, String> {
        Self::named("uzswap-stats", 0)
    }

    /// A new ledger for the process tree: `LEDGER_BYTES` of zeros but the magic the preload
    /// looks for (`LEDGER_MAGIC` at `LEDGER_MAGIC_OFFSET`), sealed against any change of size
    /// (a shrink would make every process's mapping of it fault).
    pub fn ledger() -> Result<SharedFile, String> {
        use std::os::unix::fs::FileExt;
        let ledger = Self::named("uzswap-tree", LEDGER_BYTES)?;
        let seals = rustix::fs::SealFlags::SHRINK
            | rustix::fs::SealFlags::GROW
            | rustix::fs::SealFlags::SEAL;
        ledger
            .file
            .write_all_at(&LEDGER_MAGIC.to_le_bytes(), LEDGER_MAGIC_OFFSET)
            .map_err(|e| format!("cannot write the tree's ledger: {e}"))?;
        rustix::fs::fcntl_add_seals(&ledger.file, seals)
            .map_err(|e| format!("cannot seal the tree's ledger: {e}"))?;
        Ok(ledger)
    }

    fn named(name: &str, len: u64) -> Result<SharedFile, String> {
        let flags = rustix::fs::MemfdFlags::CLOEXEC | rustix::fs::MemfdFlags::ALLOW_SEALING;
        let fd = rustix::fs::memfd_create(name, flags)
            .map_err(|e| format!("cannot make {name} (memfd_create): {e}"))?;
        let file = std::fs::File::from(fd);
        file.set_len(len)
            .map_err(|e| format!("cannot size {name}: {e}"))?;
        let path = PathBuf::from(format!(
            "/proc/{}/fd/{}",
            std::process::id(),
            file.as_raw_fd()
        ));
        Ok(SharedFile { file, path })
    }

    /// The path the preload opens.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the program wrote: empty if it wrote nothing (it did not exit normally).
    pub fn read(&self) -> String {
        use std::os::unix::fs::FileExt;
        let mut text = Vec::new();
        let mut buf = [0u8; 16 << 10];
        loop {
            match self.file.read_at(&mut buf, text.len() as u64) {
                Ok(0) | Err(_) => break,
                Ok(n) => text.extend_from_slice(&buf[..n]),
            }
        }
        String::from_utf8_lossy(&text).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_written_through_the_path_is_read_back_and_no_file_is_made() {
        let f = SharedFile::new().unwrap();
        assert_eq!(f.read(), "");
        assert!(f.path().starts_with("/proc"));
        std::fs::write(f.path(), "uzswap-stats 1\nzswpout 3\n").unwrap();
        assert_eq!(f.read(), "uzswap-stats 1\nzswpout 3\n");
        // A shorter text written again replaces the first (the preload truncates).
        std::fs::write(f.path(), "x\n").unwrap();
        assert_eq!(f.read(), "x\n");
        let path = f.path().to_owned();
        drop(f);
        assert!(std::fs::OpenOptions::new().write(true).open(path).is_err());
        let ledger = SharedFile::ledger().unwrap();
        assert_eq!(
            std::fs::metadata(ledger.path()).unwrap().len(),
            LEDGER_BYTES
        );
        // Sealed: no process of the tree can shrink it under the others' mappings.
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(ledger.path())
            .unwrap();
        assert!(f.set_len(4096).is_err());
        assert_eq!(&ledger.read().as_bytes()[16..24], b"uzswtree");
    }
}
