//! A dishonest agent against the gates: each test drives the binary as an agent that
//! has written a failing test (RED accepted) and then tries to get GREEN accepted without
//! implementing anything. Every attack must end refused (or reverted and refused), with
//! the ledger saying so, and HEAD still at the RED commit. Each runs with the locks a
//! person writes by hand and with the ones `tdd init` writes.

use std::path::Path;
use std::path::PathBuf;

use serde_json::Value;
use tdd_engine::ledger::Ledger;

use crate::support::Env;

pub(crate) const CALC: &str = "def add(a, b):\n    return a + b\n";
pub(crate) const STUB: &str = "\ndef sub(a, b):\n    raise NotImplementedError(\"sub\")\n";
pub(crate) const IMPL: &str = "\ndef sub(a, b):\n    return a - b\n";
pub(crate) const TEST: &str =
    "from calc import sub\n\n\ndef test_sub():\n    assert sub(5, 2) == 3\n";
/// The same size as [`TEST`]: a weakened copy a cache could not tell apart by size.
const WEAK: &str = "from calc import sub\n\n\ndef test_sub():\n    assert True or 5 == 3\n";
const HAND_LOCKS: &str = "[project.py]\nadapter = \"pytest\"\ntest_paths = [\"tests/\"]\n\n[locks]\nimpl = [\"calc.py\"]\ntest = [\"tests/**\"]\n";
const FORCE_PASS: &str = "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n    outcome = yield\n    outcome.get_result().outcome = \"passed\"\n";

/// Which locks the project has.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Locks {
    Hand,
    Init,
}

const BOTH: [Locks; 2] = [Locks::Hand, Locks::Init];

/// A pytest project at RED accepted: `tests/test_sub.py::test_sub` fails on the stub.
pub(crate) fn at_green(locks: Locks) -> Env {
    at_green_in(Env::new(), locks)
}

/// The same, in `env`.
pub(crate) fn at_green_in(env: Env, locks: Locks) -> Env {
    at_green_with(env, locks, "")
}

/// The same, with `extra` appended to the hand-written `tdd.toml`.
pub(crate) fn at_green_with(env: Env, locks: Locks, extra: &str) -> Env {
    red_accepted(committed_with(env, locks, extra))
}

/// The pytest project and its plan committed in `env`, before `run start`.
pub(crate) fn committed_with(env: Env, locks: Locks, extra: &str) -> Env {
    env.write("calc.py", CALC);
    env.write("pytest.ini", "[pytest]\npythonpath = .\n");
    env.write(".gitignore", "__pycache__/\n.pytest_cache/\n");
    env.write(
        "tests/test_calc.py",
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    );
    let project = match locks {
        Locks::Hand => {
            env.write("tdd.toml", &format!("{HAND_LOCKS}{extra}"));
            "py"
        }
        Locks::Init => {
            let (code, value) = env.json(&["init"]);
            assert_eq!(code, 0, "{value}");
            "pytest"
        }
    };
    let plan = format!(
        "---\ncycles:\n  - n: 1\n    project: {project}\n    title: subtraction\n    test: tests/test_sub.py::test_sub\n    stub_expected: [calc.py]\n---\n"
    );
    env.write(".tdd/plan.md", &plan);
    env.commit_all("calc");
    env
}

/// `run start` in the committed project of `env`, then RED accepted: the test fails on
/// the stub.
fn red_accepted(env: Env) -> Env {
    let (code, value) = env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    assert_eq!(code, 0, "{value}");
    env.write("tests/test_sub.py", TEST);
    env.write("calc.py", &format!("{CALC}{STUB}"));
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(value["data"]["to"], "AWAITING_IMPL", "{value}");
    env
}

pub(crate) fn head(env: &Env) -> String {
    env.git(&["rev-parse", "HEAD"]).trim().to_string()
}

/// The payloads of every event of `kind` in the repository's ledger.
pub(crate) fn events(env: &Env, kind: &str) -> Vec<Value> {
    let (_, value) = env.json(&["ledger", "path"]);
    let database = PathBuf::from(value["data"]["database"].as_str().unwrap_or_default());
    match Ledger::open_read_only(&database) {
        Ok(Some(ledger)) => ledger
            .events_of_kind(None, kind)
            .expect("events")
            .into_iter()
            .map(|e| e.payload)
            .collect(),
        _ => Vec::new(),
    }
}

/// Asserts GREEN was refused with `reason`, HEAD did not move and the ledger recorded it.
pub(crate) fn assert_refused(env: &Env, red: &str, (code, value): (i32, Value), reason: &str) {
    assert_eq!(code, 1, "{value}");
    assert_eq!(value["error"]["reason"], reason, "{value}");
    assert_eq!(head(env), red, "no commit may follow a refused GREEN");
    let refusals = events(env, "advance_refused");
    assert!(
        refusals
            .iter()
            .any(|r| r["refusal"]["reason"] == reason && r["phase"] == "AWAITING_IMPL"),
        "the ledger records the refusal: {refusals:?}"
    );
}

fn assert_harness_reverted(env: &Env, path: &str) {
    let reverted = events(env, "locked_file_reverted");
    assert!(
        reverted.iter().any(|e| e["kind"] == "harness_changed"
            && (e["restored"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|p| p == path)
                || e["removed"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|p| p == path))),
        "{path} reverted as harness: {reverted:?}"
    );
}

#[test]
fn a_conftest_at_the_root_is_reverted_and_green_refused() {
    for locks in BOTH {
        let env = at_green(locks);
        let red = head(&env);
        env.write("conftest.py", FORCE_PASS);
        let outcome = env.json(&["advance"]);
        assert_refused(&env, &red, outcome, "target_failing");
        assert!(!env.root().join("conftest.py").exists(), "{locks:?}");
        assert_harness_reverted(&env, "conftest.py");
    }
}

#[test]
fn a_conftest_hidden_by_the_exclude_file_never_reaches_the_deciding_run() {
    for locks in BOTH {
        let env = at_green(locks);
        let red = head(&env);
        env.write(".git/info/exclude", "conftest.py\n");
        env.write("conftest.py", FORCE_PASS);
        let outcome = env.json(&["advance"]);
        assert_refused(&env, &red, outcome, "target_failing");
    }
}

#[test]
fn a_plugin_loaded_through_pytest_ini_is_reverted() {
    for locks in BOTH {
        let env = at_green(locks);
        let red = head(&env);
        env.write("evilplugin.py", FORCE_PASS);
        env.write(
            "pytest.ini",
            "[pytest]\npythonpath = .\naddopts = -p evilplugin\n",
        );
        let outcome = env.json(&["advance"]);
        assert_refused(&env, &red, outcome, "target_failing");
        assert_harness_reverted(&env, "pytest.ini");
        let ini = std::fs::read_to_string(env.root().join("pytest.ini")).expect("ini");
        assert_eq!(ini, "[pytest]\npythonpath = .\n");
    }
}

/// pytest 9 reads `pytest.toml` (and `.pytest.toml`) before `pytest.ini`: one added at
/// GREEN is harness like `pytest.ini`, removed before any run.
#[test]
fn a_plugin_loaded_through_a_pytest_toml_is_removed() {
    for name in ["pytest.toml", ".pytest.toml"] {
        let env = at_green(Locks::Hand);
        let red = head(&env);
        env.write("evilplugin.py", FORCE_PASS);
        env.write(
            name,
            "[pytest]\npythonpath = [\".\"]\naddopts = [\"-p\", \"evilplugin\"]\n",
        );
        let outcome = env.json(&["advance"]);
        assert_refused(&env, &red, outcome, "target_failing");
        assert!(!env.root().join(name).exists(), "{name}");
        assert_harness_reverted(&env, name);
    }
}

#[test]
fn a_module_shadowing_pytest_is_removed() {
    for locks in BOTH {
        let env = at_green(locks);
        let red = head(&env);
        env.write("pytest.py", "import sys\nsys.exit(0)\n");
        let outcome = env.json(&["advance"]);
        assert_refused(&env, &red, outcome, "target_failing");
        assert!(!env.root().join("pytest.py").exists());
        assert_harness_reverted(&env, "pytest.py");
    }
}

#[test]
fn tdd_toml_edited_mid_run_is_refused_as_config_changed() {
    for locks in BOTH {
        let env = at_green(locks);
        let red = head(&env);
        let config = std::fs::read_to_string(env.root().join("tdd.toml")).expect("config");
        env.write(
            "tdd.toml",
            &config.replace("tests/**", "tests/test_calc.py"),
        );
        env.write("tests/test_sub.py", WEAK);
        let (code, value) = env.json(&["advance"]);
        assert_eq!(code, 1, "{value}");
        assert_eq!(value["error"]["reason"], "config_changed", "{value}");
        assert!(
            value["error"]["hint"]
                .as_str()
                .unwrap_or_default()
                .contains("tdd.toml"),
            "{value}"
        );
        assert_eq!(head(&env), red);
    }
}

#[test]
fn a_test_command_pointed_at_a_lying_script_is_refused() {
    let env = at_green(Locks::Hand);
    env.write(
        "tdd.toml",
        &HAND_LOCKS.replace("test_paths", "test_command = \"true\"\ntest_paths"),
    );
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 1, "{value}");
    assert_eq!(value["error"]["reason"], "config_changed", "{value}");
}

/// A directory outside the repository with a plugin that forces every test to pass.
fn outside_plugin() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("evil.py"), FORCE_PASS).expect("plugin");
    dir
}

#[test]
fn the_callers_environment_does_not_reach_the_deciding_run() {
    let plugin = outside_plugin();
    let fake_bin = tempfile::tempdir().expect("bin");
    let fake = fake_bin.path().join("python3");
    std::fs::write(&fake, "#!/bin/sh\nexit 0\n").expect("fake python3");
    make_executable(&fake);
    let path = format!(
        "{}:{}",
        fake_bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let plugin_dir = plugin.path().display().to_string();
    let attacks: [&[(&str, &str)]; 4] = [
        &[("PATH", &path)],
        &[("PYTHONPATH", &plugin_dir), ("PYTEST_ADDOPTS", "-p evil")],
        &[("PYTHONPATH", &plugin_dir), ("PYTEST_PLUGINS", "evil")],
        &[("PYTHONPATH", &plugin_dir), ("PYTHONSTARTUP", "evil.py")],
    ];
    let env = at_green(Locks::Hand);
    let red = head(&env);
    for vars in attacks {
        let mut cmd = env.tdd();
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let out = cmd
            .args(["advance", "--retry", "--json"])
            .output()
            .expect("tdd");
        let outcome = (crate::support::code(&out), crate::support::envelope(&out));
        assert_refused(&env, &red, outcome, "target_failing");
    }
}

pub(crate) fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

#[test]
fn a_runner_changed_after_run_start_is_refused() {
    let wrapper_dir = tempfile::tempdir().expect("bin");
    let wrapper = wrapper_dir.path().join("python3");
    let real = String::from_utf8(
        std::process::Command::new("sh")
            .args(["-c", "command -v python3"])
            .output()
            .expect("sh")
            .stdout,
    )
    .expect("utf-8");
    std::fs::write(
        &wrapper,
        format!("#!/bin/sh\nexec {} \"$@\"\n", real.trim()),
    )
    .expect("wrapper");
    make_executable(&wrapper);
    let path = format!(
        "{}:{}",
        wrapper_dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // The run starts (and pins python3) with the wrapper first on PATH.
    let env = Env::new().with_env("PATH", &path);
    let env = {
        env.write("calc.py", CALC);
        env.write("pytest.ini", "[pytest]\npythonpath = .\n");
        env.write(".gitignore", "__pycache__/\n.pytest_cache/\n");
        env.write("tests/test_calc.py", "def test_ok():\n    assert True\n");
        env.write("tdd.toml", HAND_LOCKS);
        env.write(".tdd/plan.md", "---\ncycles:\n  - n: 1\n    project: py\n    title: subtraction\n    test: tests/test_sub.py::test_sub\n    stub_expected: [calc.py]\n---\n");
        env.commit_all("calc");
        env
    };
    assert_eq!(env.json(&["run", "start", "--plan", ".tdd/plan.md"]).0, 0);
    env.write("tests/test_sub.py", TEST);
    env.write("calc.py", &format!("{CALC}{STUB}"));
    assert_eq!(env.json(&["advance"]).0, 0);
    std::fs::write(&wrapper, "#!/bin/sh\necho '<testsuites/>'\nexit 0\n").expect("swap");
    env.write("calc.py", &format!("{CALC}{IMPL}"));
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 1, "{value}");
    assert_eq!(value["error"]["reason"], "runner_changed", "{value}");
}

#[test]
fn index_flags_and_filters_do_not_hide_a_weakened_test() {
    type Hide = fn(&Env);
    let hides: [(&str, Hide); 3] = [
        ("skip-worktree", |env| {
            env.git(&["update-index", "--skip-worktree", "tests/test_sub.py"]);
        }),
        ("assume-unchanged", |env| {
            env.git(&["update-index", "--assume-unchanged", "tests/test_sub.py"]);
        }),
        ("clean filter", |env| {
            let original = env.root().join(".git/original.py");
            std::fs::write(&original, TEST).expect("copy");
            env.write(".git/info/attributes", "tests/test_sub.py filter=hide\n");
            let clean = format!("cat {}", original.display());
            env.git(&["config", "filter.hide.clean", &clean]);
        }),
    ];
    for (name, hide) in hides {
        let env = at_green(Locks::Hand);
        let red = head(&env);
        hide(&env);
        env.write("tests/test_sub.py", WEAK);
        let (code, value) = env.json(&["advance"]);
        assert_eq!(code, 1, "{name}: {value}");
        assert_eq!(
            value["error"]["reason"], "target_failing",
            "{name}: {value}"
        );
        assert_eq!(head(&env), red, "{name}");
        let test = std::fs::read_to_string(env.root().join("tests/test_sub.py")).expect("test");
        assert_eq!(
            test, TEST,
            "{name}: the weakened test is reverted by its bytes"
        );
        if name != "clean filter" {
            let listed = env.git(&["ls-files", "-v", "tests/test_sub.py"]);
            assert!(listed.starts_with("H "), "{name}: flag cleared: {listed}");
            assert_eq!(events(&env, "index_flags_cleared").len(), 1, "{name}");
        }
    }
}

#[test]
fn a_clean_filter_in_the_users_git_config_does_not_hide_a_staged_weakened_test() {
    let env = at_green(Locks::Hand);
    let red = head(&env);
    // The driver lives in the global config, which the scan reads without asking git.
    let original = env.root().join(".git/original.py");
    std::fs::write(&original, TEST).expect("copy");
    env.write(".git/info/attributes", "tests/test_sub.py filter=hide\n");
    let global = format!("[filter \"hide\"]\n\tclean = cat {}\n", original.display());
    std::fs::write(env.home.path().join(".gitconfig"), global).expect("global config");
    env.write("tests/test_sub.py", WEAK);
    env.git(&["add", "tests/test_sub.py"]);
    assert_eq!(
        env.git(&["status", "--porcelain", "tests/test_sub.py"]),
        "",
        "git sees the original"
    );
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 1, "{value}");
    assert_eq!(value["error"]["reason"], "target_failing", "{value}");
    assert_eq!(head(&env), red);
    let test = std::fs::read_to_string(env.root().join("tests/test_sub.py")).expect("test");
    assert_eq!(test, TEST, "the weakened test is reverted by its bytes");
}

#[test]
fn a_forged_bytecode_cache_is_never_read() {
    let env = at_green(Locks::Hand);
    let red = head(&env);
    // The agent runs pytest on a weakened test so the assertion-rewrite cache holds the
    // weak code, puts the original bytes back, and stamps the cache with their hash.
    env.write("tests/test_sub.py", WEAK);
    let python = |args: &[&str]| {
        std::process::Command::new("python3")
            .args(args)
            .current_dir(env.root())
            .env_remove("PYTHONDONTWRITEBYTECODE")
            .output()
            .expect("python3")
    };
    let pytest = [
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/test_sub.py",
    ];
    assert!(python(&pytest).status.success());
    env.write("tests/test_sub.py", TEST);
    let forge = "import glob, importlib.util\n\
        h = importlib.util.source_hash(open('tests/test_sub.py', 'rb').read())\n\
        for p in glob.glob('tests/__pycache__/test_sub*.pyc'):\n\
        \x20   b = bytearray(open(p, 'rb').read()); b[8:16] = h[:8]; open(p, 'wb').write(b)\n";
    assert!(python(&["-c", forge]).status.success());
    let fooled = python(&pytest);
    assert!(
        fooled.status.success(),
        "the forged cache fools pytest in the live tree: {fooled:?}"
    );
    let outcome = env.json(&["advance"]);
    assert_refused(&env, &red, outcome, "target_failing");
}

#[test]
fn a_background_process_swapping_the_test_changes_nothing() {
    let env = at_green(Locks::Hand);
    let red = head(&env);
    let weak = env.root().join(".git/weak.py");
    let strong = env.root().join(".git/strong.py");
    std::fs::write(&weak, WEAK).expect("weak");
    std::fs::write(&strong, TEST).expect("strong");
    let test = env.root().join("tests/test_sub.py");
    let script = format!(
        "i=0; while [ $i -lt 100000 ]; do cp {w} {t}; cp {s} {t}; i=$((i+1)); done",
        w = weak.display(),
        s = strong.display(),
        t = test.display()
    );
    let mut swapper = std::process::Command::new("sh")
        .args(["-c", &script])
        .spawn()
        .expect("swapper");
    let outcome = env.json(&["advance", "--retry"]);
    let _ = swapper.kill();
    let _ = swapper.wait();
    assert_refused(&env, &red, outcome, "target_failing");
}

#[test]
fn green_without_an_implementation_change_is_recorded_and_refused() {
    let env = at_green(Locks::Hand);
    let red = head(&env);
    let outcome = env.json(&["advance"]);
    assert_refused(&env, &red, outcome, "target_failing");
    assert_eq!(events(&env, "green_without_change").len(), 1);
}

#[test]
fn an_implementation_that_is_a_symlink_out_of_the_repository_is_refused() {
    for relative in [false, true] {
        let env = at_green(Locks::Hand);
        let red = head(&env);
        let outside = tempfile::tempdir().expect("outside");
        let real = outside.path().join("calc.py");
        std::fs::write(&real, format!("{CALC}{IMPL}")).expect("outside implementation");
        let target = if relative {
            let depth = env.root().components().count() - 1;
            let up = "../".repeat(depth);
            PathBuf::from(format!(
                "{up}{}",
                real.display().to_string().trim_start_matches('/')
            ))
        } else {
            real.clone()
        };
        let calc = env.root().join("calc.py");
        std::fs::remove_file(&calc).expect("remove calc.py");
        std::os::unix::fs::symlink(&target, &calc).expect("link calc.py out of the repository");
        let outcome = env.json(&["advance"]);
        assert_refused(&env, &red, outcome, "link_outside_tree");
        // Changing the outside file afterwards cannot matter: nothing was accepted.
        assert_eq!(
            std::fs::read_link(&calc).expect("link kept"),
            target,
            "the agent's link is left as it was"
        );
    }
}

/// The implementation committed as a link into `.venv`, a dependency directory the
/// clean room links from the live tree (ignored, so in no commit): it leads out of the
/// commit as surely as a link to `/tmp`, and GREEN is refused.
#[test]
fn a_link_into_a_dependency_directory_is_refused() {
    let env = committed_with(Env::new(), Locks::Hand, "");
    env.write(".git/info/exclude", ".venv/\n");
    env.write(".venv/calc_real.py", &format!("{CALC}{IMPL}"));
    let env = red_accepted(env);
    let red = head(&env);
    let calc = env.root().join("calc.py");
    std::fs::remove_file(&calc).expect("remove calc.py");
    std::os::unix::fs::symlink(".venv/calc_real.py", &calc).expect("link calc.py into .venv");
    let outcome = env.json(&["advance"]);
    assert_refused(&env, &red, outcome, "link_outside_tree");
}

/// Runs `target` in a fresh clone of `rev` with a clean environment; true when it passed.
fn oracle(env: &Env, rev: &str, target: &str) -> bool {
    let clone = tempfile::tempdir().expect("clone");
    let dir = clone.path().join("repo");
    let out = std::process::Command::new("git")
        .args(["clone", "-q"])
        .arg(env.root())
        .arg(&dir)
        .output()
        .expect("clone");
    assert!(out.status.success(), "{out:?}");
    env_clear_git(&dir, &["checkout", "-q", rev]);
    std::process::Command::new("python3")
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", target])
        .current_dir(&dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("pytest")
        .status
        .success()
}

fn env_clear_git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git");
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn an_accepted_green_holds_in_a_fresh_clone_and_fails_without_the_implementation() {
    for locks in BOTH {
        let env = at_green(locks);
        let red = head(&env);
        env.write("calc.py", &format!("{CALC}{IMPL}"));
        let (code, value) = env.json(&["advance"]);
        assert_eq!(code, 0, "{value}");
        assert_eq!(value["data"]["to"], "AWAITING_REFACTOR");
        let green = head(&env);
        assert_ne!(green, red);
        assert!(
            oracle(&env, &green, "tests/test_sub.py::test_sub"),
            "{locks:?}"
        );
        assert!(
            !oracle(&env, &red, "tests/test_sub.py::test_sub"),
            "{locks:?}"
        );
    }
}

#[test]
fn a_sensitivity_run_where_the_target_cannot_load_proves_nothing() {
    let env = Env::new();
    env.write("calc.py", CALC);
    env.write("pytest.ini", "[pytest]\npythonpath = .\n");
    env.write(".gitignore", "__pycache__/\n.pytest_cache/\n");
    env.write("tests/test_calc.py", "def test_ok():\n    assert True\n");
    env.write("tdd.toml", HAND_LOCKS);
    env.write(".tdd/plan.md", "---\ncycles:\n  - n: 1\n    project: py\n    title: subtraction\n    test: tests/test_sub.py::test_sub\n    stub_expected: [calc.py]\n---\n");
    env.commit_all("calc");
    assert_eq!(env.json(&["run", "start", "--plan", ".tdd/plan.md"]).0, 0);
    // RED leans on a module git does not see, so the RED commit cannot load the test.
    env.write(".git/info/exclude", "helpers.py\n");
    env.write("helpers.py", "def five():\n    return 5\n");
    env.write(
        "tests/test_sub.py",
        "from helpers import five\nfrom calc import sub\n\n\ndef test_sub():\n    assert sub(five(), 2) == 3\n",
    );
    env.write("calc.py", &format!("{CALC}{STUB}"));
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 0, "{value}");
    let red = head(&env);
    env.write(".git/info/exclude", "");
    env.write("calc.py", &format!("{CALC}{IMPL}"));
    let outcome = env.json(&["advance"]);
    assert_refused(&env, &red, outcome, "sensitivity_inconclusive");
}

#[test]
fn a_cargo_manifest_that_redirects_the_test_target_is_reverted() {
    use crate::engine_cargo::LIB;
    use crate::engine_cargo::SUB_TEST;
    let env = crate::engine_cargo::project();
    assert_eq!(env.json(&["run", "start", "--plan", ".tdd/plan.md"]).0, 0);
    env.write("tests/sub.rs", SUB_TEST);
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 0, "{value}");
    let red = head(&env);
    // GREEN: no implementation; the manifest points the `sub` test target at a file of
    // the agent's that passes.
    env.write(
        "Cargo.toml",
        "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\nautotests = false\n\n[[test]]\nname = \"sub\"\npath = \"src/fake_sub.rs\"\n\n[workspace]\n",
    );
    env.write("src/fake_sub.rs", "#[test]\nfn subtracts() {}\n");
    env.write("src/lib.rs", &format!("{LIB}// nothing\n"));
    let outcome = env.json(&["advance"]);
    assert_refused(&env, &red, outcome, "target_failing");
    assert_harness_reverted(&env, "Cargo.toml");
}

#[test]
fn a_package_json_import_map_redirect_is_reverted() {
    let env = Env::new();
    let package = "{\n  \"type\": \"module\",\n  \"imports\": { \"#calc\": \"./calc.js\" }\n}\n";
    env.write("package.json", package);
    env.write("calc.js", "export const add = (a, b) => a + b;\n");
    env.write(
        "test/add.test.js",
        "import test from 'node:test';\nimport assert from 'node:assert';\nimport { add } from '#calc';\ntest('adds', () => assert.strictEqual(add(2, 3), 5));\n",
    );
    env.write("tdd.toml", "[project.js]\nadapter = \"node-test\"\ntest_paths = [\"test/\"]\n\n[locks]\nimpl = [\"calc.js\"]\ntest = [\"test/**\"]\n");
    env.write(".tdd/plan.md", "---\ncycles:\n  - n: 1\n    project: js\n    title: subtraction\n    test: test/sub.test.js > subtracts\n    stub_expected: [calc.js]\n---\n");
    env.commit_all("calc");
    let (code, value) = env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    assert_eq!(code, 0, "{value}");
    env.write(
        "test/sub.test.js",
        "import test from 'node:test';\nimport assert from 'node:assert';\nimport { sub } from '#calc';\ntest('subtracts', () => assert.strictEqual(sub(5, 2), 3));\n",
    );
    env.write(
        "calc.js",
        "export const add = (a, b) => a + b;\nexport const sub = () => { throw new Error('not implemented'); };\n",
    );
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(value["data"]["to"], "AWAITING_IMPL", "{value}");
    let red = head(&env);
    env.write(
        "fake.js",
        "export const add = (a, b) => a + b;\nexport const sub = () => 3;\n",
    );
    env.write("package.json", &package.replace("./calc.js", "./fake.js"));
    let outcome = env.json(&["advance"]);
    assert_refused(&env, &red, outcome, "target_failing");
    assert_harness_reverted(&env, "package.json");
    let now = std::fs::read_to_string(env.root().join("package.json")).expect("package.json");
    assert_eq!(now, package);
}

#[test]
fn a_commit_made_or_removed_by_hand_is_never_what_a_gate_judges() {
    let env = at_green(Locks::Hand);
    let red = head(&env);
    // A weakened test committed by hand, the implementation missing: that commit would
    // be the base of the candidate and of the sensitivity tree.
    env.write("tests/test_sub.py", WEAK);
    env.git(&["commit", "-qam", "tidy the test"]);
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 1, "{value}");
    assert_eq!(value["error"]["reason"], "head_moved", "{value}");
    let hint = value["error"]["hint"]
        .as_str()
        .unwrap_or_default()
        .to_string()
        + value["error"]["message"].as_str().unwrap_or_default();
    assert!(
        hint.contains(&format!("git reset --soft {}", &red[..12])),
        "{value}"
    );
    // Put back as told, the weakened test is an edit of a locked test: reverted, and
    // GREEN is accepted on the real behaviour only.
    env.git(&["reset", "-q", "--soft", &red]);
    env.write("calc.py", &format!("{CALC}{IMPL}"));
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(value["data"]["to"], "AWAITING_REFACTOR");
    assert_eq!(
        std::fs::read_to_string(env.root().join("tests/test_sub.py")).expect("test"),
        TEST
    );
    let green = head(&env);
    // The honest GREEN commit reset away and one with the behaviour broken in its
    // place: the REFACTOR close is refused and the ledger says the commit is gone.
    env.git(&["reset", "-q", "--soft", "HEAD~1"]);
    env.write(
        "calc.py",
        &format!("{CALC}\ndef sub(a, b):\n    return a + b\n"),
    );
    env.git(&["commit", "-qam", "feat: subtraction"]);
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 1, "{value}");
    assert_eq!(value["error"]["reason"], "head_moved", "{value}");
    let (code, verified) = env.json(&["ledger", "verify"]);
    assert_eq!(code, 1, "{verified}");
    assert_eq!(
        verified["error"]["reason"], "phase_commit_missing",
        "{verified}"
    );
    assert_eq!(
        verified["data"]["phase_commits_off_branch"][0]["commit"], green,
        "{verified}"
    );
    // Back on the recorded commit, the run goes on and verifies.
    env.git(&["reset", "-q", "--hard", &green]);
    assert_eq!(env.json(&["ledger", "verify"]).0, 0);
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(value["data"]["to"], "CLOSED");
}

/// A `python3` that runs no test and writes a report saying the target passed.
#[test]
fn a_commit_step_the_index_cannot_follow_leaves_head_where_the_ledger_says() {
    let env = at_green(Locks::Hand);
    let red = head(&env);
    // A lock left in `.git` by a git that died: the index cannot be written, so the
    // commit step fails after the commit was made.
    env.write(".git/index.lock", "");
    env.write("calc.py", &format!("{CALC}{IMPL}"));
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 1, "{value}");
    assert_eq!(
        head(&env),
        red,
        "HEAD is back where the ledger says: {value}"
    );
    // The lock gone, the same GREEN is accepted.
    std::fs::remove_file(env.root().join(".git/index.lock")).expect("unlock");
    let (code, value) = env.json(&["advance", "--retry"]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(value["data"]["to"], "AWAITING_REFACTOR", "{value}");
}

#[test]
fn git_starts_no_program_the_repositorys_configuration_names() {
    // Each program leaves a mark where it ran: none may run for tdd.
    let marks = tempfile::tempdir().expect("marks");
    let mark = |name: &str| {
        let script = marks.path().join(name);
        std::fs::write(
            &script,
            format!("#!/bin/sh\ntouch {}.ran\ncat\n", script.display()),
        )
        .expect("script");
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod");
        script.display().to_string()
    };
    let env = committed_with(Env::new(), Locks::Hand, "");
    // A file-system monitor and a clean filter on every Python file, which `git status`
    // asks at run start for a file whose stat it cannot trust (touched, same bytes);
    // hooks git runs as refs move and the index is written.
    env.git(&["config", "core.fsmonitor", &mark("fsmonitor")]);
    env.git(&["config", "filter.ev.clean", &mark("clean")]);
    env.write(".git/info/attributes", "*.py filter=ev\n");
    let touched = std::fs::File::options()
        .write(true)
        .open(env.root().join("calc.py"))
        .expect("calc.py");
    touched
        .set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5))
        .expect("touch");
    for hook in ["reference-transaction", "post-index-change"] {
        let at = env.root().join(".git/hooks").join(hook);
        std::fs::create_dir_all(at.parent().expect("hooks")).expect("hooks dir");
        std::fs::copy(mark(hook), &at).expect("hook");
    }
    let env = red_accepted(env);
    env.write("calc.py", &format!("{CALC}{IMPL}"));
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(value["data"]["to"], "AWAITING_REFACTOR", "{value}");
    let ran: Vec<String> = std::fs::read_dir(marks.path())
        .expect("marks")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".ran"))
        .collect();
    assert!(ran.is_empty(), "programs git ran for tdd: {ran:?}");
}

const FAKE_PYTHON: &str = "#!/bin/sh\nfor arg in \"$@\"; do case \"$arg\" in --junitxml=*) report=\"${arg#--junitxml=}\" ;; esac; done\nprintf '<testsuite><testcase classname=\"tests.test_sub\" name=\"test_sub\" file=\"tests/test_sub.py\"/></testsuite>' > \"$report\"\n";

#[test]
fn a_relative_path_entry_never_runs_a_committed_runner() {
    let path = format!("bin:{}", std::env::var("PATH").unwrap_or_default());
    let env = at_green_in(Env::new().with_env("PATH", &path), Locks::Hand);
    let red = head(&env);
    let pinned = events(&env, "run_started");
    let captured = pinned
        .iter()
        .find_map(|e| e["pinned_env"]["vars"]["PATH"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(!captured.split(':').any(|e| e == "bin"), "{captured}");
    assert!(
        pinned
            .iter()
            .any(|e| e["pinned_env"]["dropped_path"][0] == "bin"),
        "{pinned:?}"
    );
    // GREEN brings a `bin/python3` that reports the target passing, and no
    // implementation: the deciding run in the candidate's checkout never starts it.
    env.write("bin/python3", FAKE_PYTHON);
    let made = std::process::Command::new("chmod")
        .args(["755", "bin/python3"])
        .current_dir(env.root())
        .status()
        .expect("chmod");
    assert!(made.success());
    let outcome = env.json(&["advance"]);
    assert_refused(&env, &red, outcome, "target_failing");
}

#[test]
fn a_runner_configuration_planted_above_the_clean_room_refuses_the_deciding_run() {
    let env = at_green(Locks::Hand);
    let red = head(&env);
    let (_, located) = env.json(&["ledger", "path"]);
    let dir = PathBuf::from(located["data"]["dir"].as_str().unwrap_or_default());
    // A pytest configuration in a directory above the clean room's checkout: in no
    // commit, and read by a runner there when the project has none of its own.
    let planted = dir.join("cleanroom/pytest.ini");
    std::fs::create_dir_all(dir.join("cleanroom")).expect("cleanroom");
    std::fs::write(&planted, "[pytest]\naddopts = -p no:cacheprovider\n").expect("plant");
    env.write("calc.py", &format!("{CALC}{IMPL}"));
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 1, "{value}");
    assert_eq!(value["error"]["reason"], "runner_changed", "{value}");
    assert!(
        value["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("cleanroom/pytest.ini") && m.contains("absent")),
        "{value}"
    );
    assert_eq!(head(&env), red);
    // Removed again, the same GREEN is accepted.
    std::fs::remove_file(&planted).expect("remove");
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(value["data"]["to"], "AWAITING_REFACTOR", "{value}");
}

#[test]
fn a_clean_room_replaced_by_links_and_pipes_is_rebuilt_and_nothing_outside_is_touched() {
    let env = at_green(Locks::Hand);
    env.write("calc.py", &format!("{CALC}{IMPL}"));
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 0, "{value}");
    let (_, located) = env.json(&["ledger", "path"]);
    let dir = PathBuf::from(located["data"]["dir"].as_str().unwrap_or_default());
    let room = std::fs::read_dir(dir.join("cleanroom"))
        .expect("a clean room")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("tree").exists())
        .expect("the clean room of this work tree");
    // Outside: a directory and a file a reset must never empty or write.
    let outside = tempfile::tempdir().expect("outside");
    std::fs::write(outside.path().join("keep.txt"), "mine\n").expect("keep");
    std::fs::write(outside.path().join("other.txt"), "mine too\n").expect("other");
    // The checkout and the build directory become links to it, the manifest a pipe, and
    // the manifest's temporary file a link to a file outside.
    std::fs::remove_dir_all(room.join("tree")).expect("rm tree");
    std::os::unix::fs::symlink(outside.path(), room.join("tree")).expect("link tree");
    let _ = std::fs::remove_dir_all(room.join("build"));
    std::os::unix::fs::symlink(outside.path(), room.join("build")).expect("link build");
    let _ = std::fs::remove_file(room.join("manifest"));
    let made = std::process::Command::new("mkfifo")
        .arg(room.join("manifest"))
        .status()
        .expect("mkfifo");
    assert!(made.success());
    std::os::unix::fs::symlink(outside.path().join("other.txt"), room.join("manifest.tmp"))
        .expect("link tmp");
    // The REFACTOR close is judged in the clean room: rebuilt, and accepted.
    let out = env
        .tdd()
        .args(["advance", "--json"])
        .timeout(std::time::Duration::from_secs(300))
        .output()
        .expect("tdd runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("\"to\":\"CLOSED\""), "{text}");
    let left: Vec<String> = std::fs::read_dir(outside.path())
        .expect("outside")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let mut left = left;
    left.sort();
    assert_eq!(left, ["keep.txt", "other.txt"]);
    assert_eq!(
        std::fs::read_to_string(outside.path().join("other.txt")).expect("other"),
        "mine too\n"
    );
    assert!(room.join("tree").symlink_metadata().expect("tree").is_dir());
    assert!(
        room.join("build")
            .symlink_metadata()
            .expect("build")
            .is_dir()
    );
}

/// Makes `calc.sub` subtract once `calc.py` holds the marker `# sub comes later`, from
/// an import hook: so an implementation change that adds only the marker passes the
/// target, and the sensitivity run (the marker gone) fails it.
pub(crate) const EVIL_HOOK: &str = r#"import importlib.machinery, sys
class Finder:
    def find_spec(self, name, path, target=None):
        if name != 'calc':
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None:
            return None
        run = spec.loader.exec_module
        def exec_module(module):
            run(module)
            with open(module.__file__) as source:
                if '# sub comes later' in source.read():
                    module.sub = lambda a, b: a - b
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, Finder())
"#;

/// Asserts GREEN was refused as `runner_changed`, and HEAD did not move.
pub(crate) fn assert_runner_changed(env: &Env, red: &str, (code, value): (i32, &Value)) {
    assert_eq!(code, 1, "{value}");
    assert_eq!(value["error"]["reason"], "runner_changed", "{value}");
    assert_eq!(head(env), red, "no commit may follow a refused GREEN");
}

/// A virtual environment outside the repository that sees the host's pytest, with its
/// `site-packages`.
fn venv_with_pytest() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().expect("venv dir");
    let venv = dir.path().join("venv");
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .expect("python3 -m venv");
    assert!(made.success());
    let ask = |code: &str| {
        let out = std::process::Command::new(venv.join("bin/python3"))
            .args(["-c", code])
            .output()
            .expect("venv python");
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    };
    let site = ask("import sysconfig; print(sysconfig.get_paths()['purelib'])");
    let host = String::from_utf8(
        std::process::Command::new("python3")
            .args([
                "-c",
                "import os, pytest; print(os.path.dirname(os.path.dirname(pytest.__file__)))",
            ])
            .output()
            .expect("host python")
            .stdout,
    )
    .expect("utf-8");
    std::fs::write(site.join("host_pytest.pth"), host.trim()).expect("pth");
    (dir, venv, site)
}

#[test]
fn an_import_hook_planted_in_the_interpreters_site_packages_refuses_green() {
    let (_dir, env, site) = site_on_path();
    let env = at_green_in(env, Locks::Hand);
    let red = head(&env);
    // After run start: a `.pth` that runs at every interpreter start, and the hook it
    // imports, in no commit; GREEN changes a comment and implements nothing.
    std::fs::write(site.join("evilhook.py"), EVIL_HOOK).expect("hook");
    std::fs::write(site.join("zz_evil.pth"), "import evilhook\n").expect("pth");
    env.write("calc.py", &format!("{CALC}{STUB}# sub comes later\n"));
    let (code, value) = env.json(&["advance"]);
    let message = value["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("evilhook.py") && message.contains("site-packages"),
        "the refusal names the planted file and where: {value}"
    );
    assert_runner_changed(&env, &red, (code, &value));
}

#[test]
fn a_virtual_environments_configuration_rewritten_after_run_start_refuses_green() {
    // `pyvenv.cfg` says at every start which library the environment loads and whether
    // the base interpreter's site-packages are on its path: rewritten in place (same
    // file, same names in its directory), it is a change all the same.
    let (_dir, env, site) = site_on_path();
    let venv = site.ancestors().nth(3).expect("venv").to_path_buf();
    let cfg = venv.join("pyvenv.cfg");
    let env = at_green_in(env, Locks::Hand);
    let red = head(&env);
    let was = std::fs::read_to_string(&cfg).expect("pyvenv.cfg");
    let shared = was.replace(
        "include-system-site-packages = false",
        "include-system-site-packages = true",
    );
    assert_ne!(shared, was, "{was}");
    std::fs::write(&cfg, shared).expect("rewrite in place");
    env.write("calc.py", &format!("{CALC}{IMPL}"));
    let (code, value) = env.json(&["advance"]);
    let message = value["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("pyvenv.cfg"),
        "the refusal names it: {value}"
    );
    assert_runner_changed(&env, &red, (code, &value));
}

#[test]
fn a_hook_written_where_a_link_in_site_packages_leads_refuses_green() {
    // Before run start, site-packages holds `sitecustomize.py` as a link to an empty
    // file outside every directory the interpreter searches; during GREEN the hook is
    // written there: the link is as it was, what it leads to is not.
    let (dir, env, site) = site_on_path();
    let outside = dir.path().join("elsewhere");
    std::fs::create_dir_all(&outside).expect("elsewhere");
    std::fs::write(outside.join("sc.py"), "").expect("empty");
    std::os::unix::fs::symlink(outside.join("sc.py"), site.join("sitecustomize.py")).expect("link");
    let env = at_green_in(env, Locks::Hand);
    let red = head(&env);
    std::fs::write(outside.join("sc.py"), EVIL_HOOK).expect("hook");
    env.write("calc.py", &format!("{CALC}{STUB}# sub comes later\n"));
    let (code, value) = env.json(&["advance"]);
    let message = value["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("sc.py"), "the refusal names it: {value}");
    assert_runner_changed(&env, &red, (code, &value));
}

#[test]
fn an_installation_that_passes_the_test_without_the_implementation_is_named_first() {
    let (_dir, env, site) = site_on_path();
    let env = at_green_in(env, Locks::Hand);
    let red = head(&env);
    // After run start: a hook that supplies `sub` to every import of calc, so the test
    // passes without the implementation too. The sensitivity run refuses that, but the
    // refusal names the installation, not the test.
    let always = EVIL_HOOK.replace("'# sub comes later' in source.read()", "True");
    std::fs::write(site.join("evilhook.py"), always).expect("hook");
    std::fs::write(site.join("zz_evil.pth"), "import evilhook\n").expect("pth");
    env.write("calc.py", &format!("{CALC}{IMPL}"));
    let (code, value) = env.json(&["advance"]);
    assert_runner_changed(&env, &red, (code, &value));
}

#[test]
fn a_module_planted_in_an_ignored_dependency_directory_refuses_green() {
    let env = Env::new();
    env.write(".git/info/exclude", ".venv/\n");
    env.write(".venv/pyvenv.cfg", "home = /nonexistent\n");
    let env = at_green_in(env, Locks::Hand);
    let red = head(&env);
    env.write(
        ".venv/lib/site-packages/calc_helper.py",
        "sub = lambda a, b: a - b\n",
    );
    env.write("calc.py", &format!("{CALC}{IMPL}"));
    let (code, value) = env.json(&["advance"]);
    let message = value["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(".venv/lib") && message.contains("dependency directory"),
        "{value}"
    );
    assert_runner_changed(&env, &red, (code, &value));
}

#[test]
fn a_module_planted_in_the_interpreter_a_dependency_venv_was_made_from_refuses_green() {
    // `uv run` starts the project's `.venv`, whose standard library is the base
    // interpreter's, outside the work tree: `pyvenv.cfg` names it, and it is pinned.
    let base = tempfile::tempdir().expect("base");
    let lib = base.path().join("lib/python3.11");
    std::fs::create_dir_all(base.path().join("bin")).expect("bin");
    std::fs::create_dir_all(&lib).expect("lib");
    std::fs::write(lib.join("os.py"), "# the standard library\n").expect("os.py");
    let env = Env::new();
    env.write(".git/info/exclude", ".venv/\n");
    env.write(
        ".venv/pyvenv.cfg",
        &format!(
            "home = {}\ninclude-system-site-packages = false\nversion_info = 3.11.7\n",
            base.path().join("bin").display()
        ),
    );
    let env = at_green_in(env, Locks::Hand);
    let red = head(&env);
    std::fs::write(lib.join("sitecustomize.py"), "import evilhook\n").expect("plant");
    env.write("calc.py", &format!("{CALC}{IMPL}"));
    let (code, value) = env.json(&["advance"]);
    let message = value["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("sitecustomize.py") && message.contains(".venv"),
        "the refusal names the planted file and the environment it serves: {value}"
    );
    assert_runner_changed(&env, &red, (code, &value));
}

#[test]
fn a_shim_switched_to_another_interpreter_after_run_start_is_never_followed() {
    // A version-manager shim: `python3` runs whatever interpreter a file names.
    let host = String::from_utf8(
        std::process::Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .expect("host python")
            .stdout,
    )
    .expect("utf-8");
    let (_shims, target, path) = crate::support::switchable_shim("python3", &host);
    let env = at_green_in(Env::new().with_env("PATH", &path), Locks::Hand);
    let red = head(&env);
    // After run start the shim is switched to an interpreter whose site-packages
    // supplies the behaviour: the shim's own bytes never change.
    let (_dir, venv, site) = venv_with_pytest();
    std::fs::write(site.join("evilhook.py"), EVIL_HOOK).expect("hook");
    std::fs::write(site.join("zz_evil.pth"), "import evilhook\n").expect("pth");
    std::fs::write(&target, venv.join("bin/python3").display().to_string()).expect("switch");
    env.write("calc.py", &format!("{CALC}{STUB}# sub comes later\n"));
    let outcome = env.json(&["advance"]);
    assert_refused(&env, &red, outcome, "target_failing");
}

/// An environment whose `PATH` starts with a virtual environment that sees the host's
/// pytest, and its site-packages.
fn site_on_path() -> (tempfile::TempDir, Env, PathBuf) {
    let (dir, venv, site) = venv_with_pytest();
    let path = format!(
        "{}:{}",
        venv.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    (dir, Env::new().with_env("PATH", &path), site)
}

/// The same, with where a module planted in its site-packages goes.
fn with_venv_on_path() -> (tempfile::TempDir, Env, PathBuf) {
    let (dir, env, site) = site_on_path();
    (dir, env, site.join("left_behind.py"))
}

/// Unconfined, so that code run by the deciding run can reach the installation.
const UNCONFINED: &str = "\n[sandbox]\nenabled = false\n";

/// Asserts GREEN, after code run by its deciding runs planted `planted` in
/// site-packages and took it away, was refused as a changed installation.
fn assert_planted_and_refused(env: &Env, red: &str, planted: &Path) {
    let (code, value) = env.json(&["advance"]);
    assert!(!planted.exists());
    assert_runner_changed(env, red, (code, &value));
    assert!(
        value["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("site-packages")),
        "{value}"
    );
}

/// Asserts GREEN was refused as a changed installation after a `conftest.py`, committed
/// before run start, ran `hook` in its deciding runs: Python defining a pytest hook that,
/// in the clean room only (`os.getcwd()` is not `LIVE`), may plant `PLANTED` in
/// site-packages and take it away again.
fn assert_refused_after_conftest_planted(hook: &str) {
    let (_dir, env, planted) = with_venv_on_path();
    let live = env.root().canonicalize().expect("work tree");
    env.write(
        "conftest.py",
        &format!(
            "import os\n\nLIVE = {live:?}\nPLANTED = {p:?}\n\n\n{hook}",
            live = live.display().to_string(),
            p = planted.display().to_string()
        ),
    );
    let env = at_green_with(env, Locks::Hand, UNCONFINED);
    let red = head(&env);
    env.write("calc.py", &format!("{CALC}{IMPL}"));
    assert_planted_and_refused(&env, &red, &planted);
}

#[test]
fn an_installation_written_after_the_check_beside_the_first_runs_refuses_the_commit() {
    // Only with the stub: in the sensitivity run, the last, while or after the walk
    // reaches what it plants in.
    assert_refused_after_conftest_planted(
        "def pytest_sessionstart(session):\n    if os.path.realpath(os.getcwd()) == LIVE:\n        return\n    import calc\n    try:\n        calc.sub(5, 2)\n    except NotImplementedError:\n        open(PLANTED, 'w').close()\n        os.remove(PLANTED)\n",
    );
}

#[test]
fn an_installation_written_only_while_greens_targets_run_alone_refuses_the_commit() {
    // Only with the implementation and only in the run of the target alone, before
    // anything of the installations is walked: the suite runs without the target, the
    // sensitivity run with the stub.
    assert_refused_after_conftest_planted(
        "def pytest_collection_modifyitems(session, config, items):\n    if os.path.realpath(os.getcwd()) == LIVE:\n        return\n    if [item.name for item in items] != ['test_sub']:\n        return\n    import calc\n    try:\n        calc.sub(5, 2)\n    except NotImplementedError:\n        return\n    open(PLANTED, 'w').close()\n    os.remove(PLANTED)\n",
    );
}

#[test]
fn an_installation_written_while_the_deciding_runs_run_refuses_the_commit() {
    let (_dir, env, planted) = with_venv_on_path();
    let env = at_green_with(env, Locks::Hand, UNCONFINED);
    let red = head(&env);
    // The implementation is honest, and plants a module in site-packages as it is
    // imported, then takes it away: only the change times are left behind.
    env.write(
        "calc.py",
        &format!(
            "import os\nopen({p:?}, 'w').close()\nos.remove({p:?})\n{CALC}{IMPL}",
            p = planted.display().to_string()
        ),
    );
    assert_planted_and_refused(&env, &red, &planted);
}
