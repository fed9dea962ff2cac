//! Who a phase commit is by, learned while the runners work, so the commit object can
//! be written in-process when the gate says yes.
//!
//! `git var GIT_AUTHOR_IDENT` and `git var GIT_COMMITTER_IDENT` give the identities
//! exactly as `git commit-tree` resolves them (environment, config, the same strict
//! checks), and one `git config` query tells whether commit-tree would write anything
//! else (a signature, or a declared non-UTF-8 encoding). When it would, or when any probe
//! fails, [`Probe::take`] gives `None` and the commit is left to `git commit-tree`, which
//! then signs, or says what is wrong in its own words.

use std::path::Path;
use std::process::Child;
use std::process::Stdio;
use std::sync::Mutex;

use crate::git::Git;

/// One identity as git stamps it on a commit: `Name <email>`, and the date when the
/// environment fixes it (`GIT_AUTHOR_DATE`, `GIT_COMMITTER_DATE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ident {
    who: Vec<u8>,
    fixed_date: Option<Vec<u8>>,
    tz: Vec<u8>,
}

impl Ident {
    /// Parses a `git var` ident line (`Name <email> 1700000000 +0100`); `fixed` keeps its
    /// date as given, otherwise the date is the time of the commit in the line's zone.
    fn parse(line: &[u8], fixed: bool) -> Option<Ident> {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        // A header line ends at a newline: an identity with one inside (or a NUL) would
        // add headers of its own to the commit. git strips them; anything else is refused.
        if line.iter().any(|b| matches!(b, b'\n' | b'\0')) {
            return None;
        }
        let end = line.iter().rposition(|b| *b == b'>')? + 1;
        let date = line[end..].trim_ascii();
        let mut parts = date.split(|b| *b == b' ');
        let (seconds, tz) = (parts.next()?, parts.next()?);
        if parts.next().is_some() || seconds.is_empty() || !seconds.iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some(Ident {
            who: line[..end].to_vec(),
            fixed_date: fixed.then(|| date.to_vec()),
            tz: tz.to_vec(),
        })
    }

    /// The ident as a commit header carries it, at `now` (seconds since the epoch) unless
    /// the date is fixed.
    fn at(&self, now: u64) -> Vec<u8> {
        let mut line = self.who.clone();
        line.push(b' ');
        match &self.fixed_date {
            Some(date) => line.extend_from_slice(date),
            None => {
                line.extend_from_slice(now.to_string().as_bytes());
                line.push(b' ');
                line.extend_from_slice(&self.tz);
            }
        }
        line
    }
}

/// The author and committer a commit made now gets, when git would write nothing else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stamp {
    author: Ident,
    committer: Ident,
}

impl Stamp {
    /// The committer as a commit made at `now` carries it (`Name <email> SECONDS ZONE`),
    /// which is also how git logs a ref's move made then.
    pub(crate) fn committer_at(&self, now: u64) -> Vec<u8> {
        self.committer.at(now)
    }

    /// The commit object `git commit-tree TREE -p PARENT -m MESSAGE -m TRAILERS` writes
    /// with this stamp at `now`, byte for byte.
    pub(crate) fn commit_object(
        &self,
        tree: &str,
        parent: &str,
        message: &str,
        trailers: &str,
        now: u64,
    ) -> Vec<u8> {
        let mut object = Vec::new();
        for (key, value) in [
            (&b"tree"[..], tree.as_bytes().to_vec()),
            (b"parent", parent.as_bytes().to_vec()),
            (b"author", self.author.at(now)),
            (b"committer", self.committer.at(now)),
        ] {
            object.extend_from_slice(key);
            object.push(b' ');
            object.extend_from_slice(&value);
            object.push(b'\n');
        }
        object.push(b'\n');
        let mut body = Vec::new();
        for paragraph in [message, trailers] {
            // What each `-m` of commit-tree adds: a blank line after what came before,
            // the text, and a newline if it does not end in one.
            if !body.is_empty() {
                body.push(b'\n');
            }
            body.extend_from_slice(paragraph.as_bytes());
            if body.last().is_some_and(|b| *b != b'\n') {
                body.push(b'\n');
            }
        }
        object.extend_from_slice(&body);
        object
    }
}

/// The probes of one commit's stamp: started early, read once.
#[derive(Debug, Default)]
pub(crate) struct Probe {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
enum State {
    #[default]
    Idle,
    /// The thread that starts the probes and hands them over (starting a process holds
    /// up its caller while git loads, so the caller does not start them itself).
    Running(std::thread::JoinHandle<Option<Vec<Child>>>),
    Done(Option<Stamp>),
}

impl Probe {
    /// Starts the probes in `dir` unless they are running or done; returns at once.
    pub(crate) fn start(&self, dir: &Path) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if matches!(*state, State::Idle) {
            let dir = dir.to_path_buf();
            let thread = std::thread::Builder::new()
                .name("tdd-stamp".into())
                .spawn(move || spawn(&dir));
            *state = match thread {
                Ok(thread) => State::Running(thread),
                Err(_) => State::Done(None),
            };
        }
    }

    /// The stamp, waiting for the probes (started now if they were not): `None` when git
    /// would write more than a stamp, or a probe failed.
    pub(crate) fn take(&self, dir: &Path) -> Option<Stamp> {
        self.start(dir);
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let found = match std::mem::take(&mut *state) {
            State::Running(thread) => thread.join().ok().flatten().and_then(finish),
            State::Done(found) => found,
            State::Idle => None,
        };
        *state = State::Done(found.clone());
        found
    }
}

impl Drop for Probe {
    /// Stops probes still running and waits for them: no process outlives the advance.
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        if let State::Running(_) = state
            && let State::Running(thread) = std::mem::take(state)
            && let Ok(Some(children)) = thread.join()
        {
            stop(children);
        }
    }
}

/// `git var` for the author and the committer, and the config that changes a commit.
fn spawn(dir: &Path) -> Option<Vec<Child>> {
    let git = Git::new(dir);
    let mut children = Vec::new();
    for args in [
        &["var", "GIT_AUTHOR_IDENT"][..],
        &["var", "GIT_COMMITTER_IDENT"],
        &[
            "config",
            "--get-regexp",
            r"^(commit\.gpgsign|i18n\.commitencoding)$",
        ],
    ] {
        let spawned = git
            .command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn();
        match spawned {
            Ok(child) => children.push(child),
            Err(_) => {
                stop(children);
                return None;
            }
        }
    }
    Some(children)
}

/// Kills the probes and reaps them.
fn stop(children: Vec<Child>) {
    for mut child in children {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Reads the probes' answers (every child is waited for, whatever happens).
fn finish(children: Vec<Child>) -> Option<Stamp> {
    let outputs: Vec<_> = children
        .into_iter()
        .map(|child| child.wait_with_output().ok())
        .collect();
    let [Some(author), Some(committer), Some(config)] = <[_; 3]>::try_from(outputs).ok()? else {
        return None;
    };
    if !author.status.success() || !committer.status.success() {
        return None;
    }
    // `git config --get-regexp` exits 1 when nothing matches, higher on a broken config.
    match config.status.code() {
        Some(0) if commit_tree_adds_more(&config.stdout) => return None,
        Some(0 | 1) => {}
        _ => return None,
    }
    Some(Stamp {
        author: Ident::parse(
            &author.stdout,
            std::env::var_os("GIT_AUTHOR_DATE").is_some(),
        )?,
        committer: Ident::parse(
            &committer.stdout,
            std::env::var_os("GIT_COMMITTER_DATE").is_some(),
        )?,
    })
}

/// Whether the config lines (`key value`, the last of a key winning) make commit-tree
/// sign the commit or write an encoding header.
fn commit_tree_adds_more(lines: &[u8]) -> bool {
    let mut sign = false;
    let mut encoded = false;
    for line in lines.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let (key, value) = match line.iter().position(|b| *b == b' ') {
            Some(at) => (&line[..at], line[at + 1..].trim_ascii()),
            None => (line, &b""[..]),
        };
        let value = value.to_ascii_lowercase();
        match key {
            b"commit.gpgsign" => sign = !matches!(&value[..], b"false" | b"no" | b"off" | b"0"),
            b"i18n.commitencoding" => encoded = !matches!(&value[..], b"utf-8" | b"utf8"),
            _ => return true,
        }
    }
    sign || encoded
}

/// Seconds since the epoch, for a commit made now.
pub(crate) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repository with one commit and an identity of its own, whatever the machine's.
    fn repo() -> tempfile::TempDir {
        let dir = tdd_testutil::repo();
        std::fs::write(dir.path().join("a.txt"), "a\n").expect("write");
        tdd_testutil::commit_all(dir.path(), "base");
        tdd_testutil::git(dir.path(), &["config", "user.name", "Ada Lovelace"]);
        tdd_testutil::git(dir.path(), &["config", "user.email", "ada@example.com"]);
        dir
    }

    #[test]
    fn an_ident_line_keeps_its_person_and_zone() {
        let ident = Ident::parse(b"A B <a@b> 1700000000 +0130\n", false).expect("parsed");
        assert_eq!(ident.at(42), b"A B <a@b> 42 +0130".to_vec());
        let fixed = Ident::parse(b"A B <a@b> 1700000000 +0130\n", true).expect("parsed");
        assert_eq!(fixed.at(42), b"A B <a@b> 1700000000 +0130".to_vec());
        assert_eq!(Ident::parse(b"A B <a@b>\n", false), None);
        assert_eq!(Ident::parse(b"no email 1 +0000", false), None);
        assert_eq!(
            Ident::parse(b"A\nparent 0123 <a@b> 1700000000 +0000\n", false),
            None,
            "a newline inside would add a header"
        );
    }

    #[test]
    fn signing_or_another_encoding_leaves_the_commit_to_git() {
        assert!(!commit_tree_adds_more(b""));
        assert!(!commit_tree_adds_more(
            b"commit.gpgsign false\ni18n.commitencoding UTF-8\n"
        ));
        assert!(commit_tree_adds_more(b"commit.gpgsign true\n"));
        assert!(commit_tree_adds_more(b"commit.gpgsign\n"));
        assert!(!commit_tree_adds_more(
            b"commit.gpgsign true\ncommit.gpgsign off\n"
        ));
        assert!(commit_tree_adds_more(b"i18n.commitencoding ISO-8859-1\n"));
    }

    #[test]
    fn the_object_is_the_one_git_commit_tree_writes() {
        let dir = repo();
        let stamp = Probe::default().take(dir.path()).expect("a stamp");
        let head = tdd_testutil::git(dir.path(), &["rev-parse", "HEAD"]);
        let tree = tdd_testutil::git(dir.path(), &["rev-parse", "HEAD^{tree}"]);
        let (head, tree) = (head.trim(), tree.trim());
        for (message, trailers) in [
            ("feat: add\n\nwith a body", "TDD-Run: r\nTDD-Cycle: 1"),
            ("fix: ends in a newline\n", "TDD-Run: r"),
            ("", "TDD-Run: r"),
        ] {
            let now = 1_700_000_000;
            let ours = stamp.commit_object(tree, head, message, trailers, now);
            let date = format!("{now} {}", String::from_utf8_lossy(&stamp.author.tz));
            // Same environment as the probes had, the date fixed.
            let made = std::process::Command::new("git")
                .current_dir(dir.path())
                .args([
                    "commit-tree",
                    tree,
                    "-p",
                    head,
                    "-m",
                    message,
                    "-m",
                    trailers,
                ])
                .env("GIT_AUTHOR_DATE", &date)
                .env("GIT_COMMITTER_DATE", &date)
                .output()
                .expect("commit-tree");
            let made = String::from_utf8_lossy(&made.stdout);
            let theirs = std::process::Command::new("git")
                .current_dir(dir.path())
                .args(["cat-file", "commit", made.trim()])
                .output()
                .expect("cat-file")
                .stdout;
            let ours = String::from_utf8_lossy(&ours);
            assert_eq!(ours, String::from_utf8_lossy(&theirs), "{message:?}");
        }
    }

    #[test]
    fn a_signing_or_encoding_config_gives_no_stamp() {
        for (key, value) in [
            ("commit.gpgSign", "true"),
            ("i18n.commitEncoding", "ISO-8859-1"),
        ] {
            let dir = repo();
            assert!(Probe::default().take(dir.path()).is_some());
            tdd_testutil::git(dir.path(), &["config", key, value]);
            assert_eq!(Probe::default().take(dir.path()), None, "{key}");
        }
    }

    /// The processes of this test process whose command line names `dir`.
    fn git_children_in(dir: &Path) -> Vec<String> {
        let me = std::process::id().to_string();
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").expect("proc").flatten() {
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            // `pid (comm) state ppid ...`: the fields after the last ')'.
            let after = stat
                .rsplit_once(')')
                .map(|(_, rest)| rest)
                .unwrap_or_default();
            if after.split_whitespace().nth(1) != Some(me.as_str()) {
                continue;
            }
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(&*dir.to_string_lossy()) {
                found.push(cmdline);
            }
        }
        found
    }

    #[test]
    fn a_probe_dropped_while_running_leaves_no_process() {
        let dir = repo();
        // git blocks reading this config include until something writes to it: the
        // probes are still running when the probe is dropped.
        let fifo = dir.path().join(".git/stuck");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
        let include = fifo.display().to_string();
        tdd_testutil::git(dir.path(), &["config", "include.path", &include]);
        let probe = Probe::default();
        probe.start(dir.path());
        drop(probe);
        assert_eq!(git_children_in(dir.path()), Vec::<String>::new());
    }

    #[test]
    fn a_probe_answers_once_and_keeps_its_answer() {
        let dir = repo();
        let probe = Probe::default();
        probe.start(dir.path());
        let first = probe.take(dir.path());
        assert!(first.is_some());
        assert_eq!(
            probe.take(dir.path()),
            first,
            "a second take gives the same"
        );
    }

    #[test]
    fn a_name_written_to_add_a_header_stays_inside_the_author_line() {
        let dir = repo();
        let forged = "Eve\nparent 0000000000000000000000000000000000000000\ngpgsig x";
        tdd_testutil::git(dir.path(), &["config", "user.name", forged]);
        let stamp = Probe::default()
            .take(dir.path())
            .expect("git strips the newlines");
        let object = stamp.commit_object("t", "p", "feat: x", "TDD-Run: r", 1);
        let text = String::from_utf8_lossy(&object);
        let headers: Vec<&str> = text
            .split("\n\n")
            .next()
            .unwrap_or_default()
            .lines()
            .collect();
        let keys: Vec<&str> = headers.iter().filter_map(|h| h.split(' ').next()).collect();
        assert_eq!(keys, ["tree", "parent", "author", "committer"], "{text}");
    }
}
