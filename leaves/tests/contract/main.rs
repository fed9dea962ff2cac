//! The provider contract suite: every check runs against every registered provider.
//!
//! Adding a provider adds one line to [`PROVIDERS`] and no test edits. Real-CLI
//! providers run against fake executables put first on `PATH` that replay the
//! recorded streams under `tests/fixtures/` (the manifest names the CLI version each
//! imitates).
//!
//! This binary has its own `main` so that it can also be the processes the tests
//! need: `__supervise <dir>` (the supervisor, as `tdd __supervise`),
//! `__scripted-leaf ...` (a scripted leaf, as `tdd __scripted-leaf`) and
//! `__fake-cli ...` (a fake agent CLI). Tests wait for events, never for time.

mod fake;
mod support;

use std::time::Duration;

use libtest_mimic::Trial;
use tdd_engine::config::ProviderConfig;
use tdd_engine::ledger::Ledger;
use tdd_leaves::AbortOutcome;
use tdd_leaves::Completion;
use tdd_leaves::LeafError;
use tdd_leaves::Provider;
use tdd_leaves::Scripted;
use tdd_leaves::providers::aider::Aider;
use tdd_leaves::providers::claude::Claude;
use tdd_leaves::providers::codex::Codex;
use tdd_leaves::providers::command::CommandProvider;
use tdd_supervisor::ExitClass;

use crate::support::Sandbox;
use crate::support::Scenario;
use crate::support::fail;

/// A registered provider: its name and how to build it in a sandbox, with its fake
/// CLI (or fixture) set up for a scenario.
struct Case {
    name: &'static str,
    make: Make,
}

/// Builds a provider in a sandbox for a scenario.
type Make = fn(&Sandbox, Scenario) -> Result<Box<dyn Provider>, String>;

/// Every provider the suite checks. One line per provider.
const PROVIDERS: &[Case] = &[
    Case {
        name: "scripted",
        make: scripted,
    },
    Case {
        name: "claude",
        make: claude,
    },
    Case {
        name: "codex",
        make: codex,
    },
    Case {
        name: "aider",
        make: aider,
    },
    Case {
        name: "command",
        make: command,
    },
];

fn scripted(sandbox: &Sandbox, scenario: Scenario) -> Result<Box<dyn Provider>, String> {
    let env_file = sandbox.dir.join("env.txt");
    let actions = match scenario {
        Scenario::Ok => format!(
            "[[leaf.do]]\naction = \"run\"\nargv = [\"sh\", \"-c\", \"env > '{}'\"]\n\
             [[leaf.do]]\naction = \"print\"\ntext = \"Wrote the failing test.\\n\"\n\
             [[leaf.do]]\naction = \"usage\"\ninput_tokens = 1200\noutput_tokens = 300\ncost_usd = 0.0\n",
            env_file.display()
        ),
        Scenario::Crash => {
            "[[leaf.do]]\naction = \"print\"\ntext = \"starting\\n\"\n[[leaf.do]]\naction = \"exit\"\ncode = 3\n".into()
        }
        Scenario::Hang => "[[leaf.do]]\naction = \"hang\"\n".into(),
    };
    let fixture = sandbox.dir.join("fixture.toml");
    let text = format!("version = 1\n\n[[leaf]]\nrole = \"developer\"\n{actions}");
    std::fs::write(&fixture, text).map_err(|e| e.to_string())?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    Ok(Box::new(Scripted::new(fixture, exe, ["__scripted-leaf"])))
}

fn claude(sandbox: &Sandbox, scenario: Scenario) -> Result<Box<dyn Provider>, String> {
    sandbox.fake("claude", scenario)?;
    Ok(Box::new(Claude::new(None)))
}

fn codex(sandbox: &Sandbox, scenario: Scenario) -> Result<Box<dyn Provider>, String> {
    sandbox.fake("codex", scenario)?;
    Ok(Box::new(Codex::new(None)))
}

fn aider(sandbox: &Sandbox, scenario: Scenario) -> Result<Box<dyn Provider>, String> {
    sandbox.fake("aider", scenario)?;
    Ok(Box::new(Aider::new(None)))
}

fn command(sandbox: &Sandbox, scenario: Scenario) -> Result<Box<dyn Provider>, String> {
    sandbox.fake("my-agent", scenario)?;
    let config = ProviderConfig {
        command: Some("my-agent".into()),
        args: vec![
            "--prompt-file".into(),
            "{prompt_file}".into(),
            "--role={role}".into(),
            "--phase={phase}".into(),
            "--step={step}".into(),
            "--in={workdir}".into(),
        ],
        env: vec!["MY_AGENT_API_KEY".into()],
        model: None,
    };
    Ok(Box::new(CommandProvider::new("my-agent", config)))
}

type Check = fn(&Case) -> Result<(), String>;

const CHECKS: &[(&str, Check)] = &[
    ("capabilities_have_the_contract_shape", capabilities_shape),
    ("a_run_completes_with_text", runs_to_completion),
    ("usage_is_reported_as_capabilities_say", usage_reported),
    ("the_environment_is_allow_listed", environment_allow_listed),
    ("abort_of_a_running_leaf_kills_it_once", abort_running),
    (
        "abort_of_a_not_started_leaf_prevents_its_start",
        abort_not_started,
    ),
    ("abort_of_a_finished_leaf_does_nothing", abort_finished),
    ("a_crash_is_classified_as_crashed", crash_classified),
    ("abort_by_id_works_from_another_runtime", abort_by_id),
];

fn capabilities_shape(case: &Case) -> Result<(), String> {
    let sandbox = Sandbox::new()?;
    let provider = (case.make)(&sandbox, Scenario::Ok)?;
    let value = serde_json::to_value(provider.capabilities()).map_err(|e| e.to_string())?;
    let keys: Vec<&String> = value
        .as_object()
        .map(|o| o.keys().collect())
        .unwrap_or_default();
    let expected = [
        "cost_reporting",
        "read_only_mode",
        "session_resume",
        "streaming",
        "tool_restriction",
        "usage_reporting",
    ];
    if keys != expected
        || !value
            .as_object()
            .is_some_and(|o| o.values().all(|v| v.is_boolean()))
    {
        return fail("capabilities", value);
    }
    if provider.name().is_empty() {
        return fail("name", provider.name());
    }
    Ok(())
}

/// Runs a developer request to its end.
fn run_once(
    sandbox: &Sandbox,
    provider: &dyn Provider,
) -> Result<(tdd_leaves::LeafRun, tdd_leaves::Response), String> {
    let leaves = sandbox.leaves()?;
    let request = sandbox.developer_request()?;
    let mut run = provider
        .run(&leaves, request)
        .map_err(|e| format!("run: {e}"))?;
    let response = provider
        .response(&leaves, &mut run, Some(Duration::from_secs(120)))
        .map_err(|e| format!("response: {e}"))?
        .ok_or("the leaf did not end within 120 s")?;
    Ok((run, response))
}

fn runs_to_completion(case: &Case) -> Result<(), String> {
    let sandbox = Sandbox::new()?;
    let provider = (case.make)(&sandbox, Scenario::Ok)?;
    let (run, response) = run_once(&sandbox, provider.as_ref())?;
    if response.completion != Completion::Completed
        || response.exit != (ExitClass::Exited { code: 0 })
    {
        return fail("completion", &response);
    }
    if response.text.trim().is_empty() || response.leaf_id != run.id() {
        return fail("text and id", &response);
    }
    if response.meta.get("provider").and_then(|p| p.as_str()) != Some(provider.name()) {
        return fail("meta.provider", &response.meta);
    }
    if provider.capabilities().session_resume && response.session_id.is_none() {
        return fail("session id", &response);
    }
    let ledger = Ledger::open(&sandbox.state.join("ledger.sqlite3")).map_err(|e| e.to_string())?;
    let kinds: Vec<String> = ledger
        .events(None)
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|e| e.payload["leaf_id"] == run.id())
        .map(|e| e.kind)
        .collect();
    if kinds != ["leaf_prepared", "leaf_started", "leaf_finished"] {
        return fail("ledger events", kinds);
    }
    Ok(())
}

fn usage_reported(case: &Case) -> Result<(), String> {
    let sandbox = Sandbox::new()?;
    let provider = (case.make)(&sandbox, Scenario::Ok)?;
    let capabilities = provider.capabilities();
    let (_, response) = run_once(&sandbox, provider.as_ref())?;
    if response.usage.is_some() != capabilities.usage_reporting
        || response.cost_usd.is_some() != capabilities.cost_reporting
    {
        return fail(
            "usage and cost against capabilities",
            (&response, capabilities),
        );
    }
    if let Some(usage) = response.usage
        && usage.input_tokens + usage.output_tokens == 0
    {
        return fail("usage is empty", usage);
    }
    Ok(())
}

fn environment_allow_listed(case: &Case) -> Result<(), String> {
    let sandbox = Sandbox::new()?;
    let provider = (case.make)(&sandbox, Scenario::Ok)?;
    let (run, _) = run_once(&sandbox, provider.as_ref())?;
    let env = sandbox.leaf_env()?;
    let get = |key: &str| env.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
    for forbidden in ["GITHUB_TOKEN", "GH_TOKEN", "UNLISTED_SECRET"] {
        if get(forbidden).is_some() {
            return fail("leaked into the leaf", forbidden);
        }
    }
    let token = get("TDD_LEAF_TOKEN").unwrap_or_default();
    if get("TDD_LEAF_ID") != Some(run.id())
        || get("TDD_ROLE") != Some("developer")
        || get("TDD_ISSUE") != Some("12")
        || get("TDD_STEP") != Some("2")
        || get("TDD_PHASE") != Some("red")
        || token.len() != 64
    {
        return fail("identity variables", env);
    }
    let ledger = Ledger::open(&sandbox.state.join("ledger.sqlite3")).map_err(|e| e.to_string())?;
    let text = serde_json::to_string(&ledger.events(None).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    if text.contains(token) {
        return fail("the ledger holds the token itself", ());
    }
    Ok(())
}

fn abort_running(case: &Case) -> Result<(), String> {
    let sandbox = Sandbox::new()?;
    let provider = (case.make)(&sandbox, Scenario::Hang)?;
    let leaves = sandbox.leaves()?;
    let mut run = provider
        .run(&leaves, sandbox.developer_request()?)
        .map_err(|e| format!("run: {e}"))?;
    let first = provider
        .abort(&leaves, &mut run)
        .map_err(|e| e.to_string())?;
    let second = provider
        .abort(&leaves, &mut run)
        .map_err(|e| e.to_string())?;
    if first != AbortOutcome::Killed || second != AbortOutcome::AlreadyOver {
        return fail("abort outcomes", (first, second));
    }
    let response = provider
        .response(&leaves, &mut run, Some(Duration::from_secs(120)))
        .map_err(|e| e.to_string())?
        .ok_or("the aborted leaf did not end")?;
    if response.completion != Completion::Aborted {
        return fail("completion", response);
    }
    let third = provider
        .abort(&leaves, &mut run)
        .map_err(|e| e.to_string())?;
    if third != AbortOutcome::AlreadyOver {
        return fail("abort after the end", third);
    }
    Ok(())
}

fn abort_not_started(case: &Case) -> Result<(), String> {
    let sandbox = Sandbox::new()?;
    let provider = (case.make)(&sandbox, Scenario::Ok)?;
    let leaves = sandbox.leaves()?;
    let mut run = leaves
        .prepare(provider.as_ref(), sandbox.developer_request()?)
        .map_err(|e| e.to_string())?;
    let first = provider
        .abort(&leaves, &mut run)
        .map_err(|e| e.to_string())?;
    let second = provider
        .abort(&leaves, &mut run)
        .map_err(|e| e.to_string())?;
    if first != AbortOutcome::NotStarted || second != AbortOutcome::AlreadyOver {
        return fail("abort outcomes", (first, second));
    }
    match leaves.start(&mut run) {
        Err(LeafError::Aborted { .. }) => {}
        other => return fail("start after abort", other.map(|()| "started")),
    }
    if sandbox.dir.join("env.txt").exists() || run.handle().is_some() {
        return fail("the aborted leaf ran", ());
    }
    Ok(())
}

fn abort_finished(case: &Case) -> Result<(), String> {
    let sandbox = Sandbox::new()?;
    let provider = (case.make)(&sandbox, Scenario::Ok)?;
    let leaves = sandbox.leaves()?;
    let mut run = provider
        .run(&leaves, sandbox.developer_request()?)
        .map_err(|e| e.to_string())?;
    run.wait(Some(Duration::from_secs(120)))
        .map_err(|e| e.to_string())?
        .ok_or("the leaf did not end")?;
    for _ in 0..2 {
        let outcome = provider
            .abort(&leaves, &mut run)
            .map_err(|e| e.to_string())?;
        if outcome != AbortOutcome::AlreadyOver {
            return fail("abort of a finished leaf", outcome);
        }
    }
    let response = provider
        .response(&leaves, &mut run, Some(Duration::ZERO))
        .map_err(|e| e.to_string())?
        .ok_or("no response")?;
    if response.completion != Completion::Completed {
        return fail("completion", response);
    }
    Ok(())
}

/// A conductor that crashed aborts its leaves by id through a fresh runtime.
fn abort_by_id(case: &Case) -> Result<(), String> {
    let sandbox = Sandbox::new()?;
    let provider = (case.make)(&sandbox, Scenario::Hang)?;
    let leaves = sandbox.leaves()?;
    let mut running = provider
        .run(&leaves, sandbox.developer_request()?)
        .map_err(|e| e.to_string())?;
    let mut pending = leaves
        .prepare(provider.as_ref(), sandbox.developer_request()?)
        .map_err(|e| e.to_string())?;
    let resumed = sandbox.leaves()?;
    let outcomes = [
        resumed.abort_recorded(running.id()),
        resumed.abort_recorded(running.id()),
        resumed.abort_recorded(pending.id()),
    ]
    .map(|o| o.map_err(|e| e.to_string()));
    let expected = [
        AbortOutcome::Killed,
        AbortOutcome::AlreadyOver,
        AbortOutcome::NotStarted,
    ];
    if outcomes
        .iter()
        .zip(expected)
        .any(|(got, want)| got.as_ref() != Ok(&want))
    {
        return fail("abort outcomes", outcomes);
    }
    match leaves.start(&mut pending) {
        Err(LeafError::Aborted { .. }) => {}
        other => return fail("start after abort by id", other.map(|()| "started")),
    }
    let exit = running
        .wait(Some(Duration::from_secs(120)))
        .map_err(|e| e.to_string())?
        .ok_or("the killed leaf did not end")?;
    if exit.class != ExitClass::Stopped {
        return fail("exit class", exit);
    }
    Ok(())
}

fn crash_classified(case: &Case) -> Result<(), String> {
    let sandbox = Sandbox::new()?;
    let provider = (case.make)(&sandbox, Scenario::Crash)?;
    let (_, response) = run_once(&sandbox, provider.as_ref())?;
    if !matches!(response.completion, Completion::Crashed { .. }) {
        return fail("completion", response);
    }
    Ok(())
}

/// Provider-specific promises about how a CLI is started.
fn argv_of(provider: &dyn Provider, request: &tdd_leaves::Request) -> Result<Vec<String>, String> {
    let files = tdd_leaves::LeafFiles {
        dir: "/leaf".into(),
        prompt: "/leaf/prompt.md".into(),
        result: "/leaf/result.json".into(),
        ledger_dir: "/ledger".into(),
    };
    Ok(provider
        .invocation(request, &files)
        .map_err(|e| e.to_string())?
        .argv)
}

fn claude_verifier_cannot_write() -> Result<(), String> {
    let sandbox = Sandbox::new()?;
    let argv = argv_of(&Claude::new(None), &sandbox.verifier_request()?)?;
    let after = |argv: &[String], flag: &str| {
        argv.iter()
            .position(|a| a == flag)
            .and_then(|i| argv.get(i + 1))
            .cloned()
            .unwrap_or_default()
    };
    // The session has no tool that writes but Bash, and Bash only for tdd and git reads.
    if after(&argv, "--tools") != "Read,Glob,Grep,Bash"
        || after(&argv, "--permission-mode") != "dontAsk"
        || !argv.iter().any(|a| a == "--strict-mcp-config")
    {
        return fail("verifier tools", &argv);
    }
    // No settings from the checkout it judges (hooks, permission rules the developer
    // may have committed): the user's own only.
    if after(&argv, "--setting-sources") != "user" {
        return fail("verifier settings", &argv);
    }
    let rules_at = argv
        .iter()
        .position(|a| a == "--allowedTools")
        .ok_or("no allow list")?;
    let broad = argv[rules_at + 1..].iter().find(|rule| {
        !(["Read", "Glob", "Grep"].contains(&rule.as_str())
            || rule.starts_with("Bash(tdd:")
            || rule.starts_with("Bash(git diff:")
            || rule.starts_with("Bash(git show:")
            || rule.starts_with("Bash(git log:"))
    });
    if let Some(rule) = broad {
        return fail("a verifier rule allows more than reading", rule);
    }
    let developer = argv_of(&Claude::new(None), &sandbox.developer_request()?)?;
    for flag in [
        "-p",
        "--verbose",
        "--session-id",
        "--permission-mode",
        "--append-system-prompt",
    ] {
        if !developer.iter().any(|a| a == flag) {
            return fail("missing flag", flag);
        }
    }
    // Tools Claude Code 2.1 no longer has are never named (each would be warned about).
    for argv in [&argv, &developer] {
        if let Some(gone) = argv
            .iter()
            .find(|a| ["LS", "MultiEdit", "WebFetch", "WebSearch"].contains(&a.as_str()))
        {
            return fail("names a tool claude 2.1 lacks", gone);
        }
    }
    Ok(())
}

/// The retry cap Claude Code gets unless the caller set one.
fn claude_retries_are_capped() -> Result<(), String> {
    let provider = Claude::new(None);
    let mut invocation = tdd_leaves::Invocation::default();
    provider.adapt(&mut invocation, &Default::default());
    if invocation.set_env
        != [(
            "CLAUDE_CODE_MAX_RETRIES".to_string(),
            tdd_leaves::providers::claude::MAX_RETRIES.to_string(),
        )]
    {
        return fail("set_env", invocation.set_env);
    }
    let mut invocation = tdd_leaves::Invocation::default();
    let caller = [("CLAUDE_CODE_MAX_RETRIES".to_string(), "9".to_string())].into();
    provider.adapt(&mut invocation, &caller);
    if !invocation.set_env.is_empty() {
        return fail("the caller's cap was overridden", invocation.set_env);
    }
    Ok(())
}

fn codex_sandbox_lets_tdd_write_its_ledger() -> Result<(), String> {
    let sandbox = Sandbox::new()?;
    for request in [sandbox.verifier_request()?, sandbox.developer_request()?] {
        let argv = argv_of(&Codex::new(None), &request)?.join(" ");
        for part in [
            "--sandbox workspace-write",
            "-c allow_login_shell=false",
            "-c sandbox_workspace_write.writable_roots=[\"/ledger\"]",
            "-c sandbox_workspace_write.exclude_slash_tmp=true",
            "-c sandbox_workspace_write.exclude_tmpdir_env_var=true",
        ] {
            if !argv.contains(part) {
                return fail("codex argv", (part, argv));
            }
        }
    }
    Ok(())
}

fn codex_takes_the_endpoint_and_key_from_the_environment() -> Result<(), String> {
    let sandbox = Sandbox::new()?;
    let provider = Codex::new(None);
    let mut invocation = tdd_leaves::Invocation {
        argv: argv_of(&provider, &sandbox.developer_request()?)?,
        ..Default::default()
    };
    let caller = [
        ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"),
        ("OPENAI_API_KEY", "sk-test"),
    ]
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .into();
    provider.adapt(&mut invocation, &caller);
    let argv = invocation.argv.join(" ");
    for part in [
        "-c model_provider=\"tdd_openai\"",
        "-c model_providers.tdd_openai.base_url=\"http://127.0.0.1:9/v1\"",
        "-c model_providers.tdd_openai.env_key=\"CODEX_API_KEY\"",
        "-c model_providers.tdd_openai.supports_websockets=false",
    ] {
        if !argv.contains(part) {
            return fail("codex argv", (part, argv));
        }
    }
    if invocation.argv.last().map(String::as_str) != Some("-") {
        return fail("the prompt must stay last", argv);
    }
    if invocation.set_env != [("CODEX_API_KEY".to_string(), "sk-test".to_string())] {
        return fail("CODEX_API_KEY", invocation.set_env);
    }
    Ok(())
}

fn aider_leaves_nothing_in_the_work_tree() -> Result<(), String> {
    let sandbox = Sandbox::new()?;
    let argv = argv_of(&Aider::new(None), &sandbox.developer_request()?)?.join(" ");
    for part in [
        "--message-file /leaf/prompt.md",
        "--yes-always",
        "--no-auto-commits",
        "--no-stream",
        "--no-pretty",
        "--read app/duration.py",
        "--no-analytics",
        "--no-gitignore",
        "--map-tokens 0",
        "--chat-history-file /leaf/",
        "--input-history-file /leaf/",
    ] {
        if !argv.contains(part) {
            return fail("aider argv", (part, argv));
        }
    }
    if argv.contains("--analytics-disable") {
        return fail(
            "--analytics-disable edits the user's settings for good",
            argv,
        );
    }
    match argv_of(&Aider::new(None), &sandbox.verifier_request()?) {
        Err(error) if error.contains("cannot be a verifier") => Ok(()),
        other => fail("aider as a verifier", other),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("__supervise") => {
            let dir = std::path::PathBuf::from(args.get(2).cloned().unwrap_or_default());
            std::process::exit(tdd_supervisor::run_supervisor(
                &dir,
                &tdd_supervisor::NoopReporter,
            ));
        }
        Some("__scripted-leaf") => {
            std::process::exit(tdd_leaves::providers::scripted::run_leaf(&args[2..]))
        }
        Some("__fake-cli") => std::process::exit(fake::run(&args[2..])),
        _ => {}
    }
    let arguments = libtest_mimic::Arguments::from_args();
    let mut trials = Vec::new();
    for case in PROVIDERS {
        for (check_name, check) in CHECKS {
            let check = *check;
            trials.push(Trial::test(
                format!("{}::{check_name}", case.name),
                move || check(case).map_err(Into::into),
            ));
        }
    }
    trials.push(Trial::test("claude::a_verifier_cannot_write", || {
        claude_verifier_cannot_write().map_err(Into::into)
    }));
    trials.push(Trial::test("claude::retries_are_capped", || {
        claude_retries_are_capped().map_err(Into::into)
    }));
    trials.push(Trial::test(
        "codex::the_sandbox_lets_tdd_write_its_ledger",
        || codex_sandbox_lets_tdd_write_its_ledger().map_err(Into::into),
    ));
    trials.push(Trial::test(
        "codex::the_endpoint_and_key_come_from_the_environment",
        || codex_takes_the_endpoint_and_key_from_the_environment().map_err(Into::into),
    ));
    trials.push(Trial::test(
        "aider::nothing_is_left_in_the_work_tree",
        || aider_leaves_nothing_in_the_work_tree().map_err(Into::into),
    ));
    libtest_mimic::run(&arguments, trials).exit();
}
