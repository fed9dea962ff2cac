//! Snapshots of what a person reads on a terminal around `tdd conduct`: a bail, `tdd
//! status` after it, the conduct that then finishes, a conduct of the finished issue
//! and `tdd status` after that. Placeholders as in `crate::snapshots`.

use super::*;

/// A verifier that never gives a verdict.
const SILENT_VERIFIER: &str = "[[leaf]]\nrole = \"verifier\"\n[[leaf.do]]\naction = \"print\"\ntext = \"looked, said nothing\\n\"\n";

#[test]
fn a_bail_then_status_then_the_resume_that_finishes_and_a_second_conduct() {
    let env = Env::new();
    let issue = project(&env, &fixture(&good_planner(""), SILENT_VERIFIER));
    let mut settings = crate::snapshots::settings(&env, &[]);
    crate::snapshots::run_figures(&mut settings, &env);
    settings.set_snapshot_path("../snapshots");
    let snap = |name: &str, text: &str| {
        settings.bind(|| insta::assert_snapshot!(name.to_string(), crate::snapshots::shown(text)));
    };
    let (exit, text) = env.on_terminal(&["conduct", &issue]);
    assert_eq!(exit, 4, "{text}");
    snap("conduct_bails_verdict_missing", &text);
    let (exit, text) = env.on_terminal(&["status"]);
    assert_eq!(exit, 0, "{text}");
    snap("status_after_a_bail", &text);
    // The run report says how it ended and why.
    let (exit, value) = env.json(&["report"]);
    assert_eq!(exit, 0, "{value}");
    let header = &value["data"]["report"]["header"];
    assert_eq!(header["outcome"], "bailed", "{value}");
    assert!(
        header["outcome_detail"]
            .as_str()
            .is_some_and(|d| d.contains("ended without a verdict")),
        "{value}"
    );
    // The friction log and the metrics of a run that bailed, as a person reads them.
    let (exit, text) = env.on_terminal(&["log", "render"]);
    assert_eq!(exit, 0, "{text}");
    snap("friction_log_after_a_bail", &text);
    let (exit, text) = env.on_terminal(&["metrics"]);
    assert_eq!(exit, 0, "{text}");
    snap("metrics_after_a_bail", &text);
    let (exit, value) = env.json(&["metrics"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(
        value["data"]["metrics"][0]["bails"]["verdict_missing"], 1,
        "{value}"
    );
    // The verifier is fixed; the same command resumes and finishes.
    let fixture_path = env.home.path().join("fixture.toml");
    std::fs::write(&fixture_path, fixture(&good_planner(""), GOOD_VERIFIER)).expect("fixture");
    let (exit, text) = env.on_terminal(&["conduct", &issue]);
    assert_eq!(exit, 0, "{text}");
    let last: Vec<&str> = text.lines().filter(|l| !l.starts_with("step ")).collect();
    snap("conduct_resumes_and_finishes", &last.join("\n"));
    let (exit, text) = env.on_terminal(&["conduct", &issue]);
    assert_eq!(exit, 0, "{text}");
    snap("conduct_of_a_finished_issue", &text);
    let (exit, text) = env.on_terminal(&["status"]);
    assert_eq!(exit, 0, "{text}");
    snap("status_after_the_issue_is_done", &text);
}
