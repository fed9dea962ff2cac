//! The engine's door for confined leaves.
//!
//! A confined leaf cannot reach the ledger, so `tdd test`, `tdd status` and
//! `tdd verdict` inside it do not run there: they send their arguments over a local
//! socket (`TDD_ENGINE_RELAY`) to the conductor, which checks the leaf's one-time token
//! against the ledger, runs the same command on the leaf's behalf in the leaf's
//! directory, and sends back its output and exit code. The suites that `tdd test`
//! starts run confined by the leaf's own policy (`TDD_RUNNER_SANDBOX`), so the
//! agent's code never runs with the conductor's rights.
//!
//! Outside `tdd conduct` nothing changes: without `TDD_ENGINE_RELAY` the commands run
//! as they always do.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::io::BufReader;
use std::io::Write;
use std::os::unix::net::UnixListener;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

use serde::Deserialize;
use serde::Serialize;

/// The variable that tells a command inside a leaf where the relay listens.
pub const RELAY_VAR: &str = "TDD_ENGINE_RELAY";

/// The variable that carries the policy (JSON) a relayed `tdd test` confines its
/// runners with.
pub const RUNNER_SANDBOX_VAR: &str = tdd_engine::observe::RUNNER_SANDBOX_VAR;

/// The commands a leaf may run through the relay. `stop` asks the conductor to stop,
/// which a leaf could bring about anyway by doing nothing.
pub const RELAYED: &[&str] = &["test", "status", "verdict", "stop"];

/// The leaf identity variables a relayed command keeps.
const IDENTITY: &[&str] = tdd_leaves::env::IDENTITY_ENV;

/// What a command inside a leaf asks the relay.
#[derive(Debug, Serialize, Deserialize)]
pub struct RelayRequest {
    /// The arguments after the program name.
    pub args: Vec<String>,
    /// Its working directory.
    pub cwd: PathBuf,
    /// Its leaf identity variables.
    pub env: BTreeMap<String, String>,
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

/// The leaf currently admitted: its id, the directory it works in and the policy its
/// runners get.
#[derive(Debug, Clone)]
struct Admitted {
    leaf_id: String,
    workdir: PathBuf,
    policy: String,
    tmp: PathBuf,
}

/// The conductor's end: a socket in a private temporary directory, served by one
/// thread until dropped.
pub struct Relay {
    /// Holds the socket; removed when the relay is dropped.
    _dir: tempfile::TempDir,
    socket: PathBuf,
    admitted: Arc<Mutex<Option<Admitted>>>,
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
    /// Listens for leaves of the repository whose ledger is `database`; commands run as
    /// `tdd` (the binary at `tdd`) in exactly the environment `env` (the conductor's),
    /// less forge tokens.
    pub fn start(
        tdd: PathBuf,
        database: PathBuf,
        env: BTreeMap<String, String>,
    ) -> std::io::Result<Relay> {
        let dir = tempfile::Builder::new().prefix("tdd-relay-").tempdir()?;
        let socket = dir.path().join("engine.sock");
        let listener = UnixListener::bind(&socket)?;
        let admitted: Arc<Mutex<Option<Admitted>>> = Arc::new(Mutex::new(None));
        let stop = Arc::new(AtomicBool::new(false));
        let server = Server {
            tdd,
            database,
            env: Arc::new(env),
            admitted: Arc::clone(&admitted),
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
                        let server = server.clone();
                        // One thread a call: a slow suite never holds up a status.
                        let _ = std::thread::Builder::new()
                            .name("engine-relay-call".into())
                            .spawn(move || server.serve(stream));
                    }
                }
            })?;
        Ok(Relay {
            _dir: dir,
            socket,
            admitted,
            stop,
            thread: Some(thread),
        })
    }

    /// The socket leaves connect to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Admits leaf `leaf_id`, working in `workdir`, for as long as the returned
    /// admission lives: on every path out of the leaf's run, nobody is admitted
    /// after it. Its commands run with `tmp` as `TMPDIR`, and the suites they start are
    /// confined by `policy`, the leaf's own.
    pub fn admit(
        &self,
        leaf_id: &str,
        workdir: &Path,
        policy: &tdd_sandbox::Policy,
        tmp: &Path,
    ) -> Admission<'_> {
        let policy = serde_json::to_string(policy).unwrap_or_default();
        if let Ok(mut admitted) = self.admitted.lock() {
            *admitted = Some(Admitted {
                leaf_id: leaf_id.to_string(),
                workdir: workdir.to_path_buf(),
                policy,
                tmp: tmp.to_path_buf(),
            });
        }
        Admission { relay: self }
    }
}

/// A leaf's admission to the relay; dropping it admits nobody.
#[must_use = "the leaf is admitted only while this lives"]
#[derive(Debug)]
pub struct Admission<'r> {
    relay: &'r Relay,
}

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        if let Ok(mut admitted) = self.relay.admitted.lock() {
            *admitted = None;
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

#[derive(Clone)]
struct Server {
    tdd: PathBuf,
    database: PathBuf,
    env: Arc<BTreeMap<String, String>>,
    admitted: Arc<Mutex<Option<Admitted>>>,
}

impl Server {
    fn serve(&self, stream: UnixStream) {
        let mut reader = BufReader::new(&stream);
        let mut line = String::new();
        if reader.read_line(&mut line).is_err() || line.is_empty() {
            return;
        }
        let reply = match serde_json::from_str::<RelayRequest>(&line) {
            Ok(request) => self.run(&request),
            Err(e) => refused(&format!("not a relay request: {e}")),
        };
        let mut writer = &stream;
        if let Ok(text) = serde_json::to_string(&reply) {
            let _ = writer.write_all(text.as_bytes());
            let _ = writer.write_all(b"\n");
        }
    }

    fn run(&self, request: &RelayRequest) -> RelayReply {
        let admitted = self.admitted.lock().ok().and_then(|a| a.clone());
        let Some(admitted) = admitted else {
            return refused("no leaf is running");
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
            .env_remove(RELAY_VAR)
            .env("TMPDIR", &admitted.tmp)
            .env(RUNNER_SANDBOX_VAR, &admitted.policy);
        // The conductor's forge token stays with the conductor.
        for name in tdd_leaves::env::FORBIDDEN_ENV {
            command.env_remove(name);
        }
        for name in IDENTITY {
            command.env_remove(name);
            if let Some(value) = request.env.get(*name) {
                command.env(name, value);
            }
        }
        match command.output() {
            Ok(out) => RelayReply {
                code: out.status.code().unwrap_or(1),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            },
            Err(e) => refused(&format!("failed to start {}: {e}", self.tdd.display())),
        }
    }

    /// The request comes from the admitted leaf (its token matches the one recorded
    /// when it was prepared), names a relayed command, and runs inside its directory.
    fn check(&self, admitted: &Admitted, request: &RelayRequest) -> Result<(), String> {
        if request.args != without_directory(request.args.iter().cloned()) {
            return Err("a relayed command runs in the leaf's directory: no -C".into());
        }
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

/// Runs `args` (after the program name) through the relay at `socket`, from `cwd`.
pub fn forward(socket: &Path, args: &[String], cwd: &Path) -> Result<RelayReply, RelayError> {
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

    fn server() -> (Server, Admitted, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("tempdir");
        let server = Server {
            tdd: PathBuf::from("tdd"),
            database: dir.path().join("ledger.sqlite3"),
            env: Arc::new(BTreeMap::new()),
            admitted: Arc::new(Mutex::new(None)),
        };
        let admitted = Admitted {
            leaf_id: "dev-1".into(),
            workdir: dir.path().to_path_buf(),
            policy: String::new(),
            tmp: dir.path().to_path_buf(),
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
        // The token is checked against the ledger: none here, so refused.
        assert!(refused(&["test", "x"], here, Some("dev-1")));
        // A status without identity records nothing and may run.
        assert!(!refused(&["--json", "status"], here, None));
    }
}
