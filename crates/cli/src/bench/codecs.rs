//! `uzswap bench codecs`: compress and decompress speed and ratio of each codec on real page
//! files, for single 4 KiB pages (what zswap stores) and 64 KiB chunks (a large folio
//! compressed as one unit). Single-threaded, so the figures compare with one core of the
//! kernel's zswap and with shared/corpus/README.md.
//!
//! Each unit is compressed into a buffer one byte smaller than itself, as the engine does with
//! a page: a unit that does not fit is "incompressible" and counts at its input size in the
//! ratio, as zswap stores such a page raw.

use std::hint::black_box;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;
use zswap::compress::{CompressError, Compressor, CompressorSpec};
use zswap::PAGE_SIZE;

use super::figures::median;
use super::progress::Progress;
use super::systems::{compressor_arg, parse_compressor, SystemError};
use super::workload_args::parse_seconds;
use crate::pages::{load_page_files, PageFile, PageFileError};
use crate::report;

/// Why `uzswap bench codecs` stopped: a bad input, a codec that failed a page file, or the
/// output that could not be written.
#[derive(Debug, thiserror::Error)]
pub enum CodecsError {
    /// A compressor this build does not have.
    #[error(transparent)]
    Compressor(#[from] SystemError),
    /// A page file that cannot be used.
    #[error(transparent)]
    PageFile(#[from] PageFileError),
    /// A codec failed to compress a unit (other than its not fitting).
    #[error("{file}: {codec}: compress failed")]
    Compress {
        /// The page file.
        file: String,
        /// The codec.
        codec: String,
        /// Why.
        source: CompressError,
    },
    /// A codec failed to decompress what it compressed.
    #[error("{file}: {codec}: decompress failed")]
    Decompress {
        /// The page file.
        file: String,
        /// The codec.
        codec: String,
        /// Why.
        source: CompressError,
    },
    /// A codec gave back other bytes than it was given.
    #[error("{file}: {codec}: round trip failed: the codec returned different bytes")]
    RoundTrip {
        /// The page file.
        file: String,
        /// The codec.
        codec: String,
    },
    /// The table or the JSON could not be written.
    #[error("writing the output")]
    Output(#[from] std::io::Error),
    /// The JSON report does not encode.
    #[error("encoding the report")]
    Json(#[from] serde_json::Error),
}

/// Rounds per measurement; the median is reported, so one disturbed round (another process,
/// a frequency change) does not move the figure.
const ROUNDS: usize = 5;
/// The unit sizes measured: a page, and a 64 KiB large folio.
const UNITS: [usize; 2] = [PAGE_SIZE, 16 * PAGE_SIZE];

/// The arguments of `uzswap bench codecs`.
#[derive(Debug, Clone, clap::Args)]
pub struct CodecsArgs {
    /// Page files to measure (raw 4096-byte pages, e.g. corpus/*.pages).
    #[arg(long, value_name = "FILE", required = true, num_args = 1..)]
    pub pages: Vec<PathBuf>,
    /// Compressors to measure, as NAME or NAME:LEVEL (e.g. zstd:-1, deflate:6).
    #[arg(
        long,
        value_name = "NAME",
        num_args = 1..,
        value_delimiter = ',',
        value_parser = compressor_arg,
        default_values_t = ["lz4".to_string(), "zstd".to_string(), "deflate".to_string()]
    )]
    pub compressor: Vec<String>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Minimum time of each of the 5 rounds of a measurement, in seconds.
    #[arg(long, default_value_t = 0.3, value_parser = parse_seconds)]
    pub seconds: f64,
}

/// One row: one codec on one file at one unit size.
#[derive(Debug, Clone, Serialize)]
pub struct CodecResult {
    /// The page file's name.
    pub file: String,
    /// The codec: NAME, or NAME:LEVEL away from its default level.
    pub compressor: String,
    /// Bytes of a unit: 4096 (a page) or 65536 (a large folio).
    pub unit_bytes: usize,
    /// Units in the file (the last 64 KiB unit may be shorter).
    pub units: usize,
    /// Units that did not compress into one byte less than themselves.
    pub incompressible_units: usize,
    /// Bytes of the units together.
    pub input_bytes: u64,
    /// Compressed bytes, incompressible units counted at their input size.
    pub stored_bytes: u64,
    /// input_bytes / stored_bytes.
    pub ratio: f64,
    /// MB (10^6 bytes) of input compressed per second, all units (failed attempts cost too).
    pub compress_mb_s: f64,
    /// MB of uncompressed output per second over the units that compressed (incompressible
    /// ones are stored raw and never decompressed); None when no unit compressed.
    pub decompress_mb_s: Option<f64>,
}

#[derive(Debug, Serialize)]
struct Report<'a> {
    seconds_per_round: f64,
    rounds: usize,
    threads: usize,
    results: &'a [CodecResult],
    verdict: &'a str,
}

/// Run `uzswap bench codecs`: measure every codec on every file and print a table or JSON.
pub fn run(args: &CodecsArgs) -> Result<(), CodecsError> {
    // Every name was checked by the parser, before anything loads.
    let specs = args
        .compressor
        .iter()
        .map(|s| parse_compressor(s))
        .collect::<Result<Vec<_>, _>>()?;
    let files = load_page_files(&args.pages)?;

    let mut table = (!args.json).then(|| Table::new(&files, &specs));
    if let Some(t) = &table {
        t.header(&mut report::stdout())?;
    }
    let steps = files.len() * specs.len() * UNITS.len();
    let progress = Progress::new(steps as u64, "measurements", false);
    let mut results = Vec::new();
    for file in &files {
        for spec in &specs {
            let codec = spec.build();
            for unit in UNITS {
                progress.start(&format!("{} {spec} {}K", file.name, unit >> 10));
                let r = measure_codec(&*codec, file, unit, args.seconds)?;
                // Rows stream as they finish: a full run takes a minute or more.
                if let Some(t) = &mut table {
                    progress.suspend(|| t.row(&mut report::stdout(), &r))?;
                }
                progress.done("");
                results.push(r);
            }
        }
    }
    drop(progress);
    let verdict = verdict(&files, &specs, &results);
    let mut out = report::stdout();
    if args.json {
        let report = Report {
            seconds_per_round: args.seconds,
            rounds: ROUNDS,
            threads: 1,
            results: &results,
            verdict: &verdict,
        };
        writeln!(out, "{}", serde_json::to_string(&report)?)?;
    } else {
        writeln!(out, "{verdict}")?;
    }
    Ok(())
}

/// The last line: what was checked, and each codec's ratio and speeds on 4 KiB pages over
/// all the files (bytes in over bytes stored; MB/s of all the bytes over all the time).
fn verdict(files: &[PageFile], specs: &[CompressorSpec], results: &[CodecResult]) -> String {
    let per_codec: Vec<String> = specs
        .iter()
        .map(|spec| {
            let name = spec.to_string();
            let rs: Vec<&CodecResult> = results
                .iter()
                .filter(|r| r.compressor == name && r.unit_bytes == PAGE_SIZE)
                .collect();
            let input: u64 = rs.iter().map(|r| r.input_bytes).sum();
            let stored: u64 = rs.iter().map(|r| r.stored_bytes).sum();
            // Time = bytes / rate, per file; the rate of the whole is bytes over time.
            let rate = |f: &dyn Fn(&CodecResult) -> Option<(f64, f64)>| {
                let (b, t) = rs
                    .iter()
                    .filter_map(|r| f(r))
                    .fold((0.0, 0.0), |(b, t), (x, r)| (b + x, t + x / r));
                b / t
            };
            let compress = rate(&|r| Some((r.input_bytes as f64, r.compress_mb_s)));
            let decompress = rate(&|r| {
                let out = (r.units - r.incompressible_units) * r.unit_bytes;
                r.decompress_mb_s.map(|d| (out as f64, d))
            });
            format!(
                "{name} ratio {:.2}, {compress:.0} MB/s compress, {decompress:.0} MB/s decompress",
                input as f64 / stored as f64
            )
        })
        .collect();
    format!(
        "verified: every unit of {} came back intact from each codec; 4K pages, all files: {}",
        match files.len() {
            1 => "1 file".to_string(),
            n => format!("{n} files"),
        },
        per_codec.join("; ")
    )
}

/// Compress every unit once (for the ratio and for the decompression input), check that each
/// comes back intact (a benchmark of a broken codec is worthless), then time both directions.
fn measure_codec(
    codec: &dyn Compressor,
    file: &PageFile,
    unit: usize,
    seconds: f64,
) -> Result<CodecResult, CodecsError> {
    let name = || file.name.clone();
    let spec = || codec.spec().to_string();
    let units: Vec<&[u8]> = file.data.chunks(unit).collect();
    let mut dst = vec![0u8; unit - 1];
    let mut out = vec![0u8; unit];
    // The compressed units back to back, with their ranges and the input they came from.
    let mut compressed = Vec::new();
    let mut stored: Vec<(std::ops::Range<usize>, &[u8])> = Vec::new();
    let mut stored_bytes = 0u64;
    let mut incompressible = 0usize;
    for &u in &units {
        match codec.compress(u, &mut dst[..u.len() - 1]) {
            Ok(n) => {
                let start = compressed.len();
                compressed.extend_from_slice(&dst[..n]);
                stored.push((start..start + n, u));
                stored_bytes += n as u64;
            }
            Err(CompressError::DoesNotFit(_)) => {
                incompressible += 1;
                stored_bytes += u.len() as u64;
            }
            Err(source) => {
                return Err(CodecsError::Compress {
                    file: name(),
                    codec: spec(),
                    source,
                })
            }
        }
    }
    for (range, original) in &stored {
        let n = codec
            .decompress(&compressed[range.clone()], &mut out[..original.len()])
            .map_err(|source| CodecsError::Decompress {
                file: name(),
                codec: spec(),
                source,
            })?;
        if n != original.len() || out[..n] != **original {
            return Err(CodecsError::RoundTrip {
                file: name(),
                codec: spec(),
            });
        }
    }

    let input_bytes = file.data.len() as u64;
    let compress_mb_s = median_rate(seconds, input_bytes, || {
        for &u in &units {
            let _ = black_box(codec.compress(black_box(u), &mut dst[..u.len() - 1]));
        }
    });
    let decompressed_bytes: u64 = stored.iter().map(|(_, o)| o.len() as u64).sum();
    // Each unit decompresses to its own place, as a swap-in writes distinct pages: a single
    // reused buffer would stay in cache and flatter the codec against any real use of it.
    let mut dest = vec![0u8; decompressed_bytes as usize];
    let decompress_mb_s = (!stored.is_empty()).then(|| {
        median_rate(seconds, decompressed_bytes, || {
            let mut at = 0;
            for (range, original) in &stored {
                let src = black_box(&compressed[range.clone()]);
                let n = original.len();
                let _ = black_box(codec.decompress(src, &mut dest[at..at + n]));
                at += n;
            }
        })
    });
    Ok(CodecResult {
        file: file.name.clone(),
        compressor: codec.spec().to_string(),
        unit_bytes: unit,
        units: units.len(),
        incompressible_units: incompressible,
        input_bytes,
        stored_bytes,
        ratio: input_bytes as f64 / stored_bytes as f64,
        compress_mb_s,
        decompress_mb_s,
    })
}

/// MB/s of `pass` (which handles `bytes` bytes): the median of `ROUNDS` rounds, each repeating
/// the pass until at least `seconds` have gone by. One pass before the rounds warms caches and
/// creates the thread's codec contexts, so their cost is not timed.
fn median_rate(seconds: f64, bytes: u64, mut pass: impl FnMut()) -> f64 {
    pass();
    let rates: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            let mut passes = 0u64;
            loop {
                pass();
                passes += 1;
                let elapsed = start.elapsed().as_secs_f64();
                if elapsed >= seconds {
                    return (bytes * passes) as f64 / elapsed / 1e6;
                }
            }
        })
        .collect();
    median(rates)
}

/// The human table. Column widths are fixed up front (file and codec names are known) so
/// rows can be printed as they are measured.
struct Table {
    file_w: usize,
    codec_w: usize,
}

impl Table {
    fn new(files: &[PageFile], specs: &[CompressorSpec]) -> Self {
        Table {
            file_w: files.iter().map(|f| f.name.len()).max().unwrap_or(0).max(4),
            codec_w: specs
                .iter()
                .map(|s| s.to_string().len())
                .max()
                .unwrap_or(0)
                .max(10),
        }
    }

    fn header(&self, out: &mut impl Write) -> std::io::Result<()> {
        writeln!(
            out,
            "{:<fw$}  {:<cw$}  {:>6}  {:>13}  {:>15}  {:>6}  {:>14}",
            "file",
            "compressor",
            "unit",
            "compress MB/s",
            "decompress MB/s",
            "ratio",
            "incompressible",
            fw = self.file_w,
            cw = self.codec_w
        )?;
        Ok(())
    }

    fn row(&mut self, out: &mut impl Write, r: &CodecResult) -> std::io::Result<()> {
        let decompress = r
            .decompress_mb_s
            .map_or_else(|| "-".to_string(), |v| format!("{v:.0}"));
        writeln!(
            out,
            "{:<fw$}  {:<cw$}  {:>6}  {:>13.0}  {:>15}  {:>6.2}  {:>13.1}%",
            r.file,
            r.compressor,
            format!("{}K", r.unit_bytes / 1024),
            r.compress_mb_s,
            decompress,
            r.ratio,
            100.0 * r.incompressible_units as f64 / r.units as f64,
            fw = self.file_w,
            cw = self.codec_w
        )?;
        out.flush()?;
        Ok(())
    }
}
