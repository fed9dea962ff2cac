//! `tdd demo`: the whole loop, offline, on an embedded sample crate.

use std::path::Path;
use std::path::PathBuf;

use tdd_engine::git::Git;

use crate::context::Ctx;
use crate::error::CommandError;
use crate::output::Outcome;

/// Run the whole conductor loop offline: copy a small Rust crate (a `cargo test`
/// suite, no dependencies) and an issue with three acceptance criteria into a
/// directory, `git init` it, and conduct the issue with scripted leaves and the local
/// forge. One verifier REJECT is revised; one cheat (a test edited during GREEN) is
/// reverted by the engine and reported in the draft PR.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Put the demo in DIR (created; must be empty) instead of a new directory
    /// under the system's temporary directory. Either way it is left for you to read.
    #[arg(long, value_name = "DIR")]
    keep: Option<PathBuf>,
    /// Wire `tdd hook` into the scripted developers, as Claude Code's hooks would run:
    /// the locked edit the demo's GREEN developer tries is denied when it is tried, not
    /// reverted at the gate.
    #[arg(long)]
    hooks: bool,
}

/// The embedded sample: (path in the repository, contents).
const REPO: &[(&str, &str)] = &[
    ("Cargo.toml", include_str!("../../examples/demo/Cargo.toml")),
    ("src/lib.rs", include_str!("../../examples/demo/src/lib.rs")),
    (
        "tests/add.rs",
        include_str!("../../examples/demo/tests/add.rs"),
    ),
    (
        ".gitignore",
        include_str!("../../examples/demo/gitignore.txt"),
    ),
];
const CONFIG: &str = include_str!("../../examples/demo/tdd.toml");
const ISSUE: &str = include_str!("../../examples/demo/issue-1.md");
const FIXTURE: &str = include_str!("../../examples/demo/fixture.toml");

fn io_err(what: &str, path: &Path, e: &std::io::Error) -> CommandError {
    CommandError::refused("demo_failed", format!("{what} {}: {e}", path.display()))
}

fn write(path: &Path, text: &str) -> Result<(), CommandError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| io_err("cannot create", parent, &e))?;
    }
    std::fs::write(path, text).map_err(|e| io_err("cannot write", path, &e))
}

/// The directory to build the demo in: empty or new.
fn demo_dir(keep: Option<PathBuf>, cwd: &Path) -> Result<PathBuf, CommandError> {
    let dir = match keep {
        Some(dir) => cwd.join(dir),
        None => {
            let stamp = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis())
                .unwrap_or(0);
            std::env::temp_dir().join(format!("tdd-demo-{}-{stamp}", std::process::id()))
        }
    };
    let occupied = std::fs::read_dir(&dir).is_ok_and(|mut d| d.next().is_some());
    if occupied {
        return Err(CommandError::bad_input(
            "demo_dir_not_empty",
            format!("{} is not empty", dir.display()),
        )
        .hint("pass --keep with a new or empty directory"));
    }
    std::fs::create_dir_all(&dir).map_err(|e| io_err("cannot create", &dir, &e))?;
    Ok(dir.canonicalize().unwrap_or(dir))
}

/// Writes the sample repository, commits it, and returns (repo, issue file).
fn build(dir: &Path, hooks: bool) -> Result<(PathBuf, PathBuf), CommandError> {
    let repo = dir.join("calc");
    let fixture = dir.join("fixture.toml");
    let issue = dir.join("issue-1.md");
    write(&fixture, FIXTURE)?;
    write(&issue, ISSUE)?;
    for (path, text) in REPO {
        write(&repo.join(path), text)?;
    }
    let fixture_text = fixture.display().to_string().replace('\\', "\\\\");
    let mut config = CONFIG.replace("{fixture}", &fixture_text);
    if hooks {
        config = config.replace("\nhooks = false\n", "\nhooks = true\n");
    }
    write(&repo.join("tdd.toml"), &config)?;
    std::fs::create_dir_all(&repo).map_err(|e| io_err("cannot create", &repo, &e))?;
    let git = Git::new(&repo);
    git.output(["init", "-q", "-b", "main"])?;
    git.output(["config", "user.name", "tdd demo"])?;
    git.output(["config", "user.email", "demo@tdd.invalid"])?;
    git.output(["add", "-A"])?;
    git.output(["commit", "-q", "-m", "calc: a calculator that can only add"])?;
    Ok((repo, issue))
}

/// Runs `tdd demo`.
pub fn cmd_demo(ctx: &Ctx, args: DemoArgs) -> Result<Outcome, CommandError> {
    let dir = demo_dir(args.keep, &ctx.cwd)?;
    let (repo, issue) = build(&dir, args.hooks)?;
    ctx.out.progress(
        "demo_ready",
        serde_json::json!({ "dir": dir, "repo": repo }),
        &format!(
            "demo: a sample crate in {} with issue {}",
            repo.display(),
            issue.display()
        ),
    );
    let demo = Ctx::new(repo, ctx.out.clone(), ctx.trace.clone());
    let forge = tdd_conductor::ForgeSpec::Local(issue.clone());
    let options = super::conduct::default_options(forge)?;
    let outcome = super::conduct::conduct(&demo, options)?;
    Ok(outcome)
}
