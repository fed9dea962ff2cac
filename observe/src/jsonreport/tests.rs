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

/// jest 22 writes a test named by an array with an array title: it is read
/// as the runner prints it, and a malformed record is skipped with a
/// diagnostic while every other record is still read.
#[test]
fn one_bad_record_never_costs_the_others() -> Result<(), ReportError> {
    let parsed = parse(
        include_bytes!("../../tests/fixtures/jest-json/jest22-array-title.json"),
        Path::new("/fixture"),
    )?;
    assert_eq!(
        outcomes(&parsed),
        vec![
            ("date.test.js > parse > 2010,6", Outcome::Passed, None),
            ("date.test.js > parse > 2011,1", Outcome::Passed, None),
            ("date.test.js > parse > plain", Outcome::Passed, None),
            (
                "calc.test.js > adds",
                Outcome::Failed,
                Some(FailureKind::Assertion)
            ),
        ]
    );
    assert_eq!(parsed.diagnostics.len(), 1, "{:?}", parsed.diagnostics);
    assert!(
        parsed.diagnostics[0].starts_with("date.test.js: skipped test record 3"),
        "{:?}",
        parsed.diagnostics
    );
    Ok(())
}

/// A target in a file whose records are fine is `not_found` when it is
/// absent, even though another file of the report holds a malformed record.
#[test]
fn a_missing_target_beside_a_bad_record_is_not_found() {
    use crate::model::Collection;
    use crate::model::TargetStatus;
    use crate::parsers::Format;
    use crate::target::TargetKey;
    let bytes = include_bytes!("../../tests/fixtures/jest-json/jest22-array-title.json");
    let observation = crate::parsers::observe_bytes(Format::JestJson, bytes);
    assert_eq!(observation.runner_error, None);
    assert_eq!(observation.diagnostics.len(), 1);
    let collection = Collection {
        ids: observation.tests.keys().cloned().collect(),
        ..Collection::default()
    };
    let key = TargetKey::exact(
        "p::fixture/calc.test.js > subtracts".into(),
        vec!["fixture/calc.test.js".into()],
    );
    let verdict = crate::target::lookup(&observation, Some(&collection), &key);
    assert_eq!(verdict.status, TargetStatus::NotFound);
}
