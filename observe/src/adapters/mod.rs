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
