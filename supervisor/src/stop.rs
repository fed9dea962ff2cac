//! Stop requests: `at-ledger`, `at-leaf` and `now`, one file in the state directory.
//!
//! The file is the request: writing it is atomic (write, then rename), reading it
//! never fails. Anything that exists but cannot be read as a request counts as
//! `at-ledger`, the mode that loses nothing: the conductor stops at its next ledger
//! checkpoint and no running leaf is touched.

use std::fmt;
use std::fs;
use std::io;
use std::path::Path;
use std::path::PathBuf;
use std::str::FromStr;

use serde::Deserialize;
use serde::Serialize;

use crate::error::StopError;
use crate::records;

/// The name of the stop request file inside the state directory.
pub const STOP_FILE: &str = "stop.json";

/// How soon to stop, ordered from the gentlest to the most abrupt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopMode {
    /// Stop at the next ledger checkpoint; launches go on, running leaves finish.
    AtLedger,
    /// Let running leaves finish, refuse every new launch.
    AtLeaf,
    /// Refuse new launches and kill running leaves now (class `stopped`).
    Now,
}

impl StopMode {
    /// True for the modes under which [`crate::Supervisor::launch`] refuses to start.
    pub fn refuses_launch(self) -> bool {
        matches!(self, StopMode::AtLeaf | StopMode::Now)
    }

    /// True for the mode under which supervisors kill their running leaf.
    pub fn kills_running(self) -> bool {
        matches!(self, StopMode::Now)
    }

    /// The command-line spelling: `at-ledger`, `at-leaf` or `now`.
    pub fn as_str(self) -> &'static str {
        match self {
            StopMode::AtLedger => "at-ledger",
            StopMode::AtLeaf => "at-leaf",
            StopMode::Now => "now",
        }
    }
}

impl fmt::Display for StopMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for StopMode {
    type Err = String;

    /// Accepts the command-line spelling and the snake-case one.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "at-ledger" | "at_ledger" => Ok(StopMode::AtLedger),
            "at-leaf" | "at_leaf" => Ok(StopMode::AtLeaf),
            "now" => Ok(StopMode::Now),
            other => Err(format!(
                "unknown stop mode {other:?}; expected at-ledger, at-leaf or now"
            )),
        }
    }
}

/// A pending stop request, as read from the state directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopRequest {
    /// The mode in force.
    pub mode: StopMode,
    /// When it was requested, when the file says so.
    pub requested_at: Option<String>,
    /// True when the file existed but could not be read as a request, so `at-ledger`
    /// is assumed.
    pub unreadable: bool,
}

/// The on-disk format of the request.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StopFile {
    version: u32,
    mode: StopMode,
    requested_at: String,
}

/// The request file for a state directory.
pub fn stop_path(state_dir: &Path) -> PathBuf {
    state_dir.join(STOP_FILE)
}

/// Records a stop request, replacing any pending one (the latest request wins). This
/// only writes the file; [`crate::Supervisor::request_stop`] also wakes supervisors.
pub fn request_stop(state_dir: &Path, mode: StopMode) -> Result<StopRequest, StopError> {
    let path = stop_path(state_dir);
    fs::create_dir_all(state_dir).map_err(|source| StopError::Write {
        path: path.clone(),
        source,
    })?;
    let requested_at = crate::clock::now_rfc3339();
    let file = StopFile {
        version: records::FORMAT_VERSION,
        mode,
        requested_at: requested_at.clone(),
    };
    records::write_json(&path, &file)?;
    Ok(StopRequest {
        mode,
        requested_at: Some(requested_at),
        unreadable: false,
    })
}

/// The pending request, if any. Never fails: a request that exists but cannot be read
/// or parsed is reported as `at-ledger` with `unreadable` set.
pub fn read_stop(state_dir: &Path) -> Option<StopRequest> {
    let path = stop_path(state_dir);
    match records::read_json::<StopFile>(&path) {
        Ok(None) => None,
        Ok(Some(file)) if file.version == records::FORMAT_VERSION => Some(StopRequest {
            mode: file.mode,
            requested_at: Some(file.requested_at),
            unreadable: false,
        }),
        Ok(Some(_)) | Err(_) => Some(StopRequest {
            mode: StopMode::AtLedger,
            requested_at: None,
            unreadable: true,
        }),
    }
}

/// Removes the pending request. Returns whether there was one.
pub fn clear_stop(state_dir: &Path) -> Result<bool, StopError> {
    let path = stop_path(state_dir);
    match fs::remove_file(&path) {
        Ok(()) => Ok(true),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(StopError::Write { path, source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_read_clear_round_trip() {
        let dir = tempfile::tempdir().expect("temp dir");
        assert_eq!(read_stop(dir.path()), None);
        request_stop(dir.path(), StopMode::AtLeaf).expect("writes");
        let read = read_stop(dir.path()).expect("pending");
        assert_eq!(read.mode, StopMode::AtLeaf);
        assert!(!read.unreadable);
        request_stop(dir.path(), StopMode::Now).expect("replaces");
        assert_eq!(read_stop(dir.path()).map(|r| r.mode), Some(StopMode::Now));
        assert!(clear_stop(dir.path()).expect("clears"));
        assert!(!clear_stop(dir.path()).expect("nothing to clear"));
        assert_eq!(read_stop(dir.path()), None);
    }

    #[test]
    fn an_unreadable_request_is_at_ledger() {
        let dir = tempfile::tempdir().expect("temp dir");
        for garbage in [
            "",
            "now",
            r#"{"version":1,"mode":"later","requested_at":"x"}"#,
        ] {
            fs::write(stop_path(dir.path()), garbage).expect("writes");
            let read = read_stop(dir.path()).expect("something is pending");
            assert_eq!(read.mode, StopMode::AtLedger, "for {garbage:?}");
            assert!(read.unreadable);
            assert!(!read.mode.refuses_launch());
        }
    }

    #[test]
    fn modes_parse_both_spellings() {
        assert_eq!("at-leaf".parse::<StopMode>(), Ok(StopMode::AtLeaf));
        assert_eq!("at_ledger".parse::<StopMode>(), Ok(StopMode::AtLedger));
        assert!("soon".parse::<StopMode>().is_err());
        assert!(StopMode::AtLedger < StopMode::AtLeaf && StopMode::AtLeaf < StopMode::Now);
    }
}
