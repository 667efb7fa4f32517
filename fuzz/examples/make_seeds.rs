//! Writes seed inputs for the `decompress` target: real pages compressed by each codec, with
//! the selector byte in front. zstd and libdeflate are C code that libFuzzer cannot see
//! coverage in (it is built without instrumentation), so mutating valid streams is how their
//! deeper decoding paths get reached at all.
//!
//! cargo run --example make_seeds -- ../corpus corpus/decompress

use std::path::PathBuf;

use zswap::compress::Algorithm;
use zswap::PAGE_SIZE;

fn main() {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [pages_dir, out_dir] = &args[..] else {
        eprintln!("usage: make_seeds PAGES_DIR OUT_DIR");
        std::process::exit(2);
    };
    std::fs::create_dir_all(out_dir).unwrap();
    let mut files: Vec<_> = std::fs::read_dir(pages_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pages"))
        .collect();
    files.sort();
    let mut written = 0;
    for (fi, path) in files.iter().enumerate() {
        let data = std::fs::read(path).unwrap();
        for (ai, a) in Algorithm::ALL.iter().enumerate() {
            let c = a.default_spec().build();
            // A spread of pages through the file: different processes' pages differ most.
            for (pi, page) in data.chunks_exact(PAGE_SIZE).enumerate().step_by(97) {
                let mut comp = [0u8; PAGE_SIZE - 1];
                let Ok(n) = c.compress(page, &mut comp) else {
                    continue;
                };
                let mut seed = vec![ai as u8 | ((pi as u8 & 0xf) << 4)];
                seed.extend_from_slice(&comp[..n]);
                std::fs::write(out_dir.join(format!("{}-{fi}-{pi}", a.name())), seed).unwrap();
                written += 1;
            }
        }
    }
    println!("{written} seeds in {}", out_dir.display());
}
