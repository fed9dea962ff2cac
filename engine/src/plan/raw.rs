//! The plan's front-matter as written, and its validation into a [`Plan`].

use std::collections::BTreeSet;
use std::path::Path;

use serde::Deserialize;

use super::CycleKind;
use super::Plan;
use super::PlanError;
use super::PlannedCycle;

/// One value or a list of them, as tdd-cli's `project`/`projects` and `test`/`tests` allow.
#[derive(Debug)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl<'de> Deserialize<'de> for OneOrMany {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = OneOrMany;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string or a list of strings")
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<OneOrMany, E> {
                Ok(OneOrMany::One(v.to_string()))
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<OneOrMany, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<String>()? {
                    items.push(item);
                }
                Ok(OneOrMany::Many(items))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

impl OneOrMany {
    fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s],
            OneOrMany::Many(v) => v,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPlan {
    cycles: Vec<RawCycle>,
    #[serde(default)]
    annotation_keys: Vec<String>,
    #[serde(default)]
    ancillary_files: Vec<String>,
    /// Accepted and ignored, as tdd-cli does.
    #[serde(default)]
    #[expect(
        dead_code,
        reason = "accepted for tdd-cli compatibility, carries no meaning"
    )]
    tdd_plan: Option<serde_json::Value>,
    /// Accepted and ignored, as tdd-cli does.
    #[serde(default)]
    #[expect(
        dead_code,
        reason = "accepted for tdd-cli compatibility, carries no meaning"
    )]
    closes: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCycle {
    n: u32,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    project: Option<OneOrMany>,
    #[serde(default)]
    projects: Option<OneOrMany>,
    #[serde(default)]
    test: Option<OneOrMany>,
    #[serde(default)]
    tests: Option<OneOrMany>,
    #[serde(default)]
    files: Vec<String>,
    #[serde(default)]
    stub_expected: Vec<String>,
    #[serde(default)]
    modifies_tests: Vec<String>,
    #[serde(default)]
    harness: Vec<String>,
    #[serde(default)]
    changes_dependencies: bool,
    #[serde(default)]
    commit_red: Option<String>,
    #[serde(default)]
    commit_green: Option<String>,
    #[serde(default)]
    commit_refactor: Option<String>,
    #[serde(default)]
    commit_pin: Option<String>,
    #[serde(default)]
    pin_cycle: bool,
    #[serde(default)]
    contract_cycle: bool,
    #[serde(default)]
    refactor_cycle: bool,
    #[serde(default)]
    criterion: Option<String>,
    #[serde(default)]
    meta: Option<serde_json::Value>,
}

/// The front-matter text and the line (1-based) of the file it starts on.
fn front_matter(text: &str) -> Option<(&str, u64)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        let trimmed = line.trim_end();
        if trimmed == "---" || trimmed == "..." {
            return Some((&rest[..offset], 2));
        }
        offset += line.len();
    }
    None
}

pub(super) fn parse(path: &Path, text: &str, known: Option<&[String]>) -> Result<Plan, PlanError> {
    let (yaml, first_line) = front_matter(text).ok_or_else(|| PlanError::NoFrontMatter {
        path: path.to_path_buf(),
    })?;
    let raw: RawPlan = serde_saphyr::from_str(yaml).map_err(|err| {
        let (line, column) = err.location().map_or((1, 1), |l| (l.line(), l.column()));
        PlanError::Malformed {
            path: path.to_path_buf(),
            line: line + first_line - 1,
            column,
            message: first_line_of(&err.to_string()),
        }
    })?;
    validate(path, raw, known)
}

/// The message without the location the YAML library adds, with the nearest key for a typo.
fn first_line_of(message: &str) -> String {
    let first = message.lines().next().unwrap_or(message).trim();
    let first = first.split(" at line ").next().unwrap_or(first);
    let mut first = first.trim_start_matches("error: ");
    // "line 3 column 12: expected ..." carries the position the caller already reports.
    if first.starts_with("line ")
        && let Some((_, rest)) = first.split_once(": ")
    {
        first = rest;
    }
    let Some(rest) = first.strip_prefix("unknown field `") else {
        return first.to_string();
    };
    let field = rest.split('`').next().unwrap_or(rest);
    let expected: Vec<String> = first
        .split_once("expected one of ")
        .map(|(_, list)| {
            list.split(", ")
                .map(|k| k.trim_matches('`').to_string())
                .collect()
        })
        .unwrap_or_default();
    match crate::config::nearest_key(field, &expected) {
        Some(key) => format!("unknown key `{field}`; did you mean `{key}`?"),
        None => format!(
            "unknown key `{field}`; expected one of {}",
            expected.join(", ")
        ),
    }
}

fn invalid(path: &Path, message: String) -> PlanError {
    PlanError::Invalid {
        path: path.to_path_buf(),
        message,
    }
}

fn validate(path: &Path, raw: RawPlan, known: Option<&[String]>) -> Result<Plan, PlanError> {
    if raw.cycles.is_empty() {
        return Err(invalid(
            path,
            "`cycles` must list at least one cycle".into(),
        ));
    }
    let mut seen = BTreeSet::new();
    let mut cycles = Vec::with_capacity(raw.cycles.len());
    for cycle in raw.cycles {
        if !seen.insert(cycle.n) {
            return Err(invalid(path, format!("cycle n={} appears twice", cycle.n)));
        }
        cycles.push(validate_cycle(path, cycle, known)?);
    }
    cycles.sort_by_key(|c| c.n);
    Ok(Plan {
        cycles,
        annotation_keys: raw.annotation_keys,
        ancillary_files: raw.ancillary_files,
    })
}

fn validate_cycle(
    path: &Path,
    c: RawCycle,
    known: Option<&[String]>,
) -> Result<PlannedCycle, PlanError> {
    let n = c.n;
    let fail = |message: String| invalid(path, format!("cycle {n}: {message}"));
    let kind = match (c.pin_cycle, c.contract_cycle, c.refactor_cycle) {
        (false, false, false) => CycleKind::Standard,
        (true, false, false) => CycleKind::Pin,
        (false, true, false) => CycleKind::Contract,
        (false, false, true) => CycleKind::Refactor,
        _ => {
            return Err(fail(
                "pin_cycle, contract_cycle and refactor_cycle exclude each other".into(),
            ));
        }
    };
    let title = c
        .title
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| fail("`title` is required".into()))?;
    let projects = merge(c.project, c.projects)
        .ok_or_else(|| fail("give either `project` or `projects`, not both".into()))?;
    if projects.is_empty() {
        return Err(fail("`project` is required".into()));
    }
    if let Some(known) = known {
        for p in &projects {
            if !known.contains(p) {
                let hint = crate::config::nearest_key(p, known)
                    .map(|s| format!("; did you mean `{s}`?"))
                    .unwrap_or_default();
                return Err(fail(format!(
                    "project `{p}` is not declared in tdd.toml{hint}"
                )));
            }
        }
    }
    let tests = merge(c.test, c.tests)
        .ok_or_else(|| fail("give either `test` or `tests`, not both".into()))?;
    match (kind, tests.len()) {
        (CycleKind::Standard | CycleKind::Pin, 1)
        | (CycleKind::Contract, 2..)
        | (CycleKind::Refactor, 0) => {}
        (CycleKind::Standard | CycleKind::Pin, got) => {
            return Err(fail(format!("needs exactly one test, has {got}")));
        }
        (CycleKind::Contract, got) => {
            return Err(fail(format!(
                "a contract cycle needs two or more tests, has {got}"
            )));
        }
        (CycleKind::Refactor, got) => {
            return Err(fail(format!("a refactor cycle has no tests, has {got}")));
        }
    }
    Ok(PlannedCycle {
        n,
        title,
        kind,
        projects,
        tests,
        files: c.files,
        stub_expected: c.stub_expected,
        modifies_tests: c.modifies_tests,
        harness: c.harness,
        changes_dependencies: c.changes_dependencies,
        commit_red: c.commit_red,
        commit_green: c.commit_green,
        commit_refactor: c.commit_refactor,
        commit_pin: c.commit_pin,
        criterion: c.criterion,
        meta: c.meta.unwrap_or(serde_json::Value::Null),
    })
}

/// Merges a singular and a plural key; `None` when both are given.
fn merge(one: Option<OneOrMany>, many: Option<OneOrMany>) -> Option<Vec<String>> {
    match (one, many) {
        (Some(_), Some(_)) => None,
        (Some(v), None) | (None, Some(v)) => Some(v.into_vec()),
        (None, None) => Some(Vec::new()),
    }
}
