//! The typed shape of `tdd.toml`.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::Serialize;

use super::LockConfig;
use super::ProjectConfig;

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
    /// How `tdd conduct` confines its leaves.
    #[serde(default)]
    pub sandbox: SandboxConfig,
}

/// The `[sandbox]` table: confinement of the leaves `tdd conduct` starts.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SandboxConfig {
    /// Confine leaves and test runs (Landlock). On unless `false`, which is recorded as
    /// `disabled`; a missing `[sandbox]` table leaves it on.
    #[serde(default = "on")]
    pub enabled: bool,
    /// Refuse to start a leaf that cannot be fully confined on this kernel.
    #[serde(default)]
    pub require: bool,
    /// More paths no leaf may read (`~/` is the home directory), beside the
    /// credential files that are always denied.
    #[serde(default)]
    pub deny_read: Vec<String>,
    /// More paths a leaf may write (`~/` is the home directory): caches or state a
    /// provider's CLI needs.
    #[serde(default)]
    pub write: Vec<String>,
    /// Whether the suites tdd runs may reach the network. Off by default: each runs in
    /// a network namespace of its own with loopback only, where the kernel allows it.
    /// Leaves (the agent CLIs) keep the network their model API needs either way.
    #[serde(default)]
    pub network: bool,
    /// Processes and threads each leaf and each test run may have at once (counted in
    /// a user namespace of its own; the kernel exempts root). `0` is no bound.
    #[serde(default)]
    pub processes: Option<u64>,
    /// Data memory each process of a leaf or a test run may take, in MiB. `0` is no
    /// bound.
    #[serde(default)]
    pub memory_mb: Option<u64>,
    /// What a leaf's or a test run's private `TMPDIR` may hold, in MiB. `0` is no bound.
    #[serde(default)]
    pub tmp_mb: Option<u64>,
}

fn on() -> bool {
    true
}

impl Default for SandboxConfig {
    /// Confinement on, nothing more granted or denied, the default bounds.
    fn default() -> SandboxConfig {
        SandboxConfig {
            enabled: true,
            require: false,
            deny_read: Vec::new(),
            write: Vec::new(),
            network: false,
            processes: None,
            memory_mb: None,
            tmp_mb: None,
        }
    }
}

impl SandboxConfig {
    /// Processes a leaf or a test run may have when `processes` is not set.
    pub const DEFAULT_PROCESSES: u64 = 4096;
    /// Data memory per process, in MiB, when `memory_mb` is not set.
    pub const DEFAULT_MEMORY_MB: u64 = 16 * 1024;
    /// Private `TMPDIR` quota, in MiB, when `tmp_mb` is not set.
    pub const DEFAULT_TMP_MB: u64 = 2 * 1024;

    /// The bounds every leaf and every test run gets: the configured ones, else the
    /// defaults; a `0` leaves that resource unbounded.
    pub fn limits(&self) -> crate::observe::sandbox::Limits {
        let set =
            |value: Option<u64>, default: u64| Some(value.unwrap_or(default)).filter(|v| *v > 0);
        let mib = |value: Option<u64>, default: u64| {
            set(value, default).map(|v| v.saturating_mul(1 << 20))
        };
        crate::observe::sandbox::Limits {
            processes: set(self.processes, Self::DEFAULT_PROCESSES),
            memory: mib(self.memory_mb, Self::DEFAULT_MEMORY_MB),
            tmp: mib(self.tmp_mb, Self::DEFAULT_TMP_MB),
        }
    }
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
    /// Developer leaves of an agent CLI with hooks (Claude Code, Codex) run `tdd hook`
    /// before and after their tools, wired for that leaf's session only: a locked write
    /// is denied when it is tried, not reverted at the gate.
    #[serde(default = "default_hooks")]
    pub hooks: bool,
}

fn default_hooks() -> bool {
    true
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
            hooks: default_hooks(),
        }
    }
}

/// Built-in providers that cannot run a verifier: they have no read-only mode.
pub const NOT_VERIFIERS: &[&str] = &["aider"];

/// One `[provider.NAME]` table. For a built-in provider every key is optional and
/// adjusts it; any other table is a `command` provider and needs `command`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// The executable (for a built-in: instead of its usual name).
    #[serde(default)]
    pub command: Option<String>,
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
