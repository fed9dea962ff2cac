//! Observation of test suites (`tdd-observe`): a project's runner is run here,
//! its machine-readable report is read from a file this crate owns, and the result is
//! an [`Observation`]. The engine computes every phase decision from observations, so
//! this crate guarantees:
//!
//! - a compile error is never read as a failing test, and an import error is
//!   never read as an assertion failure;
//! - zero tests is never green and never a valid red;
//! - a missing, crashed, misused or timed-out runner is a `runner_error`,
//!   never red;
//! - console text is never scraped where the runner has a structured
//!   format (the one exception, Go before 1.24 printing build errors on
//!   stderr, is documented in the go adapter).
//!
//! Use [`adapter_for`] to get the [`Adapter`] of a project, then
//! [`Adapter::run`], [`Adapter::collect`] or [`observe_target`]. A project's
//! `[project.NAME]` table is [`config::ProjectConfig`].
//!
//! The crate depends on no other crate of the workspace: it knows nothing of runs,
//! phases, the ledger or git.

pub use tdd_sandbox as sandbox;

mod adapters;
mod build;
mod build_dir;
mod cargo_messages;
mod clip;
mod command;
pub mod config;
mod error;
mod exec;
mod gostream;
pub mod hermetic;
mod jsonreport;
mod junit;
pub mod lease;
mod model;
#[doc(hidden)]
pub mod parsers;
mod probe;
mod process;
pub mod progress;
mod target;

use std::path::Path;
use std::path::PathBuf;

/// Set to a sandbox policy (JSON), every runner this process starts is confined by it:
/// how a command run on a confined leaf's behalf keeps the leaf's code confined.
pub const RUNNER_SANDBOX_VAR: &str = "TDD_RUNNER_SANDBOX";

/// Tokens for a forge (GitHub, GitLab) or for pushing: never in the environment of a
/// process that runs project code, nor of a leaf.
pub const FORGE_TOKENS: &[&str] = &[
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GITHUB_PAT",
    "GH_ENTERPRISE_TOKEN",
    "GITHUB_ENTERPRISE_TOKEN",
    "GITLAB_TOKEN",
    "TDD_FORGE_TOKEN",
    "TDD_GIT_TOKEN",
];

/// What kind of entry `kind` is, in words (`a named pipe`, `a directory`, ...), as a
/// message names what stands where a file belongs.
pub fn kind_in_words(kind: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a named pipe"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_block_device() || kind.is_char_device() {
        "a device"
    } else {
        "a regular file"
    }
}

/// Whether a variable is withheld from every runner, whatever the caller's environment
/// or the project's `env` says: a leaf's identity and token, the engine relay's
/// address, the runner policy, the ledger's location and every other `TDD_` variable,
/// and the forge tokens. Project code never learns who asked for the run or how to
/// reach the engine in that caller's name.
pub fn withheld_from_runners(name: &str) -> bool {
    name.starts_with("TDD_") || FORGE_TOKENS.contains(&name)
}

pub use adapters::adapter_for;
pub use error::ObserveError;
pub use error::ReportError;
pub use exec::prepare_runners;
pub use exec::read_regular_file;
pub use exec::run_shell;
pub use model::Collection;
pub use model::CollectionError;
pub use model::Exit;
pub use model::Failure;
pub use model::FailureKind;
pub use model::Invocation;
pub use model::Observation;
pub use model::Outcome;
pub use model::RunnerCounts;
pub use model::TargetStatus;
pub use model::TargetVerdict;
pub use model::TestResult;
pub use model::Totals;
pub use probe::PROBE_TIMEOUT;
pub use probe::Probe;
pub use target::Partial;
pub use target::TargetKey;
pub use target::lookup;

use crate::config::AdapterKind;
use crate::config::ProjectConfig;

/// A project as the observation layer sees it: its name, its absolute root
/// and its `[project.NAME]` table.
#[derive(Debug, Clone)]
pub struct Project {
    /// The name in `tdd.toml`; the prefix of every test id.
    pub name: String,
    /// The canonical absolute project root; runners start here.
    pub root: PathBuf,
    /// The project's configuration.
    pub config: ProjectConfig,
    /// When set, runs see only these pinned variables (plus the project's `env`) instead of
    /// the caller's environment: see [`hermetic`].
    pub hermetic: Option<std::sync::Arc<hermetic::PinnedEnv>>,
    /// When set, every runner of the project is confined by this policy, to which each
    /// run adds its own scratch directory and private `TMPDIR`: see [`Project::confined`].
    pub confinement: Option<std::sync::Arc<tdd_sandbox::Policy>>,
}

impl Project {
    /// Resolves `config.root` against the work-tree root.
    pub fn new(
        worktree: &Path,
        name: &str,
        config: ProjectConfig,
    ) -> Result<Project, ObserveError> {
        let path = worktree.join(&config.root);
        let root = path
            .canonicalize()
            .map_err(|source| ObserveError::BadRoot { path, source })?;
        Ok(Project {
            name: name.to_string(),
            root,
            config,
            hermetic: None,
            confinement: None,
        })
    }

    /// The same project, whose runners are confined by `policy` (Landlock where the
    /// kernel has it): project code then writes only what `policy` grants plus the run's
    /// own scratch directory, which is also its `TMPDIR`. The level each runner got is
    /// recorded in its [`Invocation`].
    pub fn confined(mut self, policy: tdd_sandbox::Policy) -> Project {
        self.confinement = Some(std::sync::Arc::new(policy));
        self
    }

    /// The same project, whose runs see only `env` instead of the caller's environment.
    pub fn hermetic(mut self, env: std::sync::Arc<hermetic::PinnedEnv>) -> Project {
        self.hermetic = Some(env);
        self
    }

    /// A variable of the environment the project's runs inherit: the caller's, or the
    /// pinned one for a hermetic project.
    pub(crate) fn inherited(&self, key: &str) -> Option<String> {
        match &self.hermetic {
            Some(env) => env.vars.get(key).cloned(),
            None => std::env::var(key).ok(),
        }
    }

    /// The runner-native id of `target`, which may be project-qualified.
    pub fn native_id<'a>(&self, target: &'a str) -> Result<&'a str, ObserveError> {
        let native = target
            .strip_prefix(self.name.as_str())
            .and_then(|rest| rest.strip_prefix("::"))
            .unwrap_or(target);
        if native.trim().is_empty() {
            return Err(ObserveError::BadTarget {
                target: target.to_string(),
                project: self.name.clone(),
            });
        }
        // Ids go on the runner's command line: one that begins with `-` would be read
        // as an option (a plugin to load, another root), never as a test.
        if native.starts_with('-') {
            return Err(ObserveError::OptionTarget {
                target: target.to_string(),
            });
        }
        Ok(native)
    }
}

/// Which tests a run executes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// The whole suite.
    All,
    /// These runner-native test ids only.
    Tests(Vec<String>),
    /// The whole suite except these runner-native ids, whose results the caller already
    /// holds from a run of their own. An adapter whose runner cannot deselect by id runs
    /// the whole suite; either way every other test runs, and zero tests left is not a
    /// runner error (the caller adds its own results).
    AllExcept(Vec<String>),
}

/// One test runner behind a uniform contract.
pub trait Adapter: Send + Sync {
    /// The adapter's name in `tdd.toml`.
    fn kind(&self) -> AdapterKind;

    /// Lists the project's tests without running them. Where the runner
    /// allows, files are collected so that one file failing to import is a
    /// collection error of that file and does not hide the others.
    fn collect(&self, project: &Project) -> Result<Collection, ObserveError>;

    /// Runs the selected tests and observes what they did.
    fn run(&self, project: &Project, selection: &Selection) -> Result<Observation, ObserveError>;

    /// The runner-native command-line arguments that select exactly the
    /// test `native_id` (plus, for some runners, same-named siblings, which
    /// the observation then also reports).
    fn select(&self, project: &Project, native_id: &str) -> Vec<String>;

    /// How `native_id` relates to collected ids and collection scopes.
    fn target_key(&self, project: &Project, native_id: &str) -> TargetKey;

    /// The language's idiom for a stub body that fails loudly when called.
    fn stub_hint(&self) -> &'static str;

    /// The command that asks this project's runner for its version, starting it the way
    /// [`Adapter::run`] does.
    fn version_command(&self, project: &Project) -> Vec<String>;

    /// Asks the runner for its version as [`Adapter::run`] would start it (what `tdd
    /// doctor` reports), under [`PROBE_TIMEOUT`].
    fn probe(&self, project: &Project) -> Probe {
        probe::run_version(project, self.version_command(project))
    }
}

/// Runs `target` alone and answers its single status.
///
/// Collection runs only when the run alone cannot tell: when the target is
/// absent from the results (unknown id, deselected, or the runner failed).
pub fn observe_target(
    adapter: &dyn Adapter,
    project: &Project,
    target: &str,
) -> Result<(Observation, TargetVerdict), ObserveError> {
    let native = project.native_id(target)?.to_string();
    let observation = adapter.run(project, &Selection::Tests(vec![native.clone()]))?;
    let key = adapter.target_key(project, &native);
    let first = lookup(&observation, None, &key);
    let needs_collection = match first.status {
        TargetStatus::NotFound => true,
        // A runner that chokes on an unknown id (pytest exit 4) must read as
        // not_found, so an absent target is checked against the collection.
        TargetStatus::RunnerError => !observation.tests.contains_key(&key.id),
        _ => false,
    };
    let verdict = if needs_collection {
        let collection = adapter.collect(project)?;
        lookup(&observation, Some(&collection), &key)
    } else {
        first
    };
    Ok((observation, verdict))
}
