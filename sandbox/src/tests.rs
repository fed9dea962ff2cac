use std::path::Path;
use std::process::Command;

use super::*;

/// Runs `sh -c script` under `policy`; its exit code and stderr.
fn confined(policy: &Policy, script: &str) -> (i32, String) {
    let confinement = Confinement::prepare(policy).expect("rules");
    let mut command = Command::new("/bin/sh");
    command.args(["-c", script]);
    confinement.install(&mut command);
    let out = command.output().expect("sh runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `sh -c script` under `policy`'s rules prepared once and given `tmp` as a
/// private TMPDIR per run, as runners get them.
fn with_private_tmp(policy: &Policy, tmp: &Path, script: &str) -> std::process::Output {
    let mut command = Command::new("/bin/sh");
    command.args(["-c", script]);
    Confinement::prepare(policy)
        .expect("rules")
        .with_private_tmp(tmp)
        .install(&mut command);
    command.output().expect("sh runs")
}

fn dirs() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(dir.path()).expect("canonical");
    for sub in ["work/.git/hooks", "work/src", "other", "home/.config/gh"] {
        std::fs::create_dir_all(root.join(sub)).expect("mkdir");
    }
    std::fs::write(root.join("home/.git-credentials"), "secret").expect("write");
    std::fs::write(root.join("home/.config/gh/hosts.yml"), "token").expect("write");
    std::fs::write(root.join("home/.profile"), "ok").expect("write");
    (dir, root)
}

fn policy(root: &Path) -> Policy {
    Policy {
        write: vec![root.join("work")],
        deny_write: vec![root.join("work/.git")],
        deny_read: vec![
            root.join("home/.git-credentials"),
            root.join("home/.config/gh"),
        ],
        write_files: vec![PathBuf::from("/dev/null")],
        without_landlock: false,
        ..Policy::default()
    }
}

#[test]
fn a_confined_process_writes_its_tree_and_nothing_else() {
    if !probe().confines() {
        // A kernel without Landlock: what this test checks cannot hold here, and the
        // level says so (checked in `the_level_follows_the_kernel`).
        return;
    }
    let (_dir, root) = dirs();
    let p = policy(&root);
    let r = root.display();
    let (code, err) = confined(
        &p,
        &format!(
            "echo ok > {r}/work/src/lib.rs && cat {r}/home/.profile >/dev/null && ls {r}/home >/dev/null"
        ),
    );
    assert_eq!(code, 0, "{err}");
    for script in [
        format!("echo x > {r}/work/.git/hooks/pre-commit"),
        format!("echo x > {r}/other/file"),
        format!("cat {r}/home/.git-credentials"),
        format!("cat {r}/home/.config/gh/hosts.yml"),
        format!("rm -rf {r}/work/.git"),
        format!("mv {r}/work/.git {r}/work/src/moved"),
    ] {
        let (code, _) = confined(&p, &script);
        assert_ne!(code, 0, "{script} succeeded");
    }
    assert!(root.join("work/.git/hooks").is_dir());
    assert_eq!(
        std::fs::read_to_string(root.join("work/src/lib.rs")).expect("lib"),
        "ok\n"
    );
    // With read-only mounts, the directory holding `.git` stays writable whole.
    if mounts::available() {
        let (code, err) = confined(
            &p,
            &format!("echo new > {r}/work/top && mv {r}/work/top {r}/work/top2"),
        );
        assert_eq!(code, 0, "{err}");
        let (code, _) = confined(&p, &format!("touch {r}/work/.git/new"));
        assert_ne!(code, 0, "a file was made in .git");
        assert!(!root.join("work/.git/new").exists());
    }
    // A process started by the confined one is confined too.
    let (code, _) = confined(&p, &format!("sh -c 'echo x > {r}/other/nested'"));
    assert_ne!(code, 0);
    assert!(!root.join("other/nested").exists());
}

#[test]
fn the_level_follows_the_kernel_and_the_override() {
    let level = probe();
    assert!(matches!(
        level,
        Level::Full { .. } | Level::Partial { .. } | Level::None { .. }
    ));
    assert!(Confinement::disabled().level() == &Level::Disabled);
    assert_eq!(Level::Full { abi: 7 }.label(), "landlock-v7");
    assert_eq!(
        Level::None {
            reason: String::new()
        }
        .label(),
        "none"
    );
}

#[test]
fn with_its_own_processes_nothing_the_program_starts_outlives_it() {
    if !probe().confines() || !mounts::pid_namespaces() {
        // Without Landlock or user namespaces the program runs as before; what this
        // test checks cannot hold here.
        return;
    }
    let (_dir, root) = dirs();
    let mut p = policy(&root);
    p.own_processes = true;
    let fifo = root.join("work/alive");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let (sender, receiver) = std::sync::mpsc::channel();
    let reader = fifo.clone();
    std::thread::spawn(move || {
        use std::io::Read;
        let mut sink = Vec::new();
        let done = std::fs::File::open(&reader).and_then(|mut f| f.read_to_end(&mut sink));
        let _ = sender.send(done.is_ok());
    });
    // A daemon in a session of its own holds the FIFO; the program exits 3 at once.
    let r = root.display();
    let (code, err) = confined(
        &p,
        &format!("exec 3>{r}/work/alive; setsid sleep 300 & echo $$ > {r}/work/pid; exit 3"),
    );
    assert_eq!(code, 3, "{err}");
    // The program ran as its namespace's init, and its daemon died with it.
    let pid = std::fs::read_to_string(root.join("work/pid")).expect("pid");
    assert_eq!(pid.trim(), "1");
    let died = receiver.recv_timeout(std::time::Duration::from_secs(60));
    assert_eq!(died, Ok(true), "the daemon outlived the program");
    // Spawning returns as soon as the program starts, not when it ends.
    let mut command = Command::new("/bin/sh");
    command.args(["-c", "sleep 300"]);
    Confinement::prepare(&p)
        .expect("rules")
        .install(&mut command);
    let started = std::time::Instant::now();
    let mut child = command.spawn().expect("spawn");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "spawn waited for the program to end"
    );
    let _ = child.kill();
    let _ = child.wait();
    // Still confined: the rules hold inside the namespace.
    let (code, _) = confined(&p, &format!("echo x > {r}/other/file"));
    assert_ne!(code, 0);
}

#[test]
fn a_program_with_its_own_processes_reaches_only_its_own_loopback_and_ipc() {
    if !probe().confines() {
        return;
    }
    let (_dir, root) = dirs();
    let outside = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = outside.local_addr().expect("port").port();
    let key = 0x7dd0_0000 + std::process::id() % 0xffff;
    let mut p = policy(&root);
    p.own_processes = true;
    p.own_network = true;
    // Python: a connection to the port outside, a server of its own on loopback, and a
    // System V shared memory segment under `key`, each reported on stderr.
    let script = format!(
        "python3 -c '\nimport ctypes, socket, sys\ntry:\n    socket.create_connection((\"127.0.0.1\", {port}), 5)\n    print(\"reached\", file=sys.stderr)\nexcept OSError:\n    print(\"refused\", file=sys.stderr)\ns = socket.socket(); s.bind((\"127.0.0.1\", 0)); s.listen()\nsocket.create_connection(s.getsockname(), 5)\nprint(\"loopback\", file=sys.stderr)\nprint(\"shm\", ctypes.CDLL(None).shmget({key}, 4096, 0o1600), file=sys.stderr)\n'"
    );
    let (code, err) = confined(&p, &script);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("refused") && err.contains("loopback"), "{err}");
    assert!(!err.contains("shm -1"), "{err}");
    // The segment went with the program's IPC namespace.
    let seen = Command::new("python3")
        .args([
            "-c",
            &format!("import ctypes; print(ctypes.CDLL(None).shmget({key}, 0, 0))"),
        ])
        .output()
        .expect("python3");
    let id = String::from_utf8_lossy(&seen.stdout).trim().to_string();
    if id != "-1" {
        let _ = Command::new("ipcrm").args(["-m", &id]).status();
    }
    assert_eq!(id, "-1", "the segment outlived the program");
    // Without a network namespace of its own, the same program reaches the port.
    p.own_network = false;
    let (_, err) = confined(&p, &script);
    assert!(err.contains("reached"), "{err}");
}

#[test]
fn a_program_gets_no_more_processes_than_its_limit() {
    if !probe().confines() || !mounts::available() {
        return;
    }
    let (_dir, root) = dirs();
    let mut p = policy(&root);
    p.own_processes = true;
    // The kernel exempts the root user from process limits: as root, the program runs as
    // `nobody`, the limit's usual subject.
    let run = |p: &Policy| {
        let mut command = Command::new("/bin/sh");
        command
            .args([
                "-c",
                "for i in $(seq 40); do sleep 300 & done; echo all started",
            ])
            .current_dir("/");
        if nix::unistd::geteuid().is_root() {
            command.uid(65534).gid(65534);
        }
        Confinement::prepare(p)
            .expect("rules")
            .install(&mut command);
        command.output().expect("sh runs")
    };
    let unbounded = run(&p);
    assert!(
        String::from_utf8_lossy(&unbounded.stdout).contains("all started"),
        "{unbounded:?}"
    );
    p.limits.processes = Some(12);
    let bounded = run(&p);
    assert!(
        !String::from_utf8_lossy(&bounded.stdout).contains("all started"),
        "40 processes started under a limit of 12: {bounded:?}"
    );
    assert!(
        String::from_utf8_lossy(&bounded.stderr)
            .to_lowercase()
            .contains("fork"),
        "{bounded:?}"
    );
}

#[test]
fn a_program_gets_no_more_memory_than_its_limit() {
    if !probe().confines() {
        return;
    }
    let (_dir, root) = dirs();
    let mut p = policy(&root);
    let script = "python3 -c 'b = bytearray(512 << 20); print(len(b))'";
    let (code, err) = confined(&p, script);
    assert_eq!(code, 0, "{err}");
    p.limits.memory = Some(128 << 20);
    let (code, err) = confined(&p, script);
    assert_ne!(code, 0, "512 MiB allocated under a limit of 128 MiB");
    assert!(err.contains("MemoryError"), "{err}");
}

#[test]
fn a_private_tmp_holds_its_quota_and_leaves_nothing_on_disk() {
    if !probe().confines() || !mounts::available() {
        return;
    }
    let (_dir, root) = dirs();
    let tmp = root.join("work/tmp");
    std::fs::create_dir_all(&tmp).expect("tmp");
    let mut p = policy(&root);
    p.limits.tmp = Some(1 << 20);
    let t = tmp.display();
    let script = format!(
        "echo small > {t}/small && cat {t}/small >&2 && dd if=/dev/zero of={t}/big bs=1024 count=4096"
    );
    // Set by the policy, and per run on prepared rules.
    p.private_tmp = Some(tmp.clone());
    let (code, err) = confined(&p, &script);
    assert_ne!(code, 0, "4 MiB written to a TMPDIR of 1 MiB: {err}");
    assert!(
        err.contains("small") && err.contains("No space left"),
        "{err}"
    );
    p.private_tmp = None;
    let out = with_private_tmp(&p, &tmp, &script);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("No space left"), "{err}");
    // What the program wrote was its own and went with it.
    let left: Vec<_> = std::fs::read_dir(&tmp).expect("tmp").collect();
    assert!(left.is_empty(), "{left:?}");
    // Without a private TMPDIR the same writes land on disk.
    let (code, err) = confined(&p, &script);
    assert_eq!(code, 0, "{err}");
    assert!(tmp.join("big").is_file());
}

#[test]
fn a_private_tmp_brings_shared_memory_of_its_own() {
    if !probe().confines() || !mounts::available() || !Path::new("/dev/shm").is_dir() {
        return;
    }
    let (_dir, root) = dirs();
    let tmp = root.join("work/tmp");
    std::fs::create_dir_all(&tmp).expect("tmp");
    let mut p = policy(&root);
    let name = format!("tdd-sandbox-test-{}", std::process::id());
    // What Python's `multiprocessing` does for a lock (`sem_open`), and a file left
    // behind in the shared-memory directory.
    let script = format!(
        "python3 -c 'import multiprocessing; multiprocessing.Lock(); print(\"locked\")' && \
         echo left > /dev/shm/{name}"
    );
    p.private_tmp = Some(tmp.clone());
    let (code, err) = confined(&p, &script);
    assert_eq!(
        code, 0,
        "a semaphore and a file in a private /dev/shm: {err}"
    );
    // Prepared rules given a private tmp per run, as runners get them.
    p.private_tmp = None;
    let out = with_private_tmp(&p, &tmp, &script);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // What the program wrote there was its own: no other process sees it.
    assert!(!Path::new("/dev/shm").join(&name).exists());
    // Without a private tmp the machine's shared memory stays out of reach, a channel
    // from one run to the next otherwise.
    let (code, _) = confined(&p, &format!("echo left > /dev/shm/{name}"));
    assert_ne!(code, 0);
    assert!(!Path::new("/dev/shm").join(&name).exists());
}

/// The process that waits for a program with its own processes is a copy of the
/// spawner, its memory and environment included, in the program's own user namespace:
/// the program can read neither. Nor does it get a descriptor the spawner inherited.
#[test]
fn a_program_reads_nothing_of_its_spawner_and_gets_none_of_its_descriptors() {
    if !probe().confines() || !mounts::pid_namespaces() {
        return;
    }
    let (_dir, root) = dirs();
    let mut p = policy(&root);
    p.own_processes = true;
    let fifo = root.join("work/pid");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo")
            .success()
    );
    // A descriptor as a caller would leave it: open, and not close-on-exec.
    let inherited = nix::fcntl::open(
        &root.join("other/inherited"),
        nix::fcntl::OFlag::O_WRONLY | nix::fcntl::OFlag::O_CREAT,
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .expect("open");
    let number = std::os::fd::AsRawFd::as_raw_fd(&inherited);
    let r = root.display();
    let mut command = Command::new("/bin/sh");
    command.arg("-c").arg(format!(
        "read waiting < {r}/work/pid
         if cat /proc/$waiting/environ > /dev/null 2>&1; then exit 7; fi
         if [ -e /proc/self/fd/{number} ]; then exit 8; fi
         exit 0"
    ));
    Confinement::prepare(&p)
        .expect("rules")
        .install(&mut command);
    let mut child = command.spawn().expect("spawn");
    // The spawned process is the one that stays behind and waits.
    std::fs::write(&fifo, format!("{}\n", child.id())).expect("tell the program");
    let status = child.wait().expect("wait");
    drop(inherited);
    assert_eq!(
        status.code(),
        Some(0),
        "7: the waiting process's environment was read; 8: an inherited descriptor reached the program"
    );
}

/// The thread that started a confined program ends without waiting for it (as when
/// tdd is killed): the program, and the process that waits for it, end too.
#[test]
fn a_program_dies_with_the_thread_that_started_it() {
    if !probe().confines() {
        return;
    }
    let (_dir, root) = dirs();
    for own_processes in [true, false] {
        if own_processes && !mounts::pid_namespaces() {
            continue;
        }
        let mut p = policy(&root);
        p.own_processes = own_processes;
        let confinement = Confinement::prepare(&p).expect("rules");
        let ended = outlives_its_starter(move |command| confinement.install(command));
        assert!(
            matches!(ended, Ok(Ok(None))),
            "own processes {own_processes}: the program outlived the thread that started it: {ended:?}"
        );
    }
}

#[test]
fn an_unconfined_program_dies_with_the_thread_that_started_it_too() {
    let ended = outlives_its_starter(|command| Confinement::disabled().install(command));
    assert!(
        matches!(ended, Ok(Ok(None))),
        "disabled: the program outlived the thread that started it: {ended:?}"
    );
    let ended = outlives_its_starter(crate::die_with_spawner);
    assert!(
        matches!(ended, Ok(Ok(None))),
        "unconfined: the program outlived the thread that started it: {ended:?}"
    );
}

/// Starts `sleep 300` (itself, so that no process of its own is left behind) from a
/// thread that ends at once, prepared by `prepare`, and waits up to two minutes for it
/// to end: `Ok(Ok(None))` when a signal ended it. A program still running then is
/// killed.
fn outlives_its_starter(
    prepare: impl FnOnce(&mut Command) + Send + 'static,
) -> Result<std::io::Result<Option<i32>>, std::sync::mpsc::RecvTimeoutError> {
    let mut child = std::thread::spawn(move || {
        let mut command = Command::new("sleep");
        command.arg("300");
        prepare(&mut command);
        command.spawn().expect("spawn")
    })
    .join()
    .expect("the starting thread");
    let pid = child.id();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(child.wait().map(|s| s.code()));
    });
    let ended = receiver.recv_timeout(std::time::Duration::from_secs(120));
    if ended.is_err() {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    ended
}
