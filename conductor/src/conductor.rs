//! The `Conductor`: one issue, driven from plan to draft PR (or a bail, or a stop).

use std::collections::BTreeMap;
use std::path::Path;
use std::path::PathBuf;

use serde_json::json;
use tdd_engine::config::Config;
use tdd_engine::git::Git;
use tdd_engine::git::GitProbe;
use tdd_engine::ledger::LedgerLocation;
use tdd_engine::observe::lease::Budget;
use tdd_engine::observe::lease::LEASE_DIR_VAR;
use tdd_engine::observe::lease::Lease;
use tdd_engine::observe::lease::LeaseDir;
use tdd_engine::run::Progress;
use tdd_engine::run::Session;
use tdd_leaves::Leaves;
use tdd_leaves::Provider;
use tdd_leaves::providers::SelfExe;
use tdd_prompts::Issue;

use crate::bail::Bail;
use crate::bail::BailCause;
use crate::error::Cause;
use crate::error::ConductError;
use crate::error::Doing;
use crate::error::Halt;
use crate::events::BinaryAccepted;
use crate::events::Completed;
use crate::events::ConductStarted;
use crate::events::ConductorEvent;
use crate::events::OrphanLeafEnded;
use crate::events::Resumed;
use crate::events::Stopped;
use crate::forge::Forge;
use crate::forge::ForgeSpec;
use crate::journal::Journal;
use crate::lock::WorktreeLock;

/// The run comment's status once every step is done.
const DONE: &str = "done: every step is finished; the draft PR is ready for review";

/// What `tdd conduct` was asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where the issue comes from and progress goes: a local file or a GitHub issue.
    pub forge: ForgeSpec,
    /// The developer and planner provider (else `[conductor] provider`).
    pub provider: Option<String>,
    /// The verifier provider (else `[conductor] verifier_provider`, else the provider).
    pub verifier_provider: Option<String>,
    /// Stop (exit 0, resumable) after this many steps in this invocation.
    pub max_steps: Option<u32>,
    /// The running `tdd` binary (leaves and supervisors are launched through it).
    pub tdd_exe: PathBuf,
    /// What a resume does when the running binary is not the one the run started with.
    pub new_binary: NewBinary,
    /// Where the conductor works.
    pub place: Place,
    /// The command-line parser's check of what a leaf asks the relay to run.
    pub relay_args: crate::relay::ArgsCheck,
    /// The run report's header figures for the top of the draft PR.
    pub pr_figures: crate::report::Figures,
    /// Where a reviewer finds the run report.
    pub report_place: crate::report::ReportPlace,
}

/// What a resume does when the running `tdd` binary is not the one the run started with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NewBinary {
    /// Refuse to resume (`binary_changed`), naming both hashes.
    #[default]
    Refuse,
    /// Go on with the new binary, recording the change (`--accept-new-binary`).
    Accept,
}

/// Where the conductor works.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Place {
    /// Where `[conductor] worktree` says (or where an open conduct of the issue already
    /// works).
    #[default]
    AsConfigured,
    /// In the conductor's own `git worktree` (see [`crate::worktree`]) whatever the
    /// configuration says (`--worktree`).
    OwnWorktree,
}

/// How a conduct invocation ended.
#[derive(Debug)]
pub enum Finish {
    /// Every step is done; the draft PR is up to date.
    Completed(Summary),
    /// `--max-steps` steps were done; `tdd conduct` again continues.
    Paused(Summary),
    /// The run bailed (exit 4).
    Bailed(Summary, Bail),
    /// A stop was requested (exit 5).
    Stopped(Summary, String),
}

/// Where the run's records are.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Summary {
    /// The conduct id.
    pub conduct: String,
    /// The engine run, once started.
    pub run_id: Option<String>,
    /// The issue number.
    pub issue: u64,
    /// The work branch.
    pub branch: String,
    /// Steps done (ticked), and their number.
    pub steps_done: usize,
    /// The number of steps planned.
    pub steps: usize,
    /// The run's directory (thread.md, pr.md).
    pub dir: PathBuf,
    /// The draft PR: its file (local forge) or its URL (empty before it is opened).
    pub pr: String,
    /// The conductor's own git worktree, where the branch and its commits are, when the
    /// run works in one; `None` when it works in the user's work tree.
    pub worktree: Option<PathBuf>,
}

/// What moves while a conductor works: the engine run it drives (once started or
/// found), whether it resumed an earlier conduct of the issue, whether that conduct had
/// already finished the issue (then it is only published again), and the committed
/// plan's step count once read. The rest of a [`Conductor`] (the work tree, the
/// configuration, the engine, the leaves and providers, the forge, the journal, the
/// issue, the options) is fixed when it opens.
#[derive(Debug, Default)]
pub(crate) struct Cursor {
    /// The engine run of this conduct, once started or found.
    pub(crate) run_id: Option<String>,
    /// Whether this invocation continues an earlier conduct of the issue.
    pub(crate) resumed: bool,
    /// Whether the run this one continues already completed the issue.
    pub(crate) finished: bool,
    /// The committed plan's step count, once read (see `steps_planned`).
    pub(crate) steps_planned: std::cell::Cell<u32>,
    /// The first write the sandbox refused the last leaf, if it refused one: what a
    /// bail that blames the agents is said as instead (see `crate::denied`).
    pub(crate) denied: std::cell::RefCell<Option<crate::denied::Denied>>,
}

/// One conduct run of one issue in one work tree.
pub struct Conductor<'p> {
    pub(crate) work_tree: PathBuf,
    pub(crate) config: Config,
    pub(crate) engine: Session,
    pub(crate) location: LedgerLocation,
    pub(crate) leaves: Leaves,
    pub(crate) developer: Box<dyn Provider>,
    pub(crate) verifier: Box<dyn Provider>,
    pub(crate) journal: Journal,
    pub(crate) forge: Box<dyn Forge>,
    pub(crate) issue: Issue,
    pub(crate) branch: String,
    pub(crate) plan_path: String,
    pub(crate) dir: PathBuf,
    pub(crate) options: Options,
    pub(crate) progress: &'p dyn Progress,
    pub(crate) lock: WorktreeLock,
    /// This conductor's share of the machine's cores, held until it is dropped.
    _lease: Lease,
    /// What moves while the conductor works; everything else here is fixed at open.
    pub(crate) cursor: Cursor,
    /// Whether `work_tree` is the conductor's own worktree rather than the user's.
    pub(crate) own_worktree: bool,
    /// The engine's door for confined leaves, when `[sandbox]` confines them.
    pub(crate) relay: Option<crate::relay::Relay>,
    /// The CLIs whose untested version was already reported in this process.
    pub(crate) warned_clis: std::cell::RefCell<std::collections::BTreeSet<String>>,
}

impl std::fmt::Debug for Conductor<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conductor")
            .field("work_tree", &self.work_tree)
            .field("conduct", &self.journal.conduct())
            .finish()
    }
}

/// The SHA-256 of the `tdd` binary at `path`.
fn binary_sha256(path: &Path) -> Result<String, ConductError> {
    use sha2::Digest;
    let bytes = std::fs::read(path).map_err(|source| {
        ConductError::io(format!("reading the tdd binary {}", path.display()), source)
    })?;
    Ok(hex::encode(sha2::Sha256::digest(&bytes)))
}

impl Conductor<'_> {
    /// A resumed run must continue with the binary it started with (or the last one
    /// accepted); another one is refused unless [`NewBinary::Accept`], which is recorded.
    fn check_binary(&self) -> Result<(), ConductError> {
        if !self.cursor.resumed {
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
        let resumed_id = open_conduct(&location.database, &work_tree, n)?;
        let finished_id = match resumed_id {
            Some(_) => None,
            None => finished_conduct(&location.database, &work_tree, n, &branch, &plan_path)?,
        };
        let finished = finished_id.is_some();
        let resumed = resumed_id.is_some();
        let conduct = resumed_id.or(finished_id).unwrap_or_else(|| {
            format!(
                "conduct-i{n}-{}-{:x}",
                tdd_engine::ledger::clock::unix_seconds(),
                std::process::id()
            )
        });
        let dir = location.dir.join("conduct").join(&conduct);
        let journal = Journal::new(&location.database, &conduct);
        let forge = connected.into_forge(&dir, journal.clone());
        // The relay serves leaves that cannot reach the ledger themselves: only where
        // confinement takes effect.
        // (`probe` also says no Landlock when `TDD_SANDBOX_NO_LANDLOCK` is set.)
        let confining = config.sandbox.enabled && tdd_sandbox::probe().confines();
        let relay = if confining {
            let relay = crate::relay::Relay::start(
                options.tdd_exe.clone(),
                location.database.clone(),
                caller_env,
                options.relay_args,
            )
            .map_err(|e| ConductError::config(format!("failed to open the engine relay: {e}")))?;
            Some(relay)
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
            cursor: Cursor {
                run_id: None,
                resumed,
                finished,
                steps_planned: std::cell::Cell::new(0),
                denied: Default::default(),
            },
            own_worktree,
            relay,
            warned_clis: Default::default(),
        })
    }

    /// Runs (or resumes) the issue to the end, a bail, a stop or `--max-steps`.
    pub fn run(mut self) -> Result<Finish, ConductError> {
        let span = tracing::info_span!(
            "conduct",
            conduct = self.journal.conduct(),
            issue = self.issue.number(),
            run_id = tracing::field::Empty,
        );
        let _entered = span.enter();
        if self.cursor.finished {
            return self.republish();
        }
        let driven = self.drive();
        if let Some(run_id) = &self.cursor.run_id {
            span.record("run_id", run_id.as_str());
        }
        tracing::info!(outcome = driven_outcome(&driven), "conduct ended");
        match driven {
            Ok(paused) => {
                let summary = self.summary();
                if paused {
                    return Ok(Finish::Paused(summary));
                }
                self.journal.record(&ConductorEvent::Completed(Completed {
                    run_id: self.cursor.run_id.clone(),
                }))?;
                Ok(Finish::Completed(summary))
            }
            Err(Halt::Bail(bail)) => {
                let bail = match self.cursor.denied.borrow_mut().take() {
                    Some(denied) => crate::denied::explain(bail, &denied),
                    None => bail,
                };
                self.bail(&bail)?;
                Ok(Finish::Bailed(self.summary(), bail))
            }
            Err(Halt::Stop(mode)) => {
                self.journal.record(&ConductorEvent::Stopped(Stopped {
                    mode: mode.clone(),
                    run_id: self.cursor.run_id.clone(),
                }))?;
                self.report_stop(&mode)?;
                Ok(Finish::Stopped(self.summary(), mode))
            }
            Err(Halt::Error(err)) => Err(err),
        }
    }

    /// The issue is done: the comments and the draft PR are written again from the
    /// ledger, which writes nothing that is already up to date on the forge.
    fn republish(&mut self) -> Result<Finish, ConductError> {
        self.announce();
        self.cursor.run_id = self.journal.engine_run()?;
        let republished = (|| -> Result<(), Halt> {
            self.write_run_comment(DONE)?;
            let branch = format!("refs/heads/{}", self.branch);
            for (n, _) in crate::plan::ticks_at(&self.work_tree, &branch, &self.plan_path) {
                self.write_step_comment(n)?;
            }
            self.publish(true)
        })();
        match republished {
            Ok(()) => Ok(Finish::Completed(self.summary())),
            Err(Halt::Bail(bail)) => Ok(Finish::Bailed(self.summary(), bail)),
            Err(Halt::Stop(mode)) => Ok(Finish::Stopped(self.summary(), mode)),
            Err(Halt::Error(err)) => Err(err),
        }
    }

    /// The run directory: the draft PR, the verifiers' scratch worktrees and the trace.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Reports the start (or resume) of the run, and where it works.
    fn announce(&self) {
        // An earlier conduct that bailed before its plan was committed left nothing to
        // resume: this one starts the issue anew, and says so.
        let branch = format!("refs/heads/{}", self.branch);
        let resuming = self.cursor.resumed
            && !crate::plan::ticks_at(&self.work_tree, &branch, &self.plan_path).is_empty();
        let worktree = self.own_worktree.then(|| self.work_tree.clone());
        let place = worktree
            .as_ref()
            .map(|w| format!(" in the worktree {}", w.display()))
            .unwrap_or_default();
        self.progress.event(
            "conduct_started",
            json!({ "issue": self.issue.number(), "resumed": resuming, "worktree": worktree }),
            &format!(
                "{} issue #{}{place}: {}",
                if resuming { "resuming" } else { "conducting" },
                self.issue.number(),
                self.issue.title()
            ),
        );
    }

    /// The loop; `Ok(true)` when paused by `--max-steps`.
    fn drive(&mut self) -> Result<bool, Halt> {
        self.announce();
        self.check_binary()?;
        if self.issue.criteria().is_empty() {
            let question = crate::issue::no_criteria_question(self.issue.number());
            return Err(Bail::new(BailCause::NeedsUser, question.clone(), question)
                .at(0, "plan")
                .into());
        }
        // A stop request was for the run it stopped; this invocation starts afresh.
        let _ = self.leaves.supervisor().clear_stop();
        let n = self.issue.number();
        self.prepare_branch()
            .doing(|| format!("preparing the branch {}", self.branch))?;
        self.ensure_plan()
            .doing(|| format!("planning issue #{n}"))?;
        self.ensure_run()
            .doing(|| "starting the engine run and its baseline")?;
        self.check_agreement()
            .doing(|| "checking that the branch and the ledger agree")?;
        // The run comment only tells where the run stands: a forge that cannot take it
        // is recorded, and the step's own report decides whether the run goes on.
        self.best_effort(self.write_run_comment("running"))?;
        self.best_effort(self.forge.mark(crate::forge::RunMark::Running))?;
        self.settle_unjudged()
            .doing(|| "judging the phase a stopped conductor left unjudged")?;
        let mut done = 0;
        while let Some(state) = self.engine.status()? {
            if self.options.max_steps.is_some_and(|m| done >= m) {
                self.publish(false)?;
                return Ok(true);
            }
            let Some(index) = state.current() else { break };
            let n = state.plan.cycles[index].n;
            self.step(&state, index)
                .doing(|| format!("driving step {n}"))?;
            done += 1;
        }
        // A conductor killed between a step's close and its comment left it unwritten:
        // the upsert is idempotent, so every finished step's comment is (re)written.
        for (n, ticked) in crate::plan::ticks_at_head(&self.work_tree, &self.plan_path) {
            if ticked {
                self.write_step_comment(n)?;
            }
        }
        self.publish(true)?;
        self.write_run_comment(DONE)?;
        Ok(false)
    }

    /// Checks out the work branch: created on a fresh run from a clean tree; on a resume,
    /// the half-done step is reset first.
    fn prepare_branch(&mut self) -> Result<(), Halt> {
        let git = Git::new(&self.work_tree);
        if self.cursor.resumed {
            self.journal.record(&ConductorEvent::Resumed(Resumed {
                pid: std::process::id(),
            }))?;
            self.end_orphaned_leaves()?;
            // A kill inside the engine can leave HEAD one of its commits off the ledger.
            self.realign_head()?;
            // Before anything is reset: git and the ledger must agree on what is done.
            self.check_agreement()?;
            self.restore_phase_start()?;
        }
        let dirty = git.dirty_paths()?;
        if !dirty.is_empty() {
            return Err(Bail::new(
                BailCause::DirtyTree,
                format!(
                    "the work tree has uncommitted changes: {}",
                    dirty.join(", ")
                ),
                "commit or stash these files, then run `tdd conduct` again",
            )
            .into());
        }
        let current = git.text(["rev-parse", "--abbrev-ref", "HEAD"])?;
        if current != self.branch {
            let exists = git
                .output([
                    "rev-parse",
                    "--verify",
                    "--quiet",
                    &format!("refs/heads/{}", self.branch),
                ])
                .is_ok();
            if exists {
                git.output(["checkout", "-q", &self.branch])?;
            } else {
                git.output(["checkout", "-q", "-b", &self.branch])?;
            }
        }
        if !self.cursor.resumed {
            let started = ConductStarted {
                issue: self.issue.number(),
                worktree: self.work_tree.display().to_string(),
                branch: self.branch.clone(),
                plan: self.plan_path.clone(),
                issue_path: self.options.forge.describe(),
                version: env!("CARGO_PKG_VERSION").to_string(),
                binary_sha256: binary_sha256(&self.options.tdd_exe)?,
            };
            self.journal
                .record(&ConductorEvent::ConductStarted(started))?;
        }
        tdd_engine::failpoint::hit("conduct_branch");
        Ok(())
    }

    /// Kills and waits for the leaves of this issue that a killed conductor left
    /// running, so none of them writes into the tree while the step is reset.
    fn end_orphaned_leaves(&self) -> Result<(), ConductError> {
        let supervisor = self.leaves.supervisor();
        let tag = format!("-i{}-", self.issue.number());
        let running = supervisor
            .list()
            .map_err(|e| {
                ConductError::from(tdd_leaves::LeafError::from(e))
                    .while_doing("ending the leaves a killed conductor left running")
            })?
            .into_iter()
            .filter(|l| l.state == tdd_supervisor::LeafState::Running)
            .filter(|l| l.id.contains(&tag) || l.name.as_deref().is_some_and(|n| n.contains(&tag)));
        for leaf in running {
            let mut handle = supervisor.open(&leaf.id).map_err(|e| {
                ConductError::from(tdd_leaves::LeafError::from(e))
                    .while_doing("ending the leaves a killed conductor left running")
            })?;
            handle.kill(tdd_supervisor::Kill::Now).map_err(|e| {
                ConductError::from(tdd_leaves::LeafError::from(e))
                    .while_doing("ending the leaves a killed conductor left running")
            })?;
            handle
                .wait(Some(std::time::Duration::from_secs(30)))
                .map_err(|e| {
                    ConductError::from(tdd_leaves::LeafError::from(e))
                        .while_doing("ending the leaves a killed conductor left running")
                })?;
            self.journal
                .record(&ConductorEvent::OrphanLeafEnded(OrphanLeafEnded {
                    supervisor_id: leaf.id,
                }))?;
        }
        Ok(())
    }
}

/// How the loop ended, as a word for the trace.
fn driven_outcome(driven: &Result<bool, Halt>) -> &'static str {
    match driven {
        Ok(true) => "paused",
        Ok(false) => "completed",
        Err(Halt::Bail(_)) => "bailed",
        Err(Halt::Stop(_)) => "stopped",
        Err(Halt::Error(_)) => "failed",
    }
}
