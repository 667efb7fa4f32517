//! What of the process's resident memory the limit does not hold, by kind, from
//! `/proc/self/smaps`: the limit holds the heap (the region's resident, staged and pool
//! pages), and everything else resident is one of
//! - **files**: file-backed private mappings, the program's code and libraries and the files
//!   it maps (and the kernel's vDSO);
//! - **shared**: shared mappings, anonymous (`MAP_SHARED`, System V and POSIX shared memory)
//!   or of files;
//! - **stacks**: the main thread's stack and every thread's (an anonymous read-write mapping
//!   right above its `PROT_NONE` guard, as glibc makes them);
//! - **uzswap**: uzswap's own allocations, glibc's malloc in use (`mallinfo2`), which only
//!   uzswap and the program's start-up before the region use (and the program's blocks the
//!   heap had no room for, which are counted apart and left to the anonymous part);
//! - **anonymous**: the rest, anonymous memory the program mapped past uzswap: a runtime's
//!   heap mapped at addresses it chose (a JVM's), reservations too large for the heap,
//!   executable mappings.

/// Resident bytes outside the limit, by kind; they add up to the process's resident memory
/// less what the limit holds.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct NotHeld {
    pub files: u64,
    pub shared: u64,
    pub stacks: u64,
    pub uzswap: u64,
    pub anonymous: u64,
}

/// One mapping of smaps: what classifies it.
struct Vma {
    start: usize,
    end: usize,
    perms: String,
    /// Backed by a file (inode not 0), or one of the kernel's (`[vdso]`, ...).
    file: bool,
    name: String,
    rss: u64,
    shared: bool,
}

/// The mappings of smaps text.
fn vmas(smaps: &str) -> Vec<Vma> {
    let mut vmas: Vec<Vma> = Vec::new();
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let Some(first) = fields.next() else { continue };
        if let Some((start, end)) = first.split_once('-').and_then(|(s, e)| {
            Some((
                usize::from_str_radix(s, 16).ok()?,
                usize::from_str_radix(e, 16).ok()?,
            ))
        }) {
            let perms = fields.next().unwrap_or("").to_string();
            let inode = fields.nth(2).unwrap_or("0");
            let name = fields.collect::<Vec<_>>().join(" ");
            let file = inode != "0" || matches!(name.as_str(), "[vdso]" | "[vvar]" | "[vsyscall]");
            vmas.push(Vma {
                start,
                end,
                perms,
                file,
                name,
                rss: 0,
                shared: false,
            });
            continue;
        }
        let Some(vma) = vmas.last_mut() else { continue };
        match first {
            "Rss:" => vma.rss = fields.next().and_then(|k| k.parse().ok()).unwrap_or(0) << 10,
            "VmFlags:" => vma.shared = fields.any(|f| f == "sh"),
            _ => {}
        }
    }
    vmas
}

/// Split `outside` bytes (resident memory less what the limit holds) by kind: the mappings of
/// `smaps` outside `heap` (the region's range), and `uzswap` bytes of glibc's malloc in use.
/// The anonymous part is what the other kinds leave of `outside`.
pub fn split(smaps: &str, heap: std::ops::Range<usize>, outside: u64, uzswap: u64) -> NotHeld {
    let vmas = vmas(smaps);
    let mut split = NotHeld::default();
    for (i, vma) in vmas.iter().enumerate() {
        if vma.start < heap.end && vma.end > heap.start {
            continue;
        }
        let after_guard = i > 0 && {
            let below = &vmas[i - 1];
            below.end == vma.start && below.perms.starts_with("---") && !below.file
        };
        if vma.shared {
            split.shared += vma.rss;
        } else if vma.file {
            split.files += vma.rss;
        } else if vma.name == "[stack]" || (after_guard && vma.perms.starts_with("rw")) {
            split.stacks += vma.rss;
        }
    }
    split.uzswap = uzswap;
    // The kinds above are counted from the mappings, the anonymous part is what they leave:
    // so the parts add up to `outside` (the first ones cut short if smaps and the counts
    // disagree, as they are read at different instants).
    let mut left = outside;
    for part in [
        &mut split.files,
        &mut split.shared,
        &mut split.stacks,
        &mut split.uzswap,
    ] {
        *part = (*part).min(left);
        left -= *part;
    }
    split.anonymous = left;
    split
}

/// Resident bytes of this process's mappings within `heap` (smaps' Rss).
#[cfg(not(test))]
pub fn heap_resident(heap: std::ops::Range<usize>) -> u64 {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
    vmas(&smaps)
        .iter()
        .filter(|v| v.start < heap.end && v.end > heap.start)
        .map(|v| v.rss)
        .sum()
}

/// The split of this process now.
#[cfg(not(test))]
pub fn measure(heap: std::ops::Range<usize>, outside: u64) -> NotHeld {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
    // SAFETY: mallinfo2 reads glibc's arenas under their locks and returns a plain struct.
    let info = unsafe { libc::mallinfo2() };
    // Less the program's blocks glibc holds (those the heap had no room for, malloc.rs).
    let program = crate::malloc::PROGRAM_IN_LIBC.load(std::sync::atomic::Ordering::Relaxed);
    let uzswap = ((info.uordblks + info.hblkhd) as u64).saturating_sub(program);
    split(&smaps, heap, outside, uzswap)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55d000000000-55d000010000 r-xp 00000000 08:01 1234 /usr/bin/prog
Rss:                  40 kB
VmFlags: rd ex mr mw me
7f0000000000-7f0000100000 rw-p 00000000 00:00 0
Rss:                1024 kB
VmFlags: rd wr mr mw me ac
7f1000000000-7f1000001000 ---p 00000000 00:00 0
Rss:                   0 kB
VmFlags: mr mw me
7f1000001000-7f1000081000 rw-p 00000000 00:00 0
Rss:                  16 kB
VmFlags: rd wr mr mw me ac
7f2000000000-7f2000200000 rw-s 00000000 00:01 99 /dev/zero (deleted)
Rss:                 100 kB
VmFlags: rd wr sh mr mw me ms
7f3000000000-7f3000400000 rw-p 00000000 00:00 0
Rss:                2048 kB
VmFlags: rd wr mr mw me ac
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
Rss:                  12 kB
VmFlags: rd wr mr mw me gd ac
";

    #[test]
    fn each_mapping_outside_the_heap_counts_once_by_kind() {
        let heap = 0x7f00_0000_0000..0x7f00_0010_0000;
        // Outside: 40 + 16 + 100 + 2048 + 12 KiB resident; 1000 KiB of it uzswap's malloc.
        let outside = (40 + 16 + 100 + 2048 + 12) << 10;
        let split = split(SMAPS, heap, outside, 1000 << 10);
        assert_eq!(
            split,
            NotHeld {
                files: 40 << 10,
                shared: 100 << 10,
                stacks: (16 + 12) << 10,
                uzswap: 1000 << 10,
                anonymous: (2048 - 1000) << 10,
            }
        );
    }

    #[test]
    fn the_parts_never_add_up_past_what_is_outside() {
        let split = split(SMAPS, 0..0, 50 << 10, 1 << 20);
        assert_eq!(split.files, 40 << 10);
        assert_eq!(split.shared, 10 << 10);
        assert_eq!(split.stacks + split.uzswap + split.anonymous, 0);
    }
}
