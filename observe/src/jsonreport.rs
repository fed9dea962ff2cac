//! The Jest-compatible JSON report, written by jest (`--json`) and by
//! vitest's `json` reporter.
//!
//! Ids are `file > describe > ... > title` with the file relative to the
//! project root. A file entry that failed with no test results is a file
//! that failed to load: a collection error of that file, never a failing
//! test.
//!
//! The report is read record by record: one malformed file entry or test
//! record is skipped with a diagnostic and never costs the others. A title
//! that is not a string (jest 22 writes `"title":[2010,6]` for a test named
//! by an array) is joined the way the runner prints it.

use std::path::Path;

use serde::Deserialize;

use super::build::ParsedReport;
use super::clip::MESSAGE_KEEP;
use super::clip::clip;
use super::clip::strip_ansi;
use super::error::ReportError;
use super::model::CollectionError;
use super::model::Failure;
use super::model::FailureKind;
use super::model::Outcome;
use super::model::RunnerCounts;
use super::model::TestResult;

/// The separator between a file, its describe blocks and the test title.
pub(crate) const SEPARATOR: &str = " > ";

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Root {
    num_total_tests: Option<u64>,
    num_passed_tests: Option<u64>,
    num_failed_tests: Option<u64>,
    num_pending_tests: Option<u64>,
    num_todo_tests: Option<u64>,
    num_runtime_error_test_suites: Option<u64>,
    test_results: Vec<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FileResult {
    name: String,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    failure_message: Option<String>,
    #[serde(default)]
    assertion_results: Vec<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Assertion {
    #[serde(default)]
    ancestor_titles: Vec<Title>,
    title: Title,
    status: String,
    #[serde(default)]
    failure_messages: Vec<String>,
    #[serde(default)]
    failure_details: Vec<serde_json::Value>,
}

/// A describe or test title: a string, or whatever value a runner wrote
/// there (an array for `it([2010, 6], ...)` in jest 22), rendered as text.
#[derive(Debug)]
struct Title(String);

impl<'de> Deserialize<'de> for Title {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Title, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        Ok(Title(title_text(&value)))
    }
}

/// The text JavaScript's `String(value)` gives: arrays joined with commas,
/// `null` and missing parts as the empty string.
fn title_text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(text) => text.clone(),
        serde_json::Value::Null => String::new(),
        serde_json::Value::Array(items) => {
            items.iter().map(title_text).collect::<Vec<_>>().join(",")
        }
        other => other.to_string(),
    }
}

/// Parses a jest or vitest JSON report; file paths are made relative to `root`.
pub(crate) fn parse(bytes: &[u8], root: &Path) -> Result<ParsedReport, ReportError> {
    let report: Root =
        serde_json::from_slice(bytes).map_err(|e| ReportError::new("jest-style JSON", e))?;
    let mut parsed = ParsedReport {
        runner_counts: Some(RunnerCounts {
            tests: report.num_total_tests,
            passed: report.num_passed_tests,
            failed: report.num_failed_tests,
            skipped: match (report.num_pending_tests, report.num_todo_tests) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
            },
            errors: report.num_runtime_error_test_suites,
        }),
        ..ParsedReport::default()
    };
    for (index, file) in report.test_results.into_iter().enumerate() {
        let file: FileResult = match serde_json::from_value(file) {
            Ok(file) => file,
            Err(err) => {
                parsed
                    .diagnostics
                    .push(format!("skipped file entry {index} of the report: {err}"));
                continue;
            }
        };
        let relative = relative_path(&file.name, root);
        let file_message = file
            .message
            .filter(|m| !m.trim().is_empty())
            .or(file.failure_message.filter(|m| !m.trim().is_empty()));
        if file.assertion_results.is_empty() && file.status.as_deref() == Some("failed") {
            parsed.collection_errors.push(CollectionError {
                scope: relative.clone(),
                kind: FailureKind::Collection,
                message: clip(
                    &strip_ansi(file_message.as_deref().unwrap_or("the file failed to load")),
                    MESSAGE_KEEP,
                ),
            });
        }
        for (index, assertion) in file.assertion_results.into_iter().enumerate() {
            let assertion: Assertion = match serde_json::from_value(assertion) {
                Ok(assertion) => assertion,
                Err(err) => {
                    parsed.diagnostics.push(format!(
                        "{relative}: skipped test record {index} of the report: {err}"
                    ));
                    continue;
                }
            };
            let mut id = relative.clone();
            for part in assertion.ancestor_titles.iter().chain([&assertion.title]) {
                id.push_str(SEPARATOR);
                id.push_str(&part.0);
            }
            parsed.tests.push((id, result_of(&assertion)));
        }
    }
    Ok(parsed)
}

fn result_of(assertion: &Assertion) -> TestResult {
    let outcome = match assertion.status.as_str() {
        "passed" => Outcome::Passed,
        "failed" => Outcome::Failed,
        _ => Outcome::Skipped,
    };
    let failure = (outcome == Outcome::Failed).then(|| {
        let message = strip_ansi(&assertion.failure_messages.join("\n"));
        Failure {
            kind: classify(&message, &assertion.failure_details),
            message: clip(&message, MESSAGE_KEEP),
        }
    });
    TestResult { outcome, failure }
}

/// Assertion when jest attached a matcher result or the error is an
/// `AssertionError` (node:assert, chai, vitest's expect); timeout when the
/// runner's per-test limit fired; an exception otherwise.
pub(crate) fn classify(message: &str, details: &[serde_json::Value]) -> FailureKind {
    if details.iter().any(|d| d.get("matcherResult").is_some()) {
        return FailureKind::Assertion;
    }
    let first = message.lines().next().unwrap_or("");
    if first.contains("Exceeded timeout of") || first.contains("Test timed out in") {
        return FailureKind::Timeout;
    }
    if first.starts_with("AssertionError") || first.starts_with("Error: expect(") {
        return FailureKind::Assertion;
    }
    FailureKind::Exception
}

/// `path` relative to `root` with `/` separators; unchanged when outside it.
pub(crate) fn relative_path(path: &str, root: &Path) -> String {
    let candidate = Path::new(path);
    if let Ok(relative) = candidate.strip_prefix(root) {
        return slashed(relative);
    }
    if let Ok(canonical) = candidate.canonicalize()
        && let Ok(relative) = canonical.strip_prefix(root)
    {
        return slashed(relative);
    }
    slashed(candidate)
}

fn slashed(path: &Path) -> String {
    path.to_string_lossy().replace('\\', "/")
}

#[cfg(test)]
mod tests;
