//! Errors of the observation layer.
//!
//! A runner that is missing, crashes or writes garbage is *not* an error
//! here: it is an [`Observation`](super::Observation) whose `runner_error`
//! says so. [`ObserveError`] is reserved for the engine failing to set up an
//! observation at all (no temporary directory, an unusable project root).

use std::path::PathBuf;

/// The engine could not set up or record an observation.
#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    /// The project's root directory does not exist or cannot be resolved.
    #[error("project root {path} is not a directory")]
    BadRoot {
        /// The root as resolved from `tdd.toml`.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The engine's scratch directory or files could not be created.
    #[error("failed to create the engine's scratch files")]
    Scratch(#[source] std::io::Error),
    /// A target id is empty or names another project.
    #[error("target `{target}` is not a test id of project `{project}`")]
    BadTarget {
        /// The target as given.
        target: String,
        /// The project it was resolved against.
        project: String,
    },
    /// A target id begins with `-`: a runner would take it for an option.
    #[error(
        "target `{target}` begins with `-`: a test runner would read it as an option, not a test id"
    )]
    OptionTarget {
        /// The target as given.
        target: String,
    },
}

/// A report that could not be read as the runner's format.
///
/// Parsers never panic on any input; they return this, and the adapter
/// turns it into the observation's `runner_error`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ReportError(pub String);

impl ReportError {
    /// A report error with a message naming the format.
    pub fn new(format: &str, detail: impl std::fmt::Display) -> ReportError {
        ReportError(format!("unreadable {format} report: {detail}"))
    }
}
