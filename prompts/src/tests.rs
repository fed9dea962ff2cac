//! Snapshots of every rendered prompt for a representative issue, and their sizes.

use tdd_engine::git::Git;
use tdd_engine::plan::CycleKind;
use tdd_engine::plan::PlannedCycle;
use tdd_engine::run::Phase;

use crate::*;

/// The demo issue: a small, realistic feature with three criteria.
pub(crate) fn demo_issue() -> Issue {
    Issue::from_markdown(
        12,
        "Parse durations like `1h30m` in the CLI".into(),
        "Users pass timeouts as plain seconds today, which is error-prone for long \
         runs. Accept human durations wherever a timeout is read.\n\n\
         ## Acceptance criteria\n\n\
         - [ ] `parse_duration(\"90s\")` returns 90 seconds\n\
         - [ ] `parse_duration(\"1h30m\")` returns 5400 seconds\n\
         - [ ] an unknown unit such as `3x` is an error naming the unit\n"
            .into(),
    )
}

fn demo_cycle() -> PlannedCycle {
    PlannedCycle {
        n: 2,
        title: "Compound durations".into(),
        kind: CycleKind::Standard,
        projects: vec!["app".into()],
        tests: vec!["tests/test_duration.py::test_compound_duration".into()],
        files: vec!["app/duration.py".into(), "tests/test_duration.py".into()],
        stub_expected: vec![],
        modifies_tests: vec![],
        harness: vec![],
        changes_dependencies: false,
        commit_red: None,
        commit_green: None,
        commit_refactor: None,
        commit_pin: None,
        criterion: Some("2".into()),
        meta: serde_json::Value::Null,
    }
}

fn developer(phase: Phase, findings: Vec<String>) -> Prompt {
    let issue = demo_issue();
    let cycle = demo_cycle();
    let criterion = issue
        .spec_for(&cycle)
        .expect("criterion")
        .text()
        .to_string();
    let input = DeveloperInput {
        targets: TestId::planned(&cycle),
        step: Step {
            criterion: Some(criterion),
            cycle,
        },
        issue,
        phase,
        repo: RepoFacts {
            test_commands: vec!["app: pytest (adapter default)".into()],
            locked: vec!["app/**".into()],
            touched: vec!["tests/test_duration.py".into()],
        },
        findings,
    };
    Prompt::developer(&input).expect("renders")
}

/// A repository with one commit at a pinned date, so the sha is stable.
fn repo_with_commits() -> (tempfile::TempDir, Git) {
    let dir = tempfile::tempdir().expect("tempdir");
    let git = Git::new(dir.path());
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["commit", "-q", "--allow-empty", "-m", "base"][..],
        &["commit", "-q", "--allow-empty", "-m", "red"][..],
    ] {
        let out = git
            .command(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", dir.path())
            .env("GIT_AUTHOR_NAME", "T")
            .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
            .env("GIT_COMMITTER_NAME", "T")
            .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
            .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
            .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
            .output()
            .expect("git");
        assert!(out.status.success(), "{out:?}");
    }
    (dir, git)
}

fn verifier(phase: Phase) -> Prompt {
    let (_dir, git) = repo_with_commits();
    let issue = demo_issue();
    let cycle = demo_cycle();
    let input = VerifierInput::new(
        TestId::planned(&cycle),
        issue.spec_for(&cycle).expect("spec"),
        CommitSha::resolve(&git, "HEAD").expect("head"),
        Some(CommitSha::resolve(&git, "HEAD~1").expect("base")),
        phase,
    );
    Prompt::verifier(&input).expect("renders")
}

#[test]
fn developer_red_prompt() {
    insta::assert_snapshot!(developer(Phase::AwaitingTest, vec![]).text());
}

#[test]
fn developer_green_revision_prompt() {
    let findings =
        vec!["app/duration.py returns 5400 only for the literal \"1h30m\"; \"2h\" gives 0".into()];
    insta::assert_snapshot!(developer(Phase::AwaitingImpl, findings).text());
}

#[test]
fn verifier_green_prompt() {
    insta::assert_snapshot!(verifier(Phase::AwaitingImpl).text());
}

#[test]
fn planner_prompt() {
    let input = PlannerInput {
        issue: demo_issue(),
        repo: RepoFacts {
            test_commands: vec!["app: pytest (adapter default)".into()],
            ..RepoFacts::default()
        },
        plan_path: ".tdd/issue-12.md".into(),
        errors: vec![],
    };
    insta::assert_snapshot!(Prompt::planner(&input).expect("renders").text());
}

#[test]
fn every_phase_renders_for_both_roles() {
    for phase in [
        Phase::AwaitingTest,
        Phase::AwaitingImpl,
        Phase::AwaitingRefactor,
        Phase::AwaitingPin,
        Phase::SensitivityRequired,
    ] {
        let dev = developer(phase, vec![]);
        let ver = verifier(phase);
        for prompt in [&dev, &ver] {
            assert!(!prompt.text().contains("{{"), "{}", prompt.text());
            assert_eq!(
                prompt.fixed_bytes() + prompt.variable_bytes(),
                prompt.text().len()
            );
        }
        assert!(dev.text().contains("`tdd status`") && dev.text().contains("`tdd test`"));
        assert!(dev.text().contains(".tdd/"));
        assert!(ver.text().contains("tdd verdict accept") && ver.text().contains("tdd test"));
    }
    assert!(matches!(
        Prompt::developer(&DeveloperInput {
            phase: Phase::Closed,
            ..developer_input()
        }),
        Err(PromptError::PhaseOver { .. })
    ));
}

fn developer_input() -> DeveloperInput {
    let cycle = demo_cycle();
    DeveloperInput {
        issue: demo_issue(),
        targets: TestId::planned(&cycle),
        step: Step {
            criterion: None,
            cycle,
        },
        phase: Phase::AwaitingTest,
        repo: RepoFacts::default(),
        findings: vec![],
    }
}

#[test]
fn the_verifier_assignment_holds_the_prompts_facts_only() {
    let prompt = verifier(Phase::AwaitingTest);
    let assignment = prompt.assignment();
    let keys: Vec<&String> = assignment.as_object().expect("object").keys().collect();
    assert_eq!(
        keys,
        [
            "base",
            "behaviour_spec",
            "issue",
            "phase",
            "repo_at",
            "role",
            "targets"
        ]
    );
    assert_eq!(
        assignment["behaviour_spec"],
        "`parse_duration(\"1h30m\")` returns 5400 seconds"
    );
}

/// The measured split of each role's prompt for the demo issue (recorded in the
/// snapshot so a change of template shows up as a change of numbers).
#[test]
fn prompt_sizes_for_the_demo_issue() {
    let rows = [
        ("planner", {
            let input = PlannerInput {
                issue: demo_issue(),
                repo: RepoFacts {
                    test_commands: vec!["app: pytest (adapter default)".into()],
                    ..RepoFacts::default()
                },
                plan_path: ".tdd/issue-12.md".into(),
                errors: vec![],
            };
            Prompt::planner(&input).expect("renders")
        }),
        ("developer red", developer(Phase::AwaitingTest, vec![])),
        ("developer green", developer(Phase::AwaitingImpl, vec![])),
        (
            "developer refactor",
            developer(Phase::AwaitingRefactor, vec![]),
        ),
        ("verifier red", verifier(Phase::AwaitingTest)),
        ("verifier green", verifier(Phase::AwaitingImpl)),
        ("verifier refactor", verifier(Phase::AwaitingRefactor)),
    ];
    let mut table = String::from("role                total  fixed  issue-specific  fixed%\n");
    for (name, prompt) in rows {
        let total = prompt.text().len();
        table.push_str(&format!(
            "{name:<18} {total:>6} {:>6} {:>15} {:>6.1}\n",
            prompt.fixed_bytes(),
            prompt.variable_bytes(),
            100.0 * prompt.fixed_bytes() as f64 / total as f64
        ));
    }
    insta::assert_snapshot!(table);
}
