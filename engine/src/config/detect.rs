//! Project detection for `tdd init`: markers at the root and one level down.
//!
//! Detection only proposes; the written `tdd.toml` declares roots explicitly
//! and is reviewed by a person. Directories that look like code but carry no
//! marker are reported as unclassified instead of guessed at.
//!
//! Where tests are comes first from what the project declares (pytest's
//! `testpaths`, the paths in `package.json`'s test script), then from the test
//! files on disk, and last from the ecosystem's convention; the first that
//! matches at least one test file wins, and a proposal that matches none says so.

use std::path::Path;

use serde::Deserialize;
use serde::Serialize;

use super::AdapterKind;
use super::declared;
use super::layout;

/// One project found by its marker file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DetectedProject {
    /// The proposed `[project.NAME]` name.
    pub name: String,
    /// Root relative to the work tree (`.` for the root itself).
    pub root: String,
    /// The adapter the marker implies.
    pub adapter: AdapterKind,
    /// The marker file that decided it.
    pub marker: String,
    /// Proposed test globs, relative to the project root.
    pub test_paths: Vec<String>,
    /// Proposed implementation lock globs, relative to the project root.
    pub impl_globs: Vec<String>,
    /// Proposed test lock globs, relative to the project root.
    pub test_globs: Vec<String>,
    /// Where the test paths came from: a manifest, `test files on disk`, or
    /// `convention`.
    pub test_paths_from: String,
    /// How many files under the root the test paths match as tests.
    pub tests_matched: usize,
    /// Flags the project's test script gives the runner, passed on every run.
    pub runner_args: Vec<String>,
}

/// Everything detection found under a work-tree root.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Detection {
    /// Projects, root first, then subdirectories in name order.
    pub projects: Vec<DetectedProject>,
    /// Subdirectories with no marker, when the root itself is not a project.
    pub unclassified: Vec<String>,
    /// What a person should look at before committing the proposal.
    pub warnings: Vec<String>,
}

/// tdd-enforcer's `.tdd/rules.json`, imported by `tdd init`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EnforcerRules {
    /// Globs locked during RED (implementation files).
    #[serde(default)]
    pub blocked_in_red: Vec<String>,
    /// Globs locked during GREEN (test files).
    #[serde(default)]
    pub blocked_in_green: Vec<String>,
    /// Gate commands, each judged by its exit code.
    #[serde(default)]
    pub test_commands: Vec<String>,
    /// Timeout per command in seconds.
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
}

/// Detects projects at `root` and one directory level below it.
pub fn detect(root: &Path) -> Detection {
    let mut detection = Detection::default();
    let root_project = classify(root);
    let skip_children = root_project
        .as_ref()
        .is_some_and(|(adapter, _)| *adapter == AdapterKind::Cargo && is_cargo_workspace(root));
    if let Some((adapter, marker)) = &root_project {
        let name = |d: &declared::Declared| {
            d.name
                .clone()
                .unwrap_or_else(|| adapter.as_str().to_string())
        };
        let project = proposal(root, name, ".", *adapter, marker, &mut detection.warnings);
        detection.projects.push(project);
    }
    let mut children: Vec<String> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.') && !layout::SKIPPED.contains(&n.as_str()))
        .collect();
    children.sort();
    for child in children {
        match classify(&root.join(&child)) {
            Some((AdapterKind::Cargo, _))
                if !skip_children && is_cargo_fuzz(&root.join(&child)) =>
            {
                detection.warnings.push(format!(
                    "{child}/ is a cargo-fuzz crate (fuzz targets, no tests): not proposed as a project"
                ));
            }
            Some((AdapterKind::Cargo, _))
                if !skip_children
                    && !detection.projects.is_empty()
                    && !has_rust_tests(&root.join(&child)) =>
            {
                detection.warnings.push(format!(
                    "{child}/ is a crate with no test in it: not proposed as a project (add a [project.NAME] table with root = \"{child}\" once it has tests)"
                ));
            }
            Some((adapter, marker)) if !skip_children => {
                let mut name = declared::sanitize(&child);
                if detection.projects.iter().any(|p| p.name == name) {
                    name = format!("{name}-{}", adapter.as_str());
                }
                let dir = root.join(&child);
                let project = proposal(
                    &dir,
                    |_| name,
                    &child,
                    adapter,
                    &marker,
                    &mut detection.warnings,
                );
                detection.projects.push(project);
            }
            Some(_) => {}
            None if root_project.is_none() => detection.unclassified.push(child),
            None => {}
        }
    }
    detection
}

/// The adapter a directory's marker files imply, with the marker that decided it.
fn classify(dir: &Path) -> Option<(AdapterKind, String)> {
    if dir.join("Cargo.toml").is_file() {
        return Some((AdapterKind::Cargo, "Cargo.toml".into()));
    }
    if dir.join("go.mod").is_file() {
        return Some((AdapterKind::Go, "go.mod".into()));
    }
    if let Some(adapter) = node_runner(&dir.join("package.json")) {
        return Some((adapter, "package.json".into()));
    }
    ["pyproject.toml", "pytest.ini", "setup.cfg", "tox.ini"]
        .into_iter()
        .find(|m| dir.join(m).is_file())
        .map(|m| (AdapterKind::Pytest, m.to_string()))
}

/// The JavaScript runner a `package.json` uses, from its dependencies or scripts.
fn node_runner(path: &Path) -> Option<AdapterKind> {
    let text = crate::read::regular_text(path).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    let has_dep = |name: &str| {
        ["dependencies", "devDependencies", "peerDependencies"]
            .iter()
            .any(|section| json.get(section).and_then(|d| d.get(name)).is_some())
    };
    for (name, adapter) in [
        ("vitest", AdapterKind::Vitest),
        ("jest", AdapterKind::Jest),
        ("mocha", AdapterKind::Mocha),
    ] {
        if has_dep(name) {
            return Some(adapter);
        }
    }
    let scripts = json.get("scripts").and_then(|s| s.as_object())?;
    scripts
        .values()
        .filter_map(|v| v.as_str())
        .any(|s| s.contains("node --test"))
        .then_some(AdapterKind::NodeTest)
}

/// Whether the crate at `dir` is a cargo-fuzz crate (`[package.metadata] cargo-fuzz =
/// true`): it holds fuzz targets run by `cargo fuzz`, and `cargo test` finds no test in it.
fn is_cargo_fuzz(dir: &Path) -> bool {
    crate::read::regular_text(&dir.join("Cargo.toml"))
        .ok()
        .and_then(|t| t.parse::<toml::Table>().ok())
        .is_some_and(|t| {
            t.get("package")
                .and_then(|p| p.get("metadata"))
                .and_then(|m| m.get("cargo-fuzz"))
                .and_then(toml::Value::as_bool)
                == Some(true)
        })
}

/// Whether any Rust file of the crate at `dir` (outside its build output) holds a test:
/// a `#[test]`-like attribute (`#[tokio::test]`, `#[rstest]`) or a `#[cfg(test)]`
/// module. Looks at 5,000 files at most, and counts a crate it could not finish
/// reading as having tests.
fn has_rust_tests(dir: &Path) -> bool {
    const MAX_FILES: usize = 5000;
    const MARKS: &[&str] = &[
        "#[test",
        "::test]",
        "#[cfg(test)",
        "#[rstest",
        "#[test_case",
    ];
    let walk = ignore::WalkBuilder::new(dir)
        .hidden(true)
        .filter_entry(|e| e.file_name() != "target")
        .build();
    let mut seen = 0;
    for entry in walk.flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file())
            || entry.path().extension().is_none_or(|e| e != "rs")
        {
            continue;
        }
        seen += 1;
        if seen > MAX_FILES {
            return true;
        }
        let Ok(text) = crate::read::regular_text(entry.path()) else {
            continue;
        };
        if MARKS.iter().any(|mark| text.contains(mark)) {
            return true;
        }
    }
    false
}

fn is_cargo_workspace(root: &Path) -> bool {
    crate::read::regular_text(&root.join("Cargo.toml"))
        .ok()
        .and_then(|t| t.parse::<toml::Table>().ok())
        .is_some_and(|t| t.contains_key("workspace"))
}

/// The proposal for the project at `dir` (`root` relative to the work tree), named by
/// `name` from what it declares; test paths and lock globs from [`test_paths`]. What a
/// person should check is added to `warnings`.
fn proposal(
    dir: &Path,
    name: impl FnOnce(&declared::Declared) -> String,
    root: &str,
    adapter: AdapterKind,
    marker: &str,
    warnings: &mut Vec<String>,
) -> DetectedProject {
    let declared = declared::read(dir, adapter);
    let name = name(&declared);
    let label = format!("project {name} ({root})");
    let (test_paths, test_paths_from, tests_matched) =
        test_paths(dir, adapter, &declared, &label, warnings);
    let (impl_globs, test_globs) = layout::locks(adapter, &test_paths);
    DetectedProject {
        name,
        root: root.to_string(),
        adapter,
        marker: marker.to_string(),
        test_paths,
        impl_globs,
        test_globs,
        test_paths_from,
        tests_matched,
        runner_args: declared.runner_args,
    }
}

/// The test paths of the project at `dir`, where they came from and how many test
/// files they match: what it declares, else its test files on disk, else the
/// convention, whichever first matches a test file. A declaration that matches none,
/// and a project without any test, add a warning about `label`.
fn test_paths(
    dir: &Path,
    adapter: AdapterKind,
    declared: &declared::Declared,
    label: &str,
    warnings: &mut Vec<String>,
) -> (Vec<String>, String, usize) {
    let files = layout::files(dir);
    let matched = |entries: &[String]| layout::matched(adapter, dir, entries, &files);
    if let Some(from) = &declared.test_paths_from {
        let entries = if adapter == AdapterKind::Cargo {
            [layout::convention(adapter), declared.test_paths.clone()].concat()
        } else {
            declared.test_paths.clone()
        };
        match matched(&entries) {
            0 => warnings.push(format!(
                "{label}: {from} names {}, which matches no test file; \
                 proposing the test files found on disk instead",
                declared.test_paths.join(", ")
            )),
            n => return (entries, from.clone(), n),
        }
    }
    let entries = layout::discovered(adapter, &files);
    match matched(&entries) {
        0 => {}
        n => return (entries, "test files on disk".to_string(), n),
    }
    let entries = layout::convention(adapter);
    let n = matched(&entries);
    if n == 0 {
        warnings.push(format!(
            "{label}: no test file found; test_paths is the {adapter} convention ({}). \
             Add a test there, or edit test_paths, then run `tdd test --all`",
            entries.join(", ")
        ));
    }
    (entries, "convention".to_string(), n)
}

/// Renders a reviewed-by-a-person `tdd.toml` for a detection and optional imported rules.
pub fn render_config(detection: &Detection, rules: Option<&EnforcerRules>) -> String {
    let mut out = String::from(
        "# tdd.toml: the projects tdd observes, and the files each phase locks.\n\
         # Written by `tdd init`; review it, then commit it. Every key: docs/config.md.\n",
    );
    let imported_command = rules
        .filter(|r| !r.test_commands.is_empty() && detection.projects.len() == 1)
        .map(|r| r.test_commands.join(" && "));
    for project in &detection.projects {
        out.push_str(&format!(
            "\n# Detected from {}/{}.\n",
            project.root, project.marker
        ));
        out.push_str(&format!("[project.{}]\n", toml_key(&project.name)));
        out.push_str(&format!("root = {}\n", toml_string(&project.root)));
        out.push_str(&format!(
            "adapter = {}\n",
            toml_string(project.adapter.as_str())
        ));
        out.push_str(&format!(
            "# Test paths from {}: {} test file(s) match.\n",
            project.test_paths_from, project.tests_matched
        ));
        out.push_str(&format!(
            "test_paths = {}\n",
            toml_list(&project.test_paths)
        ));
        if !project.runner_args.is_empty() {
            out.push_str("# From package.json's test script.\n");
            out.push_str(&format!(
                "runner_args = {}\n",
                toml_list(&project.runner_args)
            ));
        }
        if let Some(command) = &imported_command {
            out.push_str("# Imported from .tdd/rules.json (testCommands).\n");
            out.push_str(&format!("test_command = {}\n", toml_string(command)));
        }
        if let Some(timeout) = rules.and_then(|r| r.timeout_seconds) {
            out.push_str(&format!("timeout = {timeout}\n"));
        }
        if rules.is_none() {
            out.push_str(&format!("\n[project.{}.locks]\n", toml_key(&project.name)));
            out.push_str(
                "# Relative to the project root. RED locks impl; GREEN and REFACTOR lock test.\n",
            );
            out.push_str(&format!("impl = {}\n", toml_list(&project.impl_globs)));
            out.push_str(&format!("test = {}\n", toml_list(&project.test_globs)));
        }
    }
    if let Some(rules) = rules {
        out.push_str(
            "\n# Imported from .tdd/rules.json (blockedInRed, blockedInGreen).\n[locks]\n",
        );
        out.push_str(&format!("impl = {}\n", toml_list(&rules.blocked_in_red)));
        out.push_str(&format!("test = {}\n", toml_list(&rules.blocked_in_green)));
    }
    out
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn toml_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| toml_string(s)).collect();
    format!("[{}]", quoted.join(", "))
}

fn toml_key(key: &str) -> String {
    if key
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && !key.is_empty()
    {
        key.to_string()
    } else {
        toml_string(key)
    }
}
