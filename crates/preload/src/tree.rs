//! The process tree of one `uzswap run`, held under one limit as a cgroup holds its tasks.
//!
//! Every process of the tree that keeps the environment makes a region of its own (init.rs);
//! they share one ledger: a memfd of `uzswap run`'s, which each process maps shared through
//! its `/proc/PID/fd/N` path (`tree_file` in `UZSWAP_RUN`) and whose descriptor it closes at
//! once. A process takes a slot there for its life (its PID, parent, name, state). Each
//! time one of its faults makes room, its region says what it holds and takes its share of
//! the tree's limits (`region::SharedLimit`): `--memory-high` and `--memory-max` less what
//! the tree's other running processes hold (never below what the region needs for itself,
//! which is said once if the tree's regions pass the limit together), so the process that
//! allocates is the one that reclaims, as in a cgroup. Its statistics thread (server.rs)
//! publishes the rest of its figures every `PUBLISH_PERIOD`, gives an idle process its share
//! too, and finds the processes that ended without an exit (a signal). At exit a process
//! leaves its final figures in its slot, so the statistics of the tree (`tree/PID/...`
//! lines, stats.rs) cover the children that have ended too.
//!
//! Nothing is made in any directory: the ledger goes when `uzswap run` and the last process
//! that maps it are gone. A process started without one (no `tree_file`, or `uzswap run`
//! gone) runs under the whole limit alone.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use region::{Region, SharedLimit};

/// How often the statistics thread publishes a process's figures.
pub const PUBLISH_PERIOD: Duration = Duration::from_millis(100);

/// The ledger's size: `LEDGER_BYTES / size_of::<Slot>()` processes a run.
pub const LEDGER_BYTES: usize = 64 << 10;

/// What a slot says of its process, one value each, in this order.
pub const VALUES: [&str; 12] = [
    "charged_bytes",
    "peak_charged_bytes",
    "resident_bytes",
    "pool_bytes",
    "zswpout",
    "zswpin",
    "pswpout",
    "pswpin",
    "faults",
    "fault_wait_ns",
    "throttled_ns",
    "oom_kill",
];

/// One process's slot; all zeros is a free one.
#[repr(C)]
pub struct Slot {
    pid: AtomicU32,
    parent: AtomicU32,
    /// 0 free, `RUNNING`, `EXITED`, `CLAIMED` (being taken again).
    state: AtomicU32,
    _pad: u32,
    /// The process's start time (field 22 of /proc/PID/stat): a PID used again is told
    /// apart by it.
    start_time: AtomicU64,
    /// The process's name (`/proc/self/comm`), 16 bytes.
    comm: [AtomicU64; 2],
    values: [AtomicU64; VALUES.len()],
}

const RUNNING: u32 = 1;
const EXITED: u32 = 2;
const CLAIMED: u32 = 3;

/// The header's `magic`: what `uzswap run` writes into a ledger it makes
/// (crates/cli/src/run/shared_file.rs), checked before anything is written to one.
pub const MAGIC: u64 = u64::from_le_bytes(*b"uzswtree");

/// The ledger's first bytes, before its slots.
#[repr(C)]
pub struct Header {
    /// The tree's regions were said to need more than the limit together (said once a tree).
    said_crowded: AtomicU32,
    /// Slots taken so far: those past it are free.
    slots_used: AtomicU32,
    /// The most the tree's running processes were seen to hold together, in bytes (each
    /// process's publication sums them).
    peak_charged: AtomicU64,
    /// `MAGIC`, written by `uzswap run` at offset 16.
    magic: AtomicU64,
    _reserved: u64,
}

/// The ledger: its header and its slots, in one shared mapping.
pub struct Ledger {
    header: &'static Header,
    slots: &'static [Slot],
}

/// The ledger and this process's slot in it.
pub struct Tree {
    header: &'static Header,
    slots: &'static [Slot],
    own: usize,
    /// The tree's limits, as `uzswap run` was given them.
    high: u64,
    max: Option<u64>,
    /// The least limit this process's region accepts.
    least: u64,
}

impl Tree {
    /// Take a slot in `slots` for this process. None when every slot is taken (said once by
    /// the caller: the process then runs under the whole limit alone).
    pub fn join(ledger: Ledger, high: u64, max: Option<u64>, least: u64) -> Option<Tree> {
        let Ledger { header, slots } = ledger;
        let pid = std::process::id();
        // The image this process exec'd from had a slot and never reached its exit: it is
        // this one now.
        for slot in slots.iter().filter(|s| s.pid.load(Relaxed) == pid) {
            ended(slot);
        }
        // A free slot, or else the slot of a process that has ended: its figures give way.
        let own = slots
            .iter()
            .position(|s| s.pid.compare_exchange(0, pid, Relaxed, Relaxed).is_ok())
            .or_else(|| {
                slots.iter().position(|s| {
                    s.state
                        .compare_exchange(EXITED, CLAIMED, Relaxed, Relaxed)
                        .is_ok()
                })
            })?;
        header.slots_used.fetch_max(own as u32 + 1, Relaxed);
        let slot = &slots[own];
        slot.pid.store(pid, Relaxed);
        slot.start_time.store(start_time(pid).unwrap_or(0), Relaxed);
        for v in &slot.values {
            v.store(0, Relaxed);
        }
        slot.parent.store(parent(), Relaxed);
        let comm = std::fs::read_to_string("/proc/self/comm").unwrap_or_default();
        let mut bytes = [0u8; 16];
        for (b, c) in bytes.iter_mut().zip(comm.trim_end().bytes()) {
            *b = c;
        }
        slot.comm[0].store(u64::from_le_bytes(bytes[..8].try_into().unwrap()), Relaxed);
        slot.comm[1].store(u64::from_le_bytes(bytes[8..].try_into().unwrap()), Relaxed);
        slot.state.store(RUNNING, Relaxed);
        Some(Tree {
            header,
            slots,
            own,
            high,
            max,
            least,
        })
    }

    /// The slots taken so far.
    fn used(&self) -> &[Slot] {
        let n = self.header.slots_used.load(Relaxed) as usize;
        &self.slots[..n.min(self.slots.len())]
    }

    /// Publish this process's figures, give an idle region its share, and mark the processes
    /// that ended without an exit (killed by a signal: gone, they hold nothing).
    pub fn tick(&self, region: &Region) {
        self.record(region);
        for (i, slot) in self.used().iter().enumerate() {
            if i == self.own || slot.state.load(Relaxed) != RUNNING {
                continue;
            }
            // Gone, a zombie (its memory freed), or its PID taken by another process.
            let pid = slot.pid.load(Relaxed);
            let started = slot.start_time.load(Relaxed);
            if start_time(pid).is_none_or(|t| t != started) {
                ended(slot);
            }
        }
        let (high, max) = self.share(region.usage().total());
        region.set_limits(high, max);
    }

    /// The process exits: its final figures stay, and it no longer counts against the others.
    pub fn exit(&self, region: &Region) {
        self.record(region);
        ended(&self.slots[self.own]);
    }

    /// Write `region`'s figures into this process's slot.
    fn record(&self, region: &Region) {
        let usage = region.usage();
        let stats = region.stats();
        let engine = region.zswap().stats();
        let values = [
            usage.total(),
            stats.peak_charged_bytes,
            usage.resident,
            usage.pool,
            engine.get("zswpout"),
            engine.get("zswpin"),
            engine.get("pswpout"),
            engine.get("pswpin"),
            stats.faults,
            stats.fault_wait_ns,
            stats.throttled_ns,
            stats.oom_kill,
        ];
        let slot = &self.slots[self.own];
        for (v, value) in slot.values.iter().zip(values) {
            v.store(value, Relaxed);
        }
    }

    /// The tree's lines for the statistics: `tree_processes`, `tree_charged_bytes` (what the
    /// running processes hold now), `tree_peak_charged_bytes`, then `tree/PID/NAME value` for every process that has
    /// had a slot, ended ones included (`tree/PID/comm.NAME 1` names it, `tree/PID/parent`,
    /// `tree/PID/running`).
    pub fn lines(&self) -> String {
        let mut text = String::new();
        let mut processes = 0;
        let mut charged = 0;
        let mut rows = String::new();
        for slot in self.used() {
            let pid = slot.pid.load(Relaxed);
            let state = slot.state.load(Relaxed);
            if pid == 0 || !matches!(state, RUNNING | EXITED) {
                continue;
            }
            processes += 1;
            if state == RUNNING {
                charged += slot.values[0].load(Relaxed);
            }
            let comm = comm(slot);
            rows.push_str(&format!("tree/{pid}/comm.{comm} 1\n"));
            rows.push_str(&format!(
                "tree/{pid}/parent {}\n",
                slot.parent.load(Relaxed)
            ));
            rows.push_str(&format!(
                "tree/{pid}/running {}\n",
                u8::from(state == RUNNING)
            ));
            for (name, v) in VALUES.iter().zip(&slot.values) {
                rows.push_str(&format!("tree/{pid}/{name} {}\n", v.load(Relaxed)));
            }
        }
        text.push_str(&format!("tree_processes {processes}\n"));
        text.push_str(&format!("tree_charged_bytes {charged}\n"));
        text.push_str(&format!(
            "tree_peak_charged_bytes {}\n",
            self.header.peak_charged.load(Relaxed)
        ));
        text.push_str(&rows);
        text
    }
}

/// A slot's process name, printable.
fn comm(slot: &Slot) -> String {
    let mut comm = [0u8; 16];
    comm[..8].copy_from_slice(&slot.comm[0].load(Relaxed).to_le_bytes());
    comm[8..].copy_from_slice(&slot.comm[1].load(Relaxed).to_le_bytes());
    String::from_utf8_lossy(&comm)
        .trim_end_matches('\0')
        .chars()
        .map(|c| if c.is_ascii_graphic() { c } else { '_' })
        .collect()
}

/// A slot's process has ended: it holds nothing now; its other figures stay.
fn ended(slot: &Slot) {
    slot.values[0].store(0, Relaxed);
    slot.state.store(EXITED, Relaxed);
}

/// The start time of process `pid` (field 22 of /proc/PID/stat), None when it is gone or a
/// zombie.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the name, which is in parentheses and may hold anything.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    // Field 22 overall is the 20th after the name (the state, field 3, is the first).
    fields.nth(18)?.parse().ok()
}

impl Tree {
    /// The other running processes that hold the most, largest first: `PID name N MiB`.
    fn holders(&self) -> String {
        let mut held: Vec<(u64, u32, String)> = self
            .used()
            .iter()
            .enumerate()
            .filter(|&(i, s)| i != self.own && s.state.load(Relaxed) == RUNNING)
            .map(|(_, s)| (s.values[0].load(Relaxed), s.pid.load(Relaxed), comm(s)))
            .filter(|&(bytes, ..)| bytes > 0)
            .collect();
        held.sort_unstable_by_key(|h| std::cmp::Reverse(h.0));
        let mut text: Vec<String> = held
            .iter()
            .take(4)
            .map(|(bytes, pid, name)| format!("{pid} {name} {} MiB", bytes >> 20))
            .collect();
        if held.len() > 4 {
            text.push(format!("{} more", held.len() - 4));
        }
        text.join(", ")
    }
}

impl region::SharedLimit for Tree {
    fn share(&self, held: u64) -> (u64, Option<u64>) {
        self.slots[self.own].values[0].store(held, Relaxed);
        let others: u64 = self
            .used()
            .iter()
            .enumerate()
            .filter(|&(i, s)| i != self.own && s.state.load(Relaxed) == RUNNING)
            .map(|(_, s)| s.values[0].load(Relaxed))
            .sum();
        self.header.peak_charged.fetch_max(held + others, Relaxed);
        let share = self.high.saturating_sub(others);
        if share < self.least && self.header.said_crowded.swap(1, Relaxed) == 0 {
            crate::say(&format!(
                "the other processes of the tree hold {} MiB of --memory-high {} MiB ({}), and \
                 this one's region ({} {}) needs {} MiB for itself: together they may pass the \
                 limit (said once)",
                others >> 20,
                self.high >> 20,
                self.holders(),
                std::process::id(),
                comm(&self.slots[self.own]),
                self.least >> 20
            ));
        }
        let high = share.max(self.least);
        let max = self.max.map(|m| m.saturating_sub(others).max(high));
        (high, max)
    }

    fn killed(&self) {
        let slot = &self.slots[self.own];
        slot.values[VALUES.len() - 1].store(1, Relaxed);
        ended(slot);
    }
}

impl std::fmt::Debug for Tree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tree")
            .field("slot", &self.own)
            .field("high", &self.high)
            .field("max", &self.max)
            .finish()
    }
}

fn parent() -> u32 {
    // SAFETY: getppid has no preconditions.
    unsafe { libc::getppid() as u32 }
}

/// Map the ledger at `path` (`uzswap run`'s memfd, `/proc/PID/fd/N`) shared, and close the
/// descriptor: the program's descriptor table is left as it was. None when it cannot be
/// opened (`uzswap run` is gone) or mapped.
pub fn map(path: &std::path::Path) -> Option<Ledger> {
    use std::os::fd::AsRawFd;
    // `uzswap run`'s ledger, and nothing else by that path (its PID taken by another
    // process): the memfd's name, its seals against any change of size (a shrink would make
    // the mapping fault), and the magic it wrote.
    let link = std::fs::read_link(path).ok()?;
    if !link.to_str()?.starts_with("/memfd:uzswap-tree") {
        return None;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .ok()?;
    let seals = rustix::fs::fcntl_get_seals(&file).ok()?;
    let sealed = rustix::fs::SealFlags::SHRINK | rustix::fs::SealFlags::GROW;
    if !seals.contains(sealed) || file.metadata().ok()?.len() != LEDGER_BYTES as u64 {
        return None;
    }
    // SAFETY: a fresh shared mapping of the first LEDGER_BYTES of a file that long; the kernel
    // picks the address, so nothing else is replaced.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            LEDGER_BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    let header_bytes = std::mem::size_of::<Header>();
    let n = (LEDGER_BYTES - header_bytes) / std::mem::size_of::<Slot>();
    // SAFETY: the mapping is LEDGER_BYTES long and page-aligned; the header fills its first
    // 32 bytes and the slots follow, each 8-byte aligned (the header's size and the slot's
    // are multiples of 8), for `n` slots within the length. It is never unmapped (it lives as
    // long as the process), its file is sealed against shrinking, and it is read and written
    // only through atomics, here and in every other process that maps it; any bit pattern
    // is a valid atomic integer.
    let ledger = unsafe {
        Ledger {
            header: &*p.cast::<Header>(),
            slots: std::slice::from_raw_parts(p.cast::<u8>().add(header_bytes).cast::<Slot>(), n),
        }
    };
    // A mapping that is not a ledger stays mapped, unused: nothing of it is written.
    (ledger.header.magic.load(Relaxed) == MAGIC).then_some(ledger)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_is_the_size_the_ledger_is_cut_in() {
        assert_eq!(std::mem::size_of::<Slot>(), 40 + 8 * VALUES.len());
        assert_eq!(std::mem::size_of::<Header>(), 32);
        assert_eq!(std::mem::offset_of!(Header, magic), 16);
        assert!(LEDGER_BYTES / std::mem::size_of::<Slot>() >= 256);
    }
}
