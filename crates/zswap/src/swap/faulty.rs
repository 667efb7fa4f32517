//! A fault-injecting backing device for tests (in the manner of redb's fault-injecting
//! backend): it wraps any device and makes writes, reads or discards fail on command, so the
//! tests of invariants 7 and 8 can show that an I/O error never loses a page nor yields zeros.
//!
//! Commands take `&self` and may come from any thread while I/O is in flight: a test arms a
//! fault from its own thread in the middle of writeback. A short write really writes part of
//! the data (a torn write), so a caller that ignores the error would read back mixed bytes.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::device::{BackingDevice, DeviceError};
use super::slots::SwapSlot;
use crate::PAGE_SIZE;

/// How an injected write fails. Reads and discards fail with EIO.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// `DeviceError::Io` with errno EIO.
    Eio,
    /// `DeviceError::Io` with errno ENOSPC.
    Enospc,
    /// The first half of the data reaches the device, then `DeviceError::ShortWrite`.
    ShortWrite,
}

impl FaultKind {
    fn errno(self) -> Option<i32> {
        match self {
            FaultKind::Eio => Some(libc::EIO),
            FaultKind::Enospc => Some(libc::ENOSPC),
            FaultKind::ShortWrite => None,
        }
    }
}

/// Faults injected so far, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultStats {
    /// Writes failed with EIO.
    pub write_eio: u64,
    /// Writes failed with ENOSPC.
    pub write_enospc: u64,
    /// Writes torn: half written, then `DeviceError::ShortWrite`.
    pub short_writes: u64,
    /// Reads failed with EIO.
    pub read_eio: u64,
    /// Discards failed with EIO.
    pub discard_eio: u64,
}

impl FaultStats {
    /// Faults of every kind together.
    pub fn total(&self) -> u64 {
        self.write_eio + self.write_enospc + self.short_writes + self.read_eio + self.discard_eio
    }
}

/// What is armed. Precedence for an operation: a fault on one of its slots, then the next-n
/// count, then the until-cleared fault.
#[derive(Debug, Default)]
struct Plan {
    next_writes: u32,
    next_write_kind: Option<FaultKind>,
    all_writes: Option<FaultKind>,
    write_slots: Vec<(u32, FaultKind)>,
    next_reads: u32,
    all_reads: bool,
    read_slots: HashSet<u32>,
    next_discards: u32,
}

#[derive(Default, Debug)]
struct Counters {
    write_eio: AtomicU64,
    write_enospc: AtomicU64,
    short_writes: AtomicU64,
    read_eio: AtomicU64,
    discard_eio: AtomicU64,
}

/// A backing device that passes everything to the device it wraps, except the operations a
/// test has armed to fail.
#[derive(Debug)]
pub struct FaultyDevice {
    inner: Arc<dyn BackingDevice>,
    plan: Mutex<Plan>,
    counters: Counters,
}

fn covers(slot: SwapSlot, nr_pages: usize, target: u32) -> bool {
    u64::from(target) >= u64::from(slot.0)
        && u64::from(target) < u64::from(slot.0) + nr_pages as u64
}

fn eio() -> DeviceError {
    std::io::Error::from_raw_os_error(libc::EIO).into()
}

impl FaultyDevice {
    /// Wrap `inner`; nothing fails until a fault is armed.
    pub fn new(inner: Arc<dyn BackingDevice>) -> Self {
        FaultyDevice {
            inner,
            plan: Mutex::new(Plan::default()),
            counters: Counters::default(),
        }
    }

    /// The wrapped device, e.g. to look at what a torn write left behind.
    pub fn inner(&self) -> &Arc<dyn BackingDevice> {
        &self.inner
    }

    /// The next `n` writes fail with `kind`.
    pub fn fail_next_writes(&self, n: u32, kind: FaultKind) {
        let mut p = self.plan.lock();
        p.next_writes = n;
        p.next_write_kind = Some(kind);
    }

    /// Every write fails with `kind` until [`clear`](Self::clear).
    pub fn fail_writes(&self, kind: FaultKind) {
        self.plan.lock().all_writes = Some(kind);
    }

    /// Every write covering `slot` fails with `kind` until cleared.
    pub fn fail_writes_to(&self, slot: SwapSlot, kind: FaultKind) {
        let mut p = self.plan.lock();
        p.write_slots.retain(|&(s, _)| s != slot.0);
        p.write_slots.push((slot.0, kind));
    }

    /// The next `n` reads fail with EIO.
    pub fn fail_next_reads(&self, n: u32) {
        self.plan.lock().next_reads = n;
    }

    /// Every read fails with EIO until cleared.
    pub fn fail_reads(&self) {
        self.plan.lock().all_reads = true;
    }

    /// Every read covering `slot` fails with EIO until cleared (a bad sector).
    pub fn fail_reads_of(&self, slot: SwapSlot) {
        self.plan.lock().read_slots.insert(slot.0);
    }

    /// The next `n` discards fail with EIO.
    pub fn fail_next_discards(&self, n: u32) {
        self.plan.lock().next_discards = n;
    }

    /// Disarm every fault. The counters are kept.
    pub fn clear(&self) {
        *self.plan.lock() = Plan::default();
    }

    /// Faults injected so far.
    pub fn stats(&self) -> FaultStats {
        let c = &self.counters;
        FaultStats {
            write_eio: c.write_eio.load(Ordering::Relaxed),
            write_enospc: c.write_enospc.load(Ordering::Relaxed),
            short_writes: c.short_writes.load(Ordering::Relaxed),
            read_eio: c.read_eio.load(Ordering::Relaxed),
            discard_eio: c.discard_eio.load(Ordering::Relaxed),
        }
    }

    /// Decide (and consume) the fault for a write of `nr_pages` at `slot`, if any.
    fn write_fault(&self, slot: SwapSlot, nr_pages: usize) -> Option<FaultKind> {
        let mut p = self.plan.lock();
        if let Some(&(_, kind)) = p
            .write_slots
            .iter()
            .find(|&&(s, _)| covers(slot, nr_pages, s))
        {
            return Some(kind);
        }
        if p.next_writes > 0 {
            p.next_writes -= 1;
            return p.next_write_kind;
        }
        p.all_writes
    }

    fn read_fault(&self, slot: SwapSlot, nr_pages: usize) -> bool {
        let mut p = self.plan.lock();
        if p.read_slots.iter().any(|&s| covers(slot, nr_pages, s)) {
            return true;
        }
        if p.next_reads > 0 {
            p.next_reads -= 1;
            return true;
        }
        p.all_reads
    }

    /// A torn write: the first half of `data` reaches the device, the rest keeps its old
    /// contents, which is what a real short write leaves behind.
    fn short_write(&self, slot: SwapSlot, data: &[u8]) -> Result<(), DeviceError> {
        let written = data.len() / 2;
        let mut merged = vec![0u8; data.len()];
        self.inner.read(slot, &mut merged)?;
        merged[..written].copy_from_slice(&data[..written]);
        self.inner.write(slot, &merged)?;
        Err(DeviceError::ShortWrite {
            written,
            expected: data.len(),
        })
    }
}

impl BackingDevice for FaultyDevice {
    fn write(&self, slot: SwapSlot, data: &[u8]) -> Result<(), DeviceError> {
        match self.write_fault(slot, data.len().div_ceil(PAGE_SIZE)) {
            None => self.inner.write(slot, data),
            Some(FaultKind::ShortWrite) => {
                self.counters.short_writes.fetch_add(1, Ordering::Relaxed);
                self.short_write(slot, data)
            }
            Some(kind) => {
                let counter = if kind == FaultKind::Eio {
                    &self.counters.write_eio
                } else {
                    &self.counters.write_enospc
                };
                counter.fetch_add(1, Ordering::Relaxed);
                let errno = kind.errno().expect("EIO and ENOSPC have an errno");
                Err(std::io::Error::from_raw_os_error(errno).into())
            }
        }
    }

    fn read(&self, slot: SwapSlot, out: &mut [u8]) -> Result<(), DeviceError> {
        if self.read_fault(slot, out.len().div_ceil(PAGE_SIZE)) {
            self.counters.read_eio.fetch_add(1, Ordering::Relaxed);
            // Leave `out` alone: a caller that used it anyway would see garbage, not zeros
            // dressed up as data; the error is what counts.
            return Err(eio());
        }
        self.inner.read(slot, out)
    }

    fn discard(&self, slot: SwapSlot, nr_pages: u32) -> Result<(), DeviceError> {
        {
            let mut p = self.plan.lock();
            if p.next_discards > 0 {
                p.next_discards -= 1;
                drop(p);
                self.counters.discard_eio.fetch_add(1, Ordering::Relaxed);
                return Err(eio());
            }
        }
        self.inner.discard(slot, nr_pages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::swap::MemoryDevice;

    fn dev() -> FaultyDevice {
        FaultyDevice::new(Arc::new(MemoryDevice::new(64)))
    }

    fn page(b: u8) -> Vec<u8> {
        vec![b; PAGE_SIZE]
    }

    fn read_page(d: &dyn BackingDevice, slot: u32) -> Vec<u8> {
        let mut out = vec![0u8; PAGE_SIZE];
        d.read(SwapSlot(slot), &mut out).unwrap();
        out
    }

    #[test]
    fn passes_through_when_unarmed() {
        let d = dev();
        d.write(SwapSlot(3), &page(5)).unwrap();
        assert_eq!(read_page(&d, 3), page(5));
        d.discard(SwapSlot(3), 1).unwrap();
        assert_eq!(read_page(&d, 3), page(0));
        assert_eq!(d.stats().total(), 0);
    }

    #[test]
    fn next_writes_eio_then_recovers() {
        let d = dev();
        d.fail_next_writes(2, FaultKind::Eio);
        for _ in 0..2 {
            let e = d.write(SwapSlot(0), &page(1)).unwrap_err();
            assert!(matches!(e, DeviceError::Io(_)));
            assert_eq!(e.raw_os_error(), Some(libc::EIO));
        }
        // Nothing reached the device.
        assert_eq!(read_page(&**d.inner(), 0), page(0));
        d.write(SwapSlot(0), &page(1)).unwrap();
        assert_eq!(read_page(&d, 0), page(1));
        assert_eq!(
            d.stats(),
            FaultStats {
                write_eio: 2,
                ..Default::default()
            }
        );
    }

    #[test]
    fn writes_enospc_until_cleared() {
        let d = dev();
        d.fail_writes(FaultKind::Enospc);
        for i in 0..5 {
            let e = d.write(SwapSlot(i), &page(1)).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        }
        d.clear();
        d.write(SwapSlot(0), &page(1)).unwrap();
        assert_eq!(d.stats().write_enospc, 5);
    }

    #[test]
    fn short_write_tears_the_page() {
        let d = dev();
        d.write(SwapSlot(1), &[page(0xaa), page(0xaa)].concat())
            .unwrap();
        d.fail_next_writes(1, FaultKind::ShortWrite);
        let new = [page(0x11), page(0x22)].concat();
        match d.write(SwapSlot(1), &new) {
            Err(DeviceError::ShortWrite { written, expected }) => {
                assert_eq!((written, expected), (PAGE_SIZE, 2 * PAGE_SIZE));
            }
            other => panic!("expected a short write, got {other:?}"),
        }
        // Half of it landed: first page new, second page old.
        assert_eq!(read_page(&d, 1), page(0x11));
        assert_eq!(read_page(&d, 2), page(0xaa));
        // A one-page short write tears inside the page.
        d.fail_next_writes(1, FaultKind::ShortWrite);
        assert!(d.write(SwapSlot(2), &page(0x33)).is_err());
        let torn = read_page(&d, 2);
        assert!(torn[..PAGE_SIZE / 2].iter().all(|&b| b == 0x33));
        assert!(torn[PAGE_SIZE / 2..].iter().all(|&b| b == 0xaa));
        assert_eq!(d.stats().short_writes, 2);
    }

    #[test]
    fn writes_to_one_slot_fail() {
        let d = dev();
        d.fail_writes_to(SwapSlot(10), FaultKind::Eio);
        d.write(SwapSlot(9), &page(1)).unwrap();
        assert!(d
            .write(SwapSlot(8), &[page(1), page(1), page(1)].concat())
            .is_err());
        assert!(d.write(SwapSlot(10), &page(1)).is_err());
        d.write(SwapSlot(11), &page(1)).unwrap();
        assert_eq!(d.stats().write_eio, 2);
    }

    #[test]
    fn reads_of_one_slot_fail_until_cleared() {
        let d = dev();
        d.write(SwapSlot(4), &[page(4), page(5)].concat()).unwrap();
        d.fail_reads_of(SwapSlot(5));
        assert_eq!(read_page(&d, 4), page(4));
        let mut out = vec![0u8; 2 * PAGE_SIZE];
        let e = d.read(SwapSlot(4), &mut out).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO));
        assert!(d.read(SwapSlot(5), &mut out[..PAGE_SIZE]).is_err());
        d.clear();
        assert_eq!(read_page(&d, 5), page(5));
        assert_eq!(d.stats().read_eio, 2);
    }

    #[test]
    fn next_reads_and_all_reads_fail() {
        let d = dev();
        d.fail_next_reads(1);
        let mut out = vec![0u8; PAGE_SIZE];
        assert!(d.read(SwapSlot(0), &mut out).is_err());
        d.read(SwapSlot(0), &mut out).unwrap();
        d.fail_reads();
        assert!(d.read(SwapSlot(0), &mut out).is_err());
        assert!(d.read(SwapSlot(1), &mut out).is_err());
        d.clear();
        d.read(SwapSlot(1), &mut out).unwrap();
        assert_eq!(d.stats().read_eio, 3);
    }

    #[test]
    fn discard_fails_and_keeps_data() {
        let d = dev();
        d.write(SwapSlot(0), &page(9)).unwrap();
        d.fail_next_discards(1);
        assert_eq!(
            d.discard(SwapSlot(0), 1).unwrap_err().raw_os_error(),
            Some(libc::EIO)
        );
        assert_eq!(read_page(&d, 0), page(9));
        d.discard(SwapSlot(0), 1).unwrap();
        assert_eq!(d.stats().discard_eio, 1);
    }

    #[test]
    fn armed_from_another_thread() {
        let d = Arc::new(dev());
        let d2 = Arc::clone(&d);
        std::thread::spawn(move || d2.fail_writes(FaultKind::Eio))
            .join()
            .unwrap();
        assert!(d.write(SwapSlot(0), &page(1)).is_err());
        let d2 = Arc::clone(&d);
        std::thread::spawn(move || d2.clear()).join().unwrap();
        d.write(SwapSlot(0), &page(1)).unwrap();
    }

    #[test]
    fn wraps_a_file_device() {
        let file = crate::swap::FileDevice::create(None, 4).unwrap();
        let d = FaultyDevice::new(Arc::new(file));
        d.write(SwapSlot(0), &page(3)).unwrap();
        d.fail_next_writes(1, FaultKind::ShortWrite);
        assert!(matches!(
            d.write(SwapSlot(0), &page(4)),
            Err(DeviceError::ShortWrite { .. })
        ));
        let got = read_page(&d, 0);
        assert!(got[..PAGE_SIZE / 2].iter().all(|&b| b == 4));
        assert!(got[PAGE_SIZE / 2..].iter().all(|&b| b == 3));
    }
}
