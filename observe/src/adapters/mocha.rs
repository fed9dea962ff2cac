//! mocha, observed through its `json` reporter written to an engine-owned
//! file (`--reporter-option output=FILE`).
//!
//! Ids are `file > describe > ... > title`, like every other JavaScript
//! adapter: the report is written by a small reporter of ours that adds each
//! test's title path to the json reporter's fields (mocha's json reporter
//! joins the titles with spaces and cannot keep them apart). A report
//! without title paths (a user's `test_command` with its own reporter) falls
//! back to `file > full title`. A file that fails to load makes
//! mocha abort before writing any report; the adapter then runs each test
//! file on its own, so the file that failed is a collection error and the
//! other files are still observed.

use std::collections::HashMap;

use serde::Deserialize;

use super::discover;
use super::file_of;
use super::name_alternatives;
use super::test_globs;
use super::titles_of;
use crate::Adapter;
use crate::Project;
use crate::Selection;
use crate::build::Builder;
use crate::build::ParsedReport;
use crate::clip::MESSAGE_KEEP;
use crate::clip::clip;
use crate::clip::clip_bytes;
use crate::command::Substitutions;
use crate::command::user_command;
use crate::config::AdapterKind;
use crate::error::ObserveError;
use crate::error::ReportError;
use crate::exec::Job;
use crate::exec::ReportAt;
use crate::exec::Scratch;
use crate::exec::execute;
use crate::jsonreport::relative_path;
use crate::model::Collection;
use crate::model::CollectionError;
use crate::model::Failure;
use crate::model::FailureKind;
use crate::model::Observation;
use crate::model::Outcome;
use crate::model::TestResult;
use crate::target::TargetKey;

/// The mocha adapter.
#[derive(Debug)]
pub(crate) struct Mocha;

/// mocha's default spec: `./test/*.{js,cjs,mjs}`.
const DEFAULT_GLOBS: &[&str] = &["test/*.{js,cjs,mjs}"];

#[derive(Debug, Deserialize)]
struct Report {
    stats: Stats,
    tests: Vec<serde_json::Value>,
    #[serde(default)]
    pending: Vec<serde_json::Value>,
    #[serde(default)]
    failures: Vec<serde_json::Value>,
}

/// The records of one list of the report; a malformed one is skipped with a
/// diagnostic.
fn records(list: &str, values: Vec<serde_json::Value>, diagnostics: &mut Vec<String>) -> Vec<Test> {
    values
        .into_iter()
        .enumerate()
        .filter_map(|(index, value)| match serde_json::from_value(value) {
            Ok(test) => Some(test),
            Err(err) => {
                diagnostics.push(format!(
                    "skipped {list} record {index} of the report: {err}"
                ));
                None
            }
        })
        .collect()
}

#[derive(Debug, Deserialize)]
struct Stats {
    tests: Option<u64>,
    passes: Option<u64>,
    pending: Option<u64>,
    failures: Option<u64>,
}

/// A mocha reporter, written to the scratch directory and passed to
/// `--reporter`, that writes the json reporter's report plus each test's
/// `titlePath`: mocha's own json reporter only joins the titles with
/// spaces, so describe blocks could not be told apart. It needs nothing but
/// node's `fs` and the runner's events.
const REPORTER: &str = r#"'use strict';
const fs = require('fs');
function clean(test) {
  const err = test.err || {};
  const plain = {};
  for (const key of ['message', 'stack', 'name', 'code']) {
    if (typeof err[key] === 'string') plain[key] = err[key];
  }
  return {
    title: test.title,
    titlePath: typeof test.titlePath === 'function' ? test.titlePath() : undefined,
    fullTitle: test.fullTitle(),
    file: test.file,
    err: plain,
  };
}
function TddReporter(runner, options) {
  const output = ((options || {}).reporterOption || (options || {}).reporterOptions || {}).output;
  const tests = [], pending = [], failures = [];
  runner.on('test end', (test) => tests.push(test));
  runner.on('pending', (test) => pending.push(test));
  runner.on('fail', (test, err) => {
    if (!test.err) test.err = err;
    failures.push(test);
  });
  runner.once('end', () => {
    const report = {
      stats: runner.stats || {},
      tests: tests.map(clean),
      pending: pending.map(clean),
      failures: failures.map(clean),
    };
    fs.writeFileSync(output, JSON.stringify(report));
  });
}
module.exports = TddReporter;
"#;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Test {
    full_title: String,
    /// The describe titles and the test's own, from our reporter; absent
    /// from mocha's json reporter.
    #[serde(default)]
    title_path: Option<Vec<String>>,
    #[serde(default)]
    file: Option<String>,
    #[serde(default)]
    err: serde_json::Value,
}

/// Parses mocha's JSON report.
pub(crate) fn parse_report(
    bytes: &[u8],
    root: &std::path::Path,
) -> Result<ParsedReport, ReportError> {
    let report: Report =
        serde_json::from_slice(bytes).map_err(|e| ReportError::new("mocha JSON", e))?;
    let id = |test: &Test| {
        let file = test
            .file
            .as_deref()
            .map(|f| relative_path(f, root))
            .unwrap_or_default();
        match &test.title_path {
            Some(path) if !path.is_empty() => format!("{file} > {}", path.join(" > ")),
            _ => format!("{file} > {}", test.full_title),
        }
    };
    let mut diagnostics = Vec::new();
    let tests = records("tests", report.tests, &mut diagnostics);
    let pending_records = records("pending", report.pending, &mut diagnostics);
    let failures = records("failures", report.failures, &mut diagnostics);
    let mut parsed = ParsedReport {
        diagnostics,
        runner_counts: Some(crate::model::RunnerCounts {
            tests: report.stats.tests,
            passed: report.stats.passes,
            failed: report.stats.failures,
            skipped: report.stats.pending,
            errors: None,
        }),
        ..ParsedReport::default()
    };
    // Same-named tests are told apart by how often each name is still owed
    // to `pending` and `failures`: every record of `tests` is one test.
    let mut pending: HashMap<String, usize> = HashMap::new();
    for test in &pending_records {
        *pending.entry(id(test)).or_default() += 1;
    }
    let mut failed: HashMap<String, usize> = HashMap::new();
    for test in &failures {
        *failed.entry(id(test)).or_default() += 1;
    }
    for test in &tests {
        let test_id = id(test);
        let has_error = test.err.as_object().is_some_and(|e| !e.is_empty());
        let result = if has_error {
            if let Some(count) = failed.get_mut(&test_id) {
                *count = count.saturating_sub(1);
            }
            failed_result(&test.err)
        } else if let Some(count) = pending.get_mut(&test_id).filter(|c| **c > 0) {
            *count -= 1;
            TestResult {
                outcome: Outcome::Skipped,
                failure: None,
            }
        } else {
            TestResult {
                outcome: Outcome::Passed,
                failure: None,
            }
        };
        parsed.tests.push((test_id, result));
    }
    // Hook failures appear only under `failures`, as '"before all" hook ...'.
    for test in &failures {
        let test_id = id(test);
        match failed.get_mut(&test_id) {
            Some(count) if *count > 0 => *count -= 1,
            _ => continue,
        }
        parsed.tests.push((test_id, failed_result(&test.err)));
    }
    Ok(parsed)
}

fn failed_result(err: &serde_json::Value) -> TestResult {
    TestResult {
        outcome: Outcome::Failed,
        failure: Some(Failure {
            kind: classify(err),
            message: clip(&error_text(err), MESSAGE_KEEP),
        }),
    }
}

fn error_text(err: &serde_json::Value) -> String {
    let field = |name: &str| err.get(name).and_then(|v| v.as_str()).unwrap_or("");
    if field("stack").is_empty() {
        field("message").to_string()
    } else {
        field("stack").to_string()
    }
}

fn classify(err: &serde_json::Value) -> FailureKind {
    let field = |name: &str| err.get(name).and_then(|v| v.as_str()).unwrap_or("");
    if field("code") == "ERR_MOCHA_TIMEOUT" || field("message").starts_with("Timeout of") {
        FailureKind::Timeout
    } else if field("name") == "AssertionError" || field("code") == "ERR_ASSERTION" {
        FailureKind::Assertion
    } else {
        FailureKind::Exception
    }
}

impl Mocha {
    /// One mocha invocation over `files` (mocha's spec when empty). Returns
    /// whether a report was read, and the invocation's stderr.
    fn invoke(
        &self,
        project: &Project,
        scratch: &Scratch,
        label: &str,
        files: &[String],
        extra: &[String],
        builder: &mut Builder,
    ) -> (bool, Vec<u8>) {
        let report = scratch.path(&format!("{label}.json"));
        let reporter = match scratch.write("tdd-mocha-reporter.cjs", REPORTER) {
            Ok(path) => path.display().to_string(),
            Err(err) => {
                builder.fail(format!("could not write the mocha reporter: {err}"));
                return (false, Vec::new());
            }
        };
        let report_flags = vec![
            "--reporter".to_string(),
            reporter,
            "--reporter-option".to_string(),
            format!("output={}", report.display()),
        ];
        let mut target: Vec<String> = extra.to_vec();
        target.extend(files.iter().cloned());
        let argv = match &project.config.test_command {
            Some(template) => user_command(
                template,
                &Substitutions {
                    target: &target,
                    report_flags: &report_flags,
                    report: &report,
                },
            ),
            None => {
                let mut argv = vec![super::node_bin(&project.root, "mocha")];
                argv.extend(project.config.runner_args.iter().cloned());
                argv.extend(report_flags);
                argv.extend(target);
                argv
            }
        };
        let job = Job {
            label,
            argv,
            cwd: None,
            report: ReportAt::File(report),
            env: Vec::new(),
        };
        let ran = execute(project, scratch, job);
        let parsed = ran
            .report
            .as_deref()
            .filter(|b| !b.is_empty())
            .and_then(|b| parse_report(b, &project.root).ok());
        let observed = parsed.is_some();
        if let Some(parsed) = parsed {
            super::merge_agreeing(builder, &ran, parsed, "mocha");
        }
        builder.invocation(ran.invocation);
        (observed, ran.stderr)
    }

    /// Runs `files` together; if mocha aborts without a report, runs each
    /// file alone so a file that fails to load cannot hide the others.
    fn observe(
        &self,
        project: &Project,
        files: Vec<String>,
        extra: &[String],
    ) -> Result<Builder, ObserveError> {
        let scratch = Scratch::new()?;
        let mut builder = Builder::new(project, self.kind());
        let (observed, stderr) = self.invoke(project, &scratch, "run", &files, extra, &mut builder);
        if observed {
            return Ok(builder);
        }
        let single = files.len() == 1;
        let files = if files.is_empty() {
            discover(&project.root, &test_globs(project, DEFAULT_GLOBS))
        } else {
            files
        };
        if files.is_empty() {
            builder.fail(format!(
                "mocha wrote no report and no test file matches test_paths{}",
                super::last_line_suffix(&stderr)
            ));
        }
        for (index, file) in files.iter().enumerate() {
            let (observed, stderr) = if single {
                (false, stderr.clone())
            } else {
                let label = format!("file-{index}");
                let file = std::slice::from_ref(file);
                self.invoke(project, &scratch, &label, file, extra, &mut builder)
            };
            // A file that does not exist is no collection error: its tests
            // are simply not found.
            if !observed && project.root.join(file).is_file() {
                builder.merge(ParsedReport {
                    collection_errors: vec![CollectionError {
                        scope: file.clone(),
                        kind: FailureKind::Collection,
                        message: clip_bytes(&stderr, MESSAGE_KEEP),
                    }],
                    ..ParsedReport::default()
                });
            }
        }
        Ok(builder)
    }
}

impl Adapter for Mocha {
    fn kind(&self) -> AdapterKind {
        AdapterKind::Mocha
    }

    fn collect(&self, project: &Project) -> Result<Collection, ObserveError> {
        let observation = self
            .observe(project, Vec::new(), &["--dry-run".to_string()])?
            .finish(&Selection::All);
        Ok(Collection {
            ids: observation.tests.keys().cloned().collect(),
            errors: observation.collection_errors,
            runner_error: observation
                .runner_error
                .filter(|e| !e.starts_with("no tests ran")),
            invocations: observation.invocations,
        })
    }

    fn run(&self, project: &Project, selection: &Selection) -> Result<Observation, ObserveError> {
        let (files, extra) = match selection {
            Selection::All | Selection::AllExcept(_) => (Vec::new(), Vec::new()),
            Selection::Tests(ids) => {
                let mut files: Vec<String> = ids.iter().map(|id| file_of(id)).collect();
                files.sort();
                files.dedup();
                (files, self.grep(ids))
            }
        };
        Ok(self.observe(project, files, &extra)?.finish(selection))
    }

    fn select(&self, _project: &Project, native_id: &str) -> Vec<String> {
        let mut args = self.grep(&[native_id.to_string()]);
        args.push(file_of(native_id));
        args
    }

    fn target_key(&self, project: &Project, native_id: &str) -> TargetKey {
        super::js::target_key(project, native_id)
    }

    fn stub_hint(&self) -> &'static str {
        super::js::STUB_HINT
    }

    fn version_command(&self, project: &Project) -> Vec<String> {
        vec![super::node_bin(&project.root, "mocha"), "--version".into()]
    }
}

impl Mocha {
    /// mocha's `--grep` matches the full title: the titles joined by spaces.
    fn grep(&self, ids: &[String]) -> Vec<String> {
        let names: Vec<String> = ids
            .iter()
            .map(|id| name_alternatives(&titles_of(id).join(" ")))
            .collect();
        vec!["--grep".to_string(), format!("^(?:{})$", names.join("|"))]
    }
}

#[cfg(test)]
mod tests;
