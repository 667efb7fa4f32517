//! Every decompressor against arbitrary input: the pool and the swap file are memory and
//! disk that other code can scribble on, so a decoder must answer corrupt input with an
//! error, never a panic or a write outside its page.
//!
//! Input: the first byte picks a codec (low bits) and a level for the round trip (high bits);
//! the rest is the compressed stream. The picked codec decodes it first, then every other
//! codec does too (cheap, and every input then exercises every decoder). Whenever a decoder
//! returns a whole page, that page must survive compress + decompress with the same codec.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use zswap::compress::{Algorithm, Compressor, CompressorSpec};
use zswap::PAGE_SIZE;

/// Levels to re-compress with, per codec: the defaults and the ends that take other paths
/// (zstd's fast negative levels, deflate's slow near-optimal parsing).
fn levels(a: Algorithm) -> &'static [i32] {
    match a {
        Algorithm::Lz4 => &[0],
        Algorithm::Zstd => &[1, -1, -7, 3, 9],
        Algorithm::Deflate => &[1, 6, 12],
        #[allow(unreachable_patterns)]
        _ => &[3],
    }
}

/// Compressors built once: building is what the engine does once per tunable change.
fn codecs() -> &'static Vec<(Arc<dyn Compressor>, Vec<Arc<dyn Compressor>>)> {
    static CODECS: OnceLock<Vec<(Arc<dyn Compressor>, Vec<Arc<dyn Compressor>>)>> = OnceLock::new();
    CODECS.get_or_init(|| {
        Algorithm::ALL
            .iter()
            .map(|&a| {
                let by_level = levels(a)
                    .iter()
                    .map(|&l| CompressorSpec::new(a, l).expect("valid level").build())
                    .collect();
                (a.default_spec().build(), by_level)
            })
            .collect()
    })
}

fn check(decoder: &dyn Compressor, recompress: &dyn Compressor, input: &[u8]) {
    let mut page = [0u8; PAGE_SIZE];
    let Ok(n) = decoder.decompress(input, &mut page) else {
        return;
    };
    assert!(n <= PAGE_SIZE, "{:?} claimed {n} bytes", decoder.spec());
    if n != PAGE_SIZE {
        return;
    }
    // Twice the page: every codec's worst case fits, so compression must succeed.
    let mut comp = [0u8; 2 * PAGE_SIZE];
    let len = recompress
        .compress(&page, &mut comp)
        .unwrap_or_else(|e| panic!("{:?}: {e}", recompress.spec()));
    let mut back = [0u8; PAGE_SIZE];
    let m = recompress
        .decompress(&comp[..len], &mut back)
        .unwrap_or_else(|e| panic!("{:?}: {e}", recompress.spec()));
    assert_eq!(m, PAGE_SIZE, "{:?}", recompress.spec());
    assert!(back == page, "{:?}: round trip differs", recompress.spec());
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, input)) = data.split_first() else {
        return;
    };
    let codecs = codecs();
    let first = usize::from(sel & 0x0f) % codecs.len();
    let level_pick = usize::from(sel >> 4);
    for k in 0..codecs.len() {
        let (decoder, by_level) = &codecs[(first + k) % codecs.len()];
        let recompress = &by_level[level_pick % by_level.len()];
        check(&**decoder, &**recompress, input);
    }
});
