//! The engine's ledger events: one enum, one payload type per kind. What is written is
//! exactly what [`super::state::RunState`] folds, so a field the state reads cannot be
//! missing or mistyped without the projection saying which event is at fault.

use std::collections::BTreeMap;
use std::collections::BTreeSet;

use serde::Deserialize;
use serde::Serialize;

use super::phase::Phase;
use super::phase::Verb;
use super::state::Baseline;
use super::state::RunStarted;
use crate::observe::Observation;
use crate::observe::TargetVerdict;
use crate::plan::Contract;

tdd_ledger::typed_events! {
    /// Everything the engine records.
    pub enum RunEvent in Run {
        /// A plan was validated and recorded as a contract (no run).
        "plan_registered" => PlanRegistered(Contract),
        /// A run began.
        "run_started" => RunStarted(RunStarted),
        /// One project's baseline suite run.
        "baseline_captured" => BaselineCaptured(BaselineCaptured),
        /// A cycle opened at its first phase.
        "cycle_opened" => CycleOpened(CycleOpened),
        /// An advance was refused.
        "advance_refused" => AdvanceRefused(AdvanceRefused),
        /// A gate accepted and the cycle moved on (with the commit, if any).
        "phase_changed" => PhaseChanged(PhaseChanged),
        /// The cycle closed.
        "cycle_closed" => CycleClosed(CycleRef),
        /// Every cycle is closed or skipped.
        "run_completed" => RunCompleted(Empty),
        /// The plan's target was not collected and the one new test was adopted.
        "target_adopted" => TargetAdopted(TargetAdopted),
        /// A person or leaf named the target among the new tests.
        "target_named" => TargetNamed(TargetNamed),
        /// The cycle went back to the start of a phase.
        "rolled_back" => RolledBack(RolledBack),
        /// `tdd test` observed tests (in a run, or as a verifier's evidence).
        "test_observed" => TestObserved(TestObserved),
        /// A cycle was skipped.
        "cycle_skipped" => CycleSkipped(CycleSkipped),
        /// The run was abandoned.
        "run_abandoned" => RunAbandoned(RunAbandoned),
        /// A blocker was raised.
        "blocker_raised" => BlockerRaised(Blocker),
        /// The blocker was cleared.
        "blocker_cleared" => BlockerCleared(BlockerCleared),
        /// A note.
        "note" => Note(Note),
        /// An annotation the plan may require.
        "annotation" => Annotation(Annotation),
        /// Locked files were put back as they were.
        "locked_file_reverted" => LockedFileReverted(LockedFileReverted),
        /// Index flags on locked paths were cleared.
        "index_flags_cleared" => IndexFlagsCleared(IndexFlagsCleared),
        /// GREEN was judged with no implementation change.
        "green_without_change" => GreenWithoutChange(GreenWithoutChange),
        /// Every target passed at RED: no test was written first.
        "red_first_violation" => RedFirstViolation(RedFirstViolation),
        /// Changed files outside the cycle's roots were left uncommitted.
        "undeclared_file_touched" => UndeclaredFileTouched(UndeclaredFileTouched),
        /// A generated artifact was stale at REFACTOR.
        "stale_artifact" => StaleArtifact(Artifact),
        /// An artifact could not be regenerated.
        "artifact_regenerate_failed" => ArtifactRegenerateFailed(ArtifactFailed),
        /// An artifact was regenerated and committed.
        "artifact_regenerated" => ArtifactRegenerated(ArtifactRegenerated),
        /// The target still passed with the implementation reversed.
        "insensitive_test" => InsensitiveTest(InsensitiveTest),
        /// An anchored commit is about to be made (its trailers carry the chain head).
        "commit_started" => CommitStarted(CommitStarted),
        /// An agent CLI's hook denied a tool call before it ran (`tdd hook`).
        "hook_denied" => HookDenied(HookDenied),
        /// A shell command changed locked files, and `tdd hook` restored them after it.
        "hook_reverted" => HookReverted(HookReverted),
        /// The run moved to another work tree: a clone that took in the published ledger.
        "run_adopted" => RunAdopted(RunAdopted),
        /// A cycle that declares `changes_dependencies` changed them; they are pinned anew.
        "dependencies_changed" => DependenciesChanged(DependenciesChanged),
    }
}

/// A payload with no fields.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Empty {}

/// A payload naming a cycle only.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CycleRef {
    /// The cycle.
    pub n: u32,
}

/// The payload of `baseline_captured`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BaselineCaptured {
    /// The project.
    pub project: String,
    /// What failed, passed and did not load.
    #[serde(flatten)]
    pub baseline: Baseline,
    /// Failures some `known_failures` entry declares.
    pub declared: BTreeSet<String>,
    /// Failures no entry declares.
    pub undeclared: BTreeSet<String>,
    /// Entries that matched no failure.
    pub unmatched_known_failures: Vec<String>,
    /// The suite run.
    pub observation: Observation,
}

/// The payload of `cycle_opened`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CycleOpened {
    /// The cycle.
    pub n: u32,
    /// Its first phase.
    pub phase: Phase,
    /// The work tree's snapshot tree.
    pub snapshot: String,
    /// HEAD.
    pub head: String,
}

/// The refusal recorded with `advance_refused`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecordedRefusal {
    /// The machine-readable reason.
    pub reason: String,
    /// What to do next.
    pub verb: Verb,
    /// The snapshot tree it was computed on.
    pub tree: String,
}

/// The payload of `advance_refused`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AdvanceRefused {
    /// The cycle.
    pub n: u32,
    /// The phase it stays in.
    pub phase: Phase,
    /// Why.
    pub refusal: RecordedRefusal,
    /// The evidence.
    pub detail: String,
    /// The runs the decision rests on.
    pub observations: Vec<Observation>,
}

/// The payload of `phase_changed`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PhaseChanged {
    /// The cycle.
    pub n: u32,
    /// The phase left.
    pub from: Phase,
    /// The phase entered.
    pub to: Phase,
    /// The commit made, if any.
    pub commit: Option<String>,
    /// The trailer of the phase the commit belongs to.
    pub committed_phase: Option<String>,
    /// The committed paths.
    pub files: Vec<String>,
    /// The work tree's snapshot tree at the new phase's start.
    pub snapshot: String,
    /// HEAD at the new phase's start.
    pub head: String,
    /// The RED decision, at RED.
    pub red: Option<serde_json::Value>,
    /// The runs the decision rests on; a change without any is no change.
    pub observations: Vec<Observation>,
}

/// The payload of `target_adopted`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TargetAdopted {
    /// The cycle.
    pub n: u32,
    /// The plan's target.
    pub planned: String,
    /// The new test adopted in its place.
    pub test: String,
}

/// The payload of `target_named`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TargetNamed {
    /// The cycle.
    pub n: u32,
    /// The plan's targets.
    pub planned: Vec<String>,
    /// The test named in their place.
    pub test: String,
}

/// The payload of `rolled_back`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RolledBack {
    /// The cycle.
    pub n: u32,
    /// The phase left.
    pub from: Phase,
    /// The phase gone back to.
    pub to: Phase,
    /// Its snapshot tree.
    pub snapshot: String,
    /// HEAD at its start.
    pub head: String,
    /// HEAD before the rollback.
    pub undone_from: String,
    /// Files put back.
    pub restored: Vec<String>,
    /// Files removed.
    pub removed: Vec<String>,
}

/// The payload of `test_observed`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TestObserved {
    /// The cycle current when observed (in a run).
    #[serde(default)]
    pub n: Option<u32>,
    /// Its phase.
    #[serde(default)]
    pub phase: Option<Phase>,
    /// The leaf that ran the tests, when its token checked out. Named `leaf_id` like
    /// every other event's leaf; ledgers written before read as well (`leaf`).
    #[serde(default, alias = "leaf")]
    pub leaf_id: Option<String>,
    /// The runs.
    pub observations: Vec<Observation>,
    /// The targets' verdicts.
    pub targets: Vec<TargetVerdict>,
}

/// The payload of `cycle_skipped`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CycleSkipped {
    /// The cycle.
    pub n: u32,
    /// Why.
    pub reason: String,
}

/// The payload of `run_abandoned`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunAbandoned {
    /// Why.
    pub reason: String,
    /// The process that abandoned it.
    pub pid: u32,
}

/// The payload of `blocker_raised`: an open blocker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Blocker {
    /// The cycle current when raised.
    pub n: Option<u32>,
    /// What kind of blocker.
    pub kind: String,
    /// What blocks.
    pub detail: String,
}

/// The payload of `blocker_cleared`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BlockerCleared {
    /// The cycle current when cleared.
    pub n: Option<u32>,
    /// The person's note.
    pub note: Option<String>,
}

/// The payload of `hook_denied`: a tool call `tdd hook` denied, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookDenied {
    /// The cycle current when it was denied.
    pub n: Option<u32>,
    /// The cycle's phase then, as commit trailers name it (`red`, `green`,
    /// `refactor`); absent in records made before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The agent CLI (`claude`, `codex`).
    pub harness: String,
    /// The tool it was about to run (`Write`, `Bash`, `apply_patch`).
    pub tool: String,
    /// The paths the call would have written.
    pub paths: Vec<String>,
    /// The reason the agent was given.
    pub reason: String,
    /// From the hook's start to its answer, in milliseconds.
    pub latency_ms: u64,
}

/// The payload of `hook_reverted`: locked files a tool call changed (a shell command the
/// hook could not read ahead) restored by `tdd hook` right after it ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookReverted {
    /// The cycle current when it ran.
    pub n: Option<u32>,
    /// The cycle's phase then (`red`, `green`, `refactor`); absent in records made
    /// before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The agent CLI (`claude`, `codex`).
    pub harness: String,
    /// The tool that ran (`Bash`, `exec_command`).
    pub tool: String,
    /// Locked files restored to the phase's base.
    pub restored: Vec<String>,
    /// Locked files the call created, removed.
    pub removed: Vec<String>,
    /// From the hook's start to its answer, in milliseconds.
    pub latency_ms: u64,
}

/// The payload of `run_adopted`: the run continues in another work tree (a clone took
/// the published ledger in, and its branch carries the run's commits).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunAdopted {
    /// The work tree the run continues in.
    pub worktree: String,
    /// The work tree it was in before.
    pub from: String,
    /// HEAD of the work tree when it was adopted.
    pub head: String,
}

/// The payload of `dependencies_changed`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DependenciesChanged {
    /// The cycle whose plan declares `changes_dependencies`.
    pub n: u32,
    /// What changed, in words: an entry with what it was and is, a new root, a root
    /// that is gone.
    pub changed: Vec<String>,
    /// The dependencies' fingerprints taken now, which later gates check against.
    pub installs: Vec<crate::observe::hermetic::InstallPin>,
}

/// The payload of `note`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Note {
    /// The cycle current when noted.
    pub n: Option<u32>,
    /// The text.
    pub text: String,
}

/// The payload of `annotation`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Annotation {
    /// The cycle annotated.
    pub n: Option<u32>,
    /// The key.
    pub key: String,
    /// The value.
    pub value: String,
}

/// The payload of `locked_file_reverted`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LockedFileReverted {
    /// The cycle.
    pub n: u32,
    /// Its phase.
    pub phase: Phase,
    /// Which lock (`test_changed`, `impl_changed`, `harness_changed`, ...).
    pub kind: String,
    /// Files put back.
    pub restored: Vec<String>,
    /// Files removed.
    pub removed: Vec<String>,
}

/// The payload of `index_flags_cleared`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IndexFlagsCleared {
    /// The cycle.
    pub n: u32,
    /// Its phase.
    pub phase: Phase,
    /// The locked paths that carried flags.
    pub paths: Vec<super::FlaggedPath>,
}

/// The payload of `green_without_change`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GreenWithoutChange {
    /// The cycle.
    pub n: u32,
    /// The candidate tree (HEAD's).
    pub tree: String,
}

/// The payload of `red_first_violation`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RedFirstViolation {
    /// The cycle.
    pub n: u32,
    /// The targets that passed at RED.
    pub tests: Vec<String>,
}

/// The payload of `undeclared_file_touched`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UndeclaredFileTouched {
    /// The cycle.
    pub n: u32,
    /// Its phase.
    pub phase: Phase,
    /// The files.
    pub files: Vec<String>,
}

/// The payload of `stale_artifact`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Artifact {
    /// The cycle.
    pub n: u32,
    /// The artifact's name.
    pub artifact: String,
}

/// The payload of `artifact_regenerate_failed`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ArtifactFailed {
    /// The cycle.
    pub n: u32,
    /// The artifact's name.
    pub artifact: String,
    /// The tail of the generator's output.
    pub output: String,
}

/// The payload of `artifact_regenerated`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ArtifactRegenerated {
    /// The cycle.
    pub n: u32,
    /// The artifact's name.
    pub artifact: String,
    /// The files it changed.
    pub files: Vec<String>,
    /// The commit that holds them, if any.
    pub commit: Option<String>,
}

/// The payload of `insensitive_test`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InsensitiveTest {
    /// The cycle.
    pub n: u32,
    /// The target.
    pub target: String,
}

/// The payload of `commit_started`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CommitStarted {
    /// The paths the commit will hold.
    pub files: Vec<String>,
    /// Its message.
    pub message: String,
    /// Its trailers (without the chain head, which is this event's own).
    pub trailers: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::TypedEvent;

    #[test]
    fn every_kind_encodes_and_decodes_to_the_same_payload() {
        let event = RunEvent::Note(Note {
            n: Some(2),
            text: "hello".into(),
        });
        let payload = crate::ledger::encode(&event).expect("encodes");
        assert_eq!(payload, serde_json::json!({ "n": 2, "text": "hello" }));
        assert_eq!(event.kind(), "note");
        assert!(RunEvent::KINDS.contains(&"commit_started"));
        assert_eq!(RunEvent::KINDS.len(), 32);
        assert!(RunEvent::KINDS.contains(&"dependencies_changed"));
        let denied = RunEvent::HookDenied(HookDenied {
            n: Some(1),
            phase: None,
            harness: "claude".into(),
            tool: "Write".into(),
            paths: vec!["tests/a.py".into()],
            reason: "locked".into(),
            latency_ms: 7,
        });
        let payload = crate::ledger::encode(&denied).expect("encodes");
        assert_eq!(denied.kind(), "hook_denied");
        assert_eq!(payload["paths"], serde_json::json!(["tests/a.py"]));
    }

    /// A ledger the last release wrote (the demo, conducted to the end): every engine
    /// event reads as its type, and the run folds to what happened (that every event
    /// belongs to a domain is the conductor's test, where every domain is known).
    #[test]
    fn a_ledger_written_by_the_last_release_reads_as_typed_events() {
        let (_dir, copy) = tdd_testutil::demo_ledger();
        let ledger = crate::ledger::Ledger::open_read_only(&copy)
            .expect("opens")
            .expect("a ledger");
        let events = ledger.events(None).expect("events");
        assert_eq!(events.len(), 187);
        // The other domains' kinds, as the fixture has them: this crate knows only its own.
        let others: Vec<&'static str> = events
            .iter()
            .filter(|e| !RunEvent::KINDS.contains(&e.kind.as_str()))
            .map(|e| &*Box::leak(e.kind.clone().into_boxed_str()))
            .collect();
        let known = crate::ledger::Kinds::new(Box::leak(Box::new([
            (RunEvent::DOMAIN, RunEvent::KINDS),
            ("others", &*others.leak()),
        ])));
        for event in &events {
            crate::ledger::decode::<RunEvent>(event, &known).expect("reads as its type");
        }
        let run_id = events
            .iter()
            .find(|e| e.kind == "run_started")
            .and_then(|e| e.run_id.clone())
            .expect("a run");
        let run = ledger.events(Some(&run_id)).expect("the run's events");
        let state = super::super::state::RunState::project(&run, &known)
            .expect("folds")
            .expect("a run");
        assert_eq!(state.status, super::super::state::RunStatus::Completed);
        assert!(state.cycles.iter().all(|c| c.phase == Phase::Closed));
        assert_eq!(
            state.cycles.iter().map(|c| c.commits.len()).sum::<usize>(),
            9
        );
    }
}
