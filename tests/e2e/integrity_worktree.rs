//! The engine against an agent that bends the work tree between advances: symlinks and
//! index flags on locked tests, staged deletions and renames, names that are not UTF-8.
//! None of it may get a locked change through, write outside the repository or crash.

use std::os::unix::ffi::OsStrExt;

use crate::support::Env;

const CALC: &str = "def add(a, b):\n    return a + b\n";
const TEST: &str = "from calc import sub\n\ndef test_sub():\n    assert sub(5, 2) == 3\n";
const PLAN: &str = "---\ncycles:\n  - n: 1\n    project: py\n    title: subtraction\n    test: tests/test_sub.py::test_sub\n    stub_expected: [calc.py]\n---\n";

/// A committed pytest project with its plan, before `run start`.
fn committed() -> Env {
    let env = Env::new();
    env.write("calc.py", CALC);
    env.write("old.py", "OLD = 1\n");
    env.write("helper.py", "HELP = 1\n");
    env.write("pytest.ini", "[pytest]\npythonpath = .\n");
    env.write(".gitignore", "__pycache__/\n.pytest_cache/\n");
    env.write("tdd.toml", "[project.py]\nadapter = \"pytest\"\ntest_paths = [\"tests/\"]\n\n[locks]\nimpl = [\"calc.py\", \"old.py\", \"helper.py\"]\ntest = [\"tests/**\"]\n");
    env.write(".tdd/plan.md", PLAN);
    env.commit_all("calc");
    env
}

/// A pytest project already in GREEN: the test is committed and locked.
fn in_green() -> Env {
    let env = committed();
    assert_eq!(env.json(&["run", "start", "--plan", ".tdd/plan.md"]).0, 0);
    env.write("tests/test_sub.py", TEST);
    env.write(
        "calc.py",
        &format!("{CALC}\ndef sub(a, b):\n    raise NotImplementedError\n"),
    );
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["to"], "AWAITING_IMPL");
    env
}

fn implement(env: &Env) {
    env.write(
        "calc.py",
        &format!("{CALC}\ndef sub(a, b):\n    return a - b\n"),
    );
}

#[test]
fn a_locked_test_turned_symlink_is_restored_without_touching_its_targets() {
    let env = in_green();
    let outside = tempfile::tempdir().expect("outside");
    let sentinel = outside.path().join("sentinel.py");
    std::fs::write(&sentinel, "def test_sub():\n    pass\n").expect("sentinel");
    let before = std::fs::metadata(&sentinel)
        .expect("stat")
        .modified()
        .expect("mtime");
    implement(&env);
    let test = env.root().join("tests/test_sub.py");
    std::fs::remove_file(&test).expect("rm");
    std::os::unix::fs::symlink(&sentinel, &test).expect("ln");
    std::os::unix::fs::symlink(
        env.root().join("calc.py"),
        env.root().join("tests/test_x.py"),
    )
    .expect("ln");
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["to"], "AWAITING_REFACTOR");
    assert_eq!(
        value["data"]["reverted"],
        serde_json::json!(["tests/test_sub.py", "tests/test_x.py"])
    );
    assert!(test.symlink_metadata().expect("lstat").is_file());
    assert_eq!(std::fs::read_to_string(&test).expect("test"), TEST);
    let sentinel_now = std::fs::read_to_string(&sentinel).expect("sentinel");
    assert_eq!(sentinel_now, "def test_sub():\n    pass\n");
    let after = std::fs::metadata(&sentinel)
        .expect("stat")
        .modified()
        .expect("mtime");
    assert_eq!(before, after);
    let calc = std::fs::read_to_string(env.root().join("calc.py")).expect("calc");
    assert!(calc.contains("return a - b"), "{calc}");
}

#[test]
fn an_assume_unchanged_edit_to_a_locked_test_is_seen_and_reverted() {
    let env = in_green();
    env.write("tests/test_sub.py", "def test_sub():\n    pass\n");
    env.git(&["update-index", "--assume-unchanged", "tests/test_sub.py"]);
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    // A created test whose name is not UTF-8 is removed by its exact bytes.
    let odd = env
        .root()
        .join(std::ffi::OsStr::from_bytes(b"tests/test_\xff.py"));
    std::fs::write(&odd, "def test_odd():\n    pass\n").expect("odd name");
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(exit, 1, "the weakened test does not pass the gate: {value}");
    assert_eq!(
        value["data"]["reverted"],
        serde_json::json!(["tests/test_sub.py", "\"tests/test_\\377.py\""])
    );
    assert!(odd.symlink_metadata().is_err());
    let test = std::fs::read_to_string(env.root().join("tests/test_sub.py")).expect("test");
    assert_eq!(test, TEST);
}

#[test]
fn staged_deletions_renames_and_odd_names_are_committed_not_crashed_on() {
    let env = in_green();
    implement(&env);
    env.git(&["rm", "-q", "old.py"]);
    env.git(&["mv", "helper.py", "helpers.py"]);
    std::fs::write(
        env.root()
            .join(std::ffi::OsStr::from_bytes(b"data-\xff.txt")),
        "odd",
    )
    .expect("odd name");
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["to"], "AWAITING_REFACTOR");
    let changed = env.git(&[
        "show",
        "--name-status",
        "--format=",
        "-z",
        "--no-renames",
        "HEAD",
    ]);
    let mut fields: Vec<&str> = changed.split('\0').filter(|f| !f.is_empty()).collect();
    fields.sort();
    assert_eq!(
        fields,
        vec![
            "A",
            "A",
            "D",
            "D",
            "M",
            "calc.py",
            "data-\u{fffd}.txt",
            "helper.py",
            "helpers.py",
            "old.py"
        ]
    );
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    // A staged deletion of the configuration left in place does not crash either.
    env.git(&["rm", "-q", "--cached", "pytest.ini"]);
    let (exit, value) = env.json(&["advance"]);
    assert_ne!(exit, 70, "{value}");
}

/// Makes `path` a named pipe that nobody writes.
fn fifo(path: &std::path::Path) {
    let _ = std::fs::remove_file(path);
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
}

#[test]
fn a_named_pipe_where_git_reads_a_file_stops_git_instead_of_hanging_tdd() {
    let env = committed();
    // git opens every `.gitignore` it meets with a plain `open`: on a FIFO that waits
    // for a writer that never comes. `run start` asks `git status`, which is stopped.
    let ignore = env.root().join("tests/.gitignore");
    std::fs::create_dir_all(env.root().join("tests")).expect("mkdir tests");
    fifo(&ignore);
    let (exit, value) = env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    assert_eq!(exit, 1, "{value}");
    assert_eq!(value["error"]["reason"], "git_stalled", "{value}");
    assert!(
        !env.root().join(".git/index.lock").exists(),
        "the stopped git left its lock behind"
    );
    std::fs::remove_file(&ignore).expect("remove the pipe");
    let (exit, value) = env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    assert_eq!(exit, 0, "{value}");
}

#[test]
fn named_pipes_in_the_work_tree_or_as_the_index_never_hang_an_advance() {
    let env = in_green();
    implement(&env);
    // The scan reads no `.gitignore` that is not a file, and commits no pipe.
    let ignore = env.root().join("tests/.gitignore");
    fifo(&ignore);
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["to"], "AWAITING_REFACTOR");
    let committed = env.git(&["ls-tree", "-r", "--name-only", "HEAD"]);
    assert!(!committed.contains("tests/.gitignore"), "{committed}");
    std::fs::remove_file(&ignore).expect("remove the pipe");
    // An index that is a FIFO is named, not waited on.
    let index = env.root().join(".git/index");
    fifo(&index);
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(exit, 1, "{value}");
    assert_eq!(
        value["error"]["reason"], "repository_file_not_regular",
        "{value}"
    );
    std::fs::remove_file(&index).expect("remove the pipe");
    env.git(&["reset", "-q"]);
    let (exit, value) = env.json(&["status"]);
    assert_eq!(exit, 0, "{value}");
}

#[test]
fn a_path_too_long_for_the_clean_room_is_a_refusal_that_names_it() {
    let env = Env::new();
    env.write("calc.py", CALC);
    env.write("pytest.ini", "[pytest]\npythonpath = .\n");
    env.write(
        "tdd.toml",
        "[project.py]\nadapter = \"pytest\"\ntest_paths = [\"tests/\"]\n",
    );
    env.write(".tdd/plan.md", PLAN);
    // A path that fits under the work tree, with a few bytes to spare, but not under the
    // clean room's longer prefix (the ledger home's directories come before it).
    let room = 4090 - env.root().as_os_str().len() - 1;
    let mut rel = String::new();
    while rel.len() + 201 < room {
        rel.push_str(&"d".repeat(200));
        rel.push('/');
    }
    rel.push_str(&"f".repeat(room - rel.len()));
    env.write(&rel, "data\n");
    env.commit_all("calc with a deep file");
    let (code, value) = env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    assert_eq!(code, 1, "{value}");
    assert_eq!(value["error"]["reason"], "path_too_long", "{value}");
    assert!(
        value["error"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("TDD_LEDGER_HOME")),
        "{value}"
    );
}
