use std::path::Path;

use super::*;
use crate::command::shell_quote;
use crate::config::ProjectConfig;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/mocha-json");

type Outcomes<'a> = Vec<(&'a str, Outcome, Option<FailureKind>)>;

fn outcomes(parsed: &ParsedReport) -> Outcomes<'_> {
    parsed
        .tests
        .iter()
        .map(|(id, r)| (id.as_str(), r.outcome, r.failure.as_ref().map(|f| f.kind)))
        .collect()
}

fn message<'a>(parsed: &'a ParsedReport, id: &str) -> &'a str {
    parsed
        .tests
        .iter()
        .find(|(test, _)| test == id)
        .and_then(|(_, r)| r.failure.as_ref())
        .map_or("", |f| f.message.as_str())
}

/// mocha 10.8.2 `--reporter json` on one file: the report lists failed
/// tests under `tests` as well as `failures`; each test is read once, in
/// the order mocha ran them.
#[test]
fn recorded_mocha_report() -> Result<(), ReportError> {
    let parsed = parse_report(
        include_bytes!("../../../tests/fixtures/mocha-json/calc.spec.json"),
        Path::new("/fixture"),
    )?;
    let file = "test/calc.spec.js";
    assert_eq!(
        outcomes(&parsed),
        vec![
            (&*format!("{file} > top level"), Outcome::Passed, None),
            (&*format!("{file} > math adds"), Outcome::Passed, None),
            (
                &*format!("{file} > math fails"),
                Outcome::Failed,
                Some(FailureKind::Assertion)
            ),
            (
                &*format!("{file} > math throws"),
                Outcome::Failed,
                Some(FailureKind::Exception)
            ),
            (&*format!("{file} > math skipped"), Outcome::Skipped, None),
            (&*format!("{file} > math later"), Outcome::Skipped, None),
            (
                &*format!("{file} > math nested deep"),
                Outcome::Passed,
                None
            ),
        ]
    );
    assert!(
        message(&parsed, &format!("{file} > math fails"))
            .starts_with("AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:")
    );
    assert!(message(&parsed, &format!("{file} > math throws")).starts_with("TypeError: boom\n"));
    assert!(parsed.collection_errors.is_empty());
    assert_eq!(
        parsed.runner_counts,
        Some(crate::model::RunnerCounts {
            tests: Some(7),
            passed: Some(3),
            failed: Some(2),
            skipped: Some(2),
            errors: None,
        })
    );
    Ok(())
}

/// A file that fails to load makes mocha exit without a report. Replays
/// the recorded runs through a `test_command`: the whole run and the broken
/// file alone print the recorded stderr and write nothing, the good file
/// writes its recorded report. The broken file must come out as one
/// collection error and the good file's tests must still be observed.
#[test]
fn recorded_load_failure_is_a_collection_error() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    std::fs::create_dir_all(dir.path().join("test"))?;
    std::fs::write(dir.path().join("test/calc.spec.js"), "")?;
    std::fs::write(dir.path().join("test/broken.spec.js"), "")?;
    let fixtures = shell_quote(FIXTURES);
    let replay = format!(
        "root=$(pwd -P); case \"x\"{{target}} in \
         xtest/calc.spec.js) sed \"s#/fixture/#$root/#g\" {fixtures}/calc.spec.json > {{report}}; exit 2 ;; \
         *) sed \"s#/fixture/#$root/#g\" {fixtures}/broken.spec.stderr >&2; exit 1 ;; esac"
    );
    let mut config: ProjectConfig = toml::from_str("adapter = \"mocha\"\ntimeout = 60")?;
    config.test_command = Some(replay);
    let project = Project::new(dir.path(), "app", config)?;
    let observation = Mocha.run(&project, &Selection::All)?;

    assert_eq!(observation.runner_error, None, "{observation:?}");
    assert_eq!(observation.invocations.len(), 3, "{observation:?}");
    assert_eq!(observation.collection_errors.len(), 1, "{observation:?}");
    let error = &observation.collection_errors[0];
    assert_eq!(error.scope, "test/broken.spec.js");
    assert_eq!(error.kind, FailureKind::Collection);
    assert!(
        error
            .message
            .contains("Exception during run: Error: Cannot find module './missing'"),
        "{}",
        error.message
    );
    let seen: Vec<(&str, Outcome)> = observation
        .tests
        .iter()
        .map(|(id, r)| (id.as_str(), r.outcome))
        .collect();
    assert_eq!(
        seen,
        vec![
            ("app::test/calc.spec.js > math adds", Outcome::Passed),
            ("app::test/calc.spec.js > math fails", Outcome::Failed),
            ("app::test/calc.spec.js > math later", Outcome::Skipped),
            ("app::test/calc.spec.js > math nested deep", Outcome::Passed),
            ("app::test/calc.spec.js > math skipped", Outcome::Skipped),
            ("app::test/calc.spec.js > math throws", Outcome::Failed),
            ("app::test/calc.spec.js > top level", Outcome::Passed),
        ]
    );
    Ok(())
}

/// One malformed record (a `fullTitle` that is not a string) is skipped with a
/// diagnostic; the report's other records are still read.
#[test]
fn a_malformed_record_is_skipped_alone() -> Result<(), Box<dyn std::error::Error>> {
    let mut report: serde_json::Value = serde_json::from_slice(include_bytes!(
        "../../../tests/fixtures/mocha-json/calc.spec.json"
    ))?;
    report["tests"][0]["fullTitle"] = serde_json::json!(5);
    let parsed = parse_report(&serde_json::to_vec(&report)?, Path::new("/fixture"))?;
    assert_eq!(parsed.tests.len(), 6, "{parsed:?}");
    assert_eq!(parsed.diagnostics.len(), 1, "{parsed:?}");
    assert!(parsed.diagnostics[0].starts_with("skipped tests record 0"));
    Ok(())
}

/// mocha 10.8.2 with the adapter's reporter: ids join the title path with
/// ` > ` like every other JavaScript adapter, and a failing hook is reported
/// under its own title.
#[test]
fn recorded_title_path_report() -> Result<(), ReportError> {
    let parsed = parse_report(
        include_bytes!("../../../tests/fixtures/mocha-json/titlepath.json"),
        Path::new("/fixture"),
    )?;
    let file = "test/calc.spec.js";
    assert_eq!(
        outcomes(&parsed),
        vec![
            (&*format!("{file} > math > adds"), Outcome::Passed, None),
            (
                &*format!("{file} > math > fails"),
                Outcome::Failed,
                Some(FailureKind::Assertion)
            ),
            (
                &*format!("{file} > math > throws"),
                Outcome::Failed,
                Some(FailureKind::Exception)
            ),
            (&*format!("{file} > math > skipped"), Outcome::Skipped, None),
            (
                &*format!("{file} > math > nested > deep"),
                Outcome::Passed,
                None
            ),
            (
                &*format!("{file} > hooks > \"before all\" hook for \"never runs\""),
                Outcome::Failed,
                Some(FailureKind::Exception)
            ),
        ]
    );
    Ok(())
}
