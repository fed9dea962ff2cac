//! Every bail cause of `tdd conduct` produced with real leaves: its class, exit 4,
//! and what is kept or reset.

use std::path::PathBuf;

use super::*;
use crate::support::Env;

const SILENT_VERIFIER: &str =
    "[[leaf]]\nrole = \"verifier\"\n[[leaf.do]]\naction = \"print\"\ntext = \"no opinion\"\n";

const REJECTING_VERIFIER: &str = "[[leaf]]\nrole = \"verifier\"\n[[leaf.do]]\naction = \"verdict\"\ndecision = \"reject\"\nreason = \"never good enough\"\nfindings = [\"tests/sub.rs: try harder\"]\n";

#[test]
fn a_verifier_without_a_verdict_bails_verdict_missing_and_the_step_is_reset() {
    let env = Env::new();
    let issue = project(&env, &fixture(&good_planner(""), SILENT_VERIFIER));
    let value = expect_bail(&env, &issue, "verdict_missing", "process");
    assert_eq!(value["data"]["bail"]["phase"], "red");
    // The bail names the verifier, and the command it names shows what it printed.
    let detail = value["data"]["bail"]["detail"].as_str().unwrap_or_default();
    let leaf = detail
        .strip_prefix("verifier ")
        .and_then(|d| d.split_whitespace().next())
        .unwrap_or_else(|| panic!("no leaf named in {value}"));
    let action = value["data"]["bail"]["action"].as_str().unwrap_or_default();
    assert!(action.contains(&format!("`tdd logs {leaf}`")), "{value}");
    let (code, logs) = env.json(&["logs", leaf]);
    assert_eq!(code, 0, "{logs}");
    assert!(
        logs["data"]["stdout"]
            .as_str()
            .is_some_and(|o| o.contains("no opinion")),
        "{logs}"
    );
    let (_, shown) = env.on_terminal(&["leaves", "show", leaf]);
    assert!(
        shown.contains(&format!("output: `tdd logs {leaf}`")),
        "{shown}"
    );
    // `tdd status` says the conduct bailed and how to go on, not to start a run.
    let (code, status) = env.json(&["status"]);
    assert_eq!(code, 0, "{status}");
    assert_eq!(status["next_action"]["verb"], "resume_conduct", "{status}");
    let detail = status["next_action"]["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains(&format!("`tdd conduct {issue}` resumes issue #1")),
        "{status}"
    );
    assert_eq!(
        status["data"]["last_conduct"]["ended"], "conduct_bailed",
        "{status}"
    );
    let (_, text) = env.on_terminal(&["status"]);
    assert!(
        text.contains("the last `tdd conduct` here, of issue #1, bailed at step 1 (red)"),
        "{text}"
    );
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
    // The thread's bail comment says whose failure it is in words.
    let dir = PathBuf::from(value["data"]["run"]["dir"].as_str().expect("run dir"));
    let thread = std::fs::read_to_string(dir.join("thread.md")).expect("thread");
    assert!(
        thread.contains("(the agents could not do the work within the rules)"),
        "{thread}"
    );
    assert!(!thread.contains("(Process)"), "{thread}");
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
    assert_eq!(log[log.len() - 3..], STEP_ONE[1..], "{log:?}");
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
    assert_eq!(subjects(env.root())[2..], STEP_ONE);
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
    let env = super::unconfined_env();
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
    let env = super::unconfined_env();
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
    std::fs::remove_dir_all(&comments).expect("the run comment's directory");
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
    // The run comment and step 1's.
    assert_eq!(thread.matches("<!-- comment ").count(), 2, "{thread}");
    // The finished PR tells of the bail it got past, and does not end on it.
    let pr = read(&value["data"]["pr"]);
    assert!(
        pr.contains("- bailed `forge_unreachable` at step 1 report"),
        "{pr}"
    );
    assert!(!pr.contains("## Bailed"), "{pr}");
}

/// A stand-in for Claude Code that says it is version 9.9.0 and, as a leaf, ends its
/// turn at once without doing anything.
const UNTESTED_CLAUDE: &str = r#"#!/bin/sh
if [ "$1" = "--version" ]; then echo "9.9.0 (Claude Code)"; exit 0; fi
cat > /dev/null
echo '{"type":"result","subtype":"success","is_error":false,"result":"nothing done","session_id":"5f0c1e2a-0000-4000-8000-000000000000","num_turns":1,"total_cost_usd":0,"usage":{"input_tokens":1,"output_tokens":1}}'
"#;

#[test]
fn a_cli_of_an_untested_version_is_reported_when_its_leaf_starts() {
    let env = Env::new();
    let issue = project(&env, &fixture(&good_planner(""), GOOD_VERIFIER));
    let bin = tempfile::tempdir().expect("bin");
    let claude = bin.path().join("claude");
    std::fs::write(&claude, UNTESTED_CLAUDE).expect("claude");
    std::fs::set_permissions(&claude, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let config = std::fs::read_to_string(env.root().join("tdd.toml")).expect("config");
    let config = config.replace(
        "provider = \"scripted\"\nverifier_provider = \"scripted\"",
        "provider = \"claude\"\nverifier_provider = \"scripted\"",
    );
    env.write(
        "tdd.toml",
        &format!(
            "{config}\n[provider.claude]\ncommand = \"{}\"\n",
            claude.display()
        ),
    );
    env.commit_all("an untested claude");
    let out = env
        .tdd_std()
        .args(["--json", "conduct", &issue])
        .output()
        .expect("tdd runs");
    // The planner did nothing, so the run bails; the warning came first.
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warnings: Vec<Value> = stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["event"] == "cli_untested")
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert_eq!(warnings[0]["provider"], "claude");
    assert_eq!(warnings[0]["version"], "9.9.0");
    assert!(
        warnings[0]["tested_versions"]
            .as_array()
            .is_some_and(|v| v.iter().any(|t| t == "2.1")),
        "{stderr}"
    );
}
