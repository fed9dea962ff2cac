//! What the conductor records in its journal: one enum, one payload type per kind (see
//! `tdd_engine::ledger::TypedEvent`). The journal adds the conduct id to every payload
//! as `conduct` (see [`crate::journal`]); the payload types leave it out.

use std::path::PathBuf;

use serde::Deserialize;
use serde::Serialize;
use tdd_leaves::Decision;

use tdd_engine::ledger::Kinds;
use tdd_engine::ledger::TypedEvent;
use tdd_engine::run::RunEvent;
use tdd_leaves::events::LeavesEvent;

use crate::bail::Bail;

/// Every domain's event kinds as one registry: the engine's runs, the supervisor's
/// (which the leaves record for it), the leaves' and the conductor's. Each domain
/// declares its own kinds; this is where they meet, and it is handed to whatever reads
/// a stream that mixes them (the engine's [`tdd_engine::run::Session`], the journal,
/// the report), so a fold passes over another domain's event and refuses a kind that no
/// domain declares. The build fails when two domains declare one kind.
pub const EVENT_KINDS: Kinds = Kinds::new(&[
    (RunEvent::DOMAIN, RunEvent::KINDS),
    ("Supervisor", tdd_leaves::report::SUPERVISION_KINDS),
    (LeavesEvent::DOMAIN, LeavesEvent::KINDS),
    (ConductorEvent::DOMAIN, ConductorEvent::KINDS),
]);

const _: () = assert!(EVENT_KINDS.distinct(), "two domains declare one kind");

tdd_engine::ledger::typed_events! {
    /// Everything the conductor records about one conduct run.
    pub enum ConductorEvent in Conductor {
        /// A conduct run began: where, on which branch, with which binary.
        "conduct_started" => ConductStarted(ConductStarted),
        /// A resume was allowed to continue with another `tdd` binary.
        "conduct_binary_accepted" => BinaryAccepted(BinaryAccepted),
        /// A conductor resumed the run.
        "conduct_resumed" => Resumed(Resumed),
        /// The engine run of the plan started.
        "conduct_run_started" => RunStarted(EngineRun),
        /// The engine run was abandoned at a red baseline.
        "conduct_run_abandoned" => RunAbandoned(EngineRun),
        /// The planner's plan was invalid.
        "plan_invalid" => PlanInvalid(PlanInvalid),
        /// A phase was accepted by the engine and its verifier.
        "conduct_phase" => PhaseAccepted(PhaseRecord),
        /// The engine refused an advance.
        "gate_refused" => GateRefused(GateRefused),
        /// The blind verifier's verdict on a phase's commit.
        "phase_verdict" => PhaseVerdict(PhaseVerdict),
        /// A rejected phase's commit was undone.
        "phase_undone" => PhaseUndone(PhaseUndone),
        /// On a resume, the current phase was put back to its start.
        "phase_reset" => PhaseReset(PhaseReset),
        /// The half-done step was put back to its start.
        "step_reset" => StepReset(StepReset),
        /// A step's cycle closed, with where its time went.
        "conduct_step_done" => StepDone(StepDone),
        /// A leaf killed for a limit was run again.
        "leaf_retried" => LeafRetried(LeafRetried),
        /// A leaf a killed conductor left running was ended.
        "orphan_leaf_ended" => OrphanLeafEnded(OrphanLeafEnded),
        /// HEAD was put back where the ledger has it.
        "head_realigned" => HeadRealigned(HeadRealigned),
        /// A comment was first written to the forge.
        "forge_comment_posted" => CommentPosted(CommentPosted),
        /// The draft PR was first written to the forge.
        "forge_pr_opened" => PrOpened(PrOpened),
        /// A forge call failed transiently and was tried again.
        "forge_retry" => ForgeRetry(ForgeRetried),
        /// Commit statuses were posted for a push.
        "forge_statuses_posted" => StatusesPosted(StatusesPosted),
        /// The forge could not be written while the run ended anyway.
        "forge_unreachable" => ForgeUnreachable(ForgeUnreachable),
        /// The run bailed.
        "conduct_bailed" => Bailed(Bailed),
        /// A stop ended the run.
        "conduct_stopped" => Stopped(Stopped),
        /// Every step is done.
        "conduct_completed" => Completed(Completed),
    }
}

impl ConductorEvent {
    /// The step the event is about, when it is about one.
    pub fn step(&self) -> Option<u32> {
        match self {
            ConductorEvent::PhaseAccepted(p) => Some(p.step),
            ConductorEvent::GateRefused(p) => Some(p.step),
            ConductorEvent::PhaseVerdict(p) => Some(p.step),
            ConductorEvent::PhaseUndone(p) => Some(p.step),
            ConductorEvent::PhaseReset(p) => Some(p.step),
            ConductorEvent::StepReset(p) => Some(p.step),
            ConductorEvent::StepDone(p) => Some(p.step),
            ConductorEvent::LeafRetried(p) => Some(p.step),
            _ => None,
        }
    }
}

/// The payload of `conduct_started`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConductStarted {
    /// The issue number.
    pub issue: u64,
    /// The work tree the run works in.
    pub worktree: String,
    /// The work branch.
    pub branch: String,
    /// The committed plan's path in the work tree.
    pub plan: String,
    /// The issue file.
    pub issue_path: String,
    /// The version of `tdd`.
    pub version: String,
    /// The SHA-256 of the `tdd` binary.
    pub binary_sha256: String,
}

/// The payload of `conduct_binary_accepted`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BinaryAccepted {
    /// The SHA-256 of the binary recorded before.
    pub from: String,
    /// The SHA-256 of the binary now running.
    pub to: String,
    /// Its version.
    pub version: String,
}

/// The payload of `conduct_resumed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resumed {
    /// The resuming conductor's process id.
    pub pid: u32,
}

/// The payload of `conduct_run_started` and `conduct_run_abandoned`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineRun {
    /// The engine run.
    pub run_id: String,
}

/// The payload of `plan_invalid`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanInvalid {
    /// The planner attempt, from 1.
    pub attempt: u32,
    /// Why the plan was refused.
    pub errors: String,
}

/// The payload of `conduct_phase`: an accepted phase, the one record the PR's phase
/// table and integrity events read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseRecord {
    /// The step.
    pub step: u32,
    /// `red`, `green` or `refactor`.
    pub phase: String,
    /// The accepted commit.
    pub commit: String,
    /// Revise rounds it took.
    pub revisions: u32,
    /// Time in leaves.
    pub leaf_ms: u64,
    /// Time in the engine.
    pub engine_ms: u64,
    /// What the leaves reported spending.
    pub cost_usd: f64,
    /// Locked files the engine reverted.
    pub reverted: Vec<String>,
    /// Files changed outside the cycle's declaration, left uncommitted.
    pub undeclared: Vec<String>,
    /// The target passed on arrival.
    pub red_first_violation: bool,
}

/// The payload of `gate_refused`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateRefused {
    /// The step.
    pub step: u32,
    /// The phase (`red`, `green`, `refactor`).
    pub phase: String,
    /// The engine's reason.
    pub reason: String,
    /// Its evidence.
    pub detail: String,
}

/// The payload of `phase_verdict`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseVerdict {
    /// The step.
    pub step: u32,
    /// The phase judged.
    pub phase: String,
    /// The commit judged.
    pub commit: String,
    /// Revise rounds before this verdict.
    pub round: u32,
    /// The decision.
    pub decision: Decision,
    /// Why, in the verifier's words.
    pub reason: String,
    /// Concrete problems, for a REJECT.
    pub findings: Vec<String>,
    /// The verifier leaf.
    pub verifier: String,
}

/// The payload of `phase_undone`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseUndone {
    /// The step.
    pub step: u32,
    /// The phase whose commit was undone.
    pub phase: String,
    /// That commit.
    pub commit: String,
}

/// The payload of `phase_reset`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseReset {
    /// The step.
    pub step: u32,
    /// The phase put back to its start.
    pub phase: String,
}

/// The payload of `step_reset`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepReset {
    /// The step.
    pub step: u32,
}

/// The payload of `conduct_step_done`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepDone {
    /// The step.
    pub step: u32,
    /// Its wall time in this invocation.
    pub total_ms: u64,
    /// In leaves.
    pub leaf_ms: u64,
    /// In the engine.
    pub engine_ms: u64,
    /// In the conductor itself.
    pub overhead_ms: u64,
}

/// The payload of `leaf_retried`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeafRetried {
    /// The leaf killed for a limit.
    pub leaf: String,
    /// The step.
    pub step: u32,
    /// The phase (`plan`, `red`, `green`, `refactor`).
    pub phase: String,
    /// The retry, from 1.
    pub retry: u32,
}

/// The payload of `orphan_leaf_ended`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrphanLeafEnded {
    /// The supervisor's id of the leaf.
    pub supervisor_id: String,
}

/// The payload of `head_realigned`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeadRealigned {
    /// HEAD as found.
    pub from: String,
    /// HEAD as the ledger has it.
    pub to: String,
    /// Whether HEAD was one commit ahead of the ledger (else behind).
    pub ahead: bool,
}

/// The payload of `forge_comment_posted`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommentPosted {
    /// The caller's key (`step-<n>`, `bail`).
    pub key: String,
    /// The forge's id of the comment.
    pub id: String,
}

/// The payload of `forge_pr_opened`: the local forge names the file, GitHub the
/// pull request's number and address.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrOpened {
    /// The work branch.
    pub branch: String,
    /// Where the draft PR is, on the local forge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// The pull request's number, on GitHub.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number: Option<u64>,
    /// The pull request's address, on GitHub.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// The payload of `forge_retry`: a forge call that failed transiently, tried again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForgeRetried {
    /// The HTTP method.
    pub method: String,
    /// The request path.
    pub path: String,
    /// The attempt that failed (1 is the first).
    pub attempt: u32,
    /// What went wrong: an HTTP status or a network error, redacted.
    pub failure: String,
    /// How long it waited before the next attempt.
    pub wait_ms: u64,
}

/// The payload of `forge_statuses_posted`: the statuses one push posted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusesPosted {
    /// Each status posted.
    pub statuses: Vec<PostedStatus>,
}

/// One commit status as posted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PostedStatus {
    /// The commit.
    pub sha: String,
    /// The status context (`tdd/red`, ...).
    pub context: String,
    /// The state (`success`, `failure`, ...).
    pub state: String,
}

/// The payload of `forge_unreachable`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ForgeUnreachable {
    /// What failed.
    pub error: String,
}

/// The payload of `conduct_bailed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bailed {
    /// The bail.
    pub bail: Bail,
    /// The engine run, once started.
    pub run_id: Option<String>,
}

/// The payload of `conduct_stopped`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stopped {
    /// The stop request's mode.
    pub mode: String,
    /// The engine run, once started.
    pub run_id: Option<String>,
}

/// The payload of `conduct_completed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Completed {
    /// The engine run.
    pub run_id: Option<String>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tdd_engine::ledger::Event;
    use tdd_engine::ledger::TypedEvent;

    use super::ConductorEvent;
    use super::EVENT_KINDS;

    /// A ledger the last release wrote (the demo, conducted to the end): every event in
    /// it is of a kind some domain declares in the registry, each kind in the domain
    /// that writes it, and each run folds with the registry. A domain left out of the
    /// registry fails this (its events become unknown kinds).
    #[test]
    fn every_event_of_the_last_release_is_of_a_kind_the_registry_knows() {
        let (_dir, copy) = tdd_testutil::demo_ledger();
        let ledger = tdd_engine::ledger::Ledger::open_read_only(&copy)
            .expect("opens")
            .expect("a ledger");
        let events = ledger.events(None).expect("events");
        let mut domains = std::collections::BTreeSet::new();
        for event in &events {
            let domain = EVENT_KINDS.domain_of(&event.kind);
            assert!(
                domain.is_some(),
                "event {} is of a kind no domain declares: {}",
                event.id,
                event.kind
            );
            domains.extend(domain);
        }
        assert_eq!(
            domains.into_iter().collect::<Vec<_>>(),
            ["Conductor", "Leaves", "Run", "Supervisor"]
        );
        let run_id = events
            .iter()
            .find(|e| e.kind == "run_started")
            .and_then(|e| e.run_id.clone())
            .expect("a run");
        let run = ledger.events(Some(&run_id)).expect("the run's events");
        let state = tdd_engine::run::RunState::project(&run, &EVENT_KINDS)
            .expect("folds")
            .expect("a run");
        assert_eq!(state.status, tdd_engine::run::RunStatus::Completed);
    }

    /// Payloads as the previous release wrote the kinds its demo ledger does not hold
    /// (the fixture test in `journal` covers the others): each reads as its type and
    /// is written back the same.
    #[test]
    fn payloads_of_the_last_release_read_and_write_back_unchanged() {
        let bail = json!({
            "action": "a", "cause": "revise_budget_exhausted", "class": "process",
            "detail": "d", "output_tail": "", "phase": "red", "step": 2,
        });
        let cases = [
            (
                "conduct_binary_accepted",
                json!({ "from": "a", "to": "b", "version": "0.1.0" }),
            ),
            ("conduct_resumed", json!({ "pid": 42 })),
            ("conduct_run_abandoned", json!({ "run_id": "run-1" })),
            (
                "plan_invalid",
                json!({ "attempt": 2, "errors": "no cycles" }),
            ),
            (
                "gate_refused",
                json!({ "step": 1, "phase": "red", "reason": "r", "detail": "d" }),
            ),
            ("phase_reset", json!({ "step": 1, "phase": "green" })),
            ("step_reset", json!({ "step": 1 })),
            (
                "leaf_retried",
                json!({ "leaf": "l", "step": 1, "phase": "red", "retry": 1 }),
            ),
            ("orphan_leaf_ended", json!({ "supervisor_id": "s" })),
            (
                "head_realigned",
                json!({ "from": "a", "to": "b", "ahead": true }),
            ),
            ("forge_unreachable", json!({ "error": "disk full" })),
            ("conduct_bailed", json!({ "bail": bail, "run_id": null })),
            (
                "conduct_stopped",
                json!({ "mode": "now", "run_id": "run-1" }),
            ),
            ("conduct_completed", json!({ "run_id": "run-1" })),
        ];
        for (id, (kind, payload)) in (1..).zip(cases) {
            let event = Event {
                id,
                run_id: Some("conduct-a".into()),
                kind: kind.into(),
                payload: payload.clone(),
                at: String::new(),
                prev_hash: String::new(),
                hash: String::new(),
            };
            let typed = tdd_engine::ledger::decode::<ConductorEvent>(&event, &super::EVENT_KINDS)
                .expect("reads")
                .expect("a conductor event");
            assert_eq!(typed.kind(), kind);
            let written = tdd_engine::ledger::encode(&typed).expect("encodes");
            assert_eq!(written, payload, "{kind}");
        }
    }
}
