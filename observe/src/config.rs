//! What `tdd.toml` says about how a project's tests run: the `[project.NAME]` tables.
//!
//! These are the types an observation reads ([`crate::Project`] holds a
//! [`ProjectConfig`]). The whole file (`Config`, with its artifacts, conductor and
//! provider tables, its parsing and its `file:line:column` errors) belongs to the engine,
//! which embeds these tables unchanged, so their serde shape is the file's shape: unknown
//! keys are rejected and every default below is the documented one.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::Serialize;

/// The test runner a project's suite is observed through.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum AdapterKind {
    /// pytest, read through `--junitxml`.
    Pytest,
    /// vitest, read through its JSON reporter.
    Vitest,
    /// jest, read through `--json --outputFile`.
    Jest,
    /// `go test -json`.
    Go,
    /// cargo-nextest or `cargo test`.
    Cargo,
    /// mocha's JSON reporter.
    Mocha,
    /// node's built-in test runner with the JUnit reporter.
    NodeTest,
    /// Any command that writes JUnit XML to `{report}`.
    Junit,
}

impl AdapterKind {
    /// Every adapter, in documentation order.
    pub const ALL: [AdapterKind; 8] = [
        AdapterKind::Pytest,
        AdapterKind::Vitest,
        AdapterKind::Jest,
        AdapterKind::Go,
        AdapterKind::Cargo,
        AdapterKind::Mocha,
        AdapterKind::NodeTest,
        AdapterKind::Junit,
    ];

    /// The name used in `tdd.toml`.
    pub fn as_str(self) -> &'static str {
        match self {
            AdapterKind::Pytest => "pytest",
            AdapterKind::Vitest => "vitest",
            AdapterKind::Jest => "jest",
            AdapterKind::Go => "go",
            AdapterKind::Cargo => "cargo",
            AdapterKind::Mocha => "mocha",
            AdapterKind::NodeTest => "node-test",
            AdapterKind::Junit => "junit",
        }
    }
}

impl std::fmt::Display for AdapterKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

fn default_root() -> String {
    ".".to_string()
}

fn default_true() -> bool {
    true
}

fn default_timeout() -> u64 {
    1800
}

/// One `[project.NAME]` table.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProjectConfig {
    /// The project root relative to the work-tree root.
    #[serde(default = "default_root")]
    pub root: String,
    /// The runner the suite is observed through.
    pub adapter: AdapterKind,
    /// Globs (relative to `root`) of test files.
    #[serde(default)]
    pub test_paths: Vec<String>,
    /// Flags passed to the runner on every run, before tdd's own (mocha's `--ui tdd`).
    /// Read by the mocha and node-test adapters.
    #[serde(default)]
    pub runner_args: Vec<String>,
    /// Replaces the adapter's command; may hold `{workers}`, `{target}`, `{report}`.
    #[serde(default)]
    pub test_command: Option<String>,
    /// Replaces the adapter's collection command.
    #[serde(default)]
    pub collect_command: Option<String>,
    /// Lint commands run at close.
    #[serde(default)]
    pub lint: Vec<String>,
    /// Typecheck commands run at close.
    #[serde(default)]
    pub typecheck: Vec<String>,
    /// Extra environment for the runner.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Seconds before the runner's process group is killed.
    #[serde(default = "default_timeout")]
    pub timeout: u64,
    /// Whether the close sweep runs this suite.
    #[serde(default = "default_true")]
    pub in_close_sweep: bool,
    /// A named machine-wide exclusive lease (tdd-cli).
    #[serde(default)]
    pub lease: Option<String>,
    /// The largest share of failing tests a baseline may have (tdd-cli).
    #[serde(default)]
    pub baseline_max_failure_ratio: Option<f64>,
    /// A command that must succeed before a baseline (tdd-cli).
    #[serde(default)]
    pub health_command: Option<String>,
    /// Tests (ids or globs) known to fail at baseline: a baseline red only with these is
    /// accepted by `tdd conduct`, and entries matching no baseline failure are reported.
    #[serde(default)]
    pub known_failures: Vec<String>,
    /// Per-pattern suite overrides (tdd-cli's `[[project.NAME.override]]`).
    #[serde(default, rename = "override")]
    pub overrides: Vec<ProjectOverride>,
    /// Locks for this project only, replacing the top-level `[locks]`.
    #[serde(default)]
    pub locks: Option<LockConfig>,
}

impl ProjectConfig {
    /// A project of `adapter` with nothing configured: the root `.`, no paths, no
    /// command of its own, a timeout of one second. For parsing reports alone.
    pub(crate) fn bare(adapter: AdapterKind) -> ProjectConfig {
        ProjectConfig {
            root: ".".into(),
            adapter,
            test_paths: Vec::new(),
            runner_args: Vec::new(),
            test_command: None,
            collect_command: None,
            lint: Vec::new(),
            typecheck: Vec::new(),
            env: Default::default(),
            timeout: 1,
            in_close_sweep: true,
            lease: None,
            baseline_max_failure_ratio: None,
            health_command: None,
            known_failures: Vec::new(),
            overrides: Vec::new(),
            locks: None,
        }
    }
}

/// One `[[project.NAME.override]]` entry.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProjectOverride {
    /// Test-id glob the override applies to.
    pub pattern: String,
    /// Replacement test command.
    #[serde(default)]
    pub test_command: Option<String>,
    /// Replacement collection command.
    #[serde(default)]
    pub collect_command: Option<String>,
    /// Extra environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// A named exclusive lease.
    #[serde(default)]
    pub lease: Option<String>,
    /// Seconds before the runner is killed.
    #[serde(default)]
    pub timeout: Option<u64>,
}

/// Phase file locks: RED locks `impl`, GREEN and REFACTOR lock `test`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LockConfig {
    /// Implementation globs, locked during RED; `!` excludes.
    #[serde(default, rename = "impl")]
    pub impl_globs: Vec<String>,
    /// Test globs, locked during GREEN and REFACTOR; `!` excludes.
    #[serde(default, rename = "test")]
    pub test_globs: Vec<String>,
    /// Harness globs (the files that decide how tests run), relative to the work-tree
    /// root and locked for the whole run; `None` means the adapter's defaults.
    #[serde(default, rename = "harness", skip_serializing_if = "Option::is_none")]
    pub harness_globs: Option<Vec<String>>,
}
