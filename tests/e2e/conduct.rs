//! `tdd conduct` and `tdd demo` end to end: real scripted leaves under the supervisor,
//! a real cargo suite, the local forge.

use std::path::Path;
use std::path::PathBuf;

use serde_json::Value;

use crate::support::Env;

const MARKER: &str = "DEVELOPER-LEAF-MARKER-3f9c";

fn git_in(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn subjects(dir: &Path) -> Vec<String> {
    git_in(dir, &["log", "--format=%s", "--reverse"])
        .lines()
        .map(str::to_string)
        .collect()
}

fn read(path: &Value) -> String {
    std::fs::read_to_string(path.as_str().expect("a path")).expect("readable")
}

/// Every file named `name` in the directories of `dir` whose names contain `part`.
fn files_of(dir: &Path, part: &str, name: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(part))
        .filter_map(|e| std::fs::read_to_string(e.path().join(name)).ok())
        .collect()
}

/// The ledger directory behind a conduct envelope (`data.dir`, or `data.run.dir` on a
/// bail).
fn ledger_dir(value: &Value) -> PathBuf {
    let dir = value["data"]["dir"]
        .as_str()
        .or_else(|| value["data"]["run"]["dir"].as_str())
        .expect("dir");
    PathBuf::from(dir).join("../..")
}

/// The prompts of the leaves of `value`'s run whose ids contain `part`.
fn prompts(value: &Value, part: &str) -> Vec<String> {
    files_of(&ledger_dir(value).join("leaf-files"), part, "prompt.md")
}

#[test]
fn the_demo_completes_with_every_step_ticked_and_blind_verifiers() {
    let env = Env::bare();
    let dir = env.home.path().join("demo");
    let (code, value) = env.json(&["demo", "--keep", dir.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{value}");
    let pr = read(&value["data"]["pr"]);
    for n in 1..=3 {
        assert!(pr.contains(&format!("- [x] Step {n}:")), "{pr}");
    }
    assert!(!pr.contains("- [ ] Step"), "{pr}");
    assert!(pr.contains("RED REJECT"), "{pr}");
    assert!(pr.contains("the engine reverted tests/mul.rs"), "{pr}");
    assert!(pr.contains(value["data"]["run_id"].as_str().expect("run id")));
    let log = subjects(&dir.join("calc"));
    let expected: Vec<String> = ["subtraction", "multiplication", "clamping"]
        .iter()
        .flat_map(|t| {
            [
                format!("test: {t}"),
                format!("feat: {t}"),
                format!("refactor: {t}"),
            ]
        })
        .collect();
    assert_eq!(log[2..], expected[..], "{log:?}");
    assert!(log[1].starts_with("plan: issue #1"), "{log:?}");
    // The cheat did not survive: the committed test is the strict one.
    let test = git_in(&dir.join("calc"), &["show", "HEAD:tests/mul.rs"]);
    assert!(test.contains("assert_eq!(calc::mul(3, 4), 12)"), "{test}");
    // Blindness: every developer leaf printed the marker; no verifier was told it.
    let ledger_dir = PathBuf::from(value["data"]["dir"].as_str().expect("dir"))
        .join("../..")
        .canonicalize()
        .expect("ledger dir");
    let developers = files_of(&ledger_dir.join("leaves"), "-developer-", "stdout.log");
    assert!(developers.len() >= 9, "{}", developers.len());
    assert!(developers.iter().all(|out| out.contains(MARKER)));
    let prompts = prompts(&value, "verifier-");
    assert!(prompts.len() >= 10, "{}", prompts.len());
    assert!(prompts.iter().all(|p| !p.contains(MARKER)));
    let thread = std::fs::read_to_string(
        PathBuf::from(value["data"]["dir"].as_str().expect("dir")).join("thread.md"),
    )
    .expect("thread");
    assert_eq!(thread.matches("<!-- comment ").count(), 3, "{thread}");
}

const CONFIG: &str = include_str!("../../examples/demo/tdd.toml");
const PLAN_ONE: &str = "---\ncycles:\n  - n: 1\n    project: app\n    title: subtraction\n    test: app::calc::sub subtracts\n    files: [src/lib.rs]\n    stub_expected: [src/lib.rs]\n    criterion: \"1\"\n---\n";
const ISSUE_ONE: &str = "# Subtraction\n\nUsers need to subtract.\n\n## Acceptance criteria\n\n- [ ] `calc::sub(5, 2)` returns 3\n";
const LIB: &str = include_str!("../../examples/demo/src/lib.rs");
const STUB: &str = "\npub fn sub(_a: i32, _b: i32) -> i32 {\n    0\n}\n";
const IMPL: &str = "\npub fn sub(a: i32, b: i32) -> i32 {\n    a - b\n}\n";
const TEST: &str = "#[test]\nfn subtracts() {\n    assert_eq!(calc::sub(5, 2), 3);\n}\n";

/// A one-criterion fixture: `planner` and `verifier` are the leaves' entries for those
/// roles; the developer's are fixed.
fn fixture(planner: &str, verifier: &str) -> String {
    format!(
        r#"version = 1
{planner}
[[leaf]]
role = "developer"
phase = "red"
[[leaf.do]]
action = "write"
path = "tests/sub.rs"
content = '''{TEST}'''
[[leaf.do]]
action = "write"
path = "src/lib.rs"
content = '''{LIB}{STUB}'''
[[leaf]]
role = "developer"
phase = "green"
[[leaf.do]]
action = "write"
path = "src/lib.rs"
content = '''{LIB}{IMPL}'''
[[leaf]]
role = "developer"
phase = "refactor"
[[leaf.do]]
action = "run"
argv = ["env", "-u", "TDD_LEAF_ID", "-u", "TDD_LEAF_TOKEN", "tdd", "status", "--json"]
{verifier}
"#
    )
}

fn good_planner(extra: &str) -> String {
    format!(
        "[[leaf]]\nrole = \"planner\"\n[[leaf.do]]\naction = \"write\"\npath = \".tdd/issue-1.md\"\ncontent = '''{PLAN_ONE}'''\n{extra}"
    )
}

const GOOD_VERIFIER: &str = r#"[[leaf]]
role = "verifier"
[[leaf.do]]
action = "run"
argv = ["tdd", "test", "app::calc::sub subtracts"]
[[leaf.do]]
action = "verdict"
decision = "accept"
reason = "ran it"
"#;

/// The calc crate with the demo's config pointing at `fixture`; returns the issue path.
fn project(env: &Env, fixture: &str) -> String {
    let fixture_path = env.home.path().join("fixture.toml");
    std::fs::write(&fixture_path, fixture).expect("fixture");
    let issue = env.home.path().join("issue-1.md");
    std::fs::write(&issue, ISSUE_ONE).expect("issue");
    env.write("Cargo.toml", include_str!("../../examples/demo/Cargo.toml"));
    env.write("src/lib.rs", LIB);
    env.write(
        "tests/add.rs",
        include_str!("../../examples/demo/tests/add.rs"),
    );
    env.write(".gitignore", "target/\nCargo.lock\n");
    env.write(
        "tdd.toml",
        &CONFIG.replace("{fixture}", &fixture_path.display().to_string()),
    );
    env.commit_all("calc");
    issue.display().to_string()
}

fn bail_of(value: &Value) -> (&str, &str) {
    (
        value["error"]["reason"].as_str().unwrap_or_default(),
        value["data"]["bail"]["class"].as_str().unwrap_or_default(),
    )
}

#[test]
fn a_verifier_that_writes_to_the_work_tree_halts_the_run() {
    let env = Env::new();
    let target = env.root().join("src/lib.rs").display().to_string();
    let verifier = format!(
        "[[leaf]]\nrole = \"verifier\"\n[[leaf.do]]\naction = \"write\"\npath = \"{target}\"\ncontent = \"tampered\"\n[[leaf.do]]\naction = \"verdict\"\ndecision = \"reject\"\nreason = \"x\"\n"
    );
    let issue = project(&env, &fixture(&good_planner(""), &verifier));
    let (code, value) = env.json(&["conduct", &issue]);
    assert_eq!(code, 4, "{value}");
    assert_eq!(bail_of(&value), ("verifier_modified_tree", "system"));
    assert_eq!(value["data"]["bail"]["step"], 1);
    // The half-done step is reset: only the plan is left on top of the base.
    assert_eq!(
        subjects(env.root()).last().map(String::as_str),
        Some("plan: issue #1 Subtraction")
    );
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    let pr = read(&value["data"]["run"]["pr"]);
    assert!(pr.contains("verifier_modified_tree"), "{pr}");
}

#[test]
fn a_planner_that_writes_an_invalid_plan_twice_bails_plan_invalid() {
    let env = Env::new();
    let planner = "[[leaf]]\nrole = \"planner\"\n[[leaf.do]]\naction = \"write\"\npath = \".tdd/issue-1.md\"\ncontent = \"---\\ncycles:\\n  - n: 1\\n    title: no project\\n---\\n\"\n";
    let issue = project(&env, &fixture(planner, GOOD_VERIFIER));
    let (code, value) = env.json(&["conduct", &issue]);
    assert_eq!(code, 4, "{value}");
    assert_eq!(bail_of(&value), ("plan_invalid", "process"));
    assert_eq!(
        subjects(env.root()).last().map(String::as_str),
        Some("calc")
    );
    assert!(!env.root().join(".tdd/issue-1.md").exists());
    // The second planner was told why the first plan was refused.
    let prompts = prompts(&value, "planner-i1-s0-plan-a2");
    assert_eq!(prompts.len(), 1);
    assert!(
        prompts[0].contains("- ") && prompts[0].contains("project"),
        "{}",
        prompts[0]
    );
    assert!(!prompts[0].contains("(none: this is the first attempt)"));
}

#[test]
fn a_stop_at_leaf_exits_5_and_a_second_conduct_finishes_the_issue() {
    stop_then_resume("at-leaf");
}

#[test]
fn a_stop_at_ledger_exits_5_and_a_second_conduct_finishes_the_issue() {
    stop_then_resume("at-ledger");
}

/// The planner requests a stop in `mode` (from inside the run, so no timing is
/// involved); the conductor stops before the next leaf, and a second `tdd conduct`
/// finishes the issue.
fn stop_then_resume(mode: &str) {
    let env = Env::new();
    let planner = good_planner(&format!(
        "[[leaf.do]]\naction = \"run\"\nargv = [\"tdd\", \"stop\", \"--mode\", \"{mode}\"]\n"
    ));
    let issue = project(&env, &fixture(&planner, GOOD_VERIFIER));
    let (code, value) = env.json(&["conduct", &issue]);
    assert_eq!(code, 5, "{value}");
    assert_eq!(value["error"]["reason"], "stopped");
    assert_eq!(value["data"]["mode"], mode);
    let (code, value) = env.json(&["conduct", &issue]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(value["data"]["steps_done"], 1);
    let log = subjects(env.root());
    assert_eq!(
        log[2..],
        [
            "plan: issue #1 Subtraction",
            "test: subtraction",
            "feat: subtraction",
            "refactor: subtraction"
        ]
    );
    // While the REFACTOR leaf ran, `tdd status` (outside a leaf's identity) showed
    // the conductor's position.
    let ledger_dir = ledger_dir(&value);
    let out = files_of(
        &ledger_dir.join("leaves"),
        "-developer-i1-s1-refactor",
        "stdout.log",
    );
    let status: Value = serde_json::from_str(out[0].trim()).expect("an envelope");
    let conductor = &status["data"]["conductor"];
    assert_eq!(conductor["issue"], 1, "{status}");
    assert_eq!(conductor["step"], 1);
    assert_eq!(conductor["of"], 1);
    assert_eq!(conductor["phase"], "refactor");
    assert!(
        conductor["leaf"]
            .as_str()
            .is_some_and(|l| l.starts_with("developer-i1-s1-refactor"))
    );
    assert!(conductor["leaf_age_s"].is_u64());
}

#[test]
fn a_second_conductor_in_the_same_work_tree_is_refused_with_the_holders_pid() {
    let env = Env::new();
    let planner = good_planner(
        "[[leaf.do]]\naction = \"run\"\nargv = [\"tdd\", \"conduct\", \"--json\", \"ISSUE\"]\n",
    );
    let issue = project(&env, "");
    let fixture = fixture(&planner.replace("ISSUE", &issue), GOOD_VERIFIER);
    std::fs::write(env.home.path().join("fixture.toml"), fixture).expect("fixture");
    // The planner's own `tdd conduct` runs while the first conductor holds the lock.
    let (code, value) = env.json(&["conduct", &issue, "--max-steps", "0"]);
    assert_eq!(code, 0, "{value}");
    let ledger_dir = ledger_dir(&value);
    let out = files_of(&ledger_dir.join("leaves"), "-planner-", "stdout.log").join("\n");
    assert!(out.contains("conductor_running"), "{out}");
    assert!(out.contains("\"pid\":\""), "{out}");
}

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
    assert_eq!(
        subjects(env.root())[2..],
        [
            "plan: issue #1 Subtraction",
            "test: subtraction",
            "feat: subtraction",
            "refactor: subtraction"
        ]
    );
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    let lib = std::fs::read_to_string(env.root().join("src/lib.rs")).expect("lib");
    assert_eq!(lib, format!("{LIB}{DOCUMENTED}"));
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
    let log = subjects(env.root());
    assert_eq!(
        log,
        [
            "init",
            "calc",
            "plan: issue #1 Subtraction",
            "test: subtraction",
            "feat: subtraction",
            "refactor: subtraction"
        ]
    );
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    let lib = std::fs::read_to_string(env.root().join("src/lib.rs")).expect("lib");
    assert_eq!(lib, format!("{LIB}{body}"), "{points:?}");
    let committed = std::fs::read_to_string(env.root().join("tests/sub.rs")).expect("test");
    assert_eq!(committed, test, "{points:?}");
    let dir = PathBuf::from(value["data"]["dir"].as_str().expect("dir"));
    let thread = std::fs::read_to_string(dir.join("thread.md")).expect("thread");
    assert_eq!(thread.matches("<!-- comment ").count(), 1, "{thread}");
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

/// Runs `tdd conduct` and checks it bailed with `cause` of `class`, exit 4; returns
/// the envelope.
fn expect_bail(env: &Env, issue: &str, cause: &str, class: &str) -> Value {
    let (code, value) = env.json(&["conduct", issue]);
    assert_eq!(code, 4, "{value}");
    assert_eq!(bail_of(&value), (cause, class), "{value}");
    assert!(
        !value["data"]["bail"]["action"]
            .as_str()
            .unwrap_or_default()
            .is_empty()
    );
    value
}

const SILENT_VERIFIER: &str =
    "[[leaf]]\nrole = \"verifier\"\n[[leaf.do]]\naction = \"print\"\ntext = \"no opinion\"\n";

const REJECTING_VERIFIER: &str = "[[leaf]]\nrole = \"verifier\"\n[[leaf.do]]\naction = \"verdict\"\ndecision = \"reject\"\nreason = \"never good enough\"\nfindings = [\"tests/sub.rs: try harder\"]\n";

#[test]
fn a_verifier_without_a_verdict_bails_verdict_missing_and_the_step_is_reset() {
    let env = Env::new();
    let issue = project(&env, &fixture(&good_planner(""), SILENT_VERIFIER));
    let value = expect_bail(&env, &issue, "verdict_missing", "process");
    assert_eq!(value["data"]["bail"]["phase"], "red");
    assert_eq!(
        subjects(env.root()).last().map(String::as_str),
        Some("plan: issue #1 Subtraction")
    );
    assert!(!env.root().join("tests/sub.rs").exists());
}

#[test]
fn rejects_beyond_the_revise_budget_bail_revise_budget_exhausted() {
    let env = Env::new();
    let issue = project(&env, &fixture(&good_planner(""), REJECTING_VERIFIER));
    let value = expect_bail(&env, &issue, "revise_budget_exhausted", "process");
    assert!(
        value["data"]["bail"]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("tests/sub.rs: try harder")),
        "{value}"
    );
    // The demo config's budget is one revise round: two RED verifiers ran.
    let pr = read(&value["data"]["run"]["pr"]);
    assert!(pr.contains("revise_budget_exhausted"), "{pr}");
    let verifiers = prompts(&value, "verifier-i1-s1-red");
    assert_eq!(verifiers.len(), 2);
    // A resume does not refill the budget: the next REJECT bails at once.
    expect_bail(&env, &issue, "revise_budget_exhausted", "process");
    let verifiers = prompts(&value, "verifier-i1-s1-red");
    assert_eq!(verifiers.len(), 3);
}

#[test]
fn a_developer_that_never_satisfies_the_gate_bails_gate_refused_repeatedly() {
    let env = Env::new();
    let idle = "[[leaf]]\nrole = \"developer\"\nstep = 1\nphase = \"red\"\n[[leaf.do]]\naction = \"print\"\ntext = \"thinking\"\n";
    let issue = project(
        &env,
        &fixture(&good_planner(""), &format!("{GOOD_VERIFIER}{idle}")),
    );
    expect_bail(&env, &issue, "gate_refused_repeatedly", "process");
}

#[test]
fn a_red_baseline_and_a_dirty_tree_bail_as_system_causes() {
    let env = Env::new();
    let issue = project(&env, &fixture(&good_planner(""), GOOD_VERIFIER));
    env.write("notes.txt", "uncommitted\n");
    let value = expect_bail(&env, &issue, "dirty_tree", "system");
    assert!(
        value["data"]["bail"]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("notes.txt"))
    );
    std::fs::remove_file(env.root().join("notes.txt")).expect("rm");
    env.write(
        "tests/broken.rs",
        "#[test]\nfn broken() {\n    assert_eq!(1, 2);\n}\n",
    );
    env.commit_all("a failing test");
    expect_bail(&env, &issue, "baseline_red", "system");
}

#[test]
fn a_baseline_red_only_with_declared_failures_conducts_and_an_undeclared_one_bails() {
    let env = Env::new();
    let issue = project(&env, &fixture(&good_planner(""), GOOD_VERIFIER));
    // One failure declared by a native-id glob, one entry that matches nothing, and a
    // second failing test that nobody declared.
    let config = std::fs::read_to_string(env.root().join("tdd.toml")).expect("config");
    env.write(
        "tdd.toml",
        &config.replace(
            "[project.app]\n",
            "[project.app]\nknown_failures = [\"calc::broken *\", \"app::calc::gone gone\"]\n",
        ),
    );
    env.write(
        "tests/broken.rs",
        "#[test]\nfn broken() {\n    assert_eq!(1, 2);\n}\n",
    );
    env.write(
        "tests/other.rs",
        "#[test]\nfn other() {\n    assert_eq!(3, 4);\n}\n",
    );
    env.commit_all("two failing tests, one declared");
    let value = expect_bail(&env, &issue, "baseline_red", "system");
    let detail = value["data"]["bail"]["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("app::calc::other other"), "{detail}");
    assert!(!detail.contains("broken"), "{detail}");
    // With the undeclared failure gone, the declared one does not block any phase.
    std::fs::remove_file(env.root().join("tests/other.rs")).expect("rm");
    env.commit_all("drop the undeclared failing test");
    let (code, value) = env.json(&["conduct", &issue]);
    assert_eq!(code, 0, "{value}");
    let log = subjects(env.root());
    assert_eq!(
        log[log.len() - 3..],
        [
            "test: subtraction",
            "feat: subtraction",
            "refactor: subtraction"
        ],
        "{log:?}"
    );
    assert!(
        log.iter().any(|s| s == "plan: issue #1 Subtraction"),
        "{log:?}"
    );
    let pr = read(&value["data"]["pr"]);
    assert!(pr.contains("- [x] Step 1:"), "{pr}");
    assert!(
        pr.contains("**Baseline:** green apart from 1 declared failure"),
        "{pr}"
    );
    assert!(pr.contains("`app::calc::broken broken`"), "{pr}");
    assert!(pr.contains("`app::calc::gone gone` (app)"), "{pr}");
}

#[test]
fn a_stop_now_kills_the_running_leaf_and_a_second_conduct_finishes_the_issue() {
    let env = Env::new();
    // The REFACTOR leaf asks for a `now` stop and then would hang: the supervisor kills it.
    let stopping = "[[leaf]]\nrole = \"developer\"\nstep = 1\nphase = \"refactor\"\n[[leaf.do]]\naction = \"run\"\nargv = [\"tdd\", \"stop\", \"--mode\", \"now\"]\n[[leaf.do]]\naction = \"hang\"\n";
    let issue = project(
        &env,
        &fixture(&good_planner(""), &format!("{GOOD_VERIFIER}{stopping}")),
    );
    let (code, value) = env.json(&["conduct", &issue]);
    assert_eq!(code, 5, "{value}");
    assert_eq!(value["data"]["mode"], "now");
    assert_eq!(value["data"]["run"]["steps_done"], 0);
    // The same issue, with a REFACTOR leaf that does not stop.
    std::fs::write(
        env.home.path().join("fixture.toml"),
        fixture(&good_planner(""), GOOD_VERIFIER),
    )
    .expect("fixture");
    let (code, value) = env.json(&["conduct", &issue]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(
        subjects(env.root())[2..],
        [
            "plan: issue #1 Subtraction",
            "test: subtraction",
            "feat: subtraction",
            "refactor: subtraction"
        ]
    );
}

#[test]
fn a_leaf_killed_by_someone_else_bails_killed_external_at_once() {
    let env = Env::new();
    let crash = "[[leaf]]\nrole = \"developer\"\nstep = 1\nphase = \"green\"\n[[leaf.do]]\naction = \"crash\"\nsignal = \"SIGKILL\"\n";
    let issue = project(
        &env,
        &fixture(&good_planner(""), &format!("{GOOD_VERIFIER}{crash}")),
    );
    let value = expect_bail(&env, &issue, "killed_external", "system");
    assert_eq!(value["data"]["bail"]["phase"], "green");
    // No retry: one GREEN developer leaf ran.
    let greens = prompts(&value, "developer-i1-s1-green");
    assert_eq!(greens.len(), 1);
    // The half-done step (its RED commit) is rolled back.
    assert_eq!(
        subjects(env.root()).last().map(String::as_str),
        Some("plan: issue #1 Subtraction")
    );
}

#[test]
fn a_leaf_whose_supervisor_is_killed_bails_supervisor_lost_and_leaves_no_process() {
    let env = Env::new();
    // The RED leaf kills its own supervisor (its parent's parent), then lingers.
    let lost = "[[leaf]]\nrole = \"developer\"\nstep = 1\nphase = \"red\"\n[[leaf.do]]\naction = \"run\"\nargv = [\"sh\", \"-c\", \"kill -9 $(cut -d' ' -f4 /proc/$PPID/stat); exec sleep 37.25\"]\n";
    let issue = project(
        &env,
        &fixture(&good_planner(""), &format!("{GOOD_VERIFIER}{lost}")),
    );
    let value = expect_bail(&env, &issue, "supervisor_lost", "system");
    assert_eq!(value["data"]["bail"]["phase"], "red");
    // No retry, and the orphaned leaf's tree was killed.
    let reds = prompts(&value, "developer-i1-s1-red");
    assert_eq!(reds.len(), 1);
    let lingering: Vec<String> = std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains("sleep 37.25"))
        .collect();
    assert!(lingering.is_empty(), "{lingering:?}");
}

#[test]
fn a_test_that_passes_on_arrival_bails_needs_user_with_the_question_written_out() {
    let env = Env::new();
    // RED writes a test the code already satisfies.
    let passing = "[[leaf]]\nrole = \"developer\"\nstep = 1\nphase = \"red\"\n[[leaf.do]]\naction = \"write\"\npath = \"tests/sub.rs\"\ncontent = \"#[test]\\nfn subtracts() {\\n    assert_eq!(calc::add(5, -2), 3);\\n}\\n\"\n";
    let issue = project(
        &env,
        &fixture(&good_planner(""), &format!("{GOOD_VERIFIER}{passing}")),
    );
    let value = expect_bail(&env, &issue, "needs_user", "process");
    let detail = value["data"]["bail"]["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("passed as soon as it was written"),
        "{detail}"
    );
    assert!(detail.contains("`calc::sub(5, 2)` returns 3"), "{detail}");
    // The step was reset; the human's answer "already true" skips it, and the run
    // then completes with the step unticked.
    assert_eq!(
        subjects(env.root()).last().map(String::as_str),
        Some("plan: issue #1 Subtraction")
    );
    let (code, skipped) = env.json(&["cycle", "skip", "--reason", "already there"]);
    assert_eq!(code, 0, "{skipped}");
    let (code, value) = env.json(&["conduct", &issue]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(value["data"]["steps_done"], 0);
    let pr = read(&value["data"]["pr"]);
    assert!(pr.contains("- [ ] Step 1:"), "{pr}");
    assert!(pr.contains("Skipped: already there"), "{pr}");
}

#[test]
fn a_leaf_stuck_past_its_retries_bails_kill_stuck() {
    let env = Env::new();
    let hang = "[[leaf]]\nrole = \"developer\"\nstep = 1\nphase = \"red\"\n[[leaf.do]]\naction = \"hang\"\n";
    let issue = project(
        &env,
        &fixture(&good_planner(""), &format!("{GOOD_VERIFIER}{hang}")),
    );
    // A one-second idle limit: the supervisor's timer ends each hanging leaf.
    let config = std::fs::read_to_string(env.root().join("tdd.toml")).expect("config");
    env.write(
        "tdd.toml",
        &config.replace("idle_timeout_s = 300", "idle_timeout_s = 1"),
    );
    env.commit_all("a short idle limit");
    let value = expect_bail(&env, &issue, "kill_stuck", "system");
    // stuck_retries = 1: the leaf ran twice.
    let reds = prompts(&value, "developer-i1-s1-red");
    assert_eq!(reds.len(), 2);
}

#[test]
fn a_tick_in_git_that_the_ledger_does_not_know_bails_ledger_git_mismatch() {
    let env = Env::new();
    let stopping = "[[leaf]]\nrole = \"developer\"\nstep = 1\nphase = \"green\"\n[[leaf.do]]\naction = \"write\"\npath = \"src/lib.rs\"\ncontent = '''LIBIMPL'''\n[[leaf.do]]\naction = \"run\"\nargv = [\"tdd\", \"stop\", \"--mode\", \"at-leaf\"]\n"
        .replace("LIBIMPL", &format!("{LIB}{IMPL}"));
    let issue = project(
        &env,
        &fixture(&good_planner(""), &format!("{GOOD_VERIFIER}{stopping}")),
    );
    let (code, value) = env.json(&["conduct", &issue]);
    assert_eq!(code, 5, "{value}");
    // Someone ticks step 1 by hand while the run is stopped before its REFACTOR.
    let plan = std::fs::read_to_string(env.root().join(".tdd/issue-1.md")).expect("plan");
    env.write(
        ".tdd/issue-1.md",
        &plan.replace("- [ ] Step 1:", "- [x] Step 1:"),
    );
    env.commit_all("tick by hand");
    let value = expect_bail(&env, &issue, "ledger_git_mismatch", "system");
    let detail = value["data"]["bail"]["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("[1]") && detail.contains("[]"), "{detail}");
    // Nothing was reset: the hand-made commit is still there.
    assert_eq!(
        subjects(env.root()).last().map(String::as_str),
        Some("tick by hand")
    );
}

#[test]
fn a_refactor_rejected_beyond_the_budget_bails_and_the_step_is_reset() {
    let env = Env::new();
    let picky = "[[leaf]]\nrole = \"verifier\"\nstep = 1\nphase = \"refactor\"\n[[leaf.do]]\naction = \"verdict\"\ndecision = \"reject\"\nreason = \"the names are unclear\"\n";
    let issue = project(
        &env,
        &fixture(&good_planner(""), &format!("{GOOD_VERIFIER}{picky}")),
    );
    let value = expect_bail(&env, &issue, "revise_budget_exhausted", "process");
    assert_eq!(value["data"]["bail"]["phase"], "refactor");
    assert!(
        value["data"]["bail"]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("the names are unclear")),
        "{value}"
    );
    // No rejected REFACTOR is left ticked: the half-done step is reset whole.
    assert_eq!(
        subjects(env.root()).last().map(String::as_str),
        Some("plan: issue #1 Subtraction")
    );
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    assert!(!env.root().join("tests/sub.rs").exists());
    // The REFACTOR was revised once (budget 1) before the bail.
    let verifiers = prompts(&value, "verifier-i1-s1-refactor");
    assert_eq!(verifiers.len(), 2);
}

#[test]
fn a_forge_that_cannot_be_written_bails_forge_unreachable_and_keeps_the_step() {
    let env = Env::new();
    let issue = project(&env, &fixture(&good_planner(""), GOOD_VERIFIER));
    let (code, value) = env.json(&["conduct", &issue, "--max-steps", "0"]);
    assert_eq!(code, 0, "{value}");
    // A file where the forge keeps its comments: no comment can be written, even
    // by root.
    let comments = PathBuf::from(value["data"]["dir"].as_str().expect("dir")).join("comments");
    std::fs::write(&comments, "in the way").expect("block");
    let value = expect_bail(&env, &issue, "forge_unreachable", "system");
    assert!(
        value["data"]["bail"]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("comments")),
        "{value}"
    );
    // The step itself was done and is kept.
    assert_eq!(
        subjects(env.root()).last().map(String::as_str),
        Some("refactor: subtraction")
    );
    // Reachable again, a resume writes the missing comment and nothing twice.
    std::fs::remove_file(&comments).expect("unblock");
    let (code, value) = env.json(&["conduct", &issue]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(subjects(env.root()).len(), 6);
    let dir = PathBuf::from(value["data"]["dir"].as_str().expect("dir"));
    let thread = std::fs::read_to_string(dir.join("thread.md")).expect("thread");
    assert_eq!(thread.matches("<!-- comment ").count(), 1, "{thread}");
    // The finished PR tells of the bail it got past, and does not end on it.
    let pr = read(&value["data"]["pr"]);
    assert!(
        pr.contains("- bailed `forge_unreachable` at step 1 report"),
        "{pr}"
    );
    assert!(!pr.contains("## Bailed"), "{pr}");
}

#[test]
fn a_resume_with_another_binary_is_refused_unless_accepted() {
    let env = Env::new();
    let issue = project(&env, &fixture(&good_planner(""), GOOD_VERIFIER));
    let (code, value) = env.json(&["conduct", &issue, "--max-steps", "0"]);
    assert_eq!(code, 0, "{value}");
    // The same program with one byte more is another binary.
    let other = env.home.path().join("other-bin").join("tdd");
    std::fs::create_dir_all(other.parent().expect("dir")).expect("mkdir");
    let mut bytes = std::fs::read(assert_cmd::cargo::cargo_bin("tdd")).expect("binary");
    bytes.push(b'\n');
    std::fs::write(&other, bytes).expect("copy");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let run = |extra: &[&str]| {
        let out = env
            .tdd_at(&other)
            .args(["conduct", &issue, "--json"])
            .args(extra)
            .output()
            .expect("runs");
        (crate::support::code(&out), crate::support::envelope(&out))
    };
    let (code, value) = run(&[]);
    assert_eq!(code, 1, "{value}");
    assert_eq!(value["error"]["reason"], "binary_changed");
    let (code, value) = run(&["--accept-new-binary"]);
    assert_eq!(code, 0, "{value}");
    let ledger = env.json(&["ledger", "path"]).1;
    let database = PathBuf::from(ledger["data"]["database"].as_str().expect("db"));
    let events = tdd_engine::ledger::Ledger::open_read_only(&database)
        .expect("open")
        .expect("exists")
        .events(None)
        .expect("events");
    assert_eq!(
        events
            .iter()
            .filter(|e| e.kind == "conduct_binary_accepted")
            .count(),
        1
    );
}

#[test]
fn a_detached_conductor_runs_on_under_its_supervisor_to_the_end() {
    let env = Env::new();
    let issue = project(&env, &fixture(&good_planner(""), GOOD_VERIFIER));
    let (code, value) = env.json(&["conduct", &issue, "--detach"]);
    assert_eq!(code, 0, "{value}");
    let id = value["data"]["id"].as_str().expect("leaf id").to_string();
    let (code, waited) = env.json(&["wait", &id]);
    assert_eq!(code, 0, "the conductor did not finish cleanly: {waited}");
    let stdout =
        std::fs::read_to_string(value["data"]["stdout"].as_str().expect("stdout")).expect("log");
    let envelope: Value =
        serde_json::from_str(stdout.lines().last().expect("an envelope")).expect("json");
    assert_eq!(envelope["command"], "conduct");
    assert_eq!(envelope["ok"], true, "{envelope}");
    assert!(
        subjects(env.root())
            .iter()
            .any(|s| s.starts_with("refactor:") || s.starts_with("feat:"))
    );
}

/// Starts `tdd conduct` with a planner that marks the file `.leaf-running` and then sleeps,
/// sends it `signals` SIGINTs once the planner runs, and returns its exit code and envelope.
fn interrupt(env: &Env, signals: usize) -> (i32, Value, String) {
    let marker = env.home.path().join("leaf-running");
    let planner = good_planner(&format!(
        "[[leaf.do]]\naction = \"write\"\npath = \"{}\"\ncontent = \"x\"\n\n[[leaf.do]]\naction = \"sleep\"\nms = 3000\n",
        marker.display()
    ));
    let issue = project(env, &fixture(&planner, GOOD_VERIFIER));
    let child = env
        .tdd_std()
        .args(["conduct", &issue, "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("conductor starts");
    crate::leafsupport::wait_until("the planner leaf to run", || marker.exists());
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    let ledger_dir = PathBuf::from(
        env.json(&["ledger", "path"]).1["data"]["dir"]
            .as_str()
            .expect("dir"),
    );
    for n in 0..signals {
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("SIGINT");
        if n + 1 < signals {
            // Signals of one kind do not queue: wait until the first one was acted on.
            crate::leafsupport::wait_until("the first stop request", || {
                ledger_dir.join("stop.json").exists()
            });
        }
    }
    let out = child.wait_with_output().expect("conductor ends");
    let value: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), value, issue)
}

#[test]
fn ctrl_c_once_stops_at_leaf_and_twice_stops_now_then_resume_finishes() {
    for (signals, mode) in [(1, "at-leaf"), (2, "now")] {
        let env = Env::new();
        let (code, value, issue) = interrupt(&env, signals);
        assert_eq!(code, 5, "{signals} SIGINT: {value}");
        assert_eq!(value["data"]["mode"], mode, "{value}");
        let (code, value) = env.json(&["conduct", &issue]);
        assert_eq!(code, 0, "{value}");
        assert_eq!(value["data"]["steps_done"], 1);
    }
}

/// The conductor's own worktree of issue 1 beside `env`'s repository, removed when the
/// test ends (it lies outside every temporary directory the test owns).
struct Sibling(PathBuf);

impl Sibling {
    fn of(env: &Env) -> Sibling {
        let root = env.root().canonicalize().expect("canonical root");
        let name = root.file_name().expect("a name").to_string_lossy();
        Sibling(root.with_file_name(format!("{name}-tdd-issue-1")))
    }
}

impl Drop for Sibling {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Leaves an untracked file and an edited tracked file in the user's work tree; returns
/// the branch checked out there.
fn dirty_user_tree(env: &Env) -> String {
    env.write("notes.txt", "mine, uncommitted\n");
    env.write("src/lib.rs", &format!("{LIB}// mine\n"));
    env.git(&["rev-parse", "--abbrev-ref", "HEAD"])
}

/// The user's work tree is as `dirty_user_tree` left it, on `branch`, with none of the
/// run's commits; the worktree at `wt` has them all and is clean.
fn assert_separate(env: &Env, branch: &str, wt: &Path) {
    assert_eq!(env.git(&["rev-parse", "--abbrev-ref", "HEAD"]), branch);
    assert_eq!(subjects(env.root()), ["init", "calc"]);
    let notes = std::fs::read_to_string(env.root().join("notes.txt")).expect("notes");
    assert_eq!(notes, "mine, uncommitted\n");
    let lib = std::fs::read_to_string(env.root().join("src/lib.rs")).expect("lib");
    assert_eq!(lib, format!("{LIB}// mine\n"));
    assert_eq!(
        subjects(wt),
        [
            "init",
            "calc",
            "plan: issue #1 Subtraction",
            "test: subtraction",
            "feat: subtraction",
            "refactor: subtraction"
        ]
    );
    assert_eq!(
        git_in(wt, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        "tdd/issue-1-subtraction"
    );
    assert_eq!(git_in(wt, &["status", "--porcelain"]), "");
    let lib = std::fs::read_to_string(wt.join("src/lib.rs")).expect("lib");
    assert_eq!(lib, format!("{LIB}{IMPL}"));
}

#[test]
fn conduct_worktree_leaves_the_user_tree_alone_and_resumes_without_the_flag() {
    let env = Env::new();
    // The planner asks `tdd status` in the user's work tree while the conductor runs.
    let planner = good_planner(&format!(
        "[[leaf.do]]\naction = \"run\"\nargv = [\"env\", \"-u\", \"TDD_LEAF_ID\", \"-u\", \"TDD_LEAF_TOKEN\", \"tdd\", \"-C\", \"{}\", \"status\", \"--json\"]\n",
        env.root().display()
    ));
    let issue = project(&env, &fixture(&planner, GOOD_VERIFIER));
    let wt = Sibling::of(&env);
    let branch = dirty_user_tree(&env);
    // A dirty user tree is no reason to bail: the run works elsewhere.
    let (code, value) = env.json(&["conduct", &issue, "--worktree", "--max-steps", "0"]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(
        value["data"]["worktree"],
        wt.0.display().to_string().as_str()
    );
    // `tdd status` in the worktree shows the run as usual.
    let out = env
        .tdd()
        .args(["-C", &wt.0.display().to_string(), "status", "--json"])
        .output()
        .expect("tdd runs");
    let status = crate::support::envelope(&out);
    assert_eq!(status["data"]["active"], true, "{status}");
    // The resume needs no flag: the unfinished run is found in its worktree.
    let (code, value) = env.json(&["conduct", &issue]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(
        value["data"]["worktree"],
        wt.0.display().to_string().as_str()
    );
    assert_eq!(value["data"]["steps_done"], 1);
    assert_separate(&env, &branch, &wt.0);
    // The leaves worked there: the REFACTOR leaf's `tdd status` saw the conductor.
    let ledger_dir = ledger_dir(&value);
    let out = files_of(
        &ledger_dir.join("leaves"),
        "-developer-i1-s1-refactor",
        "stdout.log",
    );
    let seen: Value = serde_json::from_str(out[0].trim()).expect("an envelope");
    assert_eq!(seen["data"]["conductor"]["phase"], "refactor", "{seen}");
    // `tdd status` in the user's work tree pointed at the conductor's worktree.
    let out = files_of(&ledger_dir.join("leaves"), "-planner-", "stdout.log").join("\n");
    let line = out.lines().find(|l| l.contains("conductors_elsewhere"));
    let seen: Value = serde_json::from_str(line.expect("a status")).expect("an envelope");
    assert_eq!(seen["data"]["conductor"], Value::Null, "{seen}");
    let elsewhere = &seen["data"]["conductors_elsewhere"][0];
    assert_eq!(elsewhere["worktree"], wt.0.display().to_string().as_str());
    assert_eq!(elsewhere["phase"], "plan", "{seen}");
}

#[test]
fn conduct_worktree_needs_a_committed_config_and_leaves_nothing_behind_without_one() {
    let env = Env::new();
    let issue = project(&env, &fixture(&good_planner(""), GOOD_VERIFIER));
    let wt = Sibling::of(&env);
    env.git(&["rm", "-q", "--cached", "tdd.toml"]);
    env.git(&["commit", "-q", "-m", "untrack the config"]);
    let (code, value) = env.json(&["conduct", &issue, "--worktree"]);
    assert_eq!(code, 2, "{value}");
    assert_eq!(value["error"]["reason"], "config_invalid", "{value}");
    assert!(!wt.0.exists());
    assert!(env.git(&["branch", "--list", "tdd/*"]).is_empty());
}

#[test]
fn a_worktree_conductor_killed_mid_step_resumes_from_the_user_tree_to_the_same_commits() {
    use std::os::unix::process::ExitStatusExt;
    let env = Env::new();
    let issue = project(&env, &fixture(&good_planner(""), GOOD_VERIFIER));
    let config = std::fs::read_to_string(env.root().join("tdd.toml")).expect("config");
    env.write(
        "tdd.toml",
        &config.replace("[conductor]\n", "[conductor]\nworktree = true\n"),
    );
    env.commit_all("conduct in a worktree");
    let wt = Sibling::of(&env);
    let branch = dirty_user_tree(&env);
    for point in ["conduct_branch", "conduct_after_leaf_green"] {
        let out = env
            .tdd()
            .env("TDD_FAILPOINT", format!("{point}=kill"))
            .args(["conduct", &issue, "--json"])
            .output()
            .expect("tdd runs");
        assert_eq!(out.status.signal(), Some(9), "{point}");
    }
    let (code, value) = env.json(&["conduct", &issue]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(
        value["data"]["worktree"],
        wt.0.display().to_string().as_str()
    );
    // The config commit is on both branches; the run's commits only in the worktree.
    let mut log = subjects(&wt.0);
    assert_eq!(log.remove(2), "conduct in a worktree");
    assert_eq!(
        log[2..],
        [
            "plan: issue #1 Subtraction",
            "test: subtraction",
            "feat: subtraction",
            "refactor: subtraction"
        ]
    );
    assert_eq!(env.git(&["rev-parse", "--abbrev-ref", "HEAD"]), branch);
    assert_eq!(subjects(env.root()).len(), 3);
    let notes = std::fs::read_to_string(env.root().join("notes.txt")).expect("notes");
    assert_eq!(notes, "mine, uncommitted\n");
    assert_eq!(git_in(&wt.0, &["status", "--porcelain"]), "");
    let pr = read(&value["data"]["pr"]);
    assert!(pr.contains("- [x] Step 1:"), "{pr}");
}

#[test]
fn a_second_conductor_of_the_issue_from_the_user_tree_is_refused_while_one_works_in_the_worktree() {
    let env = Env::new();
    let planner = good_planner(&format!(
        "[[leaf.do]]\naction = \"run\"\nargv = [\"tdd\", \"-C\", \"{}\", \"conduct\", \"--json\", \"--worktree\", \"ISSUE\"]\n",
        env.root().display()
    ));
    let issue = project(&env, "");
    let fixture = fixture(&planner.replace("ISSUE", &issue), GOOD_VERIFIER);
    std::fs::write(env.home.path().join("fixture.toml"), fixture).expect("fixture");
    let wt = Sibling::of(&env);
    let (code, value) = env.json(&["conduct", &issue, "--worktree", "--max-steps", "0"]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(
        value["data"]["worktree"],
        wt.0.display().to_string().as_str()
    );
    let ledger_dir = ledger_dir(&value);
    let out = files_of(&ledger_dir.join("leaves"), "-planner-", "stdout.log").join("\n");
    assert!(out.contains("conductor_running"), "{out}");
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
    assert_eq!(
        subjects(env.root())[2..],
        [
            "plan: issue #1 Subtraction",
            "test: subtraction",
            "feat: subtraction",
            "refactor: subtraction"
        ]
    );
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    let lib = std::fs::read_to_string(env.root().join("src/lib.rs")).expect("lib");
    assert_eq!(lib, format!("{LIB}{ALT_IMPL}"));
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

const ISSUE_TWO: &str = "# Subtraction and negation\n\nUsers need to subtract and negate.\n\n## Acceptance criteria\n\n- [ ] `calc::sub(5, 2)` returns 3\n- [ ] `calc::neg(4)` returns -4\n";
const PLAN_TWO: &str = "---\ncycles:\n  - n: 1\n    project: app\n    title: subtraction\n    test: app::calc::sub subtracts\n    files: [src/lib.rs]\n    stub_expected: [src/lib.rs]\n    criterion: \"1\"\n  - n: 2\n    project: app\n    title: negation\n    test: app::calc::neg negates\n    files: [src/lib.rs]\n    stub_expected: [src/lib.rs]\n    criterion: \"2\"\n---\n";
const NEG_TEST: &str = "#[test]\nfn negates() {\n    assert_eq!(calc::neg(4), -4);\n}\n";
const NEG_STUB: &str = "\npub fn neg(_a: i32) -> i32 {\n    0\n}\n";
const NEG_IMPL: &str = "\npub fn neg(a: i32) -> i32 {\n    -a\n}\n";

/// A two-step issue (subtraction, negation) whose step 1 REFACTOR is rejected once
/// (its verifier doing `before_verdict` first) and revised into `DOCUMENTED`; the
/// issue's path.
fn project_two(env: &Env, before_verdict: &str) -> String {
    project_two_with(env, before_verdict, "")
}

/// `project_two` with `extra` leaf entries appended to the fixture.
fn project_two_with(env: &Env, before_verdict: &str, extra: &str) -> String {
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
    assert_eq!(thread.matches("<!-- comment ").count(), 2, "{thread}");
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

#[test]
fn a_conductor_killed_after_a_refactor_reject_before_the_next_step_resumes_to_the_same_commits() {
    let env = Env::new();
    let issue = project_two(&env, "");
    // Killed with step 1's REFACTOR REJECT recorded and step 2 not started, then before
    // the revise leaf, after the revised REFACTOR closed step 1 again (unjudged), after
    // its ACCEPT, and at step 2's first leaf.
    let points = [
        "conduct_after_verdict_refactor",
        "conduct_before_leaf_refactor",
        "conduct_after_advance_refactor",
        "conduct_after_verdict_refactor",
        "conduct_before_leaf_red",
    ];
    kill_at_each(&env, &issue, &points);
    finish_two(&env, &issue, 1);
}

#[test]
fn a_conductor_killed_around_a_refactor_judged_on_resume_before_the_next_step_resumes_to_the_same_commits()
 {
    let env = Env::new();
    let issue = project_two(&env, "");
    // Killed after step 1's REFACTOR closed it (unjudged), after the resume recorded
    // the REJECT, and after the revised REFACTOR closed it again.
    let points = [
        "conduct_after_advance_refactor",
        "conduct_after_verdict_refactor",
        "conduct_after_advance_refactor",
    ];
    kill_at_each(&env, &issue, &points);
    finish_two(&env, &issue, 1);
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
    assert_eq!(
        subjects(env.root())[2..],
        [
            "plan: issue #1 Subtraction",
            "test: subtraction",
            "feat: subtraction",
            "refactor: subtraction"
        ]
    );
    let lib = std::fs::read_to_string(env.root().join("src/lib.rs")).expect("lib");
    assert_eq!(lib, format!("{LIB}{IMPL}"));
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
fn a_conductor_killed_inside_the_engine_around_a_refactor_revise_before_the_next_step_resumes_to_the_same_commits()
 {
    let env = Env::new();
    let issue = project_two(&env, "");
    // Killed with step 1's REFACTOR REJECT recorded, then while its reopen had moved HEAD
    // back but not recorded it (step 2 open in the ledger), then between the revised
    // REFACTOR's commit and its record.
    let points = [
        "conduct_after_verdict_refactor",
        "rollback_head_moved",
        "advance_committed",
    ];
    kill_at_each(&env, &issue, &points);
    finish_two(&env, &issue, 2);
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
