use std::path::Path;

use super::*;

fn parse(text: &str) -> Result<Plan, PlanError> {
    Plan::parse(
        Path::new("plan.md"),
        text,
        Some(&["app".to_string(), "web".to_string()]),
    )
}

const FULL: &str = r#"---
tdd_plan: calculator
closes: 12
annotation_keys: [friction_note]
ancillary_files: [CHANGELOG.md]
cycles:
  - n: 2
    project: app
    title: subtraction
    test: tests/test_calc.py::test_sub
    files: [src/calc.py]
    stub_expected: [src/calc.py]
    modifies_tests: []
    commit_red: "test: subtraction"
    commit_green: "feat: subtraction"
    commit_refactor: "refactor: subtraction"
    criterion: "subtracting 2 from 5 gives 3"
    meta: { owner: me, points: 2 }
  - n: 1
    projects: [app, web]
    title: addition contract
    tests: [tests/test_calc.py::test_add, "web::src/add.test.ts > add > sums"]
    contract_cycle: true
  - n: 3
    project: app
    title: pin rounding
    test: tests/test_calc.py::test_round
    pin_cycle: true
    commit_pin: "test: pin rounding"
  - n: 4
    project: app
    title: tidy
    refactor_cycle: true
---
# Plan

Prose is free.
"#;

#[test]
fn tdd_cli_full_vocabulary_parses_and_sorts_cycles() {
    let plan = parse(FULL).expect("parses");
    let kinds: Vec<_> = plan.cycles.iter().map(|c| (c.n, c.kind)).collect();
    assert_eq!(
        kinds,
        vec![
            (1, CycleKind::Contract),
            (2, CycleKind::Standard),
            (3, CycleKind::Pin),
            (4, CycleKind::Refactor)
        ]
    );
    assert_eq!(
        plan.cycles[1].criterion.as_deref(),
        Some("subtracting 2 from 5 gives 3")
    );
    assert_eq!(plan.cycles[1].meta["points"], 2);
    assert_eq!(plan.cycles[0].projects, vec!["app", "web"]);
    assert_eq!(plan.annotation_keys, vec!["friction_note"]);
}

fn error(text: &str) -> String {
    parse(text).expect_err("refused").to_string()
}

#[test]
fn malformed_yaml_names_the_plan_line_and_column() {
    let msg = error("---\ncycles:\n  - n: 1\n    title: [unclosed\n---\n");
    assert!(msg.starts_with("plan.md:"), "{msg}");
    let line: u64 = msg
        .split(':')
        .nth(1)
        .and_then(|l| l.parse().ok())
        .expect("line number");
    assert!((4..=5).contains(&line), "{msg}");
}

#[test]
fn an_unknown_cycle_key_is_refused_with_its_position() {
    let msg =
        error("---\ncycles:\n  - n: 1\n    project: app\n    title: t\n    tset: a::b\n---\n");
    assert_eq!(msg, "plan.md:6:5: unknown key `tset`; did you mean `test`?");
}

#[test]
fn vocabulary_rules_are_enforced() {
    let cycle = |extra: &str| {
        format!("---\ncycles:\n  - n: 1\n    project: app\n    title: t\n{extra}---\n")
    };
    assert!(error(&cycle("")).contains("exactly one test"));
    assert!(error(&cycle("    tests: [a, b]\n")).contains("exactly one test"));
    assert!(error(&cycle("    test: a\n    contract_cycle: true\n")).contains("two or more"));
    assert!(error(&cycle("    test: a\n    refactor_cycle: true\n")).contains("no tests"));
    assert!(
        error(&cycle(
            "    test: a\n    pin_cycle: true\n    refactor_cycle: true\n"
        ))
        .contains("exclude")
    );
    assert!(error(&cycle("    test: a\n    projects: [app]\n")).contains("not both"));
    assert!(error("---\ncycles: []\n---\n").contains("at least one"));
    assert!(error("no front matter\n").contains("front-matter"));
    let dup = "---\ncycles:\n  - {n: 1, project: app, title: a, test: t::a}\n  - {n: 1, project: app, title: b, test: t::b}\n---\n";
    let msg = error(dup);
    assert!(msg.contains("twice"), "{msg}");
}

#[test]
fn an_undeclared_project_is_refused_with_the_nearest_name() {
    let msg = error("---\ncycles:\n  - {n: 1, project: ap, title: a, test: x}\n---\n");
    assert!(
        msg.contains("`ap` is not declared") && msg.contains("`app`"),
        "{msg}"
    );
}
