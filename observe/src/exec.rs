//! Running a runner for an observation: scratch files, environment and
//! report capture shared by every adapter.

use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use sha2::Digest;

use super::Project;
use super::clip::OUTPUT_KEEP;
use super::clip::clip_bytes;
use super::error::ObserveError;
use super::model::Invocation;
use super::process;
use super::process::ProcessSpec;
use super::progress;
use super::progress::Beat;
use super::progress::Live;

/// Largest runner output or report the engine reads into memory (256 MiB).
const READ_LIMIT: u64 = 256 * 1024 * 1024;

/// A temporary directory owned by the engine for one observation: reports,
/// captured output and helper files live here and vanish with it.
#[derive(Debug)]
pub(crate) struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    /// Creates a fresh scratch directory.
    pub(crate) fn new() -> Result<Scratch, ObserveError> {
        let dir = tempfile::Builder::new()
            .prefix("tdd-observe-")
            .tempdir()
            .map_err(ObserveError::Scratch)?;
        Ok(Scratch { dir })
    }

    /// A path inside the scratch directory.
    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes a helper file (a plugin or a config) and returns its path.
    pub(crate) fn write(&self, name: &str, contents: &str) -> Result<PathBuf, ObserveError> {
        let path = self.path(name);
        std::fs::write(&path, contents).map_err(ObserveError::Scratch)?;
        Ok(path)
    }
}

/// Where the runner writes its machine-readable report.
#[derive(Debug, Clone)]
pub(crate) enum ReportAt {
    /// A file path the engine chose.
    File(PathBuf),
    /// The runner's standard output (go test -json, libtest json).
    Stdout,
}

/// One finished invocation with its raw report and full stderr.
#[derive(Debug)]
pub(crate) struct Ran {
    /// The record kept in the observation.
    pub invocation: Invocation,
    /// The raw report bytes, `None` when the runner wrote none.
    pub report: Option<Vec<u8>>,
    /// Standard error in full, for runners that report build errors there.
    pub stderr: Vec<u8>,
}

/// One process to run for an observation.
#[derive(Debug)]
pub(crate) struct Job<'a> {
    /// Distinguishes this invocation's files within the scratch directory.
    pub label: &'a str,
    /// The argument vector.
    pub argv: Vec<String>,
    /// Working directory; the project root when `None`.
    pub cwd: Option<&'a Path>,
    /// Where the report appears.
    pub report: ReportAt,
    /// Environment beyond the project's `env`.
    pub env: Vec<(String, String)>,
}

/// Runs `job` under the project's timeout and collects what it left behind.
pub(crate) fn execute(project: &Project, scratch: &Scratch, job: Job<'_>) -> Ran {
    let _span = tracing::info_span!(
        "suite_run",
        project = project.name.as_str(),
        label = job.label,
        hermetic = project.hermetic.is_some(),
    )
    .entered();
    tracing::debug!(argv = ?job.argv, root = %project.root.display(), "runner started");
    let stdout_path = scratch.path(&format!("{}.stdout", job.label));
    let stderr_path = scratch.path(&format!("{}.stderr", job.label));
    // Nothing is set for every runner: what a project's tests see is the
    // project's environment (for example its colour settings), plus only the
    // variables its adapter needs to observe it, each set in the adapter's
    // `Job` and listed in docs/engine.md.
    let mut env: Vec<(String, String)> = Vec::new();
    if let Some(pinned) = &project.hermetic {
        env.extend(pinned.vars.iter().map(|(k, v)| (k.clone(), v.clone())));
        // No bytecode is written next to the sources: the clean room never holds any
        // (it writes no `__pycache__` or `.pyc` of the tree and sweeps what a run left),
        // so no repository bytecode is ever read, while the interpreter's own cached
        // bytecode of installed packages still is.
        env.push(("PYTHONDONTWRITEBYTECODE".into(), "1".into()));
    }
    env.extend(
        project
            .config
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone())),
    );
    env.extend(job.env);
    let live = Live::of(project.config.adapter, job.label);
    let beat = |elapsed| {
        progress::send(&Beat {
            project: &project.name,
            label: job.label,
            elapsed,
            tests_seen: live.and_then(|l| progress::seen(l, &stdout_path, &stderr_path)),
        });
    };
    let finished = process::run(&ProcessSpec {
        argv: &job.argv,
        cwd: job.cwd.unwrap_or(&project.root),
        env: &env,
        clear_env: project.hermetic.is_some(),
        timeout: Duration::from_secs(project.config.timeout.max(1)),
        stdout: stdout_path.clone(),
        stderr: stderr_path.clone(),
        tick: progress::interval().map(|every| (every, &beat as &dyn Fn(Duration))),
    });
    tracing::info!(exit = ?finished.exit, wall_ms = finished.wall_ms, "runner ended");
    let stdout = read_capped(&stdout_path).unwrap_or_default();
    let stderr = read_capped(&stderr_path).unwrap_or_default();
    let report = match &job.report {
        ReportAt::File(path) => read_capped(path),
        ReportAt::Stdout => Some(stdout.clone()),
    };
    let invocation = Invocation {
        argv: job.argv,
        exit: finished.exit,
        wall_ms: finished.wall_ms,
        report_sha256: report
            .as_ref()
            .map(|bytes| hex::encode(sha2::Sha256::digest(bytes))),
        stdout: clip_bytes(&stdout, OUTPUT_KEEP),
        stderr: clip_bytes(&stderr, OUTPUT_KEEP),
    };
    Ran {
        invocation,
        report,
        stderr,
    }
}

fn read_capped(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let file = std::fs::File::open(path).ok()?;
    let mut bytes = Vec::new();
    file.take(READ_LIMIT).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}
