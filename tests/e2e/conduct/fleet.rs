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
}
