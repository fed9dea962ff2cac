//! Where a project's tests are on disk, and the test paths and lock globs that cover
//! them, for `tdd init`.
//!
//! A `test_paths` entry is a file, a directory ending in `/` (everything under it),
//! or a glob where `*` stays inside one directory, as a shell expands it.

use std::path::Path;

use globset::GlobBuilder;
use globset::GlobMatcher;

use super::AdapterKind;

/// Directories never walked, nor taken for projects: dependencies, build output,
/// caches.
pub(super) const SKIPPED: &[&str] = &[
    "node_modules",
    "target",
    "vendor",
    "dist",
    "build",
    "venv",
    "__pycache__",
    "third_party",
    "coverage",
];

/// How many files a walk reads at most, so that init stays fast on a huge tree.
const MAX_FILES: usize = 100_000;

/// JavaScript and TypeScript source extensions.
const JS_EXTENSIONS: &[&str] = &[".js", ".mjs", ".cjs", ".jsx", ".ts", ".mts", ".cts", ".tsx"];

/// The files under `dir`, relative and `/`-separated, sorted; hidden entries and
/// dependency or build directories are left out.
pub fn files(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&next) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if !SKIPPED.contains(&name.as_str()) {
                    pending.push(entry.path());
                }
            } else if kind.is_file()
                && let Ok(relative) = entry.path().strip_prefix(dir)
            {
                found.push(relative.to_string_lossy().replace('\\', "/"));
                if found.len() >= MAX_FILES {
                    found.sort();
                    return found;
                }
            }
        }
    }
    found.sort();
    found
}

fn base_name(file: &str) -> &str {
    file.rsplit('/').next().unwrap_or(file)
}

fn is_js(file: &str) -> bool {
    JS_EXTENSIONS.iter().any(|x| file.ends_with(x)) && !file.ends_with(".d.ts")
}

/// Whether `file` holds tests by `adapter`'s own naming rules. For cargo, `contents`
/// reads a file to look for `#[test]`.
fn is_test_file(adapter: AdapterKind, file: &str, contents: &dyn Fn(&str) -> String) -> bool {
    let name = base_name(file);
    match adapter {
        AdapterKind::Pytest => {
            name.ends_with(".py") && (name.starts_with("test_") || name.ends_with("_test.py"))
        }
        AdapterKind::Go => name.ends_with("_test.go"),
        AdapterKind::Cargo => {
            file.ends_with(".rs")
                && (file.starts_with("tests/") || contents(file).contains("#[test]"))
        }
        AdapterKind::Vitest | AdapterKind::Jest | AdapterKind::Mocha | AdapterKind::NodeTest => {
            is_js(file) && js_rule(file).is_some()
        }
        AdapterKind::Junit => false,
    }
}

/// The conventional entry a JavaScript test file falls under, if any.
fn js_rule(file: &str) -> Option<&'static str> {
    let name = base_name(file);
    if file.starts_with("test/") {
        Some("test/")
    } else if file.starts_with("tests/") {
        Some("tests/")
    } else if file.contains("__tests__/") {
        Some("**/__tests__/**")
    } else if name.contains(".test.") {
        Some("**/*.test.*")
    } else if name.contains(".spec.") {
        Some("**/*.spec.*")
    } else {
        None
    }
}

/// A glob as a shell reads it: `*` never crosses a `/`.
fn matcher(glob: &str) -> Option<GlobMatcher> {
    GlobBuilder::new(glob)
        .literal_separator(true)
        .build()
        .ok()
        .map(|g| g.compile_matcher())
}

/// One `test_paths` entry, ready to test files against.
enum Entry {
    Dir(String),
    Glob(GlobMatcher),
    File(String),
}

impl Entry {
    fn new(entry: &str) -> Option<Entry> {
        if entry.ends_with('/') {
            Some(Entry::Dir(entry.to_string()))
        } else if entry.contains(['*', '?', '[', '{']) {
            matcher(entry).map(Entry::Glob)
        } else {
            Some(Entry::File(entry.to_string()))
        }
    }

    fn covers(&self, file: &str) -> bool {
        match self {
            Entry::Dir(dir) => file.starts_with(dir.as_str()),
            Entry::Glob(glob) => glob.is_match(file),
            Entry::File(path) => {
                file == path
                    || file
                        .strip_prefix(path.as_str())
                        .is_some_and(|rest| rest.starts_with('/'))
            }
        }
    }
}

/// How many of `files` (under `dir`) the `entries` cover as test files of `adapter`.
/// A JavaScript file named by an entry counts whatever its name, since the runner is
/// handed it; a Python file must still be named as pytest collects it.
pub fn matched(adapter: AdapterKind, dir: &Path, entries: &[String], files: &[String]) -> usize {
    let entries: Vec<Entry> = entries.iter().filter_map(|e| Entry::new(e)).collect();
    let contents = |file: &str| crate::read::regular_text(&dir.join(file)).unwrap_or_default();
    let js = matches!(
        adapter,
        AdapterKind::Vitest | AdapterKind::Jest | AdapterKind::Mocha | AdapterKind::NodeTest
    );
    files
        .iter()
        .filter(|f| entries.iter().any(|e| e.covers(f)))
        .filter(|f| {
            if js {
                is_js(f)
            } else {
                is_test_file(adapter, f, &contents)
            }
        })
        .count()
}

/// Entries that cover the test files found on disk: for pytest each directory holding
/// one (a file at the root stands for itself), for JavaScript each conventional place
/// that holds one, in name order; the convention for the others.
pub fn discovered(adapter: AdapterKind, files: &[String]) -> Vec<String> {
    let never = |_: &str| String::new();
    let mut entries: Vec<String> = Vec::new();
    match adapter {
        AdapterKind::Pytest => {
            for file in files.iter().filter(|f| is_test_file(adapter, f, &never)) {
                let entry = match file.rsplit_once('/') {
                    Some((parent, _)) => format!("{parent}/"),
                    None => file.clone(),
                };
                if !entries.contains(&entry) {
                    entries.push(entry);
                }
            }
            // A directory inside another one already listed adds nothing.
            let all = entries.clone();
            entries.retain(|e| {
                !all.iter()
                    .any(|o| o != e && o.ends_with('/') && e.starts_with(o.as_str()))
            });
        }
        AdapterKind::Vitest | AdapterKind::Jest | AdapterKind::Mocha | AdapterKind::NodeTest => {
            for rule in files.iter().filter(|f| is_js(f)).filter_map(|f| js_rule(f)) {
                if !entries.iter().any(|e| e == rule) {
                    entries.push(rule.to_string());
                }
            }
        }
        AdapterKind::Cargo | AdapterKind::Go | AdapterKind::Junit => return convention(adapter),
    }
    entries.sort();
    entries
}

/// Where `adapter`'s ecosystem usually keeps tests.
pub fn convention(adapter: AdapterKind) -> Vec<String> {
    let entries: &[&str] = match adapter {
        AdapterKind::Cargo => &["tests/**/*.rs", "src/**/tests.rs", "src/**/tests/**"],
        AdapterKind::Pytest => &["tests/"],
        AdapterKind::Go => &["**/*_test.go"],
        AdapterKind::Vitest
        | AdapterKind::Jest
        | AdapterKind::Mocha
        | AdapterKind::NodeTest
        | AdapterKind::Junit => &["**/*.test.*", "**/*.spec.*", "**/__tests__/**", "test/"],
    };
    entries.iter().map(|s| s.to_string()).collect()
}

/// An entry as a lock glob: a directory stands for everything under it.
fn as_glob(entry: &str) -> String {
    match entry.strip_suffix('/') {
        Some(dir) => format!("{dir}/**"),
        None => entry.to_string(),
    }
}

/// The implementation and test lock globs for tests at `entries`: every test file is
/// locked as a test, and every source file of the language that is not a test (at the
/// root too) as implementation.
pub fn locks(adapter: AdapterKind, entries: &[String]) -> (Vec<String>, Vec<String>) {
    let mut test: Vec<String> = entries.iter().map(|e| as_glob(e)).collect();
    let (sources, named): (&[&str], &[&str]) = match adapter {
        AdapterKind::Pytest => (
            &["**/*.py"],
            &["**/test_*.py", "**/*_test.py", "**/conftest.py"],
        ),
        AdapterKind::Go => (&["**/*.go"], &["**/*_test.go", "**/testdata/**"]),
        AdapterKind::Cargo => (&["src/**"], &["tests/**"]),
        AdapterKind::Vitest
        | AdapterKind::Jest
        | AdapterKind::Mocha
        | AdapterKind::NodeTest
        | AdapterKind::Junit => (
            &[
                "**/*.js", "**/*.mjs", "**/*.cjs", "**/*.jsx", "**/*.ts", "**/*.mts", "**/*.cts",
                "**/*.tsx",
            ],
            &["**/*.test.*", "**/*.spec.*", "**/__tests__/**"],
        ),
    };
    for glob in named {
        if !test.iter().any(|t| t == glob) {
            test.push(glob.to_string());
        }
    }
    let mut implementation: Vec<String> = sources.iter().map(|s| s.to_string()).collect();
    implementation.extend(test.iter().map(|t| format!("!{t}")));
    if matches!(
        adapter,
        AdapterKind::Vitest | AdapterKind::Jest | AdapterKind::Mocha | AdapterKind::NodeTest
    ) {
        implementation.push("!node_modules/**".to_string());
    }
    (implementation, test)
}

#[cfg(test)]
#[path = "layout_tests.rs"]
mod tests;
