//! Tests the file locks do not see: a target defined in a file the phase may change, and
//! a baseline-green test changed while RED commits its own test beside it.
//!
//! Both are judged on the definitions of test functions ([`super::testdefs`]) between
//! HEAD and the candidate commit, so they hold from the commit alone.

use std::collections::BTreeSet;

use super::RunError;
use super::Session;
use super::advance::Ctx;
use super::candidate::Candidate;
use super::candidate::TreeChange;
use super::gates::Refused;
use super::phase::Verb;
use super::testdefs;
use crate::git::Git;

/// Test definitions by name.
type Defs = std::collections::HashMap<String, String>;

/// The test definitions of the changed file before (in `tree`) and after (the change's
/// new blob; none when it is gone), or `None` when the file is new or unreadable.
fn definitions_around(git: &Git, tree: &str, change: &TreeChange) -> Option<(Defs, Defs)> {
    let path = change.display();
    if !testdefs::readable(&path) {
        return None;
    }
    let objects = crate::run::scan::locate(git.dir()).ok()?.objects();
    let mut reader = objects.reader().ok()?;
    let mut read = |id: &str| {
        reader
            .read(id)
            .ok()
            .map(|bytes| String::from_utf8_lossy(bytes).into_owned())
    };
    let (_, old_id) = objects.entry_at(tree, &change.path).ok()??;
    let old = read(&old_id.to_string())?;
    let new = change.new.and_then(|(_, id)| read(&id.to_string()));
    let before = testdefs::definitions(&path, &old);
    let after = new
        .map(|t| testdefs::definitions(&path, &t))
        .unwrap_or_default();
    Some((before, after))
}

impl Session {
    /// GREEN and REFACTOR: a target whose definition lives in a file the candidate changes
    /// must keep that definition exactly (tests are locked after RED, wherever they are).
    pub(super) fn target_edited(
        &self,
        ctx: &Ctx<'_>,
        head_tree: &str,
        candidate: &Candidate,
    ) -> Result<Option<Refused>, RunError> {
        let git = Git::new(&self.work_tree);
        let mut names = BTreeSet::new();
        for target in &ctx.targets {
            let project = self.project(&ctx.project_of(target))?;
            let native = project.native_id(target)?;
            if let Some(name) = testdefs::target_name(project.config.adapter, native) {
                names.insert(name);
            }
        }
        for change in &candidate.chosen {
            let Some((before, after)) = definitions_around(&git, head_tree, change) else {
                continue;
            };
            let path = change.display();
            if let Some(name) = names
                .iter()
                .find(|n| before.contains_key(*n) && before.get(*n) != after.get(*n))
            {
                return Ok(Some(Refused {
                    reason: "target_edited",
                    verb: Verb::WriteImplementation,
                    detail: format!(
                        "the target test `{name}` is defined in {path}, which this phase may change, but its definition changed; tests are locked after RED, so change the implementation only"
                    ),
                }));
            }
        }
        Ok(None)
    }

    /// RED: a test that passed at baseline and is defined in a test file this RED changes
    /// must keep its definition, unless the cycle declares the file in `modifies_tests`.
    pub(super) fn baseline_tests_changed(
        &self,
        ctx: &Ctx<'_>,
        head_tree: &str,
        candidate: &Candidate,
    ) -> Result<Option<Refused>, RunError> {
        let git = Git::new(&self.work_tree);
        let mut changed = Vec::new();
        for change in &candidate.chosen {
            let path = change.display();
            if ctx.planned.modifies_tests.iter().any(|m| m == &path) {
                continue;
            }
            let Some((before, after)) = definitions_around(&git, head_tree, change) else {
                continue;
            };
            for id in self.baseline_passing_in(ctx, &path)? {
                if before.contains_key(&id.1) && before.get(&id.1) != after.get(&id.1) {
                    changed.push(id.0);
                }
            }
        }
        if changed.is_empty() {
            return Ok(None);
        }
        Ok(Some(Refused {
            reason: "baseline_test_changed",
            verb: Verb::WriteTest,
            detail: format!(
                "tests that passed at baseline were changed or removed: {}; restore them, or declare their files in this cycle's `modifies_tests`",
                changed.join(", ")
            ),
        }))
    }

    /// Baseline-passing tests of the cycle's projects that may be defined in `path`: their
    /// qualified id and function name.
    fn baseline_passing_in(
        &self,
        ctx: &Ctx<'_>,
        path: &str,
    ) -> Result<Vec<(String, String)>, RunError> {
        let mut found = Vec::new();
        for name in &ctx.planned.projects {
            let project = self.project(name)?;
            let Some(baseline) = ctx.state.baseline.get(name) else {
                continue;
            };
            let root = project
                .config
                .root
                .trim_matches('/')
                .trim_start_matches("./");
            for id in &baseline.passing {
                let native = project.native_id(id)?;
                let adapter = project.config.adapter;
                if let Some(file) = testdefs::target_file(adapter, native) {
                    let full = if root.is_empty() || root == "." {
                        file
                    } else {
                        format!("{root}/{file}")
                    };
                    if full != path {
                        continue;
                    }
                }
                if let Some(fn_name) = testdefs::target_name(adapter, native) {
                    found.push((id.clone(), fn_name));
                }
            }
        }
        Ok(found)
    }
}
