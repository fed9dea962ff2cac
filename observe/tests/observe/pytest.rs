use tdd_observe::FailureKind;
use tdd_observe::TargetStatus::*;
use tdd_observe::config::AdapterKind;

use crate::common::Fixture;
use crate::common::TestResult;
use crate::common::require;
use tdd_observe::observe_target;

const TESTS: &str = r#"
import pytest

def test_pass():
    assert 1 + 1 == 2

def test_assertion():
    assert 1 + 1 == 3

def test_exception():
    raise TypeError("boom")

@pytest.mark.skip(reason="later")
def test_skipped():
    pass

@pytest.mark.parametrize("x", [1, "a b"])
def test_param(x):
    assert x != "a b"

class TestGroup:
    def test_method(self):
        pass
"#;

fn fixture() -> Result<Fixture, Box<dyn std::error::Error>> {
    require(
        &["python3", "-m", "pytest", "--version"],
        "pip install pytest",
    );
    Fixture::new(
        AdapterKind::Pytest,
        &[
            ("tests/test_calc.py", TESTS),
            (
                "tests/test_broken.py",
                "from calc import missing\n\ndef test_x():\n    pass\n",
            ),
        ],
    )
}

#[test]
fn pytest_outcomes_of_a_whole_run() -> TestResult {
    let fx = fixture()?;
    let observation = fx.run_all()?;
    let collection = fx.collect()?;
    assert_eq!(observation.runner_error, None);
    assert!(
        collection
            .ids
            .contains("app::tests/test_calc.py::test_param[a b]")
    );
    assert!(
        collection
            .ids
            .contains("app::tests/test_calc.py::TestGroup::test_method")
    );
    assert_eq!(collection.errors.len(), 1);
    assert_eq!(collection.errors[0].scope, "tests/test_broken.py");
    let broken = &observation.collection_errors;
    assert_eq!(broken.len(), 1, "{broken:?}");
    assert_eq!(broken[0].kind, FailureKind::Collection);
    fx.expect(
        &observation,
        &collection,
        &[
            ("tests/test_calc.py::test_pass", Passed),
            ("tests/test_calc.py::TestGroup::test_method", Passed),
            ("tests/test_calc.py::test_param[1]", Passed),
            ("tests/test_calc.py::test_param[a b]", FailedAssertion),
            ("tests/test_calc.py::test_assertion", FailedAssertion),
            ("tests/test_calc.py::test_exception", FailedError),
            ("tests/test_calc.py::test_skipped", NotRun),
            ("tests/test_broken.py::test_x", FailedError),
            ("tests/test_calc.py::test_nope", NotFound),
        ],
    );
    assert!(!observation.is_green());
    assert_eq!(observation.totals.total, 7);
    assert_eq!(observation.runner_counts.and_then(|c| c.tests), Some(8));
    assert_eq!(observation.invocations.len(), 1);
    assert!(observation.invocations[0].report_sha256.is_some());
    Ok(())
}

#[test]
fn pytest_single_targets() -> TestResult {
    let fx = fixture()?;
    fx.expect_alone("tests/test_calc.py::test_pass", Passed)?;
    fx.expect_alone("app::tests/test_calc.py::test_assertion", FailedAssertion)?;
    fx.expect_alone("tests/test_calc.py::test_exception", FailedError)?;
    fx.expect_alone("tests/test_calc.py::test_skipped", NotRun)?;
    fx.expect_alone("tests/test_broken.py::test_x", FailedError)?;
    fx.expect_alone("tests/test_calc.py::test_nope", NotFound)?;
    fx.expect_alone("tests/test_missing_file.py::test_nope", NotFound)?;
    Ok(())
}

#[test]
fn pytest_timeout_is_a_runner_error() -> TestResult {
    require(
        &["python3", "-m", "pytest", "--version"],
        "pip install pytest",
    );
    let fx = Fixture::with_config(
        AdapterKind::Pytest,
        &[(
            "test_hang.py",
            "import time\n\ndef test_hang():\n    time.sleep(300)\n",
        )],
        |config| config.timeout = 1,
    )?;
    fx.expect_alone("test_hang.py::test_hang", RunnerError)?;
    Ok(())
}

#[test]
fn pytest_missing_runner_is_a_runner_error() -> TestResult {
    let fx = Fixture::with_config(AdapterKind::Pytest, &[("test_a.py", "")], |config| {
        config.test_command = Some("tdd-no-such-pytest {target}".into());
    })?;
    let observation = fx.run_all()?;
    assert!(observation.runner_error.is_some());
    Ok(())
}

#[test]
fn pytest_empty_project_is_never_green() -> TestResult {
    let fx = fixture()?;
    std::fs::remove_dir_all(fx.dir.path().join("tests"))?;
    let observation = fx.run_all()?;
    assert!(observation.runner_error.is_some());
    assert!(!observation.is_green());
    Ok(())
}

/// A file, a class or a parametrized test without its parameters stands for
/// every test under it, and the verdict names the tests it matched.
#[test]
fn pytest_partial_targets() -> TestResult {
    let fx = fixture()?;
    let alone = |native: &str| observe_target(fx.adapter.as_ref(), &fx.project, native);
    let (_, class) = alone("tests/test_calc.py::TestGroup")?;
    assert_eq!(class.status, Passed, "{class:?}");
    assert_eq!(
        class.matched,
        vec!["app::tests/test_calc.py::TestGroup::test_method"]
    );
    let (_, params) = alone("tests/test_calc.py::test_param")?;
    assert_eq!(params.status, FailedAssertion, "{params:?}");
    assert_eq!(params.matched.len(), 2, "{params:?}");
    let (_, file) = alone("tests/test_calc.py")?;
    assert_eq!(file.status, FailedError, "{file:?}");
    assert_eq!(file.matched.len(), 7, "{file:?}");
    assert!(
        file.detail
            .as_deref()
            .is_some_and(|d| d.starts_with("app::tests/test_calc.py::test_exception: ")),
        "{file:?}"
    );
    fx.expect_alone("tests/test_broken.py", FailedError)?;
    fx.expect_alone("tests/test_nothing_here.py", NotFound)?;
    fx.expect_alone("tests/test_calc.py::TestAbsent", NotFound)?;
    Ok(())
}

/// The engine sets nothing of its own in a test's environment beyond what the
/// adapter needs: a project's tests see no `NO_COLOR` unless the project has it.
#[test]
fn pytest_tests_see_the_projects_environment() -> TestResult {
    require(
        &["python3", "-m", "pytest", "--version"],
        "pip install pytest",
    );
    let mut fx = Fixture::new(
        AdapterKind::Pytest,
        &[(
            "test_env.py",
            "import os\n\ndef test_no_color_is_unset():\n    assert 'NO_COLOR' not in os.environ\n",
        )],
    )?;
    let pinned = tdd_observe::hermetic::PinnedEnv::capture(["python3"]);
    fx.project = fx.project.clone().hermetic(std::sync::Arc::new(pinned));
    fx.expect_alone("test_env.py::test_no_color_is_unset", Passed)?;
    Ok(())
}
