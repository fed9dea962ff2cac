//! The typed shape of `tdd.toml`.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::Serialize;

/// Providers that exist without a `[provider.NAME]` table.
pub const BUILTIN_PROVIDERS: &[&str] = &["scripted", "claude", "codex", "aider", "command"];

/// A whole `tdd.toml`. Unknown keys anywhere are rejected.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Test projects by name; roots are declared, never discovered.
    #[serde(default)]
    pub project: BTreeMap<String, ProjectConfig>,
    /// Generated artifacts and their producer/consumer edges.
    #[serde(default)]
    pub artifact: BTreeMap<String, ArtifactConfig>,
    /// Phase file locks for every project.
    #[serde(default)]
    pub locks: LockConfig,
    /// Settings of `tdd conduct`.
    #[serde(default)]
    pub conductor: ConductorConfig,
    /// Agent providers by name.
    #[serde(default)]
    pub provider: BTreeMap<String, ProviderConfig>,
    /// Paths never counted as touched by a cycle (tdd-cli's top-level `ignore`).
    #[serde(default)]
    pub ignore: Vec<String>,
}

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

/// One `[artifact.NAME]` table.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ArtifactConfig {
    /// The artifact's path relative to the work-tree root.
    pub path: String,
    /// A project name or `artifact.<name>`.
    #[serde(default)]
    pub produced_by: Option<String>,
    /// The command that regenerates the artifact.
    #[serde(default)]
    pub regenerate: Option<String>,
    /// A command that exits non-zero when the artifact is stale.
    #[serde(default)]
    pub check: Option<String>,
    /// Projects (or artifacts) that consume the artifact.
    #[serde(default)]
    pub consumed_by: Vec<String>,
    /// Whether the path is generated (excluded from authorship accounting).
    #[serde(default)]
    pub generated: bool,
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

fn default_leaf_timeout() -> u64 {
    1800
}

fn default_idle_timeout() -> u64 {
    300
}

fn default_revise_budget() -> u32 {
    2
}

fn default_stuck_retries() -> u32 {
    1
}

fn default_branch_prefix() -> String {
    "tdd/issue-".to_string()
}

/// The `[conductor]` table.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ConductorConfig {
    /// The developer and planner provider.
    #[serde(default)]
    pub provider: Option<String>,
    /// The verifier provider; defaults to `provider`.
    #[serde(default)]
    pub verifier_provider: Option<String>,
    /// Wall-clock limit of one leaf, in seconds.
    #[serde(default = "default_leaf_timeout")]
    pub leaf_timeout_s: u64,
    /// Seconds of silence after which a leaf is killed as stuck.
    #[serde(default = "default_idle_timeout")]
    pub idle_timeout_s: u64,
    /// Revise rounds allowed per phase after a verifier REJECT.
    #[serde(default = "default_revise_budget")]
    pub revise_budget: u32,
    /// Retries of a leaf killed as stuck.
    #[serde(default = "default_stuck_retries")]
    pub stuck_retries: u32,
    /// Prefix of the work branch.
    #[serde(default = "default_branch_prefix")]
    pub branch_prefix: String,
    /// Work in a separate `git worktree` beside the repository instead of checking the
    /// work branch out in the user's work tree, which is then left untouched.
    #[serde(default)]
    pub worktree: bool,
}

impl Default for ConductorConfig {
    fn default() -> Self {
        ConductorConfig {
            provider: None,
            verifier_provider: None,
            leaf_timeout_s: default_leaf_timeout(),
            idle_timeout_s: default_idle_timeout(),
            revise_budget: default_revise_budget(),
            stuck_retries: default_stuck_retries(),
            branch_prefix: default_branch_prefix(),
            worktree: false,
        }
    }
}

/// One `[provider.NAME]` table.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// The executable.
    pub command: String,
    /// Arguments, which may hold placeholders the provider documents.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment variable names passed through to the leaf.
    #[serde(default)]
    pub env: Vec<String>,
    /// The model name passed to the agent CLI.
    #[serde(default)]
    pub model: Option<String>,
}
