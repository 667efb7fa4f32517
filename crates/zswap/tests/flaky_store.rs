//! The engine writing back in sealed segments to a store that drops, delays and reorders its
//! replies, as a far store over a network does: a write lost before it was stored, a write
//! stored whose acknowledgement was lost, a read that fails once, and every reply late by a
//! random delay so that the threads' requests complete out of order. Threads store, write
//! back, load and verify corpus pages of their own: every byte comes back, nothing is
//! counted twice (`audit`), and once everything is drained the store holds only the
//! segments whose acknowledgement was lost (a real store's lease takes them).

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use zswap::swap::segments::SegmentAddr;
use zswap::swap::{DeviceError, SegmentDevice};
use zswap::zswap::{LoadErrorKind, SwapOutResult};
use zswap::{Zswap, ZswapConfig, PAGE_SIZE};

#[derive(Debug, Default)]
struct FlakyStore {
    segments: Mutex<HashMap<u64, Vec<u8>>>,
    lost_requests: AtomicU64,
    lost_replies: AtomicU64,
    failed_reads: AtomicU64,
}

thread_local! {
    static RNG: std::cell::RefCell<SmallRng> = std::cell::RefCell::new(SmallRng::from_entropy());
}

fn roll() -> u32 {
    RNG.with(|r| r.borrow_mut().gen_range(0..100))
}

fn late() {
    let us = RNG.with(|r| r.borrow_mut().gen_range(0..300));
    std::thread::sleep(Duration::from_micros(us));
}

fn lost() -> DeviceError {
    DeviceError::Io(std::io::Error::from(std::io::ErrorKind::TimedOut))
}

impl SegmentDevice for FlakyStore {
    fn put(&self, id: u64, bytes: &[u8]) -> Result<SegmentAddr, DeviceError> {
        late();
        match roll() {
            0..=7 => {
                self.lost_requests.fetch_add(1, Relaxed);
                Err(lost())
            }
            8..=14 => {
                self.segments.lock().insert(id, bytes.to_vec());
                self.lost_replies.fetch_add(1, Relaxed);
                Err(lost())
            }
            _ => {
                self.segments.lock().insert(id, bytes.to_vec());
                Ok(id)
            }
        }
    }

    fn get(
        &self,
        id: u64,
        _: SegmentAddr,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), DeviceError> {
        late();
        if roll() < 5 {
            self.failed_reads.fetch_add(1, Relaxed);
            return Err(lost());
        }
        let segments = self.segments.lock();
        let seg = segments.get(&id).ok_or(DeviceError::ShortRead {
            read: 0,
            expected: out.len(),
        })?;
        out.copy_from_slice(&seg[offset..offset + out.len()]);
        Ok(())
    }

    fn delete(&self, id: u64, _: SegmentAddr) {
        late();
        self.segments.lock().remove(&id);
    }
}

const THREADS: u32 = 4;
const PAGES_EACH: u32 = 256;
const ROUNDS: usize = 3000;

#[test]
fn every_byte_comes_back_through_a_store_that_drops_delays_and_reorders() {
    let store = Arc::new(FlakyStore::default());
    let pages = THREADS * PAGES_EACH;
    // A pool of 20% of 1 MiB: most of the pages go below it.
    let zswap =
        Zswap::new(ZswapConfig::new(1 << 20).segment_device(store.clone(), 4 * pages, true));
    let group = zswap.new_group(pages);
    let corpus = common::corpus();
    let models: Vec<HashMap<u32, Vec<u8>>> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let group = &group;
                s.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(u64::from(t));
                    let mut model: HashMap<u32, Vec<u8>> = HashMap::new();
                    let first = t * PAGES_EACH;
                    for _ in 0..ROUNDS {
                        let order = rng.gen_range(0..3u8);
                        let nr = 1u32 << order;
                        let start = first + rng.gen_range(0..PAGES_EACH / nr) * nr;
                        match rng.gen_range(0..10) {
                            0..=4 => {
                                let data: Vec<u8> = (0..nr)
                                    .flat_map(|_| corpus[rng.gen_range(0..corpus.len())].clone())
                                    .collect();
                                let folio = group.lock_folio(start, order);
                                match group.swap_out(&folio, &data) {
                                    Ok(SwapOutResult::Stored)
                                    | Ok(SwapOutResult::WrittenToDisk(_)) => {
                                        for (i, page) in data.chunks_exact(PAGE_SIZE).enumerate() {
                                            model.insert(start + i as u32, page.to_vec());
                                        }
                                    }
                                    Err(_) => {
                                        for p in start..start + nr {
                                            model.remove(&p);
                                        }
                                    }
                                }
                            }
                            5..=6 => {
                                group.shrink(32);
                            }
                            _ => {
                                let folio = group.lock_folio(start, order);
                                let mut buf = vec![0xa5u8; nr as usize * PAGE_SIZE];
                                let mut tries = 0;
                                let loaded = loop {
                                    match group.load(&folio, &mut buf) {
                                        Ok(l) => break l,
                                        Err(e) => {
                                            // Only a read the store failed; the page is still there.
                                            assert_eq!(e.kind, LoadErrorKind::ReadError, "{e}");
                                            tries += 1;
                                            assert!(
                                                tries < 50,
                                                "page {} never read back",
                                                e.offset
                                            );
                                        }
                                    }
                                };
                                let _ = loaded;
                                for (i, got) in buf.chunks_exact(PAGE_SIZE).enumerate() {
                                    let p = start + i as u32;
                                    match model.get(&p) {
                                        Some(want) => assert!(got == &want[..], "page {p} wrong"),
                                        None => assert!(
                                            got.iter().all(|&b| b == 0xa5),
                                            "page {p} invented"
                                        ),
                                    }
                                }
                                if rng.gen_bool(0.5) {
                                    group.finish_load(&folio);
                                    for p in start..start + nr {
                                        model.remove(&p);
                                    }
                                }
                            }
                        }
                    }
                    model
                })
            })
            .collect();
        threads.into_iter().map(|h| h.join().unwrap()).collect()
    });
    zswap.audit().unwrap();
    let (lost_requests, lost_replies, failed_reads) = (
        store.lost_requests.load(Relaxed),
        store.lost_replies.load(Relaxed),
        store.failed_reads.load(Relaxed),
    );
    eprintln!(
        "lost requests {lost_requests}, lost replies {lost_replies}, failed reads {failed_reads}, stats:\n{}",
        zswap.stats()
    );
    assert!(zswap.stats().get("written_back_pages") + zswap.stats().get("pswpout") > 500);
    assert!(lost_requests > 0 && lost_replies > 0 && failed_reads > 0);
    // Drain: every page comes back as last written (retrying failed reads), then only
    // orphans remain.
    let model: HashMap<u32, Vec<u8>> = models.into_iter().flatten().collect();
    for p in 0..pages {
        let folio = group.lock_folio(p, 0);
        let mut buf = vec![0u8; PAGE_SIZE];
        let mut tries = 0;
        while group.load(&folio, &mut buf).is_err() {
            tries += 1;
            assert!(tries < 50, "page {p} never read back");
        }
        if let Some(want) = model.get(&p) {
            assert!(buf == *want, "page {p} wrong at the end");
        }
        group.finish_load(&folio);
    }
    assert_eq!(zswap.stats().get("swap_segments"), 0);
    zswap.audit().unwrap();
    // Deletes are best effort in a real store too; here each landed. What is left is what a
    // lost acknowledgement left behind, for the lease.
    assert!(store.segments.lock().len() as u64 <= lost_replies);
}
