//! Page files: raw memory pages, 4096 bytes each, no header (the format of
//! corpus/*.pages). Loaded whole: a file is a few MiB.

use std::path::{Path, PathBuf};

use zswap::PAGE_SIZE;

/// A page file that cannot be used; the message names the file and says what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum PageFileError {
    /// The file cannot be read.
    #[error("{path}: cannot read")]
    Read {
        /// The file as given.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is empty.
    #[error("{path}: empty file, expected pages of {PAGE_SIZE} bytes")]
    Empty {
        /// The file as given.
        path: PathBuf,
    },
    /// The file's size is not a whole number of pages.
    #[error("{path}: size {len} bytes is not a multiple of the {PAGE_SIZE}-byte page size")]
    NotWholePages {
        /// The file as given.
        path: PathBuf,
        /// Its size in bytes.
        len: usize,
    },
}

/// One loaded page file.
#[derive(Debug, Clone)]
pub struct PageFile {
    /// The file's path as given.
    pub path: PathBuf,
    /// The file name without its directory, for tables and JSON.
    pub name: String,
    /// The pages, back to back; the length is a non-zero multiple of `PAGE_SIZE`.
    pub data: Vec<u8>,
}

impl PageFile {
    /// The number of pages in the file.
    pub fn nr_pages(&self) -> usize {
        self.data.len() / PAGE_SIZE
    }

    /// The pages, one 4096-byte slice each.
    pub fn pages(&self) -> std::slice::ChunksExact<'_, u8> {
        self.data.chunks_exact(PAGE_SIZE)
    }
}

/// Load every file, in order. The first bad file is an error whose one-line message names
/// it and says what is wrong, because that line is all the command prints.
pub fn load_page_files(paths: &[PathBuf]) -> Result<Vec<PageFile>, PageFileError> {
    paths.iter().map(|p| load_page_file(p)).collect()
}

fn load_page_file(path: &Path) -> Result<PageFile, PageFileError> {
    let data = std::fs::read(path).map_err(|source| PageFileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    if data.is_empty() {
        return Err(PageFileError::Empty {
            path: path.to_path_buf(),
        });
    }
    if data.len() % PAGE_SIZE != 0 {
        return Err(PageFileError::NotWholePages {
            path: path.to_path_buf(),
            len: data.len(),
        });
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    Ok(PageFile {
        path: path.to_path_buf(),
        name,
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory of one test's own (tests run in parallel), removed when dropped.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(test: &str) -> TempDir {
            let dir = std::env::temp_dir()
                .join(format!("uzswap-pages-test-{}-{test}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }

        fn file(&self, name: &str, len: usize) -> PathBuf {
            let path = self.0.join(name);
            std::fs::write(&path, vec![7u8; len]).unwrap();
            path
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn loads_whole_pages() {
        let dir = TempDir::new("whole");
        let path = dir.file("two.pages", 2 * PAGE_SIZE);
        let files = load_page_files(std::slice::from_ref(&path)).unwrap();
        assert_eq!(files[0].name, "two.pages");
        assert_eq!(files[0].nr_pages(), 2);
        assert_eq!(files[0].pages().count(), 2);
    }

    #[test]
    fn bad_files_name_the_file_and_the_problem() {
        let dir = TempDir::new("bad");
        let cases = [
            (dir.file("empty.pages", 0), "empty file"),
            (
                dir.file("odd.pages", PAGE_SIZE + 1),
                "size 4097 bytes is not a multiple",
            ),
            (PathBuf::from("/nonexistent/x.pages"), "cannot read"),
        ];
        for (path, what) in cases {
            let msg = load_page_files(std::slice::from_ref(&path))
                .unwrap_err()
                .to_string();
            assert!(msg.contains(&path.display().to_string()), "{msg}");
            assert!(msg.contains(what), "{msg}");
            assert!(!msg.contains('\n'), "{msg}");
        }
    }
}
