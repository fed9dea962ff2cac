//! The observation model: what one suite run observably did.
//!
//! Every field here is computed by the engine from the runner's exit status
//! and its machine-readable report; nothing is taken from a leaf's claims.
//! The types serialise to JSON with `snake_case` names so the ledger and the
//! CLI envelope can store and print them unchanged.

use std::collections::BTreeMap;
use std::collections::BTreeSet;

use serde::Deserialize;
use serde::Serialize;

use crate::config::AdapterKind;

/// The outcome of one test in one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The test ran and passed.
    Passed,
    /// The test ran and failed (an assertion, an exception or a runner timeout).
    Failed,
    /// The runner reports the test as skipped, pending, ignored or todo.
    Skipped,
    /// The test could not run: setup, collection or compilation failed.
    Error,
}

/// Why a test (or a file) failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// An assertion in the test did not hold.
    Assertion,
    /// The test raised, threw or panicked for another reason.
    Exception,
    /// The test's file failed to import or load.
    Collection,
    /// The test's file, package or crate failed to compile.
    Compile,
    /// The runner stopped the test for exceeding its own per-test time limit.
    Timeout,
}

/// The failure of one test: its kind and the runner's message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// What kind of failure the report shows.
    pub kind: FailureKind,
    /// The runner's failure message, clipped to a readable excerpt.
    pub message: String,
}

/// What one test did in one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestResult {
    /// The observed outcome.
    pub outcome: Outcome,
    /// Present exactly when `outcome` is `failed` or `error`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
}

/// A file, package or crate that failed before any of its tests could run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectionError {
    /// The scope that failed: a file path, a Go package or a Cargo binary id.
    pub scope: String,
    /// `collection` for import/load errors, `compile` for build errors.
    pub kind: FailureKind,
    /// The runner's or compiler's message, clipped.
    pub message: String,
}

/// How a runner process ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Exit {
    /// The process exited with this code.
    Code {
        /// The exit code.
        code: i32,
    },
    /// The process was ended by a signal we did not send.
    Signal {
        /// The signal number.
        signal: i32,
    },
    /// We killed the process group after the project's timeout.
    TimedOut {
        /// The timeout that expired, in seconds.
        after_seconds: u64,
    },
    /// The process could not be started at all.
    NotStarted {
        /// Why spawning failed.
        message: String,
    },
}

/// One runner process the engine started for an observation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Invocation {
    /// The exact argument vector (a user `test_command` shows as `sh -c ...`).
    pub argv: Vec<String>,
    /// How the process ended.
    pub exit: Exit,
    /// Wall time measured by the engine from spawn to reap, in milliseconds.
    pub wall_ms: u64,
    /// SHA-256 of the raw report bytes, when a report was written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report_sha256: Option<String>,
    /// Standard output, clipped keeping head and tail.
    pub stdout: String,
    /// Standard error, clipped keeping head and tail.
    pub stderr: String,
    /// The confinement the runner got (`landlock-v7`, `landlock-v3-partial`, `none`),
    /// when it was started under a policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
}

/// Counts computed by the engine from the per-test map.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    /// Tests in the outcome map.
    pub total: u64,
    /// Tests that passed.
    pub passed: u64,
    /// Tests that failed.
    pub failed: u64,
    /// Tests that were skipped.
    pub skipped: u64,
    /// Tests that errored.
    pub errors: u64,
}

/// The counts the runner itself reported, kept to cross-check ours.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunnerCounts {
    /// Tests the runner says it knew about.
    pub tests: Option<u64>,
    /// Tests the runner says passed.
    pub passed: Option<u64>,
    /// Tests the runner says failed.
    pub failed: Option<u64>,
    /// Tests the runner says it skipped.
    pub skipped: Option<u64>,
    /// Tests (or suites) the runner says errored.
    pub errors: Option<u64>,
}

/// Everything the engine observed about one suite run of one project.
///
/// Guarantees: test ids are `project::native-id`; `runner_error` is set
/// whenever the run cannot be trusted (runner missing, crashed, usage error,
/// timed out, unreadable report, or zero tests and no collection error);
/// `totals` always agree with `tests`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// The project name from `tdd.toml`.
    pub project: String,
    /// The adapter that produced the observation.
    pub adapter: AdapterKind,
    /// The runner processes started, in order; usually one.
    pub invocations: Vec<Invocation>,
    /// Total wall time of all invocations, measured by the engine.
    pub wall_ms: u64,
    /// Outcome per project-qualified test id.
    pub tests: BTreeMap<String, TestResult>,
    /// Files, packages or crates that failed to load or compile.
    pub collection_errors: Vec<CollectionError>,
    /// Counts over `tests`.
    pub totals: Totals,
    /// The runner's own counts, when its report carries them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runner_counts: Option<RunnerCounts>,
    /// Why this run could not be observed, if it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runner_error: Option<String>,
    /// Records of the runner's report that could not be read and were skipped;
    /// every other record was still observed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diagnostics: Vec<String>,
}

impl Observation {
    /// True only when tests ran, every one passed or was skipped, nothing
    /// failed to collect and the runner is trusted. Zero tests is never green.
    pub fn is_green(&self) -> bool {
        self.runner_error.is_none()
            && self.collection_errors.is_empty()
            && self.totals.passed > 0
            && self.totals.failed == 0
            && self.totals.errors == 0
    }

    /// This run completed with the tests of `earlier` that it did not run itself (the
    /// targets a [`crate::Selection::AllExcept`] run left out): the union a whole-suite run
    /// would have reported. A test both ran keeps this run's result; totals are recounted.
    /// Invocations and wall time stay this run's own.
    pub fn with_results_of(mut self, earlier: &Observation) -> Observation {
        for (id, result) in &earlier.tests {
            self.tests
                .entry(id.clone())
                .or_insert_with(|| result.clone());
        }
        self.totals = crate::build::totals(&self.tests);
        self
    }

    /// The ids of tests that failed or errored, in id order.
    pub fn failing(&self) -> Vec<&str> {
        self.tests
            .iter()
            .filter(|(_, r)| matches!(r.outcome, Outcome::Failed | Outcome::Error))
            .map(|(id, _)| id.as_str())
            .collect()
    }
}

/// The tests a runner reports without running them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Collection {
    /// Project-qualified ids of collected tests.
    pub ids: BTreeSet<String>,
    /// Files, packages or crates that failed to load or compile.
    pub errors: Vec<CollectionError>,
    /// Why collection could not be observed, if it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runner_error: Option<String>,
    /// The runner processes started.
    pub invocations: Vec<Invocation>,
}

/// What the engine concluded about one target test. Exactly one applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetStatus {
    /// The target ran and passed.
    Passed,
    /// The target ran and an assertion failed: the only valid red outside
    /// compiled languages.
    FailedAssertion,
    /// The target failed for another reason: an exception, a runner timeout
    /// of the test, or its file failing to import.
    FailedError,
    /// The target's file, package or crate does not compile.
    CompileError,
    /// The target is not among the collected tests.
    NotFound,
    /// The target is collected but did not run (skipped or deselected).
    NotRun,
    /// The runner could not be observed: missing, crashed, misused or timed out.
    RunnerError,
}

/// The answer of a target lookup, with the evidence behind it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetVerdict {
    /// The project-qualified target id.
    pub id: String,
    /// The single status that applies.
    pub status: TargetStatus,
    /// The failure message, collection error or runner error behind the status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// For a partial target (a file, a class, a name without its package or
    /// binary): the project-qualified ids of the tests it matched.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub matched: Vec<String>,
}
