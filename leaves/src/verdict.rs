//! Verifier verdicts: accepted only from the verifier leaf launched for the phase,
//! and an ACCEPT only with the verifier's own test runs as evidence.

use serde::Deserialize;
use serde::Serialize;
use tdd_engine::ledger::Event;
use tdd_engine::ledger::Ledger;
use tdd_engine::ledger::LedgerError;
use tdd_engine::ledger::decode_own;
use tdd_engine::run::RunEvent;
use tdd_engine::run::events::TestObserved;
use tdd_prompts::Role;

use crate::events::LeavesEvent;
use crate::events::VerdictRefused;
use crate::identity::LeafRecord;

/// A verifier's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The phase is done.
    Accept,
    /// It is not; the findings say why.
    Reject,
}

/// A verdict as recorded (`verdict_recorded`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifierVerdict {
    /// The verifier leaf.
    pub leaf_id: String,
    /// The issue.
    pub issue: u64,
    /// The step.
    pub step: u32,
    /// The phase judged.
    pub phase: String,
    /// The decision.
    pub decision: Decision,
    /// Why, in the verifier's words.
    pub reason: String,
    /// Concrete problems, for a REJECT.
    pub findings: Vec<String>,
    /// The ledger events of the verifier's own test runs that covered the targets.
    pub evidence: Vec<i64>,
}

/// Why a verdict was refused. Every refusal is recorded (`verdict_refused`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The leaf is not a verifier.
    #[error("leaf {leaf_id} is a {role}, and only the verifier of a phase gives its verdict")]
    NotVerifier {
        /// The leaf.
        leaf_id: String,
        /// Its role.
        role: Role,
    },
    /// A later verifier was launched for the same phase.
    #[error("leaf {leaf_id} is no longer the verifier of this phase; {current} is")]
    Superseded {
        /// The leaf.
        leaf_id: String,
        /// The current verifier.
        current: String,
    },
    /// The leaf has ended or was aborted.
    #[error("leaf {leaf_id} has ended; a verdict is given while the verifier runs")]
    LeafOver {
        /// The leaf.
        leaf_id: String,
    },
    /// The leaf already gave its verdict.
    #[error("leaf {leaf_id} already gave its verdict")]
    AlreadyGiven {
        /// The leaf.
        leaf_id: String,
    },
    /// An ACCEPT without the verifier's own runs of the targets.
    #[error("an ACCEPT needs your own `tdd test` runs of every target; not run: {}", missing.join(", "))]
    NoEvidence {
        /// Targets the verifier did not run.
        missing: Vec<String>,
    },
}

impl Refusal {
    /// The reason code, as in docs/cli.md.
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::NotVerifier { .. } => "verdict_not_verifier",
            Refusal::Superseded { .. } => "verdict_superseded",
            Refusal::LeafOver { .. } => "verdict_leaf_over",
            Refusal::AlreadyGiven { .. } => "verdict_already_given",
            Refusal::NoEvidence { .. } => "verdict_without_evidence",
        }
    }
}

/// Why a verdict could not be submitted.
#[derive(Debug, thiserror::Error)]
pub enum VerdictError {
    /// It was refused, and the refusal recorded.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The ledger failed.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

fn targets(record: &LeafRecord) -> Vec<String> {
    record.assignment["targets"]
        .as_array()
        .map(|ids| {
            ids.iter()
                .filter_map(|id| id.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The test runs a verifier made itself: the `test_observed` events recorded after the
/// leaf was prepared whose `leaf_id` is this leaf (`tdd test` sets it only once the leaf's
/// token checked out), read as the engine's typed events. No other kind carries a
/// leaf's runs, whatever its payload says, and an event that does not parse as its kind
/// counts for nothing.
fn own_runs(events: &[Event], leaf: &LeafRecord) -> Vec<(i64, TestObserved)> {
    events
        .iter()
        .filter(|e| e.id > leaf.event_id)
        .filter_map(|e| match decode_own::<RunEvent>(e) {
            Ok(Some(RunEvent::TestObserved(observed))) => Some((e.id, observed)),
            _ => None,
        })
        .filter(|(_, observed)| observed.leaf_id.as_deref() == Some(leaf.leaf_id.as_str()))
        .collect()
}

/// Whether an observed id is the target (which may omit the project prefix).
fn same_test(observed: &str, target: &str) -> bool {
    observed == target || observed.ends_with(&format!("::{target}"))
}

/// The verifier's own test runs that cover `targets` (see [`own_runs`]): returns the
/// events that count and the targets no run covered.
pub fn evidence(
    events: &[Event],
    leaf: &LeafRecord,
    targets: &[String],
) -> (Vec<i64>, Vec<String>) {
    let runs = own_runs(events, leaf);
    let mut used = Vec::new();
    let mut missing = Vec::new();
    for target in targets {
        let covering: Vec<i64> = runs
            .iter()
            .filter(|(_, observed)| {
                observed
                    .observations
                    .iter()
                    .flat_map(|o| o.tests.keys())
                    .any(|id| same_test(id, target))
            })
            .map(|(id, _)| *id)
            .collect();
        if covering.is_empty() {
            missing.push(target.clone());
        }
        used.extend(covering);
    }
    used.sort_unstable();
    used.dedup();
    (used, missing)
}

/// Records a verdict from an authenticated leaf, or records and returns why not.
pub fn submit(
    ledger: &mut Ledger,
    leaf: &LeafRecord,
    decision: Decision,
    reason: &str,
    findings: &[String],
) -> Result<VerifierVerdict, VerdictError> {
    let events = ledger.events(None)?;
    // The leaves' own events, read strictly: one of their kinds that does not parse
    // is an error, never passed over (a verdict already given must not go unseen).
    let ours = events
        .iter()
        .filter_map(|e| decode_own::<LeavesEvent>(e).transpose())
        .collect::<Result<Vec<_>, _>>()
        .map_err(LedgerError::from)?;
    match check(&events, &ours, leaf, decision) {
        Ok(evidence) => {
            let verdict = VerifierVerdict {
                leaf_id: leaf.leaf_id.clone(),
                issue: leaf.issue,
                step: leaf.step,
                phase: leaf.phase.clone(),
                decision,
                reason: reason.to_string(),
                findings: findings.to_vec(),
                evidence,
            };
            let event = LeavesEvent::VerdictRecorded(verdict.clone());
            ledger.record(leaf.run_id.as_deref(), &event)?;
            Ok(verdict)
        }
        Err(refusal) => {
            record_refusal(
                ledger,
                leaf.run_id.as_deref(),
                &leaf.leaf_id,
                refusal.reason(),
                decision,
            )?;
            Err(refusal.into())
        }
    }
}

/// Records a refused verdict (also for claims that failed authentication).
pub fn record_refusal(
    ledger: &mut Ledger,
    run_id: Option<&str>,
    leaf_id: &str,
    reason: &str,
    decision: Decision,
) -> Result<(), LedgerError> {
    let event = LeavesEvent::VerdictRefused(VerdictRefused {
        leaf_id: leaf_id.to_string(),
        reason: reason.to_string(),
        decision,
    });
    ledger.record(run_id, &event)?;
    Ok(())
}

fn check(
    events: &[Event],
    ours: &[LeavesEvent],
    leaf: &LeafRecord,
    decision: Decision,
) -> Result<Vec<i64>, Refusal> {
    let id = leaf.leaf_id.as_str();
    if leaf.role != Role::Verifier {
        return Err(Refusal::NotVerifier {
            leaf_id: id.to_string(),
            role: leaf.role,
        });
    }
    let given = ours
        .iter()
        .any(|e| matches!(e, LeavesEvent::VerdictRecorded(v) if v.leaf_id == id));
    if given {
        return Err(Refusal::AlreadyGiven {
            leaf_id: id.to_string(),
        });
    }
    let over = ours.iter().any(|e| match e {
        LeavesEvent::LeafFinished(f) => f.leaf_id == id,
        LeavesEvent::LeafAborted(a) => a.leaf_id == id,
        _ => false,
    });
    if over {
        return Err(Refusal::LeafOver {
            leaf_id: id.to_string(),
        });
    }
    // The verifier of this step and phase prepared last: only it may give the verdict.
    let latest = ours.iter().rev().find_map(|e| match e {
        LeavesEvent::LeafPrepared(p)
            if p.role == Role::Verifier
                && p.issue == leaf.issue
                && p.step == leaf.step
                && p.phase == leaf.phase =>
        {
            Some(p.leaf_id.as_str())
        }
        _ => None,
    });
    if let Some(current) = latest
        && current != id
    {
        return Err(Refusal::Superseded {
            leaf_id: id.to_string(),
            current: current.to_string(),
        });
    }
    let (used, missing) = evidence(events, leaf, &targets(leaf));
    if decision == Decision::Accept && !missing.is_empty() {
        return Err(Refusal::NoEvidence { missing });
    }
    Ok(used)
}

/// The verdict a verifier leaf gave, if it gave one. A verifier that ended without
/// one is `verdict_missing` for the conductor.
pub fn verdict_of(ledger: &Ledger, leaf_id: &str) -> Result<Option<VerifierVerdict>, LedgerError> {
    let verdicts = ledger.typed::<LeavesEvent>(None, &["verdict_recorded"])?;
    Ok(verdicts.into_iter().find_map(|(_, e)| match e {
        LeavesEvent::VerdictRecorded(v) if v.leaf_id == leaf_id => Some(v),
        _ => None,
    }))
}

#[cfg(test)]
mod tests {
    use serde_json::Value;
    use serde_json::json;

    use super::*;

    const LEAF: &str = "verifier-i1-s1-green-a1-abc";
    const TARGET: &str = "app::calc::sub subtracts";

    fn leaf() -> LeafRecord {
        serde_json::from_value(json!({
            "event_id": 10,
            "leaf_id": LEAF,
            "role": "verifier",
            "provider": "scripted",
            "issue": 1,
            "step": 1,
            "phase": "green",
            "attempt": 1,
            "prompt": {"template": "t", "text": "", "sha256": "", "bytes": 0,
                       "fixed_bytes": 0, "variable_bytes": 0},
            "assignment": {"targets": [TARGET]},
            "token_sha256": "",
        }))
        .expect("a leaf record")
    }

    /// A payload whose one observation ran `test` for the leaf `leaf`.
    fn observed(leaf: &str, test: &str) -> Value {
        let totals = serde_json::to_value(tdd_engine::observe::Totals::default()).expect("totals");
        json!({
            "leaf_id": leaf,
            "observations": [{
                "project": "app", "adapter": "cargo", "invocations": [], "wall_ms": 1,
                "tests": { test: {"outcome": "passed"} },
                "collection_errors": [], "totals": totals,
            }],
            "targets": [],
        })
    }

    fn event(id: i64, kind: &str, payload: Value) -> Event {
        Event {
            id,
            run_id: None,
            kind: kind.into(),
            payload,
            at: String::new(),
            prev_hash: String::new(),
            hash: String::new(),
        }
    }

    fn missing(events: &[Event]) -> Vec<String> {
        evidence(events, &leaf(), &[TARGET.to_string()]).1
    }

    #[test]
    fn the_leafs_own_run_of_the_target_after_it_was_prepared_is_evidence() {
        let events = [event(11, "test_observed", observed(LEAF, TARGET))];
        assert_eq!(
            evidence(&events, &leaf(), &[TARGET.into()]),
            (vec![11], vec![])
        );
        // A ledger written before the field was named `leaf_id` reads the same.
        let mut legacy = observed(LEAF, TARGET);
        let id = legacy
            .as_object_mut()
            .and_then(|o| o.remove("leaf_id"))
            .expect("a leaf id");
        legacy["leaf"] = id;
        let legacy = [event(11, "test_observed", legacy)];
        assert!(missing(&legacy).is_empty());
        // A target named without its project is covered by the qualified id observed.
        let (_, missing) = evidence(&events, &leaf(), &["calc::sub subtracts".into()]);
        assert!(missing.is_empty());
    }

    #[test]
    fn a_recorded_verdict_that_does_not_parse_is_an_error_not_a_second_chance() {
        let dir = tempfile::tempdir().expect("dir");
        let mut ledger = Ledger::open(&dir.path().join("ledger.sqlite3")).expect("ledger");
        ledger
            .append(None, "verdict_recorded", &json!({ "leaf_id": LEAF }))
            .expect("append");
        let mut leaf = leaf();
        leaf.event_id = 0;
        let submitted = submit(&mut ledger, &leaf, Decision::Reject, "no", &[]);
        assert!(
            matches!(submitted, Err(VerdictError::Ledger(_))),
            "{submitted:?}"
        );
    }

    #[test]
    fn nothing_else_is_evidence() {
        let before = [event(9, "test_observed", observed(LEAF, TARGET))];
        let other_leaf = [event(11, "test_observed", observed("developer-x", TARGET))];
        let other_test = [event(
            11,
            "test_observed",
            observed(LEAF, "app::calc::add adds"),
        )];
        // Another kind with the same words in its payload is not a test run.
        let mut forged = observed(LEAF, TARGET);
        forged["leaf_id"] = json!(LEAF);
        let other_kind = [event(11, "note", forged)];
        let unparsed = [event(
            11,
            "test_observed",
            json!({"leaf_id": LEAF, "observations": "x"}),
        )];
        for events in [
            &before[..],
            &other_leaf,
            &other_test,
            &other_kind,
            &unparsed,
        ] {
            assert_eq!(missing(events), vec![TARGET.to_string()], "{events:?}");
        }
    }
}
