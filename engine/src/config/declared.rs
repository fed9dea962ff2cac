//! What a project already declares about itself, read from its own manifests for
//! `tdd init`: its package name, where its tests are (pytest's `testpaths`, the
//! paths in `package.json`'s test script, Cargo's `[[test]]` targets) and the flags
//! its test script gives the runner.
//!
//! Reading never fails: a manifest that is missing or does not parse declares
//! nothing, and detection falls back to what it finds on disk.

use std::path::Path;

use super::AdapterKind;

/// What one project's manifests declare.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Declared {
    /// The package's own name, made fit for a `[project.NAME]` key.
    pub name: Option<String>,
    /// Where the project says its tests are, relative to its root: files, globs or
    /// directories (a directory ends with `/`).
    pub test_paths: Vec<String>,
    /// Where those paths were declared (`pytest.ini (testpaths)`).
    pub test_paths_from: Option<String>,
    /// Flags the project's test script gives the runner that change which tests exist
    /// or how they load (mocha's `--ui tdd`), to pass on every run.
    pub runner_args: Vec<String>,
}

/// Reads what the project at `dir` declares for `adapter`.
pub fn read(dir: &Path, adapter: AdapterKind) -> Declared {
    match adapter {
        AdapterKind::Pytest => python(dir),
        AdapterKind::Cargo => cargo(dir),
        AdapterKind::Go => go(dir),
        AdapterKind::Vitest | AdapterKind::Jest | AdapterKind::Mocha | AdapterKind::NodeTest => {
            node(dir, adapter)
        }
        AdapterKind::Junit => Declared::default(),
    }
}

/// A `[project.NAME]` key from a package name: its last `/` segment (npm scopes, Go
/// module paths), lower-cased, with anything but letters, digits, `-` and `_` as `_`.
pub fn key_of(name: &str) -> Option<String> {
    let last = name.trim().trim_end_matches('/').rsplit('/').next()?;
    let key = sanitize(last);
    (!key.is_empty() && key.chars().any(|c| c.is_ascii_alphanumeric())).then_some(key)
}

/// `name` lower-cased, with anything but letters, digits, `-` and `_` as `_`.
pub(crate) fn sanitize(name: &str) -> String {
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

fn read_toml(path: &Path) -> Option<toml::Table> {
    crate::read::regular_text(path).ok()?.parse().ok()
}

fn toml_str<'a>(table: &'a toml::Table, path: &[&str]) -> Option<&'a toml::Value> {
    let (last, parents) = path.split_last()?;
    let mut table = table;
    for key in parents {
        table = table.get(*key)?.as_table()?;
    }
    table.get(*last)
}

/// The value of `key` in `[section]` of an INI file, continuation lines joined.
fn ini_value(text: &str, section: &str, key: &str) -> Option<String> {
    let mut in_section = false;
    let mut value: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            if value.is_some() {
                break;
            }
            in_section = trimmed == format!("[{section}]");
            continue;
        }
        if !in_section || trimmed.starts_with(['#', ';']) {
            continue;
        }
        match &mut value {
            Some(v) if line.starts_with([' ', '\t']) && !trimmed.is_empty() => {
                v.push(' ');
                v.push_str(trimmed);
            }
            Some(_) => break,
            None => {
                if let Some((k, v)) = trimmed.split_once(['=', ':'])
                    && k.trim() == key
                {
                    value = Some(v.trim().to_string());
                }
            }
        }
    }
    value
}

/// pytest's `testpaths`, in the order pytest itself looks for its configuration, and
/// the package name from `pyproject.toml` or `setup.cfg`.
fn python(dir: &Path) -> Declared {
    let pyproject = read_toml(&dir.join("pyproject.toml"));
    let setup_cfg = crate::read::regular_text(&dir.join("setup.cfg")).unwrap_or_default();
    let name = pyproject
        .as_ref()
        .and_then(|t| {
            toml_str(t, &["project", "name"]).or_else(|| toml_str(t, &["tool", "poetry", "name"]))
        })
        .and_then(|v| v.as_str().map(str::to_string))
        .or_else(|| ini_value(&setup_cfg, "metadata", "name"))
        .and_then(|n| key_of(&n));
    let mut declared = Declared {
        name,
        ..Declared::default()
    };
    let ini = |file: &str, section: &str| {
        crate::read::regular_text(&dir.join(file))
            .ok()
            .map(|text| ini_value(&text, section, "testpaths"))
    };
    let found: Option<(String, Vec<String>)> = match ini("pytest.ini", "pytest") {
        Some(paths) => paths.map(|p| ("pytest.ini".to_string(), split_words(&p))),
        None => pyproject
            .as_ref()
            .and_then(|t| toml_str(t, &["tool", "pytest", "ini_options", "testpaths"]))
            .map(|v| {
                let paths = match v {
                    toml::Value::String(s) => split_words(s),
                    toml::Value::Array(items) => items
                        .iter()
                        .filter_map(|i| i.as_str().map(str::to_string))
                        .collect(),
                    _ => Vec::new(),
                };
                ("pyproject.toml".to_string(), paths)
            })
            .or_else(|| {
                ini("tox.ini", "pytest")
                    .flatten()
                    .map(|p| ("tox.ini".to_string(), split_words(&p)))
            })
            .or_else(|| {
                ini_value(&setup_cfg, "tool:pytest", "testpaths")
                    .map(|p| ("setup.cfg".to_string(), split_words(&p)))
            }),
    };
    if let Some((file, paths)) = found.filter(|(_, p)| !p.is_empty()) {
        declared.test_paths = paths.iter().map(|p| as_entry(dir, p)).collect();
        declared.test_paths_from = Some(format!("{file} (testpaths)"));
    }
    declared
}

fn split_words(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_string).collect()
}

/// A declared path as a `test_paths` entry: `./` dropped, a directory ending in `/`.
fn as_entry(dir: &Path, path: &str) -> String {
    let path = path.trim_start_matches("./").trim_end_matches('/');
    if dir.join(path).is_dir() && !path.contains(['*', '?', '[', '{']) {
        format!("{path}/")
    } else {
        path.to_string()
    }
}

/// The crate's name (or the workspace root package's), and the `[[test]]` targets
/// whose files lie outside `tests/`.
fn cargo(dir: &Path) -> Declared {
    let Some(manifest) = read_toml(&dir.join("Cargo.toml")) else {
        return Declared::default();
    };
    let name = toml_str(&manifest, &["package", "name"])
        .and_then(|v| v.as_str())
        .and_then(key_of);
    let test_paths: Vec<String> = manifest
        .get("test")
        .and_then(|t| t.as_array())
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("path")?.as_str())
        .map(|p| p.trim_start_matches("./").to_string())
        .filter(|p| !p.starts_with("tests/"))
        .collect();
    let from = (!test_paths.is_empty()).then(|| "Cargo.toml ([[test]] path)".to_string());
    Declared {
        name,
        test_paths,
        test_paths_from: from,
        runner_args: Vec::new(),
    }
}

/// The last segment of the module path that is not a major-version suffix (`v2`).
fn go(dir: &Path) -> Declared {
    let text = crate::read::regular_text(&dir.join("go.mod")).unwrap_or_default();
    let module = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("module "))
        .map(|m| m.trim().trim_matches('"'));
    let name = module.and_then(|m| {
        let mut segments = m.rsplit('/');
        let last = segments.next()?;
        let is_major = last.len() > 1
            && last.starts_with('v')
            && last[1..].chars().all(|c| c.is_ascii_digit());
        key_of(if is_major { segments.next()? } else { last })
    });
    Declared {
        name,
        ..Declared::default()
    }
}

/// Mocha flags that take a value and that tdd keeps: they decide which tests exist
/// and how files load.
const MOCHA_KEPT_WITH_VALUE: &[&str] = &[
    "-u",
    "--ui",
    "-r",
    "--require",
    "--extension",
    "--file",
    "--ignore",
    "--exclude",
    "-t",
    "--timeout",
    "--node-option",
    "-n",
];

/// Mocha flags without a value that tdd keeps.
const MOCHA_KEPT: &[&str] = &["--recursive", "--full-trace", "--check-leaks", "--exit"];

/// Flags of any runner that take a value tdd drops (reporters, filters, config files).
const DROPPED_WITH_VALUE: &[&str] = &[
    "-R",
    "--reporter",
    "-O",
    "--reporter-option",
    "--reporter-options",
    "-g",
    "--grep",
    "-f",
    "--fgrep",
    "--test-reporter",
    "--test-reporter-destination",
    "--test-name-pattern",
    "--config",
    "-c",
];

/// The package name, and from `scripts.test` the paths and flags it gives `adapter`'s
/// runner.
fn node(dir: &Path, adapter: AdapterKind) -> Declared {
    let json: serde_json::Value = crate::read::regular_text(&dir.join("package.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let mut declared = Declared {
        name: json["name"].as_str().and_then(key_of),
        ..Declared::default()
    };
    let Some(script) = json["scripts"]["test"].as_str() else {
        return declared;
    };
    let Some(words) = runner_words(script, adapter) else {
        return declared;
    };
    let mut words = words.into_iter();
    while let Some(word) = words.next() {
        let (flag, inline) = match word.split_once('=') {
            Some((f, v)) if word.starts_with('-') => (f.to_string(), Some(v.to_string())),
            _ => (word.clone(), None),
        };
        if flag.starts_with('-') {
            let takes_value = MOCHA_KEPT_WITH_VALUE.contains(&flag.as_str())
                || DROPPED_WITH_VALUE.contains(&flag.as_str());
            let value = match (&inline, takes_value) {
                (None, true) => words.next(),
                _ => None,
            };
            let kept = adapter == AdapterKind::Mocha
                && (MOCHA_KEPT.contains(&flag.as_str())
                    || MOCHA_KEPT_WITH_VALUE.contains(&flag.as_str()));
            if kept {
                declared.runner_args.push(word.clone());
                declared.runner_args.extend(value);
            }
            continue;
        }
        let path = word.trim_start_matches("./");
        let looks_like_path = path.contains(['*', '?', '{'])
            || [".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".jsx", ".tsx"]
                .iter()
                .any(|x| path.ends_with(x))
            || dir.join(path).exists();
        if looks_like_path && !path.is_empty() {
            declared.test_paths.push(as_entry(dir, path));
        }
    }
    if !declared.test_paths.is_empty() {
        declared.test_paths_from = Some("package.json (scripts.test)".into());
    }
    declared
}

/// The words after the runner in the first command of `script` that runs it (`node
/// --test`, `mocha`, `jest`, `vitest`), quotes removed; `None` when no command does.
fn runner_words(script: &str, adapter: AdapterKind) -> Option<Vec<String>> {
    let runner = match adapter {
        AdapterKind::NodeTest => "--test",
        AdapterKind::Mocha => "mocha",
        AdapterKind::Jest => "jest",
        AdapterKind::Vitest => "vitest",
        _ => return None,
    };
    script
        .split(['&', ';', '|'])
        .map(|command| {
            command
                .split_whitespace()
                .map(|w| w.trim_matches(['"', '\'']).to_string())
                .collect::<Vec<_>>()
        })
        .find_map(|words| {
            let at = words.iter().position(|w| {
                w == runner || w.ends_with(&format!("/{runner}")) || w == &format!("{runner}.js")
            })?;
            let mut rest = words[at + 1..].to_vec();
            // `vitest run` and `vitest watch` name a mode, not a path.
            if adapter == AdapterKind::Vitest
                && rest.first().is_some_and(|w| w == "run" || w == "watch")
            {
                rest.remove(0);
            }
            Some(rest)
        })
}

#[cfg(test)]
#[path = "declared_tests.rs"]
mod tests;
