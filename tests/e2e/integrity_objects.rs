//! git's object database as the adversary sees it: a loose object rewritten under the
//! honest test's name, or served from an alternate, must never be what a gate judges;
//! a missing object is a refusal with a reason, never a crash.

use std::path::PathBuf;

use crate::integrity_gates::CALC;
use crate::integrity_gates::IMPL;
use crate::integrity_gates::Locks;
use crate::integrity_gates::TEST;
use crate::integrity_gates::at_green;
use crate::integrity_gates::head;
use crate::support::Env;

/// A test the same shape as the real one that passes on a marker any implementation can
/// add, and fails (on its assertion) without it: judged in its place, GREEN would pass
/// the target and the sensitivity run alike without `sub` ever existing.
const FORGED: &str =
    "import calc\n\n\ndef test_sub():\n    assert getattr(calc, \"MARK\", 0) == 1\n";

/// Where the loose object `id` lives under `objects`.
fn loose(objects: &std::path::Path, id: &str) -> PathBuf {
    objects.join(&id[..2]).join(&id[2..])
}

/// The loose object file of a blob holding `contents`, written by git in a scratch
/// repository: valid zlib and a valid header, under its own (other) id.
fn forged_object(contents: &str) -> Vec<u8> {
    let scratch = tempfile::tempdir().expect("scratch");
    tdd_testutil::git(scratch.path(), &["init", "-q"]);
    std::fs::write(scratch.path().join("forged"), contents).expect("write");
    let id = tdd_testutil::git(scratch.path(), &["hash-object", "-w", "forged"]);
    let id = id.trim();
    std::fs::read(loose(&scratch.path().join(".git/objects"), id)).expect("forged object")
}

fn put(path: &std::path::Path, bytes: &[u8]) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("dir");
    }
    if path.exists() {
        let mut perms = std::fs::metadata(path).expect("meta").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o644);
        std::fs::set_permissions(path, perms).expect("chmod");
    }
    std::fs::write(path, bytes).expect("write object");
}

/// Points the repository's object database at `alternate` as its one alternate.
fn borrow_from(objects: &std::path::Path, alternate: &std::path::Path) {
    put(
        &objects.join("info/alternates"),
        format!("{}\n", alternate.display()).as_bytes(),
    );
}

fn assert_refused(env: &Env, red: &str, (code, value): (i32, serde_json::Value), reason: &str) {
    assert_eq!(code, 1, "{value}");
    assert_eq!(value["error"]["reason"], reason, "{value}");
    assert_eq!(head(env), red, "no commit may follow a refused GREEN");
}

#[test]
fn a_rewritten_or_borrowed_object_is_never_what_a_gate_judges() {
    let env = at_green(Locks::Hand);
    let red = head(&env);
    let objects = env.root().join(".git/objects");
    let test_blob = env
        .git(&["rev-parse", "HEAD:tests/test_sub.py"])
        .trim()
        .to_string();
    let honest = std::fs::read(loose(&objects, &test_blob)).expect("the test's loose object");
    // The live test is untouched (the locks see nothing), the implementation only adds
    // the marker the forged test asks for.
    env.write("calc.py", &format!("{CALC}\nMARK = 1\n"));

    // 1. The test's loose object rewritten with other bytes under its name.
    put(&loose(&objects, &test_blob), &forged_object(FORGED));
    let outcome = env.json(&["advance"]);
    assert_refused(&env, &red, outcome.clone(), "object_damaged");
    assert_eq!(
        outcome.1["data"]["object"],
        test_blob.as_str(),
        "{}",
        outcome.1
    );

    // 2. The local copy gone and an alternate serving the forged bytes under its name.
    let alternate = tempfile::tempdir().expect("alternate");
    put(&loose(alternate.path(), &test_blob), &forged_object(FORGED));
    std::fs::remove_file(loose(&objects, &test_blob)).expect("remove");
    borrow_from(&objects, alternate.path());
    let outcome = env.json(&["advance"]);
    assert_refused(&env, &red, outcome, "object_damaged");

    // 3. Nowhere at all: a refusal that names the object, not a crash.
    std::fs::remove_file(objects.join("info/alternates")).expect("remove alternates");
    let outcome = env.json(&["advance"]);
    assert_refused(&env, &red, outcome.clone(), "object_missing");
    assert_eq!(
        outcome.1["data"]["object"],
        test_blob.as_str(),
        "{}",
        outcome.1
    );

    // 4. An alternate that holds the honest object is a repository like any other, and
    // GREEN is accepted on the behaviour, judged on the real test.
    put(&loose(alternate.path(), &test_blob), &honest);
    borrow_from(&objects, alternate.path());
    env.write("calc.py", &format!("{CALC}{IMPL}"));
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(value["data"]["to"], "AWAITING_REFACTOR", "{value}");
    assert_eq!(
        std::fs::read_to_string(env.root().join("tests/test_sub.py")).expect("test"),
        TEST
    );
}

#[test]
fn a_damaged_commit_under_head_is_refused_by_every_reader() {
    let env = at_green(Locks::Hand);
    let objects = env.root().join(".git/objects");
    let red = head(&env);
    let honest = std::fs::read(loose(&objects, &red)).expect("the commit's loose object");
    put(&loose(&objects, &red), &forged_object("not a commit\n"));
    for args in [&["ledger", "verify"][..], &["status"], &["advance"]] {
        let (code, value) = env.json(args);
        assert_eq!(code, 1, "tdd {args:?}: {value}");
        assert_eq!(
            value["error"]["reason"], "object_damaged",
            "tdd {args:?}: {value}"
        );
    }
    put(&loose(&objects, &red), &honest);
    let (code, value) = env.json(&["ledger", "verify"]);
    assert_eq!(code, 0, "{value}");
}
