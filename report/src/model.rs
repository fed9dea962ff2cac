//! The report's data: everything the page shows, serialisable, so the page embeds it
//! and `tdd report --json` prints the same.

use serde::Serialize;

/// One run as a reviewer reads it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunReport {
    /// The format of this data; raised when a field changes meaning.
    pub version: u32,
    /// The header figures.
    pub header: Header,
    /// The plan's steps.
    pub steps: Vec<Step>,
    /// Every leaf the run started, in the order started.
    pub leaves: Vec<Leaf>,
    /// Every suite or target run the engine made itself, in order.
    pub runs: Vec<SuiteRun>,
    /// Verdicts, refusals and reverts, placed in time.
    pub marks: Vec<Mark>,
    /// Tests by checkpoint.
    pub tests: TestDeltas,
    /// The evidence of every gate decision, and what weakens it.
    pub honesty: Vec<Evidence>,
}

/// What the report's header says.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Header {
    /// The issue number, for a conducted run.
    pub issue: Option<u64>,
    /// The issue's title, from the plan's first line when the conductor recorded none.
    pub title: Option<String>,
    /// The work tree's directory name.
    pub repository: String,
    /// The conduct id, for a conducted run.
    pub conduct: Option<String>,
    /// The engine run id.
    pub run_id: Option<String>,
    /// The work branch.
    pub branch: Option<String>,
    /// The commit the run started from.
    pub base: Option<String>,
    /// The last phase commit.
    pub head: Option<String>,
    /// The draft PR: its URL, or the local file.
    pub pr: Option<String>,
    /// `completed`, `bailed`, `stopped`, `abandoned` or `in progress`.
    pub outcome: String,
    /// Why it bailed or stopped, in words, and what to do.
    pub outcome_detail: Option<String>,
    /// The bail's cause (`verdict_missing`, ...), when it bailed.
    pub bail_cause: Option<String>,
    /// The plan contract (the plan's blob id) the run was started with.
    pub contract: Option<String>,
    /// The first event's time (RFC 3339).
    pub started_at: Option<String>,
    /// The last event's time (RFC 3339).
    pub ended_at: Option<String>,
    /// From the first event to the last, in milliseconds.
    pub wall_ms: u64,
    /// Tokens over every leaf that reported them.
    pub tokens: Tokens,
    /// Cost over every leaf that reported one; `None` when none did.
    pub cost_usd: Option<f64>,
    /// Leaves started.
    pub leaves: usize,
    /// Verdicts: accepted, rejected, and verdicts refused by the engine.
    pub verdicts: Tally,
    /// The ledger's seal.
    pub ledger: Seal,
}

/// Token counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tokens {
    /// Input tokens (not from a cache).
    pub input: u64,
    /// Input tokens read from the provider's cache.
    pub cache_read: u64,
    /// Input tokens written to the provider's cache.
    pub cache_write: u64,
    /// Output tokens.
    pub output: u64,
}

/// Verdicts counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    /// ACCEPTs.
    pub accept: usize,
    /// REJECTs.
    pub reject: usize,
    /// Verdicts the engine refused to record (no evidence, a second verdict).
    pub refused: usize,
}

/// What the ledger says of itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Seal {
    /// Events in the whole ledger.
    pub events: u64,
    /// The hash of the newest event.
    pub chain_head: Option<String>,
    /// Whether the whole chain verifies.
    pub verified: bool,
    /// The first problem, when it does not.
    pub problem: Option<String>,
}

/// One step of the plan.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Step {
    /// Its number (a plan cycle).
    pub n: u32,
    /// Its title.
    pub title: String,
    /// The tests that decide it.
    pub targets: Vec<String>,
    /// `closed`, `skipped`, or the phase it is in.
    pub state: String,
    /// Why it was skipped, when it was.
    pub skipped_because: Option<String>,
    /// Its phase commits, as `phase sha` (a rejected one that was undone included).
    pub commits: Vec<String>,
    /// Revise rounds its phases took.
    pub revisions: u32,
    /// Where its time went, once it was done.
    pub time: Option<StepTime>,
    /// What its developer leaves reported costing.
    pub cost_usd: Option<f64>,
    /// Notes and annotations recorded on it.
    pub notes: Vec<String>,
}

/// Where a done step's time went (the last conduct's share of it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct StepTime {
    /// From the step's first leaf to its close.
    pub total_ms: u64,
    /// In leaves.
    pub leaf_ms: u64,
    /// In the engine's gates.
    pub engine_ms: u64,
    /// Everything else (forge, git, bookkeeping).
    pub overhead_ms: u64,
}

/// One leaf.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Leaf {
    /// Its id.
    pub id: String,
    /// `planner`, `developer` or `verifier`.
    pub role: String,
    /// The provider that ran it (`claude`, `codex`, `scripted`, ...).
    pub provider: String,
    /// The version its CLI printed, when the provider runs a versioned CLI.
    pub cli_version: Option<String>,
    /// The model its command line names, when it names one.
    pub model: Option<String>,
    /// The step (0 for the planner).
    pub step: u32,
    /// The phase it worked on.
    pub phase: String,
    /// When it started and ended (RFC 3339); the end is missing while it runs.
    pub started_at: String,
    /// When it ended.
    pub ended_at: Option<String>,
    /// Its wall time, in milliseconds.
    pub duration_ms: Option<u64>,
    /// How it ended, in words.
    pub ended: Option<String>,
    /// How it ended, as its class (`exited`, `kill_stuck`, ...).
    pub exit_class: Option<String>,
    /// Whether it ended with exit code 0.
    pub ok: bool,
    /// Its confinement (`landlock-v7`, `none`, `disabled`).
    pub sandbox: Option<String>,
    /// Its tokens, when its CLI reported them.
    pub tokens: Option<Tokens>,
    /// Its cost, when its CLI reported one.
    pub cost_usd: Option<f64>,
    /// The files of its work directory it changed (added, changed, removed), as the
    /// bytes on disk showed them at its start and end; `None` where that was not
    /// recorded.
    pub touched: Option<Vec<String>>,
    /// Files of its phase the engine reverted (locked files it changed).
    pub reverted: Vec<String>,
    /// Its verdict, for a verifier.
    pub verdict: Option<String>,
}

/// One run of tests the engine made.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SuiteRun {
    /// The step (0 for the baseline).
    pub step: u32,
    /// What it was for: `baseline`, `red`, `green`, `refactor`, a refused attempt, or a
    /// verifier's own run.
    pub purpose: String,
    /// The project.
    pub project: String,
    /// When it started and ended (RFC 3339; the start is the end less its wall time).
    pub started_at: String,
    /// When it ended.
    pub ended_at: String,
    /// Its wall time.
    pub wall_ms: u64,
    /// Tests that ran, passed and failed.
    pub total: u64,
    /// Passed.
    pub passed: u64,
    /// Failed or errored.
    pub failed: u64,
}

/// A point in time the timeline marks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Mark {
    /// The step.
    pub step: u32,
    /// `accept`, `reject`, `refused`, `reverted`, `verdict_refused`, `hook_denied`,
    /// `dependencies`.
    pub kind: String,
    /// When (RFC 3339).
    pub at: String,
    /// What happened, in words.
    pub text: String,
}

/// Tests by checkpoint: the baseline, then each phase the engine accepted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TestDeltas {
    /// The checkpoints, in order (`baseline`, `1 red`, `1 green`, ...).
    pub checkpoints: Vec<String>,
    /// One row per test.
    pub rows: Vec<TestRow>,
}

/// One test across the checkpoints.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TestRow {
    /// The test id (`project::native id`).
    pub id: String,
    /// Its outcome at each checkpoint: `passed`, `failed`, `skipped`, `error`, or empty
    /// where that checkpoint did not run it.
    pub cells: Vec<String>,
    /// `new`, `deleted` or `newly skipped`, when it changed so.
    pub change: Option<String>,
}

/// One piece of evidence for (or against) a gate decision.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Evidence {
    /// The step (0 for the run as a whole).
    pub step: u32,
    /// The phase, when it is about one.
    pub phase: String,
    /// What kind of evidence: `gate`, `sensitivity`, `refusal`, `revert`, `verdict`,
    /// `warning`, `ledger`.
    pub kind: String,
    /// Whether it supports trusting the run.
    pub ok: bool,
    /// What it says, in words.
    pub text: String,
}
