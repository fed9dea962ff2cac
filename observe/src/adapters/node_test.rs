//! node:test, observed through `node --test --test-reporter=junit
//! --test-reporter-destination=FILE`.
//!
//! Node's JUnit output does not say which file a test came from, so each
//! test file runs as its own invocation with its own report, as many at a
//! time as there are cores. Ids are
//! `file > suite > ... > name`. A file that throws while loading is reported
//! by node as one failing test named after the file; it becomes a
//! collection error of that file. Tests that a name pattern filtered out are
//! reported as skipped "test name does not match pattern" and are dropped.

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;

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
use crate::command::Substitutions;
use crate::command::user_command;
use crate::command::workers;
use crate::config::AdapterKind;
use crate::error::ObserveError;
use crate::error::ReportError;
use crate::exec::Job;
use crate::exec::Ran;
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
use crate::target::TargetKey;

/// The node:test adapter.
#[derive(Debug)]
pub(crate) struct NodeTest;

/// node's own default test file patterns.
const DEFAULT_GLOBS: &[&str] = &[
    "**/*.test.{js,mjs,cjs}",
    "**/*-test.{js,mjs,cjs}",
    "**/*_test.{js,mjs,cjs}",
    "**/test-*.{js,mjs,cjs}",
    "**/test.{js,mjs,cjs}",
    "**/test/**/*.{js,mjs,cjs}",
];

/// A JavaScript regular expression that matches no test name.
const MATCH_NOTHING: &str = "(?!)";

/// Parses one file's JUnit report; `file` is relative to `root`.
pub(crate) fn parse_report(
    bytes: &[u8],
    file: &str,
    root: &Path,
) -> Result<ParsedReport, ReportError> {
    let report = junit::parse(bytes)?;
    let absolute = root.join(file).to_string_lossy().into_owned();
    let mut parsed = ParsedReport {
        runner_counts: report.counts,
        ..ParsedReport::default()
    };
    for case in report.cases {
        if case.suites.is_empty()
            && case.outcome == Outcome::Failed
            && (case.name == absolute || case.name == file)
        {
            parsed.collection_errors.push(CollectionError {
                scope: file.to_string(),
                kind: FailureKind::Collection,
                message: clip(&case.text, MESSAGE_KEEP),
            });
            continue;
        }
        let mut id = file.to_string();
        for part in case.suites.iter().chain([&case.name]) {
            id.push_str(" > ");
            id.push_str(part);
        }
        parsed.tests.push((id, result_of(&case)));
    }
    Ok(parsed)
}

fn result_of(case: &JunitCase) -> TestResult {
    let failure = matches!(case.outcome, Outcome::Failed | Outcome::Error).then(|| {
        let kind = if case.failure_type.as_deref() == Some("testTimeoutFailure") {
            FailureKind::Timeout
        } else if case.text.contains("cause: AssertionError")
            || case.text.contains("code: 'ERR_ASSERTION'")
        {
            FailureKind::Assertion
        } else {
            FailureKind::Exception
        };
        Failure {
            kind,
            message: clip(
                &format!("{}\n{}", case.message, case.text.trim()),
                MESSAGE_KEEP,
            ),
        }
    });
    TestResult {
        outcome: case.outcome,
        failure,
    }
}

impl NodeTest {
    /// Runs each of `files` alone, with an optional name pattern, as many at a time
    /// as there are cores (as `node --test` itself does); results are merged in file
    /// order, so an observation never depends on which process ended first.
    fn observe(
        &self,
        project: &Project,
        files: &[String],
        pattern: Option<&str>,
        builder: &mut Builder,
    ) -> Result<(), ObserveError> {
        let scratch = Scratch::new()?;
        if files.is_empty() {
            builder.fail("no node:test files match test_paths");
        }
        let next = AtomicUsize::new(0);
        let done: Mutex<Vec<Option<Ran>>> = Mutex::new(files.iter().map(|_| None).collect());
        let run_one = |index: usize| {
            let file = &files[index];
            let report = scratch.path(&format!("report-{index}.xml"));
            let argv = argv(project, file, pattern, &report);
            let label = format!("file-{index}");
            let job = Job {
                label: &label,
                argv,
                cwd: None,
                report: ReportAt::File(report),
                env: Vec::new(),
            };
            execute(project, &scratch, job)
        };
        std::thread::scope(|scope| {
            for _ in 0..workers().min(files.len()) {
                scope.spawn(|| {
                    loop {
                        let index = next.fetch_add(1, Ordering::Relaxed);
                        if index >= files.len() {
                            break;
                        }
                        let ran = run_one(index);
                        if let Ok(mut done) = done.lock() {
                            done[index] = Some(ran);
                        }
                    }
                });
            }
        });
        let done = done
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for (file, ran) in files.iter().zip(done) {
            let Some(ran) = ran else {
                builder.fail(format!("{file}: node --test did not run"));
                continue;
            };
            match ran.report.as_deref().filter(|b| !b.is_empty()) {
                Some(bytes) => match parse_report(bytes, file, &project.root) {
                    Ok(parsed) => super::merge_agreeing(builder, &ran, parsed, "node --test"),
                    Err(err) => builder.fail(format!("{file}: {}", err.0)),
                },
                None => super::record_missing_report(builder, &ran, "node --test"),
            }
            builder.invocation(ran.invocation);
        }
        Ok(())
    }
}

/// The command that runs `file` alone and writes its JUnit report to `report`.
fn argv(project: &Project, file: &str, pattern: Option<&str>, report: &Path) -> Vec<String> {
    let report_flags = vec![
        "--test-reporter=junit".to_string(),
        format!("--test-reporter-destination={}", report.display()),
    ];
    let mut target: Vec<String> = pattern
        .iter()
        .map(|p| format!("--test-name-pattern={p}"))
        .collect();
    target.push(file.to_string());
    match &project.config.test_command {
        Some(template) => user_command(
            template,
            &Substitutions {
                target: &target,
                report_flags: &report_flags,
                report,
            },
        ),
        None => {
            let mut argv = vec!["node".to_string(), "--test".to_string()];
            argv.extend(project.config.runner_args.iter().cloned());
            argv.extend(report_flags);
            argv.extend(target);
            argv
        }
    }
}

impl Adapter for NodeTest {
    fn kind(&self) -> AdapterKind {
        AdapterKind::NodeTest
    }

    fn collect(&self, project: &Project) -> Result<Collection, ObserveError> {
        let files = test_files(project);
        let mut builder = Builder::new(project, self.kind());
        self.observe(project, &files, Some(MATCH_NOTHING), &mut builder)?;
        let observation = builder.finish(&Selection::All);
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
        let mut builder = Builder::new(project, self.kind());
        match selection {
            Selection::All | Selection::AllExcept(_) => {
                let files = test_files(project);
                self.observe(project, &files, None, &mut builder)?;
            }
            Selection::Tests(ids) => {
                let mut files: Vec<String> = ids
                    .iter()
                    .map(|id| file_of(id))
                    .filter(|f| project.root.join(f).is_file())
                    .collect();
                files.sort();
                files.dedup();
                if !files.is_empty() {
                    self.observe(project, &files, Some(&name_pattern(ids)), &mut builder)?;
                }
            }
        }
        // Tests the name pattern filtered out come back as skipped; finishing
        // with the selection drops them.
        Ok(builder.finish(selection))
    }

    fn select(&self, _project: &Project, native_id: &str) -> Vec<String> {
        vec![
            format!(
                "--test-name-pattern={}",
                name_pattern(&[native_id.to_string()])
            ),
            file_of(native_id),
        ]
    }

    fn target_key(&self, project: &Project, native_id: &str) -> TargetKey {
        super::js::target_key(project, native_id)
    }

    fn stub_hint(&self) -> &'static str {
        super::js::STUB_HINT
    }

    fn version_command(&self, _project: &Project) -> Vec<String> {
        vec!["node".into(), "--version".into()]
    }
}

/// The project's test files: node's own patterns without `test_paths`; each glob or
/// file of `test_paths` as written; and for each directory, the files `node --test DIR`
/// runs from it, plus those that import `node:test` themselves.
///
/// node 20 searches a directory for files named like tests and for every JavaScript
/// file under a directory named `test`; later versions take no directory at all.
/// Neither runs the other JavaScript files a test directory holds: fixture programs
/// the tests spawn, helpers. Run alone, each of those would count as one test named
/// after the file (commander 14's `tests/fixtures/*.js`), or as a collection error
/// when it exits non-zero.
fn test_files(project: &Project) -> Vec<String> {
    if project.config.test_paths.is_empty() {
        return discover(&project.root, &test_globs(project, DEFAULT_GLOBS));
    }
    let mut globs = Vec::new();
    let mut dirs = Vec::new();
    for entry in &project.config.test_paths {
        let dir = entry.trim_end_matches('/');
        let is_glob = entry.contains(['*', '?', '[', '{']);
        if !is_glob && (entry.ends_with('/') || project.root.join(dir).is_dir()) {
            let dir = dir.trim_start_matches("./");
            dirs.push(if dir == "." { "" } else { dir });
        } else {
            globs.push(entry.clone());
        }
    }
    let mut files = if globs.is_empty() {
        Vec::new()
    } else {
        discover(&project.root, &globs)
    };
    for dir in dirs {
        let under = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        let javascript = discover(&project.root, &[format!("{under}**/*.{{js,mjs,cjs}}")]);
        files.extend(javascript.into_iter().filter(|file| {
            let within = file.strip_prefix(&under).unwrap_or(file);
            node_runs_from(dir, within) || imports_node_test(&project.root.join(file))
        }));
    }
    files.sort();
    files.dedup();
    files
}

/// Whether `node --test DIR` (node 20) runs the JavaScript file at `within`, relative
/// to `dir`: its name is `test`, `test-*`, `*.test`, `*-test` or `*_test`, or it lies
/// under a directory named `test` (`dir` itself included).
fn node_runs_from(dir: &str, within: &str) -> bool {
    let mut parts: Vec<&str> = within.split('/').collect();
    let name = parts.pop().unwrap_or_default();
    let under_test = dir.rsplit('/').next() == Some("test") || parts.contains(&"test");
    let stem = [".js", ".mjs", ".cjs"]
        .iter()
        .find_map(|ext| name.strip_suffix(ext))
        .unwrap_or(name);
    let named = stem == "test"
        || stem
            .strip_prefix("test-")
            .is_some_and(|rest| !rest.is_empty())
        || [".test", "-test", "_test"].iter().any(|suffix| {
            stem.strip_suffix(suffix)
                .is_some_and(|head| !head.is_empty())
        });
    under_test || named
}

/// Whether the file at `path` names the `node:test` module, as a file of node:test
/// tests that is not named like one (`spec/math.js`) does.
fn imports_node_test(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|bytes| bytes.windows(9).any(|w| w == b"node:test"))
}

/// Node 20 matches a pattern against a test's own name, so the pattern
/// names the last title; siblings of the same name in the file also run.
fn name_pattern(ids: &[String]) -> String {
    let names: Vec<String> = ids
        .iter()
        .map(|id| name_alternatives(titles_of(id).last().copied().unwrap_or("")))
        .collect();
    format!("^(?:{})$", names.join("|"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ProjectConfig;

    fn project_with(files: &[(&str, &str)], test_paths: &str) -> (tempfile::TempDir, Project) {
        let dir = tempfile::tempdir().expect("tempdir");
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        }
        let toml = format!("adapter = \"node-test\"\ntest_paths = {test_paths}");
        let config: ProjectConfig = toml::from_str(&toml).expect("config");
        let project = Project::new(dir.path(), "app", config).expect("project");
        (dir, project)
    }

    const NODE_TEST: &str = "const test = require('node:test');\ntest('t', () => {});\n";
    const SCRIPT: &str = "#!/usr/bin/env node\nconsole.log(process.argv.slice(2));\n";

    /// commander 14's `tests/` holds, besides its `*.test.js` files, fixture programs its
    /// tests spawn (`tests/fixtures/pm-echo.js`). `node --test tests/` does not run them;
    /// run alone, each would be one passing "test" named after the file.
    #[test]
    fn a_test_directory_holds_what_node_runs_from_it_not_its_fixtures() {
        let (_dir, project) = project_with(
            &[
                ("tests/args.literal.test.js", "test('a', () => {});\n"),
                ("tests/esm-imports-test.mjs", "import '../index.js';\n"),
                ("tests/test-lower.cjs", "test('b', () => {});\n"),
                ("tests/test.js", "test('c', () => {});\n"),
                ("tests/unit/sub_test.js", "test('d', () => {});\n"),
                ("tests/test/anything.js", "test('e', () => {});\n"),
                ("tests/spec/dup.js", NODE_TEST),
                ("tests/esm-spec.mjs", "import { test } from 'node:test';\n"),
                ("tests/fixtures/pm-echo.js", SCRIPT),
                ("tests/fixtures-extensions/pm-try-cjs.cjs", SCRIPT),
                ("tests/fixtures/test-helpers/index.js", SCRIPT),
                ("tests/latest.js", SCRIPT),
                ("tests/fixtures/notes.txt", "not javascript"),
                ("lib/command.test.js", "test('outside', () => {});\n"),
            ],
            r#"["tests/"]"#,
        );
        assert_eq!(
            test_files(&project),
            vec![
                "tests/args.literal.test.js",
                "tests/esm-imports-test.mjs",
                "tests/esm-spec.mjs",
                "tests/spec/dup.js",
                "tests/test-lower.cjs",
                "tests/test.js",
                "tests/test/anything.js",
                "tests/unit/sub_test.js",
            ]
        );
    }

    /// Every JavaScript file under a directory named `test` is a test file to node,
    /// the named directory itself included; globs and files are taken as written.
    #[test]
    fn a_directory_named_test_holds_all_its_javascript_and_globs_are_kept() {
        let (_dir, project) = project_with(
            &[
                ("test/calc.js", SCRIPT),
                ("test/deep/more.mjs", SCRIPT),
                ("test/readme.md", "# no"),
                ("spec/helper.js", SCRIPT),
                ("spec/one.js", SCRIPT),
                ("other/two.js", SCRIPT),
            ],
            r#"["./test", "spec/h*.js", "other/two.js"]"#,
        );
        assert_eq!(
            test_files(&project),
            vec![
                "other/two.js",
                "spec/helper.js",
                "test/calc.js",
                "test/deep/more.mjs",
            ]
        );
    }
}
