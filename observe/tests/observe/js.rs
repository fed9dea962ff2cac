use tdd_observe::FailureKind;
use tdd_observe::TargetStatus::*;
use tdd_observe::config::AdapterKind;

use crate::common::Fixture;
use crate::common::TestResult;
use crate::common::require;

fn fixture(
    kind: AdapterKind,
    files: &[(&str, &str)],
) -> Result<Fixture, Box<dyn std::error::Error>> {
    require(&["node", "--version"], "install Node.js 20");
    let fx = Fixture::new(kind, files)?;
    fx.link_node_modules()?;
    Ok(fx)
}

/// Asserts the six required outcomes for a JavaScript runner whose
/// passing, failing, throwing and skipped tests live in `calc` and whose
/// broken file is `broken`.
fn check(fx: &Fixture, calc: &str, broken: &str) -> TestResult {
    let observation = fx.run_all()?;
    let collection = fx.collect()?;
    assert_eq!(collection.runner_error, None, "{collection:?}");
    assert!(
        collection
            .ids
            .contains(&format!("app::{calc} > math > adds")),
        "{collection:?}"
    );
    assert_eq!(observation.collection_errors.len(), 1, "{observation:?}");
    assert_eq!(observation.collection_errors[0].scope, broken);
    assert_eq!(
        observation.collection_errors[0].kind,
        FailureKind::Collection
    );
    fx.expect(
        &observation,
        &collection,
        &[
            (&format!("{calc} > math > adds"), Passed),
            (&format!("{calc} > math > fails"), FailedAssertion),
            (&format!("{calc} > math > throws"), FailedError),
            (&format!("{calc} > math > skipped"), NotRun),
            (&format!("{broken} > x"), FailedError),
            (&format!("{calc} > math > nope"), NotFound),
        ],
    );
    fx.expect_alone(&format!("{calc} > math > adds"), Passed)?;
    fx.expect_alone(&format!("{calc} > math > fails"), FailedAssertion)?;
    fx.expect_alone(&format!("{calc} > math > nope"), NotFound)?;
    Ok(())
}

const VITEST_CALC: &str = r#"
import { describe, it, expect } from 'vitest';
describe('math', () => {
  it('adds', () => { expect(1 + 1).toBe(2); });
  it('fails', () => { expect(1 + 1).toBe(3); });
  it('throws', () => { throw new TypeError('boom'); });
  it.skip('skipped', () => {});
});
"#;

#[test]
fn vitest_outcomes() -> TestResult {
    let fx = fixture(
        AdapterKind::Vitest,
        &[
            ("package.json", r#"{"type":"module"}"#),
            ("src/calc.test.js", VITEST_CALC),
            (
                "src/broken.test.js",
                "import { nope } from './missing.js';\nimport { it } from 'vitest';\nit('x', () => {});\n",
            ),
        ],
    )?;
    check(&fx, "src/calc.test.js", "src/broken.test.js")
}

const JEST_CALC: &str = r#"
describe('math', () => {
  test('adds', () => { expect(1 + 1).toBe(2); });
  test('fails', () => { expect(1 + 1).toBe(3); });
  test('throws', () => { throw new TypeError('boom'); });
  test.skip('skipped', () => {});
});
"#;

#[test]
fn jest_outcomes() -> TestResult {
    let fx = fixture(
        AdapterKind::Jest,
        &[
            ("package.json", "{}"),
            ("calc.test.js", JEST_CALC),
            (
                "broken.test.js",
                "const x = require('./missing');\ntest('x', () => {});\n",
            ),
        ],
    )?;
    check(&fx, "calc.test.js", "broken.test.js")
}

/// Two jest tests of one name in one describe are two tests.
#[test]
fn jest_same_named_tests_stay_apart() -> TestResult {
    let fx = fixture(
        AdapterKind::Jest,
        &[
            ("package.json", "{}"),
            (
                "dup.test.js",
                "describe('math', () => {\n  test('adds', () => { expect(1 + 1).toBe(2); });\n  test('adds', () => { expect(1 + 1).toBe(3); });\n});\n",
            ),
        ],
    )?;
    let observation = fx.run_all()?;
    let collection = fx.collect()?;
    assert_eq!(observation.totals.total, 2, "{observation:?}");
    fx.expect(
        &observation,
        &collection,
        &[
            ("dup.test.js > math > adds", Passed),
            ("dup.test.js > math > adds #2", FailedAssertion),
        ],
    );
    fx.expect_alone("dup.test.js > math > adds #2", FailedAssertion)?;
    Ok(())
}
