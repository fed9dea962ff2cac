//! The ledger travels with the branch: a run conducted in one repository, pushed to a
//! remote, continues in a fresh clone of it, and a forged published ledger is refused.

use std::path::Path;

use serde_json::Value;

use super::*;
use crate::support::Env;

const DEMO_FIXTURE: &str = include_str!("../../../examples/demo/fixture.toml");
const DEMO_ISSUE: &str = include_str!("../../../examples/demo/issue-1.md");

/// The demo's three-step project in `env`, with `origin` a bare repository under its
/// home; returns the issue path and the remote's path.
fn demo_with_remote(env: &Env) -> (String, std::path::PathBuf) {
    let fixture = env.home.path().join("fixture.toml");
    std::fs::write(&fixture, DEMO_FIXTURE).expect("fixture");
    let issue = env.home.path().join("issue-1.md");
    std::fs::write(&issue, DEMO_ISSUE).expect("issue");
    crate::calc::write_crate(env);
    env.write(
        "tdd.toml",
        &CONFIG.replace("{fixture}", &fixture.display().to_string()),
    );
    env.commit_all("calc");
    let remote = env.home.path().join("remote.git");
    git_in(env.home.path(), &["init", "-q", "--bare", "remote.git"]);
    env.git(&["remote", "add", "origin", remote.to_str().expect("utf-8")]);
    env.git(&["push", "-q", "origin", "main"]);
    (issue.display().to_string(), remote)
}

/// `tdd ARGS --json` in `dir`.
fn json_in(env: &Env, dir: &Path, args: &[&str]) -> (i32, Value) {
    let out = env
        .tdd()
        .current_dir(dir)
        .args(args)
        .arg("--json")
        .output()
        .expect("tdd runs");
    (crate::support::code(&out), crate::support::envelope(&out))
}

/// A clone of `remote` at `dir` with `branch` checked out.
fn clone_at(env: &Env, remote: &Path, dir: &Path, branch: &str) {
    git_in(
        env.home.path(),
        &[
            "clone",
            "-q",
            remote.to_str().expect("utf-8"),
            dir.to_str().expect("utf-8"),
        ],
    );
    git_in(dir, &["checkout", "-q", branch]);
}

/// Conducts step 1 of the demo's issue in `env` and returns the work branch.
fn first_step(env: &Env, issue: &str) -> String {
    let (code, value) = env.json(&["conduct", issue, "--max-steps", "1"]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(value["next_action"]["verb"], "resume_conduct", "{value}");
    env.git(&["rev-parse", "--abbrev-ref", "HEAD"])
        .trim()
        .to_string()
}

#[test]
fn a_clone_continues_the_run_from_the_published_ledger() {
    let env = Env::new();
    let (issue, remote) = demo_with_remote(&env);
    let branch = first_step(&env, &issue);
    let reference = format!("refs/tdd/ledger/{branch}");
    // Every phase commit published the ledger; `tdd ledger publish` has nothing to add
    // but says how to push it.
    let (code, published) = env.json(&["ledger", "publish"]);
    assert_eq!(code, 0, "{published}");
    assert_eq!(published["data"]["reference"], reference, "{published}");
    // And it set the remote up so that a plain `git push` carries the ledger.
    assert_eq!(
        published["data"]["push_configured"]["added"],
        serde_json::json!(["HEAD", "refs/tdd/ledger/*:refs/tdd/ledger/*"]),
        "{published}"
    );
    env.git(&["push", "-q"]);
    assert_eq!(
        git_in(&remote, &["rev-parse", &reference]),
        env.git(&["rev-parse", &reference]),
        "a plain push carried the branch's ledger"
    );

    // A fresh clone: no ledger on this machine for it, the run commits on its branch.
    let b = env.home.path().join("b");
    clone_at(&env, &remote, &b, &branch);
    let (code, status) = json_in(&env, &b, &["status"]);
    assert_eq!(code, 0, "{status}");
    assert_eq!(status["data"]["active"], true, "{status}");
    assert_eq!(status["data"]["cycle"]["n"], 2, "step 2 is next: {status}");
    assert_eq!(
        status["data"]["adopted"]["reference"], reference,
        "{status}"
    );
    assert_eq!(
        status["data"]["adopted"]["fetched_from"], "origin",
        "{status}"
    );
    // The clone's remote now brings the ledger refs with every fetch.
    let fetch = git_in(&b, &["config", "--get-all", "remote.origin.fetch"]);
    assert!(
        fetch.contains("refs/tdd/ledger/*:refs/tdd/ledger/*"),
        "{fetch}"
    );
    assert_eq!(
        status["data"]["adopted"]["push_configured"]["remote"], "origin",
        "{status}"
    );
    // The fleet shows the run where it moved: this clone, not the work tree it began in.
    let (code, fleet) = json_in(&env, &b, &["fleet"]);
    assert_eq!(code, 0, "{fleet}");
    let here = b.canonicalize().expect("clone").display().to_string();
    assert_eq!(fleet["data"]["runs"][0]["worktree"], here, "{fleet}");
    assert_eq!(fleet["data"]["runs"][0]["step"], 2, "{fleet}");
    let (code, done) = json_in(&env, &b, &["conduct", &issue]);
    assert_eq!(code, 0, "{done}");
    assert_eq!(done["next_action"]["verb"], "complete", "{done}");
    // A plain push from the clone carries the finished branch and its ledger back.
    git_in(&b, &["push", "-q"]);
    for name in [format!("refs/heads/{branch}"), reference.clone()] {
        assert_eq!(
            git_in(&remote, &["rev-parse", &name]),
            git_in(&b, &["rev-parse", &name]),
            "{name} on the remote is the clone's"
        );
    }
    let log = subjects(&b);
    assert_eq!(
        log.iter().filter(|s| s.starts_with("refactor: ")).count(),
        3,
        "steps 1 (from A), 2 and 3 (here) each closed once: {log:?}"
    );
    for dir in [env.root(), b.as_path()] {
        let (code, verified) = json_in(&env, dir, &["ledger", "verify"]);
        assert_eq!(code, 0, "{}: {verified}", dir.display());
    }
}

#[test]
fn a_forged_published_ledger_is_refused_in_the_clone_with_the_reason() {
    let env = Env::new();
    let (issue, remote) = demo_with_remote(&env);
    let branch = first_step(&env, &issue);
    let reference = format!("refs/tdd/ledger/{branch}");
    env.git(&["push", "-q", "origin", &branch, &reference]);
    // Someone with push rights rewrites one event of the published chain.
    let forge = env.home.path().join("forge");
    git_in(
        env.root(),
        &[
            "worktree",
            "add",
            "-q",
            "--detach",
            forge.to_str().expect("utf-8"),
            &reference,
        ],
    );
    let chunk = forge.join("events/0000000001.jsonl");
    let text = std::fs::read_to_string(&chunk).expect("the first chunk");
    let forged = text.replacen("subtraction", "subtraxtion", 1);
    assert_ne!(forged, text, "the chunk names the step");
    std::fs::write(&chunk, forged).expect("forge");
    env.git(&[
        "-C",
        forge.to_str().expect("utf-8"),
        "commit",
        "-q",
        "-am",
        "forged",
    ]);
    git_in(
        &forge,
        &[
            "push",
            "-q",
            "-f",
            remote.to_str().expect("utf-8"),
            &format!("HEAD:{reference}"),
        ],
    );

    let c = env.home.path().join("c");
    clone_at(&env, &remote, &c, &branch);
    let (code, refused) = json_in(&env, &c, &["status"]);
    assert_eq!(code, 1, "{refused}");
    assert_eq!(
        refused["error"]["reason"], "ledger_published_refused",
        "{refused}"
    );
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("broken at event"), "{refused}");
    assert!(message.contains("edited"), "{refused}");
    // Nothing was taken in, and nothing acts on the run: the next command says the same.
    let (code, refused) = json_in(&env, &c, &["conduct", &issue]);
    assert_eq!(code, 1, "{refused}");
    assert_eq!(
        refused["error"]["reason"], "ledger_published_refused",
        "{refused}"
    );
}

#[test]
fn a_clone_without_a_published_ledger_is_told_so_not_to_restore_a_backup() {
    let env = Env::new();
    let (issue, remote) = demo_with_remote(&env);
    let branch = first_step(&env, &issue);
    // The branch alone, as a plain push sends it.
    env.git(&["push", "-q", "origin", &branch]);
    let d = env.home.path().join("d");
    clone_at(&env, &remote, &d, &branch);
    let (code, refused) = json_in(&env, &d, &["status"]);
    assert_eq!(code, 1, "{refused}");
    assert_eq!(
        refused["error"]["reason"], "ledger_unpublished",
        "{refused}"
    );
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("none on origin"), "{refused}");
    let hint = refused["error"]["hint"].as_str().unwrap_or_default();
    assert!(hint.contains("tdd ledger publish"), "{refused}");
    assert!(!hint.contains("backup"), "{refused}");
}
