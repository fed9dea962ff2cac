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

    /// A file with no name in the scratch directory, for a runner's output: only the
    /// descriptors of this process and of the runner reach it.
    pub(crate) fn capture(&self) -> std::io::Result<std::fs::File> {
        tempfile::tempfile_in(self.dir.path())
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
pub(crate) fn execute(project: &Project, scratch: &Scratch, mut job: Job<'_>) -> Ran {
    let _span = tracing::info_span!(
        "suite_run",
        project = project.name.as_str(),
        label = job.label,
        hermetic = project.hermetic.is_some(),
    )
    .entered();
    tracing::debug!(argv = ?job.argv, root = %project.root.display(), "runner started");
    let (stdout_file, stderr_file) = match (scratch.capture(), scratch.capture()) {
        (Ok(out), Ok(err)) => (out, err),
        (Err(e), _) | (_, Err(e)) => return not_captured(job, &e),
    };
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
    // A project's `env` may not hand project code an identity or a token either.
    env.extend(
        project
            .config
            .env
            .iter()
            .filter(|(k, _)| !crate::withheld_from_runners(k))
            .map(|(k, v)| (k.clone(), v.clone())),
    );
    env.extend(std::mem::take(&mut job.env));
    let confinement = match runner_confinement(project, scratch, &mut env) {
        Ok(confinement) => confinement,
        Err(e) => return not_captured(job, &e),
    };
    let live = Live::of(project.config.adapter, job.label);
    let beat = |elapsed| {
        progress::send(&Beat {
            project: &project.name,
            label: job.label,
            elapsed,
            tests_seen: live.and_then(|l| progress::seen(l, &stdout_file, &stderr_file)),
        });
    };
    // A hermetic run starts the interpreter pinned for its program's name, never the
    // shim `PATH` would find now (unless the project's `env` brings its own PATH).
    if let Some(program) = project
        .hermetic
        .as_ref()
        .filter(|_| !project.config.env.contains_key("PATH"))
        .and_then(|pinned| pinned.interpreter(job.argv.first()?))
    {
        job.argv[0] = program.display().to_string();
    }
    let finished = process::run(&ProcessSpec {
        argv: &job.argv,
        cwd: job.cwd.unwrap_or(&project.root),
        env: &env,
        clear_env: project.hermetic.is_some(),
        timeout: Duration::from_secs(project.config.timeout.max(1)),
        stdout: &stdout_file,
        stderr: &stderr_file,
        confinement,
        tick: progress::interval().map(|every| (every, &beat as &dyn Fn(Duration))),
    });
    tracing::info!(exit = ?finished.exit, wall_ms = finished.wall_ms, "runner ended");
    let stdout = read_capped(&stdout_file).unwrap_or_default();
    let stderr = read_capped(&stderr_file).unwrap_or_default();
    let report = match &job.report {
        ReportAt::File(path) => read_regular_file(path),
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
        sandbox: finished.sandbox,
    };
    Ran {
        invocation,
        report,
        stderr,
    }
}

/// Runs `command` through `sh -c` in `cwd` as one of `project`'s runners: with its
/// environment (no identity or token, the run's pinned variables when hermetic), its
/// confinement, its timeout, and its output captured in files with no name, so that
/// nothing it starts outlives it or holds the engine waiting. For the commands a
/// project or an artifact declares beside its suite (lint, typecheck, an artifact's
/// check or regeneration), which are project code too.
pub fn run_shell(
    project: &Project,
    label: &str,
    command: &str,
    cwd: &Path,
) -> Result<Invocation, ObserveError> {
    let scratch = Scratch::new()?;
    let job = Job {
        label,
        argv: vec!["sh".into(), "-c".into(), command.into()],
        cwd: Some(cwd),
        report: ReportAt::Stdout,
        env: Vec::new(),
    };
    Ok(execute(project, &scratch, job).invocation)
}

/// The rules a runner of `project` gets, when the project is confined: its policy plus
/// the scratch directory, whose `tmp` becomes the runner's `TMPDIR` (set in `env`).
fn runner_confinement(
    project: &Project,
    scratch: &Scratch,
    env: &mut Vec<(String, String)>,
) -> std::io::Result<Option<tdd_sandbox::Confinement>> {
    let Some(policy) = &project.confinement else {
        return Ok(None);
    };
    let tmp = scratch.path("tmp");
    std::fs::create_dir_all(&tmp)?;
    env.push(("TMPDIR".into(), tmp.display().to_string()));
    let other = |e: tdd_sandbox::SandboxError| std::io::Error::other(e.to_string());
    with_rules(policy, |rules| {
        // Its TMPDIR is a memory file system of its own, of the policy's quota.
        rules
            .try_clone_writing(&scratch.path(""))
            .map(|rules| Some(rules.with_private_tmp(&tmp)))
            .map_err(other)
    })?
}

/// Builds the rules that confine `project`'s runners now, where they are not built yet,
/// so that its first run does not wait for them: for a caller with other work to do
/// before that run (the rules of a policy that denies paths beside many entries take
/// milliseconds to build). Rules built for a directory that is made anew before the run
/// are built again by the run, as are rules that could not be built here: the run
/// reports why.
pub fn prepare_runners(project: &Project) {
    if let Some(policy) = &project.confinement {
        let _ = with_rules(policy, |_| ());
    }
}

/// Rules built, each with the policy it was built for and the identity (device, inode)
/// of the directories that policy lets runners write, newest last.
type Prepared = (
    tdd_sandbox::Policy,
    Vec<Option<(u64, u64)>>,
    tdd_sandbox::Confinement,
);

/// How many policies' rules are kept: a gate starts its runners under one or two (one
/// per project it runs).
const RULES_KEPT: usize = 4;

/// Calls `with` on the rules of `policy`, built once per process and policy (a gate
/// starts several runners under the same one) and kept for the next run. Rules hold the
/// directories they name open, so a directory made anew since (a clean room rebuilt)
/// makes them anew too. One caller builds at a time: another waits for its rules rather
/// than building them again.
fn with_rules<T>(
    policy: &tdd_sandbox::Policy,
    with: impl FnOnce(&tdd_sandbox::Confinement) -> T,
) -> std::io::Result<T> {
    static PREPARED: std::sync::Mutex<Vec<Prepared>> = std::sync::Mutex::new(Vec::new());
    let identity: Vec<Option<(u64, u64)>> = policy
        .write
        .iter()
        .map(|p| {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
        })
        .collect();
    let mut prepared = PREPARED
        .lock()
        .map_err(|_| std::io::Error::other("the sandbox rules were poisoned"))?;
    let found = prepared
        .iter()
        .position(|(p, ids, _)| p == policy && *ids == identity);
    let at = match found {
        Some(at) => at,
        None => {
            let rules = tdd_sandbox::Confinement::prepare(policy)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            prepared.retain(|(p, _, _)| p != policy);
            if prepared.len() >= RULES_KEPT {
                prepared.remove(0);
            }
            prepared.push((policy.clone(), identity, rules));
            prepared.len() - 1
        }
    };
    Ok(with(&prepared[at].2))
}

/// The invocation of a job whose output could not even be captured.
fn not_captured(job: Job<'_>, error: &std::io::Error) -> Ran {
    let message = format!("failed to prepare `{}`: {error}", job.argv.join(" "));
    Ran {
        invocation: Invocation {
            argv: job.argv,
            exit: super::model::Exit::NotStarted { message },
            wall_ms: 0,
            report_sha256: None,
            stdout: String::new(),
            stderr: String::new(),
            sandbox: None,
        },
        report: None,
        stderr: Vec::new(),
    }
}

/// Up to [`READ_LIMIT`] bytes of `file` from its start, read at offsets (`pread`) so
/// that the offset a runner shares with this descriptor never moves.
pub(crate) fn read_capped(file: &std::fs::File) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    while (bytes.len() as u64) < READ_LIMIT {
        match file.read_at(&mut chunk, bytes.len() as u64) {
            Ok(0) => break,
            Ok(n) => {
                let keep = n.min(usize::try_from(READ_LIMIT).unwrap_or(usize::MAX) - bytes.len());
                bytes.extend_from_slice(&chunk[..keep]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some(bytes)
}

/// The file at `path` (at most 256 MiB of it), opened without following a link and
/// without blocking, and read only when it is a regular file: whoever can write the
/// directory (a runner, a leaf) cannot hand the engine a link to another file or a
/// named pipe instead. `None` for anything else.
pub fn read_regular_file(path: &Path) -> Option<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    read_capped(&file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(env: &[(&str, &str)]) -> crate::config::ProjectConfig {
        let mut table = String::from("adapter = \"pytest\"\n[env]\n");
        for (k, v) in env {
            table.push_str(&format!("{k} = {v:?}\n"));
        }
        toml::from_str(&table).expect("a project table")
    }

    #[test]
    fn a_project_env_never_hands_the_runner_an_identity_a_relay_or_a_forge_token() {
        let dir = tempfile::tempdir().expect("tempdir");
        let project = Project::new(
            dir.path(),
            "p",
            config(&[
                ("TDD_LEAF_TOKEN", "secret-token"),
                ("TDD_ENGINE_RELAY", "/run/relay.sock"),
                ("GITHUB_TOKEN", "ghp_x"),
                ("KEPT", "yes"),
            ]),
        )
        .expect("project");
        let scratch = Scratch::new().expect("scratch");
        let script = "echo \"[$TDD_LEAF_TOKEN][$TDD_ENGINE_RELAY][$GITHUB_TOKEN][$KEPT]\"";
        let ran = execute(
            &project,
            &scratch,
            Job {
                label: "env",
                argv: ["sh", "-c", script].map(String::from).to_vec(),
                cwd: None,
                report: ReportAt::Stdout,
                env: Vec::new(),
            },
        );
        assert_eq!(ran.invocation.stdout, "[][][][yes]\n");
    }

    #[test]
    fn rules_built_ahead_for_a_directory_made_anew_before_the_run_are_built_again() {
        // Without Landlock nothing is confined, so no rules are kept to go stale.
        if !tdd_sandbox::probe().confines() {
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let room = dir.path().join("room");
        std::fs::create_dir(&room).expect("room");
        let policy = tdd_sandbox::Policy {
            write: vec![room.clone()],
            ..tdd_sandbox::Policy::default()
        };
        let project = Project::new(&room, "p", config(&[]))
            .expect("project")
            .confined(policy);
        prepare_runners(&project);
        // Made anew between the rules built ahead and the run, as a reset that empties
        // the clean room makes its checkout.
        std::fs::rename(&room, dir.path().join("old room")).expect("move aside");
        std::fs::create_dir(&room).expect("anew");
        let ran = run_shell(&project, "write", "echo made > written", &room).expect("runs");
        assert_eq!(
            ran.exit,
            crate::model::Exit::Code { code: 0 },
            "{}",
            ran.stderr
        );
        assert_eq!(
            std::fs::read_to_string(room.join("written")).expect("written in the new room"),
            "made\n"
        );
    }

    #[test]
    fn a_report_behind_a_link_or_a_pipe_is_not_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "credential").expect("write");
        let link = dir.path().join("report.xml");
        std::os::unix::fs::symlink(&secret, &link).expect("link");
        assert_eq!(read_regular_file(&link), None);
        let fifo = dir.path().join("fifo.xml");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo");
        assert!(made.success());
        // Opened without blocking, and refused as no regular file.
        assert_eq!(read_regular_file(&fifo), None);
        assert_eq!(
            read_regular_file(&secret).as_deref(),
            Some(&b"credential"[..])
        );
    }
}
