//! Plan contracts: a markdown plan whose YAML front-matter declares the cycles.
//!
//! tdd-cli's vocabulary is accepted unchanged (`cycles`, `annotation_keys`,
//! `ancillary_files`; per cycle `n`, `project`/`projects`, `title`,
//! `test`/`tests`, `files`, `stub_expected`, `modifies_tests`, `commit_*`,
//! `pin_cycle`, `contract_cycle`, `refactor_cycle`, `meta`), plus `criterion`,
//! `harness` and `changes_dependencies`.
//! A contract is read from the committed blob, never the working copy, and is
//! identified by that blob's id and SHA-256.

mod contract;
mod raw;

use std::path::PathBuf;

use serde::Deserialize;
use serde::Serialize;

pub use contract::Contract;
pub use contract::read_committed;

/// The kind of a cycle, which decides its phases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CycleKind {
    /// One new test: AWAITING_TEST, AWAITING_IMPL, AWAITING_REFACTOR.
    Standard,
    /// Two or more tests that together pin a contract; phases as standard.
    Contract,
    /// A test of behaviour that already exists: AWAITING_PIN, SENSITIVITY_REQUIRED, ...
    Pin,
    /// No test; opens at AWAITING_REFACTOR.
    Refactor,
}

/// One validated cycle of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedCycle {
    /// The cycle number, unique within the plan.
    pub n: u32,
    /// What the cycle delivers.
    pub title: String,
    /// Which phases it goes through.
    pub kind: CycleKind,
    /// Projects the cycle reaches (at least one).
    pub projects: Vec<String>,
    /// Target test ids, as written (possibly project-qualified).
    pub tests: Vec<String>,
    /// The declared blast radius.
    pub files: Vec<String>,
    /// Files staged with RED as stubs.
    pub stub_expected: Vec<String>,
    /// Authorised test edits.
    pub modifies_tests: Vec<String>,
    /// Harness files (runner configs, manifests) this cycle may change.
    #[serde(default)]
    pub harness: Vec<String>,
    /// Whether the cycle installs, removes or upgrades dependencies: its gates then
    /// take what changed in the dependency directories and the dependencies' sources
    /// as the cycle's own (recorded as `dependencies_changed`), where any other cycle
    /// refuses it as `runner_changed`. The interpreter, the toolchains, the runners and
    /// the configuration chain stay pinned.
    #[serde(default)]
    pub changes_dependencies: bool,
    /// Commit messages the plan chose per phase.
    pub commit_red: Option<String>,
    /// See `commit_red`.
    pub commit_green: Option<String>,
    /// See `commit_red`.
    pub commit_refactor: Option<String>,
    /// See `commit_red`.
    pub commit_pin: Option<String>,
    /// The acceptance criterion the cycle covers.
    pub criterion: Option<String>,
    /// Opaque data, round-tripped.
    pub meta: serde_json::Value,
}

/// A validated plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Cycles sorted by `n`.
    pub cycles: Vec<PlannedCycle>,
    /// Annotation keys every cycle must carry before it closes.
    pub annotation_keys: Vec<String>,
    /// Files staged with GREEN/REFACTOR and exempt from undeclared-file accounting.
    pub ancillary_files: Vec<String>,
}

/// Why a plan was refused.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The plan has no `---` front-matter block.
    #[error("{}: no YAML front-matter (the file must start with a `---` line)", path.display())]
    NoFrontMatter {
        /// The plan file.
        path: PathBuf,
    },
    /// The front-matter is not valid YAML of the plan's shape.
    #[error("{}:{line}:{column}: {message}", path.display())]
    Malformed {
        /// The plan file.
        path: PathBuf,
        /// 1-based line in the plan file.
        line: u64,
        /// 1-based column.
        column: u64,
        /// What is wrong.
        message: String,
    },
    /// The front-matter parses but breaks a rule of the vocabulary.
    #[error("{}: {message}", path.display())]
    Invalid {
        /// The plan file.
        path: PathBuf,
        /// What is wrong, naming the cycle.
        message: String,
    },
    /// The plan is not committed at HEAD, or differs from its committed blob.
    #[error("{}: {why}", path.display())]
    Uncommitted {
        /// The plan file.
        path: PathBuf,
        /// Untracked, or modified since the last commit.
        why: String,
    },
    /// git failed.
    #[error(transparent)]
    Git(#[from] crate::git::GitError),
}

impl Plan {
    /// Parses and validates a plan; `known_projects` (when given) must contain every project.
    pub fn parse(
        path: &std::path::Path,
        text: &str,
        known_projects: Option<&[String]>,
    ) -> Result<Plan, PlanError> {
        raw::parse(path, text, known_projects)
    }
}

#[cfg(test)]
mod tests;
