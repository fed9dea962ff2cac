//! Tests the file locks do not see: a plan target outside the test files, a Rust target
//! inline in an implementation file weakened during GREEN, and a baseline-green test
//! weakened or deleted while RED adds its own test beside it.

use crate::integrity_gates::events;
use crate::support::Env;

const LIB: &str = "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n";
const STUB: &str = "\npub fn sub(_a: i32, _b: i32) -> i32 {\n    unimplemented!(\"sub\")\n}\n";
const INLINE_TEST: &str = "\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn subtracts() {\n        assert_eq!(super::sub(5, 2), 3);\n    }\n}\n";

fn inline_project() -> Env {
    let env = Env::new();
    env.write(
        "Cargo.toml",
        "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    );
    env.write("src/lib.rs", LIB);
    env.write(".gitignore", "target/\nCargo.lock\n");
    env.write(
        "tdd.toml",
        "[project.app]\nadapter = \"cargo\"\n\n[locks]\nimpl = [\"src/**\"]\ntest = [\"tests/**\"]\n",
    );
    env.write(
        ".tdd/plan.md",
        "---\ncycles:\n  - n: 1\n    project: app\n    title: subtraction\n    test: app::calc tests::subtracts\n    stub_expected: [src/lib.rs]\n---\n",
    );
    env.commit_all("calculator");
    let (code, value) = env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    assert_eq!(code, 0, "{value}");
    env.write("src/lib.rs", &format!("{LIB}{STUB}{INLINE_TEST}"));
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(value["data"]["to"], "AWAITING_IMPL", "{value}");
    env
}

#[test]
fn an_inline_rust_target_weakened_during_green_is_refused() {
    let weakenings = [
        INLINE_TEST.replace("assert_eq!(super::sub(5, 2), 3);", "let _ = 3;"),
        INLINE_TEST.replace("    #[test]\n", "    #[test]\n    #[should_panic]\n"),
    ];
    for weak in weakenings {
        let env = inline_project();
        let red = env.git(&["rev-parse", "HEAD"]);
        env.write("src/lib.rs", &format!("{LIB}{STUB}{weak}"));
        let (code, value) = env.json(&["advance"]);
        assert_eq!(code, 1, "{value}");
        assert_eq!(value["error"]["reason"], "target_edited", "{value}");
        assert_eq!(env.git(&["rev-parse", "HEAD"]), red);
        assert!(
            events(&env, "advance_refused")
                .iter()
                .any(|e| e["refusal"]["reason"] == "target_edited")
        );
    }
}

#[test]
fn an_inline_rust_target_kept_intact_goes_green() {
    let env = inline_project();
    let implemented =
        format!("{LIB}{STUB}{INLINE_TEST}").replace("unimplemented!(\"sub\")", "_a - _b");
    env.write("src/lib.rs", &implemented);
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(value["data"]["to"], "AWAITING_REFACTOR", "{value}");
}

const CALC: &str = "def add(a, b):\n    return a + b\n";
const OLD_TESTS: &str = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n";

fn pytest_project(plan_extra: &str) -> Env {
    let env = Env::new();
    env.write("calc.py", CALC);
    env.write("pytest.ini", "[pytest]\npythonpath = .\n");
    env.write(".gitignore", "__pycache__/\n.pytest_cache/\n");
    env.write("tests/test_calc.py", OLD_TESTS);
    env.write(
        "tdd.toml",
        "[project.py]\nadapter = \"pytest\"\ntest_paths = [\"tests/\"]\n\n[locks]\nimpl = [\"calc.py\"]\ntest = [\"tests/**\"]\n",
    );
    let plan = format!(
        "---\ncycles:\n  - n: 1\n    project: py\n    title: subtraction\n    test: tests/test_calc.py::test_sub\n    stub_expected: [calc.py]\n{plan_extra}---\n"
    );
    env.write(".tdd/plan.md", &plan);
    env.commit_all("calc");
    let (code, value) = env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    assert_eq!(code, 0, "{value}");
    env
}

const NEW_TEST: &str = "\n\ndef test_sub():\n    from calc import sub\n    assert sub(5, 2) == 3\n";
const STUB_PY: &str = "\n\ndef sub(a, b):\n    raise NotImplementedError(\"sub\")\n";

#[test]
fn a_baseline_test_weakened_or_deleted_during_red_is_refused() {
    let weakened = OLD_TESTS.replace("assert add(2, 3) == 5", "assert True");
    let deleted = "from calc import add\n".to_string();
    for old in [weakened, deleted] {
        let env = pytest_project("");
        env.write("tests/test_calc.py", &format!("{old}{NEW_TEST}"));
        env.write("calc.py", &format!("{CALC}{STUB_PY}"));
        let (code, value) = env.json(&["advance"]);
        assert_eq!(code, 1, "{value}");
        assert_eq!(value["error"]["reason"], "baseline_test_changed", "{value}");
        assert!(
            value["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("test_add")
                || value["error"]["hint"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("test_add"),
            "{value}"
        );
    }
}

#[test]
fn a_new_test_beside_untouched_baseline_tests_is_a_red() {
    let env = pytest_project("");
    env.write("tests/test_calc.py", &format!("{OLD_TESTS}{NEW_TEST}"));
    env.write("calc.py", &format!("{CALC}{STUB_PY}"));
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(value["data"]["to"], "AWAITING_IMPL", "{value}");
}

#[test]
fn a_declared_change_to_a_baseline_test_is_allowed() {
    let env = pytest_project("    modifies_tests: [tests/test_calc.py]\n");
    let reworded = OLD_TESTS.replace("assert add(2, 3) == 5", "assert add(3, 2) == 5");
    env.write("tests/test_calc.py", &format!("{reworded}{NEW_TEST}"));
    env.write("calc.py", &format!("{CALC}{STUB_PY}"));
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 0, "{value}");
}

#[test]
fn a_plan_target_outside_the_test_files_is_refused_with_the_fix() {
    let env = Env::new();
    env.write("calc.py", CALC);
    env.write("tests/test_calc.py", OLD_TESTS);
    env.write(
        "tdd.toml",
        "[project.py]\nadapter = \"pytest\"\ntest_paths = [\"tests/\"]\n\n[locks]\nimpl = [\"calc.py\"]\ntest = [\"tests/**\"]\n",
    );
    env.write(
        ".tdd/plan.md",
        "---\ncycles:\n  - n: 1\n    project: py\n    title: subtraction\n    test: checks/test_sub.py::test_sub\n---\n",
    );
    env.commit_all("calc");
    for args in [
        &["plan", "register", ".tdd/plan.md"][..],
        &["run", "start", "--plan", ".tdd/plan.md"][..],
    ] {
        let (code, value) = env.json(args);
        assert_eq!(code, 2, "{args:?}: {value}");
        assert_eq!(value["error"]["reason"], "plan_invalid", "{value}");
        let message = value["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("checks/test_sub.py"), "{message}");
        assert!(message.contains("[locks] test"), "{message}");
    }
}
