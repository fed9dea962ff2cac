//! Turning parsed reports and invocations into an [`Observation`].
//!
//! The rules that make an observation trustworthy live here, once, for
//! every adapter: ids are project-qualified, totals are recomputed from the
//! outcome map, and a timeout, a signal, a runner that never started or a
//! run with zero tests and no collection error sets `runner_error`.

use std::collections::BTreeMap;

use super::Project;
use super::Selection;
use super::model::CollectionError;
use super::model::Exit;
use super::model::Invocation;
use super::model::Observation;
use super::model::Outcome;
use super::model::RunnerCounts;
use super::model::TestResult;
use super::model::Totals;
use crate::config::AdapterKind;

/// What separates a repeated test name from its occurrence number.
pub(crate) const OCCURRENCE: &str = " #";

/// A title without the occurrence suffix [`Builder::merge`] gave a repeated
/// name (`adds #2` -> `adds`); unchanged when it has none.
pub(crate) fn without_occurrence(title: &str) -> &str {
    match title.rsplit_once(OCCURRENCE) {
        Some((base, n))
            if !base.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) =>
        {
            base
        }
        _ => title,
    }
}

/// What a parser read from one report, with runner-native ids.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct ParsedReport {
    /// Native id and result per test, in report order.
    pub tests: Vec<(String, TestResult)>,
    /// Files, packages or binaries that failed before their tests ran.
    pub collection_errors: Vec<CollectionError>,
    /// The runner's own counts, if the report has them.
    pub runner_counts: Option<RunnerCounts>,
    /// Records of the report that could not be read and were skipped.
    pub diagnostics: Vec<String>,
}

/// Accumulates invocations and parsed reports for one observation.
#[derive(Debug)]
pub(crate) struct Builder {
    project: String,
    adapter: AdapterKind,
    invocations: Vec<Invocation>,
    tests: BTreeMap<String, TestResult>,
    collection_errors: Vec<CollectionError>,
    runner_counts: Option<RunnerCounts>,
    runner_error: Option<String>,
    diagnostics: Vec<String>,
}

impl Builder {
    /// An empty observation of `project` through `adapter`.
    pub(crate) fn new(project: &Project, adapter: AdapterKind) -> Builder {
        Builder {
            project: project.name.clone(),
            adapter,
            invocations: Vec::new(),
            tests: BTreeMap::new(),
            collection_errors: Vec::new(),
            runner_counts: None,
            runner_error: None,
            diagnostics: Vec::new(),
        }
    }

    /// Records an invocation; a timeout, signal or spawn failure makes the
    /// whole observation a runner error.
    pub(crate) fn invocation(&mut self, invocation: Invocation) {
        let program = invocation.argv.first().cloned().unwrap_or_default();
        match &invocation.exit {
            Exit::TimedOut { after_seconds } => self.fail(format!(
                "the runner timed out after {after_seconds}s and its process group was killed"
            )),
            Exit::Signal { signal } => {
                self.fail(format!("`{program}` was killed by signal {signal}"));
            }
            Exit::NotStarted { message } => self.fail(message.clone()),
            Exit::Code { .. } => {}
        }
        self.invocations.push(invocation);
    }

    /// Adds a diagnostic line, when there is one.
    pub(crate) fn diagnose(&mut self, line: Option<String>) {
        self.diagnostics.extend(line);
    }

    /// Marks the observation as not trustworthy; the first reason is kept.
    pub(crate) fn fail(&mut self, reason: impl Into<String>) {
        if self.runner_error.is_none() {
            self.runner_error = Some(reason.into());
        }
    }

    /// Merges a parsed report, qualifying every id with the project name.
    /// Same-named tests within one report are distinct tests: the second
    /// and later occurrences get a ` #2`, ` #3`, ... suffix in report order,
    /// so each keeps an id of its own that is stable from run to run. A test
    /// reported again by a later report keeps its worst outcome.
    pub(crate) fn merge(&mut self, parsed: ParsedReport) {
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for (native, result) in parsed.tests {
            let count = seen.entry(native.clone()).or_default();
            *count += 1;
            let native = match *count {
                1 => native,
                n => format!("{native}{OCCURRENCE}{n}"),
            };
            let id = format!("{}::{native}", self.project);
            match self.tests.get(&id) {
                Some(existing) if severity(existing.outcome) >= severity(result.outcome) => {}
                _ => {
                    self.tests.insert(id, result);
                }
            }
        }
        self.collection_errors.extend(parsed.collection_errors);
        self.diagnostics.extend(parsed.diagnostics);
        if let Some(counts) = parsed.runner_counts {
            self.runner_counts = Some(add_counts(self.runner_counts, counts));
        }
    }

    /// The qualified id of a native id.
    pub(crate) fn qualify(&self, native: &str) -> String {
        format!("{}::{native}", self.project)
    }

    /// Finishes the observation. For a selection, skipped tests that were
    /// not selected are dropped: they were filtered out, not skipped. A
    /// skipped test that a partial id selected (under a pytest file or class,
    /// a Go name without its package, a cargo path without its binary) is
    /// kept.
    pub(crate) fn finish(mut self, selection: &Selection) -> Observation {
        if let Selection::Tests(ids) = selection {
            let project = self.project.clone();
            self.tests.retain(|id, result| {
                result.outcome != Outcome::Skipped
                    || ids.iter().any(|native| selects(&project, native, id))
            });
        }
        let totals = totals(&self.tests);
        let rest_only = matches!(selection, Selection::AllExcept(_));
        if totals.total == 0 && self.collection_errors.is_empty() && !rest_only {
            self.fail("no tests ran: zero tests is never green and never a valid red");
        }
        Observation {
            project: self.project,
            adapter: self.adapter,
            wall_ms: self.invocations.iter().map(|i| i.wall_ms).sum(),
            invocations: self.invocations,
            tests: self.tests,
            collection_errors: self.collection_errors,
            totals,
            runner_counts: self.runner_counts,
            runner_error: self.runner_error,
            diagnostics: self.diagnostics,
        }
    }
}

/// Whether the selected `native` id answers for the qualified test `id`:
/// the same test, a test under it, or the test it names without its package
/// or binary.
fn selects(project: &str, native: &str, id: &str) -> bool {
    let Some(rest) = id
        .strip_prefix(project)
        .and_then(|rest| rest.strip_prefix("::"))
    else {
        return false;
    };
    rest == native
        || rest
            .strip_prefix(native)
            .is_some_and(|tail| tail.starts_with("::") || tail.starts_with('['))
        || rest
            .strip_suffix(native)
            .is_some_and(|head| head.ends_with("::") || head.ends_with(' '))
}

fn severity(outcome: Outcome) -> u8 {
    match outcome {
        Outcome::Skipped => 0,
        Outcome::Passed => 1,
        Outcome::Failed => 2,
        Outcome::Error => 3,
    }
}

pub(crate) fn totals(tests: &BTreeMap<String, TestResult>) -> Totals {
    let mut totals = Totals::default();
    for result in tests.values() {
        totals.total += 1;
        match result.outcome {
            Outcome::Passed => totals.passed += 1,
            Outcome::Failed => totals.failed += 1,
            Outcome::Skipped => totals.skipped += 1,
            Outcome::Error => totals.errors += 1,
        }
    }
    totals
}

fn add_counts(previous: Option<RunnerCounts>, next: RunnerCounts) -> RunnerCounts {
    let Some(previous) = previous else {
        return next;
    };
    let add = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    };
    RunnerCounts {
        tests: add(previous.tests, next.tests),
        passed: add(previous.passed, next.passed),
        failed: add(previous.failed, next.failed),
        skipped: add(previous.skipped, next.skipped),
        errors: add(previous.errors, next.errors),
    }
}
