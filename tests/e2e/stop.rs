//! `tdd stop`: refusing launches, killing running leaves, and the ledger record.

use std::path::PathBuf;

use tdd_engine::ledger::Ledger;

use crate::leafsupport::detach;
use crate::leafsupport::json;
use crate::support::Env;

fn ledger_kinds(env: &Env) -> Vec<String> {
    let (_, value) = json(env, &["ledger", "path"]);
    let database = PathBuf::from(value["data"]["database"].as_str().expect("database"));
    let ledger = Ledger::open_read_only(&database)
        .expect("opens")
        .expect("exists");
    ledger
        .events(None)
        .expect("events")
        .into_iter()
        .map(|event| event.kind)
        .collect()
}

#[test]
fn stop_at_leaf_refuses_exec_until_cleared() {
    let env = Env::new();
    let (exit, value) = json(&env, &["stop"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["mode"], "at_leaf");
    let (exit, value) = json(&env, &["exec", "--", "true"]);
    assert_eq!(exit, 1, "{value}");
    assert_eq!(value["error"]["reason"], "stop_pending");
    let (exit, value) = json(&env, &["stop", "--clear"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["cleared"], true);
    let (exit, value) = json(&env, &["exec", "--", "true"]);
    assert_eq!(exit, 0, "{value}");
    let kinds = ledger_kinds(&env);
    assert!(kinds.contains(&"stop_requested".to_string()), "{kinds:?}");
    assert!(kinds.contains(&"stop_cleared".to_string()), "{kinds:?}");
}

#[test]
fn stop_at_ledger_does_not_refuse_exec() {
    let env = Env::new();
    json(&env, &["stop", "--mode", "at-ledger"]);
    let (exit, value) = json(&env, &["exec", "--", "true"]);
    assert_eq!(exit, 0, "{value}");
}

#[test]
fn stop_now_kills_running_leaves_as_stopped() {
    let env = Env::new();
    let id = detach(&env, &["--", "sleep", "100"]);
    let (exit, value) = json(&env, &["stop", "--mode", "now"]);
    assert_eq!(exit, 0, "{value}");
    let (exit, value) = json(&env, &["wait", &id]);
    assert_eq!(exit, 2, "{value}");
    assert_eq!(value["data"]["class"]["class"], "stopped");
}

#[test]
fn leaf_launch_signals_and_exit_are_recorded_in_the_ledger() {
    let env = Env::new();
    let (exit, _) = json(&env, &["exec", "--timeout", "0.2", "--", "sleep", "100"]);
    assert_eq!(exit, 124);
    let kinds = ledger_kinds(&env);
    let leaf_kinds: Vec<&str> = kinds
        .iter()
        .map(String::as_str)
        .filter(|kind| kind.starts_with("leaf_"))
        .collect();
    assert_eq!(
        leaf_kinds,
        ["leaf_launched", "leaf_signalled", "leaf_exited"]
    );
}

#[test]
fn a_bad_stop_mode_is_a_usage_error() {
    let env = Env::new();
    let (exit, value) = json(&env, &["stop", "--mode", "later"]);
    assert_eq!(exit, 2, "{value}");
    assert_eq!(value["error"]["reason"], "usage");
}
