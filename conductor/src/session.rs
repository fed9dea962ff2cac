//! `tdd agent`: an interactive session of a person's agent CLI inside the boundary a
//! developer leaf of `tdd conduct` gets. The CLI runs confined by the developer's
//! policy (its work tree writable but `.git`, the ledger out of reach, nothing in the
//! home writable, credentials unreadable), with a private home seeded as a developer
//! leaf's is (so nothing the session writes reaches the person's own CLI state, from
//! which later leaves are seeded), the engine reached through a relay that serves this
//! session's processes only, and the CLI's hooks wired for this session alone. The
//! person's terminal is attached. When the CLI ends, what it left running is ended by
//! the caller (the subreaper), and the relay is closed.

use std::path::Path;
use std::path::PathBuf;

use tdd_engine::config::Config;
use tdd_engine::ledger::LedgerLocation;
use tdd_engine::run::Phase;
use tdd_leaves::Leaves;
use tdd_leaves::Request;
use tdd_leaves::providers::interactive::Interactive;
use tdd_supervisor::ExitClass;

use crate::error::ConductError;
use crate::relay::ArgsCheck;
use crate::relay::Relay;

/// What a session is started from.
#[derive(Debug)]
pub struct SessionSpec<'a> {
    /// The work tree the session works in (its root).
    pub work_tree: &'a Path,
    /// The repository's configuration.
    pub config: &'a Config,
    /// Where the repository's ledger lives.
    pub location: &'a LedgerLocation,
    /// The `tdd` binary the relay runs and the session finds first on its `PATH`.
    pub tdd: &'a Path,
    /// The command-line parser's check of what the session asks the relay.
    pub relay_args: ArgsCheck,
    /// The agent CLI (a name on `PATH` or a path).
    pub program: &'a str,
    /// The person's arguments to it.
    pub args: Vec<String>,
    /// The open cycle and its phase, when a run is active.
    pub position: Option<(tdd_engine::plan::PlannedCycle, Phase)>,
    /// Where the run stands, in words, for the session's record.
    pub position_words: String,
}

/// How a session went.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SessionEnd {
    /// The session's leaf id (its record in the ledger, `tdd leaves show`).
    pub leaf: String,
    /// How the CLI ended.
    pub exit: ExitClass,
    /// The confinement it ran under (`landlock-v7`, `none`, `disabled`).
    pub sandbox: Option<String>,
    /// Whether the CLI's hooks were wired for the session (Claude Code, Codex).
    pub hooks: bool,
    /// Whether the engine was reached through the relay (where confinement holds).
    pub relay: bool,
    /// The files of the work tree the session changed, when they could be read.
    pub touched: Option<Vec<String>>,
    /// Its wall time.
    pub duration_ms: u64,
}

/// Runs the session to its end with this process's terminal attached.
pub fn run(spec: SessionSpec<'_>) -> Result<SessionEnd, ConductError> {
    // One agent per work tree: a conductor working here holds the same lock.
    let _lock = crate::lock::WorktreeLock::acquire(&spec.location.dir, spec.work_tree)?;
    let caller_env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    let leaves = Leaves::for_repository(spec.location, spec.tdd).caller_env(caller_env.clone());
    let provider = Interactive::new(spec.program, spec.args.clone());
    let cycle = spec.position.as_ref().map(|(cycle, _)| cycle);
    let step = cycle.map_or(0, |c| c.n);
    let phase = spec
        .position
        .as_ref()
        .map(|(_, p)| *p)
        .filter(|p| !p.is_final());
    let prompt = tdd_prompts::Prompt::session(spec.program, phase, cycle, &spec.position_words)?;
    let mut request = Request::new(prompt, 0, step, spec.work_tree);
    request.hooks = provider.harness().is_some();
    request.sandbox = sandbox(&spec);
    let confining = matches!(request.sandbox, tdd_supervisor::Sandbox::Confined { .. })
        && tdd_sandbox::probe().confines();
    let relay = if confining {
        Some(
            Relay::start(
                spec.tdd.to_path_buf(),
                spec.location.database.clone(),
                caller_env,
                spec.relay_args,
            )
            .map_err(|e| ConductError::config(format!("failed to open the engine relay: {e}")))?,
        )
    } else {
        None
    };
    if let Some(relay) = &relay {
        request.set_env.push((
            crate::relay::RELAY_VAR.to_string(),
            relay.socket().display().to_string(),
        ));
    }
    let policy = match &request.sandbox {
        tdd_supervisor::Sandbox::Confined { policy, .. } => Some(policy.clone()),
        _ => None,
    };
    let mut leaf = leaves.prepare(&provider, request)?;
    let admission = match (&relay, &policy) {
        (Some(relay), Some(policy)) => Some(relay.admit(
            leaf.id(),
            spec.work_tree,
            policy,
            &leaf.files().dir.join("tmp"),
        )),
        _ => None,
    };
    let (exit, touched) = leaves.run_attached(&mut leaf, |root| {
        if let Some(admission) = &admission {
            admission.launched(root);
        }
    })?;
    // Nobody is admitted once the session is over; the relay closes with it.
    drop(admission);
    drop(relay);
    Ok(SessionEnd {
        leaf: leaf.id().to_string(),
        exit: exit.class,
        sandbox: exit.sandbox.map(|level| level.label()),
        hooks: provider.harness().is_some(),
        relay: confining,
        touched,
        duration_ms: u64::try_from(exit.duration.as_millis()).unwrap_or(u64::MAX),
    })
}

/// The developer's confinement, in place, plus the session's own terminal (a program
/// may open it by name).
fn sandbox(spec: &SessionSpec<'_>) -> tdd_supervisor::Sandbox {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let place = crate::sandbox::Place {
        role: tdd_prompts::Role::Developer,
        workdir: spec.work_tree,
        plan: Path::new(".tdd/plan.md"),
        ledger_dir: &spec.location.dir,
        home: home.as_deref(),
        own_worktree: false,
        work_tree: spec.work_tree,
    };
    let mut sandbox = crate::sandbox::for_leaf(&spec.config.sandbox, &place);
    if let tdd_supervisor::Sandbox::Confined { policy, .. } = &mut sandbox {
        policy.write_files.extend(terminal());
    }
    sandbox
}

/// The terminal on this process's standard input, by its name under `/dev/pts`.
fn terminal() -> Option<PathBuf> {
    let path = std::fs::read_link("/proc/self/fd/0").ok()?;
    path.starts_with("/dev/pts/").then_some(path)
}
