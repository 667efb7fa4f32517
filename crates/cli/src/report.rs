//! How the `uzswap` command talks to its user, apart from the figures: a bad input or an error
//! is one line on stderr and exit status 2 (clap's usage errors included, which clap itself
//! prints as a usage block); `--help` and `--version` print and exit 0; a closed stdout (the
//! output piped into `head`) ends the command quietly, with the status a shell reports for a
//! tool that SIGPIPE stopped.

use std::error::Error;
use std::ffi::OsString;
use std::io::{self, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::error::ErrorKind;

/// Exit status of a run that did not happen or did not finish: a bad input, or an error.
pub const FAILED: u8 = 2;
/// Exit status when stdout was closed under the command: 128 + SIGPIPE, what a shell reports
/// for a tool that the signal stopped (Rust ignores SIGPIPE, so a write fails with EPIPE).
pub const STDOUT_CLOSED: u8 = 128 + 13;

/// An error already told (a worker's error line, which its parent relays): the command ends
/// with exit status 2 and prints nothing more.
#[derive(Debug)]
pub struct AlreadyTold;

impl std::fmt::Display for AlreadyTold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("error already reported")
    }
}

impl Error for AlreadyTold {}

/// Parse the command line. On a usage error: one line on stderr, and the exit code to end
/// with; `--help` and `--version` print as clap prints them and end with 0.
pub fn parse<P: clap::Parser>() -> Result<P, ExitCode> {
    parse_failing_with(FAILED)
}

/// [`parse`], with `status` for a usage error instead of [`FAILED`] (`uzswap run` fails with
/// 125, as `timeout(1)`).
pub fn parse_failing_with<P: clap::Parser>(status: u8) -> Result<P, ExitCode> {
    parse_args(std::env::args_os(), status)
}

/// [`parse`] from the given arguments (the first is the program's name).
pub fn parse_from<P: clap::Parser>(
    args: impl IntoIterator<Item = impl Into<OsString> + Clone>,
) -> Result<P, ExitCode> {
    parse_args(args, FAILED)
}

fn parse_args<P: clap::Parser>(
    args: impl IntoIterator<Item = impl Into<OsString> + Clone>,
    status: u8,
) -> Result<P, ExitCode> {
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    P::try_parse_from(&args).map_err(|e| match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            // A closed stdout here is the reader's choice, not an error.
            let _ = e.print();
            ExitCode::SUCCESS
        }
        kind => {
            let command = command_path(&P::command(), &args);
            say(&usage_error_line(kind, &e.render().to_string(), &command));
            ExitCode::from(status)
        }
    })
}

/// The (sub)command `args` ran, as far as they name one: "uzswap bench usemem".
fn command_path(command: &clap::Command, args: &[OsString]) -> String {
    let mut path = vec![command.get_name().to_string()];
    let mut cmd = command;
    for a in args.iter().skip(1).filter_map(|a| a.to_str()) {
        if a.starts_with('-') {
            continue;
        }
        match cmd.find_subcommand(a) {
            Some(sub) => {
                path.push(sub.get_name().to_string());
                cmd = sub;
            }
            None => break,
        }
    }
    path.join(" ")
}

/// The one line for a clap error rendered as `text`: its message and tips joined, and where
/// to find the usage (`command`'s `--help`) instead of the usage block. A command given
/// without its subcommand (clap prints the whole help then) names the subcommands.
pub fn usage_error_line(kind: ErrorKind, text: &str, command: &str) -> String {
    if kind == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        let subcommands: Vec<&str> = text
            .lines()
            .skip_while(|l| l.trim() != "Commands:")
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .filter_map(|l| l.split_whitespace().next())
            .filter(|&c| c != "help")
            .collect();
        return format!(
            "'{command}' needs a command: one of {} (see '{command} --help')",
            subcommands.join(", ")
        );
    }
    let message: Vec<String> = text
        .trim()
        .split("\n\n")
        .filter(|p| {
            let p = p.trim_start();
            !p.starts_with("Usage:") && !p.starts_with("For more information")
        })
        .map(|p| {
            let p = p.trim().strip_prefix("error: ").unwrap_or(p.trim());
            p.split_whitespace().collect::<Vec<_>>().join(" ")
        })
        .filter(|p| !p.is_empty())
        .collect();
    format!("{} (see '{command} --help')", message.join("; "))
}

/// End the command: exit status 0, or the error as one line on stderr and status 2. An
/// error after stdout was closed is that closing, and ends quietly; an error already told
/// ([`AlreadyTold`]) ends with status 2 and nothing more.
pub fn exit<E>(result: Result<(), E>) -> ExitCode
where
    E: AsRef<dyn Error + Send + Sync + 'static>,
{
    let e = match &result {
        Ok(()) => return ExitCode::SUCCESS,
        Err(_) if stdout_closed() => return ExitCode::from(STDOUT_CLOSED),
        Err(e) => e.as_ref(),
    };
    if !chain(e).any(|c| c.is::<AlreadyTold>()) {
        say(&error_line(e));
    }
    ExitCode::from(FAILED)
}

/// End the command by writing `text` to stdout: status 0; a closed stdout ends quietly
/// ([`STDOUT_CLOSED`]); any other failure is one line naming `what` was written, status 2.
pub fn print(text: &str, what: &str) -> ExitCode {
    let mut out = stdout();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) if stdout_closed() => ExitCode::from(STDOUT_CLOSED),
        Err(e) => {
            say(&format!("writing {what}: {e}"));
            ExitCode::from(FAILED)
        }
    }
}

/// An error and its causes, each the `source` of the one before.
pub fn chain<'a>(e: &'a (dyn Error + 'static)) -> impl Iterator<Item = &'a (dyn Error + 'static)> {
    std::iter::successors(Some(e), |&e| e.source())
}

/// An error as one line: its message and its causes' (each the `source` of the one before),
/// joined with ": ": "creating the uzswap region: swap file: No such file or directory".
pub fn error_line(e: &(dyn Error + 'static)) -> String {
    let parts: Vec<String> = chain(e).map(|c| c.to_string()).collect();
    parts.join(": ").replace('\n', " ")
}

/// One `uzswap: ...` line on stderr. A stray newline inside a message (from an OS or library
/// error) must not break the one-line promise; a closed stderr leaves nobody to tell.
pub fn say(message: &str) {
    let line = message.replace('\n', " ");
    let _ = writeln!(io::stderr(), "uzswap: {line}");
}

static STDOUT_WAS_CLOSED: AtomicBool = AtomicBool::new(false);

/// A write to stdout failed because its reader was gone.
pub fn stdout_closed() -> bool {
    STDOUT_WAS_CLOSED.load(Ordering::Relaxed)
}

/// Stdout for the figures: a failed write because the reader is gone (EPIPE) is noted, so
/// that the command ends quietly through [`exit`] instead of reporting it.
pub fn stdout() -> Stdout {
    Stdout(io::stdout().lock())
}

/// The command's standard output, noting a closed pipe (see [`stdout`]).
pub struct Stdout(io::StdoutLock<'static>);

fn noted(e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::BrokenPipe {
        STDOUT_WAS_CLOSED.store(true, Ordering::Relaxed);
    }
    e
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf).map_err(noted)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush().map_err(noted)
    }
}

/// Bytes as MiB (GiB from 1 GiB on), to a tenth where not whole: `40 MiB`, `23.5 GiB`.
pub fn mib(bytes: u64) -> String {
    let (unit, shift) = match bytes >= 1 << 30 {
        true => ("GiB", 30),
        false => ("MiB", 20),
    };
    let x = bytes as f64 / (1u64 << shift) as f64;
    match bytes.is_multiple_of(1 << shift) {
        true => format!("{x:.0} {unit}"),
        false => format!("{x:.1} {unit}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_usage_error_is_one_line_with_its_tip_and_where_help_is() {
        let text = "error: unexpected argument '--bogus' found\n\n  tip: a similar argument \
                    exists: '--corpus'\n\nUsage: uzswap bench usemem --size <SIZE> \
                    --memory-high <SIZE>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            usage_error_line(ErrorKind::UnknownArgument, text, "uzswap bench usemem"),
            "unexpected argument '--bogus' found; tip: a similar argument exists: '--corpus' \
             (see 'uzswap bench usemem --help')"
        );
        let text = "error: the following required arguments were not provided:\n  --size \
                    <SIZE>\n  --memory-high <SIZE>\n\nUsage: uzswap bench usemem --size <SIZE> \
                    --memory-high <SIZE>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            usage_error_line(
                ErrorKind::MissingRequiredArgument,
                text,
                "uzswap bench usemem"
            ),
            "the following required arguments were not provided: --size <SIZE> --memory-high \
             <SIZE> (see 'uzswap bench usemem --help')"
        );
    }

    #[test]
    fn an_error_line_joins_the_causes() {
        #[derive(Debug, thiserror::Error)]
        #[error("creating the region")]
        struct Outer(#[source] std::io::Error);
        let e = Outer(std::io::Error::other("no\nspace"));
        assert_eq!(error_line(&e), "creating the region: no space");
    }

    #[test]
    fn a_missing_subcommand_names_the_subcommands() {
        let text = "Benchmarks\n\nUsage: uzswap bench <COMMAND>\n\nCommands:\n  codecs  Speed\n  \
                    usemem  usemem\n  help    Print this message\n\nOptions:\n  -h, --help  \
                    Print help\n";
        assert_eq!(
            usage_error_line(
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand,
                text,
                "uzswap bench"
            ),
            "'uzswap bench' needs a command: one of codecs, usemem (see 'uzswap bench --help')"
        );
    }
}
