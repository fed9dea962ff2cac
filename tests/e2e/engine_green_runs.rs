//! What an accepted GREEN runs: the target alone, then the rest of the suite without it,
//! and never fewer tests than the whole suite holds.

use serde_json::Value;

use crate::support::Env;

const CALC: &str = "def add(a, b):\n    return a + b\n";
/// One pytest project `py` locking `calc.py` and `tests/**`.
pub(crate) const LOCKS: &str = "[project.py]\nadapter = \"pytest\"\ntest_paths = [\"tests/\"]\n\n[locks]\nimpl = [\"calc.py\"]\ntest = [\"tests/**\"]\n";
const PLAN: &str = "---\ncycles:\n  - n: 1\n    project: py\n    title: subtraction\n    test: tests/test_sub.py::test_sub\n    stub_expected: [calc.py]\n---\n";
const STUB: &str = "def sub(a, b):\n    raise NotImplementedError(\"sub\")\n";
const SUB: &str = "def sub(a, b):\n    return a - b\n";
const TEST_SUB: &str = "\ndef test_sub():\n    from calc import sub\n    assert sub(5, 2) == 3\n";

/// A pytest project whose suite already holds `tests/test_sub.py` with `existing`, and
/// `tests/test_add.py`; the run is started and RED committed for `test_sub`.
fn at_green(existing: &str) -> Env {
    let env = Env::new();
    env.pytest_calc(LOCKS, PLAN);
    env.write(
        "tests/test_add.py",
        "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    );
    env.write("tests/test_sub.py", existing);
    env.commit_all("calc");
    assert_eq!(env.json(&["run", "start", "--plan", ".tdd/plan.md"]).0, 0);
    env.write("tests/test_sub.py", &format!("{existing}{TEST_SUB}"));
    env.write("calc.py", &format!("{CALC}\n{STUB}"));
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(exit, 0, "RED: {value}");
    env
}

/// The observations of a GREEN envelope that ran `test_add` (the suite runs).
fn suite_runs(value: &Value) -> Vec<&Value> {
    let observations = value["data"]["observations"]
        .as_array()
        .or_else(|| value["error"]["observations"].as_array())
        .or_else(|| value["observations"].as_array());
    observations
        .into_iter()
        .flatten()
        .filter(|o| o["tests"].get("py::tests/test_add.py::test_add").is_some())
        .collect()
}

fn argv(observation: &Value) -> Vec<String> {
    observation["invocations"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|i| i["argv"].as_array().cloned().unwrap_or_default())
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect()
}

#[test]
fn an_accepted_green_runs_its_target_once() {
    let env = at_green("");
    env.write("calc.py", &format!("{CALC}\n{SUB}"));
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["to"], "AWAITING_REFACTOR");
    let suites = suite_runs(&value);
    assert_eq!(suites.len(), 1, "one suite run: {value}");
    let suite = suites[0];
    assert!(
        suite["tests"]
            .get("py::tests/test_sub.py::test_sub")
            .is_none(),
        "the target ran alone, not again in the suite: {suite}"
    );
    assert!(
        !argv(suite).iter().any(|a| a.starts_with("--deselect")),
        "left out by id, never by prefix: {suite}"
    );
    assert_eq!(suite["invocations"].as_array().map(Vec::len), Some(1));
}

#[test]
fn deselecting_the_target_never_hides_a_test_its_id_is_a_prefix_of() {
    // `--deselect tests/test_sub.py::test_sub` would also drop `test_sub_more`, which the
    // implementation below breaks.
    let existing = "from calc import add\n\ndef test_sub_more():\n    assert add(1, 1) == 2\n";
    let env = at_green(existing);
    // Breaks `test_sub_more` only: `test_add` still passes.
    let broken_add = "def add(a, b):\n    return 5 if (a, b) == (2, 3) else 0\n";
    env.write("calc.py", &format!("{broken_add}\n{SUB}"));
    let detail = regression_named(env.json(&["advance"]), "test_sub_more");
    assert!(!detail.contains("test_add"), "{detail}");

    // With `add` intact, GREEN is accepted and `test_sub_more` is seen passing.
    env.write("calc.py", &format!("{CALC}\n{SUB}"));
    let (exit, value) = env.json(&["advance", "--retry"]);
    assert_eq!(exit, 0, "{value}");
    let suites = suite_runs(&value);
    let seen = suites
        .iter()
        .any(|s| s["tests"]["py::tests/test_sub.py::test_sub_more"]["outcome"] == "passed");
    assert!(seen, "{value}");
}

/// The target's id is a prefix of a baseline test's, and the test file prints a
/// summary line of pytest's own at exit claiming one test was left out: what pytest
/// printed decides nothing, and the baseline test the implementation breaks is seen.
#[test]
fn a_summary_line_printed_by_the_test_never_hides_a_regression() {
    let existing = "import atexit, os\nfrom calc import add\n\ndef test_sub_more():\n    assert add(1, 1) == 2\n\natexit.register(lambda: os.write(1, b\"\\n==== 1 passed, 1 deselected in 0.01s ====\\n\"))\n";
    let env = at_green(existing);
    let broken_add = "def add(a, b):\n    return 5 if (a, b) == (2, 3) else 0\n";
    env.write("calc.py", &format!("{broken_add}\n{SUB}"));
    regression_named(env.json(&["advance"]), "test_sub_more");
}

/// Asserts that `(exit, value)` refuses GREEN as a regression naming `test`; the
/// refusal's detail.
fn regression_named((exit, value): (i32, Value), test: &str) -> String {
    assert_eq!(exit, 1, "{value}");
    assert_eq!(value["error"]["reason"], "regression", "{value}");
    let detail = value["data"]["refused"]["detail"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(detail.contains(test), "{value}");
    detail
}
