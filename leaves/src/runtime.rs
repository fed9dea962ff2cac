//! `Leaves`: preparing, recording, launching, aborting and collecting leaves.
//!
//! Every leaf goes through the same four steps, whatever its provider:
//!
//! 1. **prepare**: a leaf id and a one-time token are made, the prompt is written
//!    outside the work tree, and a `leaf_prepared` event records the leaf (id,
//!    role, provider, prompt, assignment, SHA-256 of the token) in the ledger;
//! 2. **start**: the provider's invocation is launched under the supervisor with
//!    an allow-listed environment plus the identity variables (`leaf_started`);
//! 3. **abort**, at any time and any number of times (`leaf_aborted`);
//! 4. **collect**: once the supervisor recorded the exit, the provider reads the
//!    output into a [`Response`] (`leaf_finished`).

mod attached;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use sha2::Digest;
use tdd_engine::ledger::Ledger;
use tdd_engine::ledger::LedgerError;
use tdd_supervisor::ExitClass;
use tdd_supervisor::ExitRecord;
use tdd_supervisor::LaunchError;
use tdd_supervisor::LeafHandle;
use tdd_supervisor::LeafSpec;
use tdd_supervisor::LeafStatus;
use tdd_supervisor::Supervisor;
use tdd_supervisor::WaitOutcome;

use crate::env::leaf_env;
use crate::envelope::AbortOutcome;
use crate::envelope::Completion;
use crate::envelope::Request;
use crate::envelope::Response;
use crate::events::LeafAborted;
use crate::events::LeafFinished;
use crate::events::LeafStarted;
use crate::events::LeavesEvent;
use crate::identity::LeafRecord;
use crate::identity::PromptRecord;
use crate::provider::Invocation;
use crate::provider::LeafFiles;
use crate::provider::LeafOutput;
use crate::provider::Provider;
use crate::provider::ProviderError;
use crate::provider::read_lossy;

/// The hidden subcommand of `tdd` that runs one leaf's supervisor process.
pub const SUPERVISE_COMMAND: &str = "__supervise";

/// Each output stream of a leaf is cut at this many bytes (and the leaf killed).
pub const MAX_OUTPUT_BYTES: u64 = 64 * 1024 * 1024;

/// A leaf's private home, in its files directory (see [`crate::home`]).
pub const HOME_DIR: &str = "home";

/// A leaf's private temporary directory (its `TMPDIR`), in its files directory.
pub const TMP_DIR: &str = "tmp";

/// Why a leaf could not be prepared, started, aborted or collected.
#[derive(Debug, thiserror::Error)]
pub enum LeafError {
    /// The provider could not build its invocation.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The ledger failed.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// The supervisor refused or failed the launch.
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// The supervisor's records could not be read.
    #[error(transparent)]
    Supervision(#[from] tdd_supervisor::LeafError),
    /// The leaf was aborted before it started.
    #[error("leaf {id} was aborted before it started")]
    Aborted {
        /// The leaf.
        id: String,
    },
    /// The run is not in a state that allows the operation.
    #[error("leaf {id} {why}")]
    State {
        /// The leaf.
        id: String,
        /// What is wrong.
        why: &'static str,
    },
    /// A file of the leaf could not be written or read.
    #[error("{what} {}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

enum State {
    Prepared(Box<LeafSpec>),
    Running(Box<LeafHandle>),
    AbortedBeforeStart,
}

/// One leaf, from preparation to its end.
pub struct LeafRun {
    id: String,
    provider: String,
    run_id: Option<String>,
    files: LeafFiles,
    state: State,
    collected: bool,
    /// The CLI's version and, when it is untested, a warning, for the response.
    cli: Option<crate::versions::CliCheck>,
    /// Where it works.
    workdir: PathBuf,
    /// Its work directory's bytes just before it was launched, when they could be read.
    before: Option<tdd_engine::run::Snapshot>,
}

impl std::fmt::Debug for LeafRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeafRun")
            .field("id", &self.id)
            .field("provider", &self.provider)
            .field("supervisor_id", &self.supervisor_id())
            .finish()
    }
}

impl LeafRun {
    /// The leaf id (`TDD_LEAF_ID`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The supervisor's handle, once started.
    pub fn handle(&self) -> Option<&LeafHandle> {
        match &self.state {
            State::Running(handle) => Some(handle.as_ref()),
            _ => None,
        }
    }

    /// The supervisor process the leaf runs under, once it is launched: the root of the
    /// leaf's process tree (the supervisor is the subreaper of all the leaf starts).
    pub fn supervisor_process(&self) -> Option<tdd_supervisor::ProcessId> {
        Some(self.handle()?.launch_record().ok()??.supervisor)
    }

    /// The supervisor's id of the leaf, once started.
    pub fn supervisor_id(&self) -> Option<&str> {
        self.handle().map(|handle| handle.id())
    }

    /// What is known of the CLI this leaf runs (its version, and whether that version
    /// was tested), when its provider drives a versioned CLI.
    pub fn cli(&self) -> Option<&crate::versions::CliCheck> {
        self.cli.as_ref()
    }

    /// The policy the leaf will be confined by, complete with its own files and
    /// temporary directory; `None` once started, or when it is not confined.
    pub fn policy(&self) -> Option<&tdd_sandbox::Policy> {
        match &self.state {
            State::Prepared(spec) => match spec.sandbox_mode() {
                tdd_supervisor::Sandbox::Confined { policy, .. } => Some(policy),
                _ => None,
            },
            _ => None,
        }
    }

    /// The leaf's files (prompt, result).
    pub fn files(&self) -> &LeafFiles {
        &self.files
    }

    /// Waits for the leaf to end, at most `max`; `None` while it still runs.
    pub fn wait(&mut self, max: Option<Duration>) -> Result<Option<ExitRecord>, LeafError> {
        match &mut self.state {
            State::Running(handle) => match handle.wait(max)? {
                WaitOutcome::Finished(exit) => Ok(Some(exit)),
                WaitOutcome::StillRunning => Ok(None),
            },
            State::Prepared(_) => Err(LeafError::State {
                id: self.id.clone(),
                why: "has not started",
            }),
            State::AbortedBeforeStart => Err(LeafError::Aborted {
                id: self.id.clone(),
            }),
        }
    }
}

/// The leaves of one repository: a supervisor, the ledger, and the directory of
/// leaf files.
pub struct Leaves {
    supervisor: Supervisor,
    database: PathBuf,
    files_dir: PathBuf,
    caller_env: BTreeMap<String, String>,
    tdd_dir: Option<PathBuf>,
}

impl Leaves {
    /// Leaves launched through `supervisor`, recorded in the ledger at `database`,
    /// with their files under `files_dir`. The caller's environment is read from
    /// this process.
    pub fn new(supervisor: Supervisor, database: PathBuf, files_dir: PathBuf) -> Leaves {
        Leaves {
            supervisor,
            database,
            files_dir,
            caller_env: std::env::vars().collect(),
            tdd_dir: None,
        }
    }

    /// The leaves of the repository whose ledger is at `location`, launched by the
    /// `tdd` binary at `tdd` under [`Leaves::repository_supervisor`], with leaf files
    /// under the ledger's directory and `tdd`'s directory first on every leaf's `PATH`.
    pub fn for_repository(location: &tdd_engine::ledger::LedgerLocation, tdd: &Path) -> Leaves {
        let supervisor = Leaves::repository_supervisor(location, tdd);
        let leaves = Leaves::new(
            supervisor,
            location.database.clone(),
            location.dir.join("leaf-files"),
        );
        match tdd.parent() {
            Some(dir) => leaves.tdd_dir(dir),
            None => leaves,
        }
    }

    /// The supervisor of the repository whose ledger is at `location`: state under the
    /// ledger's directory, the supervisor process is `tdd __supervise --ledger DB` of the
    /// binary at `tdd`, and the events this process sees (a lost supervisor, a kill) are
    /// recorded in the ledger too.
    pub fn repository_supervisor(
        location: &tdd_engine::ledger::LedgerLocation,
        tdd: &Path,
    ) -> Supervisor {
        let args = [
            std::ffi::OsString::from(SUPERVISE_COMMAND),
            std::ffi::OsString::from("--ledger"),
            location.database.clone().into_os_string(),
        ];
        Supervisor::new(&location.dir, tdd, args).reporter(std::sync::Arc::new(
            crate::report::LedgerReporter::new(&location.database),
        ))
    }

    /// Replaces the environment leaves are allow-listed from (tests, embedding).
    pub fn caller_env(mut self, env: impl IntoIterator<Item = (String, String)>) -> Leaves {
        self.caller_env = env.into_iter().collect();
        self
    }

    /// Puts this directory first on every leaf's `PATH`, so that `tdd` inside a
    /// leaf is the binary that launched it.
    pub fn tdd_dir(mut self, dir: impl Into<PathBuf>) -> Leaves {
        self.tdd_dir = Some(dir.into());
        self
    }

    /// The ledger database.
    pub fn database(&self) -> &Path {
        &self.database
    }

    /// The supervisor.
    pub fn supervisor(&self) -> &Supervisor {
        &self.supervisor
    }

    /// Makes the leaf's identity and files, records it, and builds its launch spec.
    pub fn prepare<P: Provider + ?Sized>(
        &self,
        provider: &P,
        request: Request,
    ) -> Result<LeafRun, LeafError> {
        let mut id = format!(
            "{}-i{}-s{}-{}-a{}-{}",
            request.role(),
            request.issue,
            request.step,
            request.phase_name(),
            request.attempt,
            &random_hex(3)?
        );
        // The id is also the supervisor's leaf name, which is at most 64 characters.
        if id.len() > 64 {
            id = format!("{}-{}", request.role(), random_hex(8)?);
        }
        let token = random_hex(32)?;
        let dir = self.files_dir.join(&id);
        std::fs::create_dir_all(&dir).map_err(|source| LeafError::Io {
            what: "failed to create",
            path: dir.clone(),
            source,
        })?;
        let files = LeafFiles {
            prompt: dir.join("prompt.md"),
            result: dir.join("result.json"),
            ledger_dir: self
                .database
                .parent()
                .map_or_else(|| self.files_dir.clone(), Path::to_path_buf),
            dir,
        };
        std::fs::write(&files.prompt, request.prompt.text()).map_err(|source| LeafError::Io {
            what: "failed to write",
            path: files.prompt.clone(),
            source,
        })?;
        let mut invocation = provider.invocation(&request, &files)?;
        provider.adapt(&mut invocation, &self.caller_env);
        invocation
            .set_env
            .extend(self.private_places(provider, &files)?);
        if request.hooks {
            provider.wire_hooks(&mut invocation)?;
        }
        let spec = self.spec(&id, &token, &request, &invocation, &files);
        let prompt = &request.prompt;
        let mut env_names: Vec<&String> = spec_env_names(&self.caller_env, &invocation);
        env_names.sort();
        let event = LeavesEvent::LeafPrepared(Box::new(LeafRecord {
            event_id: 0,
            run_id: None,
            leaf_id: id.clone(),
            role: request.role(),
            provider: provider.name().to_string(),
            issue: request.issue,
            step: request.step,
            phase: request.phase_name().to_string(),
            attempt: request.attempt,
            workdir: request.workdir.clone(),
            prompt: PromptRecord {
                template: prompt.template().to_string(),
                text: prompt.text().to_string(),
                sha256: prompt.sha256().to_string(),
                bytes: prompt.text().len() as u64,
                fixed_bytes: prompt.fixed_bytes() as u64,
                variable_bytes: prompt.variable_bytes() as u64,
            },
            assignment: prompt.assignment().clone(),
            token_sha256: token_sha256(&token),
            argv: invocation.argv.clone(),
            env: env_names.into_iter().cloned().collect(),
            files: files.dir.clone(),
        }));
        self.ledger()?.record(request.run_id.as_deref(), &event)?;
        // Once per CLI per process: the version is read the first time only.
        let cli = crate::versions::check(provider, &self.caller_env);
        Ok(LeafRun {
            id,
            provider: provider.name().to_string(),
            run_id: request.run_id,
            files,
            state: State::Prepared(Box::new(spec)),
            collected: false,
            cli,
            workdir: request.workdir.clone(),
            before: None,
        })
    }

    /// The leaf's private home and temporary directory, made fresh in its files
    /// directory, as the variables that point it there.
    fn private_places<P: Provider + ?Sized>(
        &self,
        provider: &P,
        files: &LeafFiles,
    ) -> Result<Vec<(String, String)>, LeafError> {
        let home = files.dir.join(HOME_DIR);
        let mut set = crate::home::make(
            &home,
            &provider.cli_state(),
            &self.caller_env,
            self.ledger_home(),
        )
        .map_err(|e| LeafError::Io {
            what: "failed to make the private home",
            path: e.path,
            source: e.source,
        })?;
        let tmp = files.dir.join(TMP_DIR);
        crate::home::remove(&tmp);
        std::fs::create_dir_all(&tmp).map_err(|source| LeafError::Io {
            what: "failed to create",
            path: tmp.clone(),
            source,
        })?;
        set.push(("TMPDIR".to_string(), tmp.display().to_string()));
        Ok(set)
    }

    /// The ledger home this repository's ledger lives in (`<home>/repos/<key>/`).
    fn ledger_home(&self) -> Option<&Path> {
        let repos = self.database.parent()?.parent()?;
        (repos.file_name()? == "repos")
            .then(|| repos.parent())
            .flatten()
    }

    fn spec(
        &self,
        id: &str,
        token: &str,
        request: &Request,
        invocation: &Invocation,
        files: &LeafFiles,
    ) -> LeafSpec {
        let mut set = invocation.set_env.clone();
        set.extend([
            ("TDD_ROLE".to_string(), request.role().to_string()),
            ("TDD_ISSUE".to_string(), request.issue.to_string()),
            ("TDD_STEP".to_string(), request.step.to_string()),
            ("TDD_PHASE".to_string(), request.phase_name().to_string()),
            ("TDD_LEAF_ID".to_string(), id.to_string()),
            ("TDD_LEAF_TOKEN".to_string(), token.to_string()),
        ]);
        if let Some(dir) = &self.tdd_dir {
            let path = match self.caller_env.get("PATH") {
                Some(path) if !path.is_empty() => format!("{}:{path}", dir.display()),
                _ => dir.display().to_string(),
            };
            set.push(("PATH".to_string(), path));
        }
        set.extend(request.set_env.iter().cloned());
        let sandbox = confined(&request.sandbox, files);
        let env = leaf_env(&self.caller_env, &invocation.pass_env, &set);
        let mut spec = LeafSpec::new(invocation.argv.clone())
            .name(id)
            .cwd(&request.workdir)
            .wall_timeout(request.wall_timeout)
            .max_output_bytes(MAX_OUTPUT_BYTES);
        if let Some(idle) = request.idle_timeout {
            spec = spec.idle_timeout(idle);
        }
        if invocation.prompt_on_stdin {
            spec = spec.stdin(&files.prompt);
        }
        for (key, value) in env {
            spec = spec.env(key, value);
        }
        match sandbox {
            tdd_supervisor::Sandbox::Off => spec,
            tdd_supervisor::Sandbox::Disabled => spec.sandbox_disabled(),
            tdd_supervisor::Sandbox::Confined { policy, require } => {
                let confine = if require {
                    tdd_supervisor::Confine::Fully
                } else {
                    tdd_supervisor::Confine::AsFarAsPossible
                };
                spec.sandbox(policy, confine)
            }
        }
    }

    /// Launches a prepared leaf. Refuses one that was aborted, here or in another
    /// process.
    pub fn start(&self, run: &mut LeafRun) -> Result<(), LeafError> {
        let State::Prepared(spec) = &run.state else {
            return match run.state {
                State::AbortedBeforeStart => Err(LeafError::Aborted { id: run.id.clone() }),
                _ => Err(LeafError::State {
                    id: run.id.clone(),
                    why: "has already started",
                }),
            };
        };
        let mut ledger = self.ledger()?;
        let aborted = ledger
            .typed::<LeavesEvent>(run.run_id.as_deref(), &["leaf_aborted"])?
            .iter()
            .any(|(_, e)| matches!(e, LeavesEvent::LeafAborted(a) if a.leaf_id == run.id));
        if aborted {
            run.state = State::AbortedBeforeStart;
            return Err(LeafError::Aborted { id: run.id.clone() });
        }
        // Read before it is launched, so every change it makes counts as its own.
        run.before = tdd_engine::run::Snapshot::scan(&run.workdir).ok();
        let handle = self.supervisor.launch(spec)?;
        let sandbox = handle
            .launch_record()
            .ok()
            .flatten()
            .and_then(|launch| launch.sandbox)
            .map(|level| level.label());
        let event = LeavesEvent::LeafStarted(LeafStarted {
            leaf_id: run.id.clone(),
            supervisor_id: handle.id().to_string(),
            sandbox,
            cli_version: run.cli.as_ref().and_then(|cli| cli.version.clone()),
        });
        ledger.record(run.run_id.as_deref(), &event)?;
        run.state = State::Running(Box::new(handle));
        Ok(())
    }

    /// Aborts a run in any state. Idempotent: a second call, or a call on a run that
    /// already ended, does nothing and says so.
    pub fn abort(&self, run: &mut LeafRun) -> Result<AbortOutcome, LeafError> {
        let outcome = match &mut run.state {
            State::AbortedBeforeStart => return Ok(AbortOutcome::AlreadyOver),
            State::Prepared(_) => {
                run.state = State::AbortedBeforeStart;
                AbortOutcome::NotStarted
            }
            State::Running(handle) => match handle.status()? {
                LeafStatus::Finished(_) => return Ok(AbortOutcome::AlreadyOver),
                LeafStatus::Starting | LeafStatus::Running { .. } => {
                    if std::fs::metadata(handle.dir().join("kill.json")).is_ok() {
                        return Ok(AbortOutcome::AlreadyOver);
                    }
                    handle.kill(tdd_supervisor::Kill::Graceful)?;
                    AbortOutcome::Killed
                }
            },
        };
        let event = LeavesEvent::LeafAborted(LeafAborted {
            leaf_id: run.id.clone(),
            outcome,
        });
        self.ledger()?.record(run.run_id.as_deref(), &event)?;
        Ok(outcome)
    }

    /// Aborts the leaf recorded as `leaf_id`, from any process (a conductor resuming
    /// after a crash): a leaf never started is marked aborted so it never will; a
    /// running one is killed through its supervisor; an ended one is left alone.
    pub fn abort_recorded(&self, leaf_id: &str) -> Result<AbortOutcome, LeafError> {
        let mut ledger = self.ledger()?;
        let kinds = [
            "leaf_prepared",
            "leaf_aborted",
            "leaf_finished",
            "leaf_started",
        ];
        let events = ledger.typed::<LeavesEvent>(None, &kinds)?;
        let ours = |event: &LeavesEvent| match event {
            LeavesEvent::LeafPrepared(record) => record.leaf_id == leaf_id,
            LeavesEvent::LeafAborted(aborted) => aborted.leaf_id == leaf_id,
            LeavesEvent::LeafFinished(finished) => finished.leaf_id == leaf_id,
            LeavesEvent::LeafStarted(started) => started.leaf_id == leaf_id,
            _ => false,
        };
        let mine: Vec<&(tdd_engine::ledger::Event, LeavesEvent)> =
            events.iter().filter(|(_, e)| ours(e)).collect();
        let Some((prepared, _)) = mine
            .iter()
            .rev()
            .find(|(_, e)| matches!(e, LeavesEvent::LeafPrepared(_)))
        else {
            return Err(LeafError::State {
                id: leaf_id.to_string(),
                why: "is not recorded in this ledger",
            });
        };
        let run_id = prepared.run_id.clone();
        let over = mine.iter().any(|(_, e)| {
            matches!(
                e,
                LeavesEvent::LeafAborted(_) | LeavesEvent::LeafFinished(_)
            )
        });
        if over {
            return Ok(AbortOutcome::AlreadyOver);
        }
        let started = mine.iter().rev().find_map(|(_, e)| match e {
            LeavesEvent::LeafStarted(started) => Some(started.supervisor_id.clone()),
            _ => None,
        });
        let outcome = match started {
            None => AbortOutcome::NotStarted,
            Some(supervisor_id) => {
                let mut handle = self.supervisor.open(&supervisor_id)?;
                match handle.status()? {
                    LeafStatus::Finished(_) => return Ok(AbortOutcome::AlreadyOver),
                    LeafStatus::Starting | LeafStatus::Running { .. } => {
                        handle.kill(tdd_supervisor::Kill::Graceful)?;
                        AbortOutcome::Killed
                    }
                }
            }
        };
        let event = LeavesEvent::LeafAborted(LeafAborted {
            leaf_id: leaf_id.to_string(),
            outcome,
        });
        ledger.record(run_id.as_deref(), &event)?;
        Ok(outcome)
    }

    /// Waits at most `max` for the leaf to end, then reads its response through the
    /// provider and records `leaf_finished` (once). `None` while it still runs.
    pub fn collect<P: Provider + ?Sized>(
        &self,
        provider: &P,
        run: &mut LeafRun,
        max: Option<Duration>,
    ) -> Result<Option<Response>, LeafError> {
        let Some(exit) = run.wait(max)? else {
            return Ok(None);
        };
        let Some(handle) = run.handle() else {
            return Err(LeafError::State {
                id: run.id.clone(),
                why: "has not started",
            });
        };
        let stdout = read_lossy(handle.stdout_path());
        let stderr = handle.stderr_path().map(read_lossy).unwrap_or_default();
        let parsed = provider.parse(&LeafOutput {
            stdout: &stdout,
            stderr: &stderr,
            exit: &exit,
            files: &run.files,
        });
        // Nothing of the leaf's home or temporary files outlives it: the next leaf
        // could be told something through them.
        crate::home::remove(&run.files.dir.join(HOME_DIR));
        crate::home::remove(&run.files.dir.join(TMP_DIR));
        let completion = completion(&exit.class, &parsed);
        let mut meta = parsed.meta;
        meta.insert("provider".into(), json!(provider.name()));
        if let Some(cli) = &run.cli {
            meta.insert("cli_version".into(), json!(cli.version));
            if let Some(warning) = cli.warning() {
                meta.insert("warning".into(), json!(warning));
            }
        }
        let response = Response {
            leaf_id: run.id.clone(),
            completion,
            exit: exit.class.clone(),
            text: parsed.text,
            session_id: parsed.session_id,
            turns: parsed.turns,
            usage: parsed.usage,
            cost_usd: parsed.cost_usd,
            meta,
        };
        if !run.collected {
            let event = LeavesEvent::LeafFinished(LeafFinished {
                leaf_id: run.id.clone(),
                exit: exit.class.clone(),
                completion: response.completion.clone(),
                session_id: response.session_id.clone(),
                turns: response.turns,
                usage: response.usage,
                cost_usd: response.cost_usd,
                duration_ms: exit.duration_ms,
                touched: touched(&run.workdir, run.before.as_ref()),
            });
            self.ledger()?.record(run.run_id.as_deref(), &event)?;
            run.collected = true;
        }
        Ok(Some(response))
    }

    fn ledger(&self) -> Result<Ledger, LedgerError> {
        Ledger::open(&self.database)
    }
}

/// The files of `workdir` that differ from `before`, its bytes when the leaf was
/// launched; `None` when either scan failed (the leaf's record says nothing rather than
/// something wrong).
fn touched(workdir: &Path, before: Option<&tdd_engine::run::Snapshot>) -> Option<Vec<String>> {
    let before = before?;
    let after = tdd_engine::run::Snapshot::scan(workdir).ok()?;
    let changes = before.changes_to(workdir, &after).ok()?;
    Some(changes.into_iter().map(|c| c.path).collect())
}

/// `sandbox` completed for one leaf: a confined leaf may also write its own files
/// directory, which holds its private home and temporary directory (made before the
/// leaf starts, so that its memory file system has a place to go).
fn confined(sandbox: &tdd_supervisor::Sandbox, files: &LeafFiles) -> tdd_supervisor::Sandbox {
    let tdd_supervisor::Sandbox::Confined { policy, require } = sandbox else {
        return sandbox.clone();
    };
    let mut policy = policy.clone();
    policy.write.push(files.dir.clone());
    // Its TMPDIR is a memory file system of its own, of the policy's quota, that no
    // other leaf sees and that goes when it ends.
    policy.private_tmp = Some(files.dir.join(TMP_DIR));
    tdd_supervisor::Sandbox::Confined {
        policy,
        require: *require,
    }
}

fn spec_env_names<'a>(
    caller: &'a BTreeMap<String, String>,
    invocation: &Invocation,
) -> Vec<&'a String> {
    let env = leaf_env(caller, &invocation.pass_env, &[]);
    caller.keys().filter(|k| env.contains_key(*k)).collect()
}

/// How a leaf ended: the supervisor's class first (our kills decide), then what the
/// provider saw in the stream.
fn completion(class: &ExitClass, parsed: &crate::provider::Parsed) -> Completion {
    match class {
        ExitClass::KillStuck { reason } => Completion::KilledStuck {
            reason: reason.to_string(),
        },
        ExitClass::Stopped => Completion::Aborted,
        ExitClass::KilledExternal { signal } => Completion::Crashed {
            reason: format!("killed by {signal}"),
        },
        ExitClass::SupervisorLost => Completion::Crashed {
            reason: "its supervisor was lost".into(),
        },
        ExitClass::SpawnFailed { error } => Completion::Crashed {
            reason: format!("it never ran: {error}"),
        },
        ExitClass::Exited { code } => {
            if let (true, Some(error)) = (parsed.unavailable, &parsed.error) {
                Completion::ProviderUnavailable {
                    reason: error.clone(),
                }
            } else if !parsed.terminal {
                Completion::Crashed {
                    reason: format!("it exited with code {code} before its final event"),
                }
            } else if let Some(error) = &parsed.error {
                Completion::Failed {
                    reason: error.clone(),
                }
            } else if *code != 0 {
                Completion::Failed {
                    reason: format!("it exited with code {code}"),
                }
            } else {
                Completion::Completed
            }
        }
    }
}

/// `bytes` random bytes as hex, from the kernel.
pub(crate) fn random_hex(bytes: usize) -> Result<String, LeafError> {
    let mut buffer = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut file| file.read_exact(&mut buffer))
        .map_err(|source| LeafError::Io {
            what: "failed to read",
            path: PathBuf::from("/dev/urandom"),
            source,
        })?;
    Ok(hex::encode(buffer))
}

/// The SHA-256 of a leaf token, hex: what the ledger keeps instead of the token.
pub fn token_sha256(token: &str) -> String {
    hex::encode(sha2::Sha256::digest(token.as_bytes()))
}
