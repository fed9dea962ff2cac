//! Cargo's `--message-format json` build messages and libtest's JSON
//! events, as read by the cargo adapter.
//!
//! Binary ids follow cargo-nextest: `pkg` for a library's unit tests,
//! `pkg::name` for `tests/name.rs`, `pkg::bin/name`, `pkg::bench/name`,
//! `pkg::example/name`. A compile error in a library or binary target
//! breaks every test binary of its package, so its scope is the package
//! name; one in an integration test breaks only that binary.

use std::path::PathBuf;

use serde::Deserialize;

use super::build::ParsedReport;
use super::clip::MESSAGE_KEEP;
use super::clip::clip;
use super::clip::without_backtrace;
use super::error::ReportError;
use super::model::CollectionError;
use super::model::Failure;
use super::model::FailureKind;
use super::model::Outcome;
use super::model::TestResult;

#[derive(Debug, Deserialize)]
struct Message {
    reason: String,
    #[serde(default)]
    package_id: Option<String>,
    #[serde(default)]
    manifest_path: Option<PathBuf>,
    #[serde(default)]
    target: Option<Target>,
    #[serde(default)]
    executable: Option<PathBuf>,
    #[serde(default)]
    message: Option<Diagnostic>,
}

#[derive(Debug, Deserialize)]
struct Target {
    kind: Vec<String>,
    name: String,
}

#[derive(Debug, Deserialize)]
struct Diagnostic {
    level: String,
    #[serde(default)]
    rendered: Option<String>,
    #[serde(default)]
    message: String,
}

/// A built test executable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TestBinary {
    /// The nextest-style binary id.
    pub binary_id: String,
    /// The package name.
    pub package: String,
    /// The executable to run.
    pub executable: PathBuf,
    /// The package directory, where `cargo test` runs the binary.
    pub package_dir: Option<PathBuf>,
}

/// What a `cargo test --no-run --message-format json` build produced.
#[derive(Debug, Default)]
pub(crate) struct Build {
    /// Test executables that compiled.
    pub binaries: Vec<TestBinary>,
    /// Compile errors per package or binary id.
    pub errors: Vec<CollectionError>,
}

/// Parses cargo's JSON build messages.
pub(crate) fn parse_build(stdout: &[u8]) -> Result<Build, ReportError> {
    let mut build = Build::default();
    let mut messages = 0usize;
    for line in stdout
        .split(|b| *b == b'\n')
        .filter(|l| l.first() == Some(&b'{'))
    {
        let Ok(message) = serde_json::from_slice::<Message>(line) else {
            continue;
        };
        messages += 1;
        let (Some(package_id), Some(target)) = (&message.package_id, &message.target) else {
            continue;
        };
        let package = package_name(package_id);
        let binary_id = binary_id(&package, target);
        match message.reason.as_str() {
            "compiler-artifact" => {
                if let Some(executable) = message.executable {
                    build.binaries.push(TestBinary {
                        binary_id,
                        package,
                        executable,
                        package_dir: message
                            .manifest_path
                            .and_then(|p| p.parent().map(|d| d.to_path_buf())),
                    });
                }
            }
            "compiler-message" => {
                let Some(diagnostic) = message.message.filter(|d| d.level == "error") else {
                    continue;
                };
                let breaks_package = target
                    .kind
                    .iter()
                    .any(|k| k != "test" && k != "bench" && k != "example");
                let scope = if breaks_package { package } else { binary_id };
                let text = diagnostic.rendered.unwrap_or(diagnostic.message);
                match build.errors.iter_mut().find(|e| e.scope == scope) {
                    // cargo reports a library's errors once for the library
                    // and again for its test harness: keep them once.
                    Some(existing) if existing.message.contains(text.as_str()) => {}
                    Some(existing) => {
                        existing.message =
                            clip(&format!("{}\n{text}", existing.message), MESSAGE_KEEP);
                    }
                    None => build.errors.push(CollectionError {
                        scope,
                        kind: FailureKind::Compile,
                        message: clip(&text, MESSAGE_KEEP),
                    }),
                }
            }
            _ => {}
        }
    }
    if messages == 0 {
        return Err(ReportError::new(
            "cargo JSON messages",
            "no build messages in the output",
        ));
    }
    Ok(build)
}

/// The package name in a package id spec (`path+file:///p/name#1.0`,
/// `registry+...#name@1.0`, or the older `name 1.0 (source)`).
pub(crate) fn package_name(package_id: &str) -> String {
    if let Some((url, fragment)) = package_id.rsplit_once('#') {
        if let Some((name, _version)) = fragment.split_once('@') {
            return name.to_string();
        }
        return url
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or(url)
            .to_string();
    }
    package_id
        .split_whitespace()
        .next()
        .unwrap_or(package_id)
        .to_string()
}

fn binary_id(package: &str, target: &Target) -> String {
    let kind = target.kind.first().map(String::as_str).unwrap_or("");
    match kind {
        "test" => format!("{package}::{}", target.name),
        "bin" => format!("{package}::bin/{}", target.name),
        "bench" => format!("{package}::bench/{}", target.name),
        "example" => format!("{package}::example/{}", target.name),
        _ => package.to_string(),
    }
}

#[derive(Debug, Deserialize)]
struct LibtestEvent {
    #[serde(rename = "type")]
    kind: String,
    event: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    stdout: Option<String>,
    #[serde(default)]
    passed: Option<u64>,
    #[serde(default)]
    failed: Option<u64>,
    #[serde(default)]
    ignored: Option<u64>,
}

/// Parses one test binary's libtest JSON events; ids are `binary_id name`.
pub(crate) fn parse_libtest(stdout: &[u8], binary_id: &str) -> Result<ParsedReport, ReportError> {
    let mut parsed = ParsedReport::default();
    let mut finished_suite = false;
    let mut started: Vec<String> = Vec::new();
    for line in stdout
        .split(|b| *b == b'\n')
        .filter(|l| l.first() == Some(&b'{'))
    {
        let Ok(event) = serde_json::from_slice::<LibtestEvent>(line) else {
            continue;
        };
        match (event.kind.as_str(), event.event.as_str(), event.name) {
            ("suite", "ok" | "failed", _) => {
                finished_suite = true;
                parsed.runner_counts = Some(super::model::RunnerCounts {
                    tests: Some(
                        event.passed.unwrap_or(0)
                            + event.failed.unwrap_or(0)
                            + event.ignored.unwrap_or(0),
                    ),
                    passed: event.passed,
                    failed: event.failed,
                    skipped: event.ignored,
                    errors: None,
                });
            }
            ("test", "started", Some(name)) => started.push(name),
            ("test", outcome, Some(name)) => {
                started.retain(|n| *n != name);
                let outcome = match outcome {
                    "ok" => Outcome::Passed,
                    "ignored" => Outcome::Skipped,
                    _ => Outcome::Failed,
                };
                let text = event.stdout.unwrap_or_default();
                parsed
                    .tests
                    .push((format!("{binary_id} {name}"), rust_result(outcome, &text)));
            }
            _ => {}
        }
    }
    if !finished_suite && parsed.tests.is_empty() && started.is_empty() {
        return Err(ReportError::new(
            "libtest JSON",
            "no suite events in the output",
        ));
    }
    // A test that started and never finished was running when the binary died.
    for name in started {
        let failure = Failure {
            kind: FailureKind::Exception,
            message: "the test binary exited while this test was running".into(),
        };
        parsed.tests.push((
            format!("{binary_id} {name}"),
            TestResult {
                outcome: Outcome::Error,
                failure: Some(failure),
            },
        ));
    }
    Ok(parsed)
}

/// A Rust test fails by panicking; `assert!`-family panics are assertions.
pub(crate) fn rust_result(outcome: Outcome, text: &str) -> TestResult {
    let failure = matches!(outcome, Outcome::Failed | Outcome::Error).then(|| {
        let kind = if text.contains("assertion failed")
            || text.contains("` failed") && text.contains("assertion `")
        {
            FailureKind::Assertion
        } else if text.contains("timed out") || text.contains("TIMEOUT") {
            FailureKind::Timeout
        } else {
            FailureKind::Exception
        };
        Failure {
            kind,
            message: clip(without_backtrace(text).trim(), MESSAGE_KEEP),
        }
    });
    TestResult { outcome, failure }
}

/// Parses `--list --format terse` output (`name: test` lines).
pub(crate) fn parse_list(stdout: &[u8], binary_id: &str) -> Vec<String> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|line| line.strip_suffix(": test"))
        .map(|name| format!("{binary_id} {name}"))
        .collect()
}

#[cfg(test)]
mod tests;
