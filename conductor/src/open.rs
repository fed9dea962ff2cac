//! Opening a conductor: where it works, its configuration, its providers, how it
//! stands to the issue's earlier conduct runs, and the checks a resume makes before
//! anything acts.

use std::collections::BTreeMap;
use std::path::Path;
use std::path::PathBuf;

use tdd_engine::config::Config;
use tdd_engine::git::Git;
use tdd_engine::git::GitProbe;
use tdd_engine::ledger::LedgerLocation;
use tdd_engine::observe::lease::Budget;
use tdd_engine::observe::lease::LEASE_DIR_VAR;
use tdd_engine::observe::lease::LeaseDir;
use tdd_engine::run::Progress;
use tdd_engine::run::Session;
use tdd_leaves::Leaves;
use tdd_leaves::Provider;
use tdd_leaves::providers::SelfExe;
use tdd_prompts::Issue;

use crate::conductor::Conductor;
use crate::conductor::NewBinary;
use crate::conductor::Options;
use crate::conductor::Place;
use crate::cursor::Begun;
use crate::cursor::Cursor;
use crate::error::Cause;
use crate::error::ConductError;
use crate::events::BinaryAccepted;
use crate::events::ConductorEvent;
use crate::journal::Journal;
use crate::lock::WorktreeLock;

/// The SHA-256 of the `tdd` binary at `path`.
pub(crate) fn binary_sha256(path: &Path) -> Result<String, ConductError> {
    use sha2::Digest;
    let bytes = std::fs::read(path).map_err(|source| {
        ConductError::io(format!("reading the tdd binary {}", path.display()), source)
    })?;
    Ok(hex::encode(sha2::Sha256::digest(&bytes)))
}

impl Conductor<'_> {
    /// A resumed run must continue with the binary it started with (or the last one
    /// accepted); another one is refused unless [`NewBinary::Accept`], which is recorded.
    pub(crate) fn check_binary(&self) -> Result<(), ConductError> {
        if self.begun != Begun::Resumed {
            return Ok(());
        }
        let mut recorded = None;
        for event in self.journal.events()? {
            match event {
                ConductorEvent::ConductStarted(started) => recorded = Some(started.binary_sha256),
                ConductorEvent::BinaryAccepted(accepted) => recorded = Some(accepted.to),
                _ => {}
            }
        }
        let now = binary_sha256(&self.options.tdd_exe)?;
        match recorded {
            Some(recorded) if recorded != now => {
                if self.options.new_binary == NewBinary::Refuse {
                    return Err(Cause::BinaryChanged { recorded, now }.into());
                }
                self.journal
                    .record(&ConductorEvent::BinaryAccepted(BinaryAccepted {
                        from: recorded,
                        to: now,
                        version: env!("CARGO_PKG_VERSION").to_string(),
                    }))?;
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// The conduct run started last in `work_tree` for issue `n`, and whether it completed.
fn last_conduct(
    database: &Path,
    work_tree: &Path,
    n: u64,
) -> Result<Option<(String, bool)>, ConductError> {
    let events = crate::journal::every_conduct(database)?;
    let here = crate::journal::Here::of(work_tree);
    let last = events
        .iter()
        .rev()
        .find_map(|(conduct, event)| match event {
            ConductorEvent::ConductStarted(s) if s.issue == n && here.owns(s) => Some(conduct),
            _ => None,
        });
    Ok(last.map(|id| {
        let completed = events
            .iter()
            .any(|(c, e)| c == id && matches!(e, ConductorEvent::Completed(_)));
        (id.clone(), completed)
    }))
}

/// The conduct run to resume in `work_tree` for issue `n`: the last one started there
/// that did not complete.
fn open_conduct(database: &Path, work_tree: &Path, n: u64) -> Result<Option<String>, ConductError> {
    Ok(last_conduct(database, work_tree, n)?
        .filter(|(_, completed)| !completed)
        .map(|(id, _)| id))
}

/// The conduct run that completed issue `n` in `work_tree` last, when `branch` still
/// has every step of its plan ticked: running the issue again only republishes it.
fn finished_conduct(
    database: &Path,
    work_tree: &Path,
    n: u64,
    branch: &str,
    plan_path: &str,
) -> Result<Option<String>, ConductError> {
    let Some((id, true)) = last_conduct(database, work_tree, n)? else {
        return Ok(None);
    };
    let ticks = crate::plan::ticks_at(work_tree, &format!("refs/heads/{branch}"), plan_path);
    let done = !ticks.is_empty() && ticks.iter().all(|(_, t)| *t);
    Ok(done.then_some(id))
}

/// A provider chosen by name at run time.
type DynProvider = Box<dyn Provider>;

/// The developer (and planner) provider and the verifier provider: the options'
/// names, else `[conductor]`'s; the verifier defaults to the developer's.
fn providers(
    config: &Config,
    options: &Options,
) -> Result<(DynProvider, DynProvider), ConductError> {
    let this = SelfExe {
        program: options.tdd_exe.clone(),
        args: vec!["__scripted-leaf".into()],
    };
    let name = options
        .provider
        .clone()
        .or_else(|| config.conductor.provider.clone())
        .ok_or_else(|| {
            ConductError::config(
                "no provider: pass --provider or set [conductor] provider in tdd.toml",
            )
        })?;
    let verifier_name = options
        .verifier_provider
        .clone()
        .or_else(|| config.conductor.verifier_provider.clone())
        .unwrap_or_else(|| name.clone());
    let developer = tdd_leaves::providers::build(&name, config, &this)?;
    let verifier = tdd_leaves::providers::build(&verifier_name, config, &this)?;
    Ok((developer, verifier))
}

/// The work branch of `issue`: `<branch_prefix><n>-<slug of the title>`.
fn branch_name(config: &Config, issue: &Issue) -> String {
    format!(
        "{}{}-{}",
        config.conductor.branch_prefix,
        issue.number(),
        crate::issue::slug(issue.title())
    )
}

/// Where the run works: the user's work tree, or the conductor's own worktree when
/// `--worktree` or `[conductor] worktree` asks for one or an unfinished run of the issue
/// already works in one (so a resume needs neither). Returns the canonical path and
/// whether it is the conductor's own.
fn placement(
    work_tree: &Path,
    location: &LedgerLocation,
    config: &Config,
    options: &Options,
    n: u64,
) -> Result<(PathBuf, bool), ConductError> {
    let own = crate::worktree::path_for(&crate::worktree::main_work_tree(work_tree)?, n);
    let wanted = options.place == Place::OwnWorktree
        || config.conductor.worktree
        || open_conduct(&location.database, &own, n)?.is_some();
    if wanted {
        return Ok((own, true));
    }
    let here = work_tree
        .canonicalize()
        .unwrap_or_else(|_| work_tree.to_path_buf());
    Ok((here, false))
}

/// The configuration of the conductor's own worktree at `path`: the `tdd.toml` committed
/// on the work branch (at `from`'s `HEAD` when the branch is new), which is what the
/// worktree holds once clean and what every `tdd` command run there (by a leaf) reads.
/// Read before the worktree is made, so a missing file leaves nothing behind.
fn committed_config(
    from: &Path,
    path: &Path,
    branch: &str,
) -> Result<(Config, String), ConductError> {
    let git = Git::new(from);
    let reference = format!("refs/heads/{branch}");
    let exists = git
        .output(["rev-parse", "--verify", "--quiet", &reference])
        .is_ok();
    let rev = if exists { reference.as_str() } else { "HEAD" };
    let file = tdd_engine::config::CONFIG_FILE;
    let out = git.output(["show", &format!("{rev}:{file}")]).map_err(|_| {
        ConductError::config(format!(
            "no {file} committed at {rev}: a worktree run reads the committed {file}, so commit it first"
        ))
    })?;
    let text = String::from_utf8(out.stdout)
        .map_err(|_| ConductError::config(format!("{file} at {rev} is not UTF-8")))?;
    let config =
        Config::parse(&path.join(file), &text).map_err(|e| ConductError::config(e.render()))?;
    Ok((config, text))
}

impl<'p> Conductor<'p> {
    /// Prepares a run: the lock, the core lease, the config, the providers, the conduct
    /// id (new or resumed) and the forge. Nothing in the user's work tree changes yet; in
    /// worktree mode the conductor's own worktree is created (or reused) here, and the
    /// run's config is the one committed there. The core lease counts from here until
    /// the conductor is dropped.
    pub fn open(
        work_tree: &Path,
        config: Config,
        config_text: &str,
        options: Options,
        progress: &'p dyn Progress,
    ) -> Result<Conductor<'p>, ConductError> {
        let location = LedgerLocation::resolve(work_tree, &GitProbe)?;
        // Before anything opens (or creates) the ledger: no conduct acts on one that fails.
        tdd_engine::integrity::ensure_intact(&location.database, work_tree, &crate::EVENT_KINDS)
            .map_err(tdd_engine::run::RunError::from)?;
        let (issue, connected) = crate::forge::connect(&options.forge)?;
        let n = issue.number();
        let branch = branch_name(&config, &issue);
        let (target, own_worktree) = placement(work_tree, &location, &config, &options, n)?;
        // Locked before the worktree is made, so two conductors never race to make it.
        let lock = WorktreeLock::acquire(&location.dir, &target)?;
        // From here until the conductor is dropped, every runner on this machine that
        // counts leases in this directory shares the cores with this conductor. A bad
        // budget is refused here, before anything acts.
        Budget::from_env()?;
        let leases = LeaseDir::resolve();
        let lease = leases.take(&target)?;
        // Its leaves and the commands relayed for them count the same leases, whatever
        // runtime or temporary directory they are given.
        let mut caller_env: BTreeMap<String, String> = std::env::vars().collect();
        caller_env.insert(
            LEASE_DIR_VAR.to_string(),
            leases.path().to_string_lossy().into_owned(),
        );
        let (config, config_text) = if own_worktree {
            committed_config(work_tree, &target, &branch)?
        } else {
            (config, config_text.to_string())
        };
        // Checked before the worktree is made: a bad provider leaves nothing behind.
        let (developer, verifier) = providers(&config, &options)?;
        if own_worktree {
            crate::worktree::ensure(work_tree, &target, &branch)?;
        }
        let engine = Session::new(&target, config.clone(), &config_text, crate::EVENT_KINDS)?;
        if own_worktree {
            engine.ensure_ledger_intact()?;
        }
        let work_tree = engine.work_tree().to_path_buf();
        let leaves =
            Leaves::for_repository(&location, &options.tdd_exe).caller_env(caller_env.clone());
        let plan_path = format!(".tdd/issue-{n}.md");
        let (begun, conduct) = how_begun(&location.database, &work_tree, n, &branch, &plan_path)?;
        let dir = location.dir.join("conduct").join(&conduct);
        let journal = Journal::new(&location.database, &conduct);
        let forge = connected.into_forge(&dir, journal.clone());
        // The relay serves leaves that cannot reach the ledger themselves: only where
        // confinement takes effect.
        // (`probe` also says no Landlock when `TDD_SANDBOX_NO_LANDLOCK` is set.)
        let confining = config.sandbox.enabled && tdd_sandbox::probe().confines();
        let relay = if confining {
            Some(start_relay(&options, &location, caller_env)?)
        } else {
            None
        };
        Ok(Conductor {
            work_tree,
            config,
            engine,
            location,
            leaves,
            developer,
            verifier,
            journal,
            forge,
            plan_path,
            issue,
            branch,
            dir,
            options,
            progress,
            lock,
            _lease: lease,
            begun,
            cursor: Cursor::default(),
            own_worktree,
            relay,
            warned_clis: Default::default(),
        })
    }
}

/// How this invocation stands to the earlier conduct runs of issue `n` in `work_tree`,
/// and the id of the conduct run it is: the unfinished one it resumes, the finished one
/// it republishes, or a new one.
fn how_begun(
    database: &Path,
    work_tree: &Path,
    n: u64,
    branch: &str,
    plan_path: &str,
) -> Result<(Begun, String), ConductError> {
    if let Some(id) = open_conduct(database, work_tree, n)? {
        return Ok((Begun::Resumed, id));
    }
    if let Some(id) = finished_conduct(database, work_tree, n, branch, plan_path)? {
        return Ok((Begun::Finished, id));
    }
    let id = format!(
        "conduct-i{n}-{}-{:x}",
        tdd_engine::ledger::clock::unix_seconds(),
        std::process::id()
    );
    Ok((Begun::Fresh, id))
}

/// The engine relay for this conductor's confined leaves, counting the same leases.
fn start_relay(
    options: &Options,
    location: &LedgerLocation,
    caller_env: BTreeMap<String, String>,
) -> Result<crate::relay::Relay, ConductError> {
    crate::relay::Relay::start(
        options.tdd_exe.clone(),
        location.database.clone(),
        caller_env,
        options.relay_args,
    )
    .map_err(|e| ConductError::config(format!("failed to open the engine relay: {e}")))
}
