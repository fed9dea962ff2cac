//! Verifier verdicts: accepted only from the verifier leaf launched for the phase,
//! and an ACCEPT only with the verifier's own test runs as evidence.

use serde::Deserialize;
use serde::Serialize;
use tdd_engine::ledger::Event;
use tdd_engine::ledger::Ledger;
use tdd_engine::ledger::LedgerError;
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

/// Test ids an event observed: `payload.observation.tests` and
/// `payload.observations[].tests` (objects keyed by test id).
fn observed_ids(event: &Event) -> Vec<&str> {
    let payload = &event.payload;
    let single = std::iter::once(&payload["observation"]);
    let many = payload["observations"].as_array().into_iter().flatten();
    single
        .chain(many)
        .filter_map(|observation| observation["tests"].as_object())
        .flat_map(|tests| tests.keys().map(String::as_str))
        .collect()
}

/// Whether an observed id is the target (which may omit the project prefix).
fn same_test(observed: &str, target: &str) -> bool {
    observed == target || observed.ends_with(&format!("::{target}"))
}

/// The verifier's own test runs that cover `targets`: events recorded after the leaf
/// was prepared, carrying its id (`tdd test` records `test_observed` with `leaf`, set
/// only once the leaf's token checked out), with observations. Returns the events that
/// count and the targets no run covered.
pub fn evidence(
    events: &[Event],
    leaf: &LeafRecord,
    targets: &[String],
) -> (Vec<i64>, Vec<String>) {
    let runs: Vec<&Event> = events
        .iter()
        .filter(|e| {
            e.id > leaf.event_id
                && (e.payload["leaf"] == leaf.leaf_id.as_str()
                    || e.payload["leaf_id"] == leaf.leaf_id.as_str())
                && !e.kind.starts_with("leaf_")
                && !e.kind.starts_with("verdict_")
        })
        .collect();
    let mut used = Vec::new();
    let mut missing = Vec::new();
    for target in targets {
        let covering: Vec<i64> = runs
            .iter()
            .filter(|e| observed_ids(e).iter().any(|id| same_test(id, target)))
            .map(|e| e.id)
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
    match check(&events, leaf, decision) {
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

fn check(events: &[Event], leaf: &LeafRecord, decision: Decision) -> Result<Vec<i64>, Refusal> {
    let id = leaf.leaf_id.as_str();
    if leaf.role != Role::Verifier {
        return Err(Refusal::NotVerifier {
            leaf_id: id.to_string(),
            role: leaf.role,
        });
    }
    let of_leaf = |kind: &str| {
        events
            .iter()
            .any(|e| e.kind == kind && e.payload["leaf_id"] == id)
    };
    if of_leaf("verdict_recorded") {
        return Err(Refusal::AlreadyGiven {
            leaf_id: id.to_string(),
        });
    }
    if of_leaf("leaf_finished") || of_leaf("leaf_aborted") {
        return Err(Refusal::LeafOver {
            leaf_id: id.to_string(),
        });
    }
    let latest = events
        .iter()
        .rfind(|e| {
            e.kind == "leaf_prepared"
                && e.payload["role"] == "verifier"
                && e.payload["issue"] == leaf.issue
                && e.payload["step"] == leaf.step
                && e.payload["phase"] == leaf.phase.as_str()
        })
        .and_then(|e| e.payload["leaf_id"].as_str());
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
    Ok(ledger
        .events_of_kind(None, "verdict_recorded")?
        .iter()
        .find(|e| e.payload["leaf_id"] == leaf_id)
        .and_then(|e| serde_json::from_value(e.payload.clone()).ok()))
}
