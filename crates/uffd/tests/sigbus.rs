//! The SIGBUS handler of in-thread faults (`uffd::sigbus`) passes on every SIGBUS it does not
//! serve, as if it were not there: to the handler the program had installed before, or to
//! the default action. Each case runs in a child process (this test binary again), which the
//! signal may kill.

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus};

use uffd::sigbus::{self, Fault};

const CASE: &str = "UZSWAP_SIGBUS_CASE";
/// The exit status of the program's own SIGBUS handler.
const PREVIOUS_HANDLER_EXIT: i32 = 42;

fn run_case(case: &str) -> ExitStatus {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "case_child", "--test-threads", "1"])
        .env(CASE, case)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap()
}

/// Serves nothing: every SIGBUS is passed on.
fn serve_nothing(_: Fault) -> bool {
    false
}

extern "C" fn previous_handler(_: libc::c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: _exit is async-signal-safe.
    unsafe { libc::_exit(PREVIOUS_HANDLER_EXIT) };
}

/// Touch a page of a file mapping past the end of its (empty) file: SIGBUS, `BUS_ADRERR`,
/// as a userfault's, but no region's.
fn touch_past_end_of_file() {
    let file = tempfile_in_tmp();
    // SAFETY: a fresh shared read mapping of one page of an open file; the pointer is only
    // read, and the read is meant to fault.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ,
            libc::MAP_SHARED,
            std::os::fd::AsRawFd::as_raw_fd(&file),
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        std::ptr::read_volatile(p as *const u8);
    }
}

fn tempfile_in_tmp() -> std::fs::File {
    let path = std::env::temp_dir().join(format!("uzswap-sigbus-{}", std::process::id()));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    file
}

/// The child's side: set up the case named in `UZSWAP_SIGBUS_CASE`, then raise a SIGBUS.
/// Returns (passes) when run as a plain test.
#[test]
fn case_child() {
    let Ok(case) = std::env::var(CASE) else {
        return;
    };
    // No core file from the cases that die.
    let none = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid rlimit for this process.
    unsafe { libc::setrlimit(libc::RLIMIT_CORE, &none) };
    // As a C program starts: SIGBUS at its default action (Rust's runtime puts a handler of
    // its own there, which swallows a SIGBUS sent by kill).
    // SAFETY: an all-zero sigaction is SIG_DFL with no flags.
    unsafe {
        let dfl: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGBUS, &dfl, std::ptr::null_mut());
    }
    if case == "previous" {
        // SAFETY: an all-zero sigaction is valid; filled in to a SA_SIGINFO handler.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = previous_handler
                as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void)
                as usize;
            action.sa_flags = libc::SA_SIGINFO;
            assert_eq!(
                libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut()),
                0
            );
        }
    }
    sigbus::install(serve_nothing).unwrap();
    match case.as_str() {
        "sent" => {
            // SAFETY: signals this process; the default action ends it.
            unsafe { libc::kill(libc::getpid(), libc::SIGBUS) };
            std::thread::sleep(std::time::Duration::from_secs(5));
        }
        _ => touch_past_end_of_file(),
    }
    std::process::exit(0);
}

#[test]
fn a_sigbus_not_served_takes_the_default_action() {
    if !sigbus::SUPPORTED {
        return;
    }
    let status = run_case("default");
    assert_eq!(status.signal(), Some(libc::SIGBUS), "{status:?}");
}

#[test]
fn a_sigbus_not_served_goes_to_the_handler_installed_before() {
    if !sigbus::SUPPORTED {
        return;
    }
    let status = run_case("previous");
    assert_eq!(status.code(), Some(PREVIOUS_HANDLER_EXIT), "{status:?}");
}

#[test]
fn a_sigbus_sent_by_kill_takes_the_default_action() {
    if !sigbus::SUPPORTED {
        return;
    }
    let status = run_case("sent");
    assert_eq!(status.signal(), Some(libc::SIGBUS), "{status:?}");
}
