//! Regions when things go wrong: unreadable swap pages, a dying fault handler, writeback
//! forbidden, the region moved under the handler, fork; and a long stress run.
//!
//! A test that expects the process to die runs its scenario in a child: the test binary
//! re-executes itself with `--exact <test>` and `CHILD_ENV` naming the scenario, and the
//! parent checks the signal the child died of and what it printed on the way.

use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use region::{Region, RegionConfig, RegionStatsSnapshot};
use zswap::swap::{BackingDevice, DeviceError, FaultyDevice, MemoryDevice, SwapSlot};

mod common;
use common::{
    check, check_from, fill, page_data, stage_and_store_some, wait_until, xorshift, PAGE,
};

// ---------------------------------------------------------------------------------------
// Child processes.

const CHILD_ENV: &str = "UZSWAP_REGION_FAILURES_CHILD";

/// True in the child process started by `run_child(_, scenario)`.
fn in_child(scenario: &str) -> bool {
    std::env::var(CHILD_ENV).as_deref() == Ok(scenario)
}

struct Outcome {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl std::fmt::Debug for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "child {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.status, self.stdout, self.stderr
        )
    }
}

/// Run test `test` of this binary again in a child process with `CHILD_ENV=scenario`, and
/// wait for it (killing it after 30 s: a child that hangs is a failure, not a stuck run).
fn run_child(test: &str, scenario: &str) -> Outcome {
    run_child_as(test, scenario, Output::Shown)
}

/// Whether the child's test harness captures its output, as `cargo test` does by default.
#[derive(PartialEq)]
enum Output {
    Shown,
    Captured,
}

fn run_child_as(test: &str, scenario: &str, output: Output) -> Outcome {
    let shown = ["--nocapture"];
    let shown: &[&str] = if output == Output::Shown { &shown } else { &[] };
    // Through a shell only to switch core dumps off: the child is meant to die of a
    // signal, and a core of a process with a region mapped would land in the crate
    // directory. (A pre_exec setrlimit would need unsafe.)
    let mut child = Command::new("/bin/sh")
        .arg("-c")
        .arg("ulimit -c 0; exec \"$@\"")
        .arg("sh")
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", test, "--test-threads=1"])
        .args(shown)
        .env(CHILD_ENV, scenario)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("re-executing the test binary");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let st = child.wait().unwrap();
            let o = Outcome {
                status: st,
                stdout: out.join().unwrap(),
                stderr: err.join().unwrap(),
            };
            panic!("the child scenario {scenario} hung and was killed: {o:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Outcome {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// Wait until the fault handlers have finished bringing in `n` pages. A handler finishes a
/// fault's bookkeeping (resident bits, the reclaim queue, counters) just after its install
/// has woken the program, so a folio faulted in just before a `reclaim_to` may not be in the
/// reclaim queue yet, and would stay resident.
fn wait_pages_in(r: &Region, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while r.stats().pages_in < n {
        assert!(
            Instant::now() < deadline,
            "faults never finished: {:?}",
            r.stats()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Read one byte of the region so that the load really happens.
fn touch(mem: &[u8], offset: usize) -> u8 {
    std::hint::black_box(mem[std::hint::black_box(offset)])
}

// ---------------------------------------------------------------------------------------
// Invariant 7: a page that cannot be read back is poisoned, never served as zeros.

/// A 1 MiB region of 4 KiB folios (so one fault reads one page) whose evicted pages all go
/// to `dev` (zswap off: nothing stays in the pool), everything evicted.
fn evicted_to_device<D: BackingDevice + 'static>(dev: &Arc<D>) -> Region {
    evicted_to_device_with(dev, false)
}

/// The same, its faults served in the faulting thread if `in_thread`.
fn evicted_to_device_with<D: BackingDevice + 'static>(dev: &Arc<D>, in_thread: bool) -> Region {
    let size = 1 << 20;
    let mut r = Region::new(
        size,
        RegionConfig::new(4 << 20)
            .folio_size(PAGE)
            .device(dev.clone())
            .in_thread_faults(in_thread),
    )
    .unwrap();
    r.zswap().params().set_enabled(false);
    // Filled from the end, a page a fault. Fault-around maps the pages after a first touch,
    // and a fill from the start runs into pages it is still mapping: the fault a handler has
    // read by then is served later, perhaps after the eviction below, as a swap-in from `dev`
    // that no test asked for (with slow reads armed, it keeps one of the two handlers in a
    // 300 ms read). From the end, each fault's fault-around meets a touched page at once.
    for (i, page) in r.as_mut_slice().chunks_mut(PAGE).enumerate().rev() {
        page.copy_from_slice(&page_data(i, 0));
    }
    wait_pages_in(&r, (size / PAGE) as u64);
    r.reclaim_to(0);
    let u = r.usage();
    assert_eq!(u.resident + u.staged + u.pool, 0, "not all evicted: {u:?}");
    assert!(
        r.zswap().stats().get("pswpout") >= (size / PAGE) as u64,
        "the pages did not go to the device: {:?} {:?}",
        r.stats(),
        r.zswap().stats()
    );
    r
}

/// A memory device that, once armed, runs `on_read` before every read: a slow disk, or one
/// whose read panics.
struct ArmedReads {
    inner: MemoryDevice,
    armed: AtomicBool,
    on_read: Box<dyn Fn(SwapSlot) + Send + Sync>,
}

impl ArmedReads {
    fn new(on_read: impl Fn(SwapSlot) + Send + Sync + 'static) -> Arc<Self> {
        Arc::new(ArmedReads {
            inner: MemoryDevice::new(256),
            armed: AtomicBool::new(false),
            on_read: Box::new(on_read),
        })
    }
    fn arm(&self, on: bool) {
        self.armed.store(on, Ordering::SeqCst);
    }
}

impl std::fmt::Debug for ArmedReads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArmedReads")
            .field("armed", &self.armed)
            .finish()
    }
}

impl BackingDevice for ArmedReads {
    fn write(&self, slot: SwapSlot, data: &[u8]) -> Result<(), DeviceError> {
        self.inner.write(slot, data)
    }
    fn read(&self, slot: SwapSlot, out: &mut [u8]) -> Result<(), DeviceError> {
        if self.armed.load(Ordering::SeqCst) {
            (self.on_read)(slot);
        }
        self.inner.read(slot, out)
    }
    fn discard(&self, slot: SwapSlot, nr_pages: u32) -> Result<(), DeviceError> {
        self.inner.discard(slot, nr_pages)
    }
}

/// A read armed on a device of `evicted_to_device`: 300 ms, counted in `in_read` while it
/// lasts, so a test can tell when handlers are inside one.
fn slow_read(in_read: &AtomicUsize) {
    in_read.fetch_add(1, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(300));
    in_read.fetch_sub(1, Ordering::SeqCst);
}

/// A thread of `s` reads page 0; returns once a handler is in the slow read of it.
fn fault_page_0_into_a_read<'s, 'r>(
    s: &'s std::thread::Scope<'s, 'r>,
    r: &'r Region,
    in_read: &AtomicUsize,
) {
    let words = r.as_atomic_words();
    s.spawn(move || words[0].load(Ordering::Relaxed));
    wait_until("a handler in the read of page 0", || {
        in_read.load(Ordering::SeqCst) == 1
    });
}

/// One handler in the read of page 0, the other waiting for page 0's folio (a second thread
/// faulted on it): both regular handlers are held, so the spare polls.
fn both_handlers_on_page_0<'s, 'r>(
    s: &'s std::thread::Scope<'s, 'r>,
    r: &'r Region,
    in_read: &AtomicUsize,
) {
    fault_page_0_into_a_read(s, r, in_read);
    let words = r.as_atomic_words();
    s.spawn(move || words[1].load(Ordering::Relaxed));
    wait_until("a handler waiting for page 0's folio", || {
        r.stats().folio_lock_waits > 0
    });
}

/// A region evicted to a device whose reads are slow (`slow_read`), armed; `hold` puts
/// handlers where the test wants them (faulting with threads of the scope it is given; the
/// count of reads under way is its third argument); then page 100 is discarded. The discard
/// must return within 150 ms (a `madvise` returns once a handler has read its event) and
/// every page must read back as it should, page 100 as zeros. Returns the region's
/// statistics after.
fn discard_while_handlers_wait<H>(hold: H) -> RegionStatsSnapshot
where
    H: for<'s, 'r> FnOnce(&'s std::thread::Scope<'s, 'r>, &'r Region, &'r AtomicUsize),
{
    let in_read = Arc::new(AtomicUsize::new(0));
    let dev = ArmedReads::new({
        let in_read = in_read.clone();
        move |_| slow_read(&in_read)
    });
    let mut r = evicted_to_device(&dev);
    dev.arm(true);
    let region = &r;
    let took = std::thread::scope(|s| {
        hold(s, region, &in_read);
        let t = Instant::now();
        region.discard(100 * PAGE, PAGE).unwrap();
        t.elapsed()
    });
    dev.arm(false);
    assert!(
        took < Duration::from_millis(150),
        "the discard's event was read only after {took:?}"
    );
    let stats = r.stats();
    let mem = r.as_mut_slice();
    check_from(&mem[..100 * PAGE], 0, 0);
    assert!(mem[100 * PAGE..101 * PAGE].iter().all(|&b| b == 0));
    check_from(&mem[101 * PAGE..], 101, 0);
    stats
}

/// A handler waiting for the disk does not hold up the others: a `madvise` on another page
/// returns once a handler has read its event, and reading events waits for every install
/// in flight (events.rs). The engine reads with that gate given up: would fail if the gate
/// were held across the read, the discard then waiting for the whole 300 ms of it.
#[test]
fn a_slow_disk_read_does_not_hold_up_other_events() {
    discard_while_handlers_wait(fault_page_0_into_a_read);
}

/// With every regular handler (two) inside a slow disk read, the spare handler reads the
/// events: a `madvise` on a third page returns at once instead of waiting for a read to end.
#[test]
fn with_every_handler_on_the_disk_the_spare_serves_events() {
    let stats = discard_while_handlers_wait(|s, r, in_read| {
        // The second fault only once a handler is in the first one's read: a handler reads
        // every event there is at once, and one that took both would serve them in turn.
        fault_page_0_into_a_read(s, r, in_read);
        let words = r.as_atomic_words();
        s.spawn(move || words[50 * PAGE / 8].load(Ordering::Relaxed));
        wait_until("both handlers in reads", || {
            in_read.load(Ordering::SeqCst) == 2
        });
    });
    assert!(stats.spare_events > 0, "{stats:?}");
}

/// A handler waiting for a folio that another holds across a slow disk read counts as on
/// the disk too: with one handler in the read of page 0 and the other waiting for page 0's
/// folio (a second thread faulted on it), the spare reads the events.
#[test]
fn a_handler_waiting_for_a_folio_under_a_disk_read_leaves_events_to_the_spare() {
    let stats = discard_while_handlers_wait(both_handlers_on_page_0);
    assert!(stats.spare_events > 0, "{stats:?}");
}

/// The spare never waits for a held folio itself: with one handler in the read of page 0,
/// the other waiting for page 0's folio, and a third fault on page 0 read by the spare, the
/// spare leaves that fault to a regular handler and goes on reading events. Would fail if the
/// spare waited for the folio too: nobody would then read the discard's event until the read
/// ended.
#[test]
fn the_spare_leaves_a_fault_on_a_held_folio_and_goes_on_serving() {
    let stats = discard_while_handlers_wait(|s, r, in_read| {
        both_handlers_on_page_0(s, r, in_read);
        let words = r.as_atomic_words();
        s.spawn(move || words[2].load(Ordering::Relaxed));
        wait_until("the spare's turn at the third fault on page 0", || {
            let st = r.stats();
            st.spare_deferred > 0 || st.folio_lock_waits > 1
        });
    });
    assert_eq!(stats.spare_deferred, 1, "{stats:?}");
    // The discard's event; not the fault it left, which a regular handler served.
    assert_eq!(stats.spare_events, 1, "{stats:?}");
}

fn faulty_device() -> Arc<FaultyDevice> {
    Arc::new(FaultyDevice::new(Arc::new(MemoryDevice::new(256))))
}

/// Have the kernel read `page` of the region (write(2) from it into a pipe): with reads
/// failing, the handler poisons the page, and a kernel access to a poisoned page fails with
/// EFAULT where a program access would get SIGBUS. This poisons a page without killing us.
fn poison_by_kernel_read(r: &mut Region, page: usize) {
    let before = r.stats().poisoned;
    let (_rx, mut tx) = std::io::pipe().unwrap();
    let e = tx
        .write(&r.as_mut_slice()[page * PAGE..(page + 1) * PAGE])
        .expect_err("the kernel read an unreadable page");
    assert_eq!(e.raw_os_error(), Some(libc::EFAULT), "{e}");
    // The handler counts the poisoning just after the poison ioctl has woken us.
    let deadline = Instant::now() + Duration::from_secs(5);
    while r.stats().poisoned == before {
        assert!(Instant::now() < deadline, "poisoning never counted");
        std::thread::sleep(Duration::from_millis(1));
    }
}

const SIGBUS_READ: &str = "a_page_that_cannot_be_read_back_kills_the_reader_with_sigbus";

#[test]
fn a_page_that_cannot_be_read_back_kills_the_reader_with_sigbus() {
    if in_child(SIGBUS_READ) {
        let dev = faulty_device();
        let mut r = evicted_to_device(&dev);
        dev.fail_reads();
        eprintln!("CHILD: reading evicted page 37 with device reads failing");
        let b = touch(r.as_mut_slice(), 37 * PAGE + 100);
        // Only reached if the program was handed something in place of the lost page.
        eprintln!("CHILD: SURVIVED, read {b:#x}");
        return;
    }
    let o = run_child(SIGBUS_READ, SIGBUS_READ);
    assert!(o.stderr.contains("CHILD: reading evicted page 37"), "{o:?}");
    assert!(!o.stderr.contains("SURVIVED"), "{o:?}");
    assert_eq!(o.status.signal(), Some(libc::SIGBUS), "{o:?}");
}

const SIGBUS_READ_IN_THREAD: &str =
    "a_page_that_cannot_be_read_back_kills_a_reader_serving_its_own_fault";

/// The same with the fault served in the faulting thread (in_thread.rs): the page is
/// poisoned there, and the access that retries meets the poison, whose SIGBUS the region's
/// handler passes on (the default action: death), never served as a fault.
#[test]
fn a_page_that_cannot_be_read_back_kills_a_reader_serving_its_own_fault() {
    if in_child(SIGBUS_READ_IN_THREAD) {
        let dev = faulty_device();
        let mut r = evicted_to_device_with(&dev, true);
        dev.fail_reads();
        eprintln!("CHILD: reading evicted page 37 with device reads failing");
        let b = touch(r.as_mut_slice(), 37 * PAGE + 100);
        eprintln!("CHILD: SURVIVED, read {b:#x}");
        return;
    }
    let o = run_child(SIGBUS_READ_IN_THREAD, SIGBUS_READ_IN_THREAD);
    assert!(o.stderr.contains("CHILD: reading evicted page 37"), "{o:?}");
    assert!(!o.stderr.contains("SURVIVED"), "{o:?}");
    assert_eq!(o.status.signal(), Some(libc::SIGBUS), "{o:?}");
}

const STAYS_POISONED: &str = "a_poisoned_page_stays_poisoned_after_the_device_recovers";

#[test]
fn a_poisoned_page_stays_poisoned_after_the_device_recovers() {
    if in_child(STAYS_POISONED) {
        let dev = faulty_device();
        let mut r = evicted_to_device(&dev);
        if !r.kernel_faults_served() {
            // Cannot poison without dying; tell the parent.
            eprintln!("CHILD: NO KERNEL FAULTS");
            return;
        }
        dev.fail_reads();
        poison_by_kernel_read(&mut r, 37);
        dev.clear();
        // The device reads again, but the page's data is gone: it must not come back as
        // zeros or as anything else.
        assert!(r.stats().poisoned >= 1);
        eprintln!("CHILD: touching the poisoned page after the device recovered");
        let b = touch(r.as_mut_slice(), 37 * PAGE + 100);
        eprintln!("CHILD: SURVIVED, read {b:#x}");
        return;
    }
    let o = run_child(STAYS_POISONED, STAYS_POISONED);
    if o.stderr.contains("CHILD: NO KERNEL FAULTS") {
        panic!("this test needs kernel-mode userfaultfd faults: run it as root (CI does)");
    }
    assert!(
        o.stderr.contains("CHILD: touching the poisoned page"),
        "{o:?}"
    );
    assert!(!o.stderr.contains("SURVIVED"), "{o:?}");
    assert_eq!(o.status.signal(), Some(libc::SIGBUS), "{o:?}");
}

#[test]
fn only_the_unreadable_page_is_lost_and_a_discard_makes_it_usable_again() {
    let dev = faulty_device();
    let mut r = evicted_to_device(&dev);
    if !r.kernel_faults_served() {
        panic!("this test needs kernel-mode userfaultfd faults: run it as root (CI does)");
    }
    dev.fail_reads();
    poison_by_kernel_read(&mut r, 37);
    dev.clear();
    let s = r.stats();
    assert_eq!(s.poisoned, 1, "{s:?}");
    let z = r.zswap().stats();
    assert!(
        z.get("swap_read_fail") >= 1,
        "the read error was not counted"
    );
    assert!(dev.stats().read_eio >= 1);
    // Every other page, its neighbours included, reads back right.
    let mem = r.as_mut_slice();
    check_from(&mem[..37 * PAGE], 0, 0);
    check_from(&mem[38 * PAGE..], 38, 0);
    // A discard frees the poisoned page: it reads as zero, as after any MADV_DONTNEED,
    // and is ordinary memory again, through eviction and back.
    r.discard(37 * PAGE, PAGE).unwrap();
    let mem = r.as_mut_slice();
    assert!(
        mem[37 * PAGE..38 * PAGE].iter().all(|&b| b == 0),
        "a discarded poisoned page did not read as zero"
    );
    mem[37 * PAGE..38 * PAGE].copy_from_slice(&page_data(37, 0));
    r.reclaim_to(0);
    check(r.as_mut_slice(), 0);
    assert_eq!(r.stats().poisoned, 1);
}

// ---------------------------------------------------------------------------------------
// Invariant 9: a dead fault handler stops the process.

const HANDLER_DIES: &str = "a_fault_handler_that_dies_stops_the_process";

/// The child's side of the two tests below: every page of a region evicted to a device
/// whose reads then panic, and one read back (faults served in the faulting thread if
/// `in_thread`). Says "SURVIVED" if the read returns.
fn read_back_with_a_device_read_panicking(in_thread: bool) {
    // A device whose reads panic once armed: the only way, from outside the crate, to make
    // the thread that serves a fault panic deterministically (it reads the device itself).
    let dev = ArmedReads::new(|slot| {
        panic!("injected: the swap device read of slot {} panicked", slot.0)
    });
    // Two handlers: the survivor must not let the program carry on either (the fault the
    // dead one took is gone with it; without the abort the reader would hang, or worse, read
    // whatever is mapped there later).
    let mut r = Region::new(
        1 << 20,
        RegionConfig::new(4 << 20)
            .folio_size(PAGE)
            .fault_threads(2)
            .device(dev.clone())
            .in_thread_faults(in_thread),
    )
    .unwrap();
    r.zswap().params().set_enabled(false);
    fill(r.as_mut_slice(), 0);
    wait_pages_in(&r, 256);
    r.reclaim_to(0);
    assert_eq!(r.usage().resident, 0);
    dev.arm(true);
    eprintln!("CHILD: reading an evicted page with the device read panicking");
    let b = touch(r.as_mut_slice(), 5 * PAGE);
    eprintln!("CHILD: SURVIVED, read {b:#x}");
}

#[test]
fn a_fault_handler_that_dies_stops_the_process() {
    if in_child(HANDLER_DIES) {
        read_back_with_a_device_read_panicking(false);
        return;
    }
    // With the harness capturing output, as `cargo test` runs: the capture is lost with the
    // process, so the report of the death must bypass it, the panic's message included.
    let o = run_child_as(HANDLER_DIES, HANDLER_DIES, Output::Captured);
    assert!(
        o.stderr
            .contains("died (injected: the swap device read of slot"),
        "no word of the handler's death and its cause: {o:?}"
    );
    assert!(o.stderr.contains("stopping the process"), "{o:?}");
    assert!(!o.stderr.contains("SURVIVED"), "{o:?}");
    assert_eq!(o.status.signal(), Some(libc::SIGABRT), "{o:?}");
}

const SERVER_DIES: &str = "a_thread_that_panics_serving_its_own_fault_stops_the_process";

/// The same for a program thread serving its own fault (in_thread.rs): a panic cannot unwind
/// out of the SIGBUS handler, and the process is aborted, never left to read what is mapped.
#[test]
fn a_thread_that_panics_serving_its_own_fault_stops_the_process() {
    if in_child(SERVER_DIES) {
        read_back_with_a_device_read_panicking(true);
        return;
    }
    let o = run_child(SERVER_DIES, SERVER_DIES);
    assert!(o.stderr.contains("CHILD: reading an evicted page"), "{o:?}");
    assert!(!o.stderr.contains("SURVIVED"), "{o:?}");
    assert_eq!(o.status.signal(), Some(libc::SIGABRT), "{o:?}");
}

// ---------------------------------------------------------------------------------------
// Invariant 7 again: a page the kernel swapped out is not a lost one.

/// A fault event read after another handler served its page, the kernel having swapped the
/// page out to system swap since (its own reclaim does, on a machine with swap): the page is
/// not missing (an access swaps it back in without a userfault), so the event is stale, as
/// for a page still mapped. Would fail if such an event were taken for a page uzswap lost
/// track of (which stops the process). Such events are served here for pages the kernel
/// swapped out and dropped from its swap cache, where `mincore` stops counting them in
/// memory: swapped out, read back (still in the swap cache, clean) and paged out again, a
/// page needs no write and leaves the swap cache at once. Needs root (`swapon`).
#[test]
fn a_stale_fault_on_a_page_the_kernel_swapped_out_is_no_lost_page() {
    let Some(_swap) = common::SystemSwap::on() else {
        return;
    };
    let size = 1 << 20;
    // Far under its limit: nothing of it leaves for uzswap.
    let mut r = Region::new(size, RegionConfig::new(64 << 20).folio_size(PAGE)).unwrap();
    fill(r.as_mut_slice(), 0);
    wait_pages_in(&r, (size / PAGE) as u64);
    let swapped = common::swap_out(&mut r, size, 0);
    for &p in &swapped {
        r.fault_again(p * PAGE);
    }
    let s = r.stats();
    assert_eq!(s.lost_track, 0, "{s:?}");
    assert!(s.redundant >= swapped.len() as u64, "{s:?}");
    check(r.as_mut_slice(), 0);
}

// ---------------------------------------------------------------------------------------
// memory.zswap.writeback = 0.

#[test]
fn with_writeback_off_what_the_pool_cannot_hold_stays_resident() {
    let size = 8 << 20;
    let limit = 4 << 20;
    // A pool of 1% of the limit (40 KiB) holds a few folios; the rest has nowhere to go.
    let config = RegionConfig::new(limit)
        .max_pool_percent(1)
        .auto_pool_share(false);
    // With the inactive list, the store that fails is of a staged folio, which goes back.
    for inactive_list in [false, true] {
        let config = config.clone().writeback(false).inactive_list(inactive_list);
        let mut r = Region::new(size, config).unwrap();
        fill(r.as_mut_slice(), 3);
        r.reclaim_to(0);
        let u = r.usage();
        assert!(
            u.total() > limit,
            "the region got under its limit with nowhere to put its pages: {u:?}"
        );
        assert!(u.resident + u.staged + u.pool >= (size as u64) / 2, "{u:?}");
        assert!(r.stats().evict_failed > 0, "{:?}", r.stats());
        check(r.as_mut_slice(), 3);
        let z = r.zswap().stats();
        for name in ["written_back_pages", "zswpwb", "pswpout"] {
            assert_eq!(z.get(name), 0, "{name}: a page reached the swap file");
        }
    }

    // The same region with writeback on does reach the swap file and its limit, so the
    // setup above really leaves pages with no place but memory.
    let mut r = Region::new(size, config.writeback(true)).unwrap();
    fill(r.as_mut_slice(), 3);
    r.reclaim_to(0);
    assert!(r.usage().total() < limit, "{:?}", r.usage());
    assert!(r.zswap().stats().get("pswpout") > 0);
    check(r.as_mut_slice(), 3);
}

/// Folios with a discarded page are evicted page by page; a page that cannot go (writeback
/// off, the pool full) is queued again for reclaim as its whole folio, which reclaim later
/// locks at the region's folio order. Would fail if the page itself were queued: an
/// unaligned folio start stops the reclaiming thread.
#[test]
fn pages_of_a_split_folio_that_cannot_go_are_queued_as_their_folio() {
    let size = 8 << 20;
    let folio = 64 << 10;
    let config = RegionConfig::new(16 << 20)
        .max_pool_percent(1)
        .auto_pool_share(false)
        .writeback(false);
    let mut r = Region::new(size, config).unwrap();
    fill(r.as_mut_slice(), 5);
    // Page 1 of every folio discarded: each folio is partly present.
    for f in (0..size).step_by(folio) {
        r.discard(f + PAGE, PAGE).unwrap();
    }
    r.reclaim_to(0);
    assert!(r.stats().evict_failed > 0, "{:?}", r.stats());
    // Reclaim again: it takes the folios queued again above.
    r.reclaim_to(0);
    let mem = r.as_mut_slice();
    for (i, page) in mem.chunks(PAGE).enumerate() {
        if i % (folio / PAGE) == 1 {
            assert!(
                page.iter().all(|&b| b == 0),
                "discarded page {i} is not zero"
            );
        } else {
            assert!(page == &page_data(i, 5)[..], "page {i} read back wrong");
        }
    }
}

// ---------------------------------------------------------------------------------------
// mremap (EVENT_REMAP).

#[test]
fn moving_the_region_with_mremap_keeps_every_page() {
    let config = RegionConfig::new(8 << 20).inactive_list(true);
    let mut r = Region::new(4 << 20, config).unwrap();
    fill(r.as_mut_slice(), 21);
    // Pages in every place when it moves: resident, staged, in the pool.
    stage_and_store_some(&r);
    assert!(r.usage().pool > 0, "{:?}", r.usage());
    let before = r.as_ptr() as usize;
    r.relocate().unwrap();
    assert_ne!(
        r.as_mut_slice().as_ptr() as usize,
        before,
        "it did not move"
    );
    check(r.as_mut_slice(), 21);
    let s = r.stats();
    assert_eq!(s.remaps, 1, "{s:?}");
    assert_eq!(r.as_ptr() as usize, r.as_mut_slice().as_ptr() as usize);
    // Eviction and faults work at the new place. (Not every folio need go: the one
    // faulted last may still be finishing; see `wait_pages_in`.)
    let evicted = r.stats().folios_evicted;
    r.reclaim_to(0);
    assert!(r.stats().folios_evicted >= evicted + 60, "{:?}", r.stats());
    check(r.as_mut_slice(), 21);
}

// ---------------------------------------------------------------------------------------
// fork (spec item 5): a child never reads zeros where the parent's evicted data is.
//
// A real fork needs unsafe code (libc::fork, nix::unistd::fork), which tests may not use;
// `Command` forks and execs, so the child never sees our mapping. What makes fork safe is
// that the region is MADV_DONTFORK, so a child gets no mapping at all (SIGSEGV, not
// zeros): this checks that flag (VM_DONTCOPY, "dc" in smaps) is on the region's mapping,
// along with the userfaultfd registration ("um") that serves its missing pages.

fn vm_flags_of(addr: usize) -> Vec<String> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let mut in_vma = false;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((start, _end)) = first.split_once('-') {
            if let Ok(start) = usize::from_str_radix(start, 16) {
                in_vma = start == addr;
                continue;
            }
        }
        if in_vma {
            if let Some(flags) = line.strip_prefix("VmFlags:") {
                return flags.split_whitespace().map(String::from).collect();
            }
        }
    }
    panic!("no mapping starts at {addr:#x}");
}

#[test]
fn the_region_is_not_inherited_by_a_child_process() {
    let mut r = Region::new(4 << 20, RegionConfig::new(3 << 20)).unwrap();
    fill(r.as_mut_slice(), 1);
    r.reclaim_to(0);
    let flags = vm_flags_of(r.as_ptr() as usize);
    assert!(
        flags.iter().any(|f| f == "dc"),
        "the region would be inherited by fork (a child would read zeros where evicted \
         pages are): VmFlags {flags:?}"
    );
    assert!(flags.iter().any(|f| f == "um"), "{flags:?}");
    // Still so after a move (mremap keeps the VMA's flags, but the region must follow).
    r.relocate().unwrap();
    // The mapping's own address: `as_ptr` follows once a handler has acted on the move.
    let flags = vm_flags_of(r.as_mut_slice().as_ptr() as usize);
    assert!(flags.iter().any(|f| f == "dc"), "{flags:?}");
    check(r.as_mut_slice(), 1);
}

// ---------------------------------------------------------------------------------------
// Stress.

/// uffd-stress in spirit, for a set time (`UZSWAP_REGION_STRESS_SECS`, 2 s by default; set
/// it to run long): threads update their own pages while kswapd, direct reclaim, the
/// shrinker (a 5% pool) and writeback run, and every page of the region is checked against
/// a separate record after each round.
///
/// Each update bumps the page's counter (bytes 8..16) and writes the new count into the
/// next of the page's stamp slots, so updates land all over the page; the record (the count
/// per page) determines every byte the page must hold.
#[test]
fn stress_threads_updating_their_pages_under_reclaim_lose_nothing() {
    const THREADS: usize = 8;
    const SLOTS: usize = (PAGE - 16) / 8;
    let secs: f64 = std::env::var("UZSWAP_REGION_STRESS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    let size = 8 << 20;
    let pages = size / PAGE;
    let mut r = Region::new(
        size,
        RegionConfig::new(3 << 20)
            .max_pool_percent(5)
            .auto_pool_share(false)
            .fault_threads(2),
    )
    .unwrap();
    let record: Vec<AtomicU64> = (0..pages).map(|_| AtomicU64::new(0)).collect();
    let expected = |i: usize, count: u64| {
        let mut want = page_data(i, 0);
        want[8..16].copy_from_slice(&count.to_ne_bytes());
        if count > 0 {
            // Update k (1-based) wrote k into slot (k - 1) % SLOTS: each slot holds the
            // last k that maps to it.
            let m = count - 1;
            for j in 0..SLOTS as u64 {
                if j <= m {
                    let k = m - (m - j) % SLOTS as u64 + 1;
                    let at = 16 + j as usize * 8;
                    want[at..at + 8].copy_from_slice(&k.to_ne_bytes());
                }
            }
        }
        want
    };
    let mem = r.as_mut_slice();
    fill(mem, 0);
    // Counters start at zero.
    for page in mem.chunks_mut(PAGE) {
        page[8..16].fill(0);
    }
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let mut rounds = 0u64;
    while rounds == 0 || Instant::now() < deadline {
        rounds += 1;
        std::thread::scope(|s| {
            // Threads take interleaved stripes of 64 KiB (a folio each), so neighbouring
            // folios belong to different threads and faults on them race.
            let stripe = 64 << 10;
            let mut owned: Vec<Vec<(usize, &mut [u8])>> =
                (0..THREADS).map(|_| Vec::new()).collect();
            for (n, chunk) in mem.chunks_mut(stripe).enumerate() {
                owned[n % THREADS].push((n * stripe / PAGE, chunk));
            }
            for (t, mut mine) in owned.into_iter().enumerate() {
                let record = &record;
                s.spawn(move || {
                    let mut x = (rounds * 131 + t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                    let my_pages: usize = mine.iter().map(|(_, c)| c.len() / PAGE).sum();
                    for _ in 0..400 {
                        xorshift(&mut x);
                        let mut p = (x as usize) % my_pages;
                        let (first, chunk) = mine
                            .iter_mut()
                            .find_map(|(first, c)| {
                                let n = c.len() / PAGE;
                                if p < n {
                                    Some((*first, c))
                                } else {
                                    p -= n;
                                    None
                                }
                            })
                            .unwrap();
                        let page = &mut chunk[p * PAGE..(p + 1) * PAGE];
                        // A burst of updates to the page, as a program touches a hot page
                        // a few times before moving on (and so a round is not all faults).
                        for _ in 0..=(x >> 60) % 4 {
                            let k = u64::from_ne_bytes(page[8..16].try_into().unwrap()) + 1;
                            page[8..16].copy_from_slice(&k.to_ne_bytes());
                            let at = 16 + ((k - 1) % SLOTS as u64) as usize * 8;
                            page[at..at + 8].copy_from_slice(&k.to_ne_bytes());
                            record[first + p].fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        // The whole region, every round.
        for (i, page) in mem.chunks(PAGE).enumerate() {
            let count = record[i].load(Ordering::Relaxed);
            assert!(
                page == &expected(i, count)[..],
                "round {rounds}: page {i} (count {count}) lost an update or its data"
            );
        }
    }
    let s = r.stats();
    let z = r.zswap().stats();
    eprintln!(
        "{rounds} rounds; faults {} evicted {} staged hits {}; zswpout {} written back {} \
         pswpout {} pool limit hit {}",
        s.faults,
        s.folios_evicted,
        s.faults_staged,
        z.get("zswpout"),
        z.get("written_back_pages"),
        z.get("pswpout"),
        z.get("pool_limit_hit")
    );
    assert!(s.folios_evicted > 0 && s.faults > 0, "{s:?}");
    assert!(
        z.get("written_back_pages") + z.get("pswpout") > 0,
        "nothing reached the swap file: the small pool did not push anything out"
    );
}

const CHANGED_BYTE: &str = "a_changed_byte_on_the_swap_device_poisons_exactly_its_page";

/// Pages sealed in segments on the swap device, one byte of the device changed under them:
/// the engine reads back every page but exactly the one whose object held the byte, which
/// fails authentication (never decompressed, never handed over), and a program that touches
/// it dies of SIGBUS rather than read anything else.
#[test]
fn a_changed_byte_on_the_swap_device_poisons_exactly_its_page() {
    if in_child(CHANGED_BYTE) {
        let mem = Arc::new(MemoryDevice::new(256));
        let mut r = evicted_to_device(&mem);
        assert!(r.zswap().stats().get("swap_segments_written") > 0);
        // The first segment written starts at the device's first page.
        let mut page = vec![0u8; PAGE];
        mem.read(SwapSlot(0), &mut page).unwrap();
        page[40] ^= 0x10;
        mem.write(SwapSlot(0), &page).unwrap();
        let mut bad = Vec::new();
        let mut out = vec![0u8; PAGE];
        for p in 0..256u32 {
            let folio = r.group().lock_page(p);
            match r.group().read_page(&folio, p, &mut out) {
                Ok(_) => assert!(out == page_data(p as usize, 0), "page {p} read back wrong"),
                Err(e) => {
                    assert_eq!(
                        e.kind,
                        zswap::zswap::LoadErrorKind::Unauthenticated,
                        "page {p}"
                    );
                    bad.push(p);
                }
            }
        }
        assert_eq!(bad.len(), 1, "pages that failed: {bad:?}");
        assert_eq!(r.zswap().stats().get("swap_auth_fail"), 1);
        eprintln!("CHILD: reading page {} whose object was changed", bad[0]);
        let b = touch(r.as_mut_slice(), bad[0] as usize * PAGE + 100);
        eprintln!("CHILD: SURVIVED, read {b:#x}");
        return;
    }
    let o = run_child(CHANGED_BYTE, CHANGED_BYTE);
    assert!(o.stderr.contains("whose object was changed"), "{o:?}");
    assert!(!o.stderr.contains("SURVIVED"), "{o:?}");
    assert_eq!(o.status.signal(), Some(libc::SIGBUS), "{o:?}");
}
