//! The phase machine under proptest, for real: random sequences of file changes and
//! `advance` on a pytest repository, with the engine's invariants checked after every step.
//!
//! - no transition without an observation;
//! - no RED commit unless the target failed while running its own body;
//! - no GREEN commit while a test that was green at baseline fails;
//! - no file locked in the judged phase is left changed after an advance;
//! - the ledger chain always verifies.

use std::path::PathBuf;

use proptest::prelude::*;
use proptest::test_runner::Config;
use proptest::test_runner::TestRunner;
use serde_json::Value;
use tdd_engine::ledger::Ledger;

use crate::support::Env;

const CALC: &str = "def add(a, b):\n    return a + b\n";
const PLAN: &str = "---\ncycles:\n  - n: 1\n    project: py\n    title: subtraction\n    test: tests/test_sub.py::test_sub\n  - n: 2\n    project: py\n    title: multiplication\n    test: tests/test_mul.py::test_mul\n---\n";

/// One thing an agent (or a cheat) might do.
#[derive(Debug, Clone, Copy)]
enum Action {
    WriteSubTest,
    WriteMulTest,
    WeakenSubTest,
    DeleteSubTest,
    ImplementSub,
    ImplementMul,
    BreakAdd,
    Advance,
    AdvanceRetry,
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        1 => Just(Action::WriteSubTest),
        1 => Just(Action::WriteMulTest),
        1 => Just(Action::WeakenSubTest),
        1 => Just(Action::DeleteSubTest),
        1 => Just(Action::ImplementSub),
        1 => Just(Action::ImplementMul),
        1 => Just(Action::BreakAdd),
        4 => Just(Action::Advance),
        1 => Just(Action::AdvanceRetry),
    ]
}

fn project() -> Env {
    let env = Env::new();
    env.write("calc.py", CALC);
    env.write("pytest.ini", "[pytest]\npythonpath = .\n");
    env.write(".gitignore", "__pycache__/\n.pytest_cache/\n");
    env.write("tdd.toml", "[project.py]\nadapter = \"pytest\"\ntest_paths = [\"tests/\"]\n\n[locks]\nimpl = [\"calc.py\"]\ntest = [\"tests/**\"]\n");
    env.write(
        "tests/test_add.py",
        "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    );
    env.write(".tdd/plan.md", PLAN);
    env.commit_all("calc");
    env
}

fn apply(env: &Env, action: Action) {
    let calc = std::fs::read_to_string(env.root().join("calc.py")).unwrap_or_default();
    match action {
        Action::WriteSubTest => {
            env.write(
                "tests/test_sub.py",
                "from calc import *\n\ndef test_sub():\n    assert sub(5, 2) == 3\n",
            );
        }
        Action::WriteMulTest => {
            env.write(
                "tests/test_mul.py",
                "from calc import *\n\ndef test_mul():\n    assert mul(3, 4) == 12\n",
            );
        }
        Action::WeakenSubTest => {
            env.write("tests/test_sub.py", "def test_sub():\n    assert True\n");
        }
        Action::DeleteSubTest => {
            let _ = std::fs::remove_file(env.root().join("tests/test_sub.py"));
        }
        Action::ImplementSub if !calc.contains("def sub") => {
            env.write(
                "calc.py",
                &format!("{calc}\ndef sub(a, b):\n    return a - b\n"),
            );
        }
        Action::ImplementMul if !calc.contains("def mul") => {
            env.write(
                "calc.py",
                &format!("{calc}\ndef mul(a, b):\n    return a * b\n"),
            );
        }
        Action::BreakAdd => {
            env.write("calc.py", &calc.replace("return a + b", "return a + b + 1"));
        }
        _ => {}
    }
}

fn events(env: &Env) -> Vec<tdd_engine::ledger::Event> {
    let (_, value) = env.json(&["ledger", "path"]);
    let database = PathBuf::from(value["data"]["database"].as_str().unwrap_or_default());
    match Ledger::open_read_only(&database) {
        Ok(Some(ledger)) => ledger.events(None).expect("events"),
        _ => Vec::new(),
    }
}

fn locked_in(phase: &str) -> &'static [&'static str] {
    match phase {
        "AWAITING_TEST" => &["calc.py"],
        "AWAITING_IMPL" | "AWAITING_REFACTOR" => &["tests"],
        _ => &[],
    }
}

/// Runs one advance and checks every invariant; returns an error describing a violation.
fn advance_and_check(env: &Env, retry: bool) -> Result<(), TestCaseError> {
    let (_, status) = env.json(&["status"]);
    let phase = status["data"]["cycle"]["phase"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let head = env.git(&["rev-parse", "HEAD"]).trim().to_string();
    let args: &[&str] = if retry {
        &["advance", "--retry"]
    } else {
        &["advance"]
    };
    let (exit, value) = env.json(args);
    prop_assert!(exit == 0 || exit == 1, "advance exited {exit}: {value}");
    for path in locked_in(&phase) {
        let diff = env.git(&["diff", &head, "--name-only", "--", path]);
        let untracked = env.git(&["ls-files", "--others", "--exclude-standard", "--", path]);
        prop_assert!(
            diff.trim().is_empty() && untracked.trim().is_empty(),
            "locked {path} changed after an advance at {phase}: {diff}{untracked}"
        );
    }
    let (verify, report) = env.json(&["ledger", "verify"]);
    prop_assert_eq!(verify, 0, "{}", report);
    check_events(&events(env))
}

fn check_events(events: &[tdd_engine::ledger::Event]) -> Result<(), TestCaseError> {
    let baseline_green: Vec<String> = events
        .iter()
        .filter(|e| e.kind == "baseline_captured")
        .flat_map(|e| e.payload["passing"].as_array().cloned().unwrap_or_default())
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    for event in events.iter().filter(|e| e.kind == "phase_changed") {
        let p = &event.payload;
        let observations = p["observations"].as_array().cloned().unwrap_or_default();
        prop_assert!(
            !observations.is_empty(),
            "a transition without an observation: {p}"
        );
        if p["from"] == "AWAITING_TEST" {
            let decision = &p["red"]["decision"];
            let kind = p["red"]["kind"].as_str().unwrap_or_default();
            let allowed = (decision == "red"
                && ["assertion", "exception", "compile"].contains(&kind))
                || decision == "passed_on_arrival";
            prop_assert!(allowed, "RED moved on {}", p["red"]);
        }
        if p["from"] == "AWAITING_IMPL" {
            for observation in &observations {
                for id in &baseline_green {
                    let outcome = &observation["tests"][id]["outcome"];
                    prop_assert!(
                        outcome != &Value::from("failed") && outcome != &Value::from("error"),
                        "GREEN committed while {id} fails"
                    );
                }
            }
        }
    }
    Ok(())
}

/// A fixed seed keeps CI deterministic; the sequences are still arbitrary ones.
#[test]
fn random_agents_never_break_the_invariants() {
    let config = Config {
        cases: 6,
        max_shrink_iters: 8,
        ..Config::default()
    };
    let rng = proptest::test_runner::TestRng::deterministic_rng(config.rng_algorithm);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let strategy = proptest::collection::vec(action(), 6..14);
    let transitions = std::cell::Cell::new((0usize, 0usize));
    runner
        .run(&strategy, |actions| {
            let env = project();
            let (exit, value) = env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
            prop_assert_eq!(exit, 0, "{}", value);
            for action in actions {
                match action {
                    Action::Advance => advance_and_check(&env, false)?,
                    Action::AdvanceRetry => advance_and_check(&env, true)?,
                    other => apply(&env, other),
                }
            }
            let moved = events(&env)
                .into_iter()
                .filter(|e| e.kind == "phase_changed")
                .collect::<Vec<_>>();
            let (red, green) = transitions.get();
            let from = |phase: &str| moved.iter().filter(|e| e.payload["from"] == phase).count();
            transitions.set((red + from("AWAITING_TEST"), green + from("AWAITING_IMPL")));
            Ok(())
        })
        .unwrap_or_else(|failure| panic!("{failure}"));
    let (red, green) = transitions.get();
    assert!(
        red > 0 && green > 0,
        "the sequences never moved the machine (red {red}, green {green})"
    );
}
