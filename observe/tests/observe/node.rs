use tdd_observe::FailureKind;
use tdd_observe::TargetStatus::*;
use tdd_observe::config::AdapterKind;

use crate::common::Fixture;
use crate::common::TestResult;
use crate::common::require;

const MOCHA_CALC: &str = r#"
const assert = require('assert');
describe('math', () => {
  it('adds', () => { assert.strictEqual(1 + 1, 2); });
  it('fails', () => { assert.strictEqual(1 + 1, 3); });
  it('throws', () => { throw new TypeError('boom'); });
  it.skip('skipped', () => {});
});
"#;

#[test]
fn mocha_outcomes() -> TestResult {
    require(&["node", "--version"], "install Node.js 20");
    let fx = Fixture::new(
        AdapterKind::Mocha,
        &[
            ("package.json", "{}"),
            ("test/calc.spec.js", MOCHA_CALC),
            (
                "test/broken.spec.js",
                "const x = require('./missing');\nit('x', () => {});\n",
            ),
        ],
    )?;
    fx.link_node_modules()?;
    let observation = fx.run_all()?;
    let collection = fx.collect()?;
    assert_eq!(observation.runner_error, None, "{observation:?}");
    assert_eq!(observation.collection_errors.len(), 1, "{observation:?}");
    assert_eq!(
        observation.collection_errors[0].scope,
        "test/broken.spec.js"
    );
    assert_eq!(
        observation.collection_errors[0].kind,
        FailureKind::Collection
    );
    assert!(
        collection
            .ids
            .contains("app::test/calc.spec.js > math > adds"),
        "{collection:?}"
    );
    fx.expect(
        &observation,
        &collection,
        &[
            ("test/calc.spec.js > math > adds", Passed),
            ("test/calc.spec.js > math > fails", FailedAssertion),
            ("test/calc.spec.js > math > throws", FailedError),
            ("test/calc.spec.js > math > skipped", NotRun),
            ("test/broken.spec.js > x", FailedError),
            ("test/calc.spec.js > math > nope", NotFound),
        ],
    );
    fx.expect_alone("test/calc.spec.js > math > adds", Passed)?;
    fx.expect_alone("test/calc.spec.js > math > fails", FailedAssertion)?;
    fx.expect_alone("test/broken.spec.js > x", FailedError)?;
    fx.expect_alone("test/calc.spec.js > math > nope", NotFound)?;
    fx.expect_alone("test/gone.spec.js > x", NotFound)?;
    Ok(())
}

const NODE_CALC: &str = r#"
const assert = require('node:assert');
const { describe, it, test } = require('node:test');
describe('math', () => {
  it('adds', () => { assert.strictEqual(1 + 1, 2); });
  it('fails', () => { assert.strictEqual(1 + 1, 3); });
  it('throws', () => { throw new TypeError('boom'); });
  it.skip('skipped', () => {});
});
test('top level', () => {});
"#;

#[test]
fn node_test_outcomes() -> TestResult {
    require(&["node", "--version"], "install Node.js 20");
    let fx = Fixture::new(
        AdapterKind::NodeTest,
        &[
            ("package.json", "{}"),
            ("test/calc.test.js", NODE_CALC),
            (
                "test/broken.test.js",
                "const x = require('./missing');\nrequire('node:test').test('x', () => {});\n",
            ),
        ],
    )?;
    let observation = fx.run_all()?;
    let collection = fx.collect()?;
    assert_eq!(observation.runner_error, None, "{observation:?}");
    assert_eq!(observation.collection_errors.len(), 1, "{observation:?}");
    assert_eq!(
        observation.collection_errors[0].scope,
        "test/broken.test.js"
    );
    assert!(
        collection
            .ids
            .contains("app::test/calc.test.js > math > adds"),
        "{collection:?}"
    );
    fx.expect(
        &observation,
        &collection,
        &[
            ("test/calc.test.js > math > adds", Passed),
            ("test/calc.test.js > top level", Passed),
            ("test/calc.test.js > math > fails", FailedAssertion),
            ("test/calc.test.js > math > throws", FailedError),
            ("test/calc.test.js > math > skipped", NotRun),
            ("test/broken.test.js > x", FailedError),
            ("test/calc.test.js > math > nope", NotFound),
        ],
    );
    fx.expect_alone("test/calc.test.js > math > adds", Passed)?;
    fx.expect_alone("test/calc.test.js > math > fails", FailedAssertion)?;
    fx.expect_alone("test/calc.test.js > math > nope", NotFound)?;
    Ok(())
}

const PYTEST_CALC: &str = r#"
import pytest

def test_pass():
    assert True

def test_assertion():
    assert 1 == 2

def test_exception():
    raise TypeError("boom")

@pytest.mark.skip(reason="later")
def test_skipped():
    pass
"#;

/// The generic adapter, with pytest as the JUnit-writing runner and a
/// `{target}` that the command turns into `-k NAME`.
#[test]
fn junit_command_outcomes() -> TestResult {
    require(
        &["python3", "-m", "pytest", "--version"],
        "pip install pytest",
    );
    let command = "t={target}; python3 -m pytest -q -p no:cacheprovider \
        --continue-on-collection-errors -o junit_family=xunit2 --junitxml={report} \
        ${t:+-k \"${t##*.}\"}";
    let fx = Fixture::with_config(
        AdapterKind::Junit,
        &[
            ("tests/test_calc.py", PYTEST_CALC),
            (
                "tests/test_broken.py",
                "from calc import missing\n\ndef test_x():\n    pass\n",
            ),
        ],
        |config| config.test_command = Some(command.to_string()),
    )?;
    let observation = fx.run_all()?;
    let collection = fx.collect()?;
    assert_eq!(observation.runner_error, None, "{observation:?}");
    assert_eq!(observation.collection_errors.len(), 1, "{observation:?}");
    fx.expect(
        &observation,
        &collection,
        &[
            ("tests.test_calc.test_pass", Passed),
            ("tests.test_calc.test_assertion", FailedAssertion),
            ("tests.test_calc.test_exception", FailedError),
            ("tests.test_calc.test_skipped", NotRun),
            ("tests.test_broken.test_x", FailedError),
            ("tests.test_calc.test_nope", NotFound),
        ],
    );
    fx.expect_alone("tests.test_calc.test_pass", Passed)?;
    fx.expect_alone("tests.test_calc.test_nope", NotFound)?;
    Ok(())
}

#[test]
fn junit_without_command_is_a_runner_error() -> TestResult {
    let fx = Fixture::new(AdapterKind::Junit, &[])?;
    let observation = fx.run_all()?;
    assert!(
        observation
            .runner_error
            .is_some_and(|e| e.contains("test_command"))
    );
    Ok(())
}

const DUPLICATES: &str = r#"
const assert = require('assert');
describe('math', () => {
  it('adds', () => { assert.strictEqual(1 + 1, 2); });
  it('adds', () => { assert.strictEqual(1 + 1, 3); });
});
"#;

/// Two tests of one name in one describe are two tests: the second is
/// `adds #2`, and each can be run alone.
#[test]
fn mocha_same_named_tests_stay_apart() -> TestResult {
    require(&["node", "--version"], "install Node.js 20");
    let fx = Fixture::new(
        AdapterKind::Mocha,
        &[("package.json", "{}"), ("test/dup.spec.js", DUPLICATES)],
    )?;
    fx.link_node_modules()?;
    let observation = fx.run_all()?;
    let collection = fx.collect()?;
    assert_eq!(observation.totals.total, 2, "{observation:?}");
    fx.expect(
        &observation,
        &collection,
        &[
            ("test/dup.spec.js > math > adds", Passed),
            ("test/dup.spec.js > math > adds #2", FailedAssertion),
        ],
    );
    fx.expect_alone("test/dup.spec.js > math > adds #2", FailedAssertion)?;
    Ok(())
}

/// node:test too, and a directory in `test_paths` stands for the files in it.
#[test]
fn node_test_same_named_tests_and_a_test_directory() -> TestResult {
    require(&["node", "--version"], "install Node.js 20");
    let source = format!("const {{ describe, it }} = require('node:test');\n{DUPLICATES}");
    let fx = Fixture::with_config(
        AdapterKind::NodeTest,
        &[("package.json", "{}"), ("spec/dup.js", &source)],
        |config| config.test_paths = vec!["spec/".to_string()],
    )?;
    let observation = fx.run_all()?;
    let collection = fx.collect()?;
    assert_eq!(observation.runner_error, None, "{observation:?}");
    assert_eq!(observation.totals.total, 2, "{observation:?}");
    fx.expect(
        &observation,
        &collection,
        &[
            ("spec/dup.js > math > adds", Passed),
            ("spec/dup.js > math > adds #2", FailedAssertion),
        ],
    );
    fx.expect_alone("spec/dup.js > math > adds #2", FailedAssertion)?;
    Ok(())
}

/// A failing test that, as mocha exits, rewrites mocha's report to say it passed.
const MOCHA_FORGING: &str = r#"
const assert = require('assert');
const fs = require('fs');
process.on('exit', () => {
  const arg = process.argv.find((a) => a.startsWith('output='));
  if (!arg) return;
  const file = arg.slice('output='.length);
  const report = JSON.parse(fs.readFileSync(file, 'utf8'));
  for (const t of report.tests) t.err = {};
  report.failures = [];
  report.stats.failures = 0;
  report.stats.passes = report.tests.length;
  fs.writeFileSync(file, JSON.stringify(report));
});
describe('math', () => {
  it('fails', () => { assert.strictEqual(1 + 1, 3); });
});
"#;

#[test]
fn a_mocha_report_its_exit_status_contradicts_is_not_counted() -> TestResult {
    require(&["node", "--version"], "install Node.js 20");
    let fx = Fixture::new(
        AdapterKind::Mocha,
        &[
            ("package.json", "{}"),
            ("test/forge.spec.js", MOCHA_FORGING),
        ],
    )?;
    fx.link_node_modules()?;
    let observation = fx.run_all()?;
    let error = observation.runner_error.clone().unwrap_or_default();
    assert!(
        error.contains("mocha exited 1") && error.contains("not counted"),
        "{observation:?}"
    );
    Ok(())
}
