//! Core leases across processes: a runner's `{workers}` is the budget shared among the
//! live leases of the machine, and a dead holder's lease stops counting.

use std::path::Path;

use serde_json::Value;
use tdd_engine::observe::lease::Holder;
use tdd_engine::observe::lease::Lease;
use tdd_engine::observe::lease::LeaseDir;

use crate::support::Env;
use crate::support::code;
use crate::support::envelope;

/// A `junit` project whose one test is named after the `{workers}` its runner was given
/// (`w::workers.w<N>`); it fails when `failing`.
pub(crate) fn workers_project(env: &Env, failing: bool) {
    let failure = if failing {
        "<failure message=\"m\"/>"
    } else {
        ""
    };
    env.write(
        "tdd.toml",
        &format!(
            "[project.w]\nadapter = \"junit\"\ntest_command = '''printf '<testsuite><testcase \
             classname=\"workers\" name=\"w{{workers}}\">{failure}</testcase></testsuite>' > \
             {{report}}'''\n"
        ),
    );
}

/// A live process that holds a lease only because a test took one in its name; killed
/// (and reaped) when dropped.
pub(crate) struct Sleeper(std::process::Child);

impl Sleeper {
    pub(crate) fn start() -> Sleeper {
        let child = std::process::Command::new("sleep")
            .arg("600")
            .spawn()
            .expect("sleep starts");
        Sleeper(child)
    }

    pub(crate) fn holder(&self) -> Holder {
        Holder::of(self.0.id() as i32).expect("the sleeper's /proc entry")
    }

    /// Kills and reaps it, as a conductor killed with SIGKILL (no destructor runs).
    pub(crate) fn kill(&mut self) {
        self.0.kill().expect("kill");
        self.0.wait().expect("reap");
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The worker counts the runs of `tdd test --all` in `envs` were given, all started at
/// once.
fn workers_seen(envs: &[&Env]) -> Vec<usize> {
    let running: Vec<_> = envs
        .iter()
        .map(|env| {
            env.tdd_std()
                .args(["test", "--all", "--json"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("tdd test starts")
        })
        .collect();
    running
        .into_iter()
        .map(|child| {
            let out = child.wait_with_output().expect("tdd test ends");
            let value = envelope(&out);
            assert_eq!(code(&out), 0, "{value}");
            workers_of(&value)
        })
        .collect()
}

/// The `{workers}` a `tdd test --all` envelope's one test is named after.
pub(crate) fn workers_of(value: &Value) -> usize {
    let tests = value["data"]["observations"][0]["tests"]
        .as_object()
        .unwrap_or_else(|| panic!("no tests in {value}"));
    let names: Vec<&String> = tests.keys().collect();
    assert_eq!(names.len(), 1, "{value}");
    names[0]
        .strip_prefix("w::workers.w")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not a workers test: {}", names[0]))
}

fn lease_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("lease dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn three_holders_share_the_budget_and_a_killed_holders_lease_stops_counting() {
    let shared = tempfile::tempdir().expect("lease dir");
    let leases = LeaseDir::at(shared.path().join("leases"));
    // Three work trees, each the work tree of one holder, counting the same leases.
    let envs: Vec<Env> = (0..3)
        .map(|_| {
            let env = Env::new()
                .with_env("TDD_CORE_BUDGET", "7")
                .with_env("TDD_LEASE_DIR", leases.path().to_str().expect("utf-8"));
            workers_project(&env, false);
            env.commit_all("workers");
            env
        })
        .collect();
    let mut holders = [Sleeper::start(), Sleeper::start(), Sleeper::start()];
    let held: Vec<Lease> = holders
        .iter()
        .zip(&envs)
        .map(|(holder, env)| leases.take_for(holder.holder(), env.root()).expect("take"))
        .collect();
    let seen = workers_seen(&envs.iter().collect::<Vec<_>>());
    assert_eq!(seen, [2, 2, 2]);
    assert!(seen.iter().sum::<usize>() <= 7, "{seen:?}");

    // The first holder dies without releasing its lease: the next count sweeps it and
    // the two left share the budget.
    holders[0].kill();
    let (exit, status) = envs[1].json(&["status"]);
    assert_eq!(exit, 0, "{status}");
    let lease = &status["data"]["lease"];
    assert_eq!(lease["workers"], 3, "{status}");
    assert_eq!(lease["budget"]["cores"], 7, "{status}");
    assert_eq!(lease["budget"]["from"], "variable", "{status}");
    let mut pids: Vec<i64> = lease["leases"]
        .as_array()
        .expect("leases")
        .iter()
        .map(|l| l["pid"].as_i64().expect("pid"))
        .collect();
    let mut alive: Vec<i64> = holders[1..]
        .iter()
        .map(|h| i64::from(h.holder().pid))
        .collect();
    pids.sort_unstable();
    alive.sort_unstable();
    assert_eq!(pids, alive, "{status}");
    assert!(!held[0].path().exists(), "{:?}", lease_files(leases.path()));
    let (_, text) = envs[1].on_terminal(&["status"]);
    assert!(
        text.contains(
            "cores: 3 of 7 set by TDD_CORE_BUDGET (2 conductors hold leases on this machine)"
        ),
        "{text}"
    );
    assert_eq!(workers_seen(&[&envs[1], &envs[2]]), [3, 3]);

    // With no lease left, a `tdd test` by hand gets the whole budget, and `tdd status`
    // says nothing of cores.
    drop(held);
    assert_eq!(workers_seen(&[&envs[0]]), [7]);
    let (_, text) = envs[0].on_terminal(&["status"]);
    assert!(!text.contains("cores:"), "{text}");
}

#[test]
fn a_budget_that_is_not_a_number_of_cores_is_refused_before_any_runner_starts() {
    let env = Env::new().with_env("TDD_CORE_BUDGET", "0");
    workers_project(&env, false);
    env.commit_all("workers");
    let (exit, value) = env.json(&["test", "--all"]);
    assert_eq!(exit, 2, "{value}");
    assert_eq!(value["error"]["reason"], "core_budget_invalid", "{value}");
    assert!(
        value["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("TDD_CORE_BUDGET is `0`")),
        "{value}"
    );
}
