//! The `Reporter` trait: how supervision events leave this crate.
//!
//! The crate depends on no ledger. The binary implements [`Reporter`] on top of its
//! ledger; this module ships a no-op reporter and one that appends JSON lines to a
//! file. A reporter failure never changes what happens to a leaf: the supervisor
//! notes it in `supervisor.log` and goes on.

use std::error::Error;
use std::fs::File;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

use serde::Serialize;

use crate::class::Signal;
use crate::records::ExitRecord;
use crate::records::LaunchRecord;

/// One supervision event, serialised with an `event` tag in snake case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum LeafEvent {
    /// The leaf was spawned; the record is also in `launch.json`.
    Launched {
        /// The launch record.
        launch: LaunchRecord,
        /// The argument vector.
        argv: Vec<String>,
        /// The leaf's label, if it has one.
        name: Option<String>,
    },
    /// The supervisor sent a signal to the leaf's group.
    Signalled {
        /// The leaf id.
        id: String,
        /// The signal.
        signal: Signal,
        /// The process group it went to.
        pgid: i32,
        /// Why, in a few words.
        why: String,
    },
    /// The leaf ended; the record is also in `exit.json`.
    Exited {
        /// The exit record.
        exit: ExitRecord,
    },
}

/// Why a report could not be delivered.
#[derive(Debug, thiserror::Error)]
#[error("failed to report a leaf event")]
pub struct ReportError {
    #[source]
    source: Box<dyn Error + Send + Sync>,
}

impl ReportError {
    /// Wraps the reporter's own error.
    pub fn new(source: impl Into<Box<dyn Error + Send + Sync>>) -> ReportError {
        ReportError {
            source: source.into(),
        }
    }
}

impl From<std::io::Error> for ReportError {
    fn from(error: std::io::Error) -> Self {
        ReportError::new(error)
    }
}

/// Receives supervision events. Called from the supervisor process for launch,
/// signals and exits, and from callers when they record a lost supervisor. Each
/// event is reported once: exits only by whoever created `exit.json`.
pub trait Reporter: Send + Sync {
    /// Delivers one event.
    fn report(&self, event: &LeafEvent) -> Result<(), ReportError>;
}

/// Drops every event.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopReporter;

impl Reporter for NoopReporter {
    fn report(&self, _event: &LeafEvent) -> Result<(), ReportError> {
        Ok(())
    }
}

/// Appends each event as one JSON line. Each line is one `write` on a file opened
/// with `O_APPEND`, so lines from several processes never interleave.
#[derive(Debug)]
pub struct JsonLinesReporter {
    file: File,
}

impl JsonLinesReporter {
    /// Opens (creating if needed) the file to append to.
    pub fn open(path: &Path) -> std::io::Result<JsonLinesReporter> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(JsonLinesReporter { file })
    }
}

impl Reporter for JsonLinesReporter {
    fn report(&self, event: &LeafEvent) -> Result<(), ReportError> {
        let mut line = serde_json::to_vec(event).map_err(ReportError::new)?;
        line.push(b'\n');
        (&self.file).write_all(&line)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines_are_tagged_and_appended() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("events.jsonl");
        let reporter = JsonLinesReporter::open(&path).expect("opens");
        let event = LeafEvent::Signalled {
            id: "leaf".into(),
            signal: Signal::TERM,
            pgid: 42,
            why: "wall timeout".into(),
        };
        reporter.report(&event).expect("reports");
        reporter.report(&event).expect("reports again");
        let text = std::fs::read_to_string(&path).expect("reads");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with(r#"{"event":"signalled","id":"leaf","signal":"SIGTERM""#));
    }
}
