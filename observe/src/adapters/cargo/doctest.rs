//! Documentation tests, which nextest does not run: `cargo test --doc` per
//! package with a library, read through libtest's JSON events.
//!
//! Their binary id is `PACKAGE::doc/lib` (the slash keeps it apart from any
//! integration test's id), and a doctest's name is rustdoc's
//! (`src/lib.rs - add (line 5)`), so a doctest id is
//! `calc::doc/lib src/lib.rs - add (line 5)`: the name after the first space is
//! kept whole, spaces and parentheses included. rustdoc splits its test
//! arguments on whitespace, so a doctest name cannot be passed as one filter:
//! a selection filters by the whitespace-free item path (`add`) and keeps only
//! the results of the selected names.

use std::collections::BTreeSet;

use super::split_id;
use crate::Project;
use crate::adapters::exit_code;
use crate::adapters::last_line_suffix;
use crate::build::Builder;
use crate::cargo_messages;
use crate::cargo_messages::TestBinary;
use crate::exec::Job;
use crate::exec::ReportAt;
use crate::exec::Scratch;
use crate::exec::execute;

/// The binary-id suffix of a package's doctests.
pub(super) const DOC: &str = "::doc/lib";

/// Whether `native_id` names a doctest.
pub(super) fn is_doctest(native_id: &str) -> bool {
    split_id(native_id)
        .0
        .is_some_and(|binary| binary.ends_with(DOC))
}

/// The packages whose library has unit tests built, so also doctests.
fn packages_with_a_library(binaries: &[TestBinary]) -> BTreeSet<&str> {
    binaries
        .iter()
        .filter(|b| b.binary_id == b.package)
        .map(|b| b.package.as_str())
        .collect()
}

/// Runs the doctests of every package with a library (`ids` `None`), or only
/// the doctests `ids` name.
pub(super) fn run(
    project: &Project,
    scratch: &Scratch,
    binaries: &[TestBinary],
    ids: Option<&[String]>,
    builder: &mut Builder,
) {
    for (index, package) in packages_with_a_library(binaries).into_iter().enumerate() {
        let binary_id = format!("{package}{DOC}");
        let names: Option<Vec<&str>> = ids.map(|ids| {
            ids.iter()
                .map(|id| split_id(id))
                .filter(|(binary, _)| *binary == Some(binary_id.as_str()))
                .map(|(_, name)| name)
                .collect()
        });
        if names.as_ref().is_some_and(Vec::is_empty) {
            continue;
        }
        let mut argv: Vec<String> = ["cargo", "test", "--doc", "-p", package, "--"]
            .map(String::from)
            .into();
        argv.extend(["-Z", "unstable-options", "--format", "json"].map(String::from));
        if let Some(names) = &names {
            argv.extend(names.iter().filter_map(|name| item_filter(name)));
        }
        let label = format!("doc-{index}");
        let ran = execute(
            project,
            scratch,
            Job {
                label: &label,
                argv,
                cwd: None,
                report: ReportAt::Stdout,
                // libtest's JSON output is unstable; stable Rust accepts it only so.
                env: vec![("RUSTC_BOOTSTRAP".to_string(), "1".to_string())],
            },
        );
        match cargo_messages::parse_libtest(ran.report.as_deref().unwrap_or(b""), &binary_id) {
            Ok(mut parsed) => {
                if let Some(names) = &names {
                    parsed
                        .tests
                        .retain(|(id, _)| names.iter().any(|name| split_id(id).1 == *name));
                }
                builder.merge(parsed);
            }
            // A library whose doctests are turned off (`doctest = false`) prints nothing.
            Err(_) if exit_code(&ran) == Some(0) => {}
            Err(err) => builder.fail(format!(
                "{binary_id}: {}{}",
                err.0,
                last_line_suffix(&ran.stderr)
            )),
        }
        builder.invocation(ran.invocation);
    }
}

/// The item path of a doctest name (`src/lib.rs - add (line 5)` -> `add`),
/// a filter rustdoc keeps whole; `None` when it holds whitespace.
fn item_filter(name: &str) -> Option<String> {
    let (_, item) = name.split_once(" - ")?;
    let item = item.rsplit_once(" (line ").map_or(item, |(item, _)| item);
    (!item.is_empty() && !item.contains(char::is_whitespace)).then(|| item.to_string())
}

/// Lists the doctests of every package with a library, as qualified ids.
pub(super) fn list(
    project: &Project,
    scratch: &Scratch,
    binaries: &[TestBinary],
    builder: &mut Builder,
) -> Vec<String> {
    let mut listed = Vec::new();
    for (index, package) in packages_with_a_library(binaries).into_iter().enumerate() {
        let argv: Vec<String> = [
            "cargo", "test", "--doc", "-p", package, "--", "--list", "--format", "terse",
        ]
        .map(String::from)
        .into();
        let label = format!("doc-list-{index}");
        let ran = execute(
            project,
            scratch,
            Job {
                label: &label,
                argv,
                cwd: None,
                report: ReportAt::Stdout,
                env: Vec::new(),
            },
        );
        let binary_id = format!("{package}{DOC}");
        listed.extend(
            cargo_messages::parse_list(ran.report.as_deref().unwrap_or(b""), &binary_id)
                .iter()
                .map(|id| builder.qualify(id)),
        );
        builder.invocation(ran.invocation);
    }
    listed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_doctest_is_filtered_by_its_item_path() {
        assert_eq!(
            item_filter("src/lib.rs - add (line 5)").as_deref(),
            Some("add")
        );
        assert_eq!(
            item_filter("src/lib.rs - Calc::new (line 12)").as_deref(),
            Some("Calc::new")
        );
        assert_eq!(item_filter("src/lib.rs - a b (line 1)"), None);
        assert_eq!(item_filter("no separator"), None);
    }
}
