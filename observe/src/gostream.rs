//! The `go test -json` event stream (test2json), plus the build errors Go
//! writes outside it.
//!
//! Go 1.24 and later report build failures inside the stream
//! (`build-output`, `build-fail`, and a package `fail` with `FailedBuild`).
//! Older Go prints `FAIL\tpkg [build failed]` on stdout and the compiler's
//! errors on stderr under a `# pkg` header; that text is the only
//! structured signal those versions give, so it is read here, and only for
//! build failures. A test that started but never ended (a panic or
//! `go test -timeout` killed its package) is an error, not a pass.

use std::collections::BTreeMap;
use std::collections::HashMap;

use serde::Deserialize;

use super::build::ParsedReport;
use super::clip::MESSAGE_KEEP;
use super::clip::clip;
use super::error::ReportError;
use super::model::CollectionError;
use super::model::Failure;
use super::model::FailureKind;
use super::model::Outcome;
use super::model::TestResult;

/// Output bytes kept per test or package while reading the stream.
const OUTPUT_KEEP: usize = 8 * 1024;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Event {
    action: String,
    #[serde(default)]
    package: Option<String>,
    #[serde(default)]
    test: Option<String>,
    #[serde(default)]
    output: Option<String>,
    #[serde(default)]
    import_path: Option<String>,
    #[serde(default)]
    failed_build: Option<String>,
}

#[derive(Debug, Default)]
struct TestState {
    output: String,
    terminal: Option<Outcome>,
}

/// What a `go test -json` stream said.
#[derive(Debug, Default)]
pub(crate) struct GoStream {
    /// Tests with outcomes and build errors per package; ids are `pkg::Test`.
    pub parsed: ParsedReport,
    /// Names printed by `go test -list`, as `pkg::Test`.
    pub listed: Vec<String>,
}

/// Parses the stdout stream and the stderr of `go test -json`.
pub(crate) fn parse(stdout: &[u8], stderr: &[u8]) -> Result<GoStream, ReportError> {
    let mut order: Vec<(String, String)> = Vec::new();
    let mut tests: HashMap<(String, String), TestState> = HashMap::new();
    let mut package_output: HashMap<String, String> = HashMap::new();
    let mut build_output: BTreeMap<String, String> = BTreeMap::new();
    let mut failed_builds: Vec<String> = Vec::new();
    let mut listed = Vec::new();
    let mut events = 0usize;
    for line in stdout.split(|b| *b == b'\n') {
        let Ok(event) = serde_json::from_slice::<Event>(line) else {
            if let Some(package) = failed_build_line(line) {
                failed_builds.push(package);
            }
            continue;
        };
        events += 1;
        let package = event.package.clone().unwrap_or_default();
        match (event.action.as_str(), &event.test) {
            ("build-output", _) => {
                let path = package_of(event.import_path.as_deref().unwrap_or(""));
                push_capped(
                    build_output.entry(path).or_default(),
                    event.output.as_deref(),
                );
            }
            ("build-fail", _) => {
                failed_builds.push(package_of(event.import_path.as_deref().unwrap_or("")));
            }
            ("output", None) => {
                let text = event.output.as_deref().unwrap_or("");
                if is_listed_name(text) {
                    listed.push(format!("{package}::{}", text.trim()));
                }
                push_capped(package_output.entry(package).or_default(), Some(text));
            }
            ("fail", None) => {
                if let Some(build) = &event.failed_build {
                    failed_builds.push(package_of(build));
                }
            }
            (action, Some(test)) => {
                let key = (package, test.clone());
                let state = tests.entry(key.clone()).or_insert_with(|| {
                    order.push(key.clone());
                    TestState::default()
                });
                match action {
                    "output" => push_capped(&mut state.output, event.output.as_deref()),
                    "pass" => state.terminal = Some(Outcome::Passed),
                    "fail" => state.terminal = Some(Outcome::Failed),
                    "skip" => state.terminal = Some(Outcome::Skipped),
                    _ => {}
                }
            }
            _ => {}
        }
    }
    if events == 0 && failed_builds.is_empty() {
        return Err(ReportError::new(
            "go test -json",
            "no test2json events in the output",
        ));
    }
    let mut parsed = ParsedReport::default();
    for key in order {
        let Some(state) = tests.remove(&key) else {
            continue;
        };
        let crash = package_output.get(&key.0).map(String::as_str).unwrap_or("");
        parsed
            .tests
            .push((format!("{}::{}", key.0, key.1), result_of(&state, crash)));
    }
    name_failing_subtests(&mut parsed.tests);
    let stderr_blocks = stderr_blocks(stderr);
    failed_builds.sort();
    failed_builds.dedup();
    for package in failed_builds {
        let message = build_output
            .get(&package)
            .or_else(|| stderr_blocks.get(&package))
            .cloned()
            .unwrap_or_else(|| String::from_utf8_lossy(stderr).into_owned());
        parsed.collection_errors.push(CollectionError {
            scope: package,
            kind: FailureKind::Compile,
            message: clip(message.trim(), MESSAGE_KEEP),
        });
    }
    Ok(GoStream { parsed, listed })
}

/// A parent test fails because a subtest did, and its own output says only
/// `--- FAIL: TestX`: its message starts by naming the failing subtests and
/// quoting the first one's message.
fn name_failing_subtests(tests: &mut [(String, TestResult)]) {
    let failures: Vec<(String, String)> = tests
        .iter()
        .filter_map(|(id, r)| r.failure.as_ref().map(|f| (id.clone(), f.message.clone())))
        .collect();
    for (id, result) in tests.iter_mut() {
        let Some(failure) = result.failure.as_mut() else {
            continue;
        };
        let prefix = format!("{id}/");
        let failing: Vec<&(String, String)> = failures
            .iter()
            .filter(|(child, _)| child.starts_with(&prefix))
            .collect();
        let Some((first, first_message)) = failing.first() else {
            continue;
        };
        let names: Vec<&str> = failing
            .iter()
            .map(|(child, _)| child.rsplit_once("::").map_or(child.as_str(), |(_, n)| n))
            .collect();
        let first_name = first.rsplit_once("::").map_or(first.as_str(), |(_, n)| n);
        failure.message = clip(
            &format!(
                "failing subtests: {}\n{first_name}:\n{first_message}\n{}",
                names.join(", "),
                failure.message
            ),
            MESSAGE_KEEP,
        );
    }
}

/// The test's output without test2json's own progress lines (`=== RUN`,
/// `=== PAUSE`, `=== CONT`, `=== NAME`), which say nothing about a failure.
fn without_progress(text: &str) -> String {
    text.lines()
        .filter(|line| !line.starts_with("=== "))
        .collect::<Vec<_>>()
        .join("\n")
}

fn result_of(state: &TestState, package_output: &str) -> TestResult {
    let (outcome, text) = match state.terminal {
        Some(outcome) => (outcome, state.output.as_str()),
        // Started, never ended: the package binary died under this test.
        None => (Outcome::Error, package_output),
    };
    let failure = matches!(outcome, Outcome::Failed | Outcome::Error).then(|| {
        let kind = if text.contains("panic: test timed out after") {
            FailureKind::Timeout
        } else if text.contains("panic:") || outcome == Outcome::Error {
            FailureKind::Exception
        } else {
            FailureKind::Assertion
        };
        Failure {
            kind,
            message: clip(without_progress(text).trim(), MESSAGE_KEEP),
        }
    });
    TestResult { outcome, failure }
}

fn push_capped(buffer: &mut String, text: Option<&str>) {
    if let Some(text) = text
        && buffer.len() < OUTPUT_KEEP
    {
        buffer.push_str(text);
    }
}

/// `m/pkg [m/pkg.test]` -> `m/pkg`.
fn package_of(import_path: &str) -> String {
    import_path
        .split(" [")
        .next()
        .unwrap_or(import_path)
        .trim()
        .to_string()
}

/// `FAIL\tm/pkg [build failed]` or `[setup failed]` -> `m/pkg`.
fn failed_build_line(line: &[u8]) -> Option<String> {
    let line = std::str::from_utf8(line).ok()?.trim_end();
    let rest = line.strip_prefix("FAIL\t")?;
    let package = rest
        .strip_suffix(" [build failed]")
        .or_else(|| rest.strip_suffix(" [setup failed]"))?;
    Some(package.trim().to_string())
}

/// A line printed by `go test -list`: one identifier of a test, benchmark,
/// fuzz target or example.
fn is_listed_name(text: &str) -> bool {
    let name = text.trim_end_matches('\n');
    ["Test", "Fuzz", "Example"]
        .iter()
        .any(|prefix| name.starts_with(prefix))
        && name.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// Splits stderr into `# pkg` blocks (older Go's build errors).
fn stderr_blocks(stderr: &[u8]) -> HashMap<String, String> {
    let text = String::from_utf8_lossy(stderr);
    let mut blocks: HashMap<String, String> = HashMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(header) = line.strip_prefix("# ") {
            let package = package_of(header);
            blocks.entry(package.clone()).or_default();
            current = Some(package);
        } else if let Some(package) = &current {
            let block = blocks.entry(package.clone()).or_default();
            block.push_str(line);
            block.push('\n');
        }
    }
    blocks
}

#[cfg(test)]
mod tests;
