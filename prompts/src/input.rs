//! What each role is told, as typed inputs.
//!
//! [`DeveloperInput`] and [`PlannerInput`] are plain data: a developer may see the
//! whole issue and the verifier's findings. [`VerifierInput`] is the blind one: its
//! fields are private and its only constructor takes exactly the provenance types of
//! [`crate::provenance`], so nothing a developer leaf produced can reach a verifier.

use serde::Serialize;
use tdd_engine::plan::PlannedCycle;
use tdd_engine::run::Phase;

use crate::provenance::BehaviourSpec;
use crate::provenance::CommitSha;
use crate::provenance::Issue;
use crate::provenance::TestId;

/// The three kinds of leaf.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Turns an issue into a plan.
    Planner,
    /// Does one phase of one step.
    Developer,
    /// Judges one phase, blind.
    Verifier,
}

impl Role {
    /// The role's name, as in `TDD_ROLE` and fixtures.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Planner => "planner",
            Role::Developer => "developer",
            Role::Verifier => "verifier",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The step a developer works on: the plan cycle and the criterion it covers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// The acceptance criterion's text, as the issue has it (`None` when the cycle
    /// names none, as refactor cycles may).
    pub criterion: Option<String>,
    /// The registered plan's cycle.
    pub cycle: PlannedCycle,
}

/// Facts of the repository a developer needs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RepoFacts {
    /// How the suites run, per project (`name: command`), as `tdd.toml` says.
    pub test_commands: Vec<String>,
    /// Globs locked in this phase.
    pub locked: Vec<String>,
    /// Files changed so far in this step.
    pub touched: Vec<String>,
}

/// What a developer leaf is told.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeveloperInput {
    /// The issue, whole.
    pub issue: Issue,
    /// The step.
    pub step: Step,
    /// The phase to do.
    pub phase: Phase,
    /// The target tests.
    pub targets: Vec<TestId>,
    /// Repository facts.
    pub repo: RepoFacts,
    /// The findings of the verdict being revised (empty on a first attempt).
    pub findings: Vec<String>,
}

/// What a planner leaf is told.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlannerInput {
    /// The issue, whole.
    pub issue: Issue,
    /// Repository facts.
    pub repo: RepoFacts,
    /// Where the plan is to be written, relative to the work tree.
    pub plan_path: String,
    /// Why the previous attempt's plan was refused (empty on a first attempt).
    pub errors: Vec<String>,
}

/// What a verifier leaf is told, and nothing else.
///
/// Every field is an engine fact of a provenance type; see [`crate::provenance`].
/// There is no `Default`, no `Deserialize` and no setter.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerifierInput {
    test_ids: Vec<TestId>,
    behaviour_spec: BehaviourSpec,
    repo_at: CommitSha,
    base: Option<CommitSha>,
    phase: Phase,
}

impl VerifierInput {
    /// The one constructor: the target tests, the criterion, the commit to judge,
    /// the commit the phase started from, and the phase.
    pub fn new(
        test_ids: Vec<TestId>,
        behaviour_spec: BehaviourSpec,
        repo_at: CommitSha,
        base: Option<CommitSha>,
        phase: Phase,
    ) -> VerifierInput {
        VerifierInput {
            test_ids,
            behaviour_spec,
            repo_at,
            base,
            phase,
        }
    }

    /// The target tests.
    pub fn test_ids(&self) -> &[TestId] {
        &self.test_ids
    }

    /// The criterion.
    pub fn behaviour_spec(&self) -> &BehaviourSpec {
        &self.behaviour_spec
    }

    /// The commit to judge.
    pub fn repo_at(&self) -> &CommitSha {
        &self.repo_at
    }

    /// The commit the phase started from.
    pub fn base(&self) -> Option<&CommitSha> {
        self.base.as_ref()
    }

    /// The phase judged.
    pub fn phase(&self) -> Phase {
        self.phase
    }
}
