//! `tdd fleet` while a detached conductor writes the ledger.

use super::*;

#[test]
fn fleet_shows_the_running_leaf_while_a_conductor_writes_and_the_end_after() {
    let env = Env::new();
    let gate = tempfile::tempdir().expect("gate");
    let go_on = gate.path().join("go-on");
    // The first verifier holds until the test has seen it running.
    let hold = super::sandbox::run_hostile(&format!(
        "until [ -e {} ]; do sleep 0.05; done",
        go_on.display()
    ));
    let verifier = GOOD_VERIFIER.replace(
        "role = \"verifier\"\n",
        &format!("role = \"verifier\"\n{hold}"),
    );
    let issue = project(&env, &fixture(&good_planner(""), &verifier));
    let (code, value) = env.json(&["conduct", &issue, "--detach"]);
    assert_eq!(code, 0, "{value}");
    let id = value["data"]["id"].as_str().expect("leaf id").to_string();
    let mut seen = Value::Null;
    // The plan, the baseline and RED come first: generous, as a loaded machine builds.
    let bound = std::time::Duration::from_secs(300);
    tdd_testutil::wait_within("the verifier running in the fleet", bound, || {
        let (code, fleet) = env.json(&["fleet"]);
        assert_eq!(code, 0, "{fleet}");
        // Every look is a consistent one: a known step of a known plan.
        for run in fleet["data"]["runs"].as_array().expect("runs") {
            assert!(run["step"].as_u64() <= run["of"].as_u64(), "{fleet}");
        }
        let running = fleet["data"]["runs"]
            .as_array()
            .and_then(|runs| runs.first())
            .filter(|run| run["state"] == "running")
            .filter(|run| {
                run["leaf"]
                    .as_str()
                    .is_some_and(|l| l.starts_with("verifier-"))
            })
            .cloned();
        match running {
            Some(run) => {
                seen = run;
                true
            }
            None => false,
        }
    });
    assert_eq!(seen["issue"], 1, "{seen}");
    assert_eq!(
        (&seen["step"], &seen["of"]),
        (&1.into(), &1.into()),
        "{seen}"
    );
    assert_eq!(seen["phase"], "green", "{seen}");
    assert_eq!(seen["stale"], false);
    std::fs::write(&go_on, "").expect("go on");
    let (code, waited) = env.json(&["wait", &id]);
    assert_eq!(code, 0, "{waited}");
    let (code, fleet) = env.json(&["fleet"]);
    assert_eq!(code, 0, "{fleet}");
    let run = &fleet["data"]["runs"][0];
    assert_eq!(run["state"], "completed", "{fleet}");
    assert_eq!(run["leaf"], Value::Null);
    assert_eq!((&run["step"], &run["of"]), (&1.into(), &1.into()));
    // Watched: each refresh but the last is a `fleet` event, the last the answer.
    let out = env
        .tdd()
        .args(["fleet", "--watch", "1", "--count", "2", "--json"])
        .output()
        .expect("tdd runs");
    assert_eq!(crate::support::code(&out), 0);
    let events: Vec<Value> = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|e: &Value| e["event"] == "fleet")
        .collect();
    assert_eq!(events.len(), 1, "{out:?}");
    assert_eq!(events[0]["runs"][0]["state"], "completed");
    let answer = crate::support::envelope(&out);
    assert_eq!(answer["data"]["runs"][0]["state"], "completed", "{answer}");
    // On a terminal the screen is cleared and the table redrawn under a line that says
    // when; the last is the answer.
    let (code, text) = env.on_terminal(&["fleet", "--watch", "1", "--count", "2"]);
    assert_eq!(code, 0, "{text}");
    assert_eq!(text.matches("\x1b[H\x1b[2J").count(), 1, "{text}");
    assert_eq!(
        text.matches("tdd fleet, every 1s, at ").count(),
        1,
        "{text}"
    );
    assert_eq!(text.matches("completed").count(), 2, "{text}");
    let (code, refused) = env.json(&["fleet", "--watch", "0"]);
    assert_eq!(code, 2, "{refused}");
    assert_eq!(refused["error"]["reason"], "watch_interval_invalid");
}
