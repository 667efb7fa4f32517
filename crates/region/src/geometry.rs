//! A region's size in pages and its folio size, fixed when it is made.

use zswap::PAGE_SIZE;

/// A region's size in pages and its folio size.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Geometry {
    /// Pages in a folio: a power of two.
    pub folio_pages: u32,
    /// `folio_pages` as an order (its log2), as the engine's folio locks take it.
    pub folio_order: u8,
    /// Pages in the region: whole folios.
    pub nr_pages: u32,
}

impl Geometry {
    pub fn new(folio_pages: u32, nr_pages: u32) -> Self {
        Geometry {
            folio_pages,
            folio_order: folio_pages.trailing_zeros() as u8,
            nr_pages,
        }
    }

    pub fn folio_bytes(&self) -> usize {
        self.folio_pages as usize * PAGE_SIZE
    }

    /// The first page of the folio page `p` is in.
    pub fn folio_start(&self, p: u32) -> u32 {
        p & !(self.folio_pages - 1)
    }
}
