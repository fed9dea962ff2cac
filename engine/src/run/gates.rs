//! The gate decisions, as pure functions of observations.
//!
//! Nothing here runs a process: the engine observes, then asks these
//! functions what the observation allows. That keeps every rule testable
//! and makes "no transition without an observation" structural.

use std::collections::BTreeSet;

use serde::Serialize;

use super::phase::Verb;
use super::state::Baseline;
use crate::config::AdapterKind;
use crate::observe::FailureKind;
use crate::observe::Observation;
use crate::observe::TargetStatus;
use crate::observe::TargetVerdict;

/// A refusal: why, what to do, and the evidence in words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refused {
    /// The machine-readable reason.
    pub reason: &'static str,
    /// What to do next.
    pub verb: Verb,
    /// The evidence: failure message, runner error or list of tests.
    pub detail: String,
}

fn refused(reason: &'static str, verb: Verb, detail: impl Into<String>) -> Refused {
    Refused {
        reason,
        verb,
        detail: detail.into(),
    }
}

/// What the RED gate concluded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum RedDecision {
    /// A valid red: the target failed while running its own body.
    Red {
        /// The kind of failure, recorded for the verifier and the friction log.
        kind: FailureKind,
        /// The failure message.
        message: String,
    },
    /// The target passed on arrival.
    PassedOnArrival,
    /// Not a valid red.
    Refuse(Refused),
}

/// Decides RED from the target's verdict and the failure kind the observation recorded.
pub fn red_gate(
    adapter: AdapterKind,
    verdict: &TargetVerdict,
    kind: Option<FailureKind>,
) -> RedDecision {
    let detail = verdict.detail.clone().unwrap_or_default();
    let compiled = matches!(adapter, AdapterKind::Cargo | AdapterKind::Go);
    match verdict.status {
        TargetStatus::Passed => RedDecision::PassedOnArrival,
        TargetStatus::FailedAssertion => RedDecision::Red {
            kind: FailureKind::Assertion,
            message: detail,
        },
        TargetStatus::FailedError => match kind {
            Some(FailureKind::Exception) | Some(FailureKind::Assertion) => RedDecision::Red {
                kind: kind.unwrap_or(FailureKind::Exception),
                message: detail,
            },
            Some(FailureKind::Timeout) => {
                RedDecision::Refuse(refused("target_timed_out", Verb::WriteTest, detail))
            }
            Some(FailureKind::Collection) | None => {
                RedDecision::Refuse(refused("import_error", Verb::CreateStub, detail))
            }
            Some(FailureKind::Compile) => compile_red(compiled, detail),
        },
        TargetStatus::CompileError => compile_red(compiled, detail),
        TargetStatus::NotFound => RedDecision::Refuse(refused(
            "target_not_found",
            Verb::WriteTest,
            format!("{} is not among the collected tests", verdict.id),
        )),
        TargetStatus::NotRun => RedDecision::Refuse(refused(
            "target_not_run",
            Verb::WriteTest,
            format!("{} was collected but did not run (skipped?)", verdict.id),
        )),
        TargetStatus::RunnerError => {
            RedDecision::Refuse(refused("runner_error", Verb::ResolveBlocker, detail))
        }
    }
}

fn compile_red(compiled: bool, detail: String) -> RedDecision {
    if compiled {
        RedDecision::Red {
            kind: FailureKind::Compile,
            message: detail,
        }
    } else {
        RedDecision::Refuse(refused("import_error", Verb::CreateStub, detail))
    }
}

/// The failures of a suite run that the baseline does not excuse, and the tests that
/// passed before the run and were skipped in it (a skip the implementation asked for at
/// run time hides a broken test as well as a failure would).
pub fn regressions(
    observation: &Observation,
    baseline: Option<&Baseline>,
    target: &str,
) -> Vec<(String, String)> {
    let excused: BTreeSet<&str> = baseline
        .map(|b| b.failing.iter().map(String::as_str).collect())
        .unwrap_or_default();
    let passed_before = |id: &str| baseline.is_some_and(|b| b.passing.contains(id));
    observation
        .tests
        .iter()
        .filter(|(id, _)| id.as_str() != target)
        .filter_map(|(id, r)| {
            let why = || {
                r.failure
                    .as_ref()
                    .map(|f| f.message.clone())
                    .unwrap_or_default()
            };
            match r.outcome {
                crate::observe::Outcome::Failed | crate::observe::Outcome::Error
                    if !excused.contains(id.as_str()) =>
                {
                    Some((id.clone(), why()))
                }
                crate::observe::Outcome::Skipped if passed_before(id) => Some((
                    id.clone(),
                    format!("passed before the run, skipped now: {}", why())
                        .trim_end_matches([':', ' '])
                        .to_string(),
                )),
                _ => None,
            }
        })
        .collect()
}

/// Decides GREEN (and the suite part of REFACTOR) from one full-suite observation.
pub fn green_gate(
    observation: &Observation,
    verdict: &TargetVerdict,
    baseline: Option<&Baseline>,
) -> Result<(), Refused> {
    if let Some(error) = &observation.runner_error {
        return Err(refused("runner_error", Verb::ResolveBlocker, error.clone()));
    }
    if verdict.status != TargetStatus::Passed {
        let status = serde_json::to_value(verdict.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let detail = format!(
            "{} is {status}: {}",
            verdict.id,
            verdict.detail.clone().unwrap_or_default()
        );
        return Err(refused("target_failing", Verb::WriteImplementation, detail));
    }
    suite_rest(observation, baseline, &verdict.id)
}

/// The suite part of a close with no target (refactor cycles, downstream projects): green
/// apart from the baseline.
pub fn suite_gate(observation: &Observation, baseline: Option<&Baseline>) -> Result<(), Refused> {
    if let Some(error) = &observation.runner_error {
        return Err(refused("runner_error", Verb::ResolveBlocker, error.clone()));
    }
    suite_rest(observation, baseline, "")
}

/// What every suite must satisfy besides its target: everything loads, something ran, and
/// every failure other than `target` is excused by the baseline.
fn suite_rest(
    observation: &Observation,
    baseline: Option<&Baseline>,
    target: &str,
) -> Result<(), Refused> {
    let excused = |scope: &str| baseline.is_some_and(|b| b.broken.contains(scope));
    let broken: Vec<String> = observation
        .collection_errors
        .iter()
        .filter(|e| !excused(&e.scope))
        .map(|e| format!("{}: {}", e.scope, e.message))
        .collect();
    if !broken.is_empty() {
        let detail = broken;
        return Err(refused(
            "collection_error",
            Verb::FixRegression,
            detail.join("\n"),
        ));
    }
    if observation.totals.passed == 0 {
        return Err(refused(
            "no_tests_ran",
            Verb::ResolveBlocker,
            "zero tests passed; an empty run is never green",
        ));
    }
    let regressions = regressions(observation, baseline, target);
    if !regressions.is_empty() {
        let detail: Vec<String> = regressions
            .iter()
            .map(|(id, msg)| format!("{id}: {msg}"))
            .collect();
        return Err(refused(
            "regression",
            Verb::FixRegression,
            detail.join("\n"),
        ));
    }
    Ok(())
}
