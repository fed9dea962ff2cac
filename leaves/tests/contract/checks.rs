//! The contract every provider keeps: one table of checks, each with the scenario its
//! provider is built for, run against every provider by one driver ([`run`]).

use std::time::Duration;

use tdd_engine::ledger::Ledger;
use tdd_leaves::AbortOutcome;
use tdd_leaves::Completion;
use tdd_leaves::LeafError;
use tdd_leaves::Provider;
use tdd_supervisor::ExitClass;

use crate::Case;
use crate::support::Sandbox;
use crate::support::Scenario;
use crate::support::fail;

/// One row of the contract: what the provider's fake CLI (or fixture) does, and what
/// must hold of the provider built for it.
pub struct Check {
    /// The trial's name after the provider's.
    pub name: &'static str,
    /// What the leaf does.
    pub scenario: Scenario,
    /// What must hold.
    pub check: fn(&Sandbox, &dyn Provider) -> Result<(), String>,
}

/// Every check of the contract, run against every provider.
pub const CHECKS: &[Check] = &[
    Check {
        name: "capabilities_have_the_contract_shape",
        scenario: Scenario::Ok,
        check: capabilities_shape,
    },
    Check {
        name: "a_run_completes_with_text",
        scenario: Scenario::Ok,
        check: runs_to_completion,
    },
    Check {
        name: "usage_is_reported_as_capabilities_say",
        scenario: Scenario::Ok,
        check: usage_reported,
    },
    Check {
        name: "the_environment_is_allow_listed",
        scenario: Scenario::Ok,
        check: environment_allow_listed,
    },
    Check {
        name: "abort_of_a_running_leaf_kills_it_once",
        scenario: Scenario::Hang,
        check: abort_running,
    },
    Check {
        name: "abort_of_a_not_started_leaf_prevents_its_start",
        scenario: Scenario::Ok,
        check: abort_not_started,
    },
    Check {
        name: "abort_of_a_finished_leaf_does_nothing",
        scenario: Scenario::Ok,
        check: abort_finished,
    },
    Check {
        name: "a_crash_is_classified_as_crashed",
        scenario: Scenario::Crash,
        check: crash_classified,
    },
    Check {
        name: "abort_by_id_works_from_another_runtime",
        scenario: Scenario::Hang,
        check: abort_by_id,
    },
];

/// The one driver: a fresh sandbox, the provider built in it for the check's scenario,
/// and the check.
pub fn run(case: &Case, check: &Check) -> Result<(), String> {
    let sandbox = Sandbox::new()?;
    let provider = (case.make)(&sandbox, check.scenario)?;
    (check.check)(&sandbox, provider.as_ref())
}

fn capabilities_shape(_: &Sandbox, provider: &dyn Provider) -> Result<(), String> {
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

fn runs_to_completion(sandbox: &Sandbox, provider: &dyn Provider) -> Result<(), String> {
    let (run, response) = run_once(sandbox, provider)?;
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

fn usage_reported(sandbox: &Sandbox, provider: &dyn Provider) -> Result<(), String> {
    let capabilities = provider.capabilities();
    let (_, response) = run_once(sandbox, provider)?;
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

fn environment_allow_listed(sandbox: &Sandbox, provider: &dyn Provider) -> Result<(), String> {
    let (run, _) = run_once(sandbox, provider)?;
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

fn abort_running(sandbox: &Sandbox, provider: &dyn Provider) -> Result<(), String> {
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

fn abort_not_started(sandbox: &Sandbox, provider: &dyn Provider) -> Result<(), String> {
    let leaves = sandbox.leaves()?;
    let mut run = leaves
        .prepare(provider, sandbox.developer_request()?)
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

fn abort_finished(sandbox: &Sandbox, provider: &dyn Provider) -> Result<(), String> {
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
fn abort_by_id(sandbox: &Sandbox, provider: &dyn Provider) -> Result<(), String> {
    let leaves = sandbox.leaves()?;
    let mut running = provider
        .run(&leaves, sandbox.developer_request()?)
        .map_err(|e| e.to_string())?;
    let mut pending = leaves
        .prepare(provider, sandbox.developer_request()?)
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

fn crash_classified(sandbox: &Sandbox, provider: &dyn Provider) -> Result<(), String> {
    let (_, response) = run_once(sandbox, provider)?;
    if !matches!(response.completion, Completion::Crashed { .. }) {
        return fail("completion", response);
    }
    Ok(())
}
