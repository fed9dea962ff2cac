//! A write the sandbox refused a leaf's tools, found in what the leaf and the commands
//! relayed for it printed, so that a run stopped by it bails as the system's failure,
//! naming the path, the variable that pointed there, and what to set.
//!
//! A leaf stopped this way looks like an agent that failed: a verifier whose suite
//! could not write its cache ends without a verdict, a developer whose build could not
//! download ends with the gate refusing. Both are the machine's configuration, which
//! no agent can fix; the bail says so.

use std::collections::BTreeMap;
use std::io::Read;
use std::io::Seek;
use std::path::Path;
use std::path::PathBuf;

use tdd_leaves::LeafRun;

use crate::bail::Bail;
use crate::bail::BailCause;

/// How much of the end of each of a leaf's output files is read.
const READ_BYTES: u64 = 1 << 20;

/// Variables that name a place for everything, never one a tool was pointed at.
const TOO_WIDE: &[&str] = &["HOME", "PWD", "OLDPWD", "TMPDIR"];

/// The first write the sandbox refused the last leaf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Denied {
    /// The leaf.
    pub leaf: String,
    /// Its role, in words.
    pub role: String,
    /// The path refused.
    pub path: PathBuf,
    /// The variable of the caller's environment whose directory holds the path, and
    /// that directory.
    pub variable: Option<(String, PathBuf)>,
}

/// The first write `run`'s confinement refused, by what the leaf printed and what the
/// relay `heard` for it; none where the leaf was not confined (nothing there is the
/// sandbox's doing). `env` is the caller's environment, searched for the variable
/// that named the place.
pub(crate) fn find(
    run: &LeafRun,
    role: &str,
    policy: &tdd_sandbox::Policy,
    heard: &str,
    env: &BTreeMap<String, String>,
) -> Option<Denied> {
    let handle = run.handle()?;
    let confined = handle
        .launch_record()
        .ok()
        .flatten()
        .and_then(|launch| launch.sandbox)
        .is_some_and(|level| level.confines());
    if !confined {
        return None;
    }
    let mut text = tail(handle.stdout_path());
    if let Some(stderr) = handle.stderr_path() {
        text.push('\n');
        text.push_str(&tail(stderr));
    }
    text.push('\n');
    text.push_str(heard);
    let path = policy.denials_in(&text).into_iter().next()?;
    Some(Denied {
        leaf: run.id().to_string(),
        role: role.to_string(),
        variable: variable_naming(&path, env),
        path,
    })
}

/// The end of the file at `path`, as text; empty when it cannot be read.
fn tail(path: &Path) -> String {
    let Ok(mut file) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(std::io::SeekFrom::Start(len.saturating_sub(READ_BYTES)));
    let mut bytes = Vec::new();
    let _ = file.take(READ_BYTES).read_to_end(&mut bytes);
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The variable whose value is the deepest directory holding `path`: the one a tool
/// was told to write under (`CARGO_HOME`, `GOPATH`, `npm_config_cache`).
fn variable_naming(path: &Path, env: &BTreeMap<String, String>) -> Option<(String, PathBuf)> {
    env.iter()
        .filter(|(name, _)| !TOO_WIDE.contains(&name.as_str()))
        .filter(|(_, value)| value.starts_with('/') && !value.contains(':') && value.len() > 1)
        .map(|(name, value)| (name, PathBuf::from(value)))
        .filter(|(_, dir)| path.starts_with(dir))
        .max_by_key(|(_, dir)| dir.components().count())
        .map(|(name, dir)| (name.clone(), dir))
}

/// `bail` said as the sandbox's refusal of `denied`, when it is one a refused tool
/// brings about (a verifier that could not finish, a developer whose work the gate
/// kept refusing): the agents could not have done better, the machine's configuration
/// must change. Any other bail keeps its cause: a REJECT or a bad plan has reasons of
/// its own, and a hostile leaf's refused escape is the sandbox working.
pub(crate) fn explain(bail: Bail, denied: &Denied) -> Bail {
    if !matches!(
        bail.cause,
        BailCause::VerdictMissing | BailCause::GateRefusedRepeatedly
    ) {
        return bail;
    }
    let path = denied.path.display();
    let (named, grant) = match &denied.variable {
        Some((name, dir)) => (
            format!(", under {} where `{name}` points", dir.display()),
            dir.clone(),
        ),
        None => (
            ", a place no variable of the environment names".to_string(),
            denied
                .path
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| denied.path.clone()),
        ),
    };
    let mut explained = Bail::new(
        BailCause::SandboxDenied,
        format!(
            "the sandbox refused the {} leaf {} a write to {path}{named}, and then {}",
            denied.role, denied.leaf, bail.detail
        ),
        format!(
            "a leaf may write only its own work tree and private home, so that no leaf leaves anything for the next: either fill {grant} before the run (fetch what the project needs yourself) so that no leaf has to write there, or grant it to every leaf with `write = [\"{grant}\"]` under `[sandbox]` in tdd.toml (what one leaf writes there, the next reads); then run `tdd conduct` again",
            grant = grant.display()
        ),
    );
    explained.step = bail.step;
    explained.phase = bail.phase;
    explained.output_tail = bail.output_tail;
    explained
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    }

    #[test]
    fn the_deepest_directory_a_variable_names_is_the_one_that_pointed_there() {
        let env = env(&[
            ("HOME", "/h"),
            ("GOPATH", "/h/go"),
            ("GOMODCACHE", "/h/go/pkg/mod"),
            ("PATH", "/h/go/bin:/usr/bin"),
            ("RELATIVE", "go"),
        ]);
        let path = Path::new("/h/go/pkg/mod/cache/lock");
        assert_eq!(
            variable_naming(path, &env),
            Some(("GOMODCACHE".into(), PathBuf::from("/h/go/pkg/mod")))
        );
        assert_eq!(
            variable_naming(Path::new("/h/go/src/x"), &env),
            Some(("GOPATH".into(), PathBuf::from("/h/go")))
        );
        // Only the home directory holds it: no variable pointed a tool there.
        assert_eq!(variable_naming(Path::new("/h/.npm/x"), &env), None);
    }

    #[test]
    fn a_process_bail_becomes_the_systems_and_keeps_where_it_happened() {
        let denied = Denied {
            leaf: "verifier-1".into(),
            role: "verifier".into(),
            path: PathBuf::from("/h/go/pkg/mod/cache"),
            variable: Some(("GOPATH".into(), PathBuf::from("/h/go"))),
        };
        let bail = Bail::new(BailCause::VerdictMissing, "no verdict", "x")
            .at(1, "red")
            .tail("out");
        let explained = explain(bail, &denied);
        assert_eq!(explained.cause, BailCause::SandboxDenied);
        assert_eq!(explained.class, crate::bail::BailClass::System);
        assert_eq!(
            (explained.step, explained.phase.as_deref()),
            (Some(1), Some("red"))
        );
        assert_eq!(explained.output_tail, "out");
        insta::assert_snapshot!(format!("{}\n{}", explained.detail, explained.action));
        // A bail with a cause of its own keeps it.
        for cause in [BailCause::SupervisorLost, BailCause::ReviseBudgetExhausted] {
            let other = Bail::new(cause, "d", "x");
            assert_eq!(explain(other, &denied).cause, cause);
        }
    }
}
