//! The supervisor process: entry point, detaching, and spawning the leaf.
//!
//! `run_supervisor` is what the caller's binary runs in its hidden subcommand. It
//! detaches (new session, child subreaper), reads the job file, spawns the leaf in
//! a process group of its own, records the launch, and hands over to the event loop
//! in `run.rs`. Whatever happens, it ends by writing `exit.json`.

use std::fs::OpenOptions;
use std::io;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::process::Stdio;
use std::time::Instant;

use super::capture::Stream;
use super::signals::Incoming;
use crate::class::ExitClass;
use crate::error::error_chain;
use crate::records;
use crate::records::ExitRecord;
use crate::records::Job;
use crate::records::LaunchRecord;
use crate::records::LeafDir;
use crate::records::ProcessId;
use crate::report::LeafEvent;
use crate::report::Reporter;

/// Runs the supervisor for the leaf directory `leaf_dir` and returns the process exit
/// code: 0 once an exit record is written (whatever the leaf's class), 1 when not
/// even that was possible.
///
/// Call it from the binary's hidden subcommand (the program and arguments given to
/// [`crate::Supervisor::new`], followed by the leaf directory), on the main thread,
/// before starting any other thread. It makes the process a session leader and a
/// child subreaper, installs signal handlers, and reaps every child of the process,
/// so the process must do nothing else. It first closes every descriptor above 2 it
/// inherited without close-on-exec, so nothing the caller's parents left open (a CI
/// log pipe, a jobserver) is held for the leaf's lifetime or passed on to the leaf.
pub fn run_supervisor(leaf_dir: &Path, reporter: &dyn Reporter) -> i32 {
    let dir = LeafDir::new(leaf_dir);
    close_inherited_descriptors();
    detach();
    let job = match records::read_json::<Job>(&dir.job()) {
        Ok(Some(job)) if job.version == records::FORMAT_VERSION => job,
        Ok(Some(job)) => {
            return unstartable(&dir, &job.id, "unsupported job file version", reporter);
        }
        Ok(None) => return unstartable(&dir, &fallback_id(&dir), "job file missing", reporter),
        Err(error) => {
            let why = error_chain(&error);
            return unstartable(&dir, &fallback_id(&dir), &why, reporter);
        }
    };
    let incoming = match Incoming::install() {
        Ok(incoming) => incoming,
        Err(error) => {
            let why = format!("failed to install signal handlers: {error}");
            return unstartable(&dir, &job.id, &why, reporter);
        }
    };
    if crate::stop::read_stop(&job.state_dir).is_some_and(|stop| stop.mode.kills_running()) {
        return record_exit(&dir, &job.id, ExitClass::Stopped, reporter);
    }
    // The FIFO exists before the launch record: a caller that sees the launch can
    // always wake us.
    let wake = match super::wake::open_for_supervisor(&dir.wake()) {
        Ok(fifo) => Some(fifo),
        Err(error) => {
            log(format_args!(
                "no wake FIFO, requests wait for the heartbeat: {error}"
            ));
            None
        }
    };
    let exit = match spawn_leaf(&job) {
        Ok(spawned) => {
            record_launch(&dir, &job, &spawned, reporter);
            super::run::Run::new(&job, &dir, reporter, spawned, incoming, wake).supervise()
        }
        Err(error) => {
            log(format_args!("cannot start the leaf: {error}"));
            let mut exit = ExitRecord::without_run(&job.id, ExitClass::SpawnFailed { error }, 0);
            exit.supervisor_peak_rss_kib = super::procfs::peak_rss_kib(None);
            exit
        }
    };
    // Nobody reads the FIFO any more; a later poke finds no file and does nothing.
    let _ = std::fs::remove_file(dir.wake());
    write_exit(&dir, &exit, reporter)
}

/// Writes `launch.json` and reports the launch.
fn record_launch(dir: &LeafDir, job: &Job, spawned: &Spawned, reporter: &dyn Reporter) {
    let launch = LaunchRecord {
        version: records::FORMAT_VERSION,
        id: job.id.clone(),
        leaf: spawned.leaf,
        pgid: spawned.leaf.pid,
        supervisor: own_identity(),
        launched_at: crate::clock::now_rfc3339(),
        sandbox: spawned.sandbox.clone(),
    };
    if let Err(error) = records::write_json(&dir.launch(), &launch) {
        log(format_args!("{}", error_chain(&error)));
    }
    let argv = job.argv.clone();
    report(
        reporter,
        &LeafEvent::Launched {
            launch,
            argv,
            name: job.name.clone(),
        },
    );
}

/// Closes every inherited descriptor above stderr. Rust opens its own descriptors
/// close-on-exec, but a caller's parent may not have: such a descriptor would stay open
/// in this long-lived process and in the leaf, and whoever waits for its other end
/// (a pipe's reader waiting for end-of-file) would wait for as long as the leaf runs.
/// A descriptor that crossed `exec` into this process lacks close-on-exec by
/// definition, and one this process opened has it, so only the former are closed.
fn close_inherited_descriptors() {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    let candidates: Vec<i32> = entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|fd| *fd > 2)
        .collect();
    for fd in candidates {
        if !close_on_exec(fd).unwrap_or(true) {
            let _ = nix::unistd::close(fd);
        }
    }
}

/// Whether `fd` has close-on-exec, from the octal `flags:` line of
/// `/proc/self/fdinfo/<fd>`; `None` when it cannot be read (the listing's own
/// descriptor, already closed).
fn close_on_exec(fd: i32) -> Option<bool> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).ok()?;
    let flags = info.lines().find_map(|line| line.strip_prefix("flags:"))?;
    let flags = u32::from_str_radix(flags.trim(), 8).ok()?;
    Some(flags & libc::O_CLOEXEC as u32 != 0)
}

/// Leaves the caller's session and becomes the reaper of the leaf's orphans.
fn detach() {
    // A new session: the caller's terminal, its hangup, and signals sent to the
    // caller's process group (Ctrl-C) no longer reach us or the leaf. Fails only if
    // we already lead a process group, in which case we stay where we are.
    if let Err(error) = nix::unistd::setsid() {
        log(format_args!(
            "setsid failed, staying in the caller's session: {error}"
        ));
    }
    // Child subreaper: descendants whose parent dies (double forks, daemons) are
    // re-parented to us instead of init, so we can still find and kill them.
    if let Err(error) = nix::sys::prctl::set_child_subreaper(true) {
        log(format_args!("PR_SET_CHILD_SUBREAPER failed: {error}"));
    }
}

/// What `spawn_leaf` hands to the event loop.
pub(super) struct Spawned {
    pub leaf: ProcessId,
    pub started: Instant,
    pub stdout: Stream,
    pub stderr: Option<Stream>,
    /// The confinement the leaf got, when the job asked for one.
    pub sandbox: Option<tdd_sandbox::Level>,
}

/// Opens the files and spawns the leaf in a new process group with exactly the job's
/// environment. An error is the text of a `spawn_failed` class.
fn spawn_leaf(job: &Job) -> Result<Spawned, String> {
    let program = &job.argv[0];
    let stdin = match &job.stdin {
        // O_NOCTTY: we lead a session without a terminal; opening a terminal as stdin
        // must not make it our controlling terminal.
        Some(path) => Stdio::from(
            OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOCTTY)
                .open(path)
                .map_err(|error| format!("failed to open stdin {}: {error}", path.display()))?,
        ),
        None => Stdio::null(),
    };
    let pipe_error = |error: io::Error| format!("failed to create a pipe: {error}");
    let (out_reader, out_writer) = io::pipe().map_err(pipe_error)?;
    let (err_reader, err_writer) = match &job.stderr {
        Some(_) => {
            let (reader, writer) = io::pipe().map_err(pipe_error)?;
            (Some(reader), writer)
        }
        None => (None, out_writer.try_clone().map_err(pipe_error)?),
    };
    let stdout = open_stream(out_reader, &job.stdout, job.max_output_bytes)?;
    let stderr = match (err_reader, &job.stderr) {
        (Some(reader), Some(path)) => Some(open_stream(reader, path, job.max_output_bytes)?),
        _ => None,
    };
    let mut command = Command::new(program);
    command
        .args(&job.argv[1..])
        .current_dir(&job.cwd)
        .env_clear()
        .envs(&job.env)
        .stdin(stdin)
        .stdout(out_writer)
        .stderr(err_writer)
        // Its own process group, led by the leaf: one `killpg` reaches the leaf and
        // everything it starts that does not deliberately leave the group.
        .process_group(0);
    let sandbox = confine(&job.sandbox, &mut command)?;
    let child = command
        .spawn()
        .map_err(|error| format!("{program}: {error}"))?;
    let started = Instant::now();
    // Dropping the command closes our copies of the pipes' write ends, so end-of-file
    // arrives once the leaf's whole tree has closed them.
    drop(command);
    let pid = i32::try_from(child.id()).map_err(|_| String::from("pid out of range"))?;
    // The leaf is our unreaped child: its pid cannot be recycled before we wait for
    // it, so this reading is its identity even if it has already exited.
    let leaf =
        ProcessId::of(pid).map_err(|error| format!("failed to read /proc/{pid}: {error}"))?;
    Ok(Spawned {
        leaf,
        started,
        stdout,
        stderr,
        sandbox,
    })
}

/// Makes `command` confine the leaf as the job asks; the level it will have. An
/// error (the text of a `spawn_failed` class) when the job requires confinement this
/// kernel cannot give, or the rules cannot be built.
pub(crate) fn confine(
    sandbox: &crate::records::Sandbox,
    command: &mut Command,
) -> Result<Option<tdd_sandbox::Level>, String> {
    use crate::records::Sandbox;
    match sandbox {
        Sandbox::Off => Ok(None),
        Sandbox::Disabled => Ok(Some(tdd_sandbox::Level::Disabled)),
        Sandbox::Confined { policy, require } => {
            let confinement = tdd_sandbox::Confinement::prepare(policy)
                .map_err(|error| format!("sandbox: {error}"))?;
            let level = confinement.level().clone();
            if *require && !matches!(level, tdd_sandbox::Level::Full { .. }) {
                return Err(format!(
                    "sandbox required but unavailable: {} ({})",
                    level.label(),
                    match &level {
                        tdd_sandbox::Level::Partial { missing, .. } => missing.clone(),
                        tdd_sandbox::Level::None { reason } => reason.clone(),
                        _ => String::new(),
                    }
                ));
            }
            confinement.install(command);
            Ok(Some(level))
        }
    }
}

fn open_stream(reader: io::PipeReader, path: &Path, cap: Option<u64>) -> Result<Stream, String> {
    let nonblocking = nix::fcntl::fcntl(
        &reader,
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    );
    nonblocking.map_err(|error| format!("failed to configure a pipe: {error}"))?;
    Stream::new(reader, path, cap)
        .map_err(|error| format!("failed to open {}: {error}", path.display()))
}

/// This process's own identity, for the launch record.
fn own_identity() -> ProcessId {
    let pid = std::process::id() as i32;
    ProcessId::of(pid).unwrap_or(ProcessId { pid, start_time: 0 })
}

/// Records `spawn_failed` for a leaf that could not be started.
fn unstartable(dir: &LeafDir, id: &str, why: &str, reporter: &dyn Reporter) -> i32 {
    log(format_args!("cannot start the leaf: {why}"));
    record_exit(
        dir,
        id,
        ExitClass::SpawnFailed {
            error: why.to_owned(),
        },
        reporter,
    )
}

fn record_exit(dir: &LeafDir, id: &str, class: ExitClass, reporter: &dyn Reporter) -> i32 {
    let mut exit = ExitRecord::without_run(id, class, 0);
    exit.supervisor_peak_rss_kib = super::procfs::peak_rss_kib(None);
    write_exit(dir, &exit, reporter)
}

/// Reports the exit, then creates `exit.json` (last: a reader that sees it may
/// assume everything else is done).
fn write_exit(dir: &LeafDir, exit: &ExitRecord, reporter: &dyn Reporter) -> i32 {
    report(reporter, &LeafEvent::Exited { exit: exit.clone() });
    match records::create_json(&dir.exit(), exit) {
        Ok(true) => 0,
        Ok(false) => {
            log(format_args!("exit.json already existed; left as it was"));
            0
        }
        Err(error) => {
            log(format_args!("{}", error_chain(&error)));
            1
        }
    }
}

/// The leaf id when the job file cannot tell it: the directory's name.
fn fallback_id(dir: &LeafDir) -> String {
    dir.path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Hands an event to the reporter; a failure is logged and otherwise ignored.
pub(super) fn report(reporter: &dyn Reporter, event: &LeafEvent) {
    if let Err(error) = reporter.report(event) {
        log(format_args!("{}", error_chain(&error)));
    }
}

/// Appends a line to the supervisor's stderr, which the caller points at
/// `supervisor.log` in the leaf directory.
pub(super) fn log(message: std::fmt::Arguments<'_>) {
    let line = format!("{} {message}\n", crate::clock::now_rfc3339());
    let _ = io::stderr().lock().write_all(line.as_bytes());
}
