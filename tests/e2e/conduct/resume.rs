//! `tdd conduct` killed or stopped anywhere, then run again: the same commits, files
//! and forge thread as an uninterrupted run, with no budget spent twice.

use std::path::PathBuf;

use super::*;
use crate::support::Env;

/// The failpoints of one step, in the order a run reaches them.
const CRASH_POINTS: &[&str] = &[
    "conduct_branch",
    "conduct_plan_committed",
    "conduct_run_started",
    "conduct_before_leaf_red",
    "conduct_after_leaf_red",
    "conduct_after_advance_red",
    "conduct_before_leaf_green",
    "conduct_after_leaf_green",
    "conduct_after_advance_green",
    "conduct_before_leaf_refactor",
    "conduct_after_advance_refactor",
    "conduct_comment_written",
    "conduct_pr_written",
];

#[test]
fn a_conductor_killed_anywhere_resumes_to_the_same_commits_without_duplicates() {
    let good = fixture(&good_planner(""), GOOD_VERIFIER);
    crash_and_resume(CRASH_POINTS, &good, 1, IMPL, TEST);
    // Killed after a step's close, before its comment (the resume finds every step
    // closed and writes the comment it missed).
    crash_and_resume(&["conduct_step_done"], &good, 1, IMPL, TEST);
}

/// The verifier rejects the first REFACTOR of step 1; its revise documents `sub`.
const REFACTOR_REJECT: &str = r#"[[leaf]]
role = "verifier"
phase = "refactor"
attempt = 1
[[leaf.do]]
action = "verdict"
decision = "reject"
reason = "sub is undocumented"
findings = ["src/lib.rs: document sub"]
"#;
const DOCUMENTED: &str =
    "\n/// `a` minus `b`.\npub fn sub(a: i32, b: i32) -> i32 {\n    a - b\n}\n";

/// A fixture whose REFACTOR is rejected once and revised (attempt 2) into `DOCUMENTED`.
fn refactor_revised() -> String {
    let revise = format!(
        "[[leaf]]\nrole = \"developer\"\nphase = \"refactor\"\nattempt = 2\n[[leaf.do]]\naction = \"write\"\npath = \"src/lib.rs\"\ncontent = '''{LIB}{DOCUMENTED}'''\n"
    );
    fixture(
        &good_planner(""),
        &format!("{GOOD_VERIFIER}{REFACTOR_REJECT}{revise}"),
    )
}

#[test]
fn a_rejected_refactor_is_reopened_and_revised_into_a_new_commit() {
    let env = Env::new();
    let issue = project(&env, &refactor_revised());
    let (code, value) = env.json(&["conduct", &issue]);
    assert_eq!(code, 0, "{value}");
    // The rejected REFACTOR commit is gone; its revision is the step's last commit
    // and carries the ticked box.
    assert_step_one_landed(&env, DOCUMENTED);
    let plan = env.git(&["show", "HEAD:.tdd/issue-1.md"]);
    assert!(plan.contains("- [x] Step 1:"), "{plan}");
    let pr = read(&value["data"]["pr"]);
    assert!(pr.contains("- REFACTOR REJECT"), "{pr}");
    assert!(pr.contains("- REFACTOR ACCEPT"), "{pr}");
    assert!(pr.contains("| REFACTOR | "), "{pr}");
    assert!(pr.contains("| 1 |"), "one revise round: {pr}");
    // The revise leaf got the findings, not the verifier's prompt.
    let revise = prompts(&value, "developer-i1-s1-refactor-a2");
    assert_eq!(revise.len(), 1);
    assert!(
        revise[0].contains("src/lib.rs: document sub"),
        "{}",
        revise[0]
    );
    assert!(!revise[0].contains("sub is undocumented"), "{}", revise[0]);
}

#[test]
fn a_conductor_killed_around_a_refactor_revise_resumes_to_the_same_commits() {
    // Killed after the REFACTOR closed the cycle, after its REJECT was recorded, before
    // the revise leaf, and after the revised REFACTOR closed the cycle again: each
    // resume picks up exactly where the last left off, so one revise round (the
    // budget) is enough.
    let points = [
        "conduct_after_advance_refactor",
        "conduct_after_verdict_refactor",
        "conduct_before_leaf_refactor",
        "conduct_after_advance_refactor",
    ];
    crash_and_resume(&points, &refactor_revised(), 1, DOCUMENTED, TEST);
}

#[test]
fn a_conductor_killed_around_a_red_revise_resumes_to_the_same_commits() {
    let reject = "[[leaf]]\nrole = \"verifier\"\nphase = \"red\"\nattempt = 1\n[[leaf.do]]\naction = \"verdict\"\ndecision = \"reject\"\nreason = \"one case\"\nfindings = [\"tests/sub.rs: check a negative result\"]\n";
    let strict = "#[test]\nfn subtracts() {\n    assert_eq!(calc::sub(5, 2), 3);\n    assert_eq!(calc::sub(2, 5), -3);\n}\n";
    let revise = format!(
        "[[leaf]]\nrole = \"developer\"\nphase = \"red\"\nattempt = 2\n[[leaf.do]]\naction = \"write\"\npath = \"tests/sub.rs\"\ncontent = '''{strict}'''\n[[leaf.do]]\naction = \"write\"\npath = \"src/lib.rs\"\ncontent = '''{LIB}{STUB}'''\n"
    );
    let fixture = fixture(
        &good_planner(""),
        &format!("{GOOD_VERIFIER}{reject}{revise}"),
    );
    // After the REJECT was recorded (not yet acted on), before and after the revise
    // leaf's launch, after its advance (unjudged), and after its ACCEPT was recorded.
    let points = [
        "conduct_after_verdict_red",
        "conduct_before_leaf_red",
        "conduct_after_leaf_red",
        "conduct_after_advance_red",
        "conduct_after_verdict_red",
    ];
    crash_and_resume(&points, &fixture, 1, IMPL, strict);
}

/// Kills `tdd conduct` at each point in turn, then resumes it to the end and checks
/// the result equals an uninterrupted run's: the same commits, `LIB` + `body` in
/// src/lib.rs, `test` in tests/sub.rs, one comment. `budget` is the revise budget.
fn crash_and_resume(points: &[&str], fixture: &str, budget: u32, body: &str, test: &str) {
    let env = Env::new();
    let issue = project(&env, fixture);
    if budget != 1 {
        let config = std::fs::read_to_string(env.root().join("tdd.toml")).expect("config");
        env.write(
            "tdd.toml",
            &config.replace("revise_budget = 1", &format!("revise_budget = {budget}")),
        );
        env.git(&["commit", "-q", "-a", "--amend", "--no-edit"]);
    }
    kill_at_each(&env, &issue, points);
    let (code, value) = env.json(&["conduct", &issue]);
    assert_eq!(code, 0, "{value}");
    assert_step_one_landed(&env, body);
    let committed = std::fs::read_to_string(env.root().join("tests/sub.rs")).expect("test");
    assert_eq!(committed, test, "{points:?}");
    let dir = PathBuf::from(value["data"]["dir"].as_str().expect("dir"));
    let thread = std::fs::read_to_string(dir.join("thread.md")).expect("thread");
    // The run comment and step 1's.
    assert_eq!(thread.matches("<!-- comment ").count(), 2, "{thread}");
    let pr = read(&value["data"]["pr"]);
    assert!(pr.contains("- [x] Step 1:"), "{pr}");
    for phase in ["RED", "GREEN", "REFACTOR"] {
        assert!(
            pr.contains(&format!("- {phase} ACCEPT")),
            "{points:?}: {pr}"
        );
    }
}

/// Runs `tdd conduct` on `issue` killed at each failpoint of `points` in turn.
fn kill_at_each(env: &Env, issue: &str, points: &[&str]) {
    use std::os::unix::process::ExitStatusExt;
    for point in points {
        let out = env
            .tdd()
            .env("TDD_FAILPOINT", format!("{point}=kill"))
            .args(["conduct", issue, "--json"])
            .output()
            .expect("tdd runs");
        assert_eq!(
            out.status.signal(),
            Some(9),
            "{point}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

/// The verifier rejects the first GREEN of step 1 (round 1).
const GREEN_REJECT: &str = "[[leaf]]\nrole = \"verifier\"\nphase = \"green\"\nattempt = 1\n[[leaf.do]]\naction = \"verdict\"\ndecision = \"reject\"\nreason = \"too clever\"\nfindings = [\"src/lib.rs: write the subtraction plainly\"]\n";
/// The revised GREEN: another correct implementation than `IMPL`.
const ALT_IMPL: &str = "\npub fn sub(a: i32, b: i32) -> i32 {\n    a + -b\n}\n";

/// A fixture whose GREEN is rejected once (round 1, after `before_verdict` in the
/// verifier) and revised (developer attempt 2) into `ALT_IMPL`.
fn green_revised(before_verdict: &str) -> String {
    let reject = GREEN_REJECT.replace(
        "[[leaf.do]]\naction = \"verdict\"",
        &format!("{before_verdict}[[leaf.do]]\naction = \"verdict\""),
    );
    let revise = format!(
        "[[leaf]]\nrole = \"developer\"\nphase = \"green\"\nattempt = 2\n[[leaf.do]]\naction = \"write\"\npath = \"src/lib.rs\"\ncontent = '''{LIB}{ALT_IMPL}'''\n"
    );
    fixture(
        &good_planner(""),
        &format!("{GOOD_VERIFIER}{reject}{revise}"),
    )
}

#[test]
fn a_conductor_killed_around_a_green_revise_resumes_to_the_same_commits() {
    // After the REJECT was recorded (not yet acted on), before and after the revise
    // leaf's launch, after its advance (unjudged), and after its ACCEPT was recorded.
    let points = [
        "conduct_after_verdict_green",
        "conduct_before_leaf_green",
        "conduct_after_leaf_green",
        "conduct_after_advance_green",
        "conduct_after_verdict_green",
    ];
    crash_and_resume(&points, &green_revised(""), 1, ALT_IMPL, TEST);
}

#[test]
fn a_conductor_killed_around_a_green_reject_judged_on_resume_resumes_to_the_same_commits() {
    // Killed after the first GREEN's advance (unjudged), so the resume judges it; killed
    // again after that resume recorded its REJECT; then after the revised GREEN's
    // advance: the REJECT is counted once, so one revise round is still enough.
    let points = [
        "conduct_after_advance_green",
        "conduct_after_verdict_green",
        "conduct_after_advance_green",
    ];
    crash_and_resume(&points, &green_revised(""), 1, ALT_IMPL, TEST);
}

#[test]
fn a_stop_between_a_green_reject_and_its_revise_resumes_to_the_same_commits() {
    let env = Env::new();
    // The rejecting verifier asks for the stop: the conductor honours it before the
    // revise leaf.
    let stop =
        "[[leaf.do]]\naction = \"run\"\nargv = [\"tdd\", \"stop\", \"--mode\", \"at-ledger\"]\n";
    let issue = project(&env, &green_revised(stop));
    let (code, value) = env.json(&["conduct", &issue]);
    assert_eq!(code, 5, "{value}");
    assert_eq!(value["data"]["mode"], "at-ledger");
    // Stopped with the rejected GREEN undone: RED is the last commit, the tree clean.
    assert_eq!(
        subjects(env.root()).last().map(String::as_str),
        Some("test: subtraction")
    );
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    let (code, value) = env.json(&["conduct", &issue]);
    assert_eq!(code, 0, "{value}");
    assert_step_one_landed(&env, ALT_IMPL);
    // One REJECT, one revise (with its findings), two GREEN verifiers in all.
    let revise = prompts(&value, "developer-i1-s1-green-a2");
    assert_eq!(revise.len(), 1);
    assert!(
        revise[0].contains("src/lib.rs: write the subtraction plainly"),
        "{}",
        revise[0]
    );
    assert_eq!(prompts(&value, "verifier-i1-s1-green").len(), 2);
    let pr = read(&value["data"]["pr"]);
    assert!(pr.contains("- GREEN REJECT"), "{pr}");
    assert!(pr.contains("- GREEN ACCEPT"), "{pr}");
}

pub(super) const ISSUE_TWO: &str = "# Subtraction and negation\n\nUsers need to subtract and negate.\n\n## Acceptance criteria\n\n- [ ] `calc::sub(5, 2)` returns 3\n- [ ] `calc::neg(4)` returns -4\n";
const PLAN_TWO: &str = "---\ncycles:\n  - n: 1\n    project: app\n    title: subtraction\n    test: app::calc::sub subtracts\n    files: [src/lib.rs]\n    stub_expected: [src/lib.rs]\n    criterion: \"1\"\n  - n: 2\n    project: app\n    title: negation\n    test: app::calc::neg negates\n    files: [src/lib.rs]\n    stub_expected: [src/lib.rs]\n    criterion: \"2\"\n---\n";
const NEG_TEST: &str = "#[test]\nfn negates() {\n    assert_eq!(calc::neg(4), -4);\n}\n";
const NEG_STUB: &str = "\npub fn neg(_a: i32) -> i32 {\n    0\n}\n";
const NEG_IMPL: &str = "\npub fn neg(a: i32) -> i32 {\n    -a\n}\n";

/// A two-step issue (subtraction, negation) whose step 1 REFACTOR is rejected once
/// (its verifier doing `before_verdict` first) and revised into `DOCUMENTED`; the
/// issue's path.
pub(super) fn project_two(env: &Env, before_verdict: &str) -> String {
    project_two_with(env, before_verdict, "")
}

/// `project_two` whose step 1 REFACTOR verifier gives `reason` for its rejection.
pub(super) fn project_two_rejecting(env: &Env, reason: &str) -> String {
    project_two_built(env, "", "", reason)
}

/// `project_two` with `extra` leaf entries appended to the fixture.
fn project_two_with(env: &Env, before_verdict: &str, extra: &str) -> String {
    project_two_built(env, before_verdict, extra, "sub is undocumented")
}

/// `project_two_with` whose step 1 REFACTOR rejection gives `reason`.
fn project_two_built(env: &Env, before_verdict: &str, extra: &str, reason: &str) -> String {
    let developer = |step: u32, phase: &str, attempt: &str, writes: &[(&str, String)]| {
        let mut entry = format!(
            "[[leaf]]\nrole = \"developer\"\nstep = {step}\nphase = \"{phase}\"\n{attempt}"
        );
        for (path, content) in writes {
            entry.push_str(&format!(
                "[[leaf.do]]\naction = \"write\"\npath = \"{path}\"\ncontent = '''{content}'''\n"
            ));
        }
        if writes.is_empty() {
            entry.push_str("[[leaf.do]]\naction = \"print\"\ntext = \"nothing to tidy\"\n");
        }
        entry
    };
    let reject = REFACTOR_REJECT
        .replace("phase = \"refactor\"", "step = 1\nphase = \"refactor\"")
        .replace("sub is undocumented", reason)
        .replace(
            "[[leaf.do]]\naction = \"verdict\"",
            &format!("{before_verdict}[[leaf.do]]\naction = \"verdict\""),
        );
    let neg_verifier = GOOD_VERIFIER
        .replace("role = \"verifier\"\n", "role = \"verifier\"\nstep = 2\n")
        .replace("app::calc::sub subtracts", "app::calc::neg negates");
    let leaves = [
        developer(
            1,
            "red",
            "",
            &[
                ("tests/sub.rs", TEST.to_string()),
                ("src/lib.rs", format!("{LIB}{STUB}")),
            ],
        ),
        developer(1, "green", "", &[("src/lib.rs", format!("{LIB}{IMPL}"))]),
        developer(1, "refactor", "", &[]),
        developer(
            1,
            "refactor",
            "attempt = 2\n",
            &[("src/lib.rs", format!("{LIB}{DOCUMENTED}"))],
        ),
        developer(
            2,
            "red",
            "",
            &[
                ("tests/neg.rs", NEG_TEST.to_string()),
                ("src/lib.rs", format!("{LIB}{DOCUMENTED}{NEG_STUB}")),
            ],
        ),
        developer(
            2,
            "green",
            "",
            &[("src/lib.rs", format!("{LIB}{DOCUMENTED}{NEG_IMPL}"))],
        ),
        developer(2, "refactor", "", &[]),
    ];
    let fixture = format!(
        "version = 1\n[[leaf]]\nrole = \"planner\"\n[[leaf.do]]\naction = \"write\"\npath = \".tdd/issue-1.md\"\ncontent = '''{PLAN_TWO}'''\n{}{GOOD_VERIFIER}{neg_verifier}{reject}{extra}",
        leaves.concat()
    );
    let issue = project(env, &fixture);
    std::fs::write(&issue, ISSUE_TWO).expect("issue");
    issue
}

/// Runs `tdd conduct` on the two-step issue to the end and checks the result equals an
/// uninterrupted run's: the same commits, both steps ticked and commented, step 1's
/// REFACTOR revised once. `revises` is how many times its revise leaf ran (a kill
/// before the revision was recorded makes the resume redo it).
fn finish_two(env: &Env, issue: &str, revises: usize) {
    let (code, value) = env.json(&["conduct", issue]);
    assert_eq!(code, 0, "{value}");
    let expected: Vec<String> = ["subtraction", "negation"]
        .iter()
        .flat_map(|t| {
            [
                format!("test: {t}"),
                format!("feat: {t}"),
                format!("refactor: {t}"),
            ]
        })
        .collect();
    let log = subjects(env.root());
    assert_eq!(log[2], "plan: issue #1 Subtraction and negation", "{log:?}");
    assert_eq!(log[3..], expected[..], "{log:?}");
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    let lib = std::fs::read_to_string(env.root().join("src/lib.rs")).expect("lib");
    assert_eq!(lib, format!("{LIB}{DOCUMENTED}{NEG_IMPL}"));
    let plan = env.git(&["show", "HEAD:.tdd/issue-1.md"]);
    assert!(
        plan.contains("- [x] Step 1:") && plan.contains("- [x] Step 2:"),
        "{plan}"
    );
    let dir = PathBuf::from(value["data"]["dir"].as_str().expect("dir"));
    let thread = std::fs::read_to_string(dir.join("thread.md")).expect("thread");
    // The run comment and one per step (and the stop's comment, after a stop).
    let stops = thread.matches("**Stopped**").count();
    assert_eq!(
        thread.matches("<!-- comment ").count() - stops,
        3,
        "{thread}"
    );
    // Step 1's REFACTOR: one REJECT, one revise round; step 2's RED: one verifier.
    assert_eq!(
        prompts(&value, "developer-i1-s1-refactor-a2").len(),
        revises
    );
    assert!(prompts(&value, "developer-i1-s1-refactor-a3").is_empty());
    assert_eq!(prompts(&value, "verifier-i1-s2-red").len(), 1);
    let pr = read(&value["data"]["pr"]);
    assert!(pr.contains("- REFACTOR REJECT"), "{pr}");
}

/// Two-step kill-point cases: each kills the conductor at every point in turn (each
/// point is where the next invocation dies), then finishes the issue and checks step
/// `n`'s commits are the ones an uninterrupted run makes.
macro_rules! two_step_kill_points {
    ($($(#[doc = $doc:literal])* $name:ident: [$($point:literal),* $(,)?] => $n:literal;)*) => {$(
        $(#[doc = $doc])*
        #[test]
        fn $name() {
            let env = Env::new();
            let issue = project_two(&env, "");
            kill_at_each(&env, &issue, &[$($point),*]);
            finish_two(&env, &issue, $n);
        }
    )*};
}

two_step_kill_points! {
    /// Killed with step 1's REFACTOR REJECT recorded and step 2 not started, then before
    /// the revise leaf, after the revised REFACTOR closed step 1 again (unjudged), after
    /// its ACCEPT, and at step 2's first leaf.
    a_conductor_killed_after_a_refactor_reject_before_the_next_step_resumes_to_the_same_commits: [
        "conduct_after_verdict_refactor",
        "conduct_before_leaf_refactor",
        "conduct_after_advance_refactor",
        "conduct_after_verdict_refactor",
        "conduct_before_leaf_red",
    ] => 1;
    /// Killed after step 1's REFACTOR closed it (unjudged), after the resume recorded the
    /// REJECT, and after the revised REFACTOR closed it again.
    a_conductor_killed_around_a_refactor_judged_on_resume_before_the_next_step_resumes_to_the_same_commits: [
        "conduct_after_advance_refactor",
        "conduct_after_verdict_refactor",
        "conduct_after_advance_refactor",
    ] => 1;
    /// Killed with step 1's REFACTOR REJECT recorded, then while its reopen had moved
    /// HEAD back but not recorded it (step 2 open in the ledger), then between the
    /// revised REFACTOR's commit and its record.
    a_conductor_killed_inside_the_engine_around_a_refactor_revise_before_the_next_step_resumes_to_the_same_commits: [
        "conduct_after_verdict_refactor",
        "rollback_head_moved",
        "advance_committed",
    ] => 2;
}

#[test]
fn a_stop_between_a_refactor_reject_and_its_revise_before_the_next_step_resumes_to_the_same_commits()
 {
    let env = Env::new();
    let stop =
        "[[leaf.do]]\naction = \"run\"\nargv = [\"tdd\", \"stop\", \"--mode\", \"at-ledger\"]\n";
    let issue = project_two(&env, stop);
    let (code, value) = env.json(&["conduct", &issue]);
    assert_eq!(code, 5, "{value}");
    assert_eq!(value["data"]["mode"], "at-ledger");
    // Stopped with step 1's REFACTOR reopened: its GREEN is the last commit.
    assert_eq!(
        subjects(env.root()).last().map(String::as_str),
        Some("feat: subtraction")
    );
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    // A kill before the revise leaf on top of the stop changes nothing either.
    kill_at_each(&env, &issue, &["conduct_before_leaf_refactor"]);
    finish_two(&env, &issue, 1);
}

#[test]
fn a_revise_that_recommits_the_rejected_commit_is_judged_afresh_after_a_kill() {
    // With the commit dates pinned, a revise that writes what was rejected makes the
    // very commit (same sha) the REJECT was about. Killed before that commit is judged,
    // the resume must judge it, not act on the old REJECT again (which would undo it and
    // run the revise leaf a second time).
    let env = Env::new()
        .with_env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
        .with_env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z");
    let issue = project(
        &env,
        &fixture(&good_planner(""), &format!("{GOOD_VERIFIER}{GREEN_REJECT}")),
    );
    kill_at_each(
        &env,
        &issue,
        &["conduct_after_verdict_green", "conduct_after_advance_green"],
    );
    let (code, value) = env.json(&["conduct", &issue]);
    assert_eq!(code, 0, "{value}");
    assert_step_one_landed(&env, IMPL);
    // As uninterrupted: one revise leaf, two GREEN verifiers, one REJECT.
    assert_eq!(prompts(&value, "developer-i1-s1-green-a2").len(), 1);
    assert!(prompts(&value, "developer-i1-s1-green-a3").is_empty());
    assert_eq!(prompts(&value, "verifier-i1-s1-green").len(), 2);
    let pr = read(&value["data"]["pr"]);
    assert_eq!(pr.matches("- GREEN REJECT").count(), 1, "{pr}");
    assert!(pr.contains("- GREEN ACCEPT"), "{pr}");
}

#[test]
fn a_restarted_step_that_recommits_an_accepted_commit_is_judged_afresh_after_a_kill() {
    // GREEN is rejected beyond the budget, so the step is reset; the next `tdd conduct`
    // writes the same RED again, which (dates pinned) is the very commit accepted before
    // the reset. Killed before it is judged, the resume must judge it as an
    // uninterrupted run does, not take the acceptance from before the reset.
    let env = Env::new()
        .with_env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
        .with_env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z");
    let picky = "[[leaf]]\nrole = \"verifier\"\nphase = \"green\"\n[[leaf.do]]\naction = \"verdict\"\ndecision = \"reject\"\nreason = \"never good enough\"\n";
    let issue = project(
        &env,
        &fixture(&good_planner(""), &format!("{GOOD_VERIFIER}{picky}")),
    );
    expect_bail(&env, &issue, "revise_budget_exhausted", "process");
    kill_at_each(&env, &issue, &["conduct_after_advance_red"]);
    let value = expect_bail(&env, &issue, "revise_budget_exhausted", "process");
    // RED was judged once before the reset and once after it.
    assert_eq!(prompts(&value, "verifier-i1-s1-red").len(), 2);
    // A reset does not refill the budget: the first GREEN REJECT after it bailed.
    assert_eq!(prompts(&value, "verifier-i1-s1-green").len(), 3);
}

#[test]
fn a_conductor_killed_inside_the_engine_around_a_green_revise_resumes_to_the_same_commits() {
    // Killed between RED's commit and its record, between the undo of the rejected GREEN
    // moving HEAD back and its record, and between the revised GREEN's commit and its
    // record: git is ahead of (or behind) the ledger each time.
    let points = [
        "advance_committed",
        "conduct_after_verdict_green",
        "rollback_head_moved",
        "conduct_before_leaf_green",
        "advance_committed",
    ];
    crash_and_resume(&points, &green_revised(""), 1, ALT_IMPL, TEST);
}

#[test]
fn a_conductor_killed_inside_the_engine_around_a_refactor_revise_resumes_to_the_same_commits() {
    // Killed between the REFACTOR's commit (its box ticked) and its record, between the
    // reopen of the rejected REFACTOR moving HEAD back and its record, and between the
    // revised REFACTOR's commit and its record.
    let points = [
        "conduct_before_leaf_refactor",
        "advance_committed",
        "conduct_after_verdict_refactor",
        "rollback_head_moved",
        "advance_committed",
    ];
    crash_and_resume(&points, &refactor_revised(), 1, DOCUMENTED, TEST);
}

#[test]
fn a_stop_between_refused_advances_does_not_refill_the_refusals_tolerated() {
    // The GREEN developer never satisfies the gate until its fourth attempt; an
    // uninterrupted run bails at the third refusal. Its second attempt asks for a stop,
    // so the conductor stops before the third: the resume must still bail there, not
    // count refusals from zero and reach the fourth attempt.
    let env = Env::new();
    let idle = "[[leaf]]\nrole = \"developer\"\nstep = 1\nphase = \"green\"\n[[leaf.do]]\naction = \"print\"\ntext = \"thinking\"\n";
    let stop = "[[leaf]]\nrole = \"developer\"\nstep = 1\nphase = \"green\"\nattempt = 2\n[[leaf.do]]\naction = \"run\"\nargv = [\"tdd\", \"stop\", \"--mode\", \"at-ledger\"]\n";
    let late = format!(
        "[[leaf]]\nrole = \"developer\"\nstep = 1\nphase = \"green\"\nattempt = 4\n[[leaf.do]]\naction = \"write\"\npath = \"src/lib.rs\"\ncontent = '''{LIB}{IMPL}'''\n"
    );
    let issue = project(
        &env,
        &fixture(
            &good_planner(""),
            &format!("{GOOD_VERIFIER}{idle}{stop}{late}"),
        ),
    );
    let (code, value) = env.json(&["conduct", &issue]);
    assert_eq!(code, 5, "{value}");
    let value = expect_bail(&env, &issue, "gate_refused_repeatedly", "process");
    assert!(prompts(&value, "developer-i1-s1-green-a4").is_empty());
    assert_eq!(prompts(&value, "developer-i1-s1-green-a3").len(), 1);
}

#[test]
fn a_step_settled_on_resume_gets_its_comment_even_if_the_next_step_bails() {
    // Step 2's RED is always rejected, so the run bails there; by then an uninterrupted
    // run has commented on step 1. Killed after step 1's revised REFACTOR closed it
    // (unjudged), the resume settles it and must comment on it just the same.
    let picky = "[[leaf]]\nrole = \"verifier\"\nstep = 2\nphase = \"red\"\n[[leaf.do]]\naction = \"verdict\"\ndecision = \"reject\"\nreason = \"never good enough\"\n";
    let comments = |value: &Value| {
        let dir = PathBuf::from(value["data"]["run"]["dir"].as_str().expect("dir"));
        let thread = std::fs::read_to_string(dir.join("thread.md")).unwrap_or_default();
        thread.matches("<!-- comment ").count()
    };
    let uninterrupted = Env::new();
    let issue = project_two_with(&uninterrupted, "", picky);
    let expected = expect_bail(&uninterrupted, &issue, "revise_budget_exhausted", "process");
    let env = Env::new();
    let issue = project_two_with(&env, "", picky);
    kill_at_each(
        &env,
        &issue,
        &[
            "conduct_after_verdict_refactor",
            "conduct_after_advance_refactor",
        ],
    );
    let value = expect_bail(&env, &issue, "revise_budget_exhausted", "process");
    assert_eq!(subjects(env.root()), subjects(uninterrupted.root()));
    assert!(comments(&expected) >= 1, "{expected}");
    assert_eq!(comments(&value), comments(&expected), "{value}");
}
