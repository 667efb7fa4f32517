//! `uzswap run`: real, unmodified programs with their heap under a limit, their output
//! compared with a run without uzswap; exit status and signals passed through; uzswap's own
//! failures as `timeout(1)` has them (125, 126, 127), each one line.

mod common;

use std::process::{Command, Output};

use common::{compile, run_stat as stat, stderr, stdout};

/// `uzswap run ARGS -- PROGRAM...`.
fn run(args: &[&str], program: &[&str]) -> Output {
    common::ensure_preload();
    let mut all: Vec<&str> = vec!["run"];
    all.extend_from_slice(args);
    all.push("--");
    all.extend_from_slice(program);
    common::uzswap(&all)
}

/// A failure of uzswap's own: `status`, one line on stderr starting with `uzswap: ` and
/// holding `needle`, nothing on stdout.
fn assert_refused(o: &Output, status: i32, needle: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(status), "stderr: {err}");
    assert_eq!(err.lines().count(), 1, "{err:?}");
    assert!(
        err.starts_with("uzswap: ") && err.contains(needle),
        "{err:?}"
    );
    assert!(o.stdout.is_empty());
}

/// CPython building 150,000 small objects in a dict (about 75 MiB) under a 40 MiB limit:
/// the same output as without uzswap, pages evicted and brought back, and the process's peak
/// resident memory within the limit plus what lies outside the region (the interpreter, its
/// libraries, uzswap's threads and bookkeeping).
#[test]
fn cpython_under_a_limit_prints_what_it_prints_without_uzswap() {
    let script = r#"
import hashlib
d = {}
for i in range(150000):
    d[f"key{i}"] = [i, str(i) * 5, (i, i * 2)]
h = hashlib.sha256()
for k in sorted(d):
    h.update(repr(d[k]).encode())
print(len(d), h.hexdigest())
"#;
    let plain = Command::new("python3")
        .args(["-c", script])
        .output()
        .unwrap();
    assert!(plain.status.success(), "{}", stderr(&plain));
    let o = run(
        &["--memory-high", "40M", "--stats=full"],
        &["python3", "-c", script],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), stdout(&plain));
    assert!(stat(&o, "zswpout") > 0, "nothing evicted: {}", stderr(&o));
    assert!(stat(&o, "faults") > 0);
    let limit = stat(&o, "memory_limit_bytes");
    let outside_allowance = 48 << 20;
    let peak = stat(&o, "peak_rss_bytes");
    assert!(
        peak <= limit + outside_allowance,
        "peak {} MiB over {} MiB + {} MiB outside",
        peak >> 20,
        limit >> 20,
        outside_allowance >> 20
    );
}

/// Under a limit of 1G or more the heap is the kernel's alone until the program's anonymous
/// memory reaches half the limit (registration.rs): far from its limit a program takes no
/// fault of uzswap's; past half of it, the heap is registered, the pages present adopted and
/// reclaimed as any other, and the limit holds. CPython building 64 KiB blocks: 100 MB under
/// 4G, then 1.3 GB under 1G, each printing what it prints plainly.
#[test]
fn far_from_its_limit_the_heap_is_the_kernels_and_past_half_of_it_held() {
    let script = r#"
import hashlib, sys
blocks = [hashlib.sha256(str(i).encode()).digest() * 2048 for i in range(int(sys.argv[1]))]
h = hashlib.sha256()
for i, b in enumerate(blocks):
    assert b == hashlib.sha256(str(i).encode()).digest() * 2048, i
    h.update(b[:32])
print(len(blocks), h.hexdigest())
"#;
    for (limit, blocks) in [("4G", "1500"), ("1G", "20000")] {
        let plain = Command::new("python3")
            .args(["-c", script, blocks])
            .output()
            .unwrap();
        assert!(plain.status.success(), "{}", stderr(&plain));
        let o = run(
            &["--memory-high", limit, "--stats=full"],
            &["python3", "-c", script, blocks],
        );
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert_eq!(stdout(&o), stdout(&plain));
        if limit == "4G" {
            assert_eq!(stat(&o, "region_registered"), 0, "{}", stderr(&o));
            assert_eq!(stat(&o, "faults"), 0, "{}", stderr(&o));
            continue;
        }
        assert_eq!(stat(&o, "region_registered"), 1, "{}", stderr(&o));
        assert!(stat(&o, "adopted_pages") > 0, "{}", stderr(&o));
        assert!(stat(&o, "zswpout") > 0, "{}", stderr(&o));
        assert_peak_within_1g(&o);
    }
}

/// A fork far from the limit, before the heap is registered: the child reads the heap as
/// the parent built it, and the parent, growing past half its limit afterwards, adopts the
/// pages it still shares with the child's copy, makes them its own again (they cannot be
/// moved out shared) and holds its limit. CPython: 260 MB, a fork, then 1.3 GB under 1G.
#[test]
fn a_fork_before_the_heap_is_registered_leaves_it_whole_and_held_after() {
    let script = r#"
import hashlib, os, sys
def block(i):
    return hashlib.sha256(str(i).encode()).digest() * 2048
blocks = [block(i) for i in range(4000)]
pid = os.fork()
if pid == 0:
    os._exit(0 if all(b == block(i) for i, b in enumerate(blocks)) else 3)
_, status = os.waitpid(pid, 0)
blocks += [block(i) for i in range(4000, 20000)]
print(os.waitstatus_to_exitcode(status), all(b == block(i) for i, b in enumerate(blocks)))
"#;
    let o = run(
        &["--memory-high", "1G", "--stats=full"],
        &["python3", "-c", script],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "0 True\n", "{}", stderr(&o));
    assert_eq!(stat(&o, "region_registered"), 1, "{}", stderr(&o));
    assert!(stat(&o, "adopted_pages") > 0, "{}", stderr(&o));
    assert!(stat(&o, "fork_unshared") > 0, "{}", stderr(&o));
    assert_eq!(stat(&o, "lost_track"), 0, "{}", stderr(&o));
    assert_peak_within_1g(&o);
}

/// The program's peak RSS is within a limit of 1G plus 48 MiB outside it (the interpreter,
/// its libraries, uzswap's threads and bookkeeping).
fn assert_peak_within_1g(o: &Output) {
    let peak = stat(o, "peak_rss_bytes");
    let allowance = 48 << 20;
    assert!(
        peak <= (1 << 30) + allowance,
        "peak {} MiB over 1024 MiB + {} MiB outside",
        peak >> 20,
        allowance >> 20
    );
}

/// A forked child (CPython's `os.fork`) sees its parent's heap as it was at the fork,
/// evicted pages included, and the parent goes on with its own.
#[test]
fn a_forked_child_sees_its_parents_heap() {
    let script = r#"
import os, hashlib
data = [bytes([i % 251]) * 1000 + str(i).encode() for i in range(40000)]
digest = hashlib.sha256(b"".join(data)).hexdigest()
pid = os.fork()
if pid == 0:
    ok = hashlib.sha256(b"".join(data)).hexdigest() == digest
    data[0] = b"child"
    os._exit(0 if ok else 1)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status), "parent", hashlib.sha256(b"".join(data)).hexdigest() == digest)
"#;
    let o = run(
        &["--memory-high", "24M", "--stats=full"],
        &["python3", "-c", script],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "child 0 parent True\n");
    assert!(
        stat(&o, "zswpout") > 0,
        "nothing was evicted before the fork"
    );
}

/// `uzswap run ARGS -- PROGRAM...`, killed after `seconds` (status 124, as `timeout(1)`):
/// a hang fails the test instead of stopping the suite.
fn run_within(seconds: u32, args: &[&str], program: &[&str]) -> Output {
    common::ensure_preload();
    Command::new("timeout")
        .args([
            "-s",
            "KILL",
            &seconds.to_string(),
            env!("CARGO_BIN_EXE_uzswap"),
            "run",
        ])
        .args(args)
        .arg("--")
        .args(program)
        .output()
        .expect("run timeout")
}

/// Forks of a C program whose 96 MiB heap is past its 64 MiB limit: a child that forks a
/// grandchild, five forks while four threads allocate and free, and forty while four threads
/// map and unmap blocks, free over-aligned allocations or take and give back a 1 GiB
/// reservation (each kept in a table of the preload's, under a lock), after which each child
/// maps, unmaps, reserves address space and frees an over-aligned allocation once. Each child
/// checks the whole heap byte for byte; none hangs. Would hang without the forking thread's
/// allocations sent outside the region (a thread-local's first use in the region's code,
/// under its event gate, allocated from the region heap and faulted on it); without the
/// tables held across the fork, 13 to 24 children of the forty found a table locked by a
/// thread they do not have, and were killed by their alarm; and without discards waiting
/// for the faults they held off (region's mmap_changing.rs), the parent hung 1 run in 3
/// beside a CPU hog, the reservation's discards starving every fault.
#[test]
fn forks_under_pressure_never_hang_and_each_child_sees_the_whole_heap() {
    let program = compile("forks");
    let tables = run_within(
        120,
        &["--memory-high", "64M"],
        &[program.to_str().unwrap(), "tables", "96"],
    );
    let nested = run_within(
        120,
        &["--memory-high", "64M"],
        &[program.to_str().unwrap(), "nested", "96"],
    );
    let threads = run_within(
        120,
        &["--memory-high", "64M"],
        &[program.to_str().unwrap(), "threads", "96"],
    );
    std::fs::remove_file(&program).unwrap();
    assert_eq!(tables.status.code(), Some(0), "{}", stderr(&tables));
    assert_eq!(stdout(&tables), "bad children 0 parent 1\n");
    assert_eq!(nested.status.code(), Some(0), "{}", stderr(&nested));
    assert_eq!(stdout(&nested), "child 0 parent 1\n");
    assert_eq!(threads.status.code(), Some(0), "{}", stderr(&threads));
    assert_eq!(stdout(&threads), "bad children 0 parent 1\n");
    // The note on what the fork brought back is said once, by the first parent only.
    assert_eq!(
        stderr(&nested).matches("a fork brought").count(),
        1,
        "{}",
        stderr(&nested)
    );
}

/// A fork brings the heap back (so that the child sees all of it) and leaves every page
/// shared with the child, copy on write. The kernel moves only pages a process holds alone,
/// so before, the parent kept its whole heap, past its limit and unthrottled, for as long as
/// it ran. Now kswapd makes the shared pages the parent's own again and reclaim moves them
/// out: a 192 MiB heap under 64M forks a child that waits; the parent's anonymous memory goes
/// under 110 MiB while the child lives (it stayed over 192 MiB), then the child checks its
/// copy and the parent its heap, byte for byte. Each page unshared is a copy while the child
/// lives, and leaves as it is made: the two processes never hold more than the heap and the
/// limit together (when the copies waited for a trip through the FIFO, they held the heap
/// twice: 388 MiB).
#[test]
fn a_parent_goes_back_under_its_limit_after_a_fork_and_both_keep_their_data() {
    let program = compile("forks");
    let o = run_within(
        120,
        &["--memory-high", "64M", "--stats=full"],
        &[program.to_str().unwrap(), "shared", "192", "110", "256"],
    );
    std::fs::remove_file(&program).unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "under 1 within 1 child 0 parent 1\n",
        "{}",
        stderr(&o)
    );
    assert!(stat(&o, "fork_unshared") > 0, "{}", stderr(&o));
}

/// What shells and daemons do with descriptors never reaches uzswap's: a C program whose
/// heap is past its limit `dup2`s a log onto each number from 3 to 63, closes every number
/// to 1023, calls `close_range(3, ~0U, 0)` and `closefrom(3)`, then checks its heap and builds
/// another; a bash script keeps a log on fd 5 (`exec 5>log`) while it builds an array past
/// its limit. Each prints what it prints plainly. Without uzswap's descriptors out of reach,
/// the heap came back corrupt and the log took a page of the swap file, and bash died of
/// SIGBUS.
#[test]
fn descriptors_a_program_closes_or_replaces_are_never_uzswaps() {
    let program = compile("descriptors");
    let log = program.with_extension("log");
    let c = run(
        &["--memory-high", "24M", "--stats=full"],
        &[program.to_str().unwrap(), log.to_str().unwrap(), "64"],
    );
    std::fs::remove_file(&program).unwrap();
    assert_eq!(c.status.code(), Some(0), "{}", stderr(&c));
    assert_eq!(stdout(&c), "heap ok log 654 bytes\n");
    assert!(
        stat(&c, "pswpout") > 0,
        "nothing went to the swap file: {}",
        stderr(&c)
    );
    let script = r#"
exec 5>"$1"
declare -a a
for ((i = 0; i < 300000; i++)); do a[i]="element $i of the array, padded to take some room"; done
echo "built ${#a[@]}" >&5
for ((i = 0; i < 300000; i += 7919)); do echo "${a[i]}" >&5; done
exec 5>&-
echo "$(wc -c < "$1") ${a[123456]}"
"#;
    let bash = run(
        &["--memory-high", "16M", "--stats=full"],
        &["bash", "-c", script, "bash", log.to_str().unwrap()],
    );
    std::fs::remove_file(&log).unwrap();
    assert_eq!(bash.status.code(), Some(0), "{}", stderr(&bash));
    assert_eq!(
        stdout(&bash),
        "2047 element 123456 of the array, padded to take some room\n"
    );
    assert!(
        stat(&bash, "zswpout") > 0,
        "nothing evicted: {}",
        stderr(&bash)
    );
}

/// Every alignment allocates, as it does without uzswap: mimalloc aligns at most to 64 KiB
/// in the region's arena, and larger alignments (ENOMEM before) are carved out of larger
/// blocks.
#[test]
fn every_alignment_allocates() {
    let program = compile("alignments");
    let o = run(&["--memory-high", "64M"], &[program.to_str().unwrap()]);
    std::fs::remove_file(&program).unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "ok\n");
    assert_eq!(stderr(&o), "");
}

/// A mapping shrunk by mremap and unmapped at its new length is freed whole, 64 times 64 MiB
/// in a heap of 1 GiB: the part past the new end left with the heap before (ENOMEM at the
/// eleventh).
#[test]
fn a_mapping_shrunk_by_mremap_then_unmapped_is_freed_whole() {
    let program = compile("mremap_shrink");
    let o = run(&["--memory-high", "64M"], &[program.to_str().unwrap()]);
    std::fs::remove_file(&program).unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "ok\n");
}

/// A mapping grown by mremap past its block moves with its bytes: a third of its 64 KiB
/// chunks written and evicted in part under a 16M limit, the rest never touched, grown from
/// 48 to 96 MiB: the written chunks as they were, everything else zero.
#[test]
fn a_mapping_grown_by_mremap_moves_with_its_bytes() {
    let o = same_as_plain("mremap_grow", "16M", "ok\n");
    assert!(stat(&o, "zswpin") > 0, "nothing came back: {}", stderr(&o));
}

/// Protections over the heap are the kernel's, with the heap past its limit and evicted in
/// part: a `PROT_NONE` reservation traps until committed, a page of data made `PROT_NONE`
/// or read-only traps as it should and keeps its bytes, a fixed `PROT_NONE` mapping over part
/// of a block (a decommit) traps, a guard page in a malloc'd buffer traps, and a block whose
/// protections changed is plain read-write once mapped again. The program prints what it
/// prints without uzswap (9 traps, no wrong byte). Before, reservations read zero and other
/// protections were refused or granted without effect.
#[test]
fn protections_over_the_heap_trap_as_without_uzswap() {
    let o = same_as_plain("protections", "24M", "trapped 9 wrong 0\n");
    assert!(stat(&o, "zswpin") > 0, "nothing came back: {}", stderr(&o));
}

/// Reservations larger than any block mimalloc makes (2 GiB or more: a JVM's `-Xmx3g`) are
/// held, from the heap's upper half: a 2.5 GiB `PROT_NONE` reservation traps, 96 MiB of it
/// committed with `mprotect` keeps every byte under a 64M limit, unmapped in two halves and
/// reserved again it reads zero where committed, and a 2 GiB read-write mapping reads zero.
/// The same line as without uzswap, pages evicted, and no anonymous memory outside the heap.
/// Before, such a reservation went to the kernel, outside the limit.
#[test]
fn reservations_past_the_allocators_largest_block_are_held() {
    let o = same_as_plain("large_reservations", "64M", "trapped 3 wrong 0 nonzero 0\n");
    assert!(stat(&o, "zswpout") > 0, "nothing evicted: {}", stderr(&o));
    assert!(
        stat(&o, "outside_anonymous_bytes") < 8 << 20,
        "a reservation went to the kernel: {}",
        stderr(&o)
    );
}

/// Run the C program `name` of tests/programs plainly, where it must print `plain`, then
/// under `--memory-high limit --stats=full`, where it must exit 0 and print the same.
/// Memory past the heap's address space (`--max-heap`) is allocated outside the limit, said
/// once, where it would otherwise fail and does not without uzswap: malloc's blocks and
/// anonymous mappings alike (no ceiling a program can run into).
#[test]
fn allocations_past_the_heaps_address_space_succeed_outside_the_limit() {
    let program = compile("past_the_heap");
    let alone = Command::new(&program).output().unwrap();
    assert_eq!(stdout(&alone), "ok wrong 0\n");
    let o = run_within(
        120,
        &["--memory-high", "64M", "--max-heap", "256M"],
        &[program.to_str().unwrap()],
    );
    std::fs::remove_file(&program).unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(stdout(&o), "ok wrong 0\n");
    assert_eq!(
        err.matches("what it has no room for is allocated outside the limit")
            .count(),
        1,
        "{err}"
    );
}

fn same_as_plain(name: &str, limit: &str, plain: &str) -> std::process::Output {
    let program = compile(name);
    let alone = Command::new(&program).output().unwrap();
    let o = run_within(
        120,
        &["--memory-high", limit, "--stats=full"],
        &[program.to_str().unwrap()],
    );
    std::fs::remove_file(&program).unwrap();
    assert_eq!(stdout(&alone), plain);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), plain);
    o
}

/// A C program that write(2)s 64 MiB out of a heap buffer evicted meanwhile and read(2)s it
/// back into a buffer it never touched, under a 32 MiB limit: the kernel's own accesses to
/// the heap are served (kernel-mode faults), and every byte comes back.
#[test]
fn system_calls_on_evicted_and_untouched_heap_buffers_work() {
    let program = compile("syscalls");
    let data = program.with_extension("data");
    let o = run(
        &["--memory-high", "32M", "--stats=full"],
        &[program.to_str().unwrap(), data.to_str().unwrap()],
    );
    let _ = std::fs::remove_file(&program);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(stdout(&o), "ok 1\n");
    assert!(
        stat(&o, "zswpout") > 0,
        "nothing was evicted: {}",
        stderr(&o)
    );
}

/// The same with every fault served in the thread that takes it (`--in-thread-faults`):
/// the kernel's own accesses fail with EFAULT then, and uzswap's `write` and `read` retry
/// them once the buffers are touched. Would fail without the retries.
#[test]
fn system_calls_on_evicted_heap_buffers_are_retried_with_in_thread_faults() {
    let program = compile("syscalls");
    let data = program.with_extension("data-in-thread");
    let o = run(
        &["--memory-high", "32M", "--in-thread-faults", "--stats=full"],
        &[program.to_str().unwrap(), data.to_str().unwrap()],
    );
    let _ = std::fs::remove_file(&program);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(stdout(&o), "ok 1\n");
    assert!(stat(&o, "in_thread_faults") > 0, "{}", stderr(&o));
    assert_eq!(stat(&o, "faults"), stat(&o, "in_thread_faults"));
}

/// With `--in-thread-faults`, one read(2) or pread(2) of a regular file into a heap buffer
/// partly evicted returns the whole file, as without uzswap: the kernel copies up to the
/// first page that is out and returns a short count, which a program may take for the
/// file's end (bash reading a script it sources does, and fails on the half it got). Would
/// fail without the wrappers going on after a short transfer into the region.
#[test]
fn a_regular_file_read_into_an_evicted_buffer_is_whole_with_in_thread_faults() {
    let program = compile("short_reads");
    let data = program.with_extension("data");
    let o = run(
        &["--memory-high", "24M", "--in-thread-faults", "--stats=full"],
        &[program.to_str().unwrap(), data.to_str().unwrap()],
    );
    let _ = std::fs::remove_file(&program);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(stdout(&o), "whole 2\n", "{}", stderr(&o));
    assert!(
        stat(&o, "folios_evicted") > 0,
        "nothing was evicted: {}",
        stderr(&o)
    );
}

/// With `--in-thread-faults`, threads started after the heap went past the limit run: glibc
/// starts a thread with every signal blocked and reads the locale's tables (which
/// `setlocale` malloc'ed, the coldest of the heap) before it unblocks them, and a SIGBUS
/// then kills the process. Would die of SIGBUS with the tables in the region (CPython under
/// `--in-thread-faults` did, at the start of a thread).
#[test]
fn threads_start_after_the_locale_left_memory_with_in_thread_faults() {
    let program = compile("locale_threads");
    let o = run(
        &["--memory-high", "24M", "--in-thread-faults", "--stats=full"],
        &[program.to_str().unwrap()],
    );
    let _ = std::fs::remove_file(&program);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(stdout(&o), "threads 64\n");
    assert!(
        stat(&o, "folios_evicted") > 0,
        "nothing was evicted: {}",
        stderr(&o)
    );
}

/// With `--in-thread-faults`, a program that blocks every signal and sets its own SIGBUS
/// handler still has its heap served (SIGBUS is never blocked, and stays uzswap's), reads
/// back its own handler and a mask without SIGBUS, and gets a SIGBUS that is not a heap fault
/// in its own handler (which exits with 42). Would die of SIGBUS without the wrappers.
#[test]
fn a_program_blocking_signals_and_catching_sigbus_keeps_in_thread_faults() {
    let program = compile("in_thread_signals");
    let o = run(
        &["--memory-high", "24M", "--in-thread-faults", "--stats=full"],
        &[program.to_str().unwrap()],
    );
    let _ = std::fs::remove_file(&program);
    assert_eq!(o.status.code(), Some(42), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(stdout(&o), "ok 0\n");
}

/// 32 threads allocating, filling, checking and freeing at once, on a heap under a limit:
/// nothing is corrupted.
#[test]
fn threads_allocating_and_freeing_at_once_corrupt_nothing() {
    let program = compile("threads");
    let o = run(
        &["--memory-high", "24M", "--stats=full"],
        &[program.to_str().unwrap()],
    );
    let _ = std::fs::remove_file(&program);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(stdout(&o), "ok\n");
}

#[test]
fn the_exit_status_and_death_by_signal_pass_through() {
    let o = run(
        &["--memory-high", "64M"],
        &["sh", "-c", "echo out; echo err >&2; exit 7"],
    );
    assert_eq!(o.status.code(), Some(7));
    assert_eq!(stdout(&o), "out\n");
    assert_eq!(stderr(&o), "err\n");
    let o = run(&["--memory-high", "64M"], &["sh", "-c", "kill -TERM $$"]);
    assert_eq!(o.status.code(), Some(128 + 15));
}

/// Every signal `timeout(1)` passes on, and SIGUSR1, SIGUSR2 and SIGWINCH, reach the program
/// (a shell that traps each and says so); uzswap stays to pass on the rest and the status.
#[test]
fn the_signals_timeout_passes_on_reach_the_program() {
    common::ensure_preload();
    let script = "for s in QUIT USR1 USR2 WINCH ALRM HUP INT; do trap \"echo got $s\" $s; done; \
                  echo ready; i=0; while [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; echo done";
    let mut child = Command::new(env!("CARGO_BIN_EXE_uzswap"))
        .args(["run", "--memory-high", "64M", "--", "bash", "-c", script])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::BufRead;
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    use rustix::process::Signal;
    let signals = [
        ("QUIT", Signal::QUIT),
        ("USR1", Signal::USR1),
        ("USR2", Signal::USR2),
        ("WINCH", Signal::WINCH),
        ("ALRM", Signal::ALARM),
        ("HUP", Signal::HUP),
    ];
    for (name, signal) in signals {
        rustix::process::kill_process(pid, signal).unwrap();
        line.clear();
        out.read_line(&mut line).unwrap();
        assert_eq!(line, format!("got {name}\n"));
    }
    rustix::process::kill_process(pid, Signal::TERM).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + 15), "{status:?}");
}

#[test]
fn a_signal_to_uzswap_reaches_the_program() {
    common::ensure_preload();
    let mut child = Command::new(env!("CARGO_BIN_EXE_uzswap"))
        .args(["run", "--memory-high", "64M", "--", "sleep", "30"])
        .spawn()
        .unwrap();
    // Once the program runs (uzswap catches the signal from before it starts it). SIGTERM:
    // SIGINT may be ignored where the tests run (a script's background job), and uzswap
    // leaves an ignored signal ignored.
    let children = format!("/proc/{0}/task/{0}/children", child.id());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::fs::read_to_string(&children)
        .unwrap()
        .trim()
        .is_empty()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the program never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + 15), "{status:?}");
}

/// Under `nohup`, the program ignores SIGHUP as it would without uzswap: uzswap neither
/// catches it (which would start the program with SIGHUP at its default) nor forwards it.
#[test]
fn a_signal_uzswap_was_started_ignoring_stays_ignored_in_the_program() {
    common::ensure_preload();
    let o = Command::new("nohup")
        .arg(env!("CARGO_BIN_EXE_uzswap"))
        .args(["run", "--memory-high", "64M", "--"])
        .args([
            "sh",
            "-c",
            "grep SigIgn /proc/self/status; kill -HUP $PPID; echo alive",
        ])
        .output()
        .unwrap();
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    let mask = out
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .map(|m| u64::from_str_radix(m.trim(), 16).unwrap())
        .unwrap_or_else(|| panic!("no SigIgn in {out:?}"));
    assert_ne!(
        mask & 1,
        0,
        "SIGHUP is not ignored in the program: {mask:#x}"
    );
    assert!(out.ends_with("alive\n"), "{out:?}");
}

#[test]
fn uzswap_failures_are_125_126_127_in_one_line() {
    let o = run(&["--memory-high", "64M"], &["no-such-program-uzswap"]);
    assert_refused(&o, 127, "no-such-program-uzswap: command not found");
    let not_executable =
        std::env::temp_dir().join(format!("uzswap-run-test-{}", std::process::id()));
    std::fs::write(&not_executable, "data").unwrap();
    let o = run(
        &["--memory-high", "64M"],
        &[not_executable.to_str().unwrap()],
    );
    std::fs::remove_file(&not_executable).unwrap();
    assert_refused(&o, 126, "Permission denied");
    let o = run(&["--memory-high", "lots"], &["true"]);
    assert_refused(&o, 125, "lots");
    let o = run(&["--memory-high", "64M", "--folio-size", "12K"], &["true"]);
    assert_refused(&o, 125, "--folio-size");
    let o = run(&["--memory-high", "64M", "--compressor", "nope"], &["true"]);
    assert_refused(&o, 125, "nope");
    let o = run(&["--memory-high", "64M", "--max-heap", "16G"], &["true"]);
    assert_refused(&o, 125, "at most 15G");
    let o = common::uzswap(&["run", "--memory-high", "64M"]);
    assert_eq!(o.status.code(), Some(125), "{}", stderr(&o));
}

/// A limit uzswap cannot keep, or that means nothing on this machine, is refused in one
/// short line that names the flag the user gave and says what would be accepted.
#[test]
fn bad_limits_are_refused_naming_the_flag_given() {
    for tiny in ["0", "1K"] {
        let o = run(&["--memory-high", tiny], &["true"]);
        assert_refused(
            &o,
            125,
            &format!("--memory-high: {tiny} is below the least limit"),
        );
        let err = stderr(&o);
        assert!(err.contains("give at least"), "{err}");
        assert!(
            !err.contains("memory-limit") && !err.contains("batch"),
            "{err}"
        );
        assert!(err.len() < 200, "{} characters: {err}", err.len());
    }
    // The least limit it names is accepted.
    let o = run(&["--memory-high", "0"], &["true"]);
    let least = stderr(&o)
        .split("16K folios: ")
        .nth(1)
        .and_then(|rest| rest.split(" MiB").next())
        .map(|m| format!("{m}M"))
        .unwrap_or_else(|| panic!("no least limit in {}", stderr(&o)));
    let o = run(&["--memory-high", &least], &["true"]);
    assert_eq!(o.status.code(), Some(0), "{least}: {}", stderr(&o));
    // More than the machine's memory and swap: refused, or run with --force.
    let o = run(&["--memory-high", "10T"], &["true"]);
    assert_refused(
        &o,
        125,
        "--memory-high: 10T is more than this machine's memory and swap",
    );
    assert!(stderr(&o).contains("--force"), "{}", stderr(&o));
    let o = run(
        &["--memory-high", "10T", "--force", "--max-heap", "1G"],
        &["true"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = run(&["--memory-high", "64M", "--memory-max", "32M"], &["true"]);
    assert_refused(&o, 125, "--memory-max: 32M is below --memory-high 64M");
    let o = run(&["--memory-high", "64M", "--on-limit", "oom"], &["true"]);
    assert_eq!(o.status.code(), Some(125), "{}", stderr(&o));
    assert!(stderr(&o).contains("kill or exceed"), "{}", stderr(&o));
}

/// A large limit: the heap's reservation (four times the limit) is capped at what mimalloc
/// manages in one arena, 15 GiB, and the program runs.
#[test]
fn a_large_limit_runs_with_a_15_gib_heap() {
    let o = run(&["--memory-high", "8G"], &["sh", "-c", "echo ran"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "ran\n");
}

/// A heap block lazily freed (`MADV_FREE`, as mimalloc's and jemalloc's purges do) and then
/// written again stays under the limit: the lazy free is made a free at once, so no page
/// stays mapped behind the region's count (the kernel keeps an `MADV_FREE`d page mapped,
/// and a write takes it back without a fault).
#[test]
fn a_lazily_freed_heap_block_written_again_is_held_under_the_limit() {
    let program = compile("madvise_free");
    let o = run(
        &["--memory-high", "16M", "--stats=full"],
        &[program.to_str().unwrap()],
    );
    std::fs::remove_file(&program).unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "ok\n");
    // What lies outside the region at exit: the program, its libraries, uzswap's threads and
    // staging, a few MiB. Pages left mapped by the lazy free would be 12 MiB more.
    let outside = stat(&o, "outside_bytes");
    assert!(
        outside < 10 << 20,
        "{} MiB outside the region",
        outside >> 20
    );
}

/// fork+exec, vfork and posix_spawn: CPython's subprocess (vfork), `os.posix_spawn`, and a
/// shell pipeline, from a program whose heap is past its limit; each child's own program
/// gets a region of its own (the environment passes on).
#[test]
fn subprocesses_pipelines_and_posix_spawn_work() {
    let script = r#"
import subprocess, os
data = [str(i) * 50 for i in range(200000)]
out = subprocess.run(["sh", "-c", "seq 1 100000 | sort -n | tail -1"], capture_output=True, text=True).stdout
pid = os.posix_spawn("/bin/echo", ["echo", "spawned"], os.environ)
_, status = os.waitpid(pid, 0)
print(out.strip(), os.waitstatus_to_exitcode(status), len(data), data[12345][:10])
"#;
    let o = run(
        &["--memory-high", "24M", "--stats=full"],
        &["python3", "-c", script],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "spawned\n100000 0 200000 1234512345\n");
    assert!(stat(&o, "zswpout") > 0, "nothing evicted: {}", stderr(&o));
}

/// Blocks the preload did not hand out (glibc's own, as a library bound to libc's malloc
/// with RTLD_DEEPBIND gets them) go back to glibc through free and realloc, and
/// malloc_usable_size answers for them: none is freed into the region's heap.
#[test]
fn blocks_from_glibcs_own_malloc_are_passed_on() {
    let program = compile("foreign_pointers");
    let o = run(&["--memory-high", "64M"], &[program.to_str().unwrap()]);
    std::fs::remove_file(&program).unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "ok\n");
}

/// A fixed mapping over the heap never reaches the kernel, which would replace the region's
/// memory there: a fresh read-write part of a block reads zero and leaves the rest (evicted
/// or not) as written, and the rest is refused (EINVAL, EEXIST), with one warning line.
#[test]
fn fixed_mappings_over_the_heap_keep_every_byte() {
    let program = compile("fixed_mprotect");
    let o = run(
        &["--memory-high", "16M", "--stats=full"],
        &[program.to_str().unwrap()],
    );
    std::fs::remove_file(&program).unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "ok 2\n");
    let warnings = stderr(&o)
        .lines()
        .filter(|l| l.starts_with("uzswap: warning:"))
        .count();
    assert_eq!(warnings, 1, "{}", stderr(&o));
    assert!(stat(&o, "zswpout") > 0);
}
