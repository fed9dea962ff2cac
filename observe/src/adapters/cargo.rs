//! Rust, through cargo-nextest's JUnit report when nextest is installed,
//! else by running every test binary that `cargo test` builds.
//!
//! Every observation starts with `cargo test --no-run --no-fail-fast
//! --message-format json`: its compiler messages give compile errors per
//! package or test binary (a compile error is a valid red for Rust), and its
//! artifacts give the test binaries that did build. Ids are nextest's
//! `binary-id test::path`. Without nextest (or when some binary failed to
//! compile, which would stop nextest from running the rest), each built
//! binary runs with libtest's JSON output, which stable Rust only accepts
//! with `RUSTC_BOOTSTRAP=1` set for that process; every binary's results
//! are read, not only the first.

use std::collections::BTreeMap;

use super::last_line_suffix;
use crate::Adapter;
use crate::Project;
use crate::Selection;
use crate::build::Builder;
use crate::build::ParsedReport;
use crate::cargo_messages;
use crate::cargo_messages::Build;
use crate::cargo_messages::TestBinary;
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
use crate::model::Collection;
use crate::model::Observation;
use crate::model::Outcome;
use crate::model::TestResult;
use crate::target::Partial;
use crate::target::TargetKey;

/// The cargo adapter.
#[derive(Debug)]
pub(crate) struct Cargo;

/// The nextest profile the engine defines through `--tool-config-file`.
const PROFILE: &str = "tdd-observe";

fn nextest_installed(project: &Project) -> bool {
    project.inherited("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| dir.join("cargo-nextest").is_file())
    })
}

/// `binary-id test::path` -> (`Some(binary-id)`, `test::path`); a test path
/// alone (`tests::name`, no binary) -> (`None`, `tests::name`).
fn split_id(native_id: &str) -> (Option<&str>, &str) {
    match native_id.split_once(' ') {
        Some((binary, test)) => (Some(binary), test),
        None => (None, native_id),
    }
}

/// Whether `binary` is a binary id written without its package: one plain name (`f1`
/// for `tests/f1.rs`, whose nextest id is `calc::f1`). It stands for the binary of that
/// name in whichever package holds it, or for the package of that name's own unit
/// tests, so that a gate's run, a verifier's `tdd test` and a target's lookup read it
/// alike.
fn without_package(binary: &str) -> bool {
    !binary.is_empty()
        && binary
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// A nextest name matcher's value with the characters the filterset
/// language gives a meaning (`\`, `)`, `,`) escaped.
fn filter_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '\\' | ')' | ',') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The nextest filterset that selects exactly `native_id`: its test path in
/// its binary, or in any binary when the id names none.
fn filterset(native_id: &str) -> String {
    match split_id(native_id) {
        (Some(binary), test) if without_package(binary) => format!(
            "(binary_id(#{{{binary}\\,*::{binary}}}) & test(={}))",
            filter_escape(test)
        ),
        (Some(binary), test) => format!(
            "(binary_id(={}) & test(={}))",
            filter_escape(binary),
            filter_escape(test)
        ),
        (None, test) => format!("test(={})", filter_escape(test)),
    }
}

/// Parses nextest's JUnit report (suite = binary id, case = test path).
pub(crate) fn parse_nextest(bytes: &[u8]) -> Result<ParsedReport, ReportError> {
    let report = junit::parse(bytes)?;
    let mut parsed = ParsedReport {
        runner_counts: report.counts,
        ..ParsedReport::default()
    };
    for case in report.cases {
        let text = crate::clip::with_message(&case.message, &case.text);
        let result = cargo_messages::rust_result(case.outcome, &text);
        parsed
            .tests
            .push((format!("{} {}", case.classname, case.name), result));
    }
    Ok(parsed)
}

/// The target directory a project's cargo builds into, when its environment names one
/// (the engine always does for a deciding run): absolute, or relative to its root.
fn target_dir(project: &Project) -> Option<std::path::PathBuf> {
    let dir = project.config.env.get("CARGO_TARGET_DIR")?;
    Some(project.root.join(dir))
}

impl Cargo {
    fn build(&self, project: &Project, scratch: &Scratch, builder: &mut Builder) -> Option<Build> {
        let argv = [
            "cargo",
            "test",
            "--no-run",
            "--no-fail-fast",
            "--message-format",
            "json",
        ]
        .map(String::from)
        .into();
        let job = Job {
            label: "build",
            argv,
            cwd: None,
            report: ReportAt::Stdout,
            env: Vec::new(),
        };
        let ran = execute(project, scratch, job);
        let build = match cargo_messages::parse_build(ran.report.as_deref().unwrap_or(b"")) {
            Ok(build) => Some(build),
            Err(err) => {
                builder.fail(format!("{}{}", err.0, last_line_suffix(&ran.stderr)));
                None
            }
        };
        builder.invocation(ran.invocation);
        build
    }

    fn run_nextest(
        &self,
        project: &Project,
        scratch: &Scratch,
        ids: Option<&[String]>,
        except: &[String],
        builder: &mut Builder,
    ) -> Result<(), ObserveError> {
        let report = scratch.path("junit.xml");
        let config = format!(
            "[profile.{PROFILE}]\nfail-fast = false\n[profile.{PROFILE}.junit]\npath = \"{}\"\n",
            report.display()
        );
        let config_path = scratch.write("nextest.toml", &config)?;
        let mut target = Vec::new();
        if let Some(ids) = ids {
            let filters: Vec<String> = ids.iter().map(|id| filterset(id)).collect();
            target = vec!["-E".to_string(), filters.join(" | ")];
        } else if !except.is_empty() && project.config.test_command.is_none() {
            // A user's command gets `{target}` empty for a whole-suite run, as before.
            let filters: Vec<String> = except.iter().map(|id| filterset(id)).collect();
            target = vec!["-E".to_string(), format!("not ({})", filters.join(" | "))];
        }
        let argv = match &project.config.test_command {
            Some(template) => user_command(
                template,
                &Substitutions {
                    target: &target,
                    report_flags: &[],
                    report: &report,
                },
            ),
            None => {
                let mut argv: Vec<String> = [
                    "cargo",
                    "nextest",
                    "run",
                    "--no-fail-fast",
                    "--no-tests=pass",
                    "--profile",
                    PROFILE,
                ]
                .map(String::from)
                .into();
                argv.push("--tool-config-file".to_string());
                argv.push(format!("tdd:{}", config_path.display()));
                argv.extend(target);
                argv
            }
        };
        let ran = execute(
            project,
            scratch,
            Job {
                label: "nextest",
                argv,
                cwd: None,
                report: ReportAt::File(report),
                env: Vec::new(),
            },
        );
        super::record_missing_report(builder, &ran, "cargo nextest");
        if let Some(bytes) = ran.report.as_deref().filter(|b| !b.is_empty()) {
            match parse_nextest(bytes) {
                Ok(parsed) => super::merge_agreeing(builder, &ran, parsed, "cargo nextest"),
                Err(err) => builder.fail(err.0),
            }
        }
        builder.invocation(ran.invocation);
        Ok(())
    }

    fn run_binaries(
        &self,
        project: &Project,
        scratch: &Scratch,
        binaries: &[TestBinary],
        ids: Option<&[String]>,
        builder: &mut Builder,
    ) {
        let mut wanted: BTreeMap<Option<&str>, Vec<&str>> = BTreeMap::new();
        for (binary, test) in ids.unwrap_or(&[]).iter().map(|id| split_id(id)) {
            wanted.entry(binary).or_default().push(test);
        }
        for (index, binary) in binaries.iter().enumerate() {
            // Tests named without a binary are looked for in every binary.
            let names: Option<Vec<&str>> = ids.map(|_| {
                [Some(binary.binary_id.as_str()), None]
                    .iter()
                    .filter_map(|key| wanted.get(key))
                    .flatten()
                    .copied()
                    .collect()
            });
            if names.as_ref().is_some_and(Vec::is_empty) {
                continue;
            }
            let mut argv = vec![binary.executable.to_string_lossy().into_owned()];
            argv.extend(["-Z", "unstable-options", "--format", "json"].map(String::from));
            if let Some(names) = names {
                argv.push("--exact".to_string());
                argv.extend(names.iter().map(|n| n.to_string()));
            }
            let label = format!("binary-{index}");
            let cwd = binary.package_dir.as_deref();
            let env = vec![("RUSTC_BOOTSTRAP".to_string(), "1".to_string())];
            let ran = execute(
                project,
                scratch,
                Job {
                    label: &label,
                    argv,
                    cwd,
                    report: ReportAt::Stdout,
                    env,
                },
            );
            match cargo_messages::parse_libtest(
                ran.report.as_deref().unwrap_or(b""),
                &binary.binary_id,
            ) {
                Ok(parsed) => {
                    let runner = format!("the test binary {}", binary.binary_id);
                    super::merge_agreeing(builder, &ran, parsed, &runner);
                }
                Err(err) => builder.fail(format!(
                    "{}: {}{}",
                    binary.binary_id,
                    err.0,
                    last_line_suffix(&ran.stderr)
                )),
            }
            builder.invocation(ran.invocation);
        }
    }
}

impl Cargo {
    /// nextest's JUnit report leaves `#[ignore]`d tests out; each binary lists
    /// them (`--list --ignored`) so they read as skipped instead of vanishing.
    fn list_ignored(
        &self,
        project: &Project,
        scratch: &Scratch,
        binaries: &[TestBinary],
        builder: &mut Builder,
    ) {
        for (index, binary) in binaries.iter().enumerate() {
            let (ignored, invocation) = list_tests(project, scratch, binary, index, true);
            builder.merge(ParsedReport {
                tests: ignored
                    .into_iter()
                    .map(|id| {
                        let skipped = TestResult {
                            outcome: Outcome::Skipped,
                            failure: None,
                        };
                        (id, skipped)
                    })
                    .collect(),
                ..ParsedReport::default()
            });
            builder.invocation(invocation);
        }
    }
}

/// The test names `binary` lists (`--list --format terse`), only its `#[ignore]`d ones
/// when `ignored`, and the invocation that listed them.
fn list_tests(
    project: &Project,
    scratch: &Scratch,
    binary: &TestBinary,
    index: usize,
    ignored: bool,
) -> (Vec<String>, crate::model::Invocation) {
    let mut argv = vec![
        binary.executable.to_string_lossy().into_owned(),
        "--list".into(),
        "--format".into(),
        "terse".into(),
    ];
    if ignored {
        argv.push("--ignored".into());
    }
    let label = format!("{}-{index}", if ignored { "ignored" } else { "list" });
    let job = Job {
        label: &label,
        argv,
        cwd: binary.package_dir.as_deref(),
        report: ReportAt::Stdout,
        env: Vec::new(),
    };
    let ran = execute(project, scratch, job);
    let listed =
        cargo_messages::parse_list(ran.report.as_deref().unwrap_or(b""), &binary.binary_id);
    (listed, ran.invocation)
}

impl Adapter for Cargo {
    fn kind(&self) -> AdapterKind {
        AdapterKind::Cargo
    }

    fn collect(&self, project: &Project) -> Result<Collection, ObserveError> {
        let scratch = Scratch::new()?;
        let mut builder = Builder::new(project, self.kind());
        let mut collection = Collection::default();
        if let Some(build) = self.build(project, &scratch, &mut builder) {
            for (index, binary) in build.binaries.iter().enumerate() {
                let (listed, invocation) = list_tests(project, &scratch, binary, index, false);
                collection
                    .ids
                    .extend(listed.iter().map(|id| builder.qualify(id)));
                builder.invocation(invocation);
            }
            let doctests = doctest::list(project, &scratch, &build.binaries, &mut builder);
            collection.ids.extend(doctests);
            collection.errors = build.errors;
        }
        let observation = builder.finish(&Selection::All);
        collection.runner_error = observation
            .runner_error
            .filter(|e| !e.starts_with("no tests ran"));
        collection.invocations = observation.invocations;
        Ok(collection)
    }

    fn run(&self, project: &Project, selection: &Selection) -> Result<Observation, ObserveError> {
        let scratch = Scratch::new()?;
        let mut builder = Builder::new(project, self.kind());
        let (ids, except) = match selection {
            Selection::All => (None, &[][..]),
            Selection::Tests(ids) => (Some(ids.as_slice()), &[][..]),
            Selection::AllExcept(ids) => (None, ids.as_slice()),
        };
        if let Some(build) = self.build(project, &scratch, &mut builder) {
            // The tests are the agent's code: what they write into the build directory
            // must not reach a later build (see `crate::build_dir`).
            let watch = target_dir(project).and_then(|dir| crate::build_dir::Watch::start(&dir));
            let clean = build.errors.is_empty();
            builder.merge(ParsedReport {
                collection_errors: build.errors,
                ..ParsedReport::default()
            });
            // Doctests run through `cargo test --doc`, the other tests as before.
            let (doc_ids, test_ids): (Vec<String>, Vec<String>) = ids
                .unwrap_or(&[])
                .iter()
                .cloned()
                .partition(|id| doctest::is_doctest(id));
            let tests = ids.map(|_| test_ids.as_slice());
            let docs = ids.map(|_| doc_ids.as_slice());
            if tests.is_none_or(|ids| !ids.is_empty()) {
                if project.config.test_command.is_some() || (clean && nextest_installed(project)) {
                    self.run_nextest(project, &scratch, tests, except, &mut builder)?;
                    self.list_ignored(project, &scratch, &build.binaries, &mut builder);
                } else {
                    self.run_binaries(project, &scratch, &build.binaries, tests, &mut builder);
                }
            }
            if docs.is_none_or(|ids| !ids.is_empty()) {
                doctest::run(project, &scratch, &build.binaries, docs, &mut builder);
            }
            if let Some(watch) = watch {
                let written = watch.settle();
                if matches!(
                    written,
                    crate::build_dir::Written::Artifact { emptied: false, .. }
                ) {
                    builder.fail(written.words().unwrap_or_default());
                } else {
                    builder.diagnose(written.words());
                }
            }
        }
        Ok(builder.finish(selection))
    }

    fn select(&self, _project: &Project, native_id: &str) -> Vec<String> {
        vec!["-E".to_string(), filterset(native_id)]
    }

    fn target_key(&self, project: &Project, native_id: &str) -> TargetKey {
        let id = format!("{}::{native_id}", project.name);
        let (Some(binary), _) = split_id(native_id) else {
            // A test path without its binary: the one test of that path in
            // any binary.
            let suffix = format!(" {native_id}");
            return TargetKey {
                collected_as: id.clone(),
                id,
                scopes: Vec::new(),
                partial: Some(Partial::Unique {
                    run: suffix.clone(),
                    collected: suffix,
                }),
            };
        };
        if without_package(binary) {
            // The one test of that path in the binary of that name, whatever package
            // holds it (`app::calc::f1 adds`), or in that package's unit tests
            // (`app::f1 adds`, found as itself). A build failure of a binary of that
            // name covers it.
            let suffix = format!("::{native_id}");
            return TargetKey {
                collected_as: id.clone(),
                id,
                scopes: vec![binary.to_string(), format!("::{binary}")],
                partial: Some(Partial::Unique {
                    run: suffix.clone(),
                    collected: suffix,
                }),
            };
        }
        let package = binary.split("::").next().unwrap_or(binary).to_string();
        TargetKey::exact(id, vec![binary.to_string(), package])
    }

    fn stub_hint(&self) -> &'static str {
        "pub fn name(/* args */) -> Output {\n    unimplemented!(\"name is not implemented yet\")\n}"
    }

    fn version_command(&self, _project: &Project) -> Vec<String> {
        vec!["cargo".into(), "--version".into()]
    }
}

mod doctest;

#[cfg(test)]
mod tests;
