//! A whole `tdd conduct` with each real agent CLI: planner, RED, GREEN and REFACTOR
//! developers and a blind verifier after each phase, every leaf a real CLI process
//! talking to one loopback fake of its model API that picks each leaf's script by its
//! prompt's heading. Leaves are confined (the default), so the verifiers reach the
//! engine through the relay.

use std::path::Path;
use std::time::Instant;

use serde_json::Value;
use serde_json::json;

use super::bash;
use super::bin_dir;
use super::claude_env;
use super::clis_dir;
use super::codex_env;
use super::location;
use super::write;
use crate::calc::IMPL;
use crate::calc::ISSUE_ONE;
use crate::calc::LIB;
use crate::calc::PLAN_ONE;
use crate::calc::STUB;
use crate::calc::TEST;
use crate::model_api::Api;
use crate::model_api::FakeApi;
use crate::model_api::Step;
use crate::support::Env;

const TARGET: &str = "app::calc::sub subtracts";

/// The prompts' headings, one per leaf kind: the fake's routes.
const PLANNER: &str = "# Planner assignment";
const RED: &str = "# Developer assignment: RED";
const GREEN: &str = "# Developer assignment: GREEN";
const REFACTOR: &str = "# Developer assignment: REFACTOR";
const VERIFIER: &str = "# Verifier assignment";

/// The demo's calc crate, its configuration with `developer` and `verifier` as the
/// providers, and the issue file; returns the issue's path.
fn calc_project(env: &Env, developer: &str, verifier: &str, extra: &str) -> String {
    crate::calc::write_crate(env);
    env.write(
        "tdd.toml",
        &format!(
            "[project.app]\nadapter = \"cargo\"\n\n[locks]\nimpl = [\"src/**\"]\ntest = [\"tests/**\"]\n\n\
             [conductor]\nprovider = \"{developer}\"\nverifier_provider = \"{verifier}\"\n\
             leaf_timeout_s = 600\nidle_timeout_s = 300\nrevise_budget = 0\n{extra}"
        ),
    );
    env.commit_all("calc");
    let issue = env.home.path().join("issue-1.md");
    std::fs::write(&issue, ISSUE_ONE).expect("issue");
    issue.display().to_string()
}

/// Runs `tdd conduct` with the CLIs in `bin` first on `PATH` and `api` set; asserts it
/// completed the issue with the honest three commits and gives its envelope.
fn conduct(env: &Env, issue: &str, bin: &Path, api: &[(&str, String)], cli: &str) -> Value {
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let began = Instant::now();
    let mut command = env.tdd_std();
    command.env("PATH", path).args(["--json", "conduct", issue]);
    for (key, value) in api {
        command.env(key, value);
    }
    let out = command.output().expect("tdd conduct runs");
    let value: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    eprintln!(
        "real-cli {cli} conduct: {} ms for one step",
        began.elapsed().as_millis()
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{value}\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        leaf_logs(&value)
    );
    let log = env.git(&["log", "--format=%s", "--reverse"]);
    let subjects: Vec<&str> = log.lines().collect();
    assert_eq!(
        subjects[subjects.len() - 4..],
        [
            "plan: issue #1 Subtraction",
            "test: subtraction",
            "feat: subtraction",
            "refactor: subtraction"
        ],
        "{log}"
    );
    // The implementation replaced the stub (an agent may lay the lines out its way).
    let lib = std::fs::read_to_string(env.root().join("src/lib.rs")).expect("lib");
    assert!(lib.starts_with(LIB), "{lib}");
    assert!(
        lib.contains(IMPL.trim()) && !lib.contains(STUB.trim()),
        "{lib}"
    );
    let (code, verified) = env.json(&["ledger", "verify"]);
    assert_eq!(code, 0, "{verified}");
    // The draft PR a reviewer reads: the step ticked, each phase accepted.
    let pr = std::fs::read_to_string(value["data"]["pr"].as_str().expect("pr")).expect("pr");
    assert!(pr.contains("- [x] Step 1:"), "{pr}");
    for phase in ["RED", "GREEN", "REFACTOR"] {
        assert!(pr.contains(&format!("- {phase} ACCEPT")), "{pr}");
    }
    // No verifier wrote the real tree, whatever it tried.
    assert!(
        !env.root().join(CHEAT).exists(),
        "a verifier wrote the real tree"
    );
    value
}

/// What a verifier tries to write in the real tree.
const CHEAT: &str = "cheat.txt";

/// The test as a GREEN developer would loosen it.
const WEAK_TEST: &str = "#[test]\nfn subtracts() {}\n";

/// The GREEN developer's write to the locked test was denied by the hook its CLI ran
/// for this leaf's session (through the relay, from inside the confined leaf): the
/// model was told why in its next request, the draft PR says so (`tool`: the harness
/// and its tool), and the gate had nothing to revert.
fn assert_hook_denied(value: &Value, api: &FakeApi, tool: &str) {
    let told = api.served().requests.iter().any(|(_, _, body)| {
        body.to_string()
            .contains("the next `tdd advance` would revert it")
    });
    assert!(told, "no request carried the hook's reason");
    let pr = std::fs::read_to_string(value["data"]["pr"].as_str().expect("pr")).expect("pr");
    assert!(
        pr.contains(&format!(
            "- GREEN: the hook denied a write to tests/sub.rs before it happened ({tool})"
        )),
        "{pr}"
    );
    assert!(!pr.contains("the engine reverted"), "{pr}");
}

/// The tokens the run's leaves read from their CLIs, summed over the leaves whose id
/// starts with one of `roles`, against what `api` served them.
fn assert_tokens_add_up(env: &Env, api: &FakeApi, roles: &[&str]) {
    let ledger = tdd_engine::ledger::Ledger::open(&location(env).database).expect("ledger");
    let mut read = [0u64; 5];
    for event in ledger
        .events_of_kind(None, "leaf_finished")
        .expect("events")
    {
        let leaf = event.payload["leaf_id"].as_str().unwrap_or_default();
        if !roles.iter().any(|r| leaf.starts_with(r)) {
            continue;
        }
        let usage = &event.payload["usage"];
        for (slot, key) in [
            "input_tokens",
            "output_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "reasoning_tokens",
        ]
        .iter()
        .enumerate()
        {
            read[slot] += usage[key].as_u64().unwrap_or(0);
        }
    }
    assert_eq!(
        read,
        api.served().tokens,
        "tokens read against tokens served"
    );
}

/// The tail of every leaf's output, for a failure's message.
fn leaf_logs(value: &Value) -> String {
    let Some(dir) = value["data"]["run"]["dir"]
        .as_str()
        .or_else(|| value["data"]["dir"].as_str())
    else {
        return String::new();
    };
    let leaves = Path::new(dir).join("../../leaves");
    let mut text = String::new();
    for entry in std::fs::read_dir(&leaves).into_iter().flatten().flatten() {
        for log in ["stdout.log", "stderr.log"] {
            let body = std::fs::read_to_string(entry.path().join(log)).unwrap_or_default();
            let start = body.char_indices().rev().nth(1500).map_or(0, |(at, _)| at);
            let tail = &body[start..];
            text.push_str(&format!(
                "--- {} {log}\n{tail}\n",
                entry.file_name().to_string_lossy()
            ));
        }
    }
    text
}

/// Every leaf kind asked the fake: each leaf really ran its CLI.
fn assert_every_leaf_asked(api: &FakeApi, markers: &[&str]) {
    let served = api.served();
    for marker in markers {
        let asked = served
            .requests
            .iter()
            .filter(|(_, _, body)| body.to_string().contains(marker))
            .count();
        assert!(asked > 0, "no request of a `{marker}` leaf");
    }
}

/// Each leaf whose id starts with one of `roles` has a cost when its CLI reports one
/// (`reports`), and none when it does not: no figure is made up.
fn assert_costs(env: &Env, roles: &[&str], reports: bool) {
    let ledger = tdd_engine::ledger::Ledger::open(&location(env).database).expect("ledger");
    let costs: Vec<(String, Value)> = ledger
        .events_of_kind(None, "leaf_finished")
        .expect("events")
        .into_iter()
        .map(|e| {
            let leaf = e.payload["leaf_id"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            (leaf, e.payload["cost_usd"].clone())
        })
        .filter(|(leaf, _)| roles.iter().any(|r| leaf.starts_with(r)))
        .collect();
    assert!(!costs.is_empty());
    for (leaf, cost) in &costs {
        let given = cost.as_f64().is_some_and(|c| c > 0.0);
        assert_eq!(given, reports, "{leaf}: cost {cost}");
        assert_eq!(cost.is_null(), !reports, "{leaf}: cost {cost}");
    }
}

/// The run report's leaves name the CLI's version, as the CLI printed it, and the
/// files each developer changed: the test and the stub in RED, the implementation in
/// GREEN, nothing in a REFACTOR that had nothing to do.
fn assert_leaves_reported(env: &Env, cli: &str) {
    let out = env
        .tdd()
        .args(["report", "--json"])
        .output()
        .expect("report");
    let value = crate::support::envelope(&out);
    let leaves = value["data"]["report"]["leaves"]
        .as_array()
        .expect("leaves")
        .clone();
    assert!(!leaves.is_empty(), "{value}");
    for leaf in &leaves {
        assert_eq!(leaf["provider"], cli, "{leaf}");
        let version = leaf["cli_version"].as_str().unwrap_or_default();
        assert!(
            version.split('.').count() == 3 && version.split('.').all(|p| p.parse::<u32>().is_ok()),
            "{leaf}"
        );
    }
    let touched = |phase: &str| -> Vec<String> {
        let leaf = leaves
            .iter()
            .find(|l| l["role"] == "developer" && l["phase"] == phase)
            .unwrap_or_else(|| panic!("a {phase} developer: {leaves:?}"));
        leaf["touched"]
            .as_array()
            .unwrap_or_else(|| panic!("{leaf}"))
            .iter()
            .filter_map(|p| p.as_str().map(str::to_string))
            .collect()
    };
    assert_eq!(touched("red"), ["src/lib.rs", "tests/sub.rs"]);
    assert_eq!(touched("green"), ["src/lib.rs"]);
    assert_eq!(touched("refactor"), Vec::<String>::new());
}

/// Every verdict of the run was an ACCEPT, one per phase, each given by a verifier
/// that ran the target itself (the engine refuses an ACCEPT without that run).
fn assert_three_accepts(env: &Env) {
    let ledger = tdd_engine::ledger::Ledger::open(&location(env).database).expect("ledger");
    let decisions: Vec<String> = ledger
        .events_of_kind(None, "verdict_recorded")
        .expect("events")
        .into_iter()
        .map(|e| {
            e.payload["decision"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(decisions, ["accept", "accept", "accept"]);
}

#[test]
fn claude_code_conducts_a_whole_issue() {
    let Some(clis) = clis_dir("claude_code_conducts_a_whole_issue") else {
        return;
    };
    let bin = bin_dir(&clis, "claude");
    let env = Env::new();
    let issue = calc_project(&env, "claude", "claude", "");
    let root = env.root().canonicalize().expect("root");
    let lib = root.join("src/lib.rs");
    let test = root.join("tests/sub.rs");
    let read_lib = Step::Tool("Read", json!({ "file_path": lib.display().to_string() }));
    let api = FakeApi::routed(
        Api::Anthropic,
        vec![
            (
                PLANNER,
                vec![
                    bash("tdd status --json", "assignment"),
                    write(&root.join(".tdd/issue-1.md"), PLAN_ONE),
                    Step::text("Planned."),
                ],
            ),
            (
                RED,
                vec![
                    write(&root.join("tests/sub.rs"), TEST),
                    read_lib.clone(),
                    write(&lib, &format!("{LIB}{STUB}")),
                    Step::text("Wrote the failing test."),
                ],
            ),
            (
                GREEN,
                vec![
                    // First a try at loosening the locked test: the hook denies it.
                    Step::Tool("Read", json!({ "file_path": test.display().to_string() })),
                    write(&test, WEAK_TEST),
                    read_lib,
                    write(&lib, &format!("{LIB}{IMPL}")),
                    Step::text("Implemented."),
                ],
            ),
            (REFACTOR, vec![Step::text("Nothing to refactor.")]),
            (
                VERIFIER,
                vec![
                    write(&root.join(CHEAT), "x"),
                    bash(&format!("echo x > {}", root.join(CHEAT).display()), "cheat"),
                    bash(&format!("tdd test '{TARGET}'"), "run"),
                    bash(
                        "tdd verdict accept --reason 'the test pins the behaviour'",
                        "verdict",
                    ),
                    Step::text("Accepted."),
                ],
            ),
        ],
    );
    let value = conduct(&env, &issue, &bin, &claude_env(&api), "claude");
    assert_hook_denied(&value, &api, "claude Write");
    assert_every_leaf_asked(&api, &[PLANNER, RED, GREEN, REFACTOR, VERIFIER]);
    assert_tokens_add_up(&env, &api, &["planner", "developer", "verifier"]);
    assert_costs(&env, &["planner", "developer", "verifier"], true);
    assert_three_accepts(&env);
    assert_leaves_reported(&env, "claude");
}

/// A codex turn that runs `cmd` in its shell.
fn exec(cmd: &str) -> Step {
    Step::Tool("exec_command", json!({ "cmd": cmd }))
}

/// A shell command that writes `text` to `path`.
fn cat_into(path: &str, text: &str) -> String {
    format!("cat > {path} <<'TDD_EOF'\n{text}TDD_EOF")
}

#[test]
fn codex_conducts_a_whole_issue() {
    let Some(clis) = clis_dir("codex_conducts_a_whole_issue") else {
        return;
    };
    let bin = bin_dir(&clis, "codex");
    let env = Env::new();
    // A model codex has no metadata for, so it gets the plain `exec_command` tool.
    let issue = calc_project(
        &env,
        "codex",
        "codex",
        "\n[provider.codex]\nmodel = \"gpt-5-codex\"\n",
    );
    let codex_home = env.home.path().join("codex-home");
    std::fs::create_dir_all(&codex_home).expect("codex home");
    let cheat = env.root().canonicalize().expect("root").join(CHEAT);
    let verify = vec![
        exec(&format!("echo x > {}", cheat.display())),
        exec(&format!("tdd test '{TARGET}'")),
        exec("tdd verdict accept --reason 'the test pins the behaviour'"),
        Step::text("Accepted."),
    ];
    let api = FakeApi::routed(
        Api::Responses,
        vec![
            (
                PLANNER,
                vec![
                    exec(&cat_into(".tdd/issue-1.md", PLAN_ONE)),
                    Step::text("Planned."),
                ],
            ),
            (
                RED,
                vec![
                    exec(&cat_into("tests/sub.rs", TEST)),
                    exec(&cat_into("src/lib.rs", &format!("{LIB}{STUB}"))),
                    Step::text("Wrote the failing test."),
                ],
            ),
            (
                GREEN,
                vec![
                    // First a try at loosening the locked test: the hook denies it.
                    exec(&cat_into("tests/sub.rs", WEAK_TEST)),
                    exec(&cat_into("src/lib.rs", &format!("{LIB}{IMPL}"))),
                    Step::text("Implemented."),
                ],
            ),
            (REFACTOR, vec![Step::text("Nothing to refactor.")]),
            (VERIFIER, verify),
        ],
    );
    let value = conduct(&env, &issue, &bin, &codex_env(&api, &codex_home), "codex");
    assert_hook_denied(&value, &api, "codex Bash");
    assert_every_leaf_asked(&api, &[PLANNER, RED, GREEN, REFACTOR, VERIFIER]);
    assert_tokens_add_up(&env, &api, &["planner", "developer", "verifier"]);
    // codex's stream carries no cost.
    assert_costs(&env, &["planner", "developer", "verifier"], false);
    assert_three_accepts(&env);
    assert_leaves_reported(&env, "codex");
}

/// What aider is answered for `path`: one SEARCH/REPLACE block that makes the file
/// hold `text` (an empty SEARCH creates it; `old` replaces a file's whole text).
fn aider_edit(path: &str, old: &str, text: &str) -> String {
    format!("Done.\n\n{path}\n```\n<<<<<<< SEARCH\n{old}=======\n{text}>>>>>>> REPLACE\n```\n")
}

#[test]
fn aider_plans_and_develops_a_whole_issue_with_a_claude_verifier() {
    let Some(clis) = clis_dir("aider_plans_and_develops_a_whole_issue_with_a_claude_verifier")
    else {
        return;
    };
    let aider_bin = clis.join("aider-venv/bin");
    let claude_bin = bin_dir(&clis, "claude");
    let env = Env::new();
    // aider cannot be a verifier (it has no read-only mode): Claude Code judges.
    let issue = calc_project(
        &env,
        "aider",
        "claude",
        "\n[provider.aider]\nmodel = \"openai/gpt-4o\"\n",
    );
    // RED writes the test and the stub in one answer.
    let red = format!(
        "{}\nsrc/lib.rs\n```\n<<<<<<< SEARCH\n=======\n{}>>>>>>> REPLACE\n```\n",
        aider_edit("tests/sub.rs", "", TEST),
        STUB.trim_start()
    );
    let chat = FakeApi::routed(
        Api::ChatCompletions,
        vec![
            (
                PLANNER,
                vec![Step::text(aider_edit(".tdd/issue-1.md", "", PLAN_ONE))],
            ),
            (RED, vec![Step::text(red)]),
            (
                GREEN,
                vec![Step::text(aider_edit(
                    "src/lib.rs",
                    STUB.trim_start(),
                    IMPL.trim_start(),
                ))],
            ),
            (REFACTOR, vec![Step::text("Nothing to refactor.")]),
        ],
    );
    let cheat = env.root().canonicalize().expect("root").join(CHEAT);
    let messages = FakeApi::routed(
        Api::Anthropic,
        vec![(
            VERIFIER,
            vec![
                write(&cheat, "x"),
                super::bash(&format!("tdd test '{TARGET}'"), "run"),
                super::bash(
                    "tdd verdict accept --reason 'the test pins the behaviour'",
                    "verdict",
                ),
                Step::text("Accepted."),
            ],
        )],
    );
    let mut api = claude_env(&messages);
    api.extend([
        ("OPENAI_API_BASE", format!("{}/v1", chat.url)),
        ("OPENAI_API_KEY", "sk-fake".to_string()),
    ]);
    let both = std::env::join_paths([&aider_bin, &claude_bin]).expect("paths");
    conduct(&env, &issue, Path::new(&both), &api, "aider");
    assert_every_leaf_asked(&chat, &[PLANNER, RED, GREEN, REFACTOR]);
    assert_every_leaf_asked(&messages, &[VERIFIER]);
    assert_tokens_add_up(&env, &chat, &["planner", "developer"]);
    assert_tokens_add_up(&env, &messages, &["verifier"]);
    assert_costs(&env, &["planner", "developer", "verifier"], true);
    assert_three_accepts(&env);
}
