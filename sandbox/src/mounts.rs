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
    uid_map: String,
    gid_map: String,
}

impl ReadOnly {
    /// Read-only mounts of `paths` (those that exist) for a child of this process.
    pub(crate) fn new(paths: &[PathBuf]) -> ReadOnly {
        let uid = nix::unistd::getuid();
        let gid = nix::unistd::getgid();
        ReadOnly {
            paths: paths.iter().filter(|p| p.exists()).cloned().collect(),
            uid_map: format!("{uid} {uid} 1\n"),
            gid_map: format!("{gid} {gid} 1\n"),
        }
    }

    /// Whether there is anything to mount.
    pub(crate) fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// Runs in the child between fork and exec: only system calls, on strings made
    /// before the fork.
    pub(crate) fn apply(&self) -> std::io::Result<()> {
        nix::sched::unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS)?;
        write("/proc/self/setgroups", "deny")?;
        write("/proc/self/uid_map", &self.uid_map)?;
        write("/proc/self/gid_map", &self.gid_map)?;
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
        Ok(())
    }
}

fn write(path: &str, text: &str) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)?
        .write_all(text.as_bytes())
}

/// Whether this kernel lets an unprivileged process make its own user and mount
/// namespace here: tried once per process in a throwaway child.
pub(crate) fn available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        let probe = ReadOnly::new(&[]);
        let mut command = Command::new("/bin/true");
        crate::pre_exec(&mut command, move || probe.apply());
        command.status().is_ok_and(|s| s.success())
    })
}
