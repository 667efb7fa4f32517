//! The live statistics and tunables of `uzswap stat PID` and `uzswap param PID`: one thread of
//! uzswap's own serves a Unix stream socket with the abstract name `uzswap-stat-PID`
//! (`@uzswap-stat-PID` in `ss -x`).
//!
//! The protocol: the client connects, sends one request line and shuts its side down; the
//! server answers and closes. The requests and their answers:
//! - `stats`: the statistics (stats.rs: the line `uzswap-stats 1`, then `name value` lines);
//! - `params`: the engine's tunables, `name value` lines in their sysfs spelling;
//! - `set NAME VALUE`: the tunable changed, as a write to /sys/module/zswap/parameters/NAME
//!   would change the kernel's: `ok`, or one line `error: ...`.
//!
//! A client whose effective user (`SO_PEERCRED`, as it was at connect) is neither the
//! program's nor root gets the one line `refused: ...` to any request. An abstract name has no
//! file permissions (any local user may connect; nothing is left behind when the process
//! dies): the credential check is the gate. The client checks in turn that the socket's owner
//! is process PID (an abstract name can be taken first by anyone).
//!
//! The thread never blocks the program: the statistics and tunables are atomics and a few
//! short locks (the fault latency histogram, the swap slot map, the compressor list), it never
//! waits for a program thread, and a client that does not send or does not read is given up
//! after a second. It is started before the region's
//! threads are recorded (init.rs), so it is one of them: its calls never touch the region heap.
#![cfg(not(test))]

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::sync::atomic::{AtomicI32, Ordering::Relaxed};
use std::time::Duration;

use region::Region;

/// The answer to another user.
const REFUSAL: &str = "refused: the statistics and tunables of a program under uzswap run are \
                       for its own user and root only\n";

/// The longest request: `set`, a tunable's name and its value.
const REQUEST_MAX: u64 = 256;

/// The listening socket's descriptor, -1 before it exists: a forked child closes its copy
/// (`close_in_child`).
static LISTENER: AtomicI32 = AtomicI32::new(-1);

/// Bind `@uzswap-stat-PID` and start the thread that serves it.
pub fn start(region: &'static Region) -> std::io::Result<()> {
    let name = format!("uzswap-stat-{}", std::process::id());
    let listener = UnixListener::bind_addr(&SocketAddr::from_abstract_name(name)?)?;
    LISTENER.store(listener.as_raw_fd(), Relaxed);
    std::thread::Builder::new()
        .name("uzswap-stat".into())
        .stack_size(256 << 10)
        .spawn(move || serve(listener, region))?;
    Ok(())
}

fn serve(listener: UnixListener, region: &'static Region) {
    let own = rustix::process::geteuid();
    loop {
        match listener.accept() {
            Ok((stream, _)) => answer(stream, region, own),
            // Out of descriptors or memory for now: try again a little later.
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

fn answer(mut stream: UnixStream, region: &Region, own: rustix::process::Uid) {
    let allowed = rustix::net::sockopt::socket_peercred(&stream)
        .is_ok_and(|peer| peer.uid == own || peer.uid.is_root());
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    let mut request = String::new();
    let read = (&mut stream).take(REQUEST_MAX).read_to_string(&mut request);
    let reply = match (allowed, read) {
        (false, _) => REFUSAL.to_string(),
        (true, Ok(_)) => reply(region, request.trim_end()),
        (true, Err(e)) => format!("error: reading the request: {e}\n"),
    };
    // A few KiB fit in the socket's buffer: the write returns at once unless the buffer is
    // full of an earlier answer nobody reads.
    let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
    let _ = stream.write_all(reply.as_bytes());
}

/// The answer to a request from the program's own user or root.
fn reply(region: &Region, request: &str) -> String {
    let zswap = region.zswap();
    let mut words = request.split(' ');
    match (words.next(), words.next(), words.next(), words.next()) {
        (Some("stats"), None, ..) => crate::stats::render(region),
        (Some("params"), None, ..) => zswap
            .params()
            .list()
            .into_iter()
            .map(|(name, value)| format!("{name} {value}\n"))
            .collect(),
        (Some("set"), Some(name), Some(value), None) => match zswap.set_param(name, value) {
            Ok(()) => "ok\n".to_string(),
            Err(e) => format!("error: {e}\n"),
        },
        _ => format!("error: not a request: {request:?}\n"),
    }
}

/// In a forked child: close the inherited listening socket, which no thread of the child
/// serves (the server thread stays in the parent). Left open, it would keep the name taken
/// after the parent exits, and clients would wait on it.
pub fn close_in_child() {
    let fd = LISTENER.swap(-1, Relaxed);
    if fd >= 0 {
        // SAFETY: `fd` is the child's copy of the listening socket; nothing in the child owns
        // or uses it (its owner lives on the parent's server thread, which the child lacks).
        unsafe { libc::close(fd) };
    }
}
