//! Core leases: how the conductors on one machine share its cores.
//!
//! Every `tdd conduct` holds a lease while it works: a small file in one directory per
//! user and machine ([`LeaseDir::resolve`]) that names its holder (pid and start time),
//! its work tree and when it was taken. A runner's `{workers}` is the core budget
//! ([`Budget`]) divided by the live leases, rounded down and never 0 ([`share`]), so
//! three conductors on a machine each start a third of its cores' worth of workers
//! rather than one per core each.
//!
//! Counting is reading the directory, so every process of the user that resolves the
//! same directory counts the same leases: the conductor hands the directory it took its
//! lease in to its leaves and to the `tdd` commands it relays for them, as
//! [`LEASE_DIR_VAR`]. Whenever leases are counted, a lease whose holder is gone (no
//! process has its pid, the process that has it started at another time, or it is a
//! zombie) or whose file is not a lease is removed, and so is a half-written lease of a
//! holder that is gone. A lease is written whole (a temporary file renamed into place),
//! so a reader never sees part of one.
//!
//! A holder is named as the supervisor names a process (`ProcessId`: the pid and field
//! 22 of `/proc/<pid>/stat`); this crate reads that field itself because it depends on
//! no crate of the workspace but the sandbox. Leases are counted within one PID
//! namespace: conductors in containers of their own do not see each other's.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::io::Read;
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use serde::Deserialize;
use serde::Serialize;

mod budget;
mod holder;
#[cfg(test)]
mod tests;

pub use budget::Budget;
pub use budget::BudgetSource;
pub use budget::machine_cores;
pub use budget::share;
pub use holder::Holder;

/// Names the lease directory, overriding where it is otherwise found (tests, or a
/// machine whose runtime and temporary directories differ between its users' sessions).
pub const LEASE_DIR_VAR: &str = "TDD_LEASE_DIR";

/// The cores the conductors of this machine share, a whole number of 1 or more; when
/// unset (or empty), the machine's available parallelism.
pub const CORE_BUDGET_VAR: &str = "TDD_CORE_BUDGET";

/// The version of the lease file format this crate writes and reads.
pub const LEASE_VERSION: u32 = 1;

/// The largest lease file read; anything longer is not a lease.
const MAX_LEASE_BYTES: u64 = 64 * 1024;

/// Tells the leases one process takes apart.
static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// Why a lease could not be taken or the leases counted.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// [`CORE_BUDGET_VAR`] is set to something other than a whole number of 1 or more.
    #[error("TDD_CORE_BUDGET is `{value}`, not a whole number of cores of 1 or more")]
    BadBudget {
        /// The value as set.
        value: String,
    },
    /// A directory on the lease path is a link, not a directory, another user's, or
    /// writable by others: leases kept there could be removed or forged by someone else.
    #[error(
        "the lease directory {} is not a directory of this user's that only this user can change",
        path.display()
    )]
    NotPrivate {
        /// The directory.
        path: PathBuf,
    },
    /// The lease directory or a lease file could not be made, written or read.
    #[error("failed to {doing} {}", path.display())]
    Io {
        /// What was being done ("write the lease").
        doing: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The process a lease was to name could not be read from `/proc`.
    #[error("process {pid} could not be read from /proc, so it cannot hold a lease")]
    NoHolder {
        /// The pid.
        pid: i32,
        /// The error.
        #[source]
        source: io::Error,
    },
}

/// One lease as its file holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeaseRecord {
    /// [`LEASE_VERSION`].
    pub version: u32,
    /// The holder's pid.
    pub pid: i32,
    /// The holder's start time (see [`Holder`]).
    pub start_time: u64,
    /// The work tree the holder works in.
    pub work_tree: PathBuf,
    /// When the lease was taken, UTC RFC 3339.
    pub taken_at: String,
}

impl LeaseRecord {
    /// The process that holds the lease.
    pub fn holder(&self) -> Holder {
        Holder {
            pid: self.pid,
            start_time: self.start_time,
        }
    }
}

/// The machine-wide directory of this user's leases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseDir {
    path: PathBuf,
    /// The directories, outermost first and ending with `path`, that must be this user's
    /// alone: the ones `tdd` makes for the leases (a shared temporary directory's
    /// `tdd-<uid>` among them), never a parent it was given.
    private: Vec<PathBuf>,
}

impl LeaseDir {
    /// The lease directory this process's environment names: [`LEASE_DIR_VAR`] when set
    /// (a relative path is taken from the current directory); else `tdd/leases` in
    /// `$XDG_RUNTIME_DIR` (private to the user, emptied at logout) when that is an
    /// absolute path to a directory; else `tdd-<uid>/leases` in the temporary directory
    /// (`$TMPDIR`, else `/tmp`).
    pub fn resolve() -> LeaseDir {
        LeaseDir::resolve_with(
            |name| std::env::var_os(name),
            &std::env::temp_dir(),
            nix::unistd::getuid().as_raw(),
        )
    }

    /// [`LeaseDir::resolve`] with the environment read through `var`, the temporary
    /// directory `temp` and the user `uid`.
    fn resolve_with(var: impl Fn(&str) -> Option<OsString>, temp: &Path, uid: u32) -> LeaseDir {
        let set = |name| var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        if let Some(path) = set(LEASE_DIR_VAR) {
            // Absolute, so the conductor hands its leaves the directory it means whatever
            // directory they start in.
            return LeaseDir::at(std::path::absolute(&path).unwrap_or(path));
        }
        let (base, own) = match set("XDG_RUNTIME_DIR") {
            Some(runtime) if runtime.is_absolute() && runtime.is_dir() => (runtime, "tdd".into()),
            _ => (temp.to_path_buf(), format!("tdd-{uid}")),
        };
        let own = base.join(own);
        let path = own.join("leases");
        LeaseDir {
            private: vec![own, path.clone()],
            path,
        }
    }

    /// The lease directory at `path` (made when a lease is taken, if missing).
    pub fn at(path: impl Into<PathBuf>) -> LeaseDir {
        let path = path.into();
        LeaseDir {
            private: vec![path.clone()],
            path,
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Takes a lease for this process in `work_tree`, released when the returned
    /// [`Lease`] is dropped (or, should this process die first, swept by the next count).
    pub fn take(&self, work_tree: &Path) -> Result<Lease, LeaseError> {
        self.take_for(Holder::this_process()?, work_tree)
    }

    /// Takes a lease that `holder` holds in `work_tree`: it counts for as long as that
    /// process lives, or until the returned [`Lease`] is dropped. Guarantees: the file
    /// appears whole or not at all, readable and writable by this user only.
    pub fn take_for(&self, holder: Holder, work_tree: &Path) -> Result<Lease, LeaseError> {
        self.make()?;
        let record = LeaseRecord {
            version: LEASE_VERSION,
            pid: holder.pid,
            start_time: holder.start_time,
            work_tree: work_tree.to_path_buf(),
            taken_at: now_rfc3339(),
        };
        let n = SEQUENCE.fetch_add(1, Ordering::Relaxed);
        let name = format!("lease-{}-{}-{n}.json", holder.pid, holder.start_time);
        let path = self.path.join(&name);
        let temp = self.path.join(format!("{name}.tmp"));
        let io = |doing, path: &Path, source| LeaseError::Io {
            doing,
            path: path.to_path_buf(),
            source,
        };
        let text = serde_json::to_vec(&record)
            .map_err(|e| io("write the lease", &temp, io::Error::other(e)))?;
        let written = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&temp)
            .and_then(|mut file| file.write_all(&text))
            .map_err(|e| io("write the lease", &temp, e));
        let renamed = written.and_then(|()| {
            fs::rename(&temp, &path).map_err(|e| io("move the lease into place at", &path, e))
        });
        if let Err(err) = renamed {
            let _ = fs::remove_file(&temp);
            return Err(err);
        }
        Ok(Lease { path, record })
    }

    /// The live leases, oldest first. Sweeps as it reads: a lease whose holder is gone, a
    /// file named as a lease that cannot be read as one (a link, a pipe, garbage) and a
    /// half-written lease of a holder that is gone are removed; a lease another version
    /// of `tdd` wrote is left alone and not counted. A directory that does not exist yet
    /// holds no lease.
    pub fn live(&self) -> Result<Vec<LeaseRecord>, LeaseError> {
        if !self.checked(false)? {
            return Ok(Vec::new());
        }
        let entries = fs::read_dir(&self.path).map_err(|source| LeaseError::Io {
            doing: "read the lease directory",
            path: self.path.clone(),
            source,
        })?;
        let mut live = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let stale = match Name::parse(name) {
                Name::Lease => match read_lease(&path) {
                    Found::Gone | Found::OtherVersion => false,
                    Found::NotALease => true,
                    Found::Lease(record) if record.holder().is_alive() => {
                        live.push(record);
                        false
                    }
                    Found::Lease(_) => true,
                },
                Name::Temporary(holder) => !holder.is_alive(),
                Name::Other => false,
            };
            if stale {
                // Another count may have removed it first; either way it is gone.
                let _ = fs::remove_file(&path);
            }
        }
        live.sort_by(|a, b| (&a.taken_at, a.pid).cmp(&(&b.taken_at, b.pid)));
        Ok(live)
    }

    /// The budget, the live leases and the share of each holder, as of now.
    pub fn survey(&self, budget: Budget) -> Result<Survey, LeaseError> {
        let leases = self.live()?;
        Ok(Survey {
            dir: self.path.clone(),
            workers: share(budget.cores, leases.len()),
            budget,
            leases,
        })
    }

    /// Makes the directories that must be this user's alone (mode 0700) and checks them.
    fn make(&self) -> Result<(), LeaseError> {
        for dir in &self.private {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|source| LeaseError::Io {
                    doing: "make the lease directory",
                    path: dir.clone(),
                    source,
                })?;
        }
        self.checked(true).map(drop)
    }

    /// Whether the lease directory exists, once each of its private directories that
    /// exists is checked to be a real directory of this user's that no one else can
    /// write. `required`: a missing one is an error rather than `false`.
    fn checked(&self, required: bool) -> Result<bool, LeaseError> {
        let uid = nix::unistd::getuid().as_raw();
        for dir in &self.private {
            match fs::symlink_metadata(dir) {
                Ok(meta) if meta.is_dir() && meta.uid() == uid && meta.mode() & 0o022 == 0 => {}
                Ok(_) => return Err(LeaseError::NotPrivate { path: dir.clone() }),
                Err(e) if e.kind() == io::ErrorKind::NotFound && !required => return Ok(false),
                Err(source) => {
                    return Err(LeaseError::Io {
                        doing: "read the lease directory",
                        path: dir.clone(),
                        source,
                    });
                }
            }
        }
        Ok(true)
    }
}

/// What a name in the lease directory is.
#[derive(Debug, PartialEq, Eq)]
enum Name {
    /// `lease-<pid>-<start>-<n>.json`, or any other `lease-*.json`.
    Lease,
    /// `lease-<pid>-<start>-<n>.json.tmp`: a lease being written by `holder`.
    Temporary(Holder),
    /// Not ours: left alone.
    Other,
}

impl Name {
    fn parse(name: &str) -> Name {
        let Some(rest) = name.strip_prefix("lease-") else {
            return Name::Other;
        };
        if rest.ends_with(".json") {
            return Name::Lease;
        }
        let Some(rest) = rest.strip_suffix(".json.tmp") else {
            return Name::Other;
        };
        let mut parts = rest.split('-');
        match (
            parts.next().and_then(|p| p.parse().ok()),
            parts.next().and_then(|p| p.parse().ok()),
        ) {
            (Some(pid), Some(start_time)) => Name::Temporary(Holder { pid, start_time }),
            _ => Name::Other,
        }
    }
}

/// What reading a lease file found.
enum Found {
    /// It was removed meanwhile (its holder released it, or another count swept it).
    Gone,
    /// Not a lease: a link, a pipe, a directory, too long, not a JSON object with a
    /// version, or a lease of this version that does not parse.
    NotALease,
    /// A lease of another version of `tdd`'s: neither counted nor removed, since this one
    /// cannot tell whether its holder lives.
    OtherVersion,
    /// A lease.
    Lease(LeaseRecord),
}

/// Reads the lease at `path` without following a link and without blocking on a pipe.
fn read_lease(path: &Path) -> Found {
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path);
    let file = match file {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Found::Gone,
        Err(_) => return Found::NotALease,
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Found::NotALease;
    }
    let mut bytes = Vec::new();
    if Read::take(file, MAX_LEASE_BYTES + 1)
        .read_to_end(&mut bytes)
        .is_err()
        || bytes.len() as u64 > MAX_LEASE_BYTES
    {
        return Found::NotALease;
    }
    let version = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|value| value.get("version").and_then(serde_json::Value::as_u64));
    match version {
        Some(v) if v == u64::from(LEASE_VERSION) => serde_json::from_slice(&bytes)
            .map(Found::Lease)
            .unwrap_or(Found::NotALease),
        Some(_) => Found::OtherVersion,
        None => Found::NotALease,
    }
}

/// Now, UTC RFC 3339 to the second.
fn now_rfc3339() -> String {
    let now = time::OffsetDateTime::now_utc();
    let now = now.replace_nanosecond(0).unwrap_or(now);
    now.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// A lease held: its file is removed when this is dropped.
#[derive(Debug)]
#[must_use = "a lease is released as soon as it is dropped"]
pub struct Lease {
    path: PathBuf,
    record: LeaseRecord,
}

impl Lease {
    /// The lease's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the lease says.
    pub fn record(&self) -> &LeaseRecord {
        &self.record
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        // Already gone when a count swept it (its holder died first): nothing to undo.
        let _ = fs::remove_file(&self.path);
    }
}

/// The core budget, the live leases and each holder's share, at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Survey {
    /// The lease directory read.
    pub dir: PathBuf,
    /// The cores shared.
    pub budget: Budget,
    /// The live leases, oldest first.
    pub leases: Vec<LeaseRecord>,
    /// What `{workers}` is now: [`share`] of the budget among the leases.
    pub workers: usize,
}

/// The budget and leases this process's environment names ([`Budget::from_env`],
/// [`LeaseDir::resolve`]).
pub fn survey() -> Result<Survey, LeaseError> {
    LeaseDir::resolve().survey(Budget::from_env()?)
}

/// What `{workers}` becomes now: the share of the budget among the live leases. Never
/// fails and never 0: a bad [`CORE_BUDGET_VAR`] (which the `tdd` commands refuse before
/// any runner starts) counts as the machine's parallelism, and a lease directory that
/// cannot be read as no lease (so every runner gets the budget, as before leases were
/// counted); both are logged.
pub fn workers() -> usize {
    let budget = Budget::from_env().unwrap_or_else(|err| {
        tracing::warn!(error = %err, "using the machine's parallelism as the core budget");
        Budget {
            cores: machine_cores(),
            from: BudgetSource::Machine,
        }
    });
    match LeaseDir::resolve().live() {
        Ok(leases) => share(budget.cores, leases.len()),
        Err(err) => {
            tracing::warn!(error = %err, "core leases not counted");
            share(budget.cores, 0)
        }
    }
}
