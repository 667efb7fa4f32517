//! The repository's corpus (`corpus/*.pages` at its root), built into the binary: the
//! benchmarks' default content wherever the binary runs, with no path to resolve. 6 MiB.

/// Each file's name and pages, in name order.
pub const FILES: &[(&str, &[u8])] = &[
    (
        "gcc-cc1-zstd.pages",
        include_bytes!("../../../../corpus/gcc-cc1-zstd.pages"),
    ),
    (
        "node-objects.pages",
        include_bytes!("../../../../corpus/node-objects.pages"),
    ),
    (
        "python-objects.pages",
        include_bytes!("../../../../corpus/python-objects.pages"),
    ),
    (
        "sqlite-memdb.pages",
        include_bytes!("../../../../corpus/sqlite-memdb.pages"),
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The built-in files are the repository's `corpus/*.pages`, all of them, whole pages.
    #[test]
    fn built_in_files_are_the_corpus_directory() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../corpus");
        let mut on_disk: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "pages"))
            .map(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                (name, std::fs::read(&p).unwrap())
            })
            .collect();
        on_disk.sort();
        let built_in: Vec<(String, Vec<u8>)> = FILES
            .iter()
            .map(|(n, d)| (n.to_string(), d.to_vec()))
            .collect();
        assert_eq!(
            built_in.iter().map(|f| &f.0).collect::<Vec<_>>(),
            on_disk.iter().map(|f| &f.0).collect::<Vec<_>>()
        );
        assert!(built_in == on_disk, "a built-in file differs from corpus/");
        for (name, data) in FILES {
            assert!(
                !data.is_empty()
                    && data
                        .len()
                        .is_multiple_of(crate::corpus::capture::BLOCK_BYTES),
                "{name}"
            );
        }
    }
}
