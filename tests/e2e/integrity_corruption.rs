//! State corrupted at random between engine calls: the ledger's directory, the clean
//! room, `.git` and the work tree's locked files truncated, filled with garbage, turned
//! into the other kind of entry, into a link to a directory outside or into a named
//! pipe, made unreadable or removed. Whatever was done, every call ends within a bound
//! with a verdict or a refusal (never exit 70), and nothing outside the repository and
//! tdd's own directories is written.

use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use proptest::prelude::*;

use crate::integrity_gates::CALC;
use crate::integrity_gates::IMPL;
use crate::integrity_gates::Locks;
use crate::integrity_gates::at_green;
use crate::support::Env;

/// Generous: a call that waits on a pipe is stopped by the engine within seconds, and a
/// loaded machine runs pytest slowly. Only a hang reaches it.
const BOUND: Duration = Duration::from_secs(240);

/// Where a corruption lands.
#[derive(Debug, Clone, Copy)]
enum Target {
    /// The ledger's database file.
    LedgerDb,
    /// Any entry of the ledger's directory but the clean room.
    LedgerDir,
    /// Any entry of the clean room, or the clean room itself.
    CleanRoom,
    /// A file of git's object database.
    GitObject,
    /// One of git's own files.
    GitFile,
    /// A locked file of the work tree.
    WorkTree,
}

/// What is done to it.
#[derive(Debug, Clone, Copy)]
enum Damage {
    Truncate,
    Garbage,
    OtherKind,
    LinkOutside,
    Pipe,
    Unreadable,
    Remove,
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        Just(Target::LedgerDb),
        Just(Target::LedgerDir),
        Just(Target::CleanRoom),
        Just(Target::GitObject),
        Just(Target::GitFile),
        Just(Target::WorkTree),
    ]
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        Just(Damage::Truncate),
        Just(Damage::Garbage),
        Just(Damage::OtherKind),
        Just(Damage::LinkOutside),
        Just(Damage::Pipe),
        Just(Damage::Unreadable),
        Just(Damage::Remove),
    ]
}

/// Every entry below `dir` (not following links), `dir` itself first.
fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    let mut i = 0;
    while i < out.len() {
        let at = out[i].clone();
        i += 1;
        if at.symlink_metadata().is_ok_and(|m| m.is_dir())
            && let Ok(listing) = std::fs::read_dir(&at)
        {
            let mut children: Vec<PathBuf> =
                listing.filter_map(Result::ok).map(|e| e.path()).collect();
            children.sort();
            out.extend(children);
        }
    }
    out
}

/// The paths `target` may land on in `env`, whose ledger lives in `ledger_dir`.
fn candidates(env: &Env, ledger_dir: &Path, database: &Path, target: Target) -> Vec<PathBuf> {
    let git = env.root().join(".git");
    let room = ledger_dir.join("cleanroom");
    match target {
        Target::LedgerDb => vec![database.to_path_buf()],
        Target::LedgerDir => entries(ledger_dir)
            .into_iter()
            .filter(|p| !p.starts_with(&room))
            .collect(),
        Target::CleanRoom => entries(&room),
        Target::GitObject => entries(&git.join("objects"))
            .into_iter()
            .filter(|p| p.is_file())
            .collect(),
        Target::GitFile => ["HEAD", "index", "config", "refs/heads/main", "info/exclude"]
            .iter()
            .map(|f| git.join(f))
            .collect(),
        Target::WorkTree => ["tdd.toml", "calc.py", "tests/test_sub.py", "pytest.ini"]
            .iter()
            .map(|f| env.root().join(f))
            .collect(),
    }
}

/// Does `damage` to `path`; what cannot be done (the path went already, or is reached
/// through a link an earlier damage made, so that it lies outside) is skipped.
fn corrupt(path: &Path, damage: Damage, salt: u64, outside: &Path) -> bool {
    let Some(parent) = path.parent() else {
        return false;
    };
    if parent.canonicalize().ok().as_deref() != Some(parent) {
        return false;
    }
    let is_dir = path.symlink_metadata().is_ok_and(|m| m.is_dir());
    let remove = |p: &Path| {
        if is_dir {
            let _ = std::fs::remove_dir_all(p);
        } else {
            let _ = std::fs::remove_file(p);
        }
    };
    match damage {
        Damage::Truncate if !is_dir => {
            if let Ok(file) = std::fs::OpenOptions::new().write(true).open(path) {
                let len = file.metadata().map_or(0, |m| m.len());
                let _ = file.set_len(if len == 0 { 0 } else { salt % len });
            }
        }
        Damage::Garbage if !is_dir => {
            let bytes: Vec<u8> = (0..64 + salt % 512)
                .map(|i| (salt.wrapping_mul(6364136223846793005).wrapping_add(i) >> 24) as u8)
                .collect();
            let _ = std::fs::write(path, bytes);
        }
        Damage::Truncate | Damage::Garbage | Damage::OtherKind => {
            remove(path);
            if is_dir {
                let _ = std::fs::write(path, "not a directory any more\n");
            } else {
                let _ = std::fs::create_dir(path);
            }
        }
        Damage::LinkOutside => {
            remove(path);
            let to = if is_dir {
                outside.to_path_buf()
            } else {
                outside.join("keep.txt")
            };
            let _ = std::os::unix::fs::symlink(to, path);
        }
        Damage::Pipe => {
            remove(path);
            let _ = nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o644));
        }
        Damage::Unreadable => {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o000));
        }
        Damage::Remove => remove(path),
    }
    true
}

/// Every entry below `dir` with its kind and bytes: what must not change.
fn snapshot(dir: &Path) -> Vec<(PathBuf, String)> {
    entries(dir)
        .into_iter()
        .map(|p| {
            let what = match std::fs::symlink_metadata(&p) {
                Ok(m) if m.is_file() => {
                    format!("file {:?}", std::fs::read(&p).unwrap_or_default())
                }
                Ok(m) => format!("{:?}", m.file_type()),
                Err(e) => e.to_string(),
            };
            (p, what)
        })
        .collect()
}

/// Runs `tdd ARGS --json` within [`BOUND`] and gives its exit code.
fn call(env: &Env, args: &[&str], case: &str) -> i32 {
    let mut all: Vec<&str> = args.to_vec();
    all.push("--json");
    let out = env.tdd().args(&all).timeout(BOUND).output();
    let out = match out {
        Ok(out) => out,
        Err(e) => panic!(
            "`tdd {}` did not return within {BOUND:?} ({e}) after {case}",
            args.join(" ")
        ),
    };
    let code = out.status.code();
    assert!(
        code.is_some() && code != Some(70),
        "`tdd {}` ended {:?} after {case}:\n{}\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    code.unwrap_or_default()
}

proptest! {
    // A fixed seed, so that the suite is the same on every machine;
    // `TDD_CORRUPTION_SEED=<n>` explores others.
    #![proptest_config(ProptestConfig {
        cases: 8,
        max_shrink_iters: 8,
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(
            std::env::var("TDD_CORRUPTION_SEED")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(20_261_203),
        ),
        ..ProptestConfig::default()
    })]

    #[test]
    fn corrupted_state_is_a_refusal_never_a_crash_a_hang_or_a_write_outside(
        damages in proptest::collection::vec((target(), damage(), any::<u64>()), 1..=3)
    ) {
        let outside = tempfile::tempdir().expect("outside");
        std::fs::write(outside.path().join("keep.txt"), "kept\n").expect("keep");
        std::fs::create_dir(outside.path().join("dir")).expect("dir");
        std::fs::write(outside.path().join("dir/also.txt"), "also kept\n").expect("also");
        let before = snapshot(outside.path());

        let env = at_green(Locks::Hand);
        env.write("calc.py", &format!("{CALC}{IMPL}"));
        let (_, located) = env.json(&["ledger", "path"]);
        let ledger_dir = PathBuf::from(located["data"]["dir"].as_str().unwrap_or_default());
        let database = PathBuf::from(located["data"]["database"].as_str().unwrap_or_default());
        let mut case = Vec::new();
        for (target, damage, salt) in &damages {
            let paths = candidates(&env, &ledger_dir, &database, *target);
            if paths.is_empty() {
                continue;
            }
            let path = &paths[(*salt as usize) % paths.len()];
            if corrupt(path, *damage, *salt, outside.path()) {
                case.push(format!("{damage:?} at {}", path.display()));
            }
        }
        let case = case.join(", ");
        for args in [
            &["advance"][..],
            &["status"],
            &["ledger", "verify"],
            &["test", "tests/test_sub.py::test_sub"],
            &["run", "abandon", "--reason", "corrupted state"],
        ] {
            call(&env, args, &case);
        }
        prop_assert_eq!(snapshot(outside.path()), before, "written outside after {}", case);
    }
}
