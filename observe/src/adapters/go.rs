//! Go, observed through `go test -json -count=1` (`-count=1` so no result
//! is replayed from Go's test cache).
//!
//! Ids are `import/path::TestName` and `import/path::TestName/sub_test`. A
//! package that fails to build is a compile error of that package, so every
//! test in it reads `compile_error`, which is a valid red for Go. Subtests
//! are dynamic: a subtest counts as collected when its top-level test is.

use std::collections::BTreeMap;

use super::exit_code;
use super::last_line_suffix;
use super::regex_escape;
use crate::Adapter;
use crate::Project;
use crate::Selection;
use crate::build::Builder;
use crate::command::Substitutions;
use crate::command::user_command;
use crate::config::AdapterKind;
use crate::error::ObserveError;
use crate::exec::Job;
use crate::exec::Ran;
use crate::exec::ReportAt;
use crate::exec::Scratch;
use crate::exec::execute;
use crate::gostream;
use crate::gostream::GoStream;
use crate::model::Collection;
use crate::model::Observation;
use crate::target::Partial;
use crate::target::TargetKey;

/// The go adapter.
#[derive(Debug)]
pub(crate) struct Go;

/// `pkg::TestA/sub` -> (`pkg`, `TestA/sub`).
fn split_id(native_id: &str) -> (&str, &str) {
    native_id.rsplit_once("::").unwrap_or(("./...", native_id))
}

/// `-run` for the given test names: anchored per level, alternatives joined.
fn run_pattern(names: &[&str]) -> String {
    let top: Vec<String> = names
        .iter()
        .map(|n| regex_escape(n.split('/').next().unwrap_or(n)))
        .collect();
    if let [single] = names {
        let levels: Vec<String> = single
            .split('/')
            .map(|level| format!("^{}$", regex_escape(level)))
            .collect();
        return levels.join("/");
    }
    format!("^(?:{})$", top.join("|"))
}

fn go_test(project: &Project, scratch: &Scratch, label: &str, args: Vec<String>) -> Ran {
    let argv = match &project.config.test_command {
        Some(template) if label == "run" => user_command(
            template,
            &Substitutions {
                target: &args,
                report_flags: &[],
                report: &scratch.path("unused"),
            },
        ),
        _ => {
            let mut argv: Vec<String> =
                ["go", "test", "-json", "-count=1"].map(String::from).into();
            argv.extend(args);
            argv
        }
    };
    execute(
        project,
        scratch,
        Job {
            label,
            argv,
            cwd: None,
            report: ReportAt::Stdout,
            // Never download a toolchain mid-observation (Go 1.21+).
            env: vec![("GOTOOLCHAIN".into(), "local".into())],
        },
    )
}

fn read(builder: &mut Builder, ran: &Ran) -> Option<GoStream> {
    let stdout = ran.report.as_deref().unwrap_or(b"");
    match gostream::parse(stdout, &ran.stderr) {
        Ok(stream) => Some(stream),
        Err(err) => {
            let code = exit_code(ran).map_or(String::new(), |c| format!(" (exit {c})"));
            builder.fail(format!("{}{code}{}", err.0, last_line_suffix(&ran.stderr)));
            None
        }
    }
}

impl Adapter for Go {
    fn kind(&self) -> AdapterKind {
        AdapterKind::Go
    }

    fn collect(&self, project: &Project) -> Result<Collection, ObserveError> {
        let scratch = Scratch::new()?;
        let args = ["-list", ".", "./..."].map(String::from).into();
        let ran = go_test(project, &scratch, "collect", args);
        let mut builder = Builder::new(project, self.kind());
        let stream = read(&mut builder, &ran);
        builder.invocation(ran.invocation);
        let observation = builder.finish(&Selection::All);
        let mut collection = Collection {
            runner_error: observation
                .runner_error
                .filter(|e| !e.starts_with("no tests ran")),
            invocations: observation.invocations,
            ..Collection::default()
        };
        if let Some(stream) = stream {
            collection.ids = stream
                .listed
                .iter()
                .map(|id| format!("{}::{id}", project.name))
                .collect();
            collection.errors = stream.parsed.collection_errors;
        }
        Ok(collection)
    }

    fn run(&self, project: &Project, selection: &Selection) -> Result<Observation, ObserveError> {
        let scratch = Scratch::new()?;
        let args = match selection {
            // `-skip` matches names in every package, so it could drop a same-named test
            // of another package: the rest of the suite runs whole.
            Selection::All | Selection::AllExcept(_) => vec!["./...".to_string()],
            Selection::Tests(ids) => {
                let mut by_package: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
                for id in ids {
                    let (package, name) = split_id(id);
                    by_package.entry(package).or_default().push(name);
                }
                let names: Vec<&str> = by_package.values().flatten().copied().collect();
                let mut args = vec!["-run".to_string(), run_pattern(&names)];
                args.extend(by_package.keys().map(|p| p.to_string()));
                args
            }
        };
        let ran = go_test(project, &scratch, "run", args);
        let mut builder = Builder::new(project, self.kind());
        if let Some(stream) = read(&mut builder, &ran) {
            super::merge_agreeing(&mut builder, &ran, stream.parsed, "go test");
        }
        builder.invocation(ran.invocation);
        Ok(builder.finish(selection))
    }

    fn select(&self, _project: &Project, native_id: &str) -> Vec<String> {
        let (package, name) = split_id(native_id);
        vec![
            "-run".to_string(),
            run_pattern(&[name]),
            package.to_string(),
        ]
    }

    fn target_key(&self, project: &Project, native_id: &str) -> TargetKey {
        let (package, name) = split_id(native_id);
        let top = name.split('/').next().unwrap_or(name);
        if !native_id.contains("::") {
            // A name without its package: the one test of that name under `./...`.
            return TargetKey {
                id: format!("{}::{native_id}", project.name),
                collected_as: format!("{}::{top}", project.name),
                scopes: Vec::new(),
                partial: Some(Partial::Unique {
                    run: format!("::{name}"),
                    collected: format!("::{top}"),
                }),
            };
        }
        TargetKey {
            id: format!("{}::{native_id}", project.name),
            collected_as: format!("{}::{package}::{top}", project.name),
            scopes: vec![package.to_string()],
            partial: None,
        }
    }

    fn stub_hint(&self) -> &'static str {
        "func Name(args ...any) any {\n\tpanic(\"Name is not implemented yet\")\n}"
    }

    fn version_command(&self, _project: &Project) -> Vec<String> {
        vec!["go".into(), "version".into()]
    }
}
