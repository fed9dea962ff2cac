//! The files of a leaf directory and their formats.
//!
//! Every record is versioned JSON, rejects unknown fields, and is written by
//! write-then-rename, so a reader sees either the whole previous content or the
//! whole new one, never a torn write. `exit.json` is created with a hard link,
//! which fails if it exists: whoever records an exit first wins, and nobody
//! overwrites it.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use serde::Deserialize;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::class::ExitClass;
use crate::error::RecordError;

/// The version of every record format this crate writes.
pub const FORMAT_VERSION: u32 = 1;

/// A process identity that survives pid reuse: the pid plus the start time the kernel
/// reports in field 22 of `/proc/<pid>/stat` (clock ticks since boot). Two processes
/// never share both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessId {
    /// The process id.
    pub pid: i32,
    /// Field 22 of `/proc/<pid>/stat`.
    pub start_time: u64,
}

impl ProcessId {
    /// Reads the identity of the process that has `pid` now.
    pub fn of(pid: i32) -> io::Result<ProcessId> {
        let stat = crate::unix::procfs::read_stat(pid)?;
        Ok(ProcessId {
            pid,
            start_time: stat.start_time,
        })
    }

    /// True when this very process (same pid and start time) exists and is neither a
    /// zombie nor dead. A pid now used by another process is reported as not alive.
    pub fn is_alive(&self) -> bool {
        crate::unix::procfs::is_alive(*self)
    }
}

/// The resolved spec: written by the caller before the supervisor starts, read by the
/// supervisor process. Every path in it is absolute.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Job {
    pub version: u32,
    pub id: String,
    pub name: Option<String>,
    pub state_dir: PathBuf,
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    pub env: BTreeMap<String, String>,
    pub stdin: Option<PathBuf>,
    pub stdout: PathBuf,
    /// `None` when stderr is merged into stdout.
    pub stderr: Option<PathBuf>,
    pub wall_timeout_ms: Option<u64>,
    pub idle_timeout_ms: Option<u64>,
    pub max_output_bytes: Option<u64>,
    pub grace_ms: u64,
    pub heartbeat_ms: u64,
    pub created_at: String,
    /// How the leaf is confined; absent in jobs written before confinement existed.
    #[serde(default)]
    pub sandbox: Sandbox,
}

/// What the supervisor recorded once the leaf was spawned (`launch.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaunchRecord {
    /// The record format version.
    pub version: u32,
    /// The leaf id.
    pub id: String,
    /// The leaf process; it leads its own process group.
    pub leaf: ProcessId,
    /// The leaf's process group id (equal to the leaf's pid).
    pub pgid: i32,
    /// The supervisor process; it leads the session the leaf runs in.
    pub supervisor: ProcessId,
    /// When the leaf was spawned (UTC RFC 3339).
    pub launched_at: String,
    /// The confinement the leaf actually ran under; absent in records written before
    /// confinement existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<tdd_sandbox::Level>,
}

/// How a leaf is to be confined.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Sandbox {
    /// No confinement asked for: the leaf runs as its caller could.
    #[default]
    Off,
    /// Confinement turned off by configuration; recorded as `disabled`.
    Disabled,
    /// Confined by `policy`; with `require`, a leaf that cannot be confined fully
    /// (no Landlock, or an older ABI) is not started.
    Confined {
        /// What the leaf may touch.
        policy: tdd_sandbox::Policy,
        /// Refuse to start without full confinement.
        require: bool,
    },
}

/// The supervisor's periodic sign of life (`heartbeat.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Heartbeat {
    /// The record format version.
    pub version: u32,
    /// When this heartbeat was written (UTC RFC 3339).
    pub at: String,
    /// Increments by one per heartbeat.
    pub seq: u64,
    /// Bytes the leaf has written to stdout so far (including bytes past the cap).
    pub stdout_bytes: u64,
    /// Bytes the leaf has written to stderr so far (zero when merged into stdout).
    pub stderr_bytes: u64,
    /// When the leaf last wrote a byte, if it has.
    pub last_output_at: Option<String>,
    /// Every live process of the leaf's tree at this heartbeat, the leaf included. If
    /// the supervisor is lost, a reader kills exactly these (pid and start time match).
    pub descendants: Vec<ProcessId>,
}

/// How a leaf ended (`exit.json`). Written once, by the supervisor or, when the
/// supervisor was lost, by the first reader that noticed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExitRecord {
    /// The record format version.
    pub version: u32,
    /// The leaf id.
    pub id: String,
    /// The exit class.
    pub class: ExitClass,
    /// How many processes of the leaf's tree were still alive after the leaf itself
    /// was reaped (or after the supervisor was lost) and had to be killed.
    pub leaked: u32,
    /// When the exit was recorded (UTC RFC 3339).
    pub ended_at: String,
    /// Milliseconds from spawn until the leaf was reaped, when known.
    pub duration_ms: Option<u64>,
    /// Milliseconds from spawn until the first signal the supervisor sent, if any.
    pub first_signal_after_ms: Option<u64>,
    /// Milliseconds from spawn until the supervisor sent SIGKILL, if it did.
    pub sigkill_after_ms: Option<u64>,
    /// Milliseconds from spawn until the leaf and every descendant were confirmed gone.
    pub all_gone_after_ms: Option<u64>,
    /// Bytes the leaf wrote to stdout (including bytes past the cap).
    pub stdout_bytes: u64,
    /// Bytes the leaf wrote to stderr (zero when merged).
    pub stderr_bytes: u64,
    /// True when an output file was cut at the cap and ends with the marker line.
    pub output_cut: bool,
    /// The supervisor process's peak resident memory (VmHWM) in KiB, when known.
    pub supervisor_peak_rss_kib: Option<u64>,
}

impl ExitRecord {
    /// The record of a leaf that did not run under a live supervisor to the end: no
    /// timings, no output counts.
    pub(crate) fn without_run(id: &str, class: ExitClass, leaked: u32) -> ExitRecord {
        ExitRecord {
            version: FORMAT_VERSION,
            id: id.to_owned(),
            class,
            leaked,
            ended_at: crate::clock::now_rfc3339(),
            duration_ms: None,
            first_signal_after_ms: None,
            sigkill_after_ms: None,
            all_gone_after_ms: None,
            stdout_bytes: 0,
            stderr_bytes: 0,
            output_cut: false,
            supervisor_peak_rss_kib: None,
        }
    }
}

/// A request to kill one leaf (`kill.json`), read by its supervisor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct KillRequest {
    pub version: u32,
    /// SIGKILL at once instead of SIGTERM, grace, SIGKILL.
    pub force: bool,
    pub requested_at: String,
}

/// The paths inside one leaf directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LeafDir {
    pub path: PathBuf,
}

impl LeafDir {
    pub fn new(path: impl Into<PathBuf>) -> LeafDir {
        LeafDir { path: path.into() }
    }
    pub fn job(&self) -> PathBuf {
        self.path.join("job.json")
    }
    pub fn launch(&self) -> PathBuf {
        self.path.join("launch.json")
    }
    pub fn heartbeat(&self) -> PathBuf {
        self.path.join("heartbeat.json")
    }
    pub fn exit(&self) -> PathBuf {
        self.path.join("exit.json")
    }
    pub fn kill(&self) -> PathBuf {
        self.path.join("kill.json")
    }
    pub fn wake(&self) -> PathBuf {
        self.path.join("wake")
    }
    pub fn supervisor_log(&self) -> PathBuf {
        self.path.join("supervisor.log")
    }
    pub fn default_stdout(&self) -> PathBuf {
        self.path.join("stdout.log")
    }
    pub fn default_stderr(&self) -> PathBuf {
        self.path.join("stderr.log")
    }
}

/// Reads a JSON record; `Ok(None)` when the file does not exist.
pub(crate) fn read_json<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, RecordError> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(RecordError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|source| RecordError::Parse {
            path: path.to_path_buf(),
            source,
        })
}

/// Replaces `path` with `value` as JSON, atomically for readers (write, then rename).
pub(crate) fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), RecordError> {
    let temp = write_temp(path, value)?;
    fs::rename(&temp, path).map_err(|source| {
        let _ = fs::remove_file(&temp);
        RecordError::Write {
            path: path.to_path_buf(),
            source,
        }
    })
}

/// Creates `path` with `value` as JSON unless it already exists. Returns false, and
/// changes nothing, when another writer got there first.
pub(crate) fn create_json<T: Serialize>(path: &Path, value: &T) -> Result<bool, RecordError> {
    let temp = write_temp(path, value)?;
    let linked = fs::hard_link(&temp, path);
    let _ = fs::remove_file(&temp);
    match linked {
        Ok(()) => Ok(true),
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(source) => Err(RecordError::Write {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Writes `value` to a fresh temporary file beside `path` and returns its path.
fn write_temp<T: Serialize>(path: &Path, value: &T) -> Result<PathBuf, RecordError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let write_error = |source| RecordError::Write {
        path: path.to_path_buf(),
        source,
    };
    let mut bytes = serde_json::to_vec_pretty(value)
        .map_err(io::Error::other)
        .map_err(write_error)?;
    bytes.push(b'\n');
    let file_name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned());
    let temp = path.with_file_name(format!(
        ".{}.{}.{}.tmp",
        file_name.unwrap_or_default(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let written = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)
        .and_then(|mut file| file.write_all(&bytes));
    if let Err(source) = written {
        let _ = fs::remove_file(&temp);
        return Err(write_error(source));
    }
    Ok(temp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_json_never_overwrites() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("exit.json");
        assert!(create_json(&path, &1u32).expect("first write"));
        assert!(!create_json(&path, &2u32).expect("second write"));
        assert_eq!(read_json::<u32>(&path).expect("reads"), Some(1));
        let leftovers = fs::read_dir(dir.path()).expect("lists").count();
        assert_eq!(leftovers, 1, "temporary files are removed");
    }

    #[test]
    fn write_json_replaces_and_missing_reads_as_none() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("heartbeat.json");
        assert_eq!(read_json::<u32>(&path).expect("missing is fine"), None);
        write_json(&path, &1u32).expect("writes");
        write_json(&path, &2u32).expect("replaces");
        assert_eq!(read_json::<u32>(&path).expect("reads"), Some(2));
    }

    #[test]
    fn garbage_is_a_parse_error() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("launch.json");
        fs::write(&path, "{half").expect("writes");
        assert!(matches!(
            read_json::<LaunchRecord>(&path),
            Err(RecordError::Parse { .. })
        ));
    }
}
