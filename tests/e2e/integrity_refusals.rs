//! Bad repository or ledger state met by a command: a refusal with a reason and what to
//! do (exit 1), never an internal error (exit 70) that asks for a bug report.

use std::path::PathBuf;

use crate::integrity_gates::CALC;
use crate::integrity_gates::IMPL;
use crate::integrity_gates::Locks;
use crate::integrity_gates::STUB;
use crate::integrity_gates::TEST;
use crate::integrity_gates::at_green;
use crate::integrity_gates::committed_with;
use crate::integrity_gates::head;
use crate::support::Env;

/// Asserts that `(code, value)` is a refusal (exit 1) for `reason` whose message names
/// `names`.
fn assert_refused_naming((code, value): (i32, serde_json::Value), reason: &str, names: &str) {
    assert_eq!(code, 1, "{value}");
    assert_eq!(value["error"]["reason"], reason, "{value}");
    assert!(
        value["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains(names)),
        "{value}"
    );
}

/// A lock left on the branch's ref by a git that died: the phase commit cannot move
/// it, and that is a refusal that names the lock, HEAD left where it was.
#[test]
fn a_lock_left_on_the_branch_is_a_refusal_of_the_phase_commit() {
    let env = at_green(Locks::Hand);
    let before = head(&env);
    std::fs::write(env.root().join(".git/refs/heads/main.lock"), "").expect("lock");
    env.write("calc.py", &format!("{CALC}{IMPL}"));
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 1, "{value}");
    assert!(
        matches!(
            value["error"]["reason"].as_str(),
            Some("git_refused" | "ref_locked")
        ),
        "{value}"
    );
    let said = format!("{} {}", value["error"]["message"], value["error"]["hint"]);
    assert!(
        said.contains("main.lock") && !said.contains("hint:"),
        "{value}"
    );
    assert_eq!(head(&env), before);
}

/// A ledger ref that names a blob, and a lock file left beside it: `ledger publish`
/// refuses, naming the ref or the lock.
#[test]
fn a_ledger_ref_that_is_no_commit_or_is_locked_is_a_refusal() {
    let env = at_green(Locks::Hand);
    let reference = "refs/tdd/ledger/main";
    let blob = env.git(&["rev-parse", "HEAD:calc.py"]);
    env.git(&["update-ref", reference, blob.trim()]);
    assert_refused_naming(
        env.json(&["ledger", "publish"]),
        "ledger_ref_invalid",
        reference,
    );
    env.git(&["update-ref", "-d", reference]);
    let (code, value) = env.json(&["ledger", "publish"]);
    assert_eq!(code, 0, "{value}");
    let lock = env.root().join(format!(".git/{reference}.lock"));
    std::fs::write(&lock, "").expect("lock");
    let (code, value) = env.json(&["note", "one more event to publish"]);
    assert_eq!(code, 0, "{value}");
    let (code, value) = env.json(&["ledger", "publish"]);
    assert_eq!(code, 1, "{value}");
    assert_eq!(value["error"]["reason"], "ref_locked", "{value}");
    assert!(
        value["error"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains(&*lock.to_string_lossy())),
        "{value}"
    );
}

/// A few garbage bytes as a rollback journal beside the ledger: every command that reads
/// the ledger refuses, naming the journal, and works again once it is moved aside.
#[test]
fn a_stray_journal_beside_the_ledger_is_a_refusal_naming_it() {
    let env = at_green(Locks::Hand);
    let (_, value) = env.json(&["ledger", "path"]);
    let database = PathBuf::from(value["data"]["database"].as_str().expect("database"));
    let journal = PathBuf::from(format!("{}-journal", database.display()));
    std::fs::write(&journal, "garbage").expect("journal");
    assert_refused_naming(
        env.json(&["status"]),
        "ledger_corrupt",
        &journal.to_string_lossy(),
    );
    std::fs::rename(&journal, journal.with_extension("damaged")).expect("move aside");
    let (code, value) = env.json(&["status"]);
    assert_eq!(code, 0, "{value}");
}

/// A sparse file of more than a GiB planted beside the change: GREEN is refused from its
/// size, naming it, before a byte is hashed; once it is gone, GREEN is judged.
#[test]
fn a_changed_file_too_large_to_record_is_refused_unread() {
    let env = at_green(Locks::Hand);
    let before = head(&env);
    env.write("calc.py", &format!("{CALC}{IMPL}"));
    let planted = env.root().join("data.bin");
    std::fs::File::create(&planted)
        .and_then(|file| file.set_len((1 << 30) + 1))
        .expect("a sparse file");
    assert_refused_naming(env.json(&["advance"]), "file_too_large", "data.bin");
    assert_eq!(head(&env), before);
    std::fs::remove_file(&planted).expect("remove");
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 0, "{value}");
    assert_ne!(head(&env), before, "GREEN committed");
}

/// A RED whose test leaves a file too large to record in the work tree as it runs: the
/// step fails naming it after its commit was made, and HEAD goes back to where the
/// ledger says it is, so the next step is not refused as a moved HEAD. Once the test
/// no longer leaves it, RED is accepted.
#[test]
fn a_red_that_fails_after_its_commit_leaves_head_where_the_ledger_says() {
    let env = committed_with(Env::new(), Locks::Hand, "");
    let (code, value) = env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    assert_eq!(code, 0, "{value}");
    let before = head(&env);
    let leaves_a_file = TEST.replace(
        "    assert sub(5, 2) == 3\n",
        "    with open(\"big.bin\", \"wb\") as f:\n        f.truncate((1 << 30) + 1)\n    assert sub(5, 2) == 3\n",
    );
    env.write("tests/test_sub.py", &leaves_a_file);
    env.write("calc.py", &format!("{CALC}{STUB}"));
    assert_refused_naming(env.json(&["advance"]), "file_too_large", "big.bin");
    assert_eq!(head(&env), before, "HEAD is where the ledger says");
    assert!(
        env.git(&["diff", "--cached", "--name-only"])
            .trim()
            .is_empty(),
        "the index follows HEAD back"
    );
    std::fs::remove_file(env.root().join("big.bin")).expect("remove");
    env.write("tests/test_sub.py", TEST);
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(value["data"]["to"], "AWAITING_IMPL", "{value}");
    assert_ne!(head(&env), before, "RED committed");
}

/// A repository git cannot read (its configuration garbled) is what `ledger verify`
/// reports, never recorded phase commits gone from the branch: nothing was rewritten.
#[test]
fn ledger_verify_tells_a_git_that_fails_from_a_rewritten_history() {
    let env = at_green(Locks::Hand);
    std::fs::write(env.root().join(".git/config"), "[core\n\tbroken = = =\n").expect("garble");
    let (code, value) = env.json(&["ledger", "verify"]);
    assert_eq!(code, 1, "{value}");
    assert_ne!(value["error"]["reason"], "phase_commit_missing", "{value}");
    assert!(
        value["error"]["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("git_")),
        "{value}"
    );
}

/// A ledger home that is a link to nowhere: `run start` is refused naming what it was
/// doing, with how to fix it, never an internal error.
#[test]
fn a_ledger_home_that_is_a_dangling_link_is_a_refusal() {
    let outside = tempfile::tempdir().expect("outside");
    let home = outside.path().join("ledger-home");
    std::os::unix::fs::symlink(outside.path().join("gone"), &home).expect("a dangling link");
    let env = Env::new().with_env("TDD_LEDGER_HOME", &home.display().to_string());
    let env = committed_with(env, Locks::Hand, "");
    let (code, value) = env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    assert_eq!(code, 1, "{value}");
    assert_eq!(value["error"]["reason"], "state_unusable", "{value}");
    assert!(
        value["error"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("TDD_LEDGER_HOME")),
        "{value}"
    );
    assert!(
        !outside.path().join("gone").exists(),
        "nothing made through the link"
    );
}

/// A clone's first command fetches the published ledger from the branch's remote; a
/// program the clone's configuration names for that fetch (`remote.origin.uploadpack`)
/// is never started, and the ledger is taken in all the same.
#[test]
fn a_fetch_of_the_published_ledger_starts_no_program_the_clone_names() {
    let env = at_green(Locks::Hand);
    env.write("calc.py", &format!("{CALC}{IMPL}"));
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 0, "{value}");
    let remote = env.home.path().join("remote.git");
    env.git(&["init", "-q", "--bare", &remote.display().to_string()]);
    env.git(&["remote", "add", "origin", &remote.display().to_string()]);
    env.git(&["push", "-q", "origin", "main", "refs/tdd/ledger/main"]);
    let clone = env.home.path().join("clone");
    env.git(&[
        "clone",
        "-q",
        "-b",
        "main",
        &remote.display().to_string(),
        &clone.display().to_string(),
    ]);
    let mark = env.home.path().join("upload-pack-ran");
    let program = env.home.path().join("upload-pack.sh");
    std::fs::write(
        &program,
        format!(
            "#!/bin/sh\ntouch '{}'\nexec git-upload-pack \"$@\"\n",
            mark.display()
        ),
    )
    .expect("program");
    crate::integrity_gates::make_executable(&program);
    let in_clone = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .current_dir(&clone)
            .args(args)
            .output()
            .expect("git");
        assert!(out.status.success(), "{out:?}");
    };
    in_clone(&[
        "config",
        "remote.origin.uploadpack",
        &program.display().to_string(),
    ]);
    let out = env
        .tdd()
        .current_dir(&clone)
        .args(["status", "--json"])
        .output()
        .expect("tdd runs");
    let status = crate::support::envelope(&out);
    assert_eq!(crate::support::code(&out), 0, "{status}");
    assert_eq!(
        status["data"]["adopted"]["fetched_from"], "origin",
        "{status}"
    );
    assert!(!mark.exists(), "the clone's upload-pack program ran");
}

/// An ignored `venv` made after `run start` would be linked into the clean room, its
/// bytes never fingerprinted: GREEN is refused, naming it, even with the real
/// implementation.
#[test]
fn a_dependency_directory_made_after_run_start_refuses_green() {
    let env = at_green(Locks::Hand);
    let exclude = env.root().join(".git/info/exclude");
    std::fs::create_dir_all(exclude.parent().expect("info")).expect("info");
    std::fs::write(&exclude, "venv/\n").expect("exclude");
    env.write("venv/calc.py", &format!("{CALC}{IMPL}"));
    env.write("calc.py", &format!("{CALC}{IMPL}"));
    let before = head(&env);
    assert_refused_naming(env.json(&["advance"]), "runner_changed", "venv");
    assert_eq!(head(&env), before);
    std::fs::remove_dir_all(env.root().join("venv")).expect("remove");
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 0, "{value}");
}

/// The ledger home's `repos` directory made a file: every command that takes the
/// work-tree lock refuses, naming it, instead of failing inside.
#[test]
fn a_ledger_home_directory_made_a_file_is_damaged_state_named() {
    let env = at_green(Locks::Hand);
    let (_, value) = env.json(&["ledger", "path"]);
    let dir = PathBuf::from(value["data"]["dir"].as_str().expect("dir"));
    let repos = dir.parent().expect("repos").to_path_buf();
    std::fs::rename(&repos, repos.with_extension("moved")).expect("move");
    std::fs::write(&repos, "x").expect("a file");
    env.write("calc.py", &format!("{CALC}{IMPL}"));
    for args in [&["advance"][..], &["rollback", "--to-previous"][..]] {
        let (code, value) = env.json(args);
        assert_eq!(code, 1, "{args:?}: {value}");
        assert_eq!(value["error"]["reason"], "state_damaged", "{value}");
        assert!(
            value["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(&*repos.to_string_lossy())),
            "{value}"
        );
    }
}

/// The repository's ledger directory made a link to a copy elsewhere: every command
/// refuses, naming it, and none reads or writes through it (the copy is left as it was).
#[test]
fn a_ledger_directory_made_a_link_is_followed_by_no_command() {
    let env = at_green(Locks::Hand);
    let (_, value) = env.json(&["ledger", "path"]);
    let dir = PathBuf::from(value["data"]["dir"].as_str().expect("dir"));
    let copy = tempfile::tempdir().expect("copy");
    let elsewhere = copy.path().join("ledger");
    std::fs::rename(&dir, &elsewhere).expect("move");
    std::os::unix::fs::symlink(&elsewhere, &dir).expect("link");
    let listing = |at: &std::path::Path| {
        let mut names: Vec<(String, u64)> = std::fs::read_dir(at)
            .expect("list")
            .map(|e| {
                let e = e.expect("entry");
                let len = e.metadata().map(|m| m.len()).unwrap_or(0);
                (e.file_name().to_string_lossy().into_owned(), len)
            })
            .collect();
        names.sort();
        names
    };
    let before = listing(&elsewhere);
    env.write("calc.py", &format!("{CALC}{IMPL}"));
    let commands: [&[&str]; 6] = [
        &["status"],
        &["ledger", "verify"],
        &["ledger", "export"],
        &["report"],
        &["test", "tests/test_calc.py::test_add"],
        &["advance"],
    ];
    for args in commands {
        assert_refused_naming(env.json(args), "state_damaged", &dir.to_string_lossy());
    }
    assert_eq!(
        listing(&elsewhere),
        before,
        "nothing was written through the link"
    );
}

/// A directory tdd keeps beside the ledger (its reports, its leaves' records) made a link
/// out, and the ledger home made a file: refused, naming it, with nothing written
/// through the link and no ledger said to be empty.
#[test]
fn links_beside_the_ledger_and_a_home_made_a_file_are_refused() {
    let env = at_green(Locks::Hand);
    let (_, value) = env.json(&["ledger", "path"]);
    let dir = PathBuf::from(value["data"]["dir"].as_str().expect("dir"));
    let home = PathBuf::from(value["data"]["home"].as_str().expect("home"));
    let outside = tempfile::tempdir().expect("outside");
    for (own, args) in [
        ("reports", &["report"][..]),
        ("leaves", &["exec", "--", "true"][..]),
    ] {
        let at = dir.join(own);
        if at.exists() {
            std::fs::remove_dir_all(&at).expect("remove");
        }
        std::os::unix::fs::symlink(outside.path(), &at).expect("link");
        assert_refused_naming(env.json(args), "state_damaged", &at.to_string_lossy());
        std::fs::remove_file(&at).expect("unlink");
    }
    assert_eq!(
        std::fs::read_dir(outside.path()).expect("list").count(),
        0,
        "nothing was written through a link"
    );
    std::fs::rename(&home, home.with_extension("moved")).expect("move the home");
    std::fs::write(&home, "x").expect("a file");
    assert_refused_naming(
        env.json(&["ledger", "export"]),
        "state_damaged",
        &home.to_string_lossy(),
    );
}

/// Many changed files each under the limit, together over what one look hashes: refused
/// once the total is passed, so the command ends in seconds, not minutes.
#[test]
fn changed_files_too_large_together_are_refused() {
    let env = at_green(Locks::Hand);
    let before = head(&env);
    env.write("calc.py", &format!("{CALC}{IMPL}"));
    for i in 0..3 {
        std::fs::File::create(env.root().join(format!("data{i}.bin")))
            .and_then(|file| file.set_len(1000 << 20))
            .expect("a sparse file");
    }
    assert_refused_naming(env.json(&["advance"]), "file_too_large", "together");
    assert_eq!(head(&env), before);
}

/// A runner's user configuration made a named pipe before the run starts (Go's
/// `~/.config/go/env`, read by every `go` a toolchain question or a deciding run
/// starts): `run start` refuses at once, naming it, instead of waiting on the pipe or
/// leaving the toolchain unpinned.
#[test]
fn a_runner_configuration_that_is_a_named_pipe_refuses_run_start() {
    let env = crate::support::Env::new();
    env.pytest_calc(
        crate::engine_green_runs::LOCKS,
        "---\ncycles:\n  - n: 1\n    project: py\n    title: sub\n    test: tests/test_sub.py::test_sub\n    stub_expected: [calc.py]\n---\n",
    );
    env.commit_all("calc");
    let config = env.home.path().join(".config/go");
    std::fs::create_dir_all(&config).expect("config dir");
    let made = std::process::Command::new("mkfifo")
        .arg(config.join("env"))
        .status()
        .expect("mkfifo");
    assert!(made.success());
    assert_refused_naming(
        env.json(&["run", "start", "--plan", ".tdd/plan.md"]),
        "runner_config_not_regular",
        ".config/go/env",
    );
    // Once it is a file again, the run starts.
    std::fs::remove_file(config.join("env")).expect("remove the pipe");
    let (code, value) = env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    assert_eq!(code, 0, "{value}");
}

/// A program the project's `env` names by absolute path outside the repository (a
/// wrapper, a hook a runner imports), rewritten after `run start`: the deciding runs
/// would start it, and no commit holds it, so GREEN is refused, naming it.
#[test]
fn a_file_the_projects_env_names_rewritten_after_run_start_refuses_green() {
    let outside = tempfile::tempdir().expect("outside");
    let hook = outside.path().join("hook.mjs");
    std::fs::write(&hook, "// nothing yet\n").expect("hook");
    let extra = format!(
        "\n[project.py.env]\nNODE_OPTIONS = \"--import {}\"\n",
        hook.display()
    );
    let env =
        crate::integrity_gates::at_green_with(crate::support::Env::new(), Locks::Hand, &extra);
    std::fs::write(&hook, "globalThis.planted = true;\n").expect("rewrite");
    env.write("calc.py", &format!("{CALC}{IMPL}"));
    assert_refused_naming(env.json(&["advance"]), "runner_changed", "hook.mjs");
}
