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
//! short locks (the fault latency histogram, the swap slot map, the compressor list), and it
//! never waits for a program thread. It serves up to `CLIENTS` connections at once with one
//! `poll`: a client that sends nothing keeps no one else waiting, is dropped after
//! `REQUEST_TIMEOUT`, and the oldest is dropped when a new one finds the table full; another
//! user's connections have a table of their own, so they never take the owner's place, and
//! get the refusal. It is started before the region's threads
//! are recorded (init.rs), so it is one of them: its calls never touch the region heap.
#![cfg(not(test))]

use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::sync::atomic::{AtomicI32, Ordering::Relaxed};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};

use region::Region;

/// The answer to another user.
const REFUSAL: &str = "refused: the statistics and tunables of a program under uzswap run are \
                       for its own user and root only\n";

/// The longest request: `set`, a tunable's name and its value. A longer one is read to its
/// end (closing a socket with unread bytes would reset it, and lose the answer) and refused.
const REQUEST_MAX: usize = 4096;

/// Connections served at once, of the program's user and root and of others (whose
/// connections never take the place of the first kind's), and how long each has to send its
/// request.
const CLIENTS: usize = 48;
const OTHERS: usize = 16;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(1);

/// The listening socket's descriptor, -1 before it exists: a forked child closes its copy
/// (`close_in_child`).
static LISTENER: AtomicI32 = AtomicI32::new(-1);

/// Bind `@uzswap-stat-PID` and start the thread that serves it.
pub fn start(region: &'static Region) -> std::io::Result<()> {
    let name = format!("uzswap-stat-{}", std::process::id());
    let listener = UnixListener::bind_addr(&SocketAddr::from_abstract_name(name)?)?;
    let listener = uffd::descriptors::out_of_reach(listener);
    listener.set_nonblocking(true)?;
    LISTENER.store(listener.as_raw_fd(), Relaxed);
    std::thread::Builder::new()
        .name("uzswap-stat".into())
        .stack_size(256 << 10)
        .spawn(move || serve(listener, region))?;
    Ok(())
}

/// A connection whose request is being read.
struct Client {
    stream: UnixStream,
    /// The program's user or root: answered; anyone else is refused.
    allowed: bool,
    request: Vec<u8>,
    /// More than `REQUEST_MAX` bytes came: the rest is read and dropped.
    too_long: bool,
    deadline: Instant,
}

fn serve(listener: UnixListener, region: &'static Region) {
    let own = rustix::process::geteuid();
    let mut clients: Vec<Client> = Vec::new();
    let mut watch = Watch::default();
    loop {
        let now = Instant::now();
        let period = watch.tick(region, now);
        clients.retain(|c| c.deadline > now);
        let timeout = clients
            .iter()
            .map(|c| c.deadline.saturating_duration_since(now))
            .min()
            .unwrap_or(period)
            .min(period);
        let mut fds: Vec<PollFd> = std::iter::once(listener.as_fd())
            .chain(clients.iter().map(|c| c.stream.as_fd()))
            .map(|fd| PollFd::from_borrowed_fd(fd, PollFlags::IN))
            .collect();
        let timeout = rustix::event::Timespec::try_from(timeout).ok();
        if rustix::event::poll(&mut fds, timeout.as_ref()).is_err() {
            // Out of memory for now, or interrupted: not a loop that spins.
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        let ready: Vec<bool> = fds.iter().map(|fd| !fd.revents().is_empty()).collect();
        drop(fds);
        // Requests first, so that a client answered is not the oldest one dropped below.
        let mut index = 0;
        clients.retain_mut(|client| {
            index += 1;
            !ready[index] || read_request(client, region)
        });
        if ready[0] {
            accept_all(&listener, &mut clients, own);
        }
    }
}

/// What the statistics thread looks after besides its clients, every `PUBLISH_PERIOD`: the
/// process's place in the tree's limit (tree.rs), and memory outside the limit growing past a
/// quarter of it, which is said once (the limit holds the heap only: code, file and shared
/// pages, stacks and memory a runtime maps for itself are outside it).
#[derive(Default)]
struct Watch {
    next_outside_check: Option<Instant>,
    said_outside: bool,
}

impl Watch {
    /// Look after both; when to look again.
    fn tick(&mut self, region: &Region, now: Instant) -> Duration {
        let period = crate::tree::PUBLISH_PERIOD;
        if let Some(tree) = crate::run::tree() {
            tree.tick(region);
        }
        if self.said_outside || self.next_outside_check.is_some_and(|t| now < t) {
            return period;
        }
        self.next_outside_check = Some(now + Duration::from_secs(1));
        let Some((limit, _)) = crate::run::limits() else {
            return period;
        };
        let usage = region.usage();
        let heap = region.as_ptr() as usize..region.as_ptr() as usize + region.len();
        // Not registered yet, the region's resident part is the process's anonymous memory.
        let resident = match region.registered() {
            true => usage.resident,
            false => crate::not_held::heap_resident(heap.clone()),
        };
        let inside = resident + usage.staged + usage.pool;
        let rss = std::fs::read_to_string("/proc/self/statm")
            .ok()
            .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
            .map_or(0, |pages| pages * zswap::PAGE_SIZE as u64);
        let outside = rss.saturating_sub(inside);
        if outside > limit / 4 && outside > 32 << 20 {
            self.said_outside = true;
            let n = crate::not_held::measure(heap, outside);
            crate::say(&format!(
                "{} MiB of this process's memory is outside the limit, more than a quarter of \
                 --memory-high {} MiB: the limit holds the heap (malloc and anonymous \
                 mappings) only; outside it are {} MiB of code and files, {} MiB shared, {} \
                 MiB of stacks, {} MiB of uzswap's own, {} MiB of anonymous memory the \
                 program mapped past uzswap",
                outside >> 20,
                limit >> 20,
                n.files >> 20,
                n.shared >> 20,
                n.stacks >> 20,
                n.uzswap >> 20,
                n.anonymous >> 20,
            ));
        }
        period
    }
}

/// Take every pending connection. While the table of its kind (`CLIENTS` of the program's
/// user and root, `OTHERS`) is full, that kind's oldest is dropped.
fn accept_all(listener: &UnixListener, clients: &mut Vec<Client>, own: rustix::process::Uid) {
    while let Ok((stream, _)) = listener.accept() {
        let stream = uffd::descriptors::out_of_reach(stream);
        let allowed = rustix::net::sockopt::socket_peercred(&stream)
            .is_ok_and(|peer| peer.uid == own || peer.uid.is_root());
        if stream.set_nonblocking(true).is_err() {
            continue;
        }
        let most = if allowed { CLIENTS } else { OTHERS };
        if clients.iter().filter(|c| c.allowed == allowed).count() == most {
            let oldest = clients.iter().position(|c| c.allowed == allowed);
            clients.remove(oldest.expect("a full table has an oldest"));
        }
        clients.push(Client {
            stream,
            allowed,
            request: Vec::new(),
            too_long: false,
            deadline: Instant::now() + REQUEST_TIMEOUT,
        });
    }
}

/// Read what a client sent; at its end, answer. False once it is answered (or gone).
fn read_request(client: &mut Client, region: &Region) -> bool {
    let mut buf = [0u8; 1024];
    // At most 8 KiB a wake: a client that streams keeps the thread no longer than that.
    for _ in 0..8 {
        match (&client.stream).read(&mut buf) {
            Ok(0) => return answer(client, region),
            Ok(n) if client.request.len() + n > REQUEST_MAX => client.too_long = true,
            Ok(n) if !client.too_long => client.request.extend_from_slice(&buf[..n]),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    true
}

/// The client's request is all read: answer it.
fn answer(client: &Client, region: &Region) -> bool {
    let request = String::from_utf8_lossy(&client.request);
    let reply = match (client.allowed, client.too_long) {
        (false, _) => REFUSAL.to_string(),
        (true, true) => format!("error: a request of more than {REQUEST_MAX} bytes\n"),
        (true, false) => reply(region, request.trim_end()),
    };
    // The whole answer fits in the socket's buffer, made large enough for it (the tree's
    // lines grow with its processes): the write completes at once, or the client, which left
    // a full buffer unread, goes without.
    if reply.len() > 64 << 10 {
        let _ = rustix::net::sockopt::set_socket_send_buffer_size(&client.stream, 2 * reply.len());
    }
    let _ = (&client.stream).write_all(reply.as_bytes());
    false
}

/// The answer to a request from the program's own user or root.
fn reply(region: &Region, request: &str) -> String {
    match request {
        "stats" => crate::stats::render(region),
        _ => region
            .zswap()
            .answer_param_request(request)
            .unwrap_or_else(|| format!("error: not a request: {request:?}\n")),
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
        // The system call itself: the preload's `close` keeps the program off this number.
        unsafe { libc::syscall(libc::SYS_close, fd) };
    }
}
