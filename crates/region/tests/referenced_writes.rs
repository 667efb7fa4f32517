//! Reclaim that sees writes (`Policies::referenced_writes`, lru.rs), in a test binary of its
//! own: its two regions under constant reclaim would load the CPUs under region.rs's tests
//! that time kswapd.

mod common;

use common::{xorshift, PAGE};
use region::{Region, RegionConfig};

/// Reclaim sees writes (reclaim.rs, `referenced`): a hot set written every round among cold
/// folios read at random, under a limit that holds the hot set and little more. A hot folio
/// that reaches the LRU's head was written since reclaim last asked the page tables, and is
/// activated instead of taken. Each page holds its own number in every word (a hot page its
/// last write in its first), and every page read or written is checked. Would fail if
/// reclaim took the written folios as it takes the others: fewer faults is what keeping them
/// buys.
#[test]
fn folios_written_since_reclaim_last_looked_stay_resident() {
    const FOLIO: usize = 16 << 10;
    const FOLIO_PAGES: usize = FOLIO / PAGE;
    const HOT: usize = 48;
    const FOLIOS: usize = 512;
    let words = |mem: &[u8], page: usize| -> Vec<u64> {
        mem[page * PAGE..(page + 1) * PAGE]
            .chunks(8)
            .map(|w| u64::from_ne_bytes(w.try_into().unwrap()))
            .collect()
    };
    let run = |referenced_writes: bool| {
        let mut r = Region::new(
            FOLIOS * FOLIO,
            RegionConfig::new(2 << 20)
                .folio_size(FOLIO)
                .auto_pool_share(false)
                .max_pool_percent(10)
                .referenced_writes(referenced_writes),
        )
        .unwrap();
        let mem = r.as_mut_slice();
        for (page, data) in mem.chunks_mut(PAGE).enumerate() {
            for w in data.chunks_mut(8) {
                w.copy_from_slice(&(page as u64 + 1).to_ne_bytes());
            }
        }
        // The first word of a hot page: its last write, or its number.
        let mut first = vec![0u64; HOT * FOLIO_PAGES];
        for (page, w) in first.iter_mut().enumerate() {
            *w = page as u64 + 1;
        }
        let check = |mem: &[u8], page: usize, first: u64| {
            let w = words(mem, page);
            assert!(w[0] == first && w[1..].iter().all(|&x| x == page as u64 + 1));
        };
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..120u64 {
            for f in 0..HOT {
                let page = f * FOLIO_PAGES + f % FOLIO_PAGES;
                check(mem, page, first[page]);
                first[page] = (1 << 40) + round;
                mem[page * PAGE..page * PAGE + 8].copy_from_slice(&first[page].to_ne_bytes());
            }
            for _ in 0..64 {
                let f = HOT + (xorshift(&mut x) as usize % (FOLIOS - HOT));
                let page = f * FOLIO_PAGES + f % FOLIO_PAGES;
                check(mem, page, page as u64 + 1);
            }
        }
        for (page, &w) in first.iter().enumerate() {
            check(mem, page, w);
        }
        r.stats()
    };
    let (on, off) = (run(true), run(false));
    eprintln!(
        "faults with referenced writes {} (written {} of {} checked), without {}",
        on.faults, on.written_activated, on.written_checks, off.faults
    );
    assert!(on.written_activated > 0, "{on:?}");
    assert!(on.faults < off.faults, "{on:?}\n{off:?}");
}
