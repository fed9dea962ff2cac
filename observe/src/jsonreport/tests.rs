use super::*;

type Outcomes<'a> = Vec<(&'a str, Outcome, Option<FailureKind>)>;

fn outcomes(parsed: &ParsedReport) -> Outcomes<'_> {
    parsed
        .tests
        .iter()
        .map(|(id, r)| (id.as_str(), r.outcome, r.failure.as_ref().map(|f| f.kind)))
        .collect()
}

fn first_line<'a>(parsed: &'a ParsedReport, id: &str) -> &'a str {
    parsed
        .tests
        .iter()
        .find(|(test, _)| test == id)
        .and_then(|(_, r)| r.failure.as_ref())
        .and_then(|f| f.message.lines().next())
        .unwrap_or("")
}

/// vitest 3.2.7 `--reporter=json`: the file that fails to import has no
/// assertion results and is a collection error; todo counts as skipped.
#[test]
fn recorded_vitest_report() -> Result<(), ReportError> {
    let parsed = parse(
        include_bytes!("../../tests/fixtures/vitest-json/report.json"),
        Path::new("/fixture"),
    )?;
    assert_eq!(
        outcomes(&parsed),
        vec![
            ("src/calc.test.js > math > adds", Outcome::Passed, None),
            (
                "src/calc.test.js > math > fails",
                Outcome::Failed,
                Some(FailureKind::Assertion)
            ),
            (
                "src/calc.test.js > math > throws",
                Outcome::Failed,
                Some(FailureKind::Exception)
            ),
            ("src/calc.test.js > math > skipped", Outcome::Skipped, None),
            (
                "src/calc.test.js > math > nested > deep",
                Outcome::Passed,
                None
            ),
            ("src/calc.test.js > top level", Outcome::Passed, None),
            ("src/calc.test.js > later", Outcome::Skipped, None),
        ]
    );
    assert_eq!(
        first_line(&parsed, "src/calc.test.js > math > fails"),
        "AssertionError: expected 2 to be 3 // Object.is equality"
    );
    assert_eq!(
        first_line(&parsed, "src/calc.test.js > math > throws"),
        "TypeError: boom"
    );
    assert_eq!(
        parsed.collection_errors,
        vec![CollectionError {
            scope: "src/broken.test.js".to_string(),
            kind: FailureKind::Collection,
            message:
                "Cannot find module './missing.js' imported from '/fixture/src/broken.test.js'"
                    .to_string(),
        }]
    );
    assert_eq!(
        parsed.runner_counts,
        Some(RunnerCounts {
            tests: Some(7),
            passed: Some(3),
            failed: Some(2),
            skipped: Some(2),
            errors: None,
        })
    );
    Ok(())
}

/// jest 29.7.0 `--json --testLocationInResults`: a matcher failure is an
/// assertion through `failureDetails`, a suite that failed to run is a
/// collection error, and a failed file with results is not one.
#[test]
fn recorded_jest_report() -> Result<(), ReportError> {
    let parsed = parse(
        include_bytes!("../../tests/fixtures/jest-json/report.json"),
        Path::new("/fixture"),
    )?;
    assert_eq!(
        outcomes(&parsed),
        vec![
            ("calc.test.js > math > adds", Outcome::Passed, None),
            (
                "calc.test.js > math > fails",
                Outcome::Failed,
                Some(FailureKind::Assertion)
            ),
            (
                "calc.test.js > math > throws",
                Outcome::Failed,
                Some(FailureKind::Exception)
            ),
            ("calc.test.js > math > skipped", Outcome::Skipped, None),
            ("calc.test.js > math > later", Outcome::Skipped, None),
            ("calc.test.js > math > nested > deep", Outcome::Passed, None),
            ("calc.test.js > top level", Outcome::Passed, None),
        ]
    );
    assert_eq!(
        first_line(&parsed, "calc.test.js > math > fails"),
        "Error: expect(received).toBe(expected) // Object.is equality"
    );
    assert_eq!(
        first_line(&parsed, "calc.test.js > math > throws"),
        "TypeError: boom"
    );
    assert_eq!(parsed.collection_errors.len(), 1);
    let error = &parsed.collection_errors[0];
    assert_eq!(error.scope, "broken.test.js");
    assert_eq!(error.kind, FailureKind::Collection);
    assert!(
        error.message.starts_with(
            "  ● Test suite failed to run\n\n    Cannot find module './missing' from 'broken.test.js'"
        ),
        "{}",
        error.message
    );
    assert_eq!(
        parsed.runner_counts,
        Some(RunnerCounts {
            tests: Some(7),
            passed: Some(3),
            failed: Some(2),
            skipped: Some(2),
            errors: Some(1),
        })
    );
    Ok(())
}
