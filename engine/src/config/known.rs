//! Declared baseline failures: which red tests a project's `known_failures` excuses.
//!
//! An entry matches a test id when it equals the id or, read as a glob, matches it.
//! Ids are tried both with and without the project's `NAME::` prefix, so an entry may be
//! written project-qualified (`app::calc::sub subtracts`) or runner-native
//! (`calc::sub subtracts`). Collection-error scopes (a file, a Go package, a Cargo
//! binary) are matched the same way.

use std::collections::BTreeSet;

use globset::GlobBuilder;
use globset::GlobMatcher;
use serde::Serialize;

/// Why a `known_failures` entry cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KnownFailureError {
    /// The entry is empty or only whitespace, so it would name nothing.
    #[error("a known_failures entry is empty")]
    Empty,
    /// The entry is not a valid glob.
    #[error("known_failures entry `{entry}` is not a valid glob: {reason}")]
    Glob {
        /// The entry as written.
        entry: String,
        /// What the glob parser objected to.
        reason: String,
    },
}

/// One project's compiled `known_failures`.
///
/// Guarantees: every entry compiled; [`KnownFailures::matches`] is a pure function of the
/// entries, the project name and the id.
#[derive(Debug, Clone)]
pub struct KnownFailures {
    project: String,
    entries: Vec<(String, GlobMatcher)>,
}

/// A baseline's failures split by whether the configuration declared them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DeclaredSplit {
    /// Failures some entry matches: accepted as red at baseline.
    pub declared: BTreeSet<String>,
    /// Failures no entry matches: they make the baseline red.
    pub undeclared: BTreeSet<String>,
    /// Entries that match no failure at all (a typo, a renamed test, or one that passes
    /// now): reported, never silently ignored.
    pub unmatched: Vec<String>,
}

/// Compiles one entry, refusing an empty one and an invalid glob.
pub fn compile_entry(entry: &str) -> Result<GlobMatcher, KnownFailureError> {
    if entry.trim().is_empty() {
        return Err(KnownFailureError::Empty);
    }
    GlobBuilder::new(entry)
        .literal_separator(false)
        .build()
        .map(|glob| glob.compile_matcher())
        .map_err(|err| KnownFailureError::Glob {
            entry: entry.to_string(),
            reason: err.kind().to_string(),
        })
}

impl KnownFailures {
    /// Compiles `entries` of project `project`; the first bad entry is the error.
    pub fn new(project: &str, entries: &[String]) -> Result<KnownFailures, KnownFailureError> {
        let entries = entries
            .iter()
            .map(|entry| compile_entry(entry).map(|glob| (entry.clone(), glob)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(KnownFailures {
            project: project.to_string(),
            entries,
        })
    }

    /// Whether there are no entries (nothing is declared).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries that match `id` (a test id or a collection-error scope).
    pub fn matching(&self, id: &str) -> Vec<&str> {
        let prefix = format!("{}::", self.project);
        let other = match id.strip_prefix(&prefix) {
            Some(native) => native.to_string(),
            None => format!("{prefix}{id}"),
        };
        self.entries
            .iter()
            .filter(|(entry, glob)| {
                [id, other.as_str()]
                    .iter()
                    .any(|candidate| entry == candidate || glob.is_match(candidate))
            })
            .map(|(entry, _)| entry.as_str())
            .collect()
    }

    /// Whether some entry matches `id`.
    pub fn matches(&self, id: &str) -> bool {
        !self.matching(id).is_empty()
    }

    /// Splits `failures` into declared and undeclared and lists the entries that matched
    /// none of them.
    pub fn split<'a>(&self, failures: impl IntoIterator<Item = &'a str>) -> DeclaredSplit {
        let mut split = DeclaredSplit::default();
        let mut used: BTreeSet<&str> = BTreeSet::new();
        for failure in failures {
            let hits = self.matching(failure);
            if hits.is_empty() {
                split.undeclared.insert(failure.to_string());
            } else {
                used.extend(hits);
                split.declared.insert(failure.to_string());
            }
        }
        split.unmatched = self
            .entries
            .iter()
            .map(|(entry, _)| entry.clone())
            .filter(|entry| !used.contains(entry.as_str()))
            .collect();
        split
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(entries: &[&str]) -> KnownFailures {
        let entries: Vec<String> = entries.iter().map(|e| e.to_string()).collect();
        KnownFailures::new("app", &entries).expect("entries compile")
    }

    #[test]
    fn an_exact_id_matches_qualified_or_native() {
        let k = known(&["app::calc::broken broken", "calc::flaky flaky"]);
        assert!(k.matches("app::calc::broken broken"));
        assert!(k.matches("app::calc::flaky flaky"));
        assert!(!k.matches("app::calc::add adds"));
        assert!(!k.matches("other::calc::broken broken"));
    }

    #[test]
    fn a_glob_matches_across_separators() {
        let k = known(&["app::calc::slow *", "tests/legacy/**"]);
        assert!(k.matches("app::calc::slow one"));
        assert!(k.matches("app::calc::slow two::nested"));
        assert!(!k.matches("app::calc::fast one"));
        assert!(k.matches("tests/legacy/a/b.py"));
    }

    #[test]
    fn an_exact_id_matches_even_when_it_reads_as_a_character_class() {
        let k = known(&["tests/test_x.py::test_a[1-2]"]);
        assert!(k.matches("app::tests/test_x.py::test_a[1-2]"));
        // As a glob it also matches one character of the class.
        assert!(k.matches("app::tests/test_x.py::test_a1"));
        assert!(!k.matches("app::tests/test_x.py::test_a3"));
    }

    #[test]
    fn split_separates_declared_undeclared_and_unmatched_entries() {
        let k = known(&["app::calc::broken broken", "app::gone *"]);
        let split = k.split(["app::calc::broken broken", "app::calc::other other"]);
        assert_eq!(
            split.declared.into_iter().collect::<Vec<_>>(),
            vec!["app::calc::broken broken"]
        );
        assert_eq!(
            split.undeclared.into_iter().collect::<Vec<_>>(),
            vec!["app::calc::other other"]
        );
        assert_eq!(split.unmatched, vec!["app::gone *"]);
    }

    #[test]
    fn no_entries_declare_nothing() {
        let k = known(&[]);
        assert!(k.is_empty());
        let split = k.split(["app::t one"]);
        assert!(split.declared.is_empty());
        assert_eq!(split.undeclared.len(), 1);
        assert!(split.unmatched.is_empty());
    }

    #[test]
    fn empty_and_invalid_entries_are_refused() {
        assert_eq!(compile_entry("  ").err(), Some(KnownFailureError::Empty));
        assert!(matches!(
            compile_entry("app::t[oops"),
            Err(KnownFailureError::Glob { .. })
        ));
    }
}
