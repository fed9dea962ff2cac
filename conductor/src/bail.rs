//! Why a conductor run gave up, classified as a process or a system cause.

use serde::Deserialize;
use serde::Serialize;

/// Who is to blame: the agents' process, or the system around them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BailClass {
    /// The agents could not do the work within the rules.
    Process,
    /// Something outside the agents' work failed.
    System,
}

impl BailClass {
    /// Whose failure it is, in words for a person.
    pub fn words(self) -> &'static str {
        match self {
            BailClass::Process => "the agents could not do the work within the rules",
            BailClass::System => "something outside the agents' work failed",
        }
    }
}

/// Every reason a run bails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BailCause {
    /// The verifier rejected a phase more often than the revise budget allows.
    ReviseBudgetExhausted,
    /// The planner wrote an invalid plan twice.
    PlanInvalid,
    /// A question only a human can answer.
    NeedsUser,
    /// A verifier ended without a verdict.
    VerdictMissing,
    /// The engine refused a phase repeatedly.
    GateRefusedRepeatedly,
    /// A leaf ran into a limit more often than `stuck_retries` allows.
    KillStuck,
    /// A leaf was killed by someone else.
    KilledExternal,
    /// A leaf's supervisor vanished (or the leaf never started).
    SupervisorLost,
    /// The baseline suite is not green.
    BaselineRed,
    /// The work tree has uncommitted changes.
    DirtyTree,
    /// The forge could not be written.
    ForgeUnreachable,
    /// The forge refused the token (HTTP 401, 403 or 404).
    ForgeDenied,
    /// A verifier changed the real work tree.
    VerifierModifiedTree,
    /// The ledger and git disagree about which steps are done.
    LedgerGitMismatch,
    /// The sandbox refused a write a leaf's tools needed, outside what any leaf may
    /// write (a toolchain's cache or download directory named by the environment).
    SandboxDenied,
}

impl BailCause {
    /// Process or system.
    pub fn class(self) -> BailClass {
        use BailCause::*;
        match self {
            ReviseBudgetExhausted
            | PlanInvalid
            | NeedsUser
            | VerdictMissing
            | GateRefusedRepeatedly => BailClass::Process,
            KillStuck | KilledExternal | SupervisorLost | BaselineRed | DirtyTree
            | ForgeUnreachable | ForgeDenied | VerifierModifiedTree | LedgerGitMismatch
            | SandboxDenied => BailClass::System,
        }
    }

    /// The snake-case name (the CLI's error reason).
    pub fn as_str(self) -> &'static str {
        use BailCause::*;
        match self {
            ReviseBudgetExhausted => "revise_budget_exhausted",
            PlanInvalid => "plan_invalid",
            NeedsUser => "needs_user",
            VerdictMissing => "verdict_missing",
            GateRefusedRepeatedly => "gate_refused_repeatedly",
            KillStuck => "kill_stuck",
            KilledExternal => "killed_external",
            SupervisorLost => "supervisor_lost",
            BaselineRed => "baseline_red",
            DirtyTree => "dirty_tree",
            ForgeUnreachable => "forge_unreachable",
            ForgeDenied => "forge_denied",
            VerifierModifiedTree => "verifier_modified_tree",
            LedgerGitMismatch => "ledger_git_mismatch",
            SandboxDenied => "sandbox_denied",
        }
    }
}

/// A bail record: what went wrong, where, and what a human should do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bail {
    /// The cause.
    pub cause: BailCause,
    /// Its class.
    pub class: BailClass,
    /// The step (plan cycle), when one was under way.
    pub step: Option<u32>,
    /// The phase, when one was under way (`red`, `green`, `refactor`, `plan`, or
    /// `report` for the forge update after a step).
    pub phase: Option<String>,
    /// What happened, in full.
    pub detail: String,
    /// The tail of the last leaf's output.
    pub output_tail: String,
    /// What a human should do.
    pub action: String,
}

impl Bail {
    /// A bail of `cause` with its detail and the human's next action.
    pub fn new(cause: BailCause, detail: impl Into<String>, action: impl Into<String>) -> Bail {
        Bail {
            cause,
            class: cause.class(),
            step: None,
            phase: None,
            detail: detail.into(),
            output_tail: String::new(),
            action: action.into(),
        }
    }

    /// Where it happened.
    pub fn at(mut self, step: u32, phase: &str) -> Bail {
        self.step = Some(step);
        self.phase = Some(phase.to_string());
        self
    }

    /// The last leaf's output tail.
    pub fn tail(mut self, text: &str) -> Bail {
        self.output_tail = tail_of(text, 2000).to_string();
        self
    }
}

/// The last `max` bytes of `text` at most, starting on a character.
pub(crate) fn tail_of(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_are_classified() {
        assert_eq!(BailCause::PlanInvalid.class(), BailClass::Process);
        assert_eq!(BailCause::VerifierModifiedTree.class(), BailClass::System);
        assert_eq!(BailCause::KillStuck.as_str(), "kill_stuck");
        let bail = Bail::new(BailCause::DirtyTree, "d", "a")
            .at(2, "red")
            .tail("xyz");
        assert_eq!(bail.step, Some(2));
        assert_eq!(bail.output_tail, "xyz");
    }
}
