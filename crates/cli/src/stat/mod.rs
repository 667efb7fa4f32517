//! `uzswap stat PID`: the statistics of a program under `uzswap run`, while it runs, from
//! another terminal: as `name value` lines (what `uzswap run --stats` prints at exit), one
//! JSON object, or the Prometheus text format (format.rs).
//!
//! The preload serves them on a Unix stream socket with the abstract name `uzswap-stat-PID`
//! (crates/preload/src/server.rs): connect, send the request `stats`, read to the end. The
//! answer is the line `uzswap-stats 1` and `name value` lines, or one line `refused: ...` to a
//! user that is neither the program's nor root. The socket's owner (`SO_PEERCRED`) must be
//! process PID: an abstract name can be taken by any process first. `uzswap param`
//! (param.rs) sends its requests the same way (`request`).
//!
//! Exit status: 0 with the statistics; 1 when there are none to be had (no such process, not
//! under `uzswap run`, refused, no answer), as one line on stderr; 2 for a usage error.

pub mod format;
pub mod summary;

use std::io::{Read, Write};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixStream};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

pub use format::{ParseError, Snapshot, Value, HEADER};

use crate::report;

/// Exit status when the statistics cannot be had.
pub const UNAVAILABLE: u8 = 1;

/// How long the program has to answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// `uzswap stat`'s options.
#[derive(Debug, Args)]
pub struct StatArgs {
    /// The program's process ID, or that of the `uzswap run` that started it.
    pub pid: u32,
    /// One JSON object, name to value.
    #[arg(long, conflicts_with = "prometheus")]
    pub json: bool,
    /// The Prometheus text format: `uzswap_` names, base units (bytes, seconds), `_total` on
    /// counters.
    #[arg(long)]
    pub prometheus: bool,
}

/// The socket's abstract name for process `pid` (server.rs in the preload binds it).
pub fn socket_name(pid: u32) -> String {
    format!("uzswap-stat-{pid}")
}

/// Print the statistics of process `args.pid`.
pub fn run(args: &StatArgs) -> ExitCode {
    let snapshot = match fetch(args.pid) {
        Ok(s) => s,
        Err(line) => {
            report::say(&line);
            return ExitCode::from(UNAVAILABLE);
        }
    };
    let text = match (args.json, args.prometheus) {
        (true, _) => format!("{:#}\n", snapshot.json()),
        (_, true) => snapshot.prometheus(),
        _ => snapshot.used_orders_only().text(),
    };
    report::print(&text, "the statistics")
}

/// The statistics of process `pid`, or the line that says why there are none.
pub fn fetch(pid: u32) -> Result<Snapshot, String> {
    let text = request(pid, "stats")?;
    Snapshot::parse(&text).map_err(|e| format!("process {pid}: {e}"))
}

/// Send process `pid` the request `line` (server.rs in the preload) and return its answer,
/// or the line that says why there is none (a refusal among them). `pid` may also be the
/// `uzswap run` that started the program.
pub fn request(pid: u32, line: &str) -> Result<String, String> {
    let addr = SocketAddr::from_abstract_name(socket_name(pid))
        .map_err(|e| format!("process {pid}: {e}"))?;
    let mut stream = match UnixStream::connect_addr(&addr) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            // `uzswap run` itself: its program is the one with the statistics; a program
            // held from outside: its `uzswap run` serves them.
            if let Some(program) = program_of_run(pid).filter(|&p| serves(p)) {
                return request(program, line);
            }
            return match run_of_program(pid).filter(|&run| serves(run)) {
                Some(run) => request(run, line),
                None => Err(not_under_uzswap(pid)),
            };
        }
        Err(e) => return Err(format!("process {pid}: cannot reach its statistics: {e}")),
    };
    let owner = rustix::net::sockopt::socket_peercred(&stream)
        .map_err(|e| format!("process {pid}: cannot tell who serves its statistics: {e}"))?;
    let owner = owner.pid.as_raw_pid();
    if owner != pid as i32 {
        return Err(format!(
            "process {pid}: its statistics socket belongs to process {owner}: not trusted"
        ));
    }
    stream
        .write_all(format!("{line}\n").as_bytes())
        .and_then(|()| stream.shutdown(std::net::Shutdown::Write))
        .map_err(|e| format!("process {pid}: sending the request: {e}"))?;
    stream
        .set_read_timeout(Some(ANSWER_TIMEOUT))
        .map_err(|e| format!("process {pid}: {e}"))?;
    let mut text = String::new();
    if let Err(e) = stream.take(1 << 20).read_to_string(&mut text) {
        return Err(match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => format!(
                "process {pid} did not answer within {} s",
                ANSWER_TIMEOUT.as_secs()
            ),
            _ => format!("process {pid}: reading its answer: {e}"),
        });
    }
    if text.starts_with("refused: ") || text.starts_with("error: ") {
        return Err(format!("process {pid}: {}", text.trim_end()));
    }
    Ok(text)
}

/// Whether process `pid` listens on its statistics name.
fn serves(pid: u32) -> bool {
    SocketAddr::from_abstract_name(socket_name(pid))
        .and_then(|addr| UnixStream::connect_addr(&addr))
        .is_ok()
}

/// The `uzswap run` that started process `pid`, if its parent is one.
fn run_of_program(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) state ppid ...": comm may hold spaces; it ends at the last ')'.
    let ppid: u32 = stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    let comm = std::fs::read_to_string(format!("/proc/{ppid}/comm")).ok()?;
    (comm.trim_end() == "uzswap").then_some(ppid)
}

/// The program a `uzswap run` process started, if `pid` is one (`uzswap` with a child).
fn program_of_run(pid: u32) -> Option<u32> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    if comm.trim_end() != "uzswap" {
        return None;
    }
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    children.split_whitespace().next()?.parse().ok()
}

/// Why nobody listens on process `pid`'s name: no such process, or one that does not run
/// under `uzswap run` (`uzswap run` itself, given by mistake, names its program).
fn not_under_uzswap(pid: u32) -> String {
    let proc = std::path::PathBuf::from(format!("/proc/{pid}"));
    let Ok(comm) = std::fs::read_to_string(proc.join("comm")) else {
        return format!("no process {pid}");
    };
    let comm = comm.trim_end();
    let children =
        std::fs::read_to_string(proc.join(format!("task/{pid}/children"))).unwrap_or_default();
    match (comm, children.split_whitespace().next()) {
        ("uzswap", Some(child)) => format!(
            "process {pid} is uzswap itself, which has no statistics: give its program's \
             process ID ({child})"
        ),
        _ => format!("process {pid} ({comm}) does not run under uzswap run: no statistics"),
    }
}
