//! The engine's door for confined leaves.
//!
//! A confined leaf cannot reach the ledger, so `tdd test`, `tdd status` and
//! `tdd verdict` inside it do not run there: they send their arguments over a local
//! socket (`TDD_ENGINE_RELAY`) to the conductor. The conductor serves only processes
//! of the leaf it is running, as the kernel names the peer (`SO_PEERCRED`: the supervisor
//! of that leaf or one of its descendants), so a suite the relay itself ran, whose
//! code descends from the conductor, is never served. It checks the arguments with the
//! command-line parser and the leaf's one-time token against the ledger, runs the same
//! command on the leaf's behalf in the leaf's directory with the leaf's base
//! environment (never the conductor's), and sends back its output and exit code. The
//! suites that `tdd test` starts run confined by the leaf's own policy
//! (`TDD_RUNNER_SANDBOX`) and never see an identity or a token; what still runs for a
//! leaf when it ends is killed with it. Requests are bounded: one line of at most
//! [`MAX_REQUEST_BYTES`], [`MAX_CONNECTIONS`] at once, ten seconds to send it.
//!
//! Outside `tdd conduct` nothing changes: without `TDD_ENGINE_RELAY` the commands run
//! as they always do.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::io::BufReader;
use std::io::Read;
use std::io::Write;
use std::os::unix::net::UnixListener;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Condvar;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

use serde::Deserialize;
use serde::Serialize;
use tdd_supervisor::ProcessId;

mod sweep;

/// The variable that tells a command inside a leaf where the relay listens.
pub const RELAY_VAR: &str = "TDD_ENGINE_RELAY";

/// The variable that carries the policy (JSON) a relayed `tdd test` confines its
/// runners with.
pub const RUNNER_SANDBOX_VAR: &str = tdd_engine::observe::RUNNER_SANDBOX_VAR;

/// The commands a leaf may run through the relay. `stop` asks the conductor to stop,
/// which a leaf could bring about anyway by doing nothing; `hook` is the leaf's agent
/// CLI asking before and after a tool runs (its event on the request's `stdin`).
pub const RELAYED: &[&str] = &["test", "status", "verdict", "stop", "hook"];

/// How much of each relayed command's output is kept for [`Admission::heard`].
const HEARD_BYTES: usize = 64 * 1024;

/// How many of a leaf's relayed commands are kept for [`Admission::heard`].
const HEARD_CALLS: usize = 16;

/// The leaf identity variables a relayed command keeps.
const IDENTITY: &[&str] = tdd_leaves::env::IDENTITY_ENV;

/// The longest request line the relay reads; a longer one is refused unread. A hook's
/// event (at most 4 MiB, a whole file a Write tool would write) fits it escaped.
pub const MAX_REQUEST_BYTES: u64 = 9 * 1024 * 1024;

/// How many connections the relay serves at once; one more is refused at once.
pub const MAX_CONNECTIONS: usize = 16;

/// How long a connection may take to send its request line.
const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long a request from a leaf that has just been launched waits for the relay to
/// learn the leaf's process tree.
const ROOT_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Checks the arguments of a relayed command with the real command-line parser: `Ok`
/// only for a command the relay serves, with no directory option in any spelling.
pub type ArgsCheck = fn(&[String]) -> Result<(), String>;

/// Variables of the conductor's environment a relayed command gets besides the
/// leaf's base variables: the toolchains' own homes and the engine's display settings.
/// Nothing else (no API key, no cloud credential, no forge token) is passed on.
const RELAYED_EXTRA_ENV: &[&str] = &["TDD_HEARTBEAT_SECS", tdd_sandbox::NO_LANDLOCK_VAR];

/// What a command inside a leaf asks the relay.
#[derive(Debug, Serialize, Deserialize)]
pub struct RelayRequest {
    /// The arguments after the program name.
    pub args: Vec<String>,
    /// Its working directory.
    pub cwd: PathBuf,
    /// Its leaf identity variables.
    pub env: BTreeMap<String, String>,
    /// What the command reads on its standard input (a hook's event); nothing when
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin: Option<String>,
}

/// What the relay answers: the command's output and exit code.
#[derive(Debug, Serialize, Deserialize)]
pub struct RelayReply {
    /// The exit code.
    pub code: i32,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

/// Why a relayed command could not be run.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// The socket could not be reached or read.
    #[error("the engine relay at {} failed: {source}", path.display())]
    Io {
        /// The socket.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// The relay's reply was not JSON.
    #[error("the engine relay answered something that is not a reply: {0}")]
    Reply(#[from] serde_json::Error),
}

/// The leaf currently admitted: its id, the directory it works in, the policy its
/// runners get, and the root of its process tree once it is launched.
#[derive(Debug, Clone)]
struct Admitted {
    /// Distinguishes one admission from the next, so a late reply never touches them.
    serial: u64,
    leaf_id: String,
    workdir: PathBuf,
    policy: String,
    tmp: PathBuf,
    root: Option<ProcessId>,
}

/// What the accepting thread, the serving threads and the admissions share.
#[derive(Debug, Default)]
struct Shared {
    admitted: Mutex<Option<Admitted>>,
    /// Signalled when the admission or its root changes.
    changed: Condvar,
    /// The relayed commands running now, by admission serial.
    running: Mutex<Vec<(u64, ProcessId)>>,
    /// What relayed commands printed, by admission serial, each cut to its last
    /// [`HEARD_BYTES`]: where a refused write of a suite shows when the leaf's own CLI
    /// keeps its tools' output to itself.
    heard: Mutex<Vec<(u64, String)>>,
    /// Connections being served.
    live: AtomicUsize,
    serials: AtomicU64,
}

/// The conductor's end: a socket in a private temporary directory, served by one
/// thread until dropped.
pub struct Relay {
    /// Holds the socket; removed when the relay is dropped.
    _dir: tempfile::TempDir,
    socket: PathBuf,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay")
            .field("socket", &self.socket)
            .finish_non_exhaustive()
    }
}

impl Relay {
    /// Listens for leaves of the repository whose ledger is `database`. Commands run as
    /// `tdd` (the binary at `tdd`) with the leaf's base variables and the toolchains'
    /// homes taken from `env` (the conductor's), never the rest of it; `check` is the
    /// command-line parser's verdict on their arguments.
    pub fn start(
        tdd: PathBuf,
        database: PathBuf,
        env: BTreeMap<String, String>,
        check: ArgsCheck,
    ) -> std::io::Result<Relay> {
        // What killed conductors left behind goes first: a relay cleans up after itself
        // only when it ends.
        sweep::sweep(&std::env::temp_dir());
        let dir = tempfile::Builder::new().prefix(sweep::PREFIX).tempdir()?;
        let socket = dir.path().join(sweep::SOCKET);
        let listener = UnixListener::bind(&socket)?;
        let shared = Arc::new(Shared::default());
        let stop = Arc::new(AtomicBool::new(false));
        let server = Server {
            tdd,
            database,
            env: Arc::new(relayed_env(&env)),
            shared: Arc::clone(&shared),
            check,
        };
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("engine-relay".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    if stopping.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(stream) = stream {
                        server.accept(stream);
                    }
                }
            })?;
        Ok(Relay {
            _dir: dir,
            socket,
            shared,
            stop,
            thread: Some(thread),
        })
    }

    /// The socket leaves connect to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Admits leaf `leaf_id`, working in `workdir`, for as long as the returned
    /// admission lives: on every path out of the leaf's run, nobody is admitted after
    /// it, and every command still running on its behalf is killed with all it
    /// started. Its commands run with `tmp` as `TMPDIR`, and the suites they start are
    /// confined by `policy`, the leaf's own. No request is served until
    /// [`Admission::launched`] names the leaf's process tree: only its processes are.
    pub fn admit(
        &self,
        leaf_id: &str,
        workdir: &Path,
        policy: &tdd_sandbox::Policy,
        tmp: &Path,
    ) -> Admission<'_> {
        let policy = serde_json::to_string(policy).unwrap_or_default();
        let serial = self.shared.serials.fetch_add(1, Ordering::SeqCst) + 1;
        if let Ok(mut admitted) = self.shared.admitted.lock() {
            *admitted = Some(Admitted {
                serial,
                leaf_id: leaf_id.to_string(),
                workdir: workdir.to_path_buf(),
                policy,
                tmp: tmp.to_path_buf(),
                root: None,
            });
        }
        self.shared.changed.notify_all();
        Admission {
            relay: self,
            serial,
        }
    }
}

/// A leaf's admission to the relay; dropping it admits nobody and ends what the relay
/// still runs for it.
#[must_use = "the leaf is admitted only while this lives"]
#[derive(Debug)]
pub struct Admission<'r> {
    relay: &'r Relay,
    serial: u64,
}

impl Admission<'_> {
    /// The leaf has been launched under the supervisor process `root`: from now on the
    /// relay serves requests from `root` and its descendants, and from no other process.
    pub fn launched(&self, root: ProcessId) {
        if let Ok(mut admitted) = self.relay.shared.admitted.lock()
            && let Some(admitted) = admitted.as_mut()
            && admitted.serial == self.serial
        {
            admitted.root = Some(root);
        }
        self.relay.shared.changed.notify_all();
    }

    /// What the commands relayed for this leaf printed so far (the end of each), in
    /// the order they ended.
    pub fn heard(&self) -> String {
        self.relay
            .shared
            .heard
            .lock()
            .map(|heard| {
                heard
                    .iter()
                    .filter(|(serial, _)| *serial == self.serial)
                    .map(|(_, text)| text.as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default()
    }
}

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        if let Ok(mut heard) = self.relay.shared.heard.lock() {
            heard.retain(|(serial, _)| *serial != self.serial);
        }
        if let Ok(mut admitted) = self.relay.shared.admitted.lock()
            && admitted.as_ref().is_some_and(|a| a.serial == self.serial)
        {
            *admitted = None;
        }
        self.relay.shared.changed.notify_all();
        // What still runs for the leaf ends with it: a relayed suite must not go on
        // writing the work tree once the engine looks at it.
        let running: Vec<ProcessId> = self
            .relay
            .shared
            .running
            .lock()
            .map(|r| {
                r.iter()
                    .filter(|(serial, _)| *serial == self.serial)
                    .map(|(_, p)| *p)
                    .collect()
            })
            .unwrap_or_default();
        for process in running {
            tdd_supervisor::end_tree(process);
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accepting thread so it sees the flag.
        let _ = UnixStream::connect(&self.socket);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Drops the oldest of `serial`'s entries until at most `n` are left: however often a
/// leaf asks, what the relay holds for it stays bounded.
fn keep_last(heard: &mut Vec<(u64, String)>, serial: u64, n: usize) {
    let mine = heard.iter().filter(|(s, _)| *s == serial).count();
    let mut drop = mine.saturating_sub(n);
    heard.retain(|(s, _)| {
        if *s == serial && drop > 0 {
            drop -= 1;
            false
        } else {
            true
        }
    });
}

/// The conductor's variables a relayed command keeps: a leaf's base variables and the
/// toolchains' homes, never an identity, a forge token or anything else.
fn relayed_env(conductor: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut env = tdd_leaves::env::leaf_env(conductor, &[], &[]);
    for name in tdd_engine::observe::hermetic::ALLOWED
        .iter()
        .chain(RELAYED_EXTRA_ENV)
    {
        if let Some(value) = conductor.get(*name)
            && !tdd_leaves::env::FORBIDDEN_ENV.contains(name)
        {
            env.insert((*name).to_string(), value.clone());
        }
    }
    env
}

#[derive(Clone)]
struct Server {
    tdd: PathBuf,
    database: PathBuf,
    env: Arc<BTreeMap<String, String>>,
    shared: Arc<Shared>,
    check: ArgsCheck,
}

/// Counts a connection for as long as it is served.
struct Served(Arc<Shared>);

impl Drop for Served {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Server {
    /// Serves `stream` on a thread of its own (a slow suite never holds up a status),
    /// unless [`MAX_CONNECTIONS`] are served already: then it is refused at once.
    fn accept(&self, stream: UnixStream) {
        if self.shared.live.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            self.shared.live.fetch_sub(1, Ordering::SeqCst);
            reply(&stream, &refused("too many requests at once; try again"));
            return;
        }
        let served = Served(Arc::clone(&self.shared));
        let server = self.clone();
        let spawned = std::thread::Builder::new()
            .name("engine-relay-call".into())
            .spawn(move || {
                let _served = served;
                server.serve(stream);
            });
        // A thread that could not start dropped its `Served` with the closure.
        drop(spawned);
    }

    fn serve(&self, stream: UnixStream) {
        let _ = stream.set_read_timeout(Some(REQUEST_TIMEOUT));
        let peer = peer_pid(&stream);
        let mut line = String::new();
        let read = BufReader::new((&stream).take(MAX_REQUEST_BYTES)).read_line(&mut line);
        let answer = match read {
            Err(e) => refused(&format!("the request could not be read: {e}")),
            Ok(_) if !line.ends_with('\n') => refused(&format!(
                "a request is one line of at most {MAX_REQUEST_BYTES} bytes"
            )),
            Ok(_) => match serde_json::from_str::<RelayRequest>(&line) {
                Ok(request) => self.run(&request, peer),
                Err(e) => refused(&format!("not a relay request: {e}")),
            },
        };
        reply(&stream, &answer);
    }

    fn run(&self, request: &RelayRequest, peer: Option<i32>) -> RelayReply {
        let admitted = match self.admitted_for(peer) {
            Ok(admitted) => admitted,
            Err(why) => return refused(&why),
        };
        if let Err(why) = self.check(&admitted, request) {
            return refused(&why);
        }
        let mut command = std::process::Command::new(&self.tdd);
        command
            .args(&request.args)
            .current_dir(&request.cwd)
            .env_clear()
            .envs(self.env.iter())
            .env("TMPDIR", &admitted.tmp)
            // The engine confines its runners by the repository's `[sandbox]`; the
            // leaf's own policy still holds where the tree judged turns that off.
            .env(RUNNER_SANDBOX_VAR, &admitted.policy)
            .stdin(if request.stdin.is_some() {
                std::process::Stdio::piped()
            } else {
                std::process::Stdio::null()
            })
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        for name in IDENTITY {
            if let Some(value) = request.env.get(*name) {
                command.env(name, value);
            }
        }
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(e) => return refused(&format!("failed to start {}: {e}", self.tdd.display())),
        };
        // The event is written from a thread of its own: a command that answers before
        // reading it all never leaves this one stuck on a full pipe.
        let feeder = match (child.stdin.take(), request.stdin.clone()) {
            (Some(mut pipe), Some(text)) => Some(std::thread::spawn(move || {
                let _ = pipe.write_all(text.as_bytes());
            })),
            _ => None,
        };
        let process = tdd_supervisor::ProcessId::of(child.id() as i32).ok();
        if let (Some(process), Ok(mut running)) = (process, self.shared.running.lock()) {
            running.push((admitted.serial, process));
        }
        // A leaf that ended while this command was starting took no note of it: it ends
        // here instead.
        let current = self
            .shared
            .admitted
            .lock()
            .is_ok_and(|a| a.as_ref().is_some_and(|a| a.serial == admitted.serial));
        if let (false, Some(process)) = (current, process) {
            tdd_supervisor::end_tree(process);
        }
        let out = child.wait_with_output();
        if let Some(feeder) = feeder {
            let _ = feeder.join();
        }
        if let (Some(process), Ok(mut running)) = (process, self.shared.running.lock()) {
            running.retain(|(_, p)| *p != process);
        }
        match out {
            // What a suite printed goes back to the leaf without the conductor's secrets.
            Ok(out) => {
                let secrets = tdd_engine::ledger::redact::known_secrets();
                let text = |bytes: &[u8]| {
                    let text = String::from_utf8_lossy(bytes);
                    tdd_engine::ledger::redact::redact_text(&text, secrets).into_owned()
                };
                let reply = RelayReply {
                    code: out.status.code().unwrap_or(1),
                    stdout: text(&out.stdout),
                    stderr: text(&out.stderr),
                };
                if let Ok(mut heard) = self.shared.heard.lock() {
                    let both = format!("{}\n{}", reply.stdout, reply.stderr);
                    heard.push((
                        admitted.serial,
                        crate::bail::tail_of(&both, HEARD_BYTES).to_string(),
                    ));
                    keep_last(&mut heard, admitted.serial, HEARD_CALLS);
                }
                reply
            }
            Err(e) => refused(&format!("failed to run {}: {e}", self.tdd.display())),
        }
    }

    /// The admitted leaf, if the connecting process `peer` is one of its processes (its
    /// supervisor or a descendant). A leaf launched a moment ago may ask before the
    /// conductor has learned its process tree: the request waits for it, within
    /// [`ROOT_WAIT`].
    fn admitted_for(&self, peer: Option<i32>) -> Result<Admitted, String> {
        let Some(peer) = peer else {
            return Err("the asking process could not be identified".into());
        };
        let deadline = std::time::Instant::now() + ROOT_WAIT;
        let mut admitted = self
            .shared
            .admitted
            .lock()
            .map_err(|_| "the relay is broken".to_string())?;
        loop {
            match admitted.as_ref() {
                None => return Err("no leaf is running".into()),
                Some(a) => {
                    if let Some(root) = a.root {
                        if tdd_supervisor::descends_from(peer, root) {
                            return Ok(a.clone());
                        }
                        return Err(
                            "the asking process is not one of the running leaf's processes".into(),
                        );
                    }
                }
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err("the running leaf's processes are not known yet".into());
            }
            admitted = self
                .shared
                .changed
                .wait_timeout(admitted, left)
                .map_err(|_| "the relay is broken".to_string())?
                .0;
        }
    }

    /// The request names a relayed command as the command-line parser reads it, comes
    /// with the admitted leaf's id and token (its SHA-256 matches the one recorded when
    /// the leaf was prepared; `status` alone may go without), and runs inside the
    /// leaf's directory.
    fn check(&self, admitted: &Admitted, request: &RelayRequest) -> Result<(), String> {
        (self.check)(&request.args)?;
        let command = request
            .args
            .iter()
            .find(|a| !a.starts_with('-'))
            .map(String::as_str);
        if !command.is_some_and(|c| RELAYED.contains(&c)) {
            return Err(format!(
                "only `tdd {}` reach the engine from a leaf",
                RELAYED.join("`, `tdd ")
            ));
        }
        if command == Some("status") && !request.env.contains_key("TDD_LEAF_TOKEN") {
            // Reading the run's position records nothing: no identity needed.
            return self.inside(admitted, request);
        }
        let leaf = request.env.get("TDD_LEAF_ID").map(String::as_str);
        if leaf != Some(admitted.leaf_id.as_str()) {
            return Err("this leaf is not the one running".into());
        }
        let token = request
            .env
            .get("TDD_LEAF_TOKEN")
            .cloned()
            .unwrap_or_default();
        let recorded = tdd_engine::ledger::Ledger::open_read_only(&self.database)
            .ok()
            .flatten()
            .and_then(|ledger| tdd_leaves::identity::find_leaf(&ledger, &admitted.leaf_id).ok())
            .flatten()
            .map(|record| record.token_sha256);
        if recorded.as_deref() != Some(tdd_leaves::runtime::token_sha256(&token).as_str()) {
            return Err("the leaf's token does not match its record".into());
        }
        self.inside(admitted, request)
    }

    /// The request's directory is the leaf's or below it.
    fn inside(&self, admitted: &Admitted, request: &RelayRequest) -> Result<(), String> {
        let cwd = std::fs::canonicalize(&request.cwd).unwrap_or_default();
        if std::fs::canonicalize(&admitted.workdir).is_ok_and(|d| cwd.starts_with(d)) {
            Ok(())
        } else {
            Err(format!(
                "{} is outside the leaf's directory",
                request.cwd.display()
            ))
        }
    }
}

/// The pid of the process at the other end of `stream`, as the kernel saw it connect.
fn peer_pid(stream: &UnixStream) -> Option<i32> {
    use std::os::fd::AsFd;
    let creds =
        nix::sys::socket::getsockopt(&stream.as_fd(), nix::sys::socket::sockopt::PeerCredentials)
            .ok()?;
    (creds.pid() > 0).then_some(creds.pid())
}

fn reply(stream: &UnixStream, reply: &RelayReply) {
    let mut writer = stream;
    if let Ok(text) = serde_json::to_string(reply) {
        let _ = writer.write_all(text.as_bytes());
        let _ = writer.write_all(b"\n");
    }
}

fn refused(why: &str) -> RelayReply {
    RelayReply {
        code: 2,
        stdout: String::new(),
        stderr: format!("tdd: the engine relay refused: {why}\n"),
    }
}

/// `args` without `-C DIR` / `--directory DIR` in any of its spellings: a relayed
/// command runs in the directory the request names, which the relay checks.
pub fn without_directory(args: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip_next = false;
    for arg in args {
        if skip_next {
            skip_next = false;
        } else if arg == "-C" || arg == "--directory" {
            skip_next = true;
        } else if !(arg.starts_with("-C") || arg.starts_with("--directory=")) {
            out.push(arg);
        }
    }
    out
}

/// Runs `args` (after the program name) through the relay at `socket`, from `cwd`,
/// with `stdin` as what the command reads.
pub fn forward(
    socket: &Path,
    args: &[String],
    cwd: &Path,
    stdin: Option<String>,
) -> Result<RelayReply, RelayError> {
    let io = |source| RelayError::Io {
        path: socket.to_path_buf(),
        source,
    };
    let env = IDENTITY
        .iter()
        .filter_map(|name| std::env::var(name).ok().map(|v| (name.to_string(), v)))
        .collect();
    let request = RelayRequest {
        args: args.to_vec(),
        cwd: cwd.to_path_buf(),
        env,
        stdin,
    };
    let mut stream = UnixStream::connect(socket).map_err(io)?;
    let mut text = serde_json::to_string(&request)?;
    text.push('\n');
    stream.write_all(text.as_bytes()).map_err(io)?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line).map_err(io)?;
    Ok(serde_json::from_str(&line)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leaf_that_asks_often_keeps_only_its_last_calls_heard() {
        let mut heard: Vec<(u64, String)> = (0..20).map(|i| (1, format!("call {i}"))).collect();
        heard.insert(3, (2, "another leaf".into()));
        keep_last(&mut heard, 1, 16);
        let mine: Vec<&str> = heard
            .iter()
            .filter(|(s, _)| *s == 1)
            .map(|(_, t)| t.as_str())
            .collect();
        assert_eq!(mine.len(), 16);
        assert_eq!(mine[0], "call 4");
        assert!(heard.iter().any(|(s, _)| *s == 2));
    }

    /// Stands in for the command-line parser: no `-C` in any spelling the old filter
    /// knew.
    fn no_directory(args: &[String]) -> Result<(), String> {
        if args.to_vec() == without_directory(args.iter().cloned()) {
            Ok(())
        } else {
            Err("a relayed command runs in the leaf's directory: no -C".into())
        }
    }

    fn server() -> (Server, Admitted, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("tempdir");
        let server = Server {
            tdd: PathBuf::from("tdd"),
            database: dir.path().join("ledger.sqlite3"),
            env: Arc::new(BTreeMap::new()),
            shared: Arc::new(Shared::default()),
            check: no_directory,
        };
        let admitted = Admitted {
            serial: 1,
            leaf_id: "dev-1".into(),
            workdir: dir.path().to_path_buf(),
            policy: String::new(),
            tmp: dir.path().to_path_buf(),
            root: None,
        };
        (server, admitted, dir)
    }

    fn request(args: &[&str], cwd: &Path, leaf: Option<&str>) -> RelayRequest {
        let mut env = BTreeMap::new();
        if let Some(leaf) = leaf {
            env.insert("TDD_LEAF_ID".to_string(), leaf.to_string());
            env.insert("TDD_LEAF_TOKEN".to_string(), "t".to_string());
        }
        RelayRequest {
            args: args.iter().map(|a| a.to_string()).collect(),
            cwd: cwd.to_path_buf(),
            env,
            stdin: None,
        }
    }

    #[test]
    fn every_spelling_of_a_directory_is_dropped() {
        let args = [
            "-C",
            "/x",
            "--json",
            "-C/y",
            "--directory",
            "/z",
            "--directory=/w",
            "test",
        ];
        assert_eq!(
            without_directory(args.iter().map(|a| a.to_string())),
            ["--json", "test"]
        );
    }

    #[test]
    fn only_the_running_leaf_with_its_token_may_run_the_three_commands_in_its_tree() {
        let (server, admitted, dir) = server();
        let here = dir.path();
        let refused = |args: &[&str], cwd: &Path, leaf: Option<&str>| {
            server.check(&admitted, &request(args, cwd, leaf)).is_err()
        };
        // Other commands, another directory, `-C`, another leaf: refused.
        assert!(refused(&["advance"], here, Some("dev-1")));
        assert!(refused(&["--json", "run", "start"], here, Some("dev-1")));
        assert!(refused(&["status"], Path::new("/"), None));
        assert!(refused(&["-C", "/", "status"], here, None));
        assert!(refused(&["test", "x"], here, Some("dev-2")));
        assert!(refused(
            &["hook", "claude", "pre-tool-use"],
            here,
            Some("dev-2")
        ));
        assert!(refused(&["hook", "claude", "pre-tool-use"], here, None));
        // The token is checked against the ledger: none here, so refused.
        assert!(refused(&["test", "x"], here, Some("dev-1")));
        // A status without identity records nothing and may run.
        assert!(!refused(&["--json", "status"], here, None));
    }

    /// A relay whose "tdd" echoes its arguments, with leaf `dev-1` admitted in a
    /// temporary directory.
    fn echo_relay() -> (Relay, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("tempdir");
        let relay = Relay::start(
            PathBuf::from("/bin/echo"),
            dir.path().join("ledger.sqlite3"),
            BTreeMap::new(),
            no_directory,
        )
        .expect("relay");
        (relay, dir)
    }

    fn status(relay: &Relay, cwd: &Path) -> RelayReply {
        forward(relay.socket(), &["status".to_string()], cwd, None).expect("a reply")
    }

    #[test]
    fn only_processes_of_the_running_leaf_are_served() {
        let (relay, dir) = echo_relay();
        let policy = tdd_sandbox::Policy::default();
        let me = ProcessId::of(std::process::id() as i32).expect("self");
        // A leaf whose tree does not hold this process: refused.
        let mut other = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .expect("sleep");
        let outsider = ProcessId::of(other.id() as i32).expect("sleep");
        {
            let admission = relay.admit("dev-1", dir.path(), &policy, dir.path());
            admission.launched(outsider);
            let reply = status(&relay, dir.path());
            assert_eq!(reply.code, 2, "{reply:?}");
            assert!(
                reply
                    .stderr
                    .contains("not one of the running leaf's processes"),
                "{reply:?}"
            );
        }
        let _ = other.kill();
        let _ = other.wait();
        // Nobody admitted: refused.
        let reply = status(&relay, dir.path());
        assert!(reply.stderr.contains("no leaf is running"), "{reply:?}");
        // A leaf whose tree holds this process: served.
        let admission = relay.admit("dev-1", dir.path(), &policy, dir.path());
        admission.launched(me);
        let reply = status(&relay, dir.path());
        assert_eq!(reply.code, 0, "{reply:?}");
        assert_eq!(reply.stdout, "status\n");
    }

    #[test]
    fn an_overlong_request_is_refused_without_reading_it_whole() {
        let (relay, dir) = echo_relay();
        let policy = tdd_sandbox::Policy::default();
        let admission = relay.admit("dev-1", dir.path(), &policy, dir.path());
        admission.launched(ProcessId::of(std::process::id() as i32).expect("self"));
        let mut stream = UnixStream::connect(relay.socket()).expect("connect");
        let mut writer = stream.try_clone().expect("clone");
        let size = usize::try_from(MAX_REQUEST_BYTES).expect("size") * 2;
        let sender = std::thread::spawn(move || {
            // The relay stops reading at the bound and closes: the write may fail then.
            let _ = writer.write_all(&vec![b'x'; size]);
        });
        let mut line = String::new();
        BufReader::new(&mut stream)
            .read_line(&mut line)
            .expect("a reply");
        let reply: RelayReply = serde_json::from_str(&line).expect("json");
        assert!(reply.stderr.contains("at most"), "{reply:?}");
        drop(stream);
        let _ = sender.join();
    }

    #[test]
    fn connections_beyond_the_bound_are_refused_at_once() {
        let (relay, _dir) = echo_relay();
        // Connections that send nothing hold their threads until they close.
        let idle: Vec<UnixStream> = (0..MAX_CONNECTIONS)
            .map(|_| UnixStream::connect(relay.socket()).expect("connect"))
            .collect();
        let mut extra = UnixStream::connect(relay.socket()).expect("connect");
        let mut line = String::new();
        BufReader::new(&mut extra)
            .read_line(&mut line)
            .expect("a reply");
        assert!(line.contains("too many requests"), "{line}");
        drop(idle);
    }
}
