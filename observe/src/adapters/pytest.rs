//! pytest, observed through its built-in `--junitxml` report.
//!
//! Node ids are rebuilt from the xunit1 `file` and `classname` attributes,
//! so parametrized ids (`test_x[a-b]`) and classes (`::TestK::test_m`) come
//! out exactly as `pytest --collect-only` prints them. Runs pass
//! `--continue-on-collection-errors` so one file that fails to import is a
//! collection error of that file while the other files still run. Exit
//! codes 3 (internal error), 4 (usage error) and 5 (nothing collected) are
//! runner errors, and so is a report its exit status contradicts (exit 1 with every
//! test passed, exit 0 with one failing): the report was changed after pytest wrote
//! it, or a plugin failed the run.
//! Projects with a `uv.lock`, `poetry.lock` or `pdm.lock`
//! run pytest through that tool.

use std::path::Path;

use serde::Deserialize;

use super::exit_code;
use super::record_missing_report;
use crate::Adapter;
use crate::Project;
use crate::Selection;
use crate::build::Builder;
use crate::build::ParsedReport;
use crate::clip::MESSAGE_KEEP;
use crate::clip::clip;
use crate::command::Substitutions;
use crate::command::user_command;
use crate::config::AdapterKind;
use crate::error::ObserveError;
use crate::error::ReportError;
use crate::exec::Job;
use crate::exec::ReportAt;
use crate::exec::Scratch;
use crate::exec::execute;
use crate::junit;
use crate::junit::JunitCase;
use crate::model::Collection;
use crate::model::CollectionError;
use crate::model::Failure;
use crate::model::FailureKind;
use crate::model::Observation;
use crate::model::Outcome;
use crate::model::TestResult;
use crate::target::Partial;
use crate::target::TargetKey;

/// The pytest adapter.
#[derive(Debug)]
pub(crate) struct Pytest;

/// A pytest plugin, loaded with `-p` during collection, that writes the
/// collected node ids and per-file collection errors as JSON.
const COLLECT_PLUGIN: &str = r#"
import json, os

_errors = []

def pytest_collectreport(report):
    if report.failed:
        _errors.append({"nodeid": report.nodeid, "message": str(report.longrepr)})

def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("TDD_COLLECT_OUT")
    if path:
        items = [item.nodeid for item in getattr(session, "items", [])]
        with open(path, "w", encoding="utf-8") as out:
            json.dump({"items": items, "errors": _errors}, out)
"#;

/// A pytest plugin, loaded through `PYTEST_PLUGINS` for a run of the suite without some
/// tests, that deselects exactly the node ids listed in the JSON file `TDD_DESELECT`
/// names: `--deselect` matches ids as prefixes (`t::test_a` would also drop
/// `t::test_add`), and counting what it dropped would mean believing the run's output.
const DESELECT_PLUGIN: &str = r#"
import json, os

def pytest_collection_modifyitems(config, items):
    path = os.environ.get("TDD_DESELECT")
    if not path:
        return
    with open(path, encoding="utf-8") as listed:
        ids = set(json.load(listed))
    keep = [item for item in items if item.nodeid not in ids]
    dropped = [item for item in items if item.nodeid in ids]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
"#;

/// The module name of [`DESELECT_PLUGIN`].
const DESELECT_MODULE: &str = "tdd_deselect_plugin";

/// `PYTHONPATH` with the scratch directory first, so a plugin written there imports.
fn python_path_with(project: &Project, scratch: &Scratch) -> String {
    match project.inherited("PYTHONPATH") {
        Some(existing) if !existing.is_empty() => {
            format!("{}:{existing}", scratch.path("").display())
        }
        _ => scratch.path("").display().to_string(),
    }
}

/// The interpreter prefix: through uv, poetry or pdm when their lock exists.
fn launcher(root: &Path) -> Vec<String> {
    let prefix: &[&str] = if root.join("uv.lock").is_file() {
        &["uv", "run", "python", "-m", "pytest"]
    } else if root.join("poetry.lock").is_file() {
        &["poetry", "run", "python", "-m", "pytest"]
    } else if root.join("pdm.lock").is_file() {
        &["pdm", "run", "python", "-m", "pytest"]
    } else {
        &["python3", "-m", "pytest"]
    };
    prefix.iter().map(|s| s.to_string()).collect()
}

impl Adapter for Pytest {
    fn kind(&self) -> AdapterKind {
        AdapterKind::Pytest
    }

    fn collect(&self, project: &Project) -> Result<Collection, ObserveError> {
        let scratch = Scratch::new()?;
        scratch.write("tdd_collect_plugin.py", COLLECT_PLUGIN)?;
        let out = scratch.path("collect.json");
        let mut argv = launcher(&project.root);
        argv.extend(
            [
                "-p",
                "tdd_collect_plugin",
                "--collect-only",
                "-q",
                "-p",
                "no:cacheprovider",
                "--continue-on-collection-errors",
            ]
            .map(String::from),
        );
        let python_path = python_path_with(project, &scratch);
        let ran = execute(
            project,
            &scratch,
            Job {
                label: "collect",
                argv,
                cwd: None,
                report: ReportAt::File(out.clone()),
                env: vec![
                    ("PYTHONPATH".into(), python_path),
                    ("TDD_COLLECT_OUT".into(), out.display().to_string()),
                    no_bytecode(),
                ],
            },
        );
        let mut builder = Builder::new(project, self.kind());
        builder.invocation(ran.invocation.clone());
        record_missing_report(&mut builder, &ran, "pytest");
        let mut collection = Collection::default();
        if let Some(bytes) = ran.report.as_deref().filter(|b| !b.is_empty()) {
            match parse_collection(bytes) {
                Ok((ids, errors)) => {
                    collection.ids = ids.iter().map(|id| builder.qualify(id)).collect();
                    collection.errors = errors;
                }
                Err(err) => builder.fail(err.0),
            }
        }
        let observation = builder.finish(&Selection::All);
        collection.runner_error = observation
            .runner_error
            .filter(|e| !e.starts_with("no tests ran"));
        collection.invocations = observation.invocations;
        Ok(collection)
    }

    fn run(&self, project: &Project, selection: &Selection) -> Result<Observation, ObserveError> {
        self.run_once(project, selection)
    }

    fn select(&self, _project: &Project, native_id: &str) -> Vec<String> {
        vec![native_id.to_string()]
    }

    fn target_key(&self, project: &Project, native_id: &str) -> TargetKey {
        let id = format!("{}::{native_id}", project.name);
        let file = native_id
            .split("::")
            .next()
            .unwrap_or(native_id)
            .to_string();
        // A file, a class or a parametrized test without its parameters
        // stands for every test pytest runs under it.
        let partial = Partial::Group(vec![format!("{id}::"), format!("{id}[")]);
        TargetKey {
            collected_as: id.clone(),
            id,
            scopes: vec![file],
            partial: Some(partial),
        }
    }

    fn stub_hint(&self) -> &'static str {
        "def name(*args, **kwargs):\n    raise NotImplementedError(\"name is not implemented yet\")"
    }

    fn version_command(&self, project: &Project) -> Vec<String> {
        let mut argv = launcher(&project.root);
        argv.push("--version".into());
        argv
    }
}

impl Pytest {
    /// One pytest run of `selection`, observed.
    fn run_once(
        &self,
        project: &Project,
        selection: &Selection,
    ) -> Result<Observation, ObserveError> {
        let scratch = Scratch::new()?;
        let report = scratch.path("report.xml");
        let mut env = vec![no_bytecode()];
        let targets = match selection {
            Selection::All => Vec::new(),
            Selection::Tests(ids) => ids.clone(),
            Selection::AllExcept(ids) => {
                env.extend(deselect_exactly(project, &scratch, ids)?);
                Vec::new()
            }
        };
        let report_flags = vec![
            format!("--junitxml={}", report.display()),
            "-o".to_string(),
            "junit_family=xunit1".to_string(),
        ];
        let argv = match &project.config.test_command {
            Some(template) => user_command(
                template,
                &Substitutions {
                    target: &targets,
                    report_flags: &report_flags,
                    report: &report,
                },
            ),
            None => {
                let mut argv = launcher(&project.root);
                argv.extend(report_flags);
                argv.extend(
                    [
                        "-q",
                        "-p",
                        "no:cacheprovider",
                        "--continue-on-collection-errors",
                    ]
                    .map(String::from),
                );
                argv.extend(targets);
                argv
            }
        };
        let ran = execute(
            project,
            &scratch,
            Job {
                label: "run",
                argv,
                cwd: None,
                report: ReportAt::File(report),
                env,
            },
        );
        let mut builder = Builder::new(project, self.kind());
        match exit_code(&ran) {
            Some(3) => builder.fail("pytest hit an internal error (exit 3)"),
            Some(4) => builder.fail(format!(
                "pytest reported a usage error (exit 4){}",
                super::last_line_suffix(&ran.stderr)
            )),
            Some(5) if !matches!(selection, Selection::AllExcept(_)) => {
                builder.fail("pytest collected no tests (exit 5)");
            }
            _ => {}
        }
        record_missing_report(&mut builder, &ran, "pytest");
        if let Some(bytes) = ran.report.as_deref().filter(|b| !b.is_empty()) {
            match parse_report(bytes, &project.root) {
                Ok(parsed) => super::merge_agreeing(&mut builder, &ran, parsed, "pytest"),
                Err(err) => builder.fail(err.0),
            }
        }
        builder.invocation(ran.invocation);
        Ok(builder.finish(selection))
    }
}

/// The environment that makes a pytest run leave out exactly the tests `ids`, whatever
/// command runs it: [`DESELECT_PLUGIN`] and the list written into `scratch`, the plugin
/// added to any the project loads through `PYTEST_PLUGINS`.
fn deselect_exactly(
    project: &Project,
    scratch: &Scratch,
    ids: &[String],
) -> Result<Vec<(String, String)>, ObserveError> {
    scratch.write(&format!("{DESELECT_MODULE}.py"), DESELECT_PLUGIN)?;
    let list =
        serde_json::to_string(ids).map_err(|e| ObserveError::Scratch(std::io::Error::other(e)))?;
    scratch.write("deselect.json", &list)?;
    let plugins = match project.inherited("PYTEST_PLUGINS") {
        Some(existing) if !existing.is_empty() => format!("{existing},{DESELECT_MODULE}"),
        _ => DESELECT_MODULE.to_string(),
    };
    Ok(vec![
        ("PYTHONPATH".into(), python_path_with(project, scratch)),
        ("PYTEST_PLUGINS".into(), plugins),
        (
            "TDD_DESELECT".into(),
            scratch.path("deselect.json").display().to_string(),
        ),
    ])
}

/// Parses pytest's JUnit report into node ids, outcomes and collection errors.
pub(crate) fn parse_report(bytes: &[u8], root: &Path) -> Result<ParsedReport, ReportError> {
    let report = junit::parse(bytes)?;
    let mut parsed = ParsedReport {
        runner_counts: report.counts,
        ..ParsedReport::default()
    };
    for case in report.cases {
        if case.classname.is_empty() && case.outcome == Outcome::Error {
            let scope = case
                .file
                .clone()
                .unwrap_or_else(|| format!("{}.py", case.name.replace('.', "/")));
            parsed.collection_errors.push(CollectionError {
                scope,
                kind: FailureKind::Collection,
                message: clip(&case.text, MESSAGE_KEEP),
            });
            continue;
        }
        let id = node_id(&case, root);
        parsed.tests.push((id, result_of(&case)));
    }
    Ok(parsed)
}

/// `file::Class::name` from the xunit1 attributes; without a `file`
/// attribute, the longest dotted prefix of `classname` that is a file.
fn node_id(case: &JunitCase, root: &Path) -> String {
    let parts: Vec<&str> = case.classname.split('.').collect();
    let (file, module_len) = match &case.file {
        Some(file) => {
            let module = file.trim_end_matches(".py").replace('/', ".");
            (file.clone(), module.split('.').count())
        }
        None => (1..=parts.len())
            .rev()
            .map(|n| (format!("{}.py", parts[..n].join("/")), n))
            .find(|(file, _)| root.join(file).is_file())
            .unwrap_or_else(|| (format!("{}.py", parts.join("/")), parts.len())),
    };
    let mut id = file;
    for class in parts.iter().skip(module_len) {
        id.push_str("::");
        id.push_str(class);
    }
    id.push_str("::");
    id.push_str(&case.name);
    id
}

fn result_of(case: &JunitCase) -> TestResult {
    let failure = match case.outcome {
        Outcome::Passed | Outcome::Skipped => None,
        Outcome::Failed | Outcome::Error => {
            let kind = if case.outcome == Outcome::Error {
                FailureKind::Exception
            } else {
                classify(case)
            };
            let message = headline_and_traceback(&case.message, &case.text);
            Some(Failure {
                kind,
                message: clip(&message, MESSAGE_KEEP),
            })
        }
    };
    TestResult {
        outcome: case.outcome,
        failure,
    }
}

/// pytest's message first, as the headline, then its traceback without the
/// `E ` lines that only repeat the message.
fn headline_and_traceback(message: &str, text: &str) -> String {
    let message = message.trim();
    let traceback: Vec<&str> = text
        .trim()
        .lines()
        .filter(|line| {
            let Some(rest) = line.strip_prefix("E ") else {
                return true;
            };
            message.is_empty() || !message.contains(rest.trim())
        })
        .collect();
    match (message.is_empty(), traceback.is_empty()) {
        (true, _) => traceback.join("\n"),
        (false, true) => message.to_string(),
        (false, false) => format!("{message}\n\n{}", traceback.join("\n")),
    }
}

/// pytest ends a failure's text with `path:line: ExceptionType`.
fn classify(case: &JunitCase) -> FailureKind {
    let last = case.text.lines().rev().find(|l| !l.trim().is_empty());
    let exception = last
        .and_then(|line| line.rsplit(": ").next())
        .map(str::trim)
        .unwrap_or("");
    if case.message.starts_with("Failed: Timeout") {
        return FailureKind::Timeout;
    }
    if exception == "AssertionError" || (exception.is_empty() && case.message.starts_with("assert"))
    {
        return FailureKind::Assertion;
    }
    FailureKind::Exception
}

#[derive(Debug, Deserialize)]
struct CollectOutput {
    items: Vec<String>,
    errors: Vec<CollectErrorEntry>,
}

#[derive(Debug, Deserialize)]
struct CollectErrorEntry {
    nodeid: String,
    message: String,
}

/// Parses the collection plugin's JSON.
pub(crate) fn parse_collection(
    bytes: &[u8],
) -> Result<(Vec<String>, Vec<CollectionError>), ReportError> {
    let output: CollectOutput =
        serde_json::from_slice(bytes).map_err(|e| ReportError::new("pytest collection JSON", e))?;
    let errors = output
        .errors
        .into_iter()
        .map(|e| CollectionError {
            scope: e.nodeid,
            kind: FailureKind::Collection,
            message: clip(&e.message, MESSAGE_KEEP),
        })
        .collect();
    Ok((output.items, errors))
}

/// Python validates cached bytecode by source mtime (one-second resolution) and size, so a
/// file rewritten within the same second at the same size (`a + b` to `a - b` and back)
/// would run stale bytecode and the observation would lie. Runs write no bytecode, so none
/// of ours can be stale. (Pointing `PYTHONPYCACHEPREFIX` at a fresh directory would also
/// ignore the project's own `__pycache__`, but recompiles pytest and every dependency on
/// each run: about half a second per observation.)
fn no_bytecode() -> (String, String) {
    ("PYTHONDONTWRITEBYTECODE".into(), "1".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// pytest 8 xunit1: a failure's message is the assertion its traceback
    /// already ends with, so the excerpt holds it once, as its first line.
    #[test]
    fn a_failure_message_is_not_repeated() -> Result<(), ReportError> {
        let parsed = parse_report(
            include_bytes!("../../tests/fixtures/pytest-junit.xml"),
            Path::new("/nonexistent"),
        )?;
        let message = parsed
            .tests
            .iter()
            .find(|(id, _)| id == "tests/test_a.py::test_fail")
            .and_then(|(_, r)| r.failure.as_ref())
            .map(|f| f.message.clone())
            .unwrap_or_default();
        assert_eq!(
            message.matches("assert (1 + 1) == 3").count(),
            1,
            "{message}"
        );
        assert!(message.starts_with("assert (1 + 1) == 3\n"), "{message}");
        assert!(message.contains("AssertionError"), "{message}");
        Ok(())
    }
}
