//! The built-in adapters, one file per runner, and what they share.

pub(crate) mod cargo;
mod go;
mod jest;
mod js;
mod junit_command;
pub(crate) mod mocha;
pub(crate) mod node_test;
pub(crate) mod pytest;
mod vitest;

use std::path::Path;

use super::Adapter;
use super::Project;
use super::build::Builder;
use super::exec::Ran;
use super::model::Exit;
use crate::config::AdapterKind;

/// The adapter that observes projects of `kind`.
pub fn adapter_for(kind: AdapterKind) -> Box<dyn Adapter> {
    match kind {
        AdapterKind::Pytest => Box::new(pytest::Pytest),
        AdapterKind::Vitest => Box::new(vitest::Vitest),
        AdapterKind::Jest => Box::new(jest::Jest),
        AdapterKind::Go => Box::new(go::Go),
        AdapterKind::Cargo => Box::new(cargo::Cargo),
        AdapterKind::Mocha => Box::new(mocha::Mocha),
        AdapterKind::NodeTest => Box::new(node_test::NodeTest),
        AdapterKind::Junit => Box::new(junit_command::JunitCommand),
    }
}

/// The exit code of a finished invocation, if it exited normally.
pub(crate) fn exit_code(ran: &Ran) -> Option<i32> {
    match ran.invocation.exit {
        Exit::Code { code } => Some(code),
        _ => None,
    }
}

/// Merges the report `parsed` of `ran` into `builder`, unless the runner's exit status
/// contradicts it: exit 0 (every test passed) with a failing test in the report, or a
/// failing exit with every test of the report passed or skipped and no collection
/// error. Then the run is a runner error instead, and counts for nothing: the report
/// file is in reach of the code under test, its exit status is not.
pub(crate) fn merge_agreeing(
    builder: &mut Builder,
    ran: &Ran,
    parsed: crate::build::ParsedReport,
    runner: &str,
) {
    match disagreement(exit_code(ran), &parsed) {
        Some(why) => builder.fail(format!(
            "{runner} {why}; a run whose report and exit status disagree is not counted"
        )),
        None => builder.merge(parsed),
    }
}

/// How exit `code` contradicts `parsed`, in words, if it does.
fn disagreement(code: Option<i32>, parsed: &crate::build::ParsedReport) -> Option<String> {
    use crate::Outcome;
    let failing = parsed
        .tests
        .iter()
        .filter(|(_, t)| matches!(t.outcome, Outcome::Failed | Outcome::Error))
        .count();
    match code? {
        0 if failing > 0 => Some(format!(
            "exited 0, which says every test passed, but its report shows {failing} failing: \
             the report was changed after the runner wrote it"
        )),
        0 => None,
        code if failing == 0 && !parsed.tests.is_empty() && parsed.collection_errors.is_empty() => {
            Some(format!(
                "exited {code}, which says the run failed, but its report shows every test \
                 passing: something other than a test failed the run (a plugin, a coverage \
                 threshold), or the report was changed after the runner wrote it"
            ))
        }
        _ => None,
    }
}

/// Records `ran` and, when it exited but left no report, says so with the
/// last line of its stderr (usually the reason: "No module named pytest").
pub(crate) fn record_missing_report(builder: &mut Builder, ran: &Ran, runner: &str) {
    if ran.report.as_ref().is_none_or(|r| r.is_empty())
        && let Some(code) = exit_code(ran)
    {
        builder.fail(format!(
            "{runner} wrote no report (exit {code}){}",
            last_line_suffix(&ran.stderr)
        ));
    }
}

/// `": <last non-empty line>"` of `bytes`, or nothing.
pub(crate) fn last_line_suffix(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    text.lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .map(|line| format!(": {}", line.trim()))
        .unwrap_or_default()
}

/// The executable of a Node runner: the nearest `node_modules/.bin/NAME` at
/// or above the project root, else `NAME` on `PATH`.
pub(crate) fn node_bin(root: &Path, name: &str) -> String {
    root.ancestors()
        .map(|dir| dir.join("node_modules").join(".bin").join(name))
        .find(|candidate| candidate.is_file())
        .map_or_else(|| name.to_string(), |p| p.to_string_lossy().into_owned())
}

/// The file part of a `file > describe > title` id.
pub(crate) fn file_of(native_id: &str) -> String {
    native_id
        .split(super::jsonreport::SEPARATOR)
        .next()
        .unwrap_or(native_id)
        .to_string()
}

/// The titles after the file in a `file > describe > title` id.
pub(crate) fn titles_of(native_id: &str) -> Vec<&str> {
    native_id
        .split(super::jsonreport::SEPARATOR)
        .skip(1)
        .collect()
}

/// A pattern matching `name` exactly, or the name it repeats when it ends in
/// an occurrence suffix (`adds #2` also matches `adds`), escaped for a
/// JavaScript regular expression.
pub(crate) fn name_alternatives(name: &str) -> String {
    let base = crate::build::without_occurrence(name);
    if base == name {
        regex_escape(name)
    } else {
        format!("(?:{}|{})", regex_escape(name), regex_escape(base))
    }
}

/// Escapes `text` for a JavaScript or RE2 regular expression.
pub(crate) fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\^$.|?*+()[]{}/-".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Files under `root` matching any of `globs` (relative, `/`-separated),
/// skipping `node_modules` and hidden directories, in sorted order.
pub(crate) fn discover(root: &Path, globs: &[String]) -> Vec<String> {
    let mut builder = globset::GlobSetBuilder::new();
    for glob in globs {
        if let Ok(glob) = globset::Glob::new(glob) {
            builder.add(glob);
        }
    }
    let Ok(set) = builder.build() else {
        return Vec::new();
    };
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if path.is_dir() {
                if name != "node_modules" && !name.starts_with('.') {
                    pending.push(path);
                }
            } else if let Ok(relative) = path.strip_prefix(root) {
                let relative = relative.to_string_lossy().replace('\\', "/");
                if set.is_match(&relative) {
                    found.push(relative);
                }
            }
        }
    }
    found.sort();
    found
}

/// The project's `test_paths`, or `defaults` when it declares none. An
/// entry that names a directory (`test/` or `test`) stands for the
/// JavaScript files anywhere under it, as the runners read a directory.
pub(crate) fn test_globs(project: &Project, defaults: &[&str]) -> Vec<String> {
    if project.config.test_paths.is_empty() {
        return defaults.iter().map(|g| g.to_string()).collect();
    }
    project
        .config
        .test_paths
        .iter()
        .map(|entry| {
            let dir = entry.trim_end_matches('/');
            let is_glob = entry.contains(['*', '?', '[', '{']);
            if !is_glob && (entry.ends_with('/') || project.root.join(dir).is_dir()) {
                format!("{dir}/**/*.{{js,mjs,cjs}}")
            } else {
                entry.clone()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Outcome;
    use crate::build::ParsedReport;

    fn report(outcomes: &[Outcome]) -> ParsedReport {
        ParsedReport {
            tests: outcomes
                .iter()
                .enumerate()
                .map(|(i, outcome)| {
                    (
                        format!("t{i}"),
                        crate::TestResult {
                            outcome: *outcome,
                            failure: None,
                        },
                    )
                })
                .collect(),
            ..ParsedReport::default()
        }
    }

    #[test]
    fn an_exit_status_that_contradicts_the_report_is_named() {
        use Outcome::*;
        let says = |code, outcomes: &[Outcome]| disagreement(Some(code), &report(outcomes));
        assert!(says(1, &[Passed, Skipped]).is_some_and(|w| w.contains("exited 1")));
        assert!(says(101, &[Passed]).is_some_and(|w| w.contains("exited 101")));
        assert!(says(0, &[Passed, Failed]).is_some_and(|w| w.contains("1 failing")));
        assert!(says(0, &[Error]).is_some());
        // Agreeing, or nothing to contradict.
        assert_eq!(says(0, &[Passed, Skipped]), None);
        assert_eq!(says(1, &[Passed, Failed]), None);
        assert_eq!(says(1, &[]), None);
        assert_eq!(disagreement(None, &report(&[Passed])), None);
    }
}
