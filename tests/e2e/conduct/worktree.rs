//! `tdd conduct --worktree`: the run works in its own git worktree and leaves the
//! user's checkout alone.

use super::*;
use crate::support::Env;

/// Leaves an untracked file and an edited tracked file in the user's work tree; returns
/// the branch checked out there.
fn dirty_user_tree(env: &Env) -> String {
    env.write("notes.txt", "mine, uncommitted\n");
    env.write("src/lib.rs", &format!("{LIB}// mine\n"));
    env.git(&["rev-parse", "--abbrev-ref", "HEAD"])
}

/// The user's work tree is as `dirty_user_tree` left it, on `branch`, with none of the
/// run's commits; the worktree at `wt` has them all and is clean.
fn assert_separate(env: &Env, branch: &str, wt: &Path) {
    assert_eq!(env.git(&["rev-parse", "--abbrev-ref", "HEAD"]), branch);
    assert_eq!(subjects(env.root()), ["init", "calc"]);
    let notes = std::fs::read_to_string(env.root().join("notes.txt")).expect("notes");
    assert_eq!(notes, "mine, uncommitted\n");
    let lib = std::fs::read_to_string(env.root().join("src/lib.rs")).expect("lib");
    assert_eq!(lib, format!("{LIB}// mine\n"));
    assert_eq!(
        subjects(wt),
        [
            "init",
            "calc",
            "plan: issue #1 Subtraction",
            "test: subtraction",
            "feat: subtraction",
            "refactor: subtraction"
        ]
    );
    assert_eq!(
        git_in(wt, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        "tdd/issue-1-subtraction"
    );
    assert_eq!(git_in(wt, &["status", "--porcelain"]), "");
    let lib = std::fs::read_to_string(wt.join("src/lib.rs")).expect("lib");
    assert_eq!(lib, format!("{LIB}{IMPL}"));
}

#[test]
fn conduct_worktree_leaves_the_user_tree_alone_and_resumes_without_the_flag() {
    let env = super::unconfined_env();
    // The planner asks `tdd status` in the user's work tree while the conductor runs.
    let planner = good_planner(&format!(
        "[[leaf.do]]\naction = \"run\"\nargv = [\"env\", \"-u\", \"TDD_LEAF_ID\", \"-u\", \"TDD_LEAF_TOKEN\", \"tdd\", \"-C\", \"{}\", \"status\", \"--json\"]\n",
        env.root().display()
    ));
    let issue = project(&env, &fixture(&planner, GOOD_VERIFIER));
    let wt = Sibling::of(&env);
    let branch = dirty_user_tree(&env);
    // A dirty user tree is no reason to bail: the run works elsewhere.
    let (code, value) = env.json(&["conduct", &issue, "--worktree", "--max-steps", "0"]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(
        value["data"]["worktree"],
        wt.0.display().to_string().as_str()
    );
    // `tdd status` in the worktree shows the run as usual.
    let out = env
        .tdd()
        .args(["-C", &wt.0.display().to_string(), "status", "--json"])
        .output()
        .expect("tdd runs");
    let status = crate::support::envelope(&out);
    assert_eq!(status["data"]["active"], true, "{status}");
    // The resume needs no flag: the unfinished run is found in its worktree.
    let (code, value) = env.json(&["conduct", &issue]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(
        value["data"]["worktree"],
        wt.0.display().to_string().as_str()
    );
    assert_eq!(value["data"]["steps_done"], 1);
    assert_separate(&env, &branch, &wt.0);
    // The leaves worked there: the REFACTOR leaf's `tdd status` saw the conductor.
    let ledger_dir = ledger_dir(&value);
    let out = files_of(
        &ledger_dir.join("leaves"),
        "-developer-i1-s1-refactor",
        "stdout.log",
    );
    let seen: Value = serde_json::from_str(out[0].trim()).expect("an envelope");
    assert_eq!(seen["data"]["conductor"]["phase"], "refactor", "{seen}");
    // `tdd status` in the user's work tree pointed at the conductor's worktree.
    let out = files_of(&ledger_dir.join("leaves"), "-planner-", "stdout.log").join("\n");
    let line = out.lines().find(|l| l.contains("conductors_elsewhere"));
    let seen: Value = serde_json::from_str(line.expect("a status")).expect("an envelope");
    assert_eq!(seen["data"]["conductor"], Value::Null, "{seen}");
    let elsewhere = &seen["data"]["conductors_elsewhere"][0];
    assert_eq!(elsewhere["worktree"], wt.0.display().to_string().as_str());
    assert_eq!(elsewhere["phase"], "plan", "{seen}");
}

#[test]
fn conduct_worktree_needs_a_committed_config_and_leaves_nothing_behind_without_one() {
    let env = Env::new();
    let issue = project(&env, &fixture(&good_planner(""), GOOD_VERIFIER));
    let wt = Sibling::of(&env);
    env.git(&["rm", "-q", "--cached", "tdd.toml"]);
    env.git(&["commit", "-q", "-m", "untrack the config"]);
    let (code, value) = env.json(&["conduct", &issue, "--worktree"]);
    assert_eq!(code, 2, "{value}");
    assert_eq!(value["error"]["reason"], "config_invalid", "{value}");
    assert!(!wt.0.exists());
    assert!(env.git(&["branch", "--list", "tdd/*"]).is_empty());
}

#[test]
fn a_worktree_conductor_killed_mid_step_resumes_from_the_user_tree_to_the_same_commits() {
    use std::os::unix::process::ExitStatusExt;
    let env = Env::new();
    let issue = project(&env, &fixture(&good_planner(""), GOOD_VERIFIER));
    let config = std::fs::read_to_string(env.root().join("tdd.toml")).expect("config");
    env.write(
        "tdd.toml",
        &config.replace("[conductor]\n", "[conductor]\nworktree = true\n"),
    );
    env.commit_all("conduct in a worktree");
    let wt = Sibling::of(&env);
    let branch = dirty_user_tree(&env);
    for point in ["conduct_branch", "conduct_after_leaf_green"] {
        let out = env
            .tdd()
            .env("TDD_FAILPOINT", format!("{point}=kill"))
            .args(["conduct", &issue, "--json"])
            .output()
            .expect("tdd runs");
        assert_eq!(out.status.signal(), Some(9), "{point}");
    }
    let (code, value) = env.json(&["conduct", &issue]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(
        value["data"]["worktree"],
        wt.0.display().to_string().as_str()
    );
    // The config commit is on both branches; the run's commits only in the worktree.
    let mut log = subjects(&wt.0);
    assert_eq!(log.remove(2), "conduct in a worktree");
    assert_eq!(log[2..], STEP_ONE);
    assert_eq!(env.git(&["rev-parse", "--abbrev-ref", "HEAD"]), branch);
    assert_eq!(subjects(env.root()).len(), 3);
    let notes = std::fs::read_to_string(env.root().join("notes.txt")).expect("notes");
    assert_eq!(notes, "mine, uncommitted\n");
    assert_eq!(git_in(&wt.0, &["status", "--porcelain"]), "");
    let pr = read(&value["data"]["pr"]);
    assert!(pr.contains("- [x] Step 1:"), "{pr}");
}

#[test]
fn a_second_conductor_of_the_issue_from_the_user_tree_is_refused_while_one_works_in_the_worktree() {
    let env = super::unconfined_env();
    let planner = good_planner(&format!(
        "[[leaf.do]]\naction = \"run\"\nargv = [\"tdd\", \"-C\", \"{}\", \"conduct\", \"--json\", \"--worktree\", \"ISSUE\"]\n",
        env.root().display()
    ));
    let issue = project(&env, "");
    let fixture = fixture(&planner.replace("ISSUE", &issue), GOOD_VERIFIER);
    std::fs::write(env.home.path().join("fixture.toml"), fixture).expect("fixture");
    let wt = Sibling::of(&env);
    let (code, value) = env.json(&["conduct", &issue, "--worktree", "--max-steps", "0"]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(
        value["data"]["worktree"],
        wt.0.display().to_string().as_str()
    );
    let ledger_dir = ledger_dir(&value);
    let out = files_of(&ledger_dir.join("leaves"), "-planner-", "stdout.log").join("\n");
    assert!(out.contains("conductor_running"), "{out}");
}

#[test]
fn a_finished_issue_conducted_again_says_it_is_done_with_its_steps_in_both_placements() {
    for placement in [&[][..], &["--worktree"][..]] {
        let env = super::unconfined_env();
        let issue = project(&env, &fixture(&good_planner(""), GOOD_VERIFIER));
        let args: Vec<&str> = ["conduct", issue.as_str()]
            .into_iter()
            .chain(placement.iter().copied())
            .collect();
        let steps = |v: &Value| (v["data"]["steps_done"].clone(), v["data"]["steps"].clone());
        let (code, first) = env.json(&args);
        assert_eq!(code, 0, "{placement:?}: {first}");
        assert_eq!(
            steps(&first),
            (1.into(), 1.into()),
            "{placement:?}: {first}"
        );
        let (code, again) = env.json(&args);
        assert_eq!(code, 0, "{placement:?}: {again}");
        assert_eq!(
            steps(&again),
            (1.into(), 1.into()),
            "{placement:?}: {again}"
        );
        let (_, text) = env.on_terminal(&args);
        assert!(
            text.contains("issue #1 done: 1/1 steps"),
            "{placement:?}: {text}"
        );
    }
}
