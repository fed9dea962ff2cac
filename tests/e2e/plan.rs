//! `tdd plan register`: committed plans only, tdd-cli's vocabulary, positioned errors.

use crate::support::Env;

const PLAN: &str = "---\ncloses: 3\ncycles:\n  - n: 1\n    project: app\n    title: add\n    test: tests/test_calc.py::test_add\n    criterion: adding 2 and 3 gives 5\n  - n: 2\n    project: app\n    title: pin\n    test: tests/test_calc.py::test_keep\n    pin_cycle: true\n---\n# Plan\n";

fn repo() -> Env {
    let env = Env::new();
    env.write("tdd.toml", "[project.app]\nadapter = \"pytest\"\n");
    env.git(&["add", "tdd.toml"]);
    env.git(&["commit", "-qm", "config"]);
    env
}

fn commit_plan(env: &Env, text: &str) {
    env.write("docs/plan.md", text);
    env.git(&["add", "docs/plan.md"]);
    env.git(&["commit", "-qm", "plan"]);
}

#[test]
fn a_committed_plan_registers_once_and_records_its_blob() {
    let env = repo();
    commit_plan(&env, PLAN);
    let (exit, value) = env.json(&["plan", "register", "docs/plan.md"]);
    assert_eq!(exit, 0, "{value}");
    let blob = env.git(&["rev-parse", "HEAD:docs/plan.md"]);
    assert_eq!(value["data"]["contract_id"], blob.trim());
    assert_eq!(value["data"]["kinds"]["standard"], 1);
    assert_eq!(value["data"]["kinds"]["pin"], 1);
    assert_eq!(value["data"]["reused"], false);
    assert_eq!(
        value["data"]["cycles"][0]["criterion"],
        "adding 2 and 3 gives 5"
    );
    let (_, again) = env.json(&["plan", "register", "docs/plan.md"]);
    assert_eq!(again["data"]["reused"], true);
    let (_, verify) = env.json(&["ledger", "verify"]);
    assert_eq!(
        verify["data"]["events"], 1,
        "a re-registration records nothing new"
    );
}

#[test]
fn from_a_subdirectory_the_path_is_relative_to_it() {
    let env = repo();
    commit_plan(&env, PLAN);
    let (exit, value) = env.json(&["-C", "docs", "plan", "register", "plan.md"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["path"], "docs/plan.md");
}

#[test]
fn an_uncommitted_or_edited_plan_is_refused() {
    let env = repo();
    env.write("docs/plan.md", PLAN);
    let (exit, value) = env.json(&["plan", "register", "docs/plan.md"]);
    assert_eq!(exit, 1);
    assert_eq!(value["error"]["reason"], "plan_uncommitted");
    commit_plan(&env, PLAN);
    env.write("docs/plan.md", &PLAN.replace("title: add", "title: sum"));
    let (exit, value) = env.json(&["plan", "register", "docs/plan.md"]);
    assert_eq!(exit, 1);
    assert_eq!(value["error"]["reason"], "plan_uncommitted");
}

#[test]
fn malformed_front_matter_exits_2_with_plan_line_and_column() {
    let env = repo();
    commit_plan(
        &env,
        "---\ncycles:\n  - n: 1\n    project: app\n    title: t\n    tset: a::b\n---\n",
    );
    let (exit, value) = env.json(&["plan", "register", "docs/plan.md"]);
    assert_eq!(exit, 2);
    assert_eq!(value["error"]["reason"], "plan_invalid");
    assert_eq!(
        value["error"]["message"],
        "docs/plan.md:6:5: unknown key `tset`; did you mean `test`?"
    );
}

#[test]
fn a_plan_naming_an_undeclared_project_is_refused() {
    let env = repo();
    commit_plan(
        &env,
        &PLAN.replace(
            "project: app\n    title: add",
            "project: api\n    title: add",
        ),
    );
    let (exit, value) = env.json(&["plan", "register", "docs/plan.md"]);
    assert_eq!(exit, 2);
    assert!(
        value["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("`api` is not declared")),
        "{value}"
    );
    // The message names the cycle, not a line: the hint does not send the reader to a
    // position it never gave.
    let hint = value["error"]["hint"].as_str().unwrap_or_default();
    assert!(
        hint.contains("the cycle and the key it names") && !hint.contains("position"),
        "{value}"
    );
}
