//! Leaves launched for real: the test plays the conductor through `tdd-leaves`, each
//! leaf is `tdd __scripted-leaf` under `tdd __supervise`, and inside it `tdd status`
//! and `tdd verdict` check the leaf's token against the ledger.

use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;
use tdd_engine::git::Git;
use tdd_engine::git::GitProbe;
use tdd_engine::ledger::Ledger;
use tdd_engine::ledger::LedgerLocation;
use tdd_engine::plan::CycleKind;
use tdd_engine::plan::PlannedCycle;
use tdd_engine::run::Phase;
use tdd_leaves::Leaves;
use tdd_leaves::Provider;
use tdd_leaves::Request;
use tdd_leaves::Response;
use tdd_leaves::Scripted;
use tdd_prompts::CommitSha;
use tdd_prompts::DeveloperInput;
use tdd_prompts::Issue;
use tdd_prompts::Prompt;
use tdd_prompts::RepoFacts;
use tdd_prompts::Step;
use tdd_prompts::TestId;
use tdd_prompts::VerifierInput;

use crate::support::Env;

const TARGET: &str = "tests/test_duration.py::test_compound_duration";

fn tdd_bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("tdd")
}

fn location(env: &Env) -> LedgerLocation {
    let home = env.ledger_home.path().as_os_str().to_owned();
    LedgerLocation::resolve_with(env.root(), &GitProbe, |key| {
        (key == "TDD_LEDGER_HOME").then(|| home.clone())
    })
    .expect("ledger location")
}

/// The conductor's side: leaves under `tdd __supervise`, with a forge token in the
/// conductor's environment.
fn leaves(env: &Env) -> Leaves {
    let caller = [
        ("PATH", std::env::var("PATH").unwrap_or_default()),
        ("HOME", env.home.path().display().to_string()),
        ("LANG", "C.UTF-8".to_string()),
        (
            "TDD_LEDGER_HOME",
            env.ledger_home.path().display().to_string(),
        ),
        ("GITHUB_TOKEN", "ghp_conductor_secret".to_string()),
    ]
    .map(|(k, v)| (k.to_string(), v));
    Leaves::for_repository(&location(env), &tdd_bin()).caller_env(caller)
}

fn scripted(env: &Env, fixture: &str) -> Scripted {
    let path = env.home.path().join("fixture.toml");
    std::fs::write(&path, fixture).expect("fixture");
    Scripted::new(path, tdd_bin(), ["__scripted-leaf"])
}

fn issue() -> Issue {
    Issue::from_markdown(
        12,
        "Parse durations".into(),
        "- [ ] `parse_duration(\"90s\")` returns 90\n- [ ] `parse_duration(\"1h30m\")` returns 5400\n"
            .into(),
    )
}

fn cycle() -> PlannedCycle {
    PlannedCycle {
        n: 2,
        title: "Compound durations".into(),
        kind: CycleKind::Standard,
        projects: vec!["app".into()],
        tests: vec![TARGET.into()],
        files: vec!["app/duration.py".into()],
        stub_expected: vec![],
        modifies_tests: vec![],
        harness: vec![],
        changes_dependencies: false,
        commit_red: None,
        commit_green: None,
        commit_refactor: None,
        commit_pin: None,
        criterion: Some("2".into()),
        meta: Value::Null,
    }
}

fn verifier_request(env: &Env) -> Request {
    let cycle = cycle();
    let input = VerifierInput::new(
        TestId::planned(&cycle),
        issue().spec_for(&cycle).expect("spec"),
        CommitSha::resolve(&Git::new(env.root()), "HEAD").expect("sha"),
        None,
        Phase::AwaitingTest,
    );
    let prompt = Prompt::verifier(&input).expect("prompt");
    Request::new(prompt, 12, 2, env.root())
}

fn developer_request(env: &Env) -> Request {
    let cycle = cycle();
    let input = DeveloperInput {
        issue: issue(),
        targets: TestId::planned(&cycle),
        step: Step {
            criterion: None,
            cycle,
        },
        phase: Phase::AwaitingTest,
        repo: RepoFacts::default(),
        findings: vec![],
    };
    Request::new(
        Prompt::developer(&input).expect("prompt"),
        12,
        2,
        env.root(),
    )
}

fn run(leaves: &Leaves, provider: &dyn Provider, request: Request) -> Response {
    let mut run = provider.run(leaves, request).expect("launch");
    provider
        .response(leaves, &mut run, Some(Duration::from_secs(120)))
        .expect("response")
        .expect("the leaf ended within 120 s")
}

fn events(env: &Env, kind: &str) -> Vec<Value> {
    let ledger = Ledger::open(&location(env).database).expect("ledger");
    ledger
        .events_of_kind(None, kind)
        .expect("events")
        .into_iter()
        .map(|e| e.payload)
        .collect()
}

/// The JSON envelopes a leaf printed on its stdout.
fn envelopes(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|v| v.get("envelope_version").is_some())
        .collect()
}

const VERIFIER_REJECTS: &str = r#"
version = 1
[[leaf]]
role = "verifier"
phase = "red"
[[leaf.do]]
action = "run"
argv = ["tdd", "status", "--json"]
[[leaf.do]]
action = "run"
argv = ["tdd", "verdict", "reject", "--json", "--reason", "the test asserts nothing", "--finding", "tests/test_duration.py: no assertion"]
"#;

#[test]
fn a_verifier_leaf_reads_its_assignment_and_its_reject_is_recorded() {
    let env = Env::new();
    let leaves = leaves(&env);
    let provider = scripted(&env, VERIFIER_REJECTS);
    let response = run(&leaves, &provider, verifier_request(&env));
    let printed = envelopes(&response.text);
    assert_eq!(printed.len(), 2, "{}", response.text);
    let status = &printed[0]["data"];
    assert_eq!(status["leaf_id"], response.leaf_id.as_str());
    assert_eq!(status["assignment"]["role"], "verifier");
    assert_eq!(status["assignment"]["phase"], "red");
    assert_eq!(status["assignment"]["targets"][0], TARGET);
    assert_eq!(
        status["assignment"]["behaviour_spec"],
        "`parse_duration(\"1h30m\")` returns 5400"
    );
    assert_eq!(printed[0]["next_action"]["verb"], "give_verdict");
    assert_eq!(printed[1]["ok"], true, "{}", printed[1]);
    let ledger = Ledger::open(&location(&env).database).expect("ledger");
    let verdict = tdd_leaves::verdict::verdict_of(&ledger, &response.leaf_id)
        .expect("ledger")
        .expect("a verdict");
    assert_eq!(verdict.decision, tdd_leaves::Decision::Reject);
    assert_eq!(verdict.findings, ["tests/test_duration.py: no assertion"]);
}

/// Runs one scripted leaf (`fixture`) for `request`, and asserts the verdict it tried
/// was refused for `reason`, by this leaf, and that no verdict was recorded. Returns
/// the leaf's response.
fn refused_verdict(fixture: &str, request: fn(&Env) -> Request, reason: &str) -> Response {
    let env = Env::new();
    let leaves = leaves(&env);
    let provider = scripted(&env, fixture);
    let response = run(&leaves, &provider, request(&env));
    let refused = events(&env, "verdict_refused");
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["reason"], reason);
    assert_eq!(refused[0]["leaf_id"], response.leaf_id.as_str());
    assert!(events(&env, "verdict_recorded").is_empty());
    response
}

#[test]
fn an_accept_without_the_verifiers_own_test_runs_is_refused_and_recorded() {
    let fixture = r#"
version = 1
[[leaf]]
role = "verifier"
[[leaf.do]]
action = "run"
argv = ["tdd", "verdict", "accept", "--json", "--reason", "looks fine to me"]
"#;
    let response = refused_verdict(fixture, verifier_request, "verdict_without_evidence");
    let printed = envelopes(&response.text);
    assert_eq!(printed[0]["error"]["reason"], "verdict_without_evidence");
    assert_eq!(printed[0]["data"]["missing"][0], TARGET);
}

#[test]
fn a_developer_leafs_token_cannot_give_a_verdict() {
    let fixture = r#"
version = 1
[[leaf]]
role = "developer"
[[leaf.do]]
action = "verdict"
decision = "accept"
reason = "my own work is great"
"#;
    refused_verdict(fixture, developer_request, "verdict_not_verifier");
}

#[test]
fn a_forged_token_or_no_leaf_at_all_is_refused() {
    let env = Env::new();
    let leaves = leaves(&env);
    let provider = scripted(&env, VERIFIER_REJECTS);
    let request = verifier_request(&env);
    let run = leaves.prepare(&provider, request).expect("prepare");
    let out = env
        .tdd()
        .env("TDD_LEAF_ID", run.id())
        .env("TDD_LEAF_TOKEN", "0".repeat(64))
        .args(["verdict", "accept", "--reason", "forged", "--json"])
        .output()
        .expect("runs");
    let value = crate::support::envelope(&out);
    assert_eq!(crate::support::code(&out), 1);
    assert_eq!(value["error"]["reason"], "leaf_token_invalid");
    assert_eq!(
        events(&env, "verdict_refused")[0]["reason"],
        "leaf_token_invalid"
    );
    let (code, value) = env.json(&["verdict", "reject", "--reason", "not a leaf"]);
    assert_eq!(code, 1);
    assert_eq!(value["error"]["reason"], "verdict_outside_leaf");
    let out = env
        .tdd()
        .env("TDD_LEAF_ID", run.id())
        .env("TDD_LEAF_TOKEN", "wrong")
        .args(["status", "--json"])
        .output()
        .expect("runs");
    assert_eq!(
        crate::support::envelope(&out)["error"]["reason"],
        "leaf_token_invalid"
    );
}

#[test]
fn the_conductors_github_token_is_absent_inside_a_leaf() {
    let env = Env::new();
    let leaves = leaves(&env);
    let provider = scripted(
        &env,
        r#"
version = 1
[[leaf]]
role = "developer"
[[leaf.do]]
action = "run"
argv = ["env"]
"#,
    );
    let response = run(&leaves, &provider, developer_request(&env));
    // The supervisor process reported the leaf's launch and exit into the ledger.
    assert_eq!(events(&env, "leaf_launched").len(), 1);
    assert_eq!(events(&env, "leaf_exited").len(), 1);
    let names: Vec<&str> = response
        .text
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    assert!(names.contains(&"TDD_LEAF_TOKEN"), "{names:?}");
    assert!(names.contains(&"TDD_LEDGER_HOME"), "{names:?}");
    assert!(!names.contains(&"GITHUB_TOKEN"), "{names:?}");
    assert!(!response.text.contains("ghp_conductor_secret"));
}

#[test]
fn leaves_show_prompt_prints_exactly_what_the_leaf_was_told() {
    let env = Env::new();
    let leaves = leaves(&env);
    let provider = scripted(
        &env,
        "version = 1\n[[leaf]]\nrole = \"developer\"\n[[leaf.do]]\naction = \"print\"\ntext = \"ok\\n\"\n",
    );
    let request = developer_request(&env);
    let told = request.prompt.text().to_string();
    let response = run(&leaves, &provider, request);
    let (code, value) = env.json(&["leaves", "show", &response.leaf_id, "--prompt"]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(value["data"]["prompt"]["text"], told.as_str());
    let (_, record) = env.json(&["leaves", "show", &response.leaf_id]);
    assert_eq!(record["data"]["role"], "developer");
    assert_eq!(record["data"]["provider"], "scripted");
    assert!(
        record["data"]["token_sha256"]
            .as_str()
            .is_some_and(|h| h.len() == 64)
    );
    let (text_code, text) = env.on_terminal(&["leaves", "show", &response.leaf_id, "--prompt"]);
    assert_eq!(text_code, 0);
    assert!(text.starts_with(&told), "{text}");
    let (missing, value) = env.json(&["leaves", "show", "no-such-leaf"]);
    assert_eq!(missing, 2);
    assert_eq!(value["error"]["reason"], "leaf_not_found");
    assert!(Path::new(&tdd_bin()).exists());
}

/// A pytest project with a passing test and an active run whose cycle targets it.
fn pytest_run() -> Env {
    let env = Env::new();
    env.write("calc.py", "def add(a, b):\n    return a + b\n");
    env.write(
        "tests/test_add.py",
        "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n\ndef test_other():\n    assert add(0, 0) == 0\n",
    );
    env.write("pytest.ini", "[pytest]\npythonpath = .\n");
    env.write(".gitignore", "__pycache__/\n.pytest_cache/\n");
    env.write(
        "tdd.toml",
        "[project.py]\nadapter = \"pytest\"\ntest_paths = [\"tests/\"]\n\n[locks]\nimpl = [\"calc.py\"]\ntest = [\"tests/**\"]\n",
    );
    env.write(
        ".tdd/plan.md",
        "---\ncycles:\n  - n: 1\n    project: py\n    title: addition\n    test: tests/test_add.py::test_add\n    pin_cycle: true\n---\n",
    );
    env.commit_all("calc");
    let (exit, value) = env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    assert_eq!(exit, 0, "{value}");
    env
}

fn pin_verifier_request(env: &Env) -> Request {
    let mut cycle = cycle();
    cycle.tests = vec!["tests/test_add.py::test_add".into()];
    let input = VerifierInput::new(
        TestId::planned(&cycle),
        issue().spec_for(&cycle).expect("spec"),
        CommitSha::resolve(&Git::new(env.root()), "HEAD").expect("sha"),
        None,
        Phase::AwaitingPin,
    );
    Request::new(Prompt::verifier(&input).expect("prompt"), 12, 1, env.root())
}

#[test]
fn an_accept_backed_by_the_verifiers_own_run_of_the_target_is_recorded() {
    let env = pytest_run();
    // Someone outside the verifier claims its id without its token: not evidence.
    let leaves = leaves(&env);
    let provider = scripted(
        &env,
        r#"
version = 1
[[leaf]]
role = "verifier"
attempt = 1
[[leaf.do]]
action = "run"
argv = ["tdd", "test", "tests/test_add.py::test_other", "--json"]
[[leaf.do]]
action = "run"
argv = ["tdd", "verdict", "accept", "--json", "--reason", "ran something"]

[[leaf]]
role = "verifier"
attempt = 2
[[leaf.do]]
action = "run"
argv = ["tdd", "test", "tests/test_add.py::test_add", "--json"]
[[leaf.do]]
action = "run"
argv = ["tdd", "verdict", "accept", "--json", "--reason", "the target passes and pins add"]
"#,
    );
    let first = run(&leaves, &provider, pin_verifier_request(&env));
    let refused = envelopes(&first.text);
    assert_eq!(
        refused.last().expect("envelopes")["error"]["reason"],
        "verdict_without_evidence",
        "{}",
        first.text
    );
    let mut request = pin_verifier_request(&env);
    request.attempt = 2;
    let second = run(&leaves, &provider, request);
    let printed = envelopes(&second.text);
    assert!(
        printed[0]["data"]["recorded_in_run"].is_string(),
        "{}",
        second.text
    );
    assert_eq!(printed[1]["ok"], true, "{}", second.text);
    let observed = events(&env, "test_observed");
    assert_eq!(
        observed.last().expect("observed")["leaf_id"],
        second.leaf_id.as_str()
    );
    let recorded = events(&env, "verdict_recorded");
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0]["decision"], "accept");
    assert_eq!(recorded[0]["leaf_id"], second.leaf_id.as_str());
    assert!(
        !recorded[0]["evidence"]
            .as_array()
            .expect("evidence")
            .is_empty()
    );
    // A process that only claims a leaf id is not recorded as that leaf.
    let out = env
        .tdd()
        .env("TDD_LEAF_ID", second.leaf_id.as_str())
        .args(["test", "tests/test_add.py::test_add", "--json"])
        .output()
        .expect("runs");
    assert_eq!(crate::support::code(&out), 0);
    assert_eq!(
        events(&env, "test_observed").last().expect("observed")["leaf_id"],
        Value::Null
    );
}

#[test]
fn the_example_misbehaving_agents_are_each_classified() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/scripted/misbehaving.toml");
    let provider = Scripted::new(fixture, tdd_bin(), ["__scripted-leaf"]);
    let attempt = |n: u32, idle: Option<Duration>| {
        let env = Env::new();
        env.write("calc.py", "def add(a, b):\n    return a + b\n");
        env.commit_all("calc");
        let mut request = developer_request(&env);
        request.attempt = n;
        request.idle_timeout = idle;
        let response = run(&leaves(&env), &provider, request);
        (env, response)
    };

    let (env, cheat) = attempt(1, None);
    assert_eq!(cheat.completion, tdd_leaves::Completion::Completed);
    assert!(env.root().join(".tdd/issue-12.md").exists());
    assert_eq!(
        events(&env, "verdict_refused")[0]["reason"],
        "verdict_not_verifier"
    );

    let (_, hang) = attempt(2, Some(Duration::from_secs(1)));
    assert_eq!(
        hang.completion,
        tdd_leaves::Completion::KilledStuck {
            reason: "idle_timeout".into()
        }
    );

    let (env, crash) = attempt(3, None);
    assert!(
        matches!(crash.completion, tdd_leaves::Completion::Crashed { .. }),
        "{crash:?}"
    );
    assert!(env.root().join("tests/test_add.py").exists());

    let (_, garbage) = attempt(4, None);
    assert!(
        matches!(garbage.completion, tdd_leaves::Completion::Crashed { .. }),
        "{garbage:?}"
    );
    assert!(garbage.text.contains('\u{fffd}'));
}
