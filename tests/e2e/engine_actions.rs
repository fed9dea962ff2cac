//! Skip, abandon, notes, annotations, blockers and resume, end to end.

use crate::engine_cargo::LIB;
use crate::engine_cargo::PLAN;
use crate::engine_cargo::SUB_IMPL;
use crate::engine_cargo::SUB_TEST;
use crate::engine_cargo::project;
use crate::support::Env;

fn started() -> Env {
    let env = project();
    let (exit, value) = env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    assert_eq!(exit, 0, "{value}");
    env
}

#[test]
fn a_blocker_stops_the_run_visibly_until_resumed() {
    let env = started();
    let (exit, value) = env.json(&[
        "blocker",
        "--kind",
        "needs_user",
        "--detail",
        "which rounding mode?",
    ]);
    assert_eq!(exit, 0, "{value}");
    let (_, status) = env.json(&["status"]);
    assert_eq!(status["next_action"]["verb"], "blocked");
    assert_eq!(status["data"]["blocker"]["detail"], "which rounding mode?");
    let (exit, refused) = env.json(&["advance"]);
    assert_eq!(exit, 1);
    assert_eq!(refused["error"]["reason"], "run_blocked");
    let (exit, _) = env.json(&["resume", "--unblock", "--note", "half-even"]);
    assert_eq!(exit, 0);
    let (_, status) = env.json(&["status"]);
    assert_eq!(status["next_action"]["verb"], "write_test");
}

#[test]
fn skipping_every_cycle_completes_the_run_and_abandon_ends_one() {
    let env = started();
    let (exit, value) = env.json(&["cycle", "skip", "--reason", "already covered"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["cycle"]["n"], 2);
    let (exit, value) = env.json(&["cycle", "skip", "--reason", "  "]);
    assert_eq!(exit, 2);
    assert_eq!(value["error"]["reason"], "empty_argument");
    let (_, value) = env.json(&["cycle", "skip", "--reason", "out of scope"]);
    assert_eq!(value["next_action"]["verb"], "complete");
    let (_, status) = env.json(&["status"]);
    assert_eq!(status["data"]["active"], false);

    let (exit, _) = env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    assert_eq!(exit, 0);
    let (exit, again) = env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    assert_eq!(exit, 1);
    assert_eq!(again["error"]["reason"], "run_active");
    let (exit, _) = env.json(&["run", "abandon", "--reason", "wrong plan"]);
    assert_eq!(exit, 0);
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(exit, 1);
    assert_eq!(value["error"]["reason"], "no_active_run");
    assert_eq!(value["next_action"]["verb"], "start_run");
}

#[test]
fn required_annotations_gate_the_close() {
    let env = project();
    env.write(
        ".tdd/plan.md",
        &PLAN.replace(
            "---\ncycles:",
            "---\nannotation_keys: [friction_note]\ncycles:",
        ),
    );
    env.commit_all("plan needs annotations");
    env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    env.write("tests/sub.rs", SUB_TEST);
    assert_eq!(env.json(&["advance"]).0, 0);
    env.write("src/lib.rs", &format!("{LIB}{SUB_IMPL}"));
    assert_eq!(env.json(&["advance"]).0, 0);
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(exit, 1, "{value}");
    assert_eq!(value["error"]["reason"], "missing_annotations");
    assert_eq!(value["next_action"]["verb"], "annotate_cycle");
    let (exit, _) = env.json(&["annotate", "--key", "friction_note", "--value", "none"]);
    assert_eq!(exit, 0);
    env.json(&["note", "closing cycle 1"]);
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["to"], "CLOSED");
}
