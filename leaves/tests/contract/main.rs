//! The provider contract suite: every check runs against every registered provider.
//!
//! Adding a provider adds one line to [`PROVIDERS`] and no test edits. Real-CLI
//! providers run against fake executables put first on `PATH` that replay the
//! recorded streams under `tests/fixtures/` (the manifest names the CLI version each
//! imitates). What each CLI must be started with is the table in `launch.rs`.
//!
//! This binary has its own `main` so that it can also be the processes the tests
//! need: `__supervise <dir>` (the supervisor, as `tdd __supervise`),
//! `__scripted-leaf ...` (a scripted leaf, as `tdd __scripted-leaf`) and
//! `__fake-cli ...` (a fake agent CLI). Tests wait for events, never for time.

mod fake;
mod launch;
mod support;

use std::time::Duration;

use libtest_mimic::Trial;
use tdd_engine::config::ProviderConfig;
use tdd_engine::ledger::Ledger;
use tdd_leaves::AbortOutcome;
use tdd_leaves::Completion;
use tdd_leaves::LeafError;
use tdd_leaves::LeafRun;
use tdd_leaves::Leaves;
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

/// Aborts `run` through its provider once per expected outcome, and checks each
/// outcome in turn.
fn aborts_give(
    provider: &dyn Provider,
    leaves: &Leaves,
    run: &mut LeafRun,
    expected: &[AbortOutcome],
) -> Result<(), String> {
    for (n, want) in expected.iter().enumerate() {
        let got = provider.abort(leaves, run).map_err(|e| e.to_string())?;
        if got != *want {
            return fail(&format!("abort {}", n + 1), (got, want));
        }
    }
    Ok(())
}

/// A leaf that was aborted before it started can never start.
fn start_is_refused(leaves: &Leaves, run: &mut LeafRun) -> Result<(), String> {
    match leaves.start(run) {
        Err(LeafError::Aborted { .. }) => Ok(()),
        other => fail("start after abort", other.map(|()| "started")),
    }
}

fn abort_running(case: &Case) -> Result<(), String> {
    let sandbox = Sandbox::new()?;
    let provider = (case.make)(&sandbox, Scenario::Hang)?;
    let leaves = sandbox.leaves()?;
    let mut run = provider
        .run(&leaves, sandbox.developer_request()?)
        .map_err(|e| format!("run: {e}"))?;
    let expected = [AbortOutcome::Killed, AbortOutcome::AlreadyOver];
    aborts_give(provider.as_ref(), &leaves, &mut run, &expected)?;
    let response = provider
        .response(&leaves, &mut run, Some(Duration::from_secs(120)))
        .map_err(|e| e.to_string())?
        .ok_or("the aborted leaf did not end")?;
    if response.completion != Completion::Aborted {
        return fail("completion", response);
    }
    aborts_give(
        provider.as_ref(),
        &leaves,
        &mut run,
        &[AbortOutcome::AlreadyOver],
    )
}

fn abort_not_started(case: &Case) -> Result<(), String> {
    let sandbox = Sandbox::new()?;
    let provider = (case.make)(&sandbox, Scenario::Ok)?;
    let leaves = sandbox.leaves()?;
    let mut run = leaves
        .prepare(provider.as_ref(), sandbox.developer_request()?)
        .map_err(|e| e.to_string())?;
    let expected = [AbortOutcome::NotStarted, AbortOutcome::AlreadyOver];
    aborts_give(provider.as_ref(), &leaves, &mut run, &expected)?;
    start_is_refused(&leaves, &mut run)?;
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
    let expected = [AbortOutcome::AlreadyOver, AbortOutcome::AlreadyOver];
    aborts_give(provider.as_ref(), &leaves, &mut run, &expected)?;
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
    start_is_refused(&leaves, &mut pending)?;
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
    for launch in launch::LAUNCHES {
        let provider = (launch.provider)().name().to_string();
        trials.push(Trial::test(
            format!("{provider}::{}", launch.name),
            move || launch::check(launch).map_err(Into::into),
        ));
    }
    libtest_mimic::run(&arguments, trials).exit();
}
