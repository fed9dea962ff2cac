//! A conductor holds a core lease while it works: its own suite runs, its leaves' `tdd`
//! and the commands it relays for them count it with the machine's other leases, and
//! it is gone once the conductor ends.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde_json::Value;
use tdd_engine::observe::lease::Lease;
use tdd_engine::observe::lease::LeaseDir;

use super::files_of;
use super::ledger_dir;
use crate::leases::Sleeper;
use crate::leases::workers_of;
use crate::leases::workers_project;
use crate::support::Env;
use crate::support::code;
use crate::support::envelope;

/// The plan the planner writes for the `workers` project.
const PLAN: &str = "---\ncycles:\n  - n: 1\n    project: w\n    title: subtraction\n    test: w::workers.subtracts\n    criterion: \"1\"\n---\n";

/// A budget no test machine's parallelism is near: a leaf that did not get the
/// conductor's `TDD_CORE_BUDGET` would share another number.
const BUDGET: &str = "45";

/// The planner runs the suite and `tdd status` (as a person in its shell would, without
/// its identity) before it writes the plan; the baseline then fails, which ends the run.
fn fixture() -> String {
    format!(
        r#"version = 1
[[leaf]]
role = "planner"
[[leaf.do]]
action = "run"
argv = ["tdd", "test", "--all", "--json"]
[[leaf.do]]
action = "run"
argv = ["env", "-u", "TDD_LEAF_ID", "-u", "TDD_LEAF_TOKEN", "tdd", "status", "--json"]
[[leaf.do]]
action = "write"
path = ".tdd/issue-1.md"
content = '''{PLAN}'''
"#
    )
}

/// Conducts the issue with two other holders' leases in the lease directory under the
/// conductor's `TMPDIR`, and checks what each process counted.
fn conduct_among_two_other_holders(env: &Env) {
    // No `TDD_LEASE_DIR`: the conductor finds its directory under its `TMPDIR`, and its
    // leaves and the commands relayed for them are each given a `TMPDIR` of their own.
    // They count the conductor's leases only because it hands them its directory.
    let tmp = env.home.path().join("tmp");
    std::fs::create_dir(&tmp).expect("tmp");
    let uid = std::fs::metadata(env.home.path()).expect("home").uid();
    let leases = LeaseDir::at(tmp.join(format!("tdd-{uid}")).join("leases"));
    let holders = [Sleeper::start(), Sleeper::start()];
    let held: Vec<Lease> = holders
        .iter()
        .map(|h| {
            leases
                .take_for(h.holder(), Path::new("/elsewhere"))
                .expect("take")
        })
        .collect();
    let fixture_path = env.home.path().join("fixture.toml");
    std::fs::write(&fixture_path, fixture()).expect("fixture");
    let issue = env.home.path().join("issue-1.md");
    std::fs::write(&issue, crate::calc::ISSUE_ONE).expect("issue");
    workers_project(env, true);
    let config = std::fs::read_to_string(env.root().join("tdd.toml")).expect("tdd.toml");
    env.write(
        "tdd.toml",
        &format!(
            "{config}\n[conductor]\nprovider = \"scripted\"\nbranch_prefix = \"tdd/issue-\"\n\n\
             [provider.scripted]\nargs = [\"{}\"]\n",
            fixture_path.display()
        ),
    );
    env.commit_all("workers");
    let out = env
        .tdd_std()
        .env_remove("TDD_LEASE_DIR")
        .env("TMPDIR", &tmp)
        .env("TDD_CORE_BUDGET", BUDGET)
        .args(["conduct", issue.to_str().expect("utf-8"), "--json"])
        .output()
        .expect("tdd conduct runs");
    let value = envelope(&out);
    // Three leases (the conductor's and the two others'): 45 / 3 for every runner.
    assert_eq!(code(&out), 4, "{value}");
    assert_eq!(value["error"]["reason"], "baseline_red", "{value}");
    let detail = value["data"]["bail"]["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("w::workers.w15"), "{value}");
    let said = files_of(
        &ledger_dir(&value).join("leaves"),
        "-planner-",
        "stdout.log",
    );
    assert_eq!(said.len(), 1, "{said:?}");
    let envelopes: Vec<Value> = said[0]
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("an envelope"))
        .collect();
    assert_eq!(envelopes.len(), 2, "{}", said[0]);
    assert_eq!(workers_of(&envelopes[0]), 15, "{}", envelopes[0]);
    let lease = &envelopes[1]["data"]["lease"];
    assert_eq!(lease["workers"], 15, "{}", envelopes[1]);
    let trees: Vec<&str> = lease["leases"]
        .as_array()
        .expect("leases")
        .iter()
        .filter_map(|l| l["work_tree"].as_str())
        .collect();
    let root = env.root().canonicalize().expect("root");
    assert_eq!(trees.len(), 3, "{lease}");
    assert!(trees.contains(&root.to_str().expect("utf-8")), "{lease}");
    // The conductor removed its lease as it ended (listed, not counted: a count would
    // sweep a lease its dead holder left); the others' are still there.
    let mut left: Vec<_> = std::fs::read_dir(leases.path())
        .expect("lease dir")
        .flatten()
        .map(|e| e.path())
        .collect();
    left.sort();
    let mut others: Vec<_> = held.iter().map(|l| l.path().to_path_buf()).collect();
    others.sort();
    assert_eq!(left, others);
}

#[test]
fn a_conductor_its_leaves_and_its_relay_count_its_lease_until_it_ends() {
    conduct_among_two_other_holders(&Env::new());
}

#[test]
fn an_unconfined_leaf_counts_its_conductors_lease_too() {
    conduct_among_two_other_holders(&super::unconfined_env());
}
