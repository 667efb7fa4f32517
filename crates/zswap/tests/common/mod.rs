//! Page contents for the engine's tests: real pages from the repository's corpus/, zero and
//! same-filled pages, and incompressible random pages.
#![allow(dead_code)]

use std::sync::OnceLock;

use proptest::prelude::*;
use rand::{RngCore, SeedableRng};

use zswap::PAGE_SIZE;

pub fn corpus_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../corpus")
}

/// Every page of every corpus file.
pub fn corpus() -> &'static [Vec<u8>] {
    static PAGES: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    PAGES.get_or_init(|| {
        let mut files: Vec<_> = std::fs::read_dir(corpus_dir())
            .unwrap_or_else(|e| panic!("the corpus at {:?} is needed: {e}", corpus_dir()))
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "pages"))
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no .pages files in {:?}", corpus_dir());
        files
            .iter()
            .flat_map(|f| {
                let data = std::fs::read(f).unwrap();
                data.chunks_exact(PAGE_SIZE)
                    .map(|p| p.to_vec())
                    .collect::<Vec<_>>()
            })
            .collect()
    })
}

/// What a test page holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Content {
    /// A real page of the corpus.
    Corpus(u32),
    Zero,
    /// Every 32-bit word the same.
    Fill(u32),
    /// Random bytes: incompressible.
    Random(u64),
}

impl Content {
    /// Make the i-th page of a folio differ from the others.
    pub fn vary(&mut self, i: u32) {
        match self {
            Content::Corpus(n) => *n = n.wrapping_add(i),
            Content::Random(s) => *s = s.wrapping_add(u64::from(i)),
            Content::Zero | Content::Fill(_) => {}
        }
    }
}

pub fn content_strategy() -> impl Strategy<Value = Content> {
    prop_oneof![
        12 => any::<u32>().prop_map(Content::Corpus),
        2 => Just(Content::Zero),
        1 => any::<u32>().prop_map(Content::Fill),
        2 => any::<u64>().prop_map(Content::Random),
    ]
}

pub fn page_content(c: &Content) -> Vec<u8> {
    match *c {
        Content::Corpus(n) => {
            let pages = corpus();
            pages[n as usize % pages.len()].clone()
        }
        Content::Zero => vec![0; PAGE_SIZE],
        Content::Fill(v) => v.to_ne_bytes().repeat(PAGE_SIZE / 4),
        Content::Random(seed) => {
            let mut page = vec![0; PAGE_SIZE];
            rand::rngs::SmallRng::seed_from_u64(seed).fill_bytes(&mut page);
            page
        }
    }
}
