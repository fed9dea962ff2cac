//! The engine end to end on a real pytest project: an import error answered with a stub,
//! a standard cycle, and a pin cycle with its manual sensitivity check.

use crate::support::Env;

const CALC: &str = "def add(a, b):\n    return a + b\n";
const PLAN: &str = "---\ncycles:\n  - n: 1\n    project: py\n    title: subtraction\n    test: tests/test_sub.py::test_sub\n    stub_expected: [calc.py]\n  - n: 2\n    project: py\n    title: addition stays\n    test: tests/test_add.py::test_add\n    pin_cycle: true\n---\n";

fn project() -> Env {
    let env = Env::new();
    env.pytest_calc(crate::engine_green_runs::LOCKS, PLAN);
    env.commit_all("calc");
    env
}

#[test]
fn stub_standard_and_pin_cycles() {
    let env = project();
    assert_eq!(env.json(&["run", "start", "--plan", ".tdd/plan.md"]).0, 0);

    env.write(
        "tests/test_sub.py",
        "from calc import sub\n\ndef test_sub():\n    assert sub(5, 2) == 3\n",
    );
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(exit, 1, "{value}");
    assert_eq!(value["error"]["reason"], "import_error");
    assert_eq!(value["next_action"]["verb"], "create_stub");
    // A person reads what to do in words, pointing at where the plan lists the stub.
    let (_, status) = env.on_terminal(&["status"]);
    assert!(
        status.contains("last advance refused (import_error); next: add a stub")
            && status.contains("stub_expected")
            && !status.contains("CreateStub"),
        "{status}"
    );

    env.write(
        "calc.py",
        &format!("{CALC}\ndef sub(a, b):\n    raise NotImplementedError(\"sub\")\n"),
    );
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["red"]["kind"], "exception");
    let mut files = env
        .git(&["show", "--name-only", "--format=", "HEAD"])
        .lines()
        .map(str::to_string)
        .collect::<Vec<_>>();
    files.sort();
    assert_eq!(files, vec!["calc.py", "tests/test_sub.py"]);

    env.write(
        "calc.py",
        &format!("{CALC}\ndef sub(a, b):\n    return a - b\n"),
    );
    assert_eq!(env.json(&["advance"]).0, 0);
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["to"], "CLOSED");

    // Pin: passes on arrival, then the manual sensitivity check.
    env.write(
        "tests/test_add.py",
        "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    );
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["to"], "SENSITIVITY_REQUIRED");
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(exit, 1);
    assert_eq!(value["error"]["reason"], "sensitivity_unverified");

    let restored = std::fs::read_to_string(env.root().join("calc.py")).expect("calc");
    env.write("calc.py", &restored.replace("return a + b", "return a - b"));
    let (exit, value) = env.json(&["test", "tests/test_add.py::test_add"]);
    assert_eq!(exit, 0);
    assert_eq!(value["data"]["targets"][0]["status"], "failed_assertion");
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(exit, 1, "not restored yet: {value}");
    assert_eq!(value["error"]["reason"], "restore_mismatch");
    env.write("calc.py", &restored);
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["to"], "AWAITING_REFACTOR");
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["next_action"]["verb"], "complete");
    let log: Vec<String> = env
        .git(&["log", "--format=%s", "--reverse"])
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(
        log,
        vec![
            "init",
            "calc",
            "test: subtraction",
            "feat: subtraction",
            "test: addition stays"
        ]
    );
    // The phase commits are by whom git names in tdd's environment, and well formed.
    let by = env.git(&["log", "-3", "--format=%an <%ae> / %cn <%ce>"]);
    assert_eq!(
        by.lines().collect::<Vec<_>>(),
        vec!["Test <test@example.invalid> / Test <test@example.invalid>"; 3]
    );
    env.git(&["fsck", "--strict", "--no-dangling"]);
}

#[test]
fn a_sensitivity_check_without_a_failing_run_never_passes() {
    let env = project();
    env.write(".tdd/plan.md", "---\ncycles:\n  - n: 1\n    project: py\n    title: addition stays\n    test: tests/test_add.py::test_add\n    pin_cycle: true\n---\n");
    env.commit_all("pin plan");
    assert_eq!(env.json(&["run", "start", "--plan", ".tdd/plan.md"]).0, 0);
    env.write(
        "tests/test_add.py",
        "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    );
    assert_eq!(env.json(&["advance"]).0, 0);
    // Running the target while it passes is not evidence.
    assert_eq!(env.json(&["test", "tests/test_add.py::test_add"]).0, 0);
    let (exit, value) = env.json(&["advance", "--retry"]);
    assert_eq!(exit, 1);
    assert_eq!(value["error"]["reason"], "sensitivity_unverified");
}

#[test]
fn a_missing_target_adopts_the_one_new_test_or_asks_for_a_name() {
    let env = project();
    env.write(".tdd/plan.md", "---\ncycles:\n  - n: 1\n    project: py\n    title: subtraction\n    test: tests/test_sub.py::test_sub\n    stub_expected: [calc.py]\n  - n: 2\n    project: py\n    title: negation\n    test: tests/test_neg.py::test_neg\n    stub_expected: [calc.py]\n---\n");
    env.write("tests/test_old.py", "def test_old():\n    assert True\n");
    env.commit_all("plan and an old test");
    assert_eq!(env.json(&["run", "start", "--plan", ".tdd/plan.md"]).0, 0);
    // One new test with another name: adopted.
    env.write(
        "calc.py",
        &format!("{CALC}\ndef sub(a, b):\n    raise NotImplementedError\n"),
    );
    env.write(
        "tests/test_sub.py",
        "from calc import sub\n\ndef test_subtract():\n    assert sub(5, 2) == 3\n",
    );
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(exit, 0, "{value}");
    let (_, status) = env.json(&["status"]);
    assert_eq!(
        status["data"]["cycle"]["tests"],
        serde_json::json!(["py::tests/test_sub.py::test_subtract"])
    );
    env.write(
        "calc.py",
        &format!("{CALC}\ndef sub(a, b):\n    return a - b\n"),
    );
    assert_eq!(env.json(&["advance"]).0, 0);
    assert_eq!(env.json(&["advance"]).0, 0);
    // Two new tests: the engine asks which one; an old test cannot be named.
    env.write("calc.py", &format!("{CALC}\ndef sub(a, b):\n    return a - b\n\ndef neg(a):\n    raise NotImplementedError\n"));
    env.write("tests/test_neg.py", "from calc import neg\n\ndef test_a():\n    assert neg(1) == -1\n\ndef test_b():\n    assert neg(-2) == 2\n");
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(exit, 1, "{value}");
    assert_eq!(value["error"]["reason"], "ambiguous_target");
    assert_eq!(value["next_action"]["verb"], "name_target_test");
    let (exit, value) = env.json(&["target", "tests/test_old.py::test_old"]);
    assert_eq!(exit, 1, "{value}");
    assert_eq!(value["error"]["reason"], "target_not_new");
    let (exit, value) = env.json(&["target", "tests/test_neg.py::test_b"]);
    assert_eq!(exit, 0, "{value}");
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["to"], "AWAITING_IMPL");
}

#[test]
fn a_second_baseline_or_advance_is_refused_naming_the_holder() {
    let env = project();
    // The baseline's suite is confined: it signals through a directory the project's
    // `[sandbox] write` grants it.
    let signals = tempfile::tempdir().expect("signals");
    let started = signals.path().join("started");
    let release = signals.path().join("release");
    let config = std::fs::read_to_string(env.root().join("tdd.toml")).expect("config");
    env.write(
        "tdd.toml",
        &format!(
            "{config}\n[sandbox]\nwrite = [{:?}]\n",
            signals.path().display().to_string()
        ),
    );
    env.write(
        "tests/test_gate.py",
        &format!(
            "import os, time\n\ndef test_gate():\n    open({s:?}, 'w').close()\n    while not os.path.exists({r:?}):\n        time.sleep(0.01)\n",
            s = started.display().to_string(),
            r = release.display().to_string()
        ),
    );
    env.commit_all("a suite that waits to be released");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("tdd"))
        .args(["run", "start", "--plan", ".tdd/plan.md", "--json"])
        .current_dir(env.root())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.home.path())
        .env("TDD_LEDGER_HOME", env.ledger_home.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("first run start");
    crate::leafsupport::wait_until("the baseline to start", || started.exists());
    let (exit, value) = env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    assert_eq!(exit, 1, "{value}");
    assert_eq!(value["error"]["reason"], "baseline_in_progress");
    assert_eq!(value["data"]["pid"], child.id());
    std::fs::write(&release, "").expect("release");
    assert!(child.wait().expect("first finishes").success());
}
