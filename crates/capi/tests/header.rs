//! The committed header, include/uzswap.h, is what cbindgen generates from the crate now: a
//! change to the API that is not in the header fails here. `UZSWAP_WRITE_HEADER=1` writes the
//! generated header instead.

use std::path::Path;

#[test]
fn the_committed_header_is_what_cbindgen_generates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(dir.join("src/lib.rs"))
        .generate()
        .expect("cbindgen parses the crate");
    let mut generated = Vec::new();
    bindings.write(&mut generated);
    let generated = String::from_utf8(generated).expect("UTF-8");
    let path = dir.join("include/uzswap.h");
    if std::env::var_os("UZSWAP_WRITE_HEADER").is_some() {
        std::fs::write(&path, &generated).expect("write the header");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} is not what cbindgen generates from the crate: run \
         `UZSWAP_WRITE_HEADER=1 cargo test -p uzswap-capi --test header` and commit it",
        path.display()
    );
}
