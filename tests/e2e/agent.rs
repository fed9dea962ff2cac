//! `tdd agent` under a pseudo-terminal with a stand-in agent CLI named `claude`: the
//! terminal is the session's, the session is confined (git's directory and the home's
//! credentials out of reach), `tdd status` and the hook reach the engine through the
//! relay, the hooks are wired for the session only, and nothing it started outlives it.

use std::io::Read;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::Stdio;

/// A background process the stand-in leaves running, found by this argument.
const LINGER: &str = "3001.4159";

/// The stand-in CLI: it reports what it could do into `agent-report.txt` in the work
/// tree (the one place a confined developer writes).
fn stand_in(home: &Path) -> String {
    format!(
        r#"#!/bin/sh
# tdd asks every CLI it knows for its version first.
[ "$1" = --version ] && {{ echo "2.1.0 (Claude Code)"; exit 0; }}
settings=""
while [ $# -gt 0 ]; do
  case "$1" in
    --settings) settings="$2"; shift 2;;
    *) echo "arg: $1" >> agent-report.txt; shift;;
  esac
done
{{
  if [ -t 0 ] && [ -t 2 ]; then echo "terminal: yes"; else echo "terminal: no"; fi
  read -r line && echo "typed: $line"
  case "$settings" in *"tdd hook claude pre-tool-use"*) echo "hooks: wired";; *) echo "hooks: missing";; esac
  if echo x > .git/agent-probe 2>/dev/null; then echo "git: written"; else echo "git: refused"; fi
  if cat '{home}/.ssh/id_ed25519' >/dev/null 2>&1; then echo "credentials: read"; else echo "credentials: refused"; fi
  if echo x >> '{home}/.bashrc' 2>/dev/null; then echo "home: written"; else echo "home: refused"; fi
  if tdd status --json > status.json 2>&1; then echo "status: ok"; else echo "status: failed"; fi
  printf '{{"tool_name":"Write","tool_input":{{"file_path":"%s/tests/test_sub.py","content":"x"}},"cwd":"%s"}}' "$PWD" "$PWD" \
    | tdd hook claude pre-tool-use > hook.json 2>&1
  echo "hook: exit $?"
}} >> agent-report.txt
sleep {LINGER} &
exit 3
"#,
        home = home.display()
    )
}

/// The processes still running the stand-in's background command.
fn lingering() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .expect("proc")
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<i32>().ok()?;
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            String::from_utf8_lossy(&cmdline)
                .contains(LINGER)
                .then_some(pid)
        })
        .collect()
}

#[test]
fn an_agent_session_has_the_terminal_is_confined_reaches_the_engine_and_leaves_nothing() {
    let env = crate::hook::in_green();
    let home = env.home.path();
    std::fs::create_dir_all(home.join(".ssh")).expect("ssh dir");
    std::fs::write(home.join(".ssh/id_ed25519"), "secret").expect("key");
    std::fs::write(home.join(".bashrc"), "# mine\n").expect("bashrc");
    let bin = home.join("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    let claude = bin.join("claude");
    std::fs::write(&claude, stand_in(home)).expect("stand-in");
    std::fs::set_permissions(&claude, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("executable");
    let pty = nix::pty::openpty(None, None).expect("a pseudo-terminal");
    let slave = |fd: &OwnedFd| Stdio::from(fd.try_clone().expect("dup"));
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = env
        .tdd_std()
        .env("PATH", path)
        .args(["agent", "claude", "--model", "opus"])
        .stdin(slave(&pty.slave))
        .stdout(slave(&pty.slave))
        .stderr(slave(&pty.slave))
        .spawn()
        .expect("tdd agent runs");
    drop(pty.slave);
    let mut master = std::fs::File::from(pty.master);
    // Typed ahead: the terminal holds the line until the session reads it.
    master.write_all(b"hello agent\n").expect("type");
    let mut reader = master.try_clone().expect("master");
    let screen = std::thread::spawn(move || {
        let mut text = Vec::new();
        // EIO once every writer of the terminal is gone.
        let _ = reader.read_to_end(&mut text);
        String::from_utf8_lossy(&text).into_owned()
    });
    let status = child.wait().expect("tdd agent ends");
    // Nothing the session started is left running (looked at before the terminal is
    // read to its end: a process left behind would hold it open).
    let lingering = lingering();
    for pid in &lingering {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert!(
        lingering.is_empty(),
        "the session's background process outlived it"
    );
    drop(master);
    let screen = screen.join().expect("screen");
    let report = std::fs::read_to_string(env.root().join("agent-report.txt")).unwrap_or_default();
    // The CLI's own exit code is the session's.
    assert_eq!(status.code(), Some(3), "{screen}\n{report}");
    for line in [
        "arg: --model",
        "arg: opus",
        "terminal: yes",
        "typed: hello agent",
        "hooks: wired",
        "git: refused",
        "credentials: refused",
        "home: refused",
        "status: ok",
        "hook: exit 0",
    ] {
        assert!(
            report.lines().any(|l| l == line),
            "no `{line}` in:\n{report}\n{screen}"
        );
    }
    // The relayed status is the run's; the relayed hook denied the locked write in the
    // harness's format.
    let status = std::fs::read_to_string(env.root().join("status.json")).expect("status");
    // Inside the session, `tdd status` is its assignment: the open cycle, its phase
    // and target.
    let status: serde_json::Value = serde_json::from_str(&status).expect("json");
    assert_eq!(status["data"]["assignment"]["phase"], "green", "{status}");
    assert_eq!(
        status["next_action"]["verb"], "write_implementation",
        "{status}"
    );
    assert!(
        status["data"]["assignment"]["targets"][0]
            .as_str()
            .is_some_and(|t| t.contains("test_sub")),
        "{status}"
    );
    let hook = std::fs::read_to_string(env.root().join("hook.json")).expect("hook");
    assert!(hook.contains("\"permissionDecision\":\"deny\""), "{hook}");
    assert!(!env.root().join(".git/agent-probe").exists());
    assert_eq!(
        std::fs::read_to_string(home.join(".bashrc")).expect("bashrc"),
        "# mine\n"
    );
    assert!(screen.contains("session developer-"), "{screen}");
    // The session is recorded as a developer leaf, its hooks in its command line.
    let leaf = screen
        .split("session ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the session's leaf id");
    let (code, shown) = env.json(&["leaves", "show", leaf]);
    assert_eq!(code, 0, "{shown}");
    assert_eq!(shown["data"]["provider"], "agent", "{shown}");
    assert_eq!(shown["data"]["role"], "developer", "{shown}");
    assert_eq!(shown["data"]["argv"][1], "--settings", "{shown}");
}
