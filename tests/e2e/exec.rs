//! `tdd exec`: exit codes per class, output, environment, detaching, Ctrl-C.

use nix::sys::signal::Signal;
use serde_json::Value;

use crate::leafsupport::detach;
use crate::leafsupport::finish;
use crate::leafsupport::json;
use crate::leafsupport::leaves_dir;
use crate::leafsupport::signal;
use crate::leafsupport::spawn_tdd;
use crate::leafsupport::wait_until;
use crate::support::Env;

fn class(value: &Value) -> &Value {
    &value["data"]["class"]
}

#[test]
fn exec_passes_the_exit_code_on_and_reports_the_class() {
    let env = Env::new();
    let (exit, value) = json(
        &env,
        &["exec", "--", "sh", "-c", "echo out; echo err >&2; exit 3"],
    );
    assert_eq!(exit, 3, "{value}");
    assert_eq!(value["ok"], true);
    assert_eq!(
        *class(&value),
        serde_json::json!({"class": "exited", "code": 3})
    );
    assert_eq!(value["data"]["stdout_tail"], "out\n");
    assert_eq!(value["data"]["stderr_tail"], "err\n");
}

#[test]
fn exec_exits_124_when_the_timeout_kills_the_command() {
    let env = Env::new();
    let (exit, value) = json(&env, &["exec", "--timeout", "0.3", "--", "sleep", "100"]);
    assert_eq!(exit, 124, "{value}");
    assert_eq!(class(&value)["class"], "kill_stuck");
    assert_eq!(class(&value)["reason"], "wall_timeout");
}

#[test]
fn exec_exits_124_when_the_output_cap_is_reached_and_marks_the_log() {
    let env = Env::new();
    let (exit, value) = json(&env, &["exec", "--max-output", "1000", "--", "yes"]);
    assert_eq!(exit, 124, "{value}");
    assert_eq!(class(&value)["reason"], "output_limit");
    let log =
        std::fs::read_to_string(value["data"]["stdout"].as_str().expect("path")).expect("log");
    assert!(log.ends_with("output cut at 1000 bytes; the leaf was killed (output_limit)\n"));
    assert!(log.len() < 1000 + 100);
}

#[test]
fn exec_exits_137_when_the_command_is_killed_by_someone_else() {
    let env = Env::new();
    let (exit, value) = json(&env, &["exec", "--", "sh", "-c", "kill -9 $$"]);
    assert_eq!(exit, 137, "{value}");
    assert_eq!(
        *class(&value),
        serde_json::json!({"class": "killed_external", "signal": "SIGKILL"})
    );
}

#[test]
fn exec_exits_127_when_the_program_does_not_exist() {
    let env = Env::new();
    let (exit, value) = json(&env, &["exec", "--", "/nonexistent/program"]);
    assert_eq!(exit, 127, "{value}");
    assert_eq!(class(&value)["class"], "spawn_failed");
}

#[test]
fn exec_gives_the_command_only_allow_listed_variables() {
    let env = Env::new()
        .with_env("GITHUB_TOKEN", "secret-token-value")
        .with_env("TDD_TEST_EXTRA", "named");
    let (exit, value) = json(&env, &["exec", "--env", "TDD_TEST_EXTRA", "--", "env"]);
    assert_eq!(exit, 0, "{value}");
    let out = value["data"]["stdout_tail"].as_str().expect("output");
    assert!(out.contains("TDD_TEST_EXTRA=named"), "{out}");
    assert!(out.contains("HOME="), "{out}");
    assert!(!out.contains("secret-token-value"), "{out}");
    assert!(!out.contains("TDD_LEDGER_HOME"), "{out}");
}

#[test]
fn exec_streams_the_output_and_reports_the_class_on_a_terminal() {
    let env = Env::new();
    let (exit, text) = env.on_terminal(&["exec", "--", "sh", "-c", "echo streamed; exit 4"]);
    assert_eq!(exit, 4, "{text}");
    assert!(text.contains("streamed\n"), "{text}");
    assert!(text.contains("tdd exec: exited with code 4"), "{text}");
}

#[test]
fn exec_detach_returns_an_id_that_wait_and_logs_understand() {
    let env = Env::new();
    let id = detach(&env, &["--name", "greeter", "--", "sh", "-c", "echo hello"]);
    assert!(id.ends_with("-greeter"), "{id}");
    let (exit, value) = json(&env, &["wait", &id, "--max", "60"]);
    assert_eq!(exit, 0, "{value}");
    let (exit, value) = json(&env, &["logs", &id]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["stdout"], "hello\n");
    assert_eq!(value["data"]["finished"], true);
}

/// The running leaf of a `tdd exec` started in the background.
fn running_leaf(env: &Env) -> std::path::PathBuf {
    let dir = leaves_dir(env);
    let mut found = None;
    wait_until("the leaf to launch", || {
        found = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| entry.path())
            .find(|path| path.join("launch.json").exists());
        found.is_some()
    });
    found.expect("a launched leaf")
}

#[test]
fn ctrl_c_once_stops_the_command_gracefully() {
    let env = Env::new();
    let child = spawn_tdd(&env, &["exec", "--json", "--", "sleep", "100"]);
    running_leaf(&env);
    signal(child.id(), Signal::SIGINT);
    let (exit, stdout) = finish(child);
    assert_eq!(exit, 130, "{stdout}");
    let value: Value = serde_json::from_str(stdout.trim()).expect("envelope");
    assert_eq!(value["data"]["class"]["class"], "stopped");
    assert!(
        value["data"]["exit"]["sigkill_after_ms"].is_null(),
        "SIGTERM was enough"
    );
}

#[test]
fn ctrl_c_twice_kills_the_command_without_waiting_for_the_grace_period() {
    let env = Env::new();
    // The command ignores SIGTERM and the grace period is far longer than the bound
    // `finish` allows, so only the second interrupt can end it in time.
    let script = "trap '' TERM; sleep 100 & sleep 100";
    let child = spawn_tdd(
        &env,
        &["exec", "--json", "--grace", "600", "--", "sh", "-c", script],
    );
    let leaf = running_leaf(&env);
    signal(child.id(), Signal::SIGINT);
    wait_until("the graceful kill request", || {
        leaf.join("kill.json").exists()
    });
    signal(child.id(), Signal::SIGINT);
    let (exit, stdout) = finish(child);
    assert_eq!(exit, 130, "{stdout}");
    let value: Value = serde_json::from_str(stdout.trim()).expect("envelope");
    assert_eq!(value["data"]["class"]["class"], "stopped");
    assert!(
        value["data"]["exit"]["sigkill_after_ms"].is_u64(),
        "{value}"
    );
}

#[test]
fn exec_tells_the_command_its_leaf_id() {
    let env = Env::new();
    let (exit, value) = json(&env, &["exec", "--", "sh", "-c", "echo $TDD_LEAF_ID"]);
    assert_eq!(exit, 0, "{value}");
    let id = value["data"]["id"].as_str().expect("id");
    assert_eq!(value["data"]["stdout_tail"], format!("{id}\n"));
}
