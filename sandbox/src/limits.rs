//! Resource bounds of a confined program and everything it starts: how many processes
//! it may have, how much memory each may take, and how much its private `TMPDIR` may
//! hold. Set between fork and exec like the rest of a confinement, so the program
//! cannot raise them (a hard limit only goes down).

use serde::Deserialize;
use serde::Serialize;

/// Bounds on what a confined program may use. `None` leaves that resource unbounded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// At most this many processes and threads at once, counted in the user namespace
    /// of the program's own (`RLIMIT_NPROC` counts per user namespace): enforced only
    /// where the program gets one (a PID namespace or read-only mounts), since outside
    /// one the count would take in every process of the user. The kernel exempts the
    /// root user.
    #[serde(default)]
    pub processes: Option<u64>,
    /// At most this many bytes of data memory (heap and private writable mappings,
    /// `RLIMIT_DATA`) in each process: an allocation past it fails in that process.
    #[serde(default)]
    pub memory: Option<u64>,
    /// At most this many bytes in the private `TMPDIR` ([`crate::Policy::private_tmp`]),
    /// which is then a memory file system of the program's own: a write past it fails
    /// with "no space left on device".
    #[serde(default)]
    pub tmp: Option<u64>,
}

/// Sets the memory bound: runs between fork and exec, one system call.
pub(crate) fn apply_memory(limits: &Limits) -> std::io::Result<()> {
    if let Some(bytes) = limits.memory {
        set(nix::sys::resource::Resource::RLIMIT_DATA, bytes)?;
    }
    Ok(())
}

/// Sets the process bound: runs between fork and exec, in a user namespace of the
/// program's own, one system call.
pub(crate) fn apply_processes(limits: &Limits) -> std::io::Result<()> {
    if let Some(count) = limits.processes {
        set(nix::sys::resource::Resource::RLIMIT_NPROC, count)?;
    }
    Ok(())
}

/// Lowers both the soft and the hard limit of `resource` to `value`, never raising
/// either.
fn set(resource: nix::sys::resource::Resource, value: u64) -> std::io::Result<()> {
    let (soft, hard) = nix::sys::resource::getrlimit(resource)?;
    let hard = hard.min(value);
    nix::sys::resource::setrlimit(resource, soft.min(hard), hard)?;
    Ok(())
}

/// The options of the private `TMPDIR`'s memory file system: only its owner may enter
/// it, nothing on it is a device or set-uid, and it holds at most `bytes` when bounded.
pub(crate) fn tmpfs_options(bytes: Option<u64>) -> String {
    match bytes {
        Some(bytes) => format!("size={bytes},mode=0700"),
        None => "mode=0700".to_string(),
    }
}
