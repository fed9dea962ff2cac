//! Property tests of the phase machine: gates and the event projection.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::json;

use super::gates::RedDecision;
use super::gates::green_gate;
use super::gates::red_gate;
use super::phase::Phase;
use super::state::Baseline;
use super::state::RunState;
use super::state::RunStatus;
use crate::config::AdapterKind;
use crate::ledger::Event;
use crate::observe::Failure;
use crate::observe::FailureKind;
use crate::observe::Observation;
use crate::observe::Outcome;
use crate::observe::TargetStatus;
use crate::observe::TargetVerdict;
use crate::observe::TestResult;
use crate::observe::Totals;

/// The engine's own kinds: every other kind is unknown to these tests.
const RUN: crate::ledger::Kinds = crate::ledger::Kinds::new(&[(
    <super::RunEvent as crate::ledger::TypedEvent>::DOMAIN,
    <super::RunEvent as crate::ledger::TypedEvent>::KINDS,
)]);

fn status() -> impl Strategy<Value = TargetStatus> {
    prop_oneof![
        Just(TargetStatus::Passed),
        Just(TargetStatus::FailedAssertion),
        Just(TargetStatus::FailedError),
        Just(TargetStatus::CompileError),
        Just(TargetStatus::NotFound),
        Just(TargetStatus::NotRun),
        Just(TargetStatus::RunnerError),
    ]
}

fn kind() -> impl Strategy<Value = Option<FailureKind>> {
    prop_oneof![
        Just(None),
        Just(Some(FailureKind::Assertion)),
        Just(Some(FailureKind::Exception)),
        Just(Some(FailureKind::Collection)),
        Just(Some(FailureKind::Compile)),
        Just(Some(FailureKind::Timeout)),
    ]
}

fn adapter() -> impl Strategy<Value = AdapterKind> {
    proptest::sample::select(AdapterKind::ALL.to_vec())
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        Just(Outcome::Passed),
        Just(Outcome::Failed),
        Just(Outcome::Error),
        Just(Outcome::Skipped)
    ]
}

fn observation(tests: BTreeMap<String, Outcome>, runner_error: bool) -> Observation {
    let mut totals = Totals::default();
    let tests: BTreeMap<String, TestResult> = tests
        .into_iter()
        .map(|(id, outcome)| {
            totals.total += 1;
            match outcome {
                Outcome::Passed => totals.passed += 1,
                Outcome::Failed => totals.failed += 1,
                Outcome::Error => totals.errors += 1,
                Outcome::Skipped => totals.skipped += 1,
            }
            let failure = matches!(outcome, Outcome::Failed | Outcome::Error).then(|| Failure {
                kind: FailureKind::Assertion,
                message: "boom".into(),
            });
            (id, TestResult { outcome, failure })
        })
        .collect();
    Observation {
        project: "app".into(),
        adapter: AdapterKind::Pytest,
        invocations: Vec::new(),
        wall_ms: 1,
        tests,
        collection_errors: Vec::new(),
        totals,
        runner_counts: None,
        runner_error: runner_error.then(|| "runner crashed".to_string()),
        diagnostics: Vec::new(),
    }
}

proptest! {
    /// RED is only ever an assertion, an exception, or a compile error in a compiled language.
    #[test]
    fn red_is_only_a_failure_of_the_tests_own_body(adapter in adapter(), status in status(), kind in kind()) {
        let verdict = TargetVerdict { id: "app::t".into(), status, detail: None, matched: Vec::new() };
        if let RedDecision::Red { kind: red_kind, .. } = red_gate(adapter, &verdict, kind) {
            let compiled = matches!(adapter, AdapterKind::Cargo | AdapterKind::Go);
            let allowed = match status {
                TargetStatus::FailedAssertion => true,
                TargetStatus::FailedError => matches!(kind, Some(FailureKind::Exception | FailureKind::Assertion))
                    || (compiled && kind == Some(FailureKind::Compile)),
                TargetStatus::CompileError => compiled,
                _ => false,
            };
            prop_assert!(allowed, "{status:?}/{kind:?} on {adapter:?} was taken as red ({red_kind:?})");
        }
    }

    /// GREEN never passes while the target fails, nothing ran, the runner failed, or a
    /// test that was not failing at baseline fails.
    #[test]
    fn green_never_hides_a_failure(
        tests in proptest::collection::btree_map("app::t[0-9]", outcome(), 0..6),
        baseline_failing in proptest::collection::btree_set("app::t[0-9]", 0..3),
        target_status in status(),
        runner_error in any::<bool>(),
    ) {
        let obs = observation(tests.clone(), runner_error);
        let baseline = Baseline { failing: baseline_failing.clone(), ..Default::default() };
        let verdict = TargetVerdict { id: "app::target".into(), status: target_status, detail: None, matched: Vec::new() };
        if green_gate(&obs, &verdict, Some(&baseline)).is_ok() {
            prop_assert_eq!(target_status, TargetStatus::Passed);
            prop_assert!(!runner_error);
            prop_assert!(obs.totals.passed > 0);
            for (id, outcome) in &tests {
                if matches!(outcome, Outcome::Failed | Outcome::Error) {
                    prop_assert!(baseline_failing.contains(id), "{id} fails and was not failing at baseline");
                }
            }
        }
    }

    /// The projection never panics, moves a phase only on an observed transition, a skip
    /// or a recorded rollback (which may reopen a closed cycle), and calls a run complete
    /// exactly when every cycle is closed or skipped.
    #[test]
    fn projection_moves_only_on_observed_transitions(steps in proptest::collection::vec((0u8..9, 1u32..4, any::<bool>(), 0u8..7), 0..40)) {
        let mut first = started();
        first["pinned_env"] = json!(crate::observe::hermetic::PinnedEnv::default());
        let mut events = vec![event(1, "run_started", first)];
        for (i, (kind, n, observed, to)) in steps.iter().enumerate() {
            let to = [Phase::AwaitingTest, Phase::AwaitingImpl, Phase::AwaitingRefactor, Phase::AwaitingPin, Phase::SensitivityRequired, Phase::Closed, Phase::Skipped][*to as usize % 7];
            let observations = if *observed { json!([any_observation()]) } else { json!([]) };
            let (k, payload) = match kind {
                0 => ("phase_changed", changed_payload(*n, to, observations, None)),
                1 => ("advance_refused", refused_payload(*n)),
                2 => ("cycle_skipped", json!({ "n": n, "reason": "r" })),
                3 => ("annotation", json!({ "n": n, "key": "k", "value": "v" })),
                4 => ("note", json!({ "n": n, "text": "t" })),
                5 => ("rolled_back", json!({ "n": n, "from": Phase::AwaitingImpl, "to": to, "snapshot": "s", "head": "h", "undone_from": if *observed { "c" } else { "h" }, "restored": [], "removed": [] })),
                6 => ("cycle_opened", json!({ "n": n, "phase": to, "snapshot": "s", "head": "h" })),
                7 => {
                    // Leaving GREEN: its suite's test ids are what the run knows of.
                    let mut payload = changed_payload(*n, to, observations, None);
                    payload["from"] = json!(Phase::AwaitingImpl);
                    ("phase_changed", payload)
                }
                _ => ("garbage", json!(null)),
            };
            events.push(event(i as i64 + 2, k, payload));
            if k == "garbage" {
                // An unknown kind is an error naming the event, never skipped.
                let err = RunState::project(&events, &RUN).expect_err("an unknown kind is refused");
                prop_assert!(err.to_string().contains(&format!("event {}", i + 2)), "{err}");
                events.pop();
                continue;
            }
            let before = RunState::project(&events[..events.len() - 1], &RUN).expect("projects").expect("a run");
            let after = RunState::project(&events, &RUN).expect("projects").expect("a run");
            // The state kept between commands, read back and moved by the new event, is
            // the state projected from every event.
            let kept = serde_json::to_vec(&before.keep()).expect("kept");
            let mut resumed = RunState::from_kept(serde_json::from_slice(&kept).expect("read back"));
            resumed.follow(events.last().expect("an event"), &RUN).expect("follows");
            prop_assert_eq!(&resumed, &after);
            for (b, a) in before.cycles.iter().zip(&after.cycles) {
                if b.phase != a.phase {
                    let moved_by = (k == "phase_changed" && *observed)
                        || (k == "cycle_skipped" && a.phase == Phase::Skipped)
                        || (k == "rolled_back" && a.phase == to);
                    prop_assert!(moved_by, "{k} moved cycle {} from {} to {}", a.n, b.phase, a.phase);
                }
            }
            let all_final = after.cycles.iter().all(|c| c.phase.is_final());
            prop_assert_eq!(after.status == RunStatus::Completed, all_final);
        }
    }
}

/// A valid observation's JSON, as a `phase_changed` carries.
fn any_observation() -> serde_json::Value {
    json!(observation(
        BTreeMap::from([("app::t".to_string(), Outcome::Passed)]),
        false
    ))
}

/// A complete `phase_changed` payload.
fn changed_payload(
    n: u32,
    to: Phase,
    observations: serde_json::Value,
    committed: Option<(&str, &str)>,
) -> serde_json::Value {
    json!({
        "n": n, "from": Phase::AwaitingTest, "to": to, "observations": observations,
        "snapshot": "s", "head": "h", "files": [], "red": null,
        "commit": committed.map(|(_, c)| c), "committed_phase": committed.map(|(p, _)| p),
    })
}

/// A complete `advance_refused` payload.
fn refused_payload(n: u32) -> serde_json::Value {
    json!({
        "n": n, "phase": Phase::AwaitingTest, "detail": "d", "observations": [],
        "refusal": { "reason": "x", "verb": "write_test", "tree": "t" },
    })
}

fn event(id: i64, kind: &str, payload: serde_json::Value) -> Event {
    Event {
        id,
        run_id: Some("run".into()),
        kind: kind.into(),
        payload,
        at: String::new(),
        prev_hash: String::new(),
        hash: String::new(),
    }
}

fn started() -> serde_json::Value {
    let cycle = |n: u32| {
        json!({
            "n": n, "title": "t", "kind": "standard", "projects": ["app"], "tests": ["app::t"],
            "files": [], "stub_expected": [], "modifies_tests": [], "commit_red": null, "commit_green": null,
            "commit_refactor": null, "commit_pin": null, "criterion": null, "meta": null,
        })
    };
    json!({
        "worktree": "/w", "contract": { "path": "p.md", "blob": "b", "sha256": "s" },
        "plan": { "cycles": [cycle(1), cycle(2), cycle(3)], "annotation_keys": [], "ancillary_files": [] },
        "config_sha": "c", "start_sha": "h",
    })
}

/// The verdict of a target `app::target` that passed.
fn target_passed() -> TargetVerdict {
    TargetVerdict {
        id: "app::target".into(),
        status: TargetStatus::Passed,
        detail: None,
        matched: Vec::new(),
    }
}

/// A test red at baseline (as a declared known failure is) stays excused through GREEN and
/// the REFACTOR sweep, while a test that newly fails still blocks both as a regression.
#[test]
fn a_failure_red_at_baseline_blocks_no_gate_but_a_new_failure_does() {
    let baseline: Baseline = serde_json::from_value(json!({
        "project": "app",
        "failing": ["app::declared"],
        "passing": ["app::ok"],
        "broken": [],
        "declared": ["app::declared"],
        "undeclared": [],
        "unmatched_known_failures": [],
    }))
    .expect("a baseline_captured payload with the declared split still reads as a baseline");
    let verdict = target_passed();
    let mut tests = BTreeMap::from([
        ("app::target".to_string(), Outcome::Passed),
        ("app::ok".to_string(), Outcome::Passed),
        ("app::declared".to_string(), Outcome::Failed),
    ]);
    let still_red = observation(tests.clone(), false);
    assert_eq!(green_gate(&still_red, &verdict, Some(&baseline)), Ok(()));
    assert_eq!(
        super::gates::suite_gate(&still_red, Some(&baseline)),
        Ok(())
    );
    tests.insert("app::ok".to_string(), Outcome::Failed);
    let regressed = observation(tests, false);
    for refusal in [
        green_gate(&regressed, &verdict, Some(&baseline)),
        super::gates::suite_gate(&regressed, Some(&baseline)),
    ] {
        let refusal = refusal.expect_err("a new failure blocks");
        assert_eq!(refusal.reason, "regression");
        assert!(refusal.detail.contains("app::ok"), "{}", refusal.detail);
        assert!(
            !refusal.detail.contains("app::declared"),
            "{}",
            refusal.detail
        );
    }
}

/// A test that passed before the run and is skipped in a later suite (the
/// implementation calling `pytest.skip()` in it) is a regression like a failure; one
/// skipped at baseline too, or never seen there, is not.
#[test]
fn a_test_green_at_baseline_and_skipped_now_is_a_regression() {
    let baseline: Baseline = serde_json::from_value(json!({
        "failing": [],
        "passing": ["app::ok", "app::hidden"],
        "broken": [],
    }))
    .expect("a baseline");
    let verdict = target_passed();
    let mut tests = BTreeMap::from([
        ("app::target".to_string(), Outcome::Passed),
        ("app::ok".to_string(), Outcome::Passed),
        ("app::hidden".to_string(), Outcome::Passed),
        ("app::new_skip".to_string(), Outcome::Skipped),
    ]);
    let green = observation(tests.clone(), false);
    assert_eq!(green_gate(&green, &verdict, Some(&baseline)), Ok(()));
    tests.insert("app::hidden".to_string(), Outcome::Skipped);
    let skipped = observation(tests, false);
    for refusal in [
        green_gate(&skipped, &verdict, Some(&baseline)),
        super::gates::suite_gate(&skipped, Some(&baseline)),
    ] {
        let refusal = refusal.expect_err("a skip of a green test blocks");
        assert_eq!(refusal.reason, "regression");
        assert!(
            refusal
                .detail
                .contains("app::hidden: passed before the run, skipped now"),
            "{}",
            refusal.detail
        );
        assert!(
            !refusal.detail.contains("app::new_skip"),
            "{}",
            refusal.detail
        );
    }
}

/// A closed cycle's REFACTOR reopened while the next cycle had opened (and been refused
/// once): the run is active again at that REFACTOR, its commit is gone, and when it
/// closes again the next cycle opens afresh, with nothing of its first opening.
#[test]
fn a_reopened_refactor_closes_again_and_the_next_cycle_opens_afresh() {
    let changed = |to: Phase, committed: Option<(&str, &str)>| {
        changed_payload(1, to, json!([any_observation()]), committed)
    };
    let mut events = vec![
        event(1, "run_started", started()),
        event(
            2,
            "cycle_opened",
            json!({ "n": 1, "phase": Phase::AwaitingTest, "snapshot": "s0", "head": "h0" }),
        ),
        event(
            3,
            "phase_changed",
            changed(Phase::AwaitingImpl, Some(("red", "r"))),
        ),
        event(
            4,
            "phase_changed",
            changed(Phase::AwaitingRefactor, Some(("green", "g"))),
        ),
        event(
            5,
            "phase_changed",
            changed(Phase::Closed, Some(("refactor", "f1"))),
        ),
        event(
            6,
            "cycle_opened",
            json!({ "n": 2, "phase": Phase::AwaitingTest, "snapshot": "s2", "head": "f1" }),
        ),
        event(7, "advance_refused", refused_payload(2)),
        event(
            8,
            "rolled_back",
            json!({ "n": 1, "from": Phase::Closed, "to": Phase::AwaitingRefactor, "snapshot": "s", "head": "g", "undone_from": "f1", "restored": [], "removed": [] }),
        ),
    ];
    let reopened = RunState::project(&events, &RUN)
        .expect("projects")
        .expect("a run");
    assert_eq!(reopened.status, RunStatus::Active);
    assert_eq!(reopened.current(), Some(0));
    assert_eq!(reopened.cycles[0].phase, Phase::AwaitingRefactor);
    let tags: Vec<&str> = reopened.cycles[0]
        .commits
        .iter()
        .map(|(t, _)| t.as_str())
        .collect();
    assert_eq!(tags, ["red", "green"]);
    events.push(event(
        9,
        "phase_changed",
        changed(Phase::Closed, Some(("refactor", "f2"))),
    ));
    events.push(event(
        10,
        "cycle_opened",
        json!({ "n": 2, "phase": Phase::AwaitingTest, "snapshot": "s3", "head": "f2" }),
    ));
    let closed = RunState::project(&events, &RUN)
        .expect("projects")
        .expect("a run");
    assert_eq!(closed.current(), Some(1));
    let next = &closed.cycles[1];
    assert!(next.refusal.is_none());
    assert_eq!(next.attempts, 0);
    assert_eq!(next.snapshot.as_deref(), Some("s3"));
    assert_eq!(next.history.len(), 1);
    assert_eq!(next.history[0].head, "f2");
    assert_eq!(
        closed.cycles[0].commits.last().map(|(_, c)| c.as_str()),
        Some("f2")
    );
}

/// The demo ledger the last release wrote (the first schema) opened for writing is
/// brought to this schema (the indexes by kind), its chain untouched, and it takes new
/// events.
#[test]
fn a_ledger_of_the_first_schema_is_brought_up_to_date_when_opened_for_writing() {
    let (_dir, copy) = tdd_testutil::demo_ledger();
    let mut ledger = crate::ledger::Ledger::open(&copy).expect("opens");
    assert_eq!(
        ledger.schema_version().expect("version"),
        crate::ledger::SCHEMA_VERSION
    );
    assert_eq!(ledger.verify().expect("verifies").broken, None);
    assert_eq!(ledger.count().expect("counts"), 187);
    let note = crate::run::RunEvent::Note(crate::run::events::Note {
        n: None,
        text: "after the migration".into(),
    });
    ledger.record(None, &note).expect("appends");
    assert_eq!(ledger.verify().expect("verifies").broken, None);
    assert_eq!(ledger.count().expect("counts"), 188);
}
