//! The engine end to end on a real cargo project: two cycles, and the cheats it catches.

use std::path::PathBuf;

use serde_json::Value;

use crate::support::Env;

const MANIFEST: &str =
    "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n";
pub(crate) const LIB: &str = "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n";
const CONFIG: &str =
    "[project.app]\nadapter = \"cargo\"\n\n[locks]\nimpl = [\"src/**\"]\ntest = [\"tests/**\"]\n";
pub(crate) const PLAN: &str = "---\ncycles:\n  - n: 1\n    project: app\n    title: subtraction\n    test: app::calc::sub subtracts\n    criterion: 5 minus 2 is 3\n  - n: 2\n    project: app\n    title: multiplication\n    test: app::calc::mul multiplies\n    stub_expected: [src/lib.rs]\n---\n# Calculator plan\n";
pub(crate) const SUB_TEST: &str =
    "#[test]\nfn subtracts() {\n    assert_eq!(calc::sub(5, 2), 3);\n}\n";
pub(crate) const SUB_IMPL: &str = "\npub fn sub(a: i32, b: i32) -> i32 {\n    a - b\n}\n";
const MUL_TEST: &str = "#[test]\nfn multiplies() {\n    assert_eq!(calc::mul(3, 4), 12);\n}\n";

pub(crate) fn project() -> Env {
    let env = Env::new();
    env.write("Cargo.toml", MANIFEST);
    env.write("src/lib.rs", LIB);
    env.write(".gitignore", "target/\nCargo.lock\n");
    env.write("tdd.toml", CONFIG);
    env.write(".tdd/plan.md", PLAN);
    env.commit_all("calculator");
    env
}

fn advance(env: &Env) -> (i32, Value) {
    env.json(&["advance"])
}

/// Starts the run, writes `test` for cycle 1 (RED) and the subtraction (GREEN), each
/// accepted; gives GREEN's envelope.
fn start_red_green(env: &Env, test: &str) -> Value {
    let (exit, started) = env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    assert_eq!(exit, 0, "{started}");
    env.write("tests/sub.rs", test);
    let (exit, red) = advance(env);
    assert_eq!(
        (exit, &red["data"]["to"]),
        (0, &"AWAITING_IMPL".into()),
        "{red}"
    );
    env.write("src/lib.rs", &format!("{LIB}{SUB_IMPL}"));
    let (exit, green) = advance(env);
    assert_eq!(
        (exit, &green["data"]["to"]),
        (0, &"AWAITING_REFACTOR".into()),
        "{green}"
    );
    green
}

fn log(env: &Env) -> Vec<String> {
    env.git(&["log", "--format=%s", "--reverse"])
        .lines()
        .map(str::to_string)
        .collect()
}

fn files_in(env: &Env, rev: &str) -> Vec<String> {
    env.git(&["show", "--name-only", "--format=", rev])
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn two_cycles_with_every_cheat_caught() {
    let env = project();
    let (exit, started) = env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    assert_eq!(exit, 0, "{started}");
    assert_eq!(started["next_action"]["verb"], "write_test");
    let (_, status) = env.json(&["status"]);
    assert_eq!(status["data"]["cycle"]["phase"], "AWAITING_TEST");
    assert_eq!(status["next_action"]["verb"], "write_test");

    // RED with the implementation written too: the implementation is reverted and the
    // compile error (sub does not exist) is the red.
    env.write("tests/sub.rs", SUB_TEST);
    env.write("src/lib.rs", &format!("{LIB}{SUB_IMPL}"));
    let (exit, red) = advance(&env);
    assert_eq!(exit, 0, "{red}");
    assert_eq!(red["data"]["to"], "AWAITING_IMPL");
    assert_eq!(red["data"]["reverted"], serde_json::json!(["src/lib.rs"]));
    assert_eq!(red["data"]["red"]["kind"], "compile", "{red}");
    assert_eq!(
        std::fs::read_to_string(env.root().join("src/lib.rs")).expect("lib"),
        LIB
    );
    assert_eq!(files_in(&env, "HEAD"), vec!["tests/sub.rs"]);

    // An unchanged tree at GREEN is refused, then no_change until something changes.
    let (exit, refused) = advance(&env);
    assert_eq!(exit, 1);
    assert_eq!(refused["error"]["reason"], "target_failing");
    assert_eq!(refused["next_action"]["verb"], "write_implementation");
    let (exit, again) = advance(&env);
    assert_eq!(exit, 1);
    assert_eq!(again["error"]["reason"], "no_change");

    // GREEN with the test weakened: the test edit is reverted, the implementation kept.
    env.write("src/lib.rs", &format!("{LIB}{SUB_IMPL}"));
    env.write("tests/sub.rs", "#[test]\nfn subtracts() {}\n");
    let (exit, green) = advance(&env);
    assert_eq!(exit, 0, "{green}");
    assert_eq!(green["data"]["to"], "AWAITING_REFACTOR");
    assert_eq!(
        green["data"]["reverted"],
        serde_json::json!(["tests/sub.rs"])
    );
    assert_eq!(
        std::fs::read_to_string(env.root().join("tests/sub.rs")).expect("test"),
        SUB_TEST
    );
    assert_eq!(files_in(&env, "HEAD"), vec!["src/lib.rs"]);
    // The target passed alone first; the suite then ran without it.
    let suite_args = green["data"]["observations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|o| {
            o["tests"]
                .as_object()
                .is_some_and(|t| !t.keys().any(|k| k.ends_with("subtracts")))
        })
        .flat_map(|o| o["invocations"].as_array().cloned().unwrap_or_default())
        .flat_map(|i| i["argv"].as_array().cloned().unwrap_or_default())
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect::<Vec<_>>();
    assert!(
        suite_args
            .iter()
            .any(|a| a.starts_with("not (") && a.contains("test(=subtracts)")),
        "{green}"
    );

    let (exit, closed) = advance(&env);
    assert_eq!(exit, 0, "{closed}");
    assert_eq!(closed["data"]["to"], "CLOSED");
    assert_eq!(closed["next_action"]["verb"], "write_test");

    // Cycle 2: a deleted test during GREEN is restored; the declared stub goes with RED.
    env.write("tests/mul.rs", MUL_TEST);
    env.write("src/lib.rs", &format!("{LIB}{SUB_IMPL}\npub fn mul(_a: i32, _b: i32) -> i32 {{\n    unimplemented!(\"mul\")\n}}\n"));
    let (exit, red) = advance(&env);
    assert_eq!(exit, 0, "{red}");
    let mut red_files = files_in(&env, "HEAD");
    red_files.sort();
    assert_eq!(red_files, vec!["src/lib.rs", "tests/mul.rs"]);
    std::fs::remove_file(env.root().join("tests/mul.rs")).expect("delete test");
    env.write(
        "src/lib.rs",
        &format!("{LIB}{SUB_IMPL}\npub fn mul(a: i32, b: i32) -> i32 {{\n    a * b\n}}\n"),
    );
    let (exit, green) = advance(&env);
    assert_eq!(exit, 0, "{green}");
    assert_eq!(
        green["data"]["reverted"],
        serde_json::json!(["tests/mul.rs"])
    );
    assert!(env.root().join("tests/mul.rs").exists());
    let (exit, done) = advance(&env);
    assert_eq!(exit, 0, "{done}");
    assert_eq!(done["next_action"]["verb"], "complete");
    assert_eq!(done["next_action"]["terminal"], true);

    assert_eq!(
        log(&env),
        vec![
            "init",
            "calculator",
            "test: subtraction",
            "feat: subtraction",
            "test: multiplication",
            "feat: multiplication"
        ]
    );
    let trailers = env.git(&["log", "-1", "--format=%(trailers)", "HEAD~1"]);
    assert!(
        trailers.contains("TDD-Cycle: 2") && trailers.contains("TDD-Phase: red"),
        "{trailers}"
    );
    let (_, status) = env.json(&["status"]);
    assert_eq!(status["data"]["active"], false);
    let (exit, verify) = env.json(&["ledger", "verify"]);
    assert_eq!(exit, 0, "{verify}");
}

#[test]
fn a_dirty_tree_is_refused_at_start_listing_the_files() {
    let env = project();
    env.write("notes.txt", "scratch");
    let (exit, value) = env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    assert_eq!(exit, 1);
    assert_eq!(value["error"]["reason"], "dirty_tree");
    assert_eq!(value["data"]["files"], serde_json::json!(["notes.txt"]));
}

#[test]
fn a_plan_edited_after_registration_is_refused() {
    let env = project();
    let (exit, _) = env.json(&["plan", "register", ".tdd/plan.md"]);
    assert_eq!(exit, 0);
    env.write(
        ".tdd/plan.md",
        &PLAN.replace("title: subtraction", "title: minus"),
    );
    env.commit_all("edit plan");
    let (exit, value) = env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    assert_eq!(exit, 1);
    assert_eq!(value["error"]["reason"], "plan_changed");
}

#[test]
fn a_test_that_passes_on_arrival_is_a_red_first_violation() {
    let env = project();
    env.write("src/lib.rs", &format!("{LIB}{SUB_IMPL}"));
    env.commit_all("the behaviour already exists");
    env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    env.write("tests/sub.rs", SUB_TEST);
    let (exit, value) = advance(&env);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["to"], "SENSITIVITY_REQUIRED");
    assert_eq!(value["next_action"]["verb"], "run_sensitivity_check");
    let (exit, refused) = advance(&env);
    assert_eq!(exit, 1, "{refused}");
    assert_eq!(refused["error"]["reason"], "sensitivity_unverified");
}

#[test]
fn implementation_committed_during_red_is_refused_then_reverted() {
    let env = project();
    env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    let recorded = env.git(&["rev-parse", "HEAD"]).trim().to_string();
    env.write("src/lib.rs", &format!("{LIB}{SUB_IMPL}"));
    env.commit_all("sneak the implementation in");
    env.write("tests/sub.rs", SUB_TEST);
    // The commit made by hand is never built on.
    let (exit, value) = advance(&env);
    assert_eq!(exit, 1, "{value}");
    assert_eq!(value["error"]["reason"], "head_moved", "{value}");
    // Put back as the refusal says, the implementation is an edit RED does not allow.
    env.git(&["reset", "-q", "--soft", &recorded]);
    let (exit, value) = advance(&env);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["to"], "AWAITING_IMPL");
    assert_eq!(value["data"]["reverted"], serde_json::json!(["src/lib.rs"]));
}

#[test]
fn a_test_that_passes_without_the_implementation_is_insensitive() {
    let env = project();
    env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    // A test that fails at RED for a reason the implementation does not change: a file
    // the live tree has and git does not see.
    env.write(".git/info/exclude", "blocker.flag\n");
    env.write("blocker.flag", "");
    env.write(
        "tests/sub.rs",
        "#[test]\nfn subtracts() {\n    assert!(!std::path::Path::new(\"blocker.flag\").exists());\n}\n",
    );
    let (exit, red) = advance(&env);
    assert_eq!(exit, 0, "{red}");
    assert_eq!(red["data"]["to"], "AWAITING_IMPL", "{red}");
    // GREEN "passes" with a change that implements nothing.
    env.write("src/lib.rs", &format!("{LIB}// ready\n"));
    let (exit, green) = advance(&env);
    assert_eq!(exit, 1, "{green}");
    assert_eq!(green["error"]["reason"], "insensitive_test");
    assert_eq!(green["next_action"]["verb"], "rollback_to_red");
}

#[test]
fn rollback_restores_the_phase_start_and_to_previous_undoes_red() {
    let env = project();
    env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    let (exit, value) = env.json(&["rollback", "--to-previous"]);
    assert_eq!(exit, 1);
    assert_eq!(value["error"]["reason"], "no_previous_phase");
    env.write("tests/sub.rs", SUB_TEST);
    assert_eq!(advance(&env).0, 0);
    // Work in GREEN, then throw it away.
    env.write("src/lib.rs", &format!("{LIB}{SUB_IMPL}"));
    env.write("scratch.txt", "notes");
    let (exit, value) = env.json(&["rollback"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(
        std::fs::read_to_string(env.root().join("src/lib.rs")).expect("lib"),
        LIB
    );
    assert!(!env.root().join("scratch.txt").exists());
    assert_eq!(value["data"]["cycle"]["phase"], "AWAITING_IMPL");
    // Back to RED: the RED commit is undone and the test file is gone.
    let (exit, value) = env.json(&["rollback", "--to-previous"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["cycle"]["phase"], "AWAITING_TEST");
    assert!(!env.root().join("tests/sub.rs").exists());
    assert_eq!(log(&env), vec!["init", "calculator"]);
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    env.write("tests/sub.rs", SUB_TEST);
    let (exit, value) = advance(&env);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["to"], "AWAITING_IMPL");
}

#[test]
fn rollback_to_previous_at_a_fresh_cycle_reopens_the_refactor_that_closed_the_last() {
    let env = project();
    env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    env.write("tests/sub.rs", SUB_TEST);
    assert_eq!(advance(&env).0, 0);
    env.write("src/lib.rs", &format!("{LIB}{SUB_IMPL}"));
    assert_eq!(advance(&env).0, 0);
    let refactored = format!("{LIB}\n/// Subtraction.{SUB_IMPL}");
    env.write("src/lib.rs", &refactored);
    let (exit, value) = advance(&env);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["to"], "CLOSED");
    let closed = log(&env);
    assert_eq!(closed.len(), 5, "{closed:?}");
    // Cycle 2 has not moved: going back reopens cycle 1's REFACTOR, undoing its commit.
    let (exit, value) = env.json(&["rollback", "--to-previous"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["cycle"]["n"], 1, "{value}");
    assert_eq!(value["data"]["cycle"]["phase"], "AWAITING_REFACTOR");
    assert_eq!(log(&env), closed[..4]);
    assert_eq!(
        std::fs::read_to_string(env.root().join("src/lib.rs")).expect("lib"),
        format!("{LIB}{SUB_IMPL}")
    );
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    // A second REFACTOR closes the cycle again, and cycle 2 opens afresh.
    env.write("src/lib.rs", &refactored);
    let (exit, value) = advance(&env);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["to"], "CLOSED");
    assert_eq!(log(&env), closed);
    let (_, status) = env.json(&["status"]);
    assert_eq!(status["data"]["cycle"]["n"], 2, "{status}");
    assert_eq!(status["data"]["cycle"]["phase"], "AWAITING_TEST");
    // Once cycle 2 has moved, cycle 1 stays closed.
    env.write("tests/mul.rs", MUL_TEST);
    env.write(
        "src/lib.rs",
        &format!("{refactored}\npub fn mul(_a: i32, _b: i32) -> i32 {{\n    0\n}}\n"),
    );
    assert_eq!(advance(&env).0, 0);
    let (exit, value) = env.json(&["rollback", "--to-previous"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["cycle"]["n"], 2, "{value}");
    assert_eq!(value["data"]["cycle"]["phase"], "AWAITING_TEST");
}

#[test]
fn rollback_to_previous_does_not_reopen_a_refactor_across_a_skipped_cycle() {
    let env = project();
    env.write(
        ".tdd/plan.md",
        &PLAN.replace(
            "---\n# Calculator plan",
            "  - n: 3\n    project: app\n    title: division\n    test: app::calc::div divides\n---\n# Calculator plan",
        ),
    );
    env.commit_all("three cycles");
    env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    env.write("tests/sub.rs", SUB_TEST);
    assert_eq!(advance(&env).0, 0);
    env.write("src/lib.rs", &format!("{LIB}{SUB_IMPL}"));
    assert_eq!(advance(&env).0, 0);
    env.write("src/lib.rs", &format!("{LIB}\n/// Subtraction.{SUB_IMPL}"));
    assert_eq!(advance(&env).0, 0);
    let (code, skipped) = env.json(&["cycle", "skip", "--reason", "later"]);
    assert_eq!(code, 0, "{skipped}");
    let before = log(&env);
    let (exit, value) = env.json(&["rollback", "--to-previous"]);
    assert_eq!(exit, 1, "{value}");
    assert_eq!(value["error"]["reason"], "no_previous_phase");
    assert_eq!(log(&env), before);
}

/// Starts the run and takes cycle 1 (subtraction) through RED, GREEN and its close,
/// which must regenerate `generated/count.txt` to count the two functions.
fn closes_with_the_count_regenerated(env: &Env) {
    assert_eq!(env.json(&["run", "start", "--plan", ".tdd/plan.md"]).0, 0);
    env.write("tests/sub.rs", SUB_TEST);
    assert_eq!(advance(env).0, 0);
    env.write("src/lib.rs", &format!("{LIB}{SUB_IMPL}"));
    assert_eq!(advance(env).0, 0);
    let (exit, value) = advance(env);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["to"], "CLOSED");
    assert_eq!(
        std::fs::read_to_string(env.root().join("generated/count.txt")).expect("count"),
        "2\n"
    );
}

#[test]
fn a_stale_artifact_is_regenerated_and_committed_on_its_own_at_close() {
    let env = project();
    let count = "mkdir -p generated && grep -c 'pub fn' src/lib.rs > generated/count.txt";
    env.write(
        "tdd.toml",
        &format!("{CONFIG}\n[artifact.count]\npath = \"generated\"\nproduced_by = \"app\"\nregenerate = \"{count}\"\ncheck = \"test \\\"$(grep -c 'pub fn' src/lib.rs)\\\" = \\\"$(cat generated/count.txt)\\\"\"\n"),
    );
    env.write("generated/count.txt", "1\n");
    env.commit_all("count artifact");
    closes_with_the_count_regenerated(&env);
    let log = log(&env);
    assert_eq!(
        &log[log.len() - 3..],
        [
            "test: subtraction",
            "feat: subtraction",
            "chore(count): regenerate"
        ]
    );
    assert_eq!(env.git(&["status", "--porcelain"]), "");
}

/// A close-sweep command that pries: it plants a git hook, reads the git credentials
/// into its output, and leaves a process behind; then it does its job.
const PRYING_SWEEP: &str = "echo planted > .git/hooks/pre-commit\ncat \"$HOME/.git-credentials\" > pried.txt\nsetsid sleep 3149 >/dev/null 2>&1 &\nmkdir -p generated\ngrep -c 'pub fn' src/lib.rs > generated/count.txt\n";

#[test]
fn a_close_sweeps_lint_and_artifact_commands_run_confined_like_the_suites() {
    let env = project();
    env.write(
        "tdd.toml",
        &CONFIG.replace(
            "adapter = \"cargo\"\n",
            "adapter = \"cargo\"\nlint = [\"sh sweep.sh\"]\n",
        )
        .replace(
            "[locks]",
            "[artifact.count]\npath = \"generated\"\nproduced_by = \"app\"\nregenerate = \"sh sweep.sh\"\ncheck = \"false\"\n\n[locks]",
        ),
    );
    env.write("sweep.sh", PRYING_SWEEP);
    env.write("generated/count.txt", "1\n");
    env.write(".gitignore", "target/\nCargo.lock\npried.txt\n");
    env.commit_all("a prying sweep");
    std::fs::write(
        env.home.path().join(".git-credentials"),
        "s3cret-credential",
    )
    .expect("plant");
    closes_with_the_count_regenerated(&env);
    if !tdd_sandbox::probe().confines() {
        return;
    }
    assert!(!env.root().join(".git/hooks/pre-commit").exists());
    let pried = std::fs::read_to_string(env.root().join("pried.txt")).unwrap_or_default();
    assert!(!pried.contains("s3cret"), "{pried}");
    if tdd_sandbox::namespaces().processes {
        let left = std::process::Command::new("pgrep")
            .args(["-f", "sleep 3149"])
            .output()
            .expect("pgrep");
        assert!(left.stdout.is_empty(), "a sweep's process outlived it");
    }
}

#[test]
fn a_test_id_typed_as_nextest_prints_it_is_found_when_the_package_is_named_like_the_project() {
    // `calc::sub subtracts` is nextest's id of the test `subtracts` in the binary `sub`
    // of the package `calc`; with the project named `calc` too, the leading `calc` is
    // the runner's, not a project prefix to take off.
    let env = Env::new();
    env.write("Cargo.toml", MANIFEST);
    env.write("src/lib.rs", &format!("{LIB}{SUB_IMPL}"));
    env.write("tests/sub.rs", SUB_TEST);
    env.write(".gitignore", "target/\nCargo.lock\n");
    env.write("tdd.toml", "[project.calc]\nadapter = \"cargo\"\n");
    env.commit_all("calculator");
    let (exit, value) = env.json(&["test", "calc::sub subtracts"]);
    assert_eq!(exit, 0, "{value}");
    let target = &value["data"]["targets"][0];
    assert_eq!(target["status"], "passed", "{value}");
    // With the prefix written out, the same test.
    let (exit, value) = env.json(&["test", "calc::calc::sub subtracts"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["targets"][0]["status"], "passed", "{value}");
    // A test that is not there is still not found.
    let (_, value) = env.json(&["test", "calc::sub divides"]);
    assert_eq!(
        value["data"]["targets"][0]["status"], "not_found",
        "{value}"
    );
}

#[test]
fn a_target_directory_named_outside_the_checkout_is_built_into_by_no_run() {
    // An absolute CARGO_TARGET_DIR in tdd.toml would be shared by the live runs of the
    // agent's code and the clean room's deciding runs: each builds into its own instead.
    let shared = tempfile::tempdir().expect("shared target");
    let env = Env::new();
    env.write("Cargo.toml", MANIFEST);
    env.write("src/lib.rs", LIB);
    env.write(".gitignore", "target/\nCargo.lock\n");
    env.write(
        "tdd.toml",
        &format!(
            "[project.app]\nadapter = \"cargo\"\nenv = {{ CARGO_TARGET_DIR = {:?} }}\n\n[locks]\nimpl = [\"src/**\"]\ntest = [\"tests/**\"]\n",
            shared.path().display().to_string()
        ),
    );
    env.write(".tdd/plan.md", PLAN);
    env.commit_all("calculator");
    start_red_green(&env, SUB_TEST);
    let written: Vec<_> = crate::conduct::files_under(shared.path())
        .into_iter()
        .map(|(path, _)| path)
        .collect();
    assert!(
        written.is_empty(),
        "built into the shared directory: {written:?}"
    );
}

#[test]
fn a_target_named_without_its_package_is_found_where_the_gate_finds_it() {
    // `app::sub subtracts` for `tests/sub.rs` of crate `calc`, whose nextest binary id
    // is `calc::sub`: `tdd test` runs and reads it as the gates do.
    let env = project();
    env.write("tests/sub.rs", SUB_TEST);
    env.write("src/lib.rs", &format!("{LIB}{SUB_IMPL}"));
    env.commit_all("sub");
    let (code, value) = env.json(&["test", "app::sub subtracts"]);
    assert_eq!(code, 0, "{value}");
    let target = &value["data"]["targets"][0];
    assert_eq!(target["status"], "passed", "{value}");
    assert_eq!(target["matched"][0], "app::calc::sub subtracts", "{value}");
}

#[test]
fn what_a_deciding_runs_tests_write_into_the_build_directory_is_discarded() {
    // The clean room's target directory is kept warm from one deciding run to the next:
    // a file the tests plant there (a compiled library a later build would link) must
    // not survive the run that planted it.
    let env = project();
    let planting = "#[test]\nfn subtracts() {\n    if let Ok(dir) = std::env::var(\"CARGO_TARGET_DIR\") {\n        let _ = std::fs::write(std::path::Path::new(&dir).join(\"debug/planted-by-a-test\"), \"x\");\n    }\n    assert_eq!(calc::sub(5, 2), 3);\n}\n";
    let green = start_red_green(&env, planting);
    let builds: Vec<PathBuf> = crate::conduct::files_under(env.ledger_home.path())
        .into_iter()
        .map(|(path, _)| path)
        .filter(|path| path.to_string_lossy().contains("app-cargo-target/"))
        .collect();
    assert!(
        !builds.is_empty(),
        "the clean room built into its own directory"
    );
    let planted: Vec<&PathBuf> = builds
        .iter()
        .filter(|path| path.ends_with("planted-by-a-test"))
        .collect();
    assert!(planted.is_empty(), "the planted file survived: {planted:?}");
    let said = green["data"]["observations"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|o| o["diagnostics"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .any(|line| line.contains("planted-by-a-test") && line.contains("emptied"));
    assert!(said, "the run says what the tests wrote: {green}");
}

/// The directories named `name` under `dir`, at any depth, never through a link.
fn dirs_named(dir: &std::path::Path, name: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            if entry.file_name() == name {
                found.push(path.clone());
            }
            found.extend(dirs_named(&path, name));
        }
    }
    found
}

/// The clean room's build directory for the project made a link to a directory
/// outside between two gates: the deciding runs never build into it, and the link is
/// replaced by a directory of tdd's own.
#[test]
fn a_build_directory_made_a_link_to_outside_is_never_built_into() {
    let env = project();
    let (exit, started) = env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    assert_eq!(exit, 0, "{started}");
    env.write("tests/sub.rs", SUB_TEST);
    let (exit, red) = advance(&env);
    assert_eq!(exit, 0, "{red}");
    let builds = dirs_named(env.ledger_home.path(), "app-cargo-target");
    assert!(
        !builds.is_empty(),
        "a deciding run built into the clean room"
    );
    let outside = tempfile::tempdir().expect("outside");
    for build in &builds {
        std::fs::remove_dir_all(build).expect("remove");
        std::os::unix::fs::symlink(outside.path(), build).expect("link");
    }
    env.write("src/lib.rs", &format!("{LIB}{SUB_IMPL}"));
    let (exit, green) = advance(&env);
    assert_eq!(exit, 0, "{green}");
    assert_eq!(
        std::fs::read_dir(outside.path()).expect("outside").count(),
        0,
        "nothing was built outside: {green}"
    );
    for build in &builds {
        let meta = std::fs::symlink_metadata(build).expect("the build directory");
        assert!(meta.is_dir(), "{} is a directory again", build.display());
    }
}
