//! Typed errors of the caller-side API. The supervisor process itself never returns
//! an error to anybody: whatever goes wrong there ends up in `exit.json` or in
//! `supervisor.log`.

use std::io;
use std::path::PathBuf;

use crate::stop::StopMode;

/// A record file could not be read, parsed or written.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Reading the file failed for a reason other than its absence.
    #[error("failed to read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The file holds something that is not a record of the expected format.
    #[error("failed to parse {path}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// Writing or renaming the file failed.
    #[error("failed to write {path}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

/// Why [`crate::Supervisor::launch`] started no leaf.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// An `at-leaf` or `now` stop request is pending; clear it to launch again.
    #[error("a stop ({mode}) is pending, so no new leaf may start")]
    StopPending {
        /// The pending mode.
        mode: StopMode,
    },
    /// The spec cannot be run as given.
    #[error("invalid leaf spec: {reason}")]
    InvalidSpec {
        /// What is wrong with it.
        reason: String,
    },
    /// The leaf directory or its job file could not be created.
    #[error("failed to prepare the leaf directory {path}")]
    Prepare {
        /// The directory or file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Writing the job file failed.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// The supervisor program could not be executed.
    #[error("failed to start the supervisor process {program}")]
    SpawnSupervisor {
        /// The program configured with [`crate::Supervisor::new`].
        program: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The supervisor process ended before it recorded a launch or a spawn failure.
    #[error("the supervisor process ended ({status}) before launching the leaf; see {log}")]
    SupervisorFailed {
        /// Its wait status.
        status: String,
        /// Its stderr, captured in the leaf directory.
        log: PathBuf,
    },
    /// The supervisor process recorded nothing within the launch timeout; it was killed.
    #[error("the supervisor process did not launch the leaf within {seconds} s; see {log}")]
    SupervisorTimeout {
        /// The launch timeout.
        seconds: u64,
        /// Its stderr, captured in the leaf directory.
        log: PathBuf,
    },
}

/// Errors reading or controlling an existing leaf.
#[derive(Debug, thiserror::Error)]
pub enum LeafError {
    /// No leaf directory with this id exists in the state directory.
    #[error("no leaf {id} in {state_dir}")]
    NotFound {
        /// The id asked for.
        id: String,
        /// Where it was looked for.
        state_dir: PathBuf,
    },
    /// The id cannot name a leaf (empty, or contains a path separator or `..`).
    #[error("invalid leaf id {id:?}")]
    InvalidId {
        /// The id given.
        id: String,
    },
    /// A record of the leaf could not be read or written.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// Listing the state directory failed.
    #[error("failed to list leaves in {path}")]
    List {
        /// The directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Reading an output file failed.
    #[error("failed to read output {path}")]
    Output {
        /// The output file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

/// A stop request could not be written or cleared.
#[derive(Debug, thiserror::Error)]
pub enum StopError {
    /// Creating the state directory, writing or removing the request failed.
    #[error("failed to update the stop request {path}")]
    Write {
        /// The request file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Writing the request record failed.
    #[error(transparent)]
    Record(#[from] RecordError),
}

/// An error and its causes as one `: `-joined line, for a log line or a message.
///
/// Guarantees: the error's own text comes first, then each cause in order, each once:
/// no error of `tdd` prints its source in its own message, so nothing needs removing.
/// The one implementation in `tdd`: the binary renders its messages with it too.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}
