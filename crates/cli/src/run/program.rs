//! The program to run: found on `PATH` as a shell would, and told apart by how it is linked:
//! the preload holds a dynamically linked program from inside, the agent one that ignores
//! `LD_PRELOAD` (statically linked) from outside.

use std::path::{Path, PathBuf};

/// Why the program cannot be run.
#[derive(Debug, thiserror::Error)]
pub enum ProgramError {
    /// Not found (exit status 127).
    #[error("{0}: command not found")]
    NotFound(String),
    /// Found but not runnable (exit status 126).
    #[error("{}: {reason}", path.display())]
    NotRunnable { path: PathBuf, reason: String },
}

impl ProgramError {
    /// The exit status `uzswap run` ends with, as a shell (and `timeout(1)`) would.
    pub fn status(&self) -> u8 {
        match self {
            ProgramError::NotFound(_) => 127,
            ProgramError::NotRunnable { .. } => 126,
        }
    }
}

/// Find `name` as `execvp` would: a name with a slash as it is, else the first executable
/// file of that name in `PATH`.
pub fn find(name: &str) -> Result<PathBuf, ProgramError> {
    if name.contains('/') {
        let path = PathBuf::from(name);
        return match path.exists() {
            true => Ok(path),
            false => Err(ProgramError::NotFound(name.into())),
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| ProgramError::NotFound(name.into()))
}

/// How a program is linked, which decides what holds its memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Linking {
    /// It loads `LD_PRELOAD` (or is a script, whose interpreter does): the preload.
    Dynamic,
    /// A statically linked ELF binary (no program interpreter; a Go program): the agent.
    Static,
}

/// Check that `path` can run: an executable file; and how it is linked.
pub fn check(path: &Path) -> Result<Linking, ProgramError> {
    use std::os::unix::fs::PermissionsExt;
    let refuse = |reason: &str| ProgramError::NotRunnable {
        path: path.into(),
        reason: reason.into(),
    };
    let meta = std::fs::metadata(path).map_err(|e| refuse(&e.to_string()))?;
    if meta.is_dir() {
        return Err(refuse("is a directory"));
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Err(refuse("Permission denied"));
    }
    let head = std::fs::read(path).map_err(|e| refuse(&e.to_string()))?;
    Ok(match is_static_elf(&head) {
        true => Linking::Static,
        false => Linking::Dynamic,
    })
}

/// Whether `bytes` is a 64-bit little-endian ELF file with no `PT_INTERP` program header:
/// statically linked (static-pie included), so the dynamic loader never reads
/// `LD_PRELOAD` for it.
fn is_static_elf(bytes: &[u8]) -> bool {
    const PT_INTERP: u32 = 3;
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" || bytes[4] != 2 || bytes[5] != 1 {
        return false;
    }
    let u16_at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]) as usize;
    let u64_at = |o: usize| {
        bytes
            .get(o..o + 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")) as usize)
    };
    let Some(phoff) = u64_at(32) else {
        return false;
    };
    let (phentsize, phnum) = (u16_at(54), u16_at(56));
    let types: Vec<u32> = (0..phnum)
        .filter_map(|i| {
            let o = phoff.checked_add(i * phentsize)?;
            bytes
                .get(o..o + 4)
                .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
        })
        .collect();
    types.len() == phnum && !types.contains(&PT_INTERP)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binaries_are_told_apart_by_linking_and_a_missing_one_is_127() {
        let sh = find("sh").unwrap();
        assert_eq!(check(&sh).unwrap(), Linking::Dynamic);
        let e = find("no-such-program-uzswap").unwrap_err();
        assert_eq!(e.status(), 127);
        assert_eq!(e.to_string(), "no-such-program-uzswap: command not found");
        let plain = std::env::temp_dir().join(format!("uzswap-program-{}", std::process::id()));
        std::fs::write(&plain, "data").unwrap();
        let e = check(&plain).unwrap_err();
        std::fs::remove_file(&plain).unwrap();
        assert_eq!(e.status(), 126);
        assert!(e.to_string().ends_with("Permission denied"), "{e}");
        assert_eq!(check(Path::new("/sbin/ldconfig")).unwrap(), Linking::Static);
    }
}
