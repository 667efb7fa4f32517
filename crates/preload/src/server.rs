//! The live statistics of `uzswap stat PID`: one thread of uzswap's own serves a Unix stream
//! socket with the abstract name `uzswap-stat-PID` (`@uzswap-stat-PID` in `ss -x`).
//!
//! The protocol: the client connects and sends nothing; the server answers and closes. The
//! answer is the statistics (stats.rs: the line `uzswap-stats 1`, then `name value` lines)
//! when the client's effective user (`SO_PEERCRED`, as it was at connect) is the program's or
//! root, else the one line `refused: ...`. An abstract name has no file permissions (any local
//! user may connect; nothing is left behind when the process dies): the credential check is
//! the gate. The client checks in turn that the socket's owner is process PID (an abstract name
//! can be taken first by anyone).
//!
//! The thread never blocks the program: the statistics are atomics and a few short locks (the
//! fault latency histogram, the swap slot map), it never waits for a program thread, and a
//! client that does not read is given up after a second. It is started before the region's
//! threads are recorded (init.rs), so it is one of them: its calls never touch the region heap.
#![cfg(not(test))]

use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::sync::atomic::{AtomicI32, Ordering::Relaxed};
use std::time::Duration;

use region::Region;

/// The answer to another user.
const REFUSAL: &str = "refused: the statistics of a program under uzswap run are for its own \
                       user and root only\n";

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
    let reply = match allowed {
        true => crate::stats::render(region),
        false => REFUSAL.to_string(),
    };
    // A few KiB fit in the socket's buffer: the write returns at once unless the buffer is
    // full of an earlier answer nobody reads.
    let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
    let _ = stream.write_all(reply.as_bytes());
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
