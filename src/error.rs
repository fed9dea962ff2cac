//! The one error type commands return, with its exit status, reason code and hint.
//!
//! Library errors are converted here, once, so every reason code a user can see
//! is written in this file or in a command and listed in docs/cli.md.

use serde_json::Value;
use tdd_engine::config::ConfigError;
use tdd_engine::git::GitError;
use tdd_engine::integrity::IntegrityError;
use tdd_engine::ledger::LedgerError;
use tdd_engine::observe::lease::CORE_BUDGET_VAR;
use tdd_engine::observe::lease::LEASE_DIR_VAR;
use tdd_engine::observe::lease::LeaseError;
use tdd_engine::plan::PlanError;
use tdd_engine::run::CleanRoomError;
use tdd_engine::run::RunError;
use tdd_supervisor::LaunchError;
use tdd_supervisor::LeafError;
use tdd_supervisor::StopError;

use crate::exit::Exit;
use crate::output::NextAction;
use crate::output::Verb;

/// A command that did not do what was asked (boxed: errors travel up many frames).
#[derive(Debug)]
pub struct CommandError(Box<Failure>);

impl std::ops::Deref for CommandError {
    type Target = Failure;

    fn deref(&self) -> &Failure {
        &self.0
    }
}

impl std::ops::DerefMut for CommandError {
    fn deref_mut(&mut self) -> &mut Failure {
        &mut self.0
    }
}

/// The facts of a failed command.
#[derive(Debug)]
pub struct Failure {
    /// The exit status.
    pub exit: Exit,
    /// The machine-readable snake_case reason.
    pub reason: &'static str,
    /// One line saying what went wrong.
    pub message: String,
    /// What the user can do about it.
    pub hint: Option<String>,
    /// What an agent should do next.
    pub next_action: NextAction,
    /// Facts for the envelope's `data` (an empty object when there are none).
    pub data: Value,
    /// A longer text rendering of the error (a snippet with a caret), for terminals.
    pub detail: Option<String>,
    /// Text printed to stdout before the error on a terminal (for example a check table).
    pub text: Option<String>,
}

impl CommandError {
    /// The same error, said to have happened while `doing` (prefixed to its message).
    #[must_use]
    pub fn doing(mut self, doing: &str) -> CommandError {
        self.0.message = format!("while {doing}: {}", self.0.message);
        self
    }

    fn new(exit: Exit, reason: &'static str, message: impl Into<String>, verb: Verb) -> Self {
        let message = message.into();
        CommandError(Box::new(Failure {
            exit,
            reason,
            next_action: NextAction::new(verb, message.clone()),
            message,
            hint: None,
            data: Value::Null,
            detail: None,
            text: None,
        }))
    }

    /// A precondition or gate said no (exit 1).
    pub fn refused(reason: &'static str, message: impl Into<String>) -> Self {
        CommandError::new(Exit::Refused, reason, message, Verb::ResolveBlocker)
    }

    /// The input was wrong (exit 2).
    pub fn bad_input(reason: &'static str, message: impl Into<String>) -> Self {
        CommandError::new(Exit::BadInput, reason, message, Verb::FixArguments)
    }

    /// A bug or an environment failure `tdd` cannot explain further (exit 70).
    pub fn internal(reason: &'static str, message: impl Into<String>) -> Self {
        CommandError::new(Exit::Internal, reason, message, Verb::ReportBug)
    }

    /// A conductor run bailed (exit 4); `reason` is the bail cause.
    pub fn bailed(reason: &'static str, message: impl Into<String>) -> Self {
        CommandError::new(Exit::Bailed, reason, message, Verb::ResolveBlocker)
    }

    /// A conductor run stopped on request (exit 5).
    pub fn stopped(message: impl Into<String>) -> Self {
        CommandError::new(Exit::Stopped, "stopped", message, Verb::ResumeConduct)
    }

    /// Adds the hint shown after the message.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        let hint = hint.into();
        self.next_action.detail = hint.clone();
        self.hint = Some(hint);
        self
    }

    /// Replaces the next action's verb.
    pub fn verb(mut self, verb: Verb) -> Self {
        self.next_action.verb = verb;
        self
    }

    /// Attaches envelope data.
    pub fn data(mut self, data: Value) -> Self {
        self.data = data;
        self
    }

    /// Attaches a text rendering printed to stdout before the error on a terminal.
    pub fn text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }
}

impl From<ConfigError> for CommandError {
    fn from(err: ConfigError) -> Self {
        let (reason, exit) = match &err {
            ConfigError::Read { .. } => ("config_unreadable", Exit::BadInput),
            ConfigError::Invalid { .. } => ("config_invalid", Exit::BadInput),
        };
        let data = match &err {
            ConfigError::Invalid {
                path,
                line,
                column,
                suggestion,
                ..
            } => serde_json::json!({
                "path": path, "line": line, "column": column, "suggestion": suggestion,
            }),
            ConfigError::Read { path, .. } => serde_json::json!({ "path": path }),
        };
        let mut out = CommandError::new(exit, reason, err.to_string(), Verb::FixConfig);
        out.detail = Some(err.render());
        out.data = data;
        match err.hint() {
            Some(hint) => out.hint(hint),
            None => out,
        }
    }
}

impl From<LeaseError> for CommandError {
    fn from(err: LeaseError) -> Self {
        let message = error_chain(&err);
        match err {
            LeaseError::BadBudget { value } => {
                CommandError::bad_input("core_budget_invalid", message)
                    .verb(Verb::ResolveBlocker)
                    .hint(format!(
                        "set {CORE_BUDGET_VAR} to the number of cores the conductors of this \
                         machine share, a whole number of 1 or more, or unset it to share all \
                         of them"
                    ))
                    .data(serde_json::json!({ "value": value }))
            }
            LeaseError::NotPrivate { path } => CommandError::refused("lease_unavailable", message)
                .hint(format!(
                    "remove {} (tdd makes it again, private to you), or set {LEASE_DIR_VAR} \
                     to a directory of yours that only you can write",
                    path.display()
                ))
                .data(serde_json::json!({ "path": path })),
            LeaseError::Io { path, .. } => CommandError::refused("lease_unavailable", message)
                .hint(format!(
                    "make {} writable, or set {LEASE_DIR_VAR} to a directory of yours",
                    path.display()
                ))
                .data(serde_json::json!({ "path": path })),
            LeaseError::NoHolder { .. } => CommandError::internal("lease_unavailable", message),
        }
    }
}

impl From<GitError> for CommandError {
    fn from(err: GitError) -> Self {
        match err {
            GitError::NotARepository(path) => CommandError::refused(
                "not_a_repository",
                format!("{} is not inside a git work tree", path.display()),
            )
            .hint("run tdd inside a git repository, or pass -C <dir>"),
            GitError::Spawn(_) => CommandError::refused("git_missing", err.to_string())
                .hint("install git and make sure it is on PATH"),
            GitError::Stalled { .. } => CommandError::refused("git_stalled", err.to_string()).hint(
                "find the named pipe with `find . -type p` (the work tree and .git), \
                     remove it, then run the command again",
            ),
            GitError::NotRegular { .. } => {
                CommandError::refused("repository_file_not_regular", err.to_string()).hint(
                    "remove it (for .git/index, then run `git reset` to rebuild the index \
                     from HEAD), then run the command again",
                )
            }
            GitError::FileTooLarge {
                ref path,
                size,
                limit,
            } => {
                let data = serde_json::json!({ "path": path, "bytes": size, "limit": limit });
                CommandError::refused("file_too_large", err.to_string())
                    .hint(format!(
                        "tdd commits every changed file it judges; if {path} is no part of \
                         the change, remove it or add it to .gitignore, then run the command \
                         again"
                    ))
                    .data(data)
            }
            GitError::ChangesTooLarge { limit } => {
                CommandError::refused("file_too_large", err.to_string())
                    .hint(
                        "tdd commits every changed file it judges: remove the large files \
                         that are no part of the change, or add them to .gitignore \
                         (`git status --short` lists them), then run the command again",
                    )
                    .data(serde_json::json!({ "limit": limit }))
            }
            GitError::ObjectMissing { ref id } => {
                let data = serde_json::json!({ "object": id });
                CommandError::refused("object_missing", err.to_string())
                    .hint(
                        "the repository lost an object it needs: `git fsck` lists what is \
                         missing; fetch it again from a clone or remote (`git fetch`), then \
                         run the command again",
                    )
                    .data(data)
            }
            GitError::ObjectDamaged { ref id, ref found } => {
                let data = serde_json::json!({ "object": id, "hashes_to": found });
                CommandError::refused("object_damaged", err.to_string())
                    .hint(
                        "nothing was judged from it; `git fsck` shows the damage: remove the \
                         bad copy (a loose object under .git/objects, or an alternate in \
                         .git/objects/info/alternates) and fetch the object again from a \
                         clone or remote, then run the command again",
                    )
                    .data(data)
            }
            GitError::ObjectUnwritable { ref id, .. } => {
                let data = serde_json::json!({ "object": id });
                CommandError::refused("object_store_damaged", err.to_string())
                    .hint(
                        "`git fsck` shows the damage: remove what stands where the object \
                         belongs under .git/objects (a directory or a named pipe), or make \
                         .git/objects writable, then run the command again",
                    )
                    .data(data)
            }
            GitError::IndexDamaged { .. } => {
                CommandError::refused("index_damaged", err.to_string()).hint(
                    "remove .git/index and run `git reset` to rebuild it from HEAD (the files \
                     of the work tree are kept), then run the command again",
                )
            }
            GitError::Unresolved { .. } => {
                CommandError::refused("head_unreadable", err.to_string()).hint(
                    "`git status` and `git fsck` show what is damaged: restore .git/HEAD \
                     (`git symbolic-ref HEAD refs/heads/<branch>`) or the branch \
                     (`git update-ref refs/heads/<branch> <commit>`, with a commit from \
                     `git reflog`), then run the command again",
                )
            }
            GitError::ObjectUnreadable { ref id, .. } => {
                let data = serde_json::json!({ "object": id });
                CommandError::refused("object_damaged", err.to_string())
                    .hint(
                        "nothing was judged from it; `git fsck` shows the damage: remove the \
                         bad copy under .git/objects and fetch the object again from a clone \
                         or remote (`git fetch`), then run the command again",
                    )
                    .data(data)
            }
            GitError::WorkTree { .. } => {
                CommandError::refused("work_tree_unwritable", error_chain(&err))
                    .hint("make the work tree writable by this user, then run the command again")
            }
            GitError::RefNotMoved {
                ref reference,
                ref lock,
                ..
            } => {
                let data = serde_json::json!({ "reference": reference, "lock": lock });
                let hint = match lock {
                    Some(lock) => format!(
                        "once no other tdd or git is running in this repository, remove {} \
                         (a lock left behind), then run the command again",
                        lock.display()
                    ),
                    None => {
                        "another process moved the ref meanwhile: run the command again".to_string()
                    }
                };
                CommandError::refused("ref_locked", err.to_string())
                    .hint(hint)
                    .data(data)
            }
            GitError::Failed { ref stderr, .. } if git_said_why(stderr) => {
                let hint = if stderr.contains(".lock") && stderr.contains("File exists") {
                    "git found a lock file, named above: another git process is working in \
                     this repository, or one was stopped before it finished; once no other \
                     git or tdd is running here, remove that file, then run the command again"
                } else {
                    "git itself refused, in the words above: `git status` and `git fsck` show \
                     what is wrong with the repository (a damaged .git/config, a ref, an \
                     object, or a hook that failed); fix it, then run the command again"
                };
                CommandError::refused("git_refused", err.to_string()).hint(hint)
            }
            other => CommandError::internal("git_failed", other.to_string()),
        }
    }
}

/// Whether git said why it failed: a line of its `stderr` starts with `fatal:` or
/// `error:`, whatever `hint:` or `warning:` lines come before it.
fn git_said_why(stderr: &str) -> bool {
    stderr.lines().any(|line| {
        let line = line.trim_start();
        line.starts_with("fatal:") || line.starts_with("error:")
    })
}

impl From<LedgerError> for CommandError {
    fn from(err: LedgerError) -> Self {
        let message = error_chain(&err);
        match err {
            LedgerError::NotARepository(_) => CommandError::refused("not_a_repository", message)
                .hint("run tdd inside a git repository, or pass -C <dir>"),
            LedgerError::HomeInsideWorkTree { .. } | LedgerError::RelativeHome { .. } => {
                CommandError::bad_input("ledger_home_invalid", message).hint(
                    "set TDD_LEDGER_HOME to an absolute directory outside every git work tree",
                )
            }
            LedgerError::NoHome => CommandError::bad_input("ledger_home_invalid", message)
                .hint("set TDD_LEDGER_HOME (or HOME) to an absolute directory"),
            LedgerError::TooNew { .. } => CommandError::refused("ledger_too_new", message)
                .hint("upgrade tdd to the version that wrote this ledger"),
            // The engine's git probe puts a `GitError` here; map it as every git failure.
            LedgerError::Git(source) => match source.downcast::<GitError>() {
                Ok(git) => (*git).into(),
                Err(other) => CommandError::internal("git_failed", other.to_string()),
            },
            LedgerError::CreateDir { .. } => CommandError::refused("ledger_unreachable", message)
                .hint("make the ledger home writable, or set TDD_LEDGER_HOME elsewhere"),
            LedgerError::Event(_) => CommandError::refused("ledger_event_invalid", message).hint(
                "an event is not what its kind says, or its kind is unknown: check the ledger with `tdd ledger verify`, and use the tdd release that wrote it",
            ),
            LedgerError::Damaged { ref path, .. } => {
                let hint = format!(
                    "tdd never opens or rewrites a damaged ledger: move it aside (`mv {0} {0}.damaged`), then {1}",
                    path.display(),
                    tdd_engine::integrity::RESTORE_HINT
                );
                CommandError::refused("ledger_corrupt", message).hint(hint)
            }
            LedgerError::StateNotADirectory { ref path, .. } => state_damaged(message, path),
            LedgerError::StrayJournal { ref path, ref journal } => {
                let data = serde_json::json!({ "path": path, "journal": journal });
                CommandError::refused("ledger_corrupt", message)
                    .hint(format!(
                        "tdd never rolls a journal into the ledger: move it aside (`mv {0} {0}.damaged`), then run `tdd ledger verify`; if it fails, {1}",
                        journal.display(),
                        tdd_engine::integrity::RESTORE_HINT
                    ))
                    .data(data)
            }
            LedgerError::Busy { ref path } => {
                let data = serde_json::json!({ "path": path });
                CommandError::refused("ledger_busy", message)
                    .hint(format!(
                        "another process keeps {0} open with a transaction (a tdd command still running, or a program reading or writing the ledger): let it finish or stop it (`fuser {0}` names it), then run the command again",
                        path.display()
                    ))
                    .data(data)
            }
            // tdd writes every payload as JSON: one that is not was written by another
            // hand, and the ledger is damaged.
            LedgerError::BadPayload { .. } => CommandError::refused("ledger_corrupt", message)
                .hint(format!(
                    "run `tdd ledger verify` to see where the chain breaks; {}",
                    tdd_engine::integrity::RESTORE_HINT
                )),
            LedgerError::Denied { ref path, .. } => {
                let data = serde_json::json!({ "path": path });
                CommandError::refused("ledger_denied", message)
                    .hint(format!(
                        "give your user back read and write rights on {0} and the directory holding it (`ls -ld {0} {1}` shows them; `chmod u+rw`), or point TDD_LEDGER_HOME at a directory you can write, then run the command again",
                        path.display(),
                        path.parent().map(|p| p.display().to_string()).unwrap_or_default()
                    ))
                    .data(data)
            }
            LedgerError::Sqlite { .. } => CommandError::internal("ledger_failed", message),
        }
    }
}

impl From<IntegrityError> for CommandError {
    fn from(err: IntegrityError) -> Self {
        match err {
            IntegrityError::Tampered(found) => CommandError::refused(
                "ledger_tampered",
                format!("the ledger fails verification: {}", found.summary()),
            )
            .hint(tdd_engine::integrity::RESTORE_HINT)
            .data(serde_json::json!(found)),
            IntegrityError::Ledger(e) => e.into(),
            IntegrityError::Git(e) => e.into(),
            IntegrityError::Unpublished { .. } => {
                CommandError::refused("ledger_unpublished", err.to_string())
                    .hint(tdd_engine::integrity::UNPUBLISHED_HINT)
            }
            IntegrityError::Published(e) => e.into(),
        }
    }
}

impl From<tdd_engine::published::PublishError> for CommandError {
    fn from(err: tdd_engine::published::PublishError) -> Self {
        use tdd_engine::published::PublishError;
        let message = error_chain(&err);
        match err {
            PublishError::Ledger(e) => e.into(),
            PublishError::Git(e) => e.into(),
            PublishError::Encode(_) => CommandError::internal("ledger_failed", message),
            PublishError::NotACommit { reference, .. } => {
                CommandError::refused("ledger_ref_invalid", message).hint(format!(
                    "nothing was published or taken in; see what it names with `git cat-file -t {reference}`, then delete it with `git update-ref -d {reference}` (`tdd ledger publish` writes it again)"
                ))
            }
            PublishError::Malformed { reference, .. } | PublishError::Refused { reference, .. } => {
                CommandError::refused("ledger_published_refused", message).hint(format!(
                    "nothing was taken in; compare the ledger here (`tdd ledger export`) with the one published in {reference} (`git show {reference}`), fetch the right one or delete the ref with `git update-ref -d {reference}`"
                ))
            }
        }
    }
}

impl From<LaunchError> for CommandError {
    fn from(err: LaunchError) -> Self {
        let message = error_chain(&err);
        match err {
            LaunchError::StopPending { .. } => CommandError::refused("stop_pending", message).hint(
                "wait for the stop to be handled, or run `tdd stop --clear` to allow new leaves",
            ),
            LaunchError::InvalidSpec { .. } => CommandError::bad_input("exec_invalid", message),
            LaunchError::Prepare { .. } | LaunchError::Record(_) => {
                CommandError::refused("write_failed", message)
                    .hint("make the ledger directory writable (see `tdd ledger path`)")
            }
            LaunchError::SpawnSupervisor { .. }
            | LaunchError::SupervisorFailed { .. }
            | LaunchError::SupervisorTimeout { .. } => {
                CommandError::internal("supervisor_failed", message)
                    .hint("the supervisor's own log is named in the message")
            }
        }
    }
}

impl From<LeafError> for CommandError {
    fn from(err: LeafError) -> Self {
        let message = error_chain(&err);
        match err {
            LeafError::NotFound { .. } | LeafError::InvalidId { .. } => {
                CommandError::bad_input("leaf_not_found", message)
                    .hint("`tdd leaves` lists the leaves of this repository")
            }
            LeafError::Record(_) | LeafError::List { .. } | LeafError::Output { .. } => {
                CommandError::refused("leaf_unreadable", message)
            }
        }
    }
}

impl From<tdd_leaves::StopFailed> for CommandError {
    fn from(err: tdd_leaves::StopFailed) -> Self {
        match err {
            tdd_leaves::StopFailed::Supervisor(e) => e.into(),
            tdd_leaves::StopFailed::Ledger(e) => e.into(),
        }
    }
}

impl From<StopError> for CommandError {
    fn from(err: StopError) -> Self {
        CommandError::refused("write_failed", error_chain(&err))
            .hint("make the ledger directory writable (see `tdd ledger path`)")
    }
}

/// An error and its sources as one `: `-joined line (the supervisor's, the one
/// implementation in `tdd`).
pub use tdd_supervisor::error_chain;

impl From<PlanError> for CommandError {
    fn from(err: PlanError) -> Self {
        let message = err.to_string();
        match err {
            PlanError::Malformed { .. } => {
                CommandError::bad_input("plan_invalid", message).verb(Verb::FixConfig).hint(
                    "fix the plan's front-matter at that line and column and commit it; docs/cli.md lists every key",
                )
            }
            PlanError::Invalid { .. } => {
                CommandError::bad_input("plan_invalid", message).verb(Verb::FixConfig).hint(
                    "fix the plan's front-matter where the message says (the cycle and the key it names) and commit it; docs/cli.md lists every key",
                )
            }
            PlanError::NoFrontMatter { .. } => {
                CommandError::bad_input("plan_invalid", message).verb(Verb::FixConfig).hint(
                    "start the plan with a `---` line, its YAML front-matter, and a closing `---` line, then commit it; docs/cli.md lists every key",
                )
            }
            PlanError::Uncommitted { .. } => CommandError::refused("plan_uncommitted", message)
                .hint("commit the plan; tdd reads the committed version, never the working copy"),
            PlanError::Git(git) => git.into(),
        }
    }
}

impl From<tdd_conductor::ConductError> for CommandError {
    fn from(err: tdd_conductor::ConductError) -> Self {
        use tdd_conductor::Cause as E;
        let message = error_chain(&err);
        let (doing, cause) = err.into_parts();
        let within = |inner: CommandError| inner.doing(&doing);
        match cause {
            E::Engine(e) => within(e.into()),
            E::Ledger(e) => within(e.into()),
            E::Git(e) => within(e.into()),
            E::Lease(e) => within(e.into()),
            E::Lock(tdd_conductor::lock::LockError::Held { ref pid }) => {
                let data = serde_json::json!({ "pid": pid });
                CommandError::refused("conductor_running", message)
                    .hint(format!("wait for process {pid}, or stop it with `tdd stop`"))
                    .data(data)
            }
            E::Forge(ref forge) => match forge.bail() {
                Some(bail) => CommandError::bailed(bail.cause.as_str(), message)
                    .hint(bail.action.clone())
                    .data(serde_json::json!({ "bail": bail })),
                None => CommandError::internal("conduct_failed", message),
            },
            E::Issue(_) => CommandError::bad_input("issue_invalid", message)
                .hint("an issue file needs a `# Title` line and `- [ ]` items under `## Acceptance criteria`"),
            E::Worktree(_) => CommandError::refused("worktree_unavailable", message).hint(
                "move the path aside, or free the work branch, then run `tdd conduct` again",
            ),
            E::BinaryChanged { .. } => CommandError::refused("binary_changed", message)
                .hint("resume with the binary the run started with, or pass --accept-new-binary (recorded)"),
            E::Provider(_) | E::Config(_) => CommandError::bad_input("config_invalid", message)
                .verb(Verb::FixConfig)
                .hint("set [conductor] provider and the provider's table in tdd.toml"),
            _ => CommandError::internal("conduct_failed", message),
        }
    }
}

impl From<RunError> for CommandError {
    fn from(err: RunError) -> Self {
        let message = error_chain(&err);
        match err {
            RunError::Ledger(e) => e.into(),
            RunError::Integrity(e) => e.into(),
            RunError::Git(e) => e.into(),
            RunError::Plan(e) => e.into(),
            RunError::Observe(
                tdd_engine::observe::ObserveError::BadTarget { .. }
                | tdd_engine::observe::ObserveError::OptionTarget { .. },
            ) => CommandError::bad_input("target_invalid", message)
                .hint("name a test id as `tdd status` shows it (`project::id`)"),
            RunError::Observe(_) => CommandError::refused("runner_unavailable", message)
                .hint("check the project's runner with `tdd doctor`"),
            RunError::Glob(_) => CommandError::bad_input("config_invalid", message)
                .verb(Verb::FixConfig)
                .hint("fix the lock globs in tdd.toml"),
            RunError::KnownFailures(_) => CommandError::bad_input("config_invalid", message)
                .verb(Verb::FixConfig)
                .hint("fix the known_failures entries in tdd.toml"),
            RunError::NoActiveRun => CommandError::refused("no_active_run", message)
                .verb(Verb::StartRun)
                .hint("start one with `tdd run start --plan <path>`"),
            RunError::RunActive { ref run_id } => {
                let data = serde_json::json!({ "run_id": run_id });
                CommandError::refused("run_active", message)
                    .hint("finish it, or abandon it with `tdd run abandon --reason ...`")
                    .data(data)
            }
            RunError::DirtyTree { ref files } => {
                let data = serde_json::json!({ "files": files });
                CommandError::refused("dirty_tree", message)
                    .hint("commit or stash these files first")
                    .data(data)
            }
            RunError::Busy { ref holder } => {
                let reason = if holder.what == "baseline" { "baseline_in_progress" } else { "advance_in_flight" };
                let data = serde_json::to_value(holder).unwrap_or_default();
                CommandError::refused(reason, message)
                    .verb(Verb::AwaitBaseline)
                    .hint(format!("wait for process {} to finish", holder.pid))
                    .data(data)
            }
            RunError::PlanChanged { .. } => CommandError::refused("plan_changed", message)
                .hint("register the new plan with `tdd plan register` and start a new run, or restore the registered one"),
            RunError::TargetNotNew { ref candidates, .. } => {
                let data = serde_json::json!({ "candidates": candidates });
                CommandError::refused("target_not_new", message)
                    .verb(Verb::NameTargetTest)
                    .hint("name one of the tests that are new in this cycle")
                    .data(data)
            }
            RunError::NoSuchProject { ref nearest, ref declared, .. } => {
                let hint = nearest.as_ref().map_or_else(
                    || format!("declared projects: {}", declared.join(", ")),
                    |n| format!("did you mean `{n}`?"),
                );
                CommandError::bad_input("unknown_project", message).hint(hint)
            }
            RunError::AmbiguousTarget { .. } => CommandError::bad_input("ambiguous_target", message)
                .hint("qualify the id as `project::id` or pass --project"),
            RunError::NoProjects => CommandError::refused("config_missing", message)
                .hint("add a [project.NAME] table"),
            RunError::UnknownProject { .. } => CommandError::bad_input("config_invalid", message)
                .verb(Verb::FixConfig)
                .hint("declare the project again in tdd.toml, or abandon the run"),
            RunError::NoPreviousPhase { .. } => CommandError::refused("no_previous_phase", message)
                .hint("roll back within the current phase with `tdd rollback`"),
            RunError::Blocked { .. } => CommandError::refused("run_blocked", message)
                .verb(Verb::Blocked)
                .hint("a human resolves the blocker, then runs `tdd resume --unblock --note ...`"),
            RunError::CleanRoom(CleanRoomError::LinkLeavesTree { .. }) => {
                CommandError::refused("link_outside_tree", message)
                    .verb(Verb::ResolveBlocker)
                    .hint("commit the file the link points at instead of the link, or point the link inside the repository; a gate decision must hold from the commit alone")
            }
            RunError::CleanRoom(CleanRoomError::Git(e)) => e.into(),
            RunError::CleanRoom(CleanRoomError::Io { ref path, ref source })
                if source.kind() == std::io::ErrorKind::InvalidFilename =>
            {
                let data = serde_json::json!({ "path": path });
                CommandError::refused(
                    "path_too_long",
                    format!(
                        "a path of the tree is too long for the clean room: {} exceeds the \
                         system's limit on a path's length (the clean room's directory is a \
                         longer prefix than the work tree's)",
                        path.display()
                    ),
                )
                .verb(Verb::ResolveBlocker)
                .hint("set TDD_LEDGER_HOME to a shorter directory (the clean room lives under it), or shorten the path in the repository")
                .data(data)
            }
            RunError::CleanRoom(CleanRoomError::Io { ref path, .. }) => {
                let data = serde_json::json!({ "path": path });
                CommandError::refused("cleanroom_unwritable", message)
                    .verb(Verb::ResolveBlocker)
                    .hint("the clean room was rebuilt from empty and still could not be written: check the free space and the permissions of the ledger directory (`tdd ledger path`), then run the command again")
                    .data(data)
            }
            RunError::CleanRoom(_) => CommandError::internal("engine_io_failed", message),
            RunError::RunnerChanged(_) => CommandError::refused("runner_changed", message)
                .verb(Verb::ResolveBlocker)
                .hint("put what the message names back as it was when the run started (PATH, the program's bytes, or a configuration file above the clean room: remove one that appeared); an installation or a dependency directory that changed (a package installed, a file planted) cannot be put back, so abandon the run with `tdd run abandon --reason ...` and start a new one with `tdd run start`"),
            RunError::ConfigChanged { .. } => CommandError::refused("config_changed", message)
                .verb(Verb::FixConfig)
                .hint("restore tdd.toml as it was at run start (`git checkout -- tdd.toml`), or abandon the run with `tdd run abandon --reason ...` and start a new one with the new configuration"),
            RunError::ToolchainUnanswered(_) => {
                CommandError::refused("toolchain_unanswered", message)
                    .verb(Verb::ResolveBlocker)
                    .hint("run the command the message names yourself to see what it waits on (a named pipe its configuration or the project's env names, a network share), fix that, then run `tdd run start` again")
            }
            RunError::RunnerConfigNotRegular { ref path, .. } => {
                let data = serde_json::json!({ "path": path });
                CommandError::refused("runner_config_not_regular", message)
                    .verb(Verb::ResolveBlocker)
                    .hint(format!(
                        "remove {} or put a regular file there (`ls -l` it first), then run `tdd run start` again",
                        path.display()
                    ))
                    .data(data)
            }
            RunError::StateDamaged { ref path, .. } => state_damaged(message, path),
            RunError::PythonpathOutside { ref file, ref entry, .. } => {
                let data = serde_json::json!({ "file": file, "entry": entry });
                CommandError::bad_input("pythonpath_outside", message)
                    .verb(Verb::FixConfig)
                    .hint(format!(
                        "move what `{entry}` names into the repository and point the entry there, or drop it from {} and give the project the directory by absolute path in tdd.toml (`env = {{ PYTHONPATH = \"/absolute/dir\" }}`, pinned at run start), then run `tdd run start` again",
                        file.display()
                    ))
                    .data(data)
            }
            // What this user may not do with tdd's own state (a directory made
            // read-only, a ledger home whose parent it cannot enter, a dangling link
            // where a directory belongs) is the machine's state, not a bug of tdd.
            RunError::Io { ref source, .. }
                if matches!(
                    source.kind(),
                    std::io::ErrorKind::PermissionDenied
                        | std::io::ErrorKind::ReadOnlyFilesystem
                        | std::io::ErrorKind::AlreadyExists
                        | std::io::ErrorKind::NotADirectory
                ) =>
            {
                CommandError::refused("state_unusable", message).hint(
                    "a file or directory tdd needs (the message says for what; the ledger home is what `tdd ledger path` names) cannot be used as it is: give your user back its rights on it (`ls -ld` each directory on its way), remove what stands where a directory belongs, or point TDD_LEDGER_HOME at a directory you can write, then run the command again",
                )
            }
            RunError::Io { .. } => CommandError::internal("engine_io_failed", message),
        }
    }
}

/// The refusal of tdd's own state replaced at `path` (a link or a file where tdd keeps a
/// directory, say): what to remove so tdd makes it again.
fn state_damaged(message: String, path: &std::path::Path) -> CommandError {
    CommandError::refused("state_damaged", message).hint(format!(
        "remove {} (`rm -r` it, after a look at what it is); tdd makes it again, then run the command again",
        path.display()
    ))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use tdd_engine::git::GitError;
    use tdd_engine::ledger::LedgerError;
    use tdd_engine::published::PublishError;

    use super::CommandError;
    use crate::exit::Exit;

    /// What git 2.47 prints before its own words when `GIT_GRAFT_FILE` is set.
    const GRAFT_ADVICE: &str = "hint: Support for <GIT_DIR>/info/grafts is deprecated\n\
        hint: and will be removed in a future Git version.\n\
        hint:\n\
        hint: Turn this message off by running\n\
        hint: \"git config advice.graftFileDeprecated false\"";

    fn failed(stderr: &str) -> CommandError {
        GitError::Failed {
            args: "update-ref HEAD".into(),
            stderr: stderr.into(),
        }
        .into()
    }

    #[test]
    fn git_that_says_why_after_hints_and_warnings_is_a_refusal() {
        for stderr in [
            format!("{GRAFT_ADVICE}\nfatal: ref updates aborted by hook"),
            "warning: something\nerror: update_ref failed for ref 'HEAD'".to_string(),
            "fatal: bad object HEAD".to_string(),
        ] {
            let err = failed(&stderr);
            assert_eq!(err.exit, Exit::Refused, "{stderr}");
            assert_eq!(err.reason, "git_refused", "{stderr}");
        }
    }

    #[test]
    fn a_lock_file_git_finds_is_named_in_the_hint() {
        let err = failed(&format!(
            "{GRAFT_ADVICE}\nfatal: Unable to create '/r/.git/index.lock': File exists.\n\n\
             Another git process seems to be running in this repository"
        ));
        assert_eq!(err.exit, Exit::Refused);
        assert!(
            err.hint.as_deref().is_some_and(|h| h.contains("lock file")),
            "{:?}",
            err.hint
        );
    }

    #[test]
    fn git_that_says_nothing_of_why_stays_internal() {
        for stderr in ["", GRAFT_ADVICE] {
            let err = failed(stderr);
            assert_eq!(err.exit, Exit::Internal, "{stderr}");
            assert_eq!(err.reason, "git_failed", "{stderr}");
        }
    }

    #[test]
    fn a_ref_tdd_could_not_move_is_a_refusal_naming_the_lock() {
        let lock = PathBuf::from("/r/.git/refs/tdd/ledger/main.lock");
        let err: CommandError = GitError::RefNotMoved {
            reference: "refs/tdd/ledger/main".into(),
            why: "it exists".into(),
            lock: Some(lock.clone()),
        }
        .into();
        assert_eq!((err.exit, err.reason), (Exit::Refused, "ref_locked"));
        assert!(
            err.hint
                .as_deref()
                .is_some_and(|h| h.contains(&*lock.to_string_lossy())),
            "{:?}",
            err.hint
        );
    }

    #[test]
    fn a_ledger_ref_that_names_no_commit_is_a_refusal_naming_it() {
        let err: CommandError = PublishError::NotACommit {
            reference: "refs/tdd/ledger/main".into(),
            what: "it names 0123, a blob".into(),
        }
        .into();
        assert_eq!(
            (err.exit, err.reason),
            (Exit::Refused, "ledger_ref_invalid")
        );
        assert!(
            err.message.contains("refs/tdd/ledger/main"),
            "{}",
            err.message
        );
    }

    #[test]
    fn a_stray_journal_and_a_busy_ledger_are_refusals_naming_the_file() {
        let path = PathBuf::from("/l/ledger.sqlite3");
        let journal = PathBuf::from("/l/ledger.sqlite3-journal");
        let err: CommandError = LedgerError::StrayJournal {
            path: path.clone(),
            journal: journal.clone(),
        }
        .into();
        assert_eq!((err.exit, err.reason), (Exit::Refused, "ledger_corrupt"));
        assert!(
            err.message.contains("ledger.sqlite3-journal"),
            "{}",
            err.message
        );
        assert!(
            err.hint
                .as_deref()
                .is_some_and(|h| h.contains(&format!("mv {}", journal.display()))),
            "{:?}",
            err.hint
        );
        let err: CommandError = LedgerError::Busy { path }.into();
        assert_eq!((err.exit, err.reason), (Exit::Refused, "ledger_busy"));
        assert!(err.message.contains("/l/ledger.sqlite3"), "{}", err.message);
    }
}
