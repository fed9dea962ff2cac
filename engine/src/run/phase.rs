//! Phases and the closed set of next-action verbs.

use serde::Deserialize;
use serde::Serialize;

use crate::plan::CycleKind;

/// Where a cycle stands. Only `advance` (and `cycle skip`) change it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Phase {
    /// RED: a failing test is expected.
    AwaitingTest,
    /// GREEN: the implementation that makes the target pass is expected.
    AwaitingImpl,
    /// REFACTOR: restructuring under a green suite, or a plain advance.
    AwaitingRefactor,
    /// A pin test of existing behaviour is expected (it passes on arrival).
    AwaitingPin,
    /// The target passed on arrival; a sensitivity check must show it can fail.
    SensitivityRequired,
    /// Done.
    Closed,
    /// Skipped with a reason.
    Skipped,
}

impl Phase {
    /// The phase a cycle of `kind` opens at.
    pub fn initial(kind: CycleKind) -> Phase {
        match kind {
            CycleKind::Standard | CycleKind::Contract => Phase::AwaitingTest,
            CycleKind::Pin => Phase::AwaitingPin,
            CycleKind::Refactor => Phase::AwaitingRefactor,
        }
    }

    /// Whether the cycle is over.
    pub fn is_final(self) -> bool {
        matches!(self, Phase::Closed | Phase::Skipped)
    }

    /// The short name used in commit trailers: `red`, `green`, `refactor`, `pin`.
    pub fn trailer(self) -> &'static str {
        match self {
            Phase::AwaitingTest => "red",
            Phase::AwaitingImpl => "green",
            Phase::AwaitingRefactor => "refactor",
            Phase::AwaitingPin | Phase::SensitivityRequired => "pin",
            Phase::Closed => "closed",
            Phase::Skipped => "skipped",
        }
    }

    /// The verb an agent follows in this phase when nothing was refused.
    pub fn verb(self) -> Verb {
        match self {
            Phase::AwaitingTest | Phase::AwaitingPin => Verb::WriteTest,
            Phase::AwaitingImpl => Verb::WriteImplementation,
            Phase::AwaitingRefactor => Verb::RefactorOrAdvance,
            Phase::SensitivityRequired => Verb::RunSensitivityCheck,
            Phase::Closed | Phase::Skipped => Verb::Complete,
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = match self {
            Phase::AwaitingTest => "AWAITING_TEST",
            Phase::AwaitingImpl => "AWAITING_IMPL",
            Phase::AwaitingRefactor => "AWAITING_REFACTOR",
            Phase::AwaitingPin => "AWAITING_PIN",
            Phase::SensitivityRequired => "SENSITIVITY_REQUIRED",
            Phase::Closed => "CLOSED",
            Phase::Skipped => "SKIPPED",
        };
        f.write_str(text)
    }
}

/// The closed set of things an agent or a script may be told to do next: the
/// `next_action.verb` of every envelope, listed in docs/cli.md.
///
/// Guarantees: the one set of verbs in `tdd`. The engine's gates answer with the run
/// verbs; the command line adds the verbs of configuration, arguments, runs and the
/// conductor, so a reader of an envelope never meets a verb outside this enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verb {
    /// Write the failing test the cycle names.
    WriteTest,
    /// The test cannot import a name from the code under test: add a stub that fails loudly.
    CreateStub,
    /// Make the target pass.
    WriteImplementation,
    /// Tests that were green at baseline fail now: fix them without touching tests.
    FixRegression,
    /// Restructure under a green suite, or advance as is.
    RefactorOrAdvance,
    /// Several new tests could be the target: name one.
    NameTargetTest,
    /// Show the passed-on-arrival target can fail.
    RunSensitivityCheck,
    /// The test does not test the change: go back to RED.
    RollbackToRed,
    /// Annotations the plan requires are missing.
    AnnotateCycle,
    /// Something outside the cycle blocks it: fix what a precondition or health check
    /// found, then run the command again.
    ResolveBlocker,
    /// A baseline is being taken.
    AwaitBaseline,
    /// Every cycle is closed or skipped; nothing is left to do.
    Complete,
    /// The run is blocked until a human resumes it.
    Blocked,
    /// Review the generated configuration, then commit it.
    ReviewConfig,
    /// Correct the configuration file at the position the error names.
    FixConfig,
    /// Correct the command-line arguments.
    FixArguments,
    /// A bug in `tdd`: report it with the command that was run.
    ReportBug,
    /// Start a run with `tdd run start --plan <path>`.
    StartRun,
    /// A verifier: run the target tests yourself, then answer with `tdd verdict`.
    GiveVerdict,
    /// A planner: write the plan, one cycle per criterion.
    WritePlan,
    /// Run `tdd conduct` again to continue where the conductor stopped.
    ResumeConduct,
}

impl Verb {
    /// What the verb asks, in words for a person (the envelope carries its name).
    pub fn words(self) -> &'static str {
        match self {
            Verb::WriteTest => "write the failing test the cycle names",
            Verb::CreateStub => {
                "add a stub of the missing name that fails loudly (the plan's `stub_expected` lists where)"
            }
            Verb::WriteImplementation => "make the target pass",
            Verb::FixRegression => "fix the tests that broke, without touching tests",
            Verb::RefactorOrAdvance => "refactor under a green suite, or advance as is",
            Verb::NameTargetTest => "name the target among the new tests (`tdd target <id>`)",
            Verb::RunSensitivityCheck => "show that the target can fail",
            Verb::RollbackToRed => "go back to RED: the test does not test the change",
            Verb::AnnotateCycle => "add the annotations the plan requires",
            Verb::ResolveBlocker => "fix what the refusal names, then run the command again",
            Verb::AwaitBaseline => "wait for the baseline being taken",
            Verb::Complete => "nothing: every cycle is closed or skipped",
            Verb::Blocked => "a person must resume the run",
            Verb::ReviewConfig => "review the generated configuration, then commit it",
            Verb::FixConfig => "correct the configuration where the error points",
            Verb::FixArguments => "correct the command-line arguments",
            Verb::ReportBug => "report a bug in tdd with the command that was run",
            Verb::StartRun => "start a run with `tdd run start --plan <path>`",
            Verb::GiveVerdict => "run the target tests yourself, then answer with `tdd verdict`",
            Verb::WritePlan => "write the plan, one cycle per criterion",
            Verb::ResumeConduct => "run `tdd conduct` again to continue",
        }
    }
}
