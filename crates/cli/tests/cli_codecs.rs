//! The `uzswap bench codecs` command as a user runs it: the built binary, real page files.

use std::path::PathBuf;

mod common;
use common::{assert_one_line_error, stderr, uzswap};

fn corpus_file() -> PathBuf {
    let p = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../corpus/python-objects.pages"
    ));
    assert!(p.exists(), "corpus missing: {}", p.display());
    p
}

#[test]
fn table_for_a_corpus_file() {
    let file = corpus_file();
    let o = uzswap(&[
        "bench",
        "codecs",
        "--pages",
        file.to_str().unwrap(),
        "--compressor",
        "lz4",
        "zstd:-1",
        "--seconds",
        "0.005",
    ]);
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    // The header, a row per codec and unit, the verdict.
    assert_eq!(lines.len(), 1 + 2 * 2 + 1, "{out}");
    let verdict = lines[5];
    assert!(
        verdict.starts_with("verified: every unit of 1 file came back intact from each codec")
            && verdict.contains("lz4 ratio ")
            && verdict.contains("zstd:-1 ratio "),
        "{out}"
    );
    let lines = &lines[..5];
    assert!(
        lines[0].contains("compress MB/s") && lines[0].contains("ratio"),
        "{out}"
    );
    for (line, codec, unit) in [
        (lines[1], "lz4", "4K"),
        (lines[2], "lz4", "64K"),
        (lines[3], "zstd:-1", "4K"),
        (lines[4], "zstd:-1", "64K"),
    ] {
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cols[0], "python-objects.pages", "{line}");
        assert_eq!(cols[1], codec, "{line}");
        assert_eq!(cols[2], unit, "{line}");
        let ratio: f64 = cols[5].parse().unwrap();
        assert!(ratio > 1.5, "{line}");
    }
    // Aligned: every row as long as the header.
    assert!(lines.iter().all(|l| l.len() == lines[0].len()), "{out}");
}

#[test]
fn json_is_one_object() {
    let file = corpus_file();
    let o = uzswap(&[
        "bench",
        "codecs",
        "--pages",
        file.to_str().unwrap(),
        "--json",
        "--seconds",
        "0.005",
    ]);
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON value");
    let results = v["results"].as_array().unwrap();
    // The default codecs, two unit sizes each.
    assert_eq!(results.len(), 3 * 2);
    let codecs: Vec<&str> = results
        .iter()
        .map(|r| r["compressor"].as_str().unwrap())
        .collect();
    assert_eq!(codecs, ["lz4", "lz4", "zstd", "zstd", "deflate", "deflate"]);
    for r in results {
        assert_eq!(r["file"], "python-objects.pages");
        assert_eq!(
            r["units"].as_u64().unwrap() * r["unit_bytes"].as_u64().unwrap(),
            std::fs::metadata(&file).unwrap().len()
        );
        assert!(r["ratio"].as_f64().unwrap() > 1.5, "{r}");
        assert!(r["compress_mb_s"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["decompress_mb_s"].as_f64().unwrap() > 0.0, "{r}");
    }
}

#[test]
fn missing_file_is_one_line_and_status_2() {
    let o = uzswap(&["bench", "codecs", "--pages", "/nonexistent/none.pages"]);
    assert_one_line_error(&o, "/nonexistent/none.pages");
}

#[test]
fn file_of_4097_bytes_is_one_line_and_status_2() {
    let dir = std::env::temp_dir().join(format!("uzswap-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("odd.pages");
    std::fs::write(&path, vec![1u8; 4097]).unwrap();
    let o = uzswap(&["bench", "codecs", "--pages", path.to_str().unwrap()]);
    // Removed before the checks, so a failing one leaves nothing behind either.
    std::fs::remove_dir_all(&dir).unwrap();
    assert_one_line_error(&o, "odd.pages");
    assert_one_line_error(&o, "4097");
}

#[test]
fn unknown_compressor_is_one_line_and_status_2() {
    let file = corpus_file();
    let o = uzswap(&[
        "bench",
        "codecs",
        "--pages",
        file.to_str().unwrap(),
        "--compressor",
        "lz5",
    ]);
    assert_one_line_error(&o, "unknown compressor 'lz5'");
    assert_one_line_error(&o, "lz4, zstd, deflate");
}

#[test]
fn usage_errors_are_one_line_and_status_2() {
    let o = uzswap(&["bench", "codecs"]);
    assert_one_line_error(&o, "--pages <FILE>");
    let o = uzswap(&["bench", "nosuch"]);
    assert_one_line_error(&o, "unrecognized subcommand 'nosuch'");
}
