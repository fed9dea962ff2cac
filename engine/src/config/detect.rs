//! Project detection for `tdd init`: markers at the root and one level down.
//!
//! Detection only proposes; the written `tdd.toml` declares roots explicitly
//! and is reviewed by a person. Directories that look like code but carry no
//! marker are reported as unclassified instead of guessed at.

use std::path::Path;

use serde::Deserialize;
use serde::Serialize;

use super::AdapterKind;

/// Directories never treated as project roots.
const SKIPPED_DIRS: &[&str] = &[
    "node_modules",
    "target",
    "vendor",
    "dist",
    "build",
    "venv",
    "__pycache__",
    "third_party",
];

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
}

/// Everything detection found under a work-tree root.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Detection {
    /// Projects, root first, then subdirectories in name order.
    pub projects: Vec<DetectedProject>,
    /// Subdirectories with no marker, when the root itself is not a project.
    pub unclassified: Vec<String>,
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
        detection
            .projects
            .push(proposal(adapter.as_str(), ".", *adapter, marker));
    }
    let mut children: Vec<String> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.') && !SKIPPED_DIRS.contains(&n.as_str()))
        .collect();
    children.sort();
    for child in children {
        match classify(&root.join(&child)) {
            Some((adapter, marker)) if !skip_children => {
                let mut name = sanitize(&child);
                if detection.projects.iter().any(|p| p.name == name) {
                    name = format!("{name}-{}", adapter.as_str());
                }
                detection
                    .projects
                    .push(proposal(&name, &child, adapter, &marker));
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
    let text = std::fs::read_to_string(path).ok()?;
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

fn is_cargo_workspace(root: &Path) -> bool {
    std::fs::read_to_string(root.join("Cargo.toml"))
        .ok()
        .and_then(|t| t.parse::<toml::Table>().ok())
        .is_some_and(|t| t.contains_key("workspace"))
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Test paths and lock globs that fit each ecosystem's usual layout.
fn proposal(name: &str, root: &str, adapter: AdapterKind, marker: &str) -> DetectedProject {
    let (test_paths, impl_globs, test_globs) = match adapter {
        AdapterKind::Cargo => (
            strings(&["tests/**/*.rs", "src/**/tests.rs", "src/**/tests/**"]),
            strings(&["src/**", "!src/**/tests.rs", "!src/**/tests/**"]),
            strings(&["tests/**", "src/**/tests.rs", "src/**/tests/**"]),
        ),
        AdapterKind::Pytest => (
            strings(&["tests/"]),
            strings(&[
                "**/*.py",
                "!tests/**",
                "!**/test_*.py",
                "!**/*_test.py",
                "!**/conftest.py",
            ]),
            strings(&["tests/**", "**/test_*.py", "**/*_test.py", "**/conftest.py"]),
        ),
        AdapterKind::Go => (
            strings(&["**/*_test.go"]),
            strings(&["**/*.go", "!**/*_test.go"]),
            strings(&["**/*_test.go", "**/testdata/**"]),
        ),
        AdapterKind::Vitest
        | AdapterKind::Jest
        | AdapterKind::Mocha
        | AdapterKind::NodeTest
        | AdapterKind::Junit => (
            strings(&["**/*.test.*", "**/*.spec.*", "**/__tests__/**", "test/**"]),
            strings(&[
                "src/**",
                "lib/**",
                "!**/*.test.*",
                "!**/*.spec.*",
                "!**/__tests__/**",
            ]),
            strings(&[
                "**/*.test.*",
                "**/*.spec.*",
                "**/__tests__/**",
                "test/**",
                "tests/**",
            ]),
        ),
    };
    DetectedProject {
        name: name.to_string(),
        root: root.to_string(),
        adapter,
        marker: marker.to_string(),
        test_paths,
        impl_globs,
        test_globs,
    }
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
            "test_paths = {}\n",
            toml_list(&project.test_paths)
        ));
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
