//! `LeafSpec`: what to run, with which environment and files, under which limits.
//!
//! A spec is plain data built by the caller. [`crate::Supervisor::launch`] validates
//! it and resolves it (absolute paths, default output files) into the job file the
//! supervisor process reads.

use std::collections::BTreeMap;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

/// The grace period between SIGTERM and SIGKILL when none is given.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// How often the supervisor writes its heartbeat and re-reads stop requests when no
/// interval is given.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(1);

/// A leaf to run. Nothing is inherited from the caller: the environment is exactly
/// the allow-list built here, stdin is `/dev/null` unless a file is given, and the
/// output goes to files (by default `stdout.log` and `stderr.log` in the leaf's
/// directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafSpec {
    pub(crate) argv: Vec<String>,
    pub(crate) name: Option<String>,
    pub(crate) cwd: Option<PathBuf>,
    pub(crate) env: BTreeMap<String, String>,
    pub(crate) id_env: Option<String>,
    pub(crate) stdin: Option<PathBuf>,
    pub(crate) stdout: Option<PathBuf>,
    pub(crate) stderr: Option<PathBuf>,
    pub(crate) merge_stderr: bool,
    pub(crate) wall_timeout: Option<Duration>,
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) max_output_bytes: Option<u64>,
    pub(crate) grace: Duration,
    pub(crate) heartbeat: Duration,
    pub(crate) sandbox: crate::records::Sandbox,
}

/// How strictly [`LeafSpec::sandbox`] confines a leaf.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confine {
    /// As far as the kernel allows; the level reached is recorded.
    AsFarAsPossible,
    /// Fully or not at all: a leaf that cannot be fully confined is not started.
    Fully,
}

impl LeafSpec {
    /// A spec for `argv` (program first) with no limits, an empty environment and the
    /// default grace period. The program is looked up on the leaf's own `PATH`, so add
    /// `PATH` to the environment or give an absolute path.
    pub fn new<I, S>(argv: I) -> LeafSpec
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        LeafSpec {
            argv: argv.into_iter().map(Into::into).collect(),
            name: None,
            cwd: None,
            env: BTreeMap::new(),
            id_env: None,
            stdin: None,
            stdout: None,
            stderr: None,
            merge_stderr: false,
            wall_timeout: None,
            idle_timeout: None,
            max_output_bytes: None,
            grace: DEFAULT_GRACE,
            heartbeat: DEFAULT_HEARTBEAT,
            sandbox: crate::records::Sandbox::Off,
        }
    }

    /// A human label shown by listings; it is part of the leaf id as well.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The leaf's working directory. Without one, the caller's current directory at
    /// launch is used (resolved to an absolute path before the supervisor starts).
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// Sets one variable in the leaf's environment.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// Copies each named variable from the caller's environment when it is set (and
    /// valid UTF-8); variables not named never reach the leaf.
    pub fn allow_env<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        for name in names {
            let name = name.as_ref();
            if let Ok(value) = std::env::var(name) {
                self.env.insert(name.to_owned(), value);
            }
        }
        self
    }

    /// Exports the leaf's id in its environment under `name`, so that what the leaf
    /// runs (a test command reporting back) can say which leaf it belongs to.
    pub fn id_env(mut self, name: impl Into<String>) -> Self {
        self.id_env = Some(name.into());
        self
    }

    /// Feeds this file to the leaf's stdin instead of `/dev/null`.
    pub fn stdin(mut self, path: impl Into<PathBuf>) -> Self {
        self.stdin = Some(path.into());
        self
    }

    /// Captures stdout into this file instead of `stdout.log` in the leaf directory.
    pub fn stdout(mut self, path: impl Into<PathBuf>) -> Self {
        self.stdout = Some(path.into());
        self
    }

    /// Captures stderr into this file instead of `stderr.log` in the leaf directory.
    pub fn stderr(mut self, path: impl Into<PathBuf>) -> Self {
        self.stderr = Some(path.into());
        self.merge_stderr = false;
        self
    }

    /// Sends stderr into the stdout file through the same pipe, so the two stay in the
    /// order the leaf wrote them.
    pub fn merge_stderr(mut self) -> Self {
        self.merge_stderr = true;
        self.stderr = None;
        self
    }

    /// Kills the leaf (`kill_stuck(wall_timeout)`) once it has run this long.
    pub fn wall_timeout(mut self, timeout: Duration) -> Self {
        self.wall_timeout = Some(timeout);
        self
    }

    /// Kills the leaf (`kill_stuck(idle_timeout)`) once neither stream has produced a
    /// byte for this long.
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = Some(timeout);
        self
    }

    /// Caps each output file at this many bytes; reaching it cuts the file (which then
    /// ends with a marker line) and kills the leaf (`kill_stuck(output_limit)`).
    pub fn max_output_bytes(mut self, bytes: u64) -> Self {
        self.max_output_bytes = Some(bytes);
        self
    }

    /// The time between SIGTERM to the leaf's group and SIGKILL.
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// How often the supervisor writes its heartbeat and re-reads stop and kill
    /// requests (requests made through this crate also wake it at once).
    pub fn heartbeat_interval(mut self, interval: Duration) -> Self {
        self.heartbeat = interval;
        self
    }

    /// Confines the leaf and everything it starts to `policy`. With
    /// [`Confine::Fully`], a leaf that cannot be fully confined here is not started: its
    /// exit is `spawn_failed` naming what is missing.
    pub fn sandbox(mut self, policy: tdd_sandbox::Policy, confine: Confine) -> Self {
        let require = confine == Confine::Fully;
        self.sandbox = crate::records::Sandbox::Confined { policy, require };
        self
    }

    /// Records that confinement was turned off by configuration (`disabled`).
    pub fn sandbox_disabled(mut self) -> Self {
        self.sandbox = crate::records::Sandbox::Disabled;
        self
    }

    /// How the leaf is to be confined.
    pub fn sandbox_mode(&self) -> &crate::records::Sandbox {
        &self.sandbox
    }

    /// The argument vector, program first.
    pub fn argv(&self) -> &[String] {
        &self.argv
    }

    /// Checks what can be checked before any process starts.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.argv.is_empty() || self.argv[0].is_empty() {
            return Err(String::from("the argument vector is empty"));
        }
        if self.heartbeat.is_zero() {
            return Err(String::from("the heartbeat interval is zero"));
        }
        if let Some(name) = &self.id_env
            && (name.is_empty() || name.contains('=') || name.contains('\0'))
        {
            return Err(format!("{name:?} cannot name an environment variable"));
        }
        if self.max_output_bytes == Some(0) {
            return Err(String::from("the maximum output is zero bytes"));
        }
        if let Some(name) = &self.name {
            let valid = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.';
            if name.is_empty() || name.len() > 64 || !name.chars().all(valid) {
                return Err(format!(
                    "the name {name:?} must be 1 to 64 letters, digits, '-', '_' or '.'"
                ));
            }
        }
        Ok(())
    }
}

/// Makes `path` absolute against `base` without touching the file system.
pub(crate) fn absolute(base: &Path, path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_allowed_variables_reach_the_spec() {
        let spec = LeafSpec::new(["true"]).allow_env(["PATH", "TDD_SURELY_UNSET_VARIABLE"]);
        assert!(spec.env.contains_key("PATH") || std::env::var("PATH").is_err());
        assert!(!spec.env.contains_key("TDD_SURELY_UNSET_VARIABLE"));
        assert!(!spec.env.contains_key("HOME"));
    }

    #[test]
    fn validation_rejects_empty_argv_and_bad_names() {
        assert!(LeafSpec::new(Vec::<String>::new()).validate().is_err());
        assert!(LeafSpec::new(["true"]).name("a/b").validate().is_err());
        assert!(LeafSpec::new(["true"]).name("dev-1.red").validate().is_ok());
        assert!(
            LeafSpec::new(["true"])
                .max_output_bytes(0)
                .validate()
                .is_err()
        );
    }
}
