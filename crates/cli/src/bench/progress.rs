//! Progress of a benchmark on stderr. When stderr is a terminal: a bar with the run under way,
//! how many are done and an estimate of the time left, and a line above it as each run ends.
//! Otherwise (a log, a pipe) no bar: one plain line as each run ends, or none (`--json`).
//!
//! Lines from elsewhere while a bar is up (a worker's stderr, relayed by [`relay`]) go above
//! the bar through [`line()`], so that the bar does not overwrite them.

use std::io::{BufRead, BufReader, IsTerminal, Read, Write};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::Duration;

use indicatif::{HumanDuration, ProgressBar, ProgressState, ProgressStyle};

/// The bar on screen, if any.
static BAR: Mutex<Option<ProgressBar>> = Mutex::new(None);

fn bar_on_screen() -> std::sync::MutexGuard<'static, Option<ProgressBar>> {
    BAR.lock().unwrap_or_else(|e| e.into_inner())
}

/// The progress of one benchmark: `total` steps (runs, files, ...). The bar goes when this is
/// dropped.
pub struct Progress {
    bar: Option<ProgressBar>,
    plain: bool,
}

impl Progress {
    /// `plain`: without a terminal, print a line as each step ends.
    pub fn new(total: u64, unit: &str, plain: bool) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let template = format!(
                "{{spinner}} {{elapsed_precise}} [{{bar:20}}] {{pos}}/{{len}} {unit}, {{left}} \
                 left: {{wide_msg}}"
            );
            let style = ProgressStyle::with_template(&template)
                .expect("a valid template")
                .progress_chars("=> ")
                .with_key("left", |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                    // No estimate before the first step is done.
                    let _ = match s.pos() {
                        0 => write!(w, "time"),
                        _ => write!(w, "about {}", HumanDuration(s.eta())),
                    };
                });
            let bar = ProgressBar::new(total).with_style(style);
            bar.enable_steady_tick(Duration::from_millis(200));
            *bar_on_screen() = Some(bar.clone());
            bar
        });
        Progress { bar, plain }
    }

    /// A step starts: what it is (the cell, the run, the system).
    pub fn start(&self, what: &str) {
        if let Some(b) = &self.bar {
            b.set_message(what.to_string());
        }
    }

    /// A step ended, with what it gave (nothing to print if empty).
    pub fn done(&self, result: &str) {
        if let Some(b) = &self.bar {
            if !result.is_empty() {
                b.println(result);
            }
            b.inc(1);
        } else if self.plain && !result.is_empty() {
            line(result);
        }
    }

    /// Run `f` with the bar off the screen (for output to a terminal stdout).
    pub fn suspend<T>(&self, f: impl FnOnce() -> T) -> T {
        match &self.bar {
            Some(b) => b.suspend(f),
            None => f(),
        }
    }

    /// A step ended in a failure the benchmark goes on after (a run left out): told whether
    /// or not the steps are.
    pub fn failed(&self, text: &str) {
        line(text);
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(b) = self.bar.take() {
            *bar_on_screen() = None;
            b.finish_and_clear();
        }
    }
}

/// A line on stderr, above the bar if one is up.
pub fn line(text: &str) {
    match bar_on_screen().as_ref() {
        Some(b) => b.println(text),
        // A closed stderr leaves nobody to tell.
        None => {
            let _ = writeln!(std::io::stderr(), "{text}");
        }
    }
}

/// Pass a child's stderr on, line by line, through [`line()`]; the thread ends at its EOF.
pub fn relay(stderr: impl Read + Send + 'static) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut r = BufReader::new(stderr);
        let mut buf = Vec::new();
        while matches!(r.read_until(b'\n', &mut buf), Ok(n) if n > 0) {
            line(String::from_utf8_lossy(&buf).trim_end_matches('\n'));
            buf.clear();
        }
    })
}
