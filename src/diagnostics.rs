//! Diagnostics: `tracing` spans and events, shown on stderr with `-v`/`-vv` or a
//! `TDD_LOG` filter, and written as JSON lines to a file a command names (`tdd conduct`
//! writes `trace.jsonl` into its run directory).
//!
//! Diagnostics never replace the envelope or the NDJSON progress events: they are for a
//! person finding out why something took long or went wrong, and their format may change.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::Mutex;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::FilterExt;
use tracing_subscriber::filter::dynamic_filter_fn;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The variable that overrides `-v` with a filter (`tdd_engine=debug`, `info`, ...).
pub const LOG_VAR: &str = "TDD_LOG";

/// The crates whose spans are written to a trace file: a directive's target matches every
/// target it begins, so `tdd` covers `tdd_engine`, `tdd_observe`, `tdd_conductor`, ...
const TRACED: &str = "tdd=debug";

/// A file the JSON layer writes to once a command has named one; until then, and after a
/// failed write, what it is given is dropped.
#[derive(Debug, Clone, Default)]
pub struct TraceFile(Arc<Mutex<Option<File>>>);

impl TraceFile {
    /// Whether a file is being written (so events are worth formatting).
    fn is_open(&self) -> bool {
        self.0.lock().is_ok_and(|slot| slot.is_some())
    }
}

impl TraceFile {
    /// From now on, writes the trace as JSON lines to `path` (appended, created if need be).
    pub fn write_to(&self, path: &Path) -> std::io::Result<()> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        if let Ok(mut slot) = self.0.lock() {
            *slot = Some(file);
        }
        Ok(())
    }
}

/// One write to the trace file: a whole formatted line, under the lock.
#[derive(Debug)]
pub struct TraceWriter(Arc<Mutex<Option<File>>>);

impl Write for TraceWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut slot) = self.0.lock()
            && let Some(file) = slot.as_mut()
            && file.write_all(buf).is_err()
        {
            // A trace that cannot be written is dropped, never the command.
            *slot = None;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for TraceFile {
    type Writer = TraceWriter;

    fn make_writer(&'a self) -> TraceWriter {
        TraceWriter(Arc::clone(&self.0))
    }
}

/// The stderr filter: `TDD_LOG` when set (a bad one is reported and ignored), else the
/// count of `-v`: none shows nothing, `-v` info, `-vv` debug, more trace.
fn stderr_filter(verbose: u8) -> EnvFilter {
    if let Ok(text) = std::env::var(LOG_VAR)
        && !text.trim().is_empty()
    {
        match EnvFilter::try_new(&text) {
            Ok(filter) => return filter,
            Err(err) => {
                let _ = writeln!(
                    std::io::stderr(),
                    "tdd: ignoring {LOG_VAR}={text:?}: {err} (example: {LOG_VAR}=tdd_engine=debug)"
                );
            }
        }
    }
    EnvFilter::new(match verbose {
        0 => "off",
        1 => "info",
        2 => "debug",
        _ => "trace",
    })
}

/// Installs the process's subscriber; the returned [`TraceFile`] starts writing JSON lines
/// when a command names its file. Installing twice keeps the first.
pub fn init(verbose: u8) -> TraceFile {
    let file = TraceFile::default();
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(true)
        .with_filter(stderr_filter(verbose));
    let json = tracing_subscriber::fmt::layer()
        .json()
        .with_current_span(true)
        .with_span_list(true)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_writer(file.clone())
        // A dynamic filter: a plain `filter_fn` caches its first answer per callsite, so
        // a callsite first reached before the file opened would never be traced.
        .with_filter(EnvFilter::new(TRACED).and(dynamic_filter_fn({
            let file = file.clone();
            move |_, _| file.is_open()
        })));
    let _ = tracing_subscriber::registry()
        .with(stderr)
        .with(json)
        .try_init();
    file
}
