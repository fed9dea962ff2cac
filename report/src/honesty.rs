//! The honesty panel: every gate decision of the run with the evidence it rests on,
//! and everything that weakens trust in it, in the order the ledger recorded them.

use serde::Deserialize;
use tdd_engine::observe::Observation;
use tdd_engine::run::events::PhaseChanged;
use tdd_engine::run::events::RunEvent;
use tdd_leaves::events::LeavesEvent;

use crate::build::RunEvents;
use crate::build::first_outcomes;
use crate::build::outcome_word;
use crate::model::Evidence;
use crate::model::Seal;

/// How RED was decided, as the engine recorded it.
#[derive(Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
enum RecordedRed {
    Red {
        kind: serde_json::Value,
        message: String,
    },
    PassedOnArrival,
    #[serde(other)]
    Other,
}

/// The evidence of every decision in `events`, then the ledger's own.
pub(crate) fn evidence(events: &RunEvents, seal: &Seal) -> Vec<Evidence> {
    let mut out = Vec::new();
    let mut push = |step: u32, phase: &str, kind: &str, ok: bool, text: String| {
        out.push(Evidence {
            step,
            phase: phase.to_string(),
            kind: kind.to_string(),
            ok,
            text,
        });
    };
    for (_, event) in &events.engine {
        match event {
            RunEvent::PhaseChanged(p) => {
                for (kind, ok, text) in phase_evidence(p) {
                    push(p.n, p.from.trailer(), kind, ok, text);
                }
            }
            RunEvent::AdvanceRefused(r) => push(
                r.n,
                r.phase.trailer(),
                "refusal",
                false,
                format!(
                    "the engine refused: {}: {}",
                    r.refusal.reason.replace('_', " "),
                    r.detail
                ),
            ),
            RunEvent::LockedFileReverted(r) => push(
                r.n,
                r.phase.trailer(),
                "revert",
                false,
                format!(
                    "locked files changed and reverted ({}): {}",
                    r.kind.replace('_', " "),
                    crate::compute::reverted_files(&r.restored, &r.removed)
                ),
            ),
            RunEvent::HookDenied(d) => push(
                d.n.unwrap_or(0),
                "",
                "hook denial",
                false,
                format!(
                    "{}'s {} was denied before it ran ({} ms): {}",
                    d.harness, d.tool, d.latency_ms, d.reason
                ),
            ),
            RunEvent::HookReverted(r) => push(
                r.n.unwrap_or(0),
                "",
                "revert",
                false,
                format!(
                    "{}'s {} changed locked files; the hook restored them right after it ran ({} ms): {}",
                    r.harness,
                    r.tool,
                    r.latency_ms,
                    crate::compute::reverted_files(&r.restored, &r.removed)
                ),
            ),
            RunEvent::DependenciesChanged(d) => push(
                d.n,
                "",
                "dependencies",
                false,
                format!(
                    "the dependencies changed, as the plan lets this cycle, and were pinned anew without being judged: {}",
                    d.changed.join("; ")
                ),
            ),
            RunEvent::RedFirstViolation(v) => push(
                v.n,
                "red",
                "red first",
                false,
                format!("passed before any implementation: {}", v.tests.join(", ")),
            ),
            RunEvent::InsensitiveTest(t) => push(
                t.n,
                "green",
                "sensitivity",
                false,
                format!(
                    "{} still passes with the implementation reverted: it does not test it",
                    t.target
                ),
            ),
            RunEvent::GreenWithoutChange(g) => push(
                g.n,
                "green",
                "warning",
                false,
                "GREEN was reached without changing the implementation".to_string(),
            ),
            RunEvent::UndeclaredFileTouched(u) => push(
                u.n,
                u.phase.trailer(),
                "warning",
                false,
                format!(
                    "files the plan did not declare were changed: {}",
                    u.files.join(", ")
                ),
            ),
            RunEvent::IndexFlagsCleared(f) => push(
                f.n,
                f.phase.trailer(),
                "warning",
                false,
                format!(
                    "git index flags that hide changes were cleared on: {}",
                    f.paths
                        .iter()
                        .map(|p| p.path.clone())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
            _ => {}
        }
    }
    for (_, event) in &events.leaves {
        match event {
            LeavesEvent::VerdictRecorded(v) => {
                let accept = matches!(v.decision, tdd_leaves::Decision::Accept);
                let runs = v.evidence.len();
                push(
                    v.step,
                    &v.phase,
                    "verdict",
                    accept,
                    format!(
                        "verifier {} {}: {} (its own runs of the target: {runs})",
                        v.leaf_id,
                        if accept { "accepts" } else { "rejects" },
                        v.reason
                    ),
                );
            }
            LeavesEvent::VerdictRefused(v) => push(
                crate::compute::step_of_leaf(&v.leaf_id).unwrap_or(0),
                "",
                "verdict",
                false,
                format!("a verdict of {} was not counted: {}", v.leaf_id, v.reason),
            ),
            _ => {}
        }
    }
    // By step, in the order recorded within each; the run as a whole last.
    out.sort_by_key(|e| if e.step == 0 { u32::MAX } else { e.step });
    out.push(Evidence {
        step: 0,
        phase: String::new(),
        kind: "ledger".into(),
        ok: seal.verified,
        text: match &seal.problem {
            None => format!("the ledger's hash chain verifies: {} events", seal.events),
            Some(problem) => format!("the ledger's hash chain does not verify: {problem}"),
        },
    });
    out
}

/// What an accepted phase rests on.
fn phase_evidence(p: &PhaseChanged) -> Vec<(&'static str, bool, String)> {
    let at = p
        .commit
        .as_deref()
        .map(|c| format!(" at {}", &c[..c.len().min(10)]))
        .unwrap_or_default();
    let mut out = Vec::new();
    match p.from.trailer() {
        "red" | "pin" => {
            let red = p
                .red
                .clone()
                .and_then(|v| serde_json::from_value::<RecordedRed>(v).ok());
            match red {
                Some(RecordedRed::Red { kind, message }) => out.push((
                    "gate",
                    true,
                    format!(
                        "the target failed before the implementation existed{at} ({}): {}",
                        kind.as_str().unwrap_or("failure").replace('_', " "),
                        first_line(&message)
                    ),
                )),
                Some(RecordedRed::PassedOnArrival) => out.push((
                    "gate",
                    false,
                    format!("the target passed on arrival{at}: RED was never seen"),
                )),
                _ => out.push(("gate", true, format!("RED accepted{at}"))),
            }
        }
        "green" => {
            out.push(suite_gate(
                &p.observations,
                "in a clean checkout of the commit",
                &at,
            ));
            out.extend(sensitivity(&p.observations));
        }
        "refactor" => out.push(suite_gate(
            &p.observations,
            "the suite in a clean checkout",
            &at,
        )),
        phase => out.push(("gate", true, format!("{phase} accepted{at}"))),
    }
    out
}

/// For each target of a GREEN, whether a later run of it with the implementation
/// reverted failed: the runs after the first that passed it.
fn sensitivity(observations: &[Observation]) -> Vec<(&'static str, bool, String)> {
    let first = first_outcomes(observations);
    let mut out = Vec::new();
    for (id, outcome) in &first {
        if outcome != "passed" {
            continue;
        }
        // Only a test run on its own (a target) is checked for sensitivity.
        let alone = observations
            .iter()
            .filter(|o| o.tests.len() == 1 && o.tests.contains_key(id))
            .count();
        if alone < 2 {
            continue;
        }
        let last = observations
            .iter()
            .rev()
            .find_map(|o| o.tests.get(id))
            .map(|r| outcome_word(&r.outcome));
        let sensitive = matches!(last, Some("failed" | "error"));
        out.push((
            "sensitivity",
            sensitive,
            if sensitive {
                format!("{id} fails with the implementation reverted: it tests the change")
            } else {
                format!("{id} was not seen failing with the implementation reverted")
            },
        ));
    }
    out
}

/// A clean-room gate's evidence: what passed and failed of `observations`.
fn suite_gate(observations: &[Observation], what: &str, at: &str) -> (&'static str, bool, String) {
    let (passed, failed) = counts(&first_outcomes(observations));
    (
        "gate",
        failed == 0,
        format!("{what}{at}: {passed} passed, {failed} failed or errored"),
    )
}

fn counts(outcomes: &std::collections::BTreeMap<String, String>) -> (usize, usize) {
    let passed = outcomes.values().filter(|o| *o == "passed").count();
    let failed = outcomes
        .values()
        .filter(|o| *o == "failed" || *o == "error")
        .count();
    (passed, failed)
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}
