//! `uzswap stat PID` and `uzswap param PID` for a program held from outside (agent.rs): the
//! agent serves the preload's protocol (crates/preload/src/server.rs: `stats`, `params`,
//! `set NAME VALUE`) on the abstract socket `uzswap-stat-PID` of its own process, and the
//! client, finding no socket of the program's, asks its parent `uzswap run`
//! (stat/mod.rs). One client at a time, each given a second to send its request; a user who
//! is neither this process's nor root is refused.

use std::io::{Read, Write};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

/// The answer to another user (as the preload's).
const REFUSAL: &str = "refused: the statistics and tunables of a program under uzswap run are \
                       for its own user and root only\n";

/// Serve until `stop`: `stats` answered with `stats()`, the tunables from `zswap`.
pub fn serve(zswap: &zswap::Zswap, stats: impl Fn() -> String, stop: &AtomicBool) {
    let name = crate::stat::socket_name(std::process::id());
    let listener = SocketAddr::from_abstract_name(name)
        .and_then(|addr| UnixListener::bind_addr(&addr))
        .and_then(|l| l.set_nonblocking(true).map(|()| l));
    let Ok(listener) = listener else {
        return; // the name is taken: `uzswap stat` says there is no answer
    };
    let own = rustix::process::geteuid();
    while !stop.load(Relaxed) {
        match listener.accept() {
            Ok((client, _)) => answer(client, own, zswap, &stats),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn answer(
    mut client: UnixStream,
    own: rustix::process::Uid,
    zswap: &zswap::Zswap,
    stats: &impl Fn() -> String,
) {
    let _ = client.set_nonblocking(false);
    let _ = client.set_read_timeout(Some(Duration::from_secs(1)));
    let mut request = String::new();
    if (&mut client)
        .take(4096)
        .read_to_string(&mut request)
        .is_err()
    {
        return;
    }
    let allowed = rustix::net::sockopt::socket_peercred(&client)
        .is_ok_and(|cred| cred.uid == own || cred.uid.is_root());
    let reply = match allowed {
        false => REFUSAL.to_string(),
        true => match request.trim_end() {
            "stats" => stats(),
            request => zswap
                .answer_param_request(request)
                .unwrap_or_else(|| format!("error: not a request: {request:?}\n")),
        },
    };
    let _ = client.write_all(reply.as_bytes());
}
