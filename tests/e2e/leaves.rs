//! `tdd wait`, `tdd leaves`, `tdd logs`, `tdd kill`, and a lost supervisor.

use nix::sys::signal::Signal;

use crate::leafsupport::alive;
use crate::leafsupport::detach;
use crate::leafsupport::json;
use crate::leafsupport::leaf_process;
use crate::leafsupport::record;
use crate::leafsupport::signal;
use crate::leafsupport::wait_until;
use crate::support::Env;

#[test]
fn wait_exits_3_while_running_and_2_once_killed() {
    let env = Env::new();
    let id = detach(&env, &["--", "sleep", "100"]);
    let (exit, value) = json(&env, &["wait", &id, "--max", "0.2"]);
    assert_eq!(exit, 3, "{value}");
    assert_eq!(value["data"]["finished"], false);
    let (exit, value) = json(&env, &["kill", &id]);
    assert_eq!(exit, 0, "{value}");
    let (exit, value) = json(&env, &["wait", &id]);
    assert_eq!(exit, 2, "{value}");
    assert_eq!(value["data"]["class"]["class"], "stopped");
}

#[test]
fn wait_exits_1_for_a_non_zero_exit() {
    let env = Env::new();
    let id = detach(&env, &["--", "sh", "-c", "exit 9"]);
    let (exit, value) = json(&env, &["wait", &id]);
    assert_eq!(exit, 1, "{value}");
    assert_eq!(value["data"]["class"]["code"], 9);
}

#[test]
fn an_unknown_leaf_is_leaf_not_found() {
    let env = Env::new();
    let (exit, value) = json(&env, &["wait", "no-such-leaf"]);
    assert_eq!(exit, 2, "{value}");
    assert_eq!(value["ok"], false);
    assert_eq!(value["error"]["reason"], "leaf_not_found");
}

#[test]
fn leaves_lists_state_pid_and_ages() {
    let env = Env::new();
    let done = detach(&env, &["--", "sh", "-c", "exit 0"]);
    json(&env, &["wait", &done]);
    let running = detach(&env, &["--", "sh", "-c", "echo working; exec sleep 100"]);
    wait_until("output", || {
        let (_, value) = json(&env, &["leaves"]);
        value["data"]["leaves"][1]["last_output_age_ms"].is_u64()
    });
    let (exit, value) = json(&env, &["leaves"]);
    assert_eq!(exit, 0, "{value}");
    let leaves = value["data"]["leaves"].as_array().expect("leaves");
    assert_eq!(leaves.len(), 2);
    assert_eq!(leaves[0]["id"], done.as_str());
    assert_eq!(leaves[0]["state"], "finished");
    assert_eq!(leaves[1]["id"], running.as_str());
    assert_eq!(leaves[1]["state"], "running");
    assert!(leaves[1]["pid"].is_i64() && leaves[1]["age_ms"].is_u64());
    assert_eq!(value["data"]["running"], 1);
    // On a terminal the table says how a leaf ended in words.
    let (exit, text) = env.on_terminal(&["leaves"]);
    assert_eq!(exit, 0, "{text}");
    let row = text
        .lines()
        .find(|l| l.starts_with(done.as_str()))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains("exited with code 0"), "{text}");
    json(&env, &["kill", "--force", &running]);
    let (exit, _) = json(&env, &["wait", &running]);
    assert_eq!(exit, 2);
}

#[test]
fn logs_prints_the_output_on_a_terminal() {
    let env = Env::new();
    let id = detach(
        &env,
        &["--", "sh", "-c", "echo to-stdout; echo to-stderr >&2"],
    );
    json(&env, &["wait", &id]);
    let (exit, text) = env.on_terminal(&["logs", &id]);
    assert_eq!(exit, 0, "{text}");
    assert!(
        text.contains("to-stdout\n") && text.contains("to-stderr\n"),
        "{text}"
    );
}

#[test]
fn a_killed_supervisor_is_reported_lost_and_its_leaf_is_killed() {
    let env = Env::new();
    let id = detach(&env, &["--", "sleep", "100"]);
    let launch = record(&env, &id, "launch").expect("launch record");
    let (pid, start) = leaf_process(&launch);
    assert!(alive(pid, start));
    let supervisor = launch["supervisor"]["pid"]
        .as_u64()
        .expect("supervisor pid");
    signal(u32::try_from(supervisor).expect("pid"), Signal::SIGKILL);
    let (exit, value) = json(&env, &["wait", &id]);
    assert_eq!(exit, 2, "{value}");
    assert_eq!(value["data"]["class"]["class"], "supervisor_lost");
    wait_until("the leaf to be gone", || !alive(pid, start));
}
