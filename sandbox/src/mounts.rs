//! Read-only bind mounts in a private mount namespace: how a path inside a writable
//! hierarchy stays read-only (Landlock grants cannot leave holes in a hierarchy).
//!
//! Between fork and exec the child enters a new user and mount namespace (mapping its
//! own uid and gid to themselves), makes its mounts private, and mounts each path onto
//! itself read-only. Landlock, applied next, then forbids any further mount change, so
//! the process cannot undo it. Needs unprivileged user namespaces; where the kernel
//! refuses them, [`available`] says so and the caller keeps the path out of its
//! grants instead.

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

use nix::mount::MsFlags;
use nix::sched::CloneFlags;

/// What the child needs, prepared before fork so that nothing is allocated after it.
#[derive(Debug, Clone)]
pub(crate) struct ReadOnly {
    paths: Vec<PathBuf>,
    /// Also a PID and an IPC namespace: see [`ReadOnly::with_own_processes`].
    pid: bool,
    /// Also a network namespace: see [`ReadOnly::with_own_network`].
    net: bool,
    /// A directory to mount a fresh memory file system on, with its mount options:
    /// see [`ReadOnly::with_private_tmp`].
    tmp: Option<(PathBuf, String)>,
    /// The machine's shared-memory directory (`/dev/shm`) to mount a fresh memory file
    /// system on, with its mount options: set with the private tmp.
    shm: Option<(PathBuf, String)>,
    /// The process bound, set once the user namespace is the child's own.
    limits: crate::Limits,
}

impl ReadOnly {
    /// Read-only mounts of `paths` (those that exist) for a child of this process.
    pub(crate) fn new(paths: &[PathBuf]) -> ReadOnly {
        ReadOnly {
            paths: paths.iter().filter(|p| p.exists()).cloned().collect(),
            pid: false,
            net: false,
            tmp: None,
            shm: None,
            limits: crate::Limits::default(),
        }
    }

    /// The same, with `limits`: the process bound holds in the child's own user
    /// namespace, and `dir` (when given) becomes a memory file system of the child's own
    /// holding at most `limits.tmp` bytes, which goes when the namespace does.
    pub(crate) fn with_limits(mut self, limits: crate::Limits) -> ReadOnly {
        self.limits = limits;
        self
    }

    /// The same, with `dir` mounted as a fresh memory file system of at most the
    /// limits' `tmp` bytes: what the program writes there is its own, bounded, and
    /// gone when it ends. A directory that does not exist is skipped. The machine's
    /// shared-memory directory ([`shared_memory`]) gets one of its own too, of the same
    /// bound: POSIX semaphores and shared memory (Python's `multiprocessing`, a
    /// browser's renderers) work, and what one run leaves there no other run sees.
    pub(crate) fn with_private_tmp(mut self, dir: &std::path::Path) -> ReadOnly {
        if dir.is_dir() {
            self.tmp = Some((
                dir.to_path_buf(),
                crate::limits::tmpfs_options(self.limits.tmp),
            ));
            self.shm =
                shared_memory().map(|shm| (shm, crate::limits::tmpfs_options(self.limits.tmp)));
        }
        self
    }

    /// The shared-memory directory this child gets a memory file system of its own on,
    /// if any: the one Landlock must let it write.
    pub(crate) fn private_shared_memory(&self) -> Option<&std::path::Path> {
        self.shm.as_ref().map(|(dir, _)| dir.as_path())
    }

    /// The same, in a PID namespace of the child's own as well: the program runs as its
    /// init, so when it ends the kernel kills everything it started, whatever session
    /// or process group those moved to. Its System V IPC objects (shared memory,
    /// semaphores, message queues) are its own too, and go with it.
    pub(crate) fn with_own_processes(mut self) -> ReadOnly {
        self.pid = true;
        self
    }

    /// The same, in a network namespace of the child's own: loopback only, brought up.
    pub(crate) fn with_own_network(mut self) -> ReadOnly {
        self.net = true;
        self
    }

    /// Whether there is nothing to do: no mount and no namespace beyond them.
    pub(crate) fn is_empty(&self) -> bool {
        self.paths.is_empty() && !self.pid && !self.net && self.tmp.is_none() && self.shm.is_none()
    }

    /// Runs in the child between fork and exec: only system calls, on strings made
    /// before the fork. Whether the private shared-memory directory was mounted: a
    /// kernel that refuses that one mount leaves the machine's in place, unwritable as
    /// before, and the program runs all the same.
    pub(crate) fn apply(&self) -> std::io::Result<bool> {
        let mut flags = CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS;
        if self.pid {
            flags |= CloneFlags::CLONE_NEWPID | CloneFlags::CLONE_NEWIPC;
        }
        if self.net {
            flags |= CloneFlags::CLONE_NEWNET;
        }
        // The ids are this process's own, read after the fork: a spawner may have
        // changed them (`Command::uid`) since the rules were made.
        let uid = nix::unistd::geteuid().as_raw();
        let gid = nix::unistd::getegid().as_raw();
        nix::sched::unshare(flags)?;
        // A change of ids makes a process undumpable, and its `/proc/self` files its
        // former owner's: dumpable again (as exec would leave it), it may write its maps.
        nix::sys::prctl::set_dumpable(true)?;
        write("/proc/self/setgroups", b"deny")?;
        write("/proc/self/uid_map", IdMap::of(uid).bytes())?;
        write("/proc/self/gid_map", IdMap::of(gid).bytes())?;
        // Counted from here on in this user namespace alone: the program's own.
        crate::limits::apply_processes(&self.limits)?;
        if self.net {
            loopback_up()?;
        }
        let none: Option<&str> = None;
        nix::mount::mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none)?;
        for path in &self.paths {
            nix::mount::mount(
                Some(path),
                path,
                none,
                MsFlags::MS_BIND | MsFlags::MS_REC,
                none,
            )?;
            nix::mount::mount(
                none,
                path,
                none,
                MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY,
                none,
            )?;
        }
        let memory = |dir: &PathBuf, options: &String| {
            nix::mount::mount(
                Some("tmpfs"),
                dir,
                Some("tmpfs"),
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
                Some(options.as_str()),
            )
        };
        if let Some((dir, options)) = &self.tmp {
            memory(dir, options)?;
        }
        Ok(self
            .shm
            .as_ref()
            .is_some_and(|(dir, options)| memory(dir, options).is_ok()))
    }

    /// Runs in the child between fork and exec, last: with a PID namespace, forks the
    /// process that will exec the program (the namespace's init) and stays behind as
    /// its parent, which waits for it and ends as it ended. Only system calls.
    #[expect(
        unsafe_code,
        reason = "fork between fork and exec: the process has one thread and both sides \
                  make only system calls until the child execs"
    )]
    pub(crate) fn enter(&self) -> std::io::Result<()> {
        if !self.pid {
            return Ok(());
        }
        // SAFETY: this process has one thread (it is a fresh fork), and both sides only
        // make system calls until the child execs.
        match unsafe { nix::unistd::fork() }? {
            nix::unistd::ForkResult::Child => {
                // The init dies with the one waiting for it: a kill of the runner's
                // process group (a timeout) ends the namespace and all in it.
                nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)?;
                Ok(())
            }
            nix::unistd::ForkResult::Parent { child } => {
                // This process never execs: it holds a copy of the spawner's memory and
                // environment (a token among them) in the program's own user namespace.
                // Undumpable, its `/proc` files (environ, mem, fd, cwd) are the
                // machine's root's, and no process of that namespace may read them.
                nix::sys::prctl::set_dumpable(false)?;
                // It must not hold the descriptors it inherited either, the spawner's
                // exec-report pipe above all (the spawner would wait on it for the whole
                // run).
                close_from(3);
                wait_and_end_as(child)
            }
        }
    }
}

/// The machine's shared-memory directory, resolved (`/dev/shm`, a link to `/run/shm` on
/// some systems), when it is a directory.
fn shared_memory() -> Option<PathBuf> {
    std::fs::canonicalize("/dev/shm")
        .ok()
        .filter(|p| p.is_dir())
}

/// Closes every descriptor from `first` up: `close_range` where the kernel has it,
/// else one by one up to the descriptor limit.
#[expect(
    unsafe_code,
    reason = "raw close_range and close system calls, in a process that only waits"
)]
fn close_from(first: i32) {
    // SAFETY: closing descriptors this process will never use again.
    let ranged =
        unsafe { nix::libc::syscall(nix::libc::SYS_close_range, first as u32, u32::MAX, 0u32) };
    if ranged != 0 {
        for fd in first..65536 {
            // SAFETY: as above; EBADF for a descriptor that is not open is harmless.
            unsafe {
                nix::libc::close(fd);
            }
        }
    }
}

/// Marks every descriptor from `first` up close-on-exec: `close_range` where the kernel
/// has it, else one by one up to the descriptor limit. What a spawner inherited from its
/// own caller (a file open for writing outside every grant, a pipe to another program)
/// then never reaches the program it execs; the descriptors it made for the program are
/// those `Command` puts at 0, 1 and 2.
#[expect(
    unsafe_code,
    reason = "raw close_range and fcntl system calls, between fork and exec"
)]
pub(crate) fn close_on_exec_from(first: i32) {
    const CLOSE_RANGE_CLOEXEC: u32 = 1 << 2;
    // SAFETY: changes only the close-on-exec flag of descriptors of this process.
    let ranged = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_close_range,
            first as u32,
            u32::MAX,
            CLOSE_RANGE_CLOEXEC,
        )
    };
    if ranged != 0 {
        for fd in first..65536 {
            // SAFETY: as above; EBADF for a descriptor that is not open is harmless.
            unsafe {
                nix::libc::fcntl(fd, nix::libc::F_SETFD, nix::libc::FD_CLOEXEC);
            }
        }
    }
}

/// Waits for `child` and ends this process as it ended: the same exit code, or the same
/// signal (raised again with its default action).
#[expect(
    unsafe_code,
    reason = "resetting a signal's disposition to its default before raising it, in a \
              process that only waits"
)]
fn wait_and_end_as(child: nix::unistd::Pid) -> ! {
    use nix::sys::wait::WaitStatus;
    // SAFETY: `_exit` is async-signal-safe and ends the process at once: no destructor,
    // no atexit handler, no flush of buffers copied from the parent.
    let end = |code: i32| -> ! { unsafe { nix::libc::_exit(code) } };
    loop {
        match nix::sys::wait::waitpid(child, None) {
            Ok(WaitStatus::Exited(_, code)) => end(code),
            Ok(WaitStatus::Signaled(_, signal, _)) => {
                // SAFETY: resetting one signal's disposition and raising it are
                // async-signal-safe system calls.
                unsafe {
                    nix::libc::signal(signal as i32, nix::libc::SIG_DFL);
                }
                let _ = nix::sys::signal::raise(signal);
                end(128 + signal as i32)
            }
            Err(nix::errno::Errno::EINTR) | Ok(_) => continue,
            Err(_) => end(127),
        }
    }
}

fn write(path: &str, text: &[u8]) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)?
        .write_all(text)
}

/// One line of a user namespace's id map, `<id> <id> 1`, written on the stack: it is
/// made between fork and exec, where nothing may allocate.
struct IdMap {
    text: [u8; 36],
    len: usize,
}

impl IdMap {
    /// The map of `id` onto itself.
    fn of(id: u32) -> IdMap {
        let mut map = IdMap {
            text: [0; 36],
            len: 0,
        };
        map.number(id);
        map.push(b' ');
        map.number(id);
        for byte in b" 1\n" {
            map.push(*byte);
        }
        map
    }

    fn number(&mut self, id: u32) {
        let mut digits = [0u8; 10];
        let mut count = 0;
        let mut rest = id;
        loop {
            digits[count] = b'0' + (rest % 10) as u8;
            count += 1;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        for digit in digits[..count].iter().rev() {
            self.push(*digit);
        }
    }

    fn push(&mut self, byte: u8) {
        self.text[self.len] = byte;
        self.len += 1;
    }

    fn bytes(&self) -> &[u8] {
        &self.text[..self.len]
    }
}

/// Whether the kernel let one throwaway child have every namespace below at once.
static ALL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
/// What it let a child have of each alone, asked only where it refused them together.
static MOUNTS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
static PROCESSES: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
static NETWORK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Whether a throwaway child could take `probe`'s namespaces and exec `/bin/true` in
/// them (entering its PID namespace first when it has one).
fn child_takes(probe: ReadOnly) -> bool {
    let mut command = Command::new("/bin/true");
    #[expect(unsafe_code, reason = "the probe runs between fork and exec")]
    // SAFETY: `ReadOnly::apply` on a probe without paths (unshare, prctl, id maps built
    // on the stack, the loopback socket and ioctls on a stack request), then
    // `ReadOnly::enter` (fork, prctl, waitpid, close, _exit): only system calls, no
    // allocation, no lock.
    unsafe {
        crate::pre_exec(&mut command, move || {
            probe.apply()?;
            probe.enter()
        });
    }
    command.status().is_ok_and(|s| s.success())
}

/// Whether this kernel lets an unprivileged process make its own user, mount, PID, IPC
/// and network namespaces all at once: one throwaway child, once per process. Where it
/// does (the common case), each question below is answered for the cost of that one
/// child instead of one each; where it does not, each is asked alone, so the refusal of
/// one namespace costs no other.
pub(crate) fn all() -> bool {
    *ALL.get_or_init(|| child_takes(ReadOnly::new(&[]).with_own_processes().with_own_network()))
}

/// Whether this kernel lets an unprivileged process make its own user and mount
/// namespace here: tried once per process in a throwaway child.
pub(crate) fn available() -> bool {
    *MOUNTS.get_or_init(|| all() || child_takes(ReadOnly::new(&[])))
}

/// Brings up the loopback interface of a new network namespace (it starts down), so
/// that a suite's own servers on `127.0.0.1` work: `SIOCGIFFLAGS`, then `SIOCSIFFLAGS`
/// with `IFF_UP`, on a datagram socket. Only system calls, on the stack.
#[expect(
    unsafe_code,
    reason = "socket and the interface-flag ioctls have no safe wrapper; they write only \
              the request on this stack frame"
)]
fn loopback_up() -> std::io::Result<()> {
    use nix::libc;
    // SAFETY: plain system calls; `request` outlives both ioctls, and the descriptor is
    // closed on every path.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut request: libc::ifreq = std::mem::zeroed();
        for (to, from) in request.ifr_name.iter_mut().zip(b"lo\0") {
            *to = *from as libc::c_char;
        }
        let mut result = libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut request);
        if result == 0 {
            request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            result = libc::ioctl(fd, libc::SIOCSIFFLAGS, &request);
        }
        let error = std::io::Error::last_os_error();
        libc::close(fd);
        if result == 0 { Ok(()) } else { Err(error) }
    }
}

/// Whether this kernel also lets such a process make a network namespace of its own and
/// bring its loopback up: tried once per process in a throwaway child.
pub(crate) fn net_namespaces() -> bool {
    *NETWORK.get_or_init(|| all() || child_takes(ReadOnly::new(&[]).with_own_network()))
}

/// Whether this kernel also lets such a process make a PID namespace and fork its init
/// there: tried once per process in a throwaway child.
pub(crate) fn pid_namespaces() -> bool {
    *PROCESSES.get_or_init(|| all() || child_takes(ReadOnly::new(&[]).with_own_processes()))
}

#[cfg(test)]
mod id_map_tests {
    use super::IdMap;

    #[test]
    fn an_id_maps_onto_itself() {
        assert_eq!(IdMap::of(0).bytes(), b"0 0 1\n");
        assert_eq!(IdMap::of(65534).bytes(), b"65534 65534 1\n");
        assert_eq!(IdMap::of(u32::MAX).bytes(), b"4294967295 4294967295 1\n");
    }
}

#[cfg(test)]
mod probe_tests {
    use super::ReadOnly;

    #[test]
    fn the_answers_asked_together_are_those_each_child_gets_alone() {
        let alone = [
            super::child_takes(ReadOnly::new(&[])),
            super::child_takes(ReadOnly::new(&[]).with_own_processes()),
            super::child_takes(ReadOnly::new(&[]).with_own_network()),
        ];
        let together =
            super::child_takes(ReadOnly::new(&[]).with_own_processes().with_own_network());
        assert_eq!(super::all(), together);
        assert_eq!(
            [
                super::available(),
                super::pid_namespaces(),
                super::net_namespaces()
            ],
            alone,
            "asked together first: {together}"
        );
    }
}
