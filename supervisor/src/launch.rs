//! The caller's side of supervision: configuring the supervisor program, launching
//! leaves, opening and listing them, and stop requests.
//!
//! A launch writes the job file into a fresh leaf directory, starts the supervisor
//! program on it, and returns once the supervisor has recorded either the leaf's
//! launch or why it could not start it. From then on the leaf does not depend on the
//! caller: the caller may exit, and any process may open the leaf by id.

use std::ffi::OsString;
use std::fs;
use std::fs::File;
use std::hash::BuildHasher;
use std::io;
use std::path::Path;
use std::path::PathBuf;
use std::process::Command;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use time::OffsetDateTime;
use time::macros::format_description;

use crate::class::ExitClass;
use crate::clock;
use crate::error::LaunchError;
use crate::error::LeafError;
use crate::error::StopError;
use crate::handle::Backoff;
use crate::handle::LeafHandle;
use crate::list::LeafSummary;
use crate::records;
use crate::records::ExitRecord;
use crate::records::Job;
use crate::records::LeafDir;
use crate::report::NoopReporter;
use crate::report::Reporter;
use crate::spec::LeafSpec;
use crate::spec::absolute;
use crate::stop;
use crate::stop::StopMode;
use crate::stop::StopRequest;

/// How long `launch` waits for the supervisor to record a launch when not told.
pub const DEFAULT_LAUNCH_TIMEOUT: Duration = Duration::from_secs(30);

/// Launches and finds leaves in one state directory.
///
/// The state directory holds `stop.json` and `leaves/<id>/`. The supervisor program
/// is the caller's own binary in an internal mode: `program args... <leaf-dir>` must
/// end up calling [`crate::run_supervisor`] with that directory.
pub struct Supervisor {
    state_dir: PathBuf,
    program: PathBuf,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    reporter: Arc<dyn Reporter>,
    launch_timeout: Duration,
}

impl Supervisor {
    /// A supervisor for `state_dir`, started as `program args... <leaf-dir>`. The state
    /// directory is made absolute against the current directory at each launch.
    pub fn new<I, S>(state_dir: impl Into<PathBuf>, program: impl Into<PathBuf>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Supervisor {
            state_dir: state_dir.into(),
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            env: Vec::new(),
            reporter: Arc::new(NoopReporter),
            launch_timeout: DEFAULT_LAUNCH_TIMEOUT,
        }
    }

    /// Where caller-side events go (a lost supervisor's exit). The supervisor process
    /// has its own reporter, given to [`crate::run_supervisor`].
    pub fn reporter(mut self, reporter: Arc<dyn Reporter>) -> Self {
        self.reporter = reporter;
        self
    }

    /// Sets a variable in the supervisor process's environment, which is otherwise
    /// empty. The leaf never sees it: the leaf's environment is its spec's alone.
    pub fn supervisor_env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// How long `launch` waits for the supervisor process to record the launch.
    pub fn launch_timeout(mut self, timeout: Duration) -> Self {
        self.launch_timeout = timeout;
        self
    }

    /// The state directory as configured.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// The directory holding one directory per leaf.
    pub fn leaves_dir(&self) -> PathBuf {
        self.state_dir.join("leaves")
    }

    /// Starts a supervised leaf. Returns once the leaf runs (`launch.json` exists) or
    /// is known not to (`exit.json` says `spawn_failed` or `stopped`). Refuses with
    /// [`LaunchError::StopPending`] while an `at-leaf` or `now` stop is pending.
    pub fn launch(&self, spec: &LeafSpec) -> Result<LeafHandle, LaunchError> {
        spec.validate()
            .map_err(|reason| LaunchError::InvalidSpec { reason })?;
        if let Some(stop) = stop::read_stop(&self.state_dir)
            && stop.mode.refuses_launch()
        {
            return Err(LaunchError::StopPending { mode: stop.mode });
        }
        let here = std::env::current_dir().map_err(|source| LaunchError::Prepare {
            path: PathBuf::from("."),
            source,
        })?;
        let state_dir = absolute(&here, &self.state_dir);
        let (id, dir) = create_leaf_dir(&state_dir.join("leaves"), spec.name.as_deref())?;
        let job = resolve(spec, &id, &state_dir, &here, &dir);
        records::write_json(&dir.job(), &job)?;
        let log_path = dir.supervisor_log();
        let log = File::create(&log_path).map_err(|source| LaunchError::Prepare {
            path: log_path.clone(),
            source,
        })?;
        let child = Command::new(&self.program)
            .args(&self.args)
            .arg(&dir.path)
            .env_clear()
            .envs(self.env.iter().map(|(key, value)| (key, value)))
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn();
        let child = match child {
            Ok(child) => child,
            Err(source) => {
                // Leave the directory consistent for listings: this leaf never ran.
                let class = ExitClass::SpawnFailed {
                    error: format!("failed to start the supervisor: {source}"),
                };
                let _ = records::create_json(&dir.exit(), &ExitRecord::without_run(&id, class, 0));
                let program = self.program.clone();
                return Err(LaunchError::SpawnSupervisor { program, source });
            }
        };
        let mut handle = LeafHandle::spawned(id, dir, job, Arc::clone(&self.reporter), child);
        self.await_launch(&mut handle, &log_path)?;
        Ok(handle)
    }

    /// Waits until the supervisor records the launch or an exit, or gives up.
    fn await_launch(&self, handle: &mut LeafHandle, log: &Path) -> Result<(), LaunchError> {
        let start = Instant::now();
        let deadline = start + self.launch_timeout;
        let mut backoff = Backoff::since(start);
        loop {
            if handle.dir_paths().launch().exists() || handle.dir_paths().exit().exists() {
                return Ok(());
            }
            if let Some(status) = handle.supervisor_exit_status() {
                if handle.dir_paths().exit().exists() {
                    return Ok(());
                }
                // It died before recording an exit: record the loss (killing the leaf
                // if it had been launched) and report the supervisor's failure.
                let launch = handle.launch_record().ok().flatten();
                let _ = handle.record_lost(launch.as_ref());
                return Err(LaunchError::SupervisorFailed {
                    status,
                    log: log.to_path_buf(),
                });
            }
            if Instant::now() >= deadline {
                handle.abandon_supervisor();
                return Err(LaunchError::SupervisorTimeout {
                    seconds: self.launch_timeout.as_secs(),
                    log: log.to_path_buf(),
                });
            }
            std::thread::sleep(backoff.next_pause());
        }
    }

    /// Opens an existing leaf by id, from any process.
    pub fn open(&self, id: &str) -> Result<LeafHandle, LeafError> {
        LeafHandle::open(&self.leaves_dir(), id, Arc::clone(&self.reporter))
    }

    /// Every leaf in the state directory, oldest first, with state and ages. Reading
    /// a leaf whose supervisor was lost records the loss and kills its tree.
    pub fn list(&self) -> Result<Vec<LeafSummary>, LeafError> {
        crate::list::list(&self.leaves_dir(), &self.reporter)
    }

    /// Records a stop request (the latest wins). For `now`, also wakes the supervisor
    /// of every running leaf so it kills its leaf at once rather than at its next
    /// heartbeat.
    pub fn request_stop(&self, mode: StopMode) -> Result<StopRequest, StopError> {
        let request = stop::request_stop(&self.state_dir, mode)?;
        if mode.kills_running()
            && let Ok(entries) = fs::read_dir(self.leaves_dir())
        {
            for entry in entries.flatten() {
                crate::unix::wake::poke(&LeafDir::new(entry.path()).wake());
            }
        }
        Ok(request)
    }

    /// The pending stop request; an unreadable one reads as `at-ledger`.
    pub fn read_stop(&self) -> Option<StopRequest> {
        stop::read_stop(&self.state_dir)
    }

    /// Removes the pending stop request; returns whether there was one.
    pub fn clear_stop(&self) -> Result<bool, StopError> {
        stop::clear_stop(&self.state_dir)
    }
}

/// Creates a new, uniquely named leaf directory, `<UTC time to the millisecond>-<4 hex>`
/// then `-<name>` if named, so that ids sort by creation time.
fn create_leaf_dir(leaves: &Path, name: Option<&str>) -> Result<(String, LeafDir), LaunchError> {
    let prepare = |source| LaunchError::Prepare {
        path: leaves.to_path_buf(),
        source,
    };
    fs::create_dir_all(leaves).map_err(prepare)?;
    let stamp = OffsetDateTime::now_utc()
        .format(format_description!(
            "[year][month][day]T[hour][minute][second].[subsecond digits:3]Z"
        ))
        .map_err(|error| prepare(io::Error::other(error)))?;
    let mut last_error = io::Error::other("no attempt made");
    for _ in 0..32 {
        let random = std::hash::RandomState::new().hash_one(Instant::now()) as u16;
        let id = match name {
            Some(name) => format!("{stamp}-{random:04x}-{name}"),
            None => format!("{stamp}-{random:04x}"),
        };
        let path = leaves.join(&id);
        match fs::create_dir(&path) {
            Ok(()) => return Ok((id, LeafDir::new(path))),
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => last_error = error,
            Err(error) => return Err(prepare(error)),
        }
    }
    Err(prepare(last_error))
}

/// The job file for a spec: every path absolute, defaults filled in.
fn resolve(spec: &LeafSpec, id: &str, state_dir: &Path, here: &Path, dir: &LeafDir) -> Job {
    let cwd = spec
        .cwd
        .as_deref()
        .map_or_else(|| here.to_path_buf(), |cwd| absolute(here, cwd));
    let stderr = match (&spec.stderr, spec.merge_stderr) {
        (_, true) => None,
        (Some(path), false) => Some(absolute(here, path)),
        (None, false) => Some(dir.default_stderr()),
    };
    let mut env = spec.env.clone();
    if let Some(name) = &spec.id_env {
        env.insert(name.clone(), id.to_owned());
    }
    let millis = |duration: Option<Duration>| duration.map(clock::millis);
    Job {
        version: records::FORMAT_VERSION,
        id: id.to_owned(),
        name: spec.name.clone(),
        state_dir: state_dir.to_path_buf(),
        argv: spec.argv.clone(),
        cwd,
        env,
        stdin: spec.stdin.as_deref().map(|path| absolute(here, path)),
        stdout: spec
            .stdout
            .as_deref()
            .map_or_else(|| dir.default_stdout(), |path| absolute(here, path)),
        stderr,
        wall_timeout_ms: millis(spec.wall_timeout),
        idle_timeout_ms: millis(spec.idle_timeout),
        max_output_bytes: spec.max_output_bytes,
        grace_ms: clock::millis(spec.grace),
        heartbeat_ms: clock::millis(spec.heartbeat).max(1),
        created_at: clock::now_rfc3339(),
        sandbox: spec.sandbox.clone(),
    }
}
