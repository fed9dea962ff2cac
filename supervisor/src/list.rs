//! Listing the leaves of a state directory with their state and ages.

use std::fs;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use std::time::SystemTime;

use serde::Serialize;

use crate::class::ExitClass;
use crate::clock;
use crate::error::LeafError;
use crate::handle::LeafHandle;
use crate::handle::LeafStatus;
use crate::report::Reporter;

/// Where a listed leaf is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LeafState {
    /// Created, not launched yet.
    Starting,
    /// Launched, supervisor alive.
    Running,
    /// Exit recorded.
    Finished,
    /// Its records cannot be read; `problem` says why.
    Unreadable,
}

/// One line of a leaf listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeafSummary {
    /// The leaf id.
    pub id: String,
    /// Its label, if it has one.
    pub name: Option<String>,
    /// The argument vector.
    pub argv: Vec<String>,
    /// Its state.
    pub state: LeafState,
    /// The exit class, once finished.
    pub class: Option<ExitClass>,
    /// The leaf's pid, once launched.
    pub pid: Option<i32>,
    /// When it was created (UTC RFC 3339).
    pub created_at: Option<String>,
    /// Milliseconds since it was created.
    pub age_ms: Option<u64>,
    /// Milliseconds since an output file last grew; `None` while it wrote nothing.
    pub last_output_age_ms: Option<u64>,
    /// Why its records cannot be read, for `unreadable` leaves.
    pub problem: Option<String>,
}

/// Lists every leaf directory under `leaves_dir`, sorted by id (creation time).
pub(crate) fn list(
    leaves_dir: &Path,
    reporter: &Arc<dyn Reporter>,
) -> Result<Vec<LeafSummary>, LeafError> {
    let entries = match fs::read_dir(leaves_dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(LeafError::List {
                path: leaves_dir.to_path_buf(),
                source,
            });
        }
    };
    let mut ids: Vec<String> = entries
        .flatten()
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_dir()))
        .filter_map(|entry| entry.file_name().into_string().ok())
        .collect();
    ids.sort();
    let mut summaries = Vec::with_capacity(ids.len());
    for id in ids {
        match summarize(leaves_dir, &id, reporter) {
            Ok(Some(summary)) => summaries.push(summary),
            Ok(None) => {}
            Err(error) => summaries.push(unreadable(id, &error)),
        }
    }
    Ok(summaries)
}

/// The summary of one leaf; `None` for a directory whose job file is not written yet.
fn summarize(
    leaves_dir: &Path,
    id: &str,
    reporter: &Arc<dyn Reporter>,
) -> Result<Option<LeafSummary>, LeafError> {
    let mut handle = match LeafHandle::open(leaves_dir, id, Arc::clone(reporter)) {
        Ok(handle) => handle,
        Err(LeafError::NotFound { .. }) => return Ok(None),
        Err(error) => return Err(error),
    };
    let status = handle.status()?;
    let (state, class, pid) = match &status {
        LeafStatus::Starting => (LeafState::Starting, None, None),
        LeafStatus::Running { launch, .. } => (LeafState::Running, None, Some(launch.leaf.pid)),
        LeafStatus::Finished(exit) => {
            let pid = handle
                .launch_record()
                .ok()
                .flatten()
                .map(|launch| launch.leaf.pid);
            (LeafState::Finished, Some(exit.class.clone()), pid)
        }
    };
    let outputs = [Some(handle.stdout_path()), handle.stderr_path()];
    let last_output_age_ms = outputs
        .into_iter()
        .flatten()
        .filter_map(output_age)
        .min()
        .map(clock::millis);
    Ok(Some(LeafSummary {
        id: id.to_owned(),
        name: handle.name().map(str::to_owned),
        argv: handle.argv().to_vec(),
        state,
        class,
        pid,
        created_at: Some(handle.created_at().to_owned()),
        age_ms: clock::age(handle.created_at()).map(clock::millis),
        last_output_age_ms,
        problem: None,
    }))
}

/// How long ago a non-empty output file was last written.
fn output_age(path: &Path) -> Option<Duration> {
    let metadata = fs::metadata(path).ok()?;
    if metadata.len() == 0 {
        return None;
    }
    let modified = metadata.modified().ok()?;
    Some(
        SystemTime::now()
            .duration_since(modified)
            .unwrap_or(Duration::ZERO),
    )
}

fn unreadable(id: String, error: &LeafError) -> LeafSummary {
    let problem = crate::error::error_chain(error);
    LeafSummary {
        id,
        name: None,
        argv: Vec::new(),
        state: LeafState::Unreadable,
        class: None,
        pid: None,
        created_at: None,
        age_ms: None,
        last_output_age_ms: None,
        problem: Some(problem),
    }
}
