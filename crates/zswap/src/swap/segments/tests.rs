//! The segment log on a page device in RAM: packing, reads of neighbours in one read,
//! deletion, compaction under concurrent frees, and a changed byte on the device.

use std::sync::Arc;

use super::*;
use crate::swap::{FaultKind, FaultyDevice, MemoryDevice};

const DEVICE_PAGES: u32 = 4096;

fn log_on(encrypt: bool) -> (SegmentLog, Arc<MemoryDevice>) {
    let mem = Arc::new(MemoryDevice::new(DEVICE_PAGES));
    let paged = PagedSegments::new(mem.clone(), DEVICE_PAGES, false);
    (SegmentLog::new(Arc::new(paged), encrypt), mem)
}

/// Object `i`: 300..2300 bytes of a pattern of its own, or a raw page every seventh.
fn object(i: u32) -> Vec<u8> {
    let len = if i.is_multiple_of(7) {
        PAGE_SIZE
    } else {
        300 + (i as usize * 97) % 2000
    };
    (0..len).map(|b| (b as u32 * 31 + i * 7) as u8).collect()
}

fn write(log: &SegmentLog, slots: std::ops::Range<u32>) {
    let data: Vec<Vec<u8>> = slots.clone().map(object).collect();
    let objects: Vec<Object> = data
        .iter()
        .zip(slots.clone())
        .map(|(d, i)| Object {
            codec: (i % 3) as u8,
            bytes: d,
        })
        .collect();
    let slots: Vec<SwapSlot> = slots.map(SwapSlot).collect();
    log.append(&slots, &objects).unwrap();
}

fn read(log: &SegmentLog, slot: u32) -> Result<(u8, Vec<u8>), ReadFail> {
    let mut got = None;
    log.read(&[SwapSlot(slot)], |_, codec, bytes| {
        got = Some((codec, bytes.to_vec()));
        true
    })?;
    Ok(got.expect("handed over"))
}

#[test]
fn objects_come_back_as_written_from_packed_segments() {
    for encrypt in [true, false] {
        let (log, _) = log_on(encrypt);
        write(&log, 0..200);
        let written = log.stats().segments_written.load(Relaxed);
        let (held, live) = log.held_bytes();
        assert_eq!(held, live);
        assert!(
            written >= held.div_ceil(SEGMENT_BYTES as u64)
                && written <= 2 * held / SEGMENT_BYTES as u64 + 1,
            "{written} segments for {held} bytes"
        );
        for i in 0..200 {
            assert_eq!(
                read(&log, i).unwrap(),
                ((i % 3) as u8, object(i)),
                "slot {i}"
            );
        }
        // Neighbours in one segment come in one device read.
        let before = log.stats().bytes_read.load(Relaxed);
        let slots: Vec<SwapSlot> = (10..20).map(SwapSlot).collect();
        let mut seen = Vec::new();
        log.read(&slots, |k, _, bytes| {
            seen.push(k);
            bytes == object(10 + k as u32)
        })
        .unwrap();
        assert_eq!(seen, (0..10).collect::<Vec<_>>());
        let expected: usize = (10..20).map(|i| object(i).len()).sum();
        assert!(log.stats().bytes_read.load(Relaxed) - before <= expected as u64 + 2 * 4096);
        assert_eq!(log.audit().unwrap(), 200);
    }
}

#[test]
fn a_segment_goes_when_its_last_object_is_freed() {
    let (log, mem) = log_on(true);
    write(&log, 0..20);
    assert_eq!(log.nr_segments(), 1);
    assert!(mem.pages_held() > 0);
    for i in 0..20 {
        log.free(SwapSlot(i));
    }
    assert_eq!(log.nr_segments(), 0);
    assert_eq!(log.audit().unwrap(), 0);
}

#[test]
fn compaction_moves_live_objects_and_deletes_the_segment() {
    let (log, _) = log_on(true);
    write(&log, 0..40);
    let segments = log.nr_segments();
    // Free three in four: every segment falls under the threshold.
    for i in (0..40).filter(|i| i % 4 != 0) {
        log.free(SwapSlot(i));
    }
    let mut compacted = 0;
    while log.compact().unwrap() {
        compacted += 1;
    }
    assert!(compacted >= 1);
    assert_eq!(log.stats().compactions.load(Relaxed), compacted);
    assert_eq!(log.stats().compacted_objects.load(Relaxed), 10);
    assert!(log.nr_segments() <= segments);
    let (held, live) = log.held_bytes();
    assert_eq!(held, live, "compacted segments hold only live objects");
    for i in (0..40).step_by(4) {
        assert_eq!(
            read(&log, i).unwrap().1,
            object(i),
            "slot {i} after compaction"
        );
    }
    assert_eq!(log.audit().unwrap(), 10);
}

#[test]
fn a_changed_byte_fails_exactly_the_object_it_is_in() {
    let (log, mem) = log_on(true);
    write(&log, 0..10);
    // Object 3 starts after objects 0..3; flip a byte in its middle.
    let at: usize = (0..3).map(|i| object(i).len()).sum::<usize>() + 100;
    let mut page = vec![0u8; PAGE_SIZE];
    let first = SwapSlot((at / PAGE_SIZE) as u32);
    crate::swap::BackingDevice::read(&*mem, first, &mut page).unwrap();
    page[at % PAGE_SIZE] ^= 0x40;
    crate::swap::BackingDevice::write(&*mem, first, &page).unwrap();
    for i in 0..10 {
        let r = read(&log, i);
        if i == 3 {
            assert_eq!(
                r.unwrap_err(),
                ReadFail {
                    index: 0,
                    kind: SegmentReadError::Unauthenticated
                }
            );
        } else {
            assert_eq!(r.unwrap().1, object(i), "slot {i}");
        }
    }
    assert_eq!(log.stats().auth_fail.load(Relaxed), 1);
}

#[test]
fn an_object_read_under_another_slot_fails() {
    let (log, _) = log_on(true);
    write(&log, 0..2);
    // Swap the places (and tags) of slots 0 and 1 in the table: each object now claims
    // the other's slot, which is part of what it was sealed with.
    {
        let mut t = log.table.lock();
        t.places.swap(0, 1);
        t.tags.swap(0, 1);
    }
    assert_eq!(
        read(&log, 0).unwrap_err().kind,
        SegmentReadError::Unauthenticated
    );
}

#[test]
fn raw_pages_take_no_more_of_the_device_than_pages_would() {
    let mem = Arc::new(MemoryDevice::new(64));
    let paged = Arc::new(PagedSegments::new(mem, 64, false));
    let log = SegmentLog::new(paged.clone(), true);
    let page = vec![0x5a; PAGE_SIZE];
    // 64 raw pages fill a 64-page device exactly, in segments or one at a time.
    let objects: Vec<Object> = (0..40)
        .map(|_| Object {
            codec: 0,
            bytes: &page,
        })
        .collect();
    let slots: Vec<SwapSlot> = (0..40).map(SwapSlot).collect();
    log.append(&slots, &objects).unwrap();
    for i in 40..64 {
        log.append(
            &[SwapSlot(i)],
            &[Object {
                codec: 0,
                bytes: &page,
            }],
        )
        .unwrap();
    }
    assert_eq!(paged.pages_used(), 64);
    for i in 0..64 {
        assert_eq!(read(&log, i).unwrap().1, page);
    }
}

#[test]
fn a_segment_splits_where_the_device_is_fragmented() {
    let mem = Arc::new(MemoryDevice::new(64));
    let paged = Arc::new(PagedSegments::new(mem, 64, false));
    let log = SegmentLog::new(paged.clone(), true);
    let page = vec![0x5a; PAGE_SIZE];
    let one = |i: u32| {
        log.append(
            &[SwapSlot(i)],
            &[Object {
                codec: 0,
                bytes: &page,
            }],
        )
    };
    for i in 0..64 {
        one(i).unwrap();
    }
    // Every other page free: no run of two left.
    for i in (0..64).step_by(2) {
        log.free(SwapSlot(i));
    }
    let objects: Vec<Object> = (0..32)
        .map(|_| Object {
            codec: 0,
            bytes: &page,
        })
        .collect();
    let slots: Vec<SwapSlot> = (0..64).step_by(2).map(SwapSlot).collect();
    log.append(&slots, &objects).unwrap();
    assert_eq!(paged.pages_used(), 64);
    assert_eq!(log.audit().unwrap(), 64);
}

#[test]
fn a_failed_write_leaves_nothing() {
    let mem = Arc::new(MemoryDevice::new(DEVICE_PAGES));
    let faulty = Arc::new(FaultyDevice::new(mem));
    let log = SegmentLog::new(
        Arc::new(PagedSegments::new(faulty.clone(), DEVICE_PAGES, false)),
        true,
    );
    write(&log, 0..100);
    let segments = log.nr_segments();
    faulty.fail_next_writes(1, FaultKind::Eio);
    let data: Vec<Vec<u8>> = (100..200).map(object).collect();
    let objects: Vec<Object> = data.iter().map(|d| Object { codec: 0, bytes: d }).collect();
    let slots: Vec<SwapSlot> = (100..200).map(SwapSlot).collect();
    assert!(log.append(&slots, &objects).is_err());
    assert_eq!(log.nr_segments(), segments);
    assert_eq!(log.audit().unwrap(), 100);
    faulty.fail_next_reads(1);
    assert_eq!(read(&log, 5).unwrap_err().kind, SegmentReadError::Device);
    assert_eq!(read(&log, 5).unwrap().1, object(5));
}

#[test]
fn readers_and_compaction_and_frees_race_without_loss() {
    let (log, _) = log_on(true);
    let log = Arc::new(log);
    write(&log, 0..2000);
    std::thread::scope(|s| {
        // Frees: all but every eighth slot, in an order that leaves segments part-live.
        s.spawn(|| {
            for i in (0..2000).filter(|i| i % 8 != 0) {
                log.free(SwapSlot(i));
            }
        });
        s.spawn(|| {
            for _ in 0..200 {
                let _ = log.compact().unwrap();
            }
        });
        for t in 0..2 {
            let log = &log;
            s.spawn(move || {
                for round in 0..20 {
                    for i in (t * 8..2000).step_by(16) {
                        assert_eq!(read(log, i).unwrap().1, object(i), "slot {i} round {round}");
                    }
                }
            });
        }
    });
    while log.compact().unwrap() {}
    assert_eq!(log.audit().unwrap(), 250);
    for i in (0..2000).step_by(8) {
        assert_eq!(read(&log, i).unwrap().1, object(i));
    }
}

#[test]
fn the_table_counts_its_memory_for_the_charge() {
    let (log, _) = log_on(true);
    assert_eq!(log.metadata_bytes(), 0);
    write(&log, 0..1000);
    // A place and a tag a page, and the segments' slot lists.
    let bytes = log.metadata_bytes();
    assert!(bytes >= 1000 * (12 + 16 + 4), "{bytes}");
    assert!(bytes <= 4 * 1000 * (12 + 16 + 4), "{bytes}");
}

/// A page device that counts its reads.
#[derive(Debug)]
struct CountedReads {
    inner: MemoryDevice,
    reads: std::sync::atomic::AtomicU64,
}

impl crate::swap::BackingDevice for CountedReads {
    fn write(&self, slot: SwapSlot, data: &[u8]) -> Result<(), DeviceError> {
        self.inner.write(slot, data)
    }
    fn read(&self, slot: SwapSlot, out: &mut [u8]) -> Result<(), DeviceError> {
        self.reads.fetch_add(1, Relaxed);
        self.inner.read(slot, out)
    }
    fn discard(&self, slot: SwapSlot, nr_pages: u32) -> Result<(), DeviceError> {
        self.inner.discard(slot, nr_pages)
    }
}

#[test]
fn segments_written_together_are_read_back_in_one_read() {
    let device = Arc::new(CountedReads {
        inner: MemoryDevice::new(DEVICE_PAGES),
        reads: Default::default(),
    });
    let paged = PagedSegments::new(device.clone(), DEVICE_PAGES, false);
    let log = SegmentLog::new(Arc::new(paged), true);
    // A large folio's worth: several segments, in one batch, back to back on the device.
    write(&log, 0..200);
    let segments = log.stats().segments_written.load(Relaxed);
    assert!(segments >= 3, "{segments} segments");
    let slots: Vec<SwapSlot> = (0..200).map(SwapSlot).collect();
    let mut seen = 0;
    log.read(&slots, |k, codec, bytes| {
        seen += 1;
        codec == (k % 3) as u8 && bytes == object(k as u32)
    })
    .unwrap();
    assert_eq!(seen, 200);
    assert_eq!(
        device.reads.load(Relaxed),
        1,
        "one read for {segments} segments"
    );
    // Every other object: ranges of several segments, still one read.
    let slots: Vec<SwapSlot> = (0..200).step_by(2).map(SwapSlot).collect();
    log.read(&slots, |k, _, bytes| bytes == object(2 * k as u32))
        .unwrap();
    assert_eq!(device.reads.load(Relaxed), 2);
}

#[test]
fn a_failed_device_read_fails_at_the_first_object_it_held() {
    let mem = Arc::new(FaultyDevice::new(Arc::new(MemoryDevice::new(DEVICE_PAGES))));
    let paged = PagedSegments::new(mem.clone(), DEVICE_PAGES, false);
    let log = SegmentLog::new(Arc::new(paged), false);
    write(&log, 0..200);
    mem.fail_next_reads(1);
    let slots: Vec<SwapSlot> = (0..200).map(SwapSlot).collect();
    let mut seen = 0;
    let fail = log.read(&slots, |_, _, _| {
        seen += 1;
        true
    });
    assert_eq!(
        fail,
        Err(ReadFail {
            index: 0,
            kind: SegmentReadError::Device
        })
    );
    assert_eq!(seen, 0, "nothing handed over from a read that failed");
    // The next read succeeds.
    log.read(&slots, |k, _, bytes| bytes == object(k as u32))
        .unwrap();
}

#[test]
fn the_buffers_a_thread_keeps_for_segments_are_counted() {
    let (log, _) = log_on(true);
    std::thread::scope(|s| {
        s.spawn(|| {
            write(&log, 0..200);
            let slots: Vec<SwapSlot> = (0..200).map(SwapSlot).collect();
            log.read(&slots, |_, _, _| true).unwrap();
            // This thread keeps the sealed batch and its page-aligned copy.
            let (held, _) = log.held_bytes();
            let counted = thread_scratch_bytes();
            assert!(
                counted >= 2 * held,
                "{counted} bytes counted for a batch of {held}"
            );
        });
    });
}
