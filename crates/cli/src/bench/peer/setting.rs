//! A setting of the kernel's (a file under /sys or /proc): read, trimmed, or written, with
//! the path in the error.

use std::path::Path;

use super::PeerError;

/// The setting at `p`, without surrounding whitespace.
pub(super) fn read_trim(p: &Path) -> Result<String, PeerError> {
    Ok(std::fs::read_to_string(p)
        .map_err(|source| PeerError::Read {
            path: p.to_path_buf(),
            source,
        })?
        .trim()
        .to_string())
}

/// Write `v` to the setting at `p`.
pub(super) fn write_setting(p: &Path, v: &str) -> Result<(), PeerError> {
    std::fs::write(p, v).map_err(|source| PeerError::Write {
        path: p.to_path_buf(),
        value: v.to_string(),
        source,
    })
}
