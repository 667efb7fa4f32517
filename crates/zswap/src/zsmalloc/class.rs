//! Size classes and their span geometry: which class an object of n bytes belongs to, how big a
//! slot of that class is, and how many pages one class span chains (the kernel's
//! `size_class` with `pages_per_zspage` and `objs_per_zspage`).

use crate::PAGE_SIZE;

/// Slot sizes step by PAGE_SIZE/256 bytes, as in the kernel (ZS_SIZE_CLASS_DELTA).
pub(crate) const CLASS_STEP: usize = 16;
/// Classes 16, 32, ..., 4080 bytes.
pub(crate) const NR_CLASSES: usize = 255;
/// The largest object a class span holds; bigger objects take a page of their own (the huge
/// class), since a 4096-byte slot would be a page anyway and a 4081..4095-byte one would waste
/// more than a page's tail.
pub(crate) const MAX_CLASS_SIZE: usize = NR_CLASSES * CLASS_STEP;
/// The longest chain of pages one span may hold (the kernel's CONFIG_ZSMALLOC_CHAIN_SIZE upper
/// bound). Also the capacity of a packed span, so that an offset in a span fits in a u16.
pub(crate) const MAX_SPAN_PAGES: usize = 16;

/// The geometry of one class: slot size, pages per span, slots per span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClassGeometry {
    pub size: u32,
    pub pages: u32,
    pub objs: u32,
}

/// The class of an object of `len` bytes (1..=MAX_CLASS_SIZE): ceil(len/16) - 1.
#[inline]
pub(crate) fn class_of(len: usize) -> usize {
    debug_assert!((1..=MAX_CLASS_SIZE).contains(&len));
    len.div_ceil(CLASS_STEP) - 1
}

/// The geometry of `class`, from a table computed at compile time.
#[inline]
pub(crate) fn geometry(class: usize) -> ClassGeometry {
    GEOMETRY[class]
}

/// Choose the chain length k in 1..=16 that wastes the smallest fraction of the span
/// (k*4096 mod size over k*4096); ties go to the smaller k, since a shorter span needs fewer
/// objects to fill and is freed sooner.
const fn choose_geometry(size: usize) -> ClassGeometry {
    let mut best_k = 1;
    let mut best_waste = PAGE_SIZE % size;
    let mut k = 2;
    while k <= MAX_SPAN_PAGES {
        let waste = (k * PAGE_SIZE) % size;
        // waste/k*4096 < best_waste/best_k*4096, cross-multiplied to stay in integers.
        if waste * best_k < best_waste * k {
            best_k = k;
            best_waste = waste;
        }
        k += 1;
    }
    ClassGeometry {
        size: size as u32,
        pages: best_k as u32,
        objs: ((best_k * PAGE_SIZE) / size) as u32,
    }
}

const fn build_table() -> [ClassGeometry; NR_CLASSES] {
    let mut table = [ClassGeometry {
        size: 0,
        pages: 0,
        objs: 0,
    }; NR_CLASSES];
    let mut c = 0;
    while c < NR_CLASSES {
        table[c] = choose_geometry((c + 1) * CLASS_STEP);
        c += 1;
    }
    table
}

static GEOMETRY: [ClassGeometry; NR_CLASSES] = build_table();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_of_rounds_up_to_sixteen() {
        assert_eq!(class_of(1), 0);
        assert_eq!(class_of(16), 0);
        assert_eq!(class_of(17), 1);
        assert_eq!(class_of(4080), NR_CLASSES - 1);
        assert_eq!(geometry(class_of(1500)).size, 1504);
    }

    #[test]
    fn geometry_wastes_least_with_ties_to_smaller_spans() {
        // Sizes that divide a page exactly take one page.
        for size in [16, 32, 64, 128, 256, 512, 1024, 2048] {
            let g = geometry(size / CLASS_STEP - 1);
            assert_eq!(
                (g.pages, g.objs),
                (1, (PAGE_SIZE / size) as u32),
                "size {size}"
            );
        }
        // 48 bytes: 3 pages hold exactly 256 slots.
        assert_eq!(
            geometry(2),
            ClassGeometry {
                size: 48,
                pages: 3,
                objs: 256
            }
        );
        // Brute force: no k wastes a smaller fraction, and no smaller k wastes the same.
        for c in 0..NR_CLASSES {
            let g = geometry(c);
            let size = g.size as usize;
            let waste = |k: usize| (k * PAGE_SIZE) % size;
            let chosen = g.pages as usize;
            for k in 1..=MAX_SPAN_PAGES {
                let (w, wc) = (waste(k), waste(chosen));
                assert!(w * chosen >= wc * k, "class {c}: k={k} wastes less");
                if k < chosen {
                    assert!(w * chosen > wc * k, "class {c}: smaller k={k} ties");
                }
            }
            assert_eq!(g.objs as usize, chosen * PAGE_SIZE / size);
            assert!(g.objs >= 1 && g.objs <= u16::MAX as u32);
        }
    }
}
