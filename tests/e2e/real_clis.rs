//! The real agent CLIs (Claude Code, codex) as leaves, offline: each talks to a
//! loopback fake of its model API (`model_api`) that replays scripted tool calls. A
//! developer leaf runs `tdd status` and writes a file; a verifier leaf, in a scratch
//! worktree, tries to write the real tree, runs `tdd test` and gives its verdict.
//!
//! The CLIs are the ones `cargo xtask test` installs (`TDD_REAL_CLIS` names the
//! directory). Without `TDD_REAL_CLIS` these tests skip, saying so, except under CI,
//! where they look in the default directory and fail when the CLIs are missing.

#![expect(
    clippy::print_stderr,
    reason = "a skipped test says why, and the measured start-up times are reported"
)]

use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;
use std::time::Instant;

use serde_json::Value;
use serde_json::json;
use tdd_engine::config::ProviderConfig;
use tdd_engine::git::Git;
use tdd_engine::git::GitProbe;
use tdd_engine::ledger::Ledger;
use tdd_engine::ledger::LedgerLocation;
use tdd_engine::plan::CycleKind;
use tdd_engine::plan::PlannedCycle;
use tdd_engine::run::Phase;
use tdd_leaves::Completion;
use tdd_leaves::Leaves;
use tdd_leaves::Provider;
use tdd_leaves::Request;
use tdd_leaves::Response;
use tdd_prompts::CommitSha;
use tdd_prompts::DeveloperInput;
use tdd_prompts::Issue;
use tdd_prompts::Prompt;
use tdd_prompts::RepoFacts;
use tdd_prompts::Step as PromptStep;
use tdd_prompts::TestId;
use tdd_prompts::VerifierInput;

use crate::model_api::Api;
use crate::model_api::FakeApi;
use crate::model_api::Step;
use crate::support::Env;

/// How long a test waits for a real agent CLI to start and to finish. A CLI starts an
/// interpreter and imports its whole stack (aider takes about 12 s to its first output
/// on a two-core machine running the rest of the suite, and five times that beside a
/// cargo build), so the common bound is too short for it; the time is reported, never
/// asserted.
const CLI_BOUND: Duration = Duration::from_secs(300);

mod codex_hooks;
mod conduct;
mod hooks;
mod mcp;

const TARGET: &str = "tests/test_duration.py::test_compound_duration";

/// The directory the real CLIs are installed in, or `None` (the test skips) when
/// `TDD_REAL_CLIS` is unset outside CI.
fn clis_dir(test: &str) -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("TDD_REAL_CLIS").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    if ci {
        return Some(default_dir());
    }
    eprintln!(
        "skipped {test}: TDD_REAL_CLIS is unset; `cargo xtask test` installs the agent CLIs and sets it"
    );
    None
}

/// Where `cargo xtask test` installs the CLIs: `$XDG_CACHE_HOME/tdd/real-clis`, else
/// `~/.cache/tdd/real-clis`.
fn default_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_default()
        .join("tdd/real-clis")
}

/// The directory holding `name`'s executable, which must exist.
fn bin_dir(clis: &Path, name: &str) -> PathBuf {
    let dir = clis.join("npm/node_modules/.bin");
    assert!(
        dir.join(name).exists(),
        "{name} is not installed in {}: run `cargo xtask test`, which installs it",
        dir.display()
    );
    dir
}

fn location(env: &Env) -> LedgerLocation {
    let home = env.ledger_home.path().as_os_str().to_owned();
    LedgerLocation::resolve_with(env.root(), &GitProbe, |key| {
        (key == "TDD_LEDGER_HOME").then(|| home.clone())
    })
    .expect("ledger location")
}

/// The conductor's environment, with the CLI first on `PATH` and `api` added.
fn caller_env(env: &Env, bin: &Path, api: &[(&str, String)]) -> Vec<(String, String)> {
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut caller: Vec<(String, String)> = [
        ("PATH", path),
        ("HOME", env.home.path().display().to_string()),
        ("LANG", "C.UTF-8".to_string()),
        (
            "TDD_LEDGER_HOME",
            env.ledger_home.path().display().to_string(),
        ),
    ]
    .map(|(k, v)| (k.to_string(), v))
    .into();
    caller.extend(api.iter().map(|(k, v)| (k.to_string(), v.clone())));
    caller
}

/// The conductor's side, with the CLI first on `PATH` and `api` as its environment.
fn leaves(env: &Env, bin: &Path, api: &[(&str, String)]) -> Leaves {
    Leaves::for_repository(&location(env), &assert_cmd::cargo::cargo_bin("tdd"))
        .caller_env(caller_env(env, bin, api))
}

fn cycle() -> PlannedCycle {
    PlannedCycle {
        n: 1,
        title: "Compound durations".into(),
        kind: CycleKind::Standard,
        projects: vec!["py".into()],
        tests: vec![TARGET.into()],
        files: vec!["duration.py".into()],
        stub_expected: vec![],
        modifies_tests: vec![],
        harness: vec![],
        changes_dependencies: false,
        commit_red: None,
        commit_green: None,
        commit_refactor: None,
        commit_pin: None,
        criterion: Some("1".into()),
        meta: Value::Null,
    }
}

fn issue() -> Issue {
    Issue::from_markdown(
        12,
        "Parse durations".into(),
        "- [ ] `parse_duration(\"1h30m\")` returns 5400\n".into(),
    )
}

fn developer_request(workdir: &Path) -> Request {
    let cycle = cycle();
    let input = DeveloperInput {
        issue: issue(),
        targets: TestId::planned(&cycle),
        step: PromptStep {
            criterion: None,
            cycle,
        },
        phase: Phase::AwaitingTest,
        repo: RepoFacts::default(),
        findings: vec![],
    };
    let mut request = Request::new(Prompt::developer(&input).expect("prompt"), 12, 1, workdir);
    request.wall_timeout = CLI_BOUND;
    request
}

fn verifier_request(env: &Env, workdir: &Path) -> Request {
    let cycle = cycle();
    let input = VerifierInput::new(
        TestId::planned(&cycle),
        issue().spec_for(&cycle).expect("spec"),
        CommitSha::resolve(&Git::new(env.root()), "HEAD").expect("sha"),
        None,
        Phase::AwaitingTest,
    );
    let mut request = Request::new(Prompt::verifier(&input).expect("prompt"), 12, 1, workdir);
    request.wall_timeout = CLI_BOUND;
    request
}

/// A pytest project whose target test exists, committed.
fn project() -> Env {
    let env = Env::new();
    env.write(
        "duration.py",
        "def parse_duration(text):\n    return 5400\n",
    );
    env.write(
        "tests/test_duration.py",
        "from duration import parse_duration\n\ndef test_compound_duration():\n    assert parse_duration('1h30m') == 5400\n",
    );
    env.write("pytest.ini", "[pytest]\npythonpath = .\n");
    env.write(".gitignore", "__pycache__/\n.pytest_cache/\n");
    env.write(
        "tdd.toml",
        "[project.py]\nadapter = \"pytest\"\ntest_paths = [\"tests/\"]\n\n[locks]\nimpl = [\"duration.py\"]\ntest = [\"tests/**\"]\n",
    );
    env.commit_all("a duration parser");
    env
}

/// A scratch worktree of HEAD, as the conductor gives a verifier.
fn scratch(env: &Env) -> PathBuf {
    let dir = env.home.path().join("scratch");
    env.git(&[
        "worktree",
        "add",
        "-q",
        "--detach",
        &dir.display().to_string(),
    ]);
    dir.canonicalize().expect("scratch")
}

/// Runs one leaf; returns its response and the time from launch to its first output.
/// With `TDD_CAPTURE_FIXTURES` set (`cargo xtask capture`), a completed developer
/// leaf's stream is written there as the provider's recorded `ok` (and `crash`: its
/// first lines) stream, with this machine's paths rewritten.
fn run(
    env: &Env,
    leaves: &Leaves,
    provider: &dyn Provider,
    request: Request,
) -> (Response, Duration) {
    let role = request.role();
    let began = Instant::now();
    let mut run = provider.run(leaves, request).expect("launch");
    let stdout = run.handle().expect("started").stdout_path().to_path_buf();
    // The first output, or the end of a leaf that printed nothing.
    tdd_testutil::wait_within("the leaf's first stream event", CLI_BOUND, || {
        std::fs::metadata(&stdout).is_ok_and(|m| m.len() > 0)
            || run
                .wait(Some(Duration::ZERO))
                .is_ok_and(|exit| exit.is_some())
    });
    let first = began.elapsed();
    let response = provider
        .response(leaves, &mut run, Some(CLI_BOUND))
        .expect("response")
        .expect("the leaf ended");
    if let Some(dir) = std::env::var_os("TDD_CAPTURE_FIXTURES")
        && role == tdd_prompts::Role::Developer
        && response.completion == Completion::Completed
    {
        let stream = std::fs::read_to_string(&stdout).expect("stdout");
        capture(
            env,
            &PathBuf::from(dir),
            provider.name(),
            &stream,
            &response,
        );
    }
    (response, first)
}

/// Writes `stream` as `name`'s recorded streams under `dir`.
fn capture(env: &Env, dir: &Path, name: &str, stream: &str, response: &Response) {
    let mut text = stream.to_string();
    let real = env.root().canonicalize().expect("root");
    for (from, to) in [
        (real.display().to_string(), "/home/dev/project".to_string()),
        (
            env.root().display().to_string(),
            "/home/dev/project".to_string(),
        ),
        (
            env.ledger_home.path().display().to_string(),
            "/home/dev/.local/share/tdd".to_string(),
        ),
        (
            env.home.path().display().to_string(),
            "/home/dev".to_string(),
        ),
    ] {
        text = text.replace(&from, &to);
    }
    if let Some(session) = &response.session_id
        && name == "claude"
    {
        text = text.replace(session.as_str(), "{{session_id}}");
    }
    let crash: String = text.lines().take(3).map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.join(name).join("ok.jsonl"), &text).expect("write ok.jsonl");
    std::fs::write(dir.join(name).join("crash.jsonl"), crash).expect("write crash.jsonl");
}

fn verdicts(env: &Env, leaf: &str) -> Vec<Value> {
    let ledger = Ledger::open(&location(env).database).expect("ledger");
    ledger
        .events_of_kind(None, "verdict_recorded")
        .expect("events")
        .into_iter()
        .map(|e| e.payload)
        .filter(|p| p["leaf_id"] == leaf)
        .collect()
}

/// The tool outputs the CLI sent back to the fake in its last request, joined.
fn tool_outputs(api: &FakeApi) -> String {
    let served = api.served();
    let Some((_, _, body)) = served.requests.last() else {
        return String::new();
    };
    let empty = Vec::new();
    let anthropic = body["messages"]
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .flat_map(|m| m["content"].as_array().unwrap_or(&empty))
        .filter(|c| c["type"] == "tool_result")
        .map(|c| c["content"].to_string());
    let responses = body["input"]
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| i["output"].to_string());
    anthropic.chain(responses).collect::<Vec<_>>().join("\n")
}

fn assert_tokens(response: &Response, api: &FakeApi, what: &str) {
    let served = api.served();
    let usage = response.usage.expect("usage");
    assert_eq!(
        [
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
            usage.reasoning_tokens
        ],
        served.tokens,
        "{what}: tokens read by tdd against tokens served"
    );
    let scripted = u32::try_from(served.scripted).expect("small");
    let turns = response.turns.expect("turns");
    if response.meta.get("provider").and_then(|p| p.as_str()) == Some("codex") {
        // codex's stream names tool calls and answers, not model requests, so the count
        // read from it can fall one short of the requests served (seen on a loaded
        // machine); it is never above them.
        assert!(
            (1..=scripted).contains(&turns) && turns + 1 >= scripted,
            "{what}: {turns} round trips counted, {scripted} served"
        );
    } else {
        assert_eq!(turns, scripted, "{what}: round trips");
    }
}

fn report(provider: &str, role: &str, first: Duration, response: &Response, api: &FakeApi) {
    eprintln!(
        "real-cli {provider} {role}: first event after {} ms, {} requests, {:?}",
        first.as_millis(),
        api.served().requests.len(),
        response.completion
    );
}

/// The codex provider on a model it has no metadata for (so it gets the plain
/// `exec_command` tool), and its `CODEX_HOME`.
fn codex(env: &Env) -> (tdd_leaves::providers::codex::Codex, PathBuf) {
    let config = ProviderConfig {
        model: Some("gpt-5-codex".into()),
        ..ProviderConfig::default()
    };
    let codex_home = env.home.path().join("codex-home");
    std::fs::create_dir_all(&codex_home).expect("codex home");
    (
        tdd_leaves::providers::codex::Codex::new(Some(&config)),
        codex_home,
    )
}

/// codex's environment for the fake Responses API `api`.
fn codex_env(api: &FakeApi, codex_home: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("OPENAI_BASE_URL", format!("{}/v1", api.url)),
        ("OPENAI_API_KEY", "sk-fake".to_string()),
        ("CODEX_HOME", codex_home.display().to_string()),
    ]
}

/// Claude Code's environment for the fake Messages API `api`: no telemetry, updates
/// or other traffic.
fn claude_env(api: &FakeApi) -> Vec<(&'static str, String)> {
    vec![
        ("ANTHROPIC_BASE_URL", api.url.clone()),
        ("ANTHROPIC_API_KEY", "sk-ant-fake".to_string()),
        ("DISABLE_TELEMETRY", "1".to_string()),
        ("DISABLE_AUTOUPDATER", "1".to_string()),
        ("DISABLE_ERROR_REPORTING", "1".to_string()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_string()),
    ]
}

/// A Claude Code turn that runs `command` with its Bash tool.
fn bash(command: &str, description: &str) -> Step {
    Step::Tool(
        "Bash",
        json!({"command": command, "description": description}),
    )
}

/// A Claude Code turn that writes `content` to `path` with its Write tool.
fn write(path: &Path, content: &str) -> Step {
    Step::Tool(
        "Write",
        json!({"file_path": path.display().to_string(), "content": content}),
    )
}

/// A Claude Code verifier's last turns: it runs the target through `tdd test`, then
/// gives its verdict with `tdd verdict`.
fn claude_verdict_steps() -> Vec<Step> {
    vec![
        bash(&format!("tdd test {TARGET}"), "run"),
        bash(
            "tdd verdict accept --reason 'the test pins the behaviour'",
            "verdict",
        ),
        Step::text("Accepted."),
    ]
}

#[test]
fn claude_code_develops_and_verifies_against_a_fake_api() {
    let Some(clis) = clis_dir("claude_code_develops_and_verifies_against_a_fake_api") else {
        return;
    };
    let bin = bin_dir(&clis, "claude");
    let env = project();
    let provider = tdd_leaves::providers::claude::Claude::new(None);
    let api_env = claude_env;

    let made = env.root().join("notes.txt");
    let api = FakeApi::start(
        Api::Anthropic,
        vec![
            bash("tdd status --json", "assignment"),
            write(&made, "written by the developer\n"),
            Step::text("Wrote notes.txt."),
        ],
    );
    let leaves = leaves(&env, &bin, &api_env(&api));
    let (response, first) = run(&env, &leaves, &provider, developer_request(env.root()));
    report("claude", "developer", first, &response, &api);
    assert_eq!(response.completion, Completion::Completed, "{response:?}");
    assert!(
        tool_outputs(&api).contains("leaf_id"),
        "tdd status did not run"
    );
    assert_eq!(
        std::fs::read_to_string(&made).expect("the developer wrote"),
        "written by the developer\n"
    );
    assert_tokens(&response, &api, "developer");
    assert!(response.cost_usd.is_some());
    std::fs::remove_file(&made).expect("clean");

    let scratch = scratch(&env);
    let cheat = env.root().join("cheat.txt");
    let api = FakeApi::start(
        Api::Anthropic,
        vec![
            bash("tdd status --json", "assignment"),
            write(&cheat, "x"),
            bash(&format!("echo cheat > {}", cheat.display()), "cheat"),
        ]
        .into_iter()
        .chain(claude_verdict_steps())
        .collect(),
    );
    let leaves = self::leaves(&env, &bin, &api_env(&api));
    let (response, first) = run(&env, &leaves, &provider, verifier_request(&env, &scratch));
    report("claude", "verifier", first, &response, &api);
    assert_eq!(response.completion, Completion::Completed, "{response:?}");
    assert!(!cheat.exists(), "the verifier wrote the real tree");
    assert!(!scratch.join("cheat.txt").exists());
    let given = verdicts(&env, &response.leaf_id);
    assert_eq!(given.len(), 1, "{}", tool_outputs(&api));
    assert_eq!(given[0]["decision"], "accept");
    assert_tokens(&response, &api, "verifier");
}

#[test]
fn codex_develops_and_verifies_against_a_fake_api() {
    let Some(clis) = clis_dir("codex_develops_and_verifies_against_a_fake_api") else {
        return;
    };
    let bin = bin_dir(&clis, "codex");
    let env = project();
    let (provider, codex_home) = codex(&env);
    let api_env = |api: &FakeApi| codex_env(api, &codex_home);
    let exec = |cmd: String| Step::Tool("exec_command", json!({ "cmd": cmd }));

    let api = FakeApi::start(
        Api::Responses,
        vec![
            exec("tdd status --json".into()),
            exec("printf 'written by the developer\\n' > notes.txt".into()),
            Step::text("Wrote notes.txt."),
        ],
    );
    let leaves = leaves(&env, &bin, &api_env(&api));
    let (response, first) = run(&env, &leaves, &provider, developer_request(env.root()));
    report("codex", "developer", first, &response, &api);
    assert_eq!(response.completion, Completion::Completed, "{response:?}");
    assert!(
        tool_outputs(&api).contains("leaf_id"),
        "tdd status did not run: {}",
        tool_outputs(&api)
    );
    assert_eq!(
        std::fs::read_to_string(env.root().join("notes.txt")).expect("the developer wrote"),
        "written by the developer\n"
    );
    assert_tokens(&response, &api, "developer");
    std::fs::remove_file(env.root().join("notes.txt")).expect("clean");

    let scratch = scratch(&env);
    let cheat = env.root().join("cheat.txt");
    let api = FakeApi::start(
        Api::Responses,
        vec![
            exec("tdd status --json".into()),
            exec(format!("echo cheat > {}", cheat.display())),
            exec(format!("tdd test {TARGET}")),
            exec("tdd verdict accept --reason 'the test pins the behaviour'".into()),
            Step::text("Accepted."),
        ],
    );
    let leaves = self::leaves(&env, &bin, &api_env(&api));
    let (response, first) = run(&env, &leaves, &provider, verifier_request(&env, &scratch));
    report("codex", "verifier", first, &response, &api);
    assert_eq!(response.completion, Completion::Completed, "{response:?}");
    assert!(!cheat.exists(), "the verifier wrote the real tree");
    let given = verdicts(&env, &response.leaf_id);
    assert_eq!(given.len(), 1, "{}", tool_outputs(&api));
    assert_eq!(given[0]["decision"], "accept");
    assert_tokens(&response, &api, "verifier");
}

#[test]
fn claude_code_with_a_refused_key_is_unavailable_within_seconds() {
    let Some(clis) = clis_dir("claude_code_with_a_refused_key_is_unavailable_within_seconds")
    else {
        return;
    };
    let bin = bin_dir(&clis, "claude");
    let env = project();
    let api = FakeApi::refusing(Api::Anthropic);
    let leaves = leaves(
        &env,
        &bin,
        &[
            ("ANTHROPIC_BASE_URL", api.url.clone()),
            ("ANTHROPIC_API_KEY", "sk-ant-wrong".to_string()),
            ("DISABLE_TELEMETRY", "1".to_string()),
            ("DISABLE_AUTOUPDATER", "1".to_string()),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_string()),
        ],
    );
    let began = Instant::now();
    let provider = tdd_leaves::providers::claude::Claude::new(None);
    let (response, _) = run(&env, &leaves, &provider, developer_request(env.root()));
    let took = began.elapsed();
    eprintln!(
        "real-cli claude refused key: unavailable after {} ms",
        took.as_millis()
    );
    assert!(
        matches!(response.completion, Completion::ProviderUnavailable { .. }),
        "{response:?}"
    );
    // Without the retry cap Claude Code retries for about three minutes; with it, it
    // gives up in seconds (the bound leaves room for a loaded machine).
    assert!(took < Duration::from_secs(120), "{took:?}");
}

/// Runs one leaf confined as the conductor would confine it, its `tdd` commands going
/// through a relay; returns its response.
fn run_confined(
    env: &Env,
    leaves: &Leaves,
    provider: &dyn Provider,
    mut request: Request,
    write: &[&Path],
) -> Response {
    let config = tdd_engine::config::SandboxConfig {
        enabled: true,
        write: write.iter().map(|p| p.display().to_string()).collect(),
        ..Default::default()
    };
    let ledger_dir = location(env).dir;
    request.sandbox = tdd_conductor::sandbox::for_leaf(
        &config,
        &tdd_conductor::sandbox::Place {
            role: request.role(),
            workdir: &request.workdir,
            plan: Path::new(".tdd/issue-12.md"),
            ledger_dir: &ledger_dir,
            home: Some(env.home.path()),
            own_worktree: request.workdir != env.root(),
            work_tree: env.root(),
        },
    );
    let relay = tdd_conductor::relay::Relay::start(
        assert_cmd::cargo::cargo_bin("tdd"),
        location(env).database,
        caller_env(env, Path::new("/nonexistent"), &[])
            .into_iter()
            .collect(),
        |_| Ok(()),
    )
    .expect("relay");
    request.set_env.push((
        tdd_conductor::relay::RELAY_VAR.to_string(),
        relay.socket().display().to_string(),
    ));
    let workdir = request.workdir.clone();
    let mut run = leaves.prepare(provider, request).expect("prepare");
    let policy = run.policy().expect("a confined leaf").clone();
    let admission = relay.admit(run.id(), &workdir, &policy, &run.files().dir.join("tmp"));
    leaves.start(&mut run).expect("launch");
    admission.launched(run.supervisor_process().expect("the supervisor"));
    provider
        .response(leaves, &mut run, Some(CLI_BOUND))
        .expect("response")
        .expect("the leaf ended")
}

/// `clis_dir`, and `None` (the test skips) on a kernel that cannot confine.
fn confining_clis_dir(test: &str) -> Option<PathBuf> {
    let clis = clis_dir(test)?;
    if !tdd_sandbox::probe().confines() {
        eprintln!("skipped {test}: this kernel cannot confine (tdd doctor says why)");
        return None;
    }
    Some(clis)
}

#[test]
fn claude_code_runs_confined_and_reaches_the_engine_through_the_relay() {
    let Some(clis) =
        confining_clis_dir("claude_code_runs_confined_and_reaches_the_engine_through_the_relay")
    else {
        return;
    };
    let bin = bin_dir(&clis, "claude");
    let env = project();
    std::fs::write(
        env.home.path().join(".git-credentials"),
        "s3cret-credential",
    )
    .expect("plant");
    let provider = tdd_leaves::providers::claude::Claude::new(None);
    let api_env = claude_env;
    // In place: `.git` is read-only, the rest of the work tree writable, so Claude
    // Code's editor (a temporary file, then a rename) works at the top level.
    let tree = env.root().to_path_buf();
    let made = tree.join("notes.txt");
    let hooks = env.root().join(".git/hooks/pre-commit");
    let user = env.home.path().display().to_string();
    // What a developer plants in Claude Code's state, for the verifier to load: an
    // instruction file and a SessionStart hook, in its own state and the user's.
    let plant = format!(
        "for d in \"$CLAUDE_CONFIG_DIR\" ~/.claude {user}/.claude; do mkdir -p \"$d\"; \
         echo {PLANTED} > \"$d/CLAUDE.md\"; \
         echo '{{\"hooks\":{{\"SessionStart\":[{{\"hooks\":[{{\"type\":\"command\",\"command\":\"echo {PLANTED}\"}}]}}]}}}}' > \"$d/settings.json\"; done"
    );
    let api = FakeApi::start(
        Api::Anthropic,
        vec![
            bash("tdd status --json", "assignment"),
            bash(&format!("cat {user}/.git-credentials"), "escape"),
            bash(&format!("echo x > {}", hooks.display()), "escape"),
            bash(&plant, "plant"),
            write(&made, "written confined\n"),
            Step::text("Wrote notes.txt."),
        ],
    );
    let leaves = leaves(&env, &bin, &api_env(&api));
    let response = run_confined(&env, &leaves, &provider, developer_request(&tree), &[]);
    assert_eq!(response.completion, Completion::Completed, "{response:?}");
    let outputs = tool_outputs(&api);
    assert!(
        outputs.contains("leaf_id"),
        "tdd status did not run: {outputs}"
    );
    assert!(!outputs.contains("s3cret-credential"), "{outputs}");
    assert!(!hooks.exists());
    assert_eq!(
        std::fs::read_to_string(&made).expect("the developer wrote"),
        "written confined\n"
    );
    std::fs::remove_file(&made).expect("clean");
    // As an agent run by hand could have left them in the user's own state: the
    // verifier's CLI must load neither.
    let by_hand = BY_HAND;
    let state = env.home.path().join(".claude");
    std::fs::create_dir_all(&state).expect("state");
    std::fs::write(state.join("CLAUDE.md"), by_hand).expect("instructions");
    std::fs::write(
        state.join("settings.json"),
        json!({"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": format!("echo {by_hand}")}]}]}})
            .to_string(),
    )
    .expect("hook");

    let scratch = scratch(&env);
    let api = FakeApi::start(Api::Anthropic, claude_verdict_steps());
    let leaves = self::leaves(&env, &bin, &api_env(&api));
    let response = run_confined(
        &env,
        &leaves,
        &provider,
        verifier_request(&env, &scratch),
        &[],
    );
    assert_eq!(response.completion, Completion::Completed, "{response:?}");
    let given = verdicts(&env, &response.leaf_id);
    assert_eq!(given.len(), 1, "{}", tool_outputs(&api));
    assert_eq!(given[0]["decision"], "accept");
    assert_nothing_planted(&api, env.home.path(), ".claude");
}

/// What a developer leaf plants in its CLI's state, which no later leaf may hear.
const PLANTED: &str = "PLANTED-BY-THE-DEVELOPER";

/// What an agent run by hand left in the user's own CLI state, which no leaf may load.
const BY_HAND: &str = "PLANTED-BY-HAND";

/// No request the verifier's CLI made carries what the developer planted or what was
/// left by hand in the user's state, and the user's own CLI state (`state` in `home`)
/// holds nothing the developer planted.
fn assert_nothing_planted(api: &FakeApi, home: &Path, state: &str) {
    for (_, path, body) in api.served().requests {
        let body = body.to_string();
        assert!(
            !body.contains(PLANTED) && !body.contains(BY_HAND),
            "the verifier's request to {path} carries what was planted"
        );
    }
    for file in ["CLAUDE.md", "AGENTS.md", "settings.json", "config.toml"] {
        let path = home.join(state).join(file);
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(!text.contains(PLANTED), "{} was written", path.display());
    }
}

#[test]
fn codex_runs_confined_and_reaches_the_engine_through_the_relay() {
    let Some(clis) =
        confining_clis_dir("codex_runs_confined_and_reaches_the_engine_through_the_relay")
    else {
        return;
    };
    let bin = bin_dir(&clis, "codex");
    let env = project();
    let (provider, codex_home) = codex(&env);
    let api_env = |api: &FakeApi| codex_env(api, &codex_home);
    let exec = |cmd: String| Step::Tool("exec_command", json!({ "cmd": cmd }));
    let tree = env.home.path().join("worktree");
    env.git(&[
        "worktree",
        "add",
        "-q",
        "--detach",
        &tree.display().to_string(),
    ]);
    let tree = tree.canonicalize().expect("worktree");
    std::fs::write(
        env.home.path().join(".git-credentials"),
        "s3cret-credential",
    )
    .expect("plant");
    let hooks = env.root().join(".git/hooks/pre-commit");
    let api = FakeApi::start(
        Api::Responses,
        vec![
            exec("tdd status --json".into()),
            // codex runs its commands without its own sandbox here: Landlock is it.
            exec(format!(
                "cat {}/.git-credentials",
                env.home.path().display()
            )),
            exec(format!("echo x > {}", hooks.display())),
            exec(format!(
                "for d in \"$CODEX_HOME\" ~/.codex {user}/.codex {real}; do mkdir -p \"$d\"; \
                 echo {PLANTED} > \"$d/AGENTS.md\"; \
                 printf 'notify = [\"echo\", \"{PLANTED}\"]\\ndeveloper_instructions = \"{PLANTED}\"\\n' >> \"$d/config.toml\"; done",
                user = env.home.path().display(),
                real = codex_home.display(),
            )),
            exec("printf 'written confined\\n' > notes.txt".into()),
            Step::text("Wrote notes.txt."),
        ],
    );
    let leaves = leaves(&env, &bin, &api_env(&api));
    let response = run_confined(&env, &leaves, &provider, developer_request(&tree), &[]);
    assert_eq!(response.completion, Completion::Completed, "{response:?}");
    let outputs = tool_outputs(&api);
    assert!(
        outputs.contains("leaf_id"),
        "tdd status did not run: {outputs}"
    );
    assert!(outputs.contains("Permission denied"), "{outputs}");
    assert!(!outputs.contains("s3cret-credential"), "{outputs}");
    assert!(!hooks.exists());
    assert_eq!(
        std::fs::read_to_string(tree.join("notes.txt")).expect("the developer wrote"),
        "written confined\n"
    );

    // As an agent run by hand could have left them in the user's codex home.
    let by_hand = BY_HAND;
    std::fs::write(codex_home.join("AGENTS.md"), by_hand).expect("instructions");
    std::fs::write(
        codex_home.join("config.toml"),
        format!("developer_instructions = \"{by_hand}\"\n"),
    )
    .expect("config");

    let scratch = scratch(&env);
    let api = FakeApi::start(
        Api::Responses,
        vec![
            exec(format!("tdd test {TARGET}")),
            exec("tdd verdict accept --reason 'the test pins the behaviour'".into()),
            Step::text("Accepted."),
        ],
    );
    let leaves = self::leaves(&env, &bin, &api_env(&api));
    let response = run_confined(
        &env,
        &leaves,
        &provider,
        verifier_request(&env, &scratch),
        &[],
    );
    assert_eq!(response.completion, Completion::Completed, "{response:?}");
    let given = verdicts(&env, &response.leaf_id);
    assert_eq!(given.len(), 1, "{}", tool_outputs(&api));
    assert_eq!(given[0]["decision"], "accept");
    assert_nothing_planted(&api, env.home.path(), ".codex");
    assert_nothing_planted(&api, env.home.path(), "codex-home");
}

/// What the fake Chat Completions API answers aider: one SEARCH/REPLACE block that
/// creates `notes.txt`, in aider's `diff` edit format.
const AIDER_REPLY: &str = "I add the notes.\n\nnotes.txt\n```\n<<<<<<< SEARCH\n=======\nwritten by aider\n>>>>>>> REPLACE\n```\n";

#[test]
fn aider_develops_against_a_fake_api_and_leaves_nothing_of_its_own() {
    let Some(clis) = clis_dir("aider_develops_against_a_fake_api_and_leaves_nothing_of_its_own")
    else {
        return;
    };
    let bin = clis.join("aider-venv/bin");
    assert!(
        bin.join("aider").exists(),
        "aider is not installed in {}: run `cargo xtask test`, which installs it",
        bin.display()
    );
    let env = project();
    let gitignore = std::fs::read_to_string(env.root().join(".gitignore")).expect(".gitignore");
    let config = ProviderConfig {
        model: Some("openai/gpt-4o".into()),
        ..ProviderConfig::default()
    };
    let provider = tdd_leaves::providers::aider::Aider::new(Some(&config));
    let api = FakeApi::start(Api::ChatCompletions, vec![Step::text(AIDER_REPLY)]);
    let api_env = [
        ("OPENAI_API_BASE", format!("{}/v1", api.url)),
        ("OPENAI_API_KEY", "sk-fake".to_string()),
    ];
    let leaves = leaves(&env, &bin, &api_env);
    let (response, first) = run(&env, &leaves, &provider, developer_request(env.root()));
    report("aider", "developer", first, &response, &api);
    assert_eq!(response.completion, Completion::Completed, "{response:?}");
    assert_eq!(api.served().scripted, 1, "one request, one answer");
    assert_eq!(
        std::fs::read_to_string(env.root().join("notes.txt")).expect("aider wrote"),
        "written by aider\n"
    );
    // Its edit is all that changed, and nothing is staged: no history, tags cache or
    // .gitignore line of aider's own would enter a phase commit.
    assert_eq!(
        env.git(&["status", "--porcelain", "--untracked-files=all"]),
        "?? notes.txt\n"
    );
    assert_eq!(
        std::fs::read_to_string(env.root().join(".gitignore")).expect(".gitignore"),
        gitignore
    );
    // aider prints `Tokens: 1.2k sent, 80 received.`: the fake's figures.
    let usage = response.usage.expect("usage");
    let (prompt, completion) = crate::model_api::CHAT_USAGE;
    assert_eq!(
        (usage.input_tokens, usage.output_tokens),
        (prompt, completion)
    );
    assert!(response.cost_usd.is_some(), "{response:?}");
}
