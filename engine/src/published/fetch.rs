//! Fetching a published ledger from a remote without the repository's configuration.
//!
//! `git fetch` in the repository itself would start whatever program that
//! repository's configuration names for it (`remote.<name>.uploadpack`,
//! `core.sshCommand`, a credential helper, a remote helper named by the URL) with the
//! engine's rights, and wait for it however long it runs. So the fetch is made into a
//! bare repository of the engine's own, made for it inside `.git`, that borrows the
//! repository's objects (so only what is missing crosses) and reads no configuration
//! but the user's and the system's: the URL is the only thing taken from the
//! repository's configuration, and only the transports git trusts by default may serve
//! it (`file`, `git`, `http`, `https`, `ssh`). The pack fetched is then moved into the
//! repository's object store and the ref set there.

use std::path::Path;

use crate::git::Git;
use crate::git::GitError;

/// The settings every fetch of a ledger runs with besides the trusted transports
/// ([`crate::git::TRUSTED_TRANSPORTS`]): no hook, no housekeeping after it, and what it
/// brings kept as one pack.
const SETTINGS: [&str; 3] = [
    "core.hooksPath=/dev/null",
    "maintenance.auto=false",
    "fetch.unpackLimit=1",
];

/// Fetches `reference` from `remote` into the same name; `false` when the remote has no
/// such ref. Nothing the repository's configuration names runs (see the module).
pub(super) fn fetch_ledger(
    git: &Git,
    common_dir: &Path,
    kind: gix_hash::Kind,
    remote: &str,
    reference: &str,
) -> Result<bool, GitError> {
    let url = git.text(["remote", "get-url", remote])?;
    let made = |e: std::io::Error| io_error("make a fetch repository in", common_dir, e);
    let borrowed = tempfile::Builder::new()
        .prefix("tdd-fetch-")
        .tempdir_in(common_dir)
        .map_err(made)?;
    let bare = borrowed.path();
    // `--object-format` only where it is not git's default: a git older than 2.29
    // knows no such option, and no SHA-256 repository either.
    let mut init = vec!["init", "--quiet", "--bare", "--template="];
    if kind != gix_hash::Kind::Sha1 {
        init.push("--object-format=sha256");
    }
    let at = bare.display().to_string();
    init.push(&at);
    git.output(&init)?;
    let objects = common_dir.join("objects");
    let alternates = bare.join("objects/info/alternates");
    std::fs::create_dir_all(bare.join("objects/info"))
        .and_then(|()| std::fs::write(&alternates, format!("{}\n", objects.display())))
        .map_err(made)?;
    let mut args: Vec<String> = vec![format!("--git-dir={}", bare.display())];
    for setting in crate::git::TRUSTED_TRANSPORTS.iter().chain(&SETTINGS) {
        args.extend(["-c".to_string(), setting.to_string()]);
    }
    args.extend(
        [
            "fetch",
            "--no-tags",
            "--quiet",
            "--no-recurse-submodules",
            "--upload-pack=git-upload-pack",
            // A URL that starts with `-` is a URL, never an option.
            "--",
            &url,
            &format!("+{reference}:{reference}"),
        ]
        .map(String::from),
    );
    // Run from the work tree, where a relative URL (`../origin`) means what it says;
    // a transport git trusts only for a user typing the command is not used, and
    // nothing asks on a terminal.
    let mut cmd = git.command(&args);
    cmd.env("GIT_PROTOCOL_FROM_USER", "0")
        .env("GIT_TERMINAL_PROMPT", "0");
    match crate::git::run_piped(cmd, None, "fetch", &[]) {
        Ok(_) => {}
        Err(GitError::Failed { stderr, .. }) if stderr.contains("couldn't find remote ref") => {
            return Ok(false);
        }
        Err(e) => return Err(e),
    }
    let fetched = Git::new(git.dir()).text([
        &format!("--git-dir={}", bare.display()),
        "rev-parse",
        "--verify",
        "--quiet",
        &format!("{reference}^{{commit}}"),
    ])?;
    take_packs(&bare.join("objects/pack"), &objects.join("pack"))?;
    git.output(["update-ref", reference, &fetched])?;
    Ok(true)
}

/// Moves every pack file in `from` into `into`, each index last so that no reader
/// finds an index whose pack is not there yet. A pack already there is left.
fn take_packs(from: &Path, into: &Path) -> Result<(), GitError> {
    let Ok(entries) = std::fs::read_dir(from) else {
        // Nothing was missing: no pack came.
        return Ok(());
    };
    let mut names: Vec<std::ffi::OsString> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.file_name())
        .filter(|name| name.to_string_lossy().starts_with("pack-"))
        .collect();
    names.sort_by_key(|name| name.to_string_lossy().ends_with(".idx"));
    std::fs::create_dir_all(into).map_err(|e| io_error("make", into, e))?;
    for name in names {
        let (source, target) = (from.join(&name), into.join(&name));
        if target.exists() {
            continue;
        }
        std::fs::rename(&source, &target).map_err(|e| io_error("move", &source, e))?;
    }
    Ok(())
}

/// A file-system step of the fetch that failed, naming the path.
fn io_error(what: &str, path: &Path, source: std::io::Error) -> GitError {
    GitError::WorkTree {
        what: what.to_string(),
        path: path.display().to_string(),
        source,
    }
}
