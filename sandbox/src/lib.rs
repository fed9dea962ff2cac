//! Confinement of a process tree to what a [`Policy`] allows, with Landlock.
//!
//! A policy says which hierarchies the process may write, which paths it must not
//! write even there, and which it must not read at all; everything else is readable
//! and executable. The rules are built in the parent ([`Confinement::prepare`]) and
//! applied in the child between fork and exec ([`Confinement::install`]), so they hold
//! for the program and everything it starts, and cannot be lifted.
//!
//! Where the kernel has no Landlock the confinement is empty and its [`Level`] says so;
//! a caller that requires confinement checks the level before starting anything.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use landlock::ABI;
use landlock::Access;
use landlock::AccessFs;
use landlock::CompatLevel;
use landlock::Compatible;
use landlock::LandlockStatus;
use landlock::PathBeneath;
use landlock::PathFd;
use landlock::Ruleset;
use landlock::RulesetAttr;
use landlock::RulesetCreated;
use landlock::RulesetCreatedAttr;
use landlock::Scope;
use serde::Deserialize;
use serde::Serialize;

mod cover;
mod denial;
mod limits;
mod mounts;

pub use limits::Limits;

/// The newest Landlock ABI whose rights a policy uses: filesystem rights up to
/// truncation and device ioctls, and the signal and abstract-socket scopes (ABI 6).
const WANTED: ABI = ABI::V6;

/// Credential files no confined process may read, relative to the home directory: git's
/// and gh's tokens, SSH and GnuPG keys, `.netrc`, cloud and registry credentials.
pub const CREDENTIALS: &[&str] = &[
    ".git-credentials",
    ".config/git/credentials",
    ".config/gh",
    ".ssh",
    ".netrc",
    ".gnupg",
    ".aws",
    ".docker/config.json",
];

/// Devices every confined process may write but not create or remove.
pub const DEVICES: &[&str] = &["/dev/null", "/dev/tty", "/dev/zero", "/dev/full"];

/// What a confined process may touch. Paths should be absolute.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Hierarchies the process may write: create, remove, rename and write files.
    pub write: Vec<PathBuf>,
    /// Paths under `write` that stay read-only (a work tree's `.git`). Where the kernel
    /// allows unprivileged user namespaces they are mounted read-only in the process's
    /// own mount namespace, and the hierarchy around them stays writable whole; else
    /// they are left out of the grants, and so is the directory holding them.
    #[serde(default)]
    pub deny_write: Vec<PathBuf>,
    /// Paths whose contents cannot be read (credentials, the ledger); their names stay
    /// listable. They stay unwritable too, but for what `write` names inside them.
    #[serde(default)]
    pub deny_read: Vec<PathBuf>,
    /// Files the process may write but not create or remove (`/dev/null`, a terminal).
    #[serde(default)]
    pub write_files: Vec<PathBuf>,
    /// Act as on a kernel without Landlock: nothing is enforced and the level is
    /// `none`. The path such a machine takes, for tests and for comparison.
    #[serde(default)]
    pub without_landlock: bool,
    /// Run the program as the init of a PID namespace of its own, where the kernel
    /// allows unprivileged user namespaces: when it ends, everything it started ends
    /// with it, whatever session or process group it moved to. Elsewhere it runs as
    /// before. The program sees itself as pid 1.
    #[serde(default)]
    pub own_processes: bool,
    /// With `own_processes`, also a network namespace of the program's own, holding only
    /// a loopback interface: it reaches no other host and no port of this one outside
    /// the namespace, and what it listens on goes when it ends. Where the kernel refuses
    /// network namespaces it keeps the host's network.
    #[serde(default)]
    pub own_network: bool,
    /// Bounds on processes, memory and the private `TMPDIR`: see [`Limits`].
    #[serde(default)]
    pub limits: Limits,
    /// A directory (under `write`) the program gets as a fresh memory file system of
    /// its own, of at most `limits.tmp` bytes, where the kernel allows unprivileged user
    /// namespaces: its `TMPDIR`, bounded, seen by no other process, gone when it ends.
    /// Elsewhere it stays the directory on disk. [`Confinement::with_private_tmp`] sets
    /// one per run.
    #[serde(default)]
    pub private_tmp: Option<PathBuf>,
}

/// How confined a process actually is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "level", rename_all = "snake_case")]
pub enum Level {
    /// Every rule of the policy is enforced (Landlock ABI `abi`).
    Full {
        /// The kernel's Landlock ABI version.
        abi: u32,
    },
    /// Landlock is there but older than the policy wants: the filesystem rules of
    /// `abi` are enforced, and `missing` names what is not.
    Partial {
        /// The kernel's Landlock ABI version.
        abi: u32,
        /// What this ABI cannot enforce.
        missing: String,
    },
    /// Not confined: the kernel has no Landlock, or it is off.
    None {
        /// Why.
        reason: String,
    },
    /// Not confined because the configuration turned confinement off.
    Disabled,
}

impl Level {
    /// The short name recorded and shown: `landlock-v7`, `landlock-v3-partial`,
    /// `none`, `disabled`.
    pub fn label(&self) -> String {
        match self {
            Level::Full { abi } => format!("landlock-v{abi}"),
            Level::Partial { abi, .. } => format!("landlock-v{abi}-partial"),
            Level::None { .. } => "none".to_string(),
            Level::Disabled => "disabled".to_string(),
        }
    }

    /// Whether the filesystem rules hold.
    pub fn confines(&self) -> bool {
        matches!(self, Level::Full { .. } | Level::Partial { .. })
    }
}

/// Which namespaces of its own this kernel lets an unprivileged runner have (each tried
/// once per process in a throwaway child): what [`Policy::own_processes`] and
/// [`Policy::own_network`] get here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Namespaces {
    /// A user and mount namespace (read-only mounts).
    pub mounts: bool,
    /// A PID and an IPC namespace: nothing a runner starts outlives it.
    pub processes: bool,
    /// A network namespace with loopback only.
    pub network: bool,
}

/// The namespaces this kernel offers a runner.
pub fn namespaces() -> Namespaces {
    let mounts = mounts::available();
    Namespaces {
        mounts,
        processes: mounts && mounts::pid_namespaces(),
        network: mounts && mounts::net_namespaces(),
    }
}

/// Tries the namespaces [`namespaces`] asks about and returns when all three are known:
/// first all together in one child, and only where the kernel refuses that, each in its
/// own thread at once. A caller that starts it on a thread of its own before its first
/// confined spawn spares that spawn the probes' time. Each probe is still made once per
/// process; a later call costs nothing.
pub fn probe_namespaces() {
    if mounts::all() {
        return;
    }
    std::thread::scope(|scope| {
        for probe in [
            mounts::available,
            mounts::pid_namespaces,
            mounts::net_namespaces,
        ] {
            // Where no thread can be made, the probe is made here.
            if std::thread::Builder::new()
                .spawn_scoped(scope, probe)
                .is_err()
            {
                probe();
            }
        }
    });
}

/// What this kernel offers, as the level a policy would get here.
pub fn probe() -> Level {
    if std::env::var_os(NO_LANDLOCK_VAR).is_some() {
        return Level::None {
            reason: format!("{NO_LANDLOCK_VAR} is set"),
        };
    }
    match kernel_status() {
        LandlockStatus::Available { effective_abi, .. } => {
            let abi = effective_abi as u32;
            if abi >= WANTED as u32 {
                Level::Full { abi }
            } else {
                Level::Partial {
                    abi,
                    missing: missing_below(abi),
                }
            }
        }
        LandlockStatus::NotEnabled => Level::None {
            reason: "Landlock is built into the kernel but not enabled at boot".into(),
        },
        LandlockStatus::NotImplemented => Level::None {
            reason: "the kernel has no Landlock".into(),
        },
    }
}

/// The kernel's Landlock status, read once per process.
///
/// Landlock restricts only the thread that asks, so a throwaway thread restricts
/// itself with an empty ruleset and reports what the kernel said.
fn kernel_status() -> LandlockStatus {
    static STATUS: std::sync::OnceLock<LandlockStatus> = std::sync::OnceLock::new();
    *STATUS.get_or_init(|| {
        let asked = std::thread::spawn(|| {
            Ruleset::default()
                .set_compatibility(CompatLevel::BestEffort)
                .handle_access(AccessFs::from_all(WANTED))
                .and_then(Ruleset::create)
                .and_then(RulesetCreated::restrict_self)
                .map(|status| status.landlock)
        });
        match asked.join() {
            Ok(Ok(status)) => status,
            _ => LandlockStatus::NotImplemented,
        }
    })
}

/// Set in the environment, [`probe`] reports no Landlock whatever the kernel has, and a
/// caller building policies sets [`Policy::without_landlock`]: the path a machine
/// without it takes, for tests and for comparison.
pub const NO_LANDLOCK_VAR: &str = "TDD_SANDBOX_NO_LANDLOCK";

fn missing_below(abi: u32) -> String {
    let mut missing = Vec::new();
    if abi < 2 {
        missing.push("renames and links across directories stay allowed (ABI 2)");
    }
    if abi < 3 {
        missing.push("truncating files stays allowed (ABI 3)");
    }
    if abi < 5 {
        missing.push("device ioctls stay allowed (ABI 5)");
    }
    if abi < 6 {
        missing.push("signals to processes outside the sandbox stay allowed (ABI 6)");
    }
    missing.join("; ")
}

/// Why a policy could not be turned into rules.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The kernel refused the ruleset or a rule.
    #[error("failed to build the Landlock rules: {0}")]
    Rules(#[from] landlock::RulesetError),
    /// The rules could not be copied for another child.
    #[error("failed to copy the Landlock rules: {0}")]
    Clone(String),
}

/// A policy's rules, ready to apply to a child process.
pub struct Confinement {
    ruleset: Option<RulesetCreated>,
    mounts: Option<mounts::ReadOnly>,
    limits: Limits,
    level: Level,
}

impl std::fmt::Debug for Confinement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Confinement")
            .field("level", &self.level)
            .finish_non_exhaustive()
    }
}

impl Confinement {
    /// No confinement, for a configuration that turned it off.
    pub fn disabled() -> Confinement {
        Confinement {
            ruleset: None,
            mounts: None,
            limits: Limits::default(),
            level: Level::Disabled,
        }
    }

    /// Builds the rules of `policy` for this kernel. Paths that do not exist are
    /// skipped: nothing there to grant.
    pub fn prepare(policy: &Policy) -> Result<Confinement, SandboxError> {
        let level = if policy.without_landlock {
            Level::None {
                reason: "the policy asks to act as without Landlock".into(),
            }
        } else {
            probe()
        };
        let abi = match &level {
            Level::Full { abi } | Level::Partial { abi, .. } => ABI::from(*abi as i32),
            Level::None { .. } | Level::Disabled => {
                return Ok(Confinement {
                    ruleset: None,
                    mounts: None,
                    limits: policy.limits,
                    level,
                });
            }
        };
        let read = AccessFs::from_read(abi);
        let all = AccessFs::from_all(abi);
        let file_write = AccessFs::from_file(abi);
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(all)?;
        if abi as u32 >= 6 {
            ruleset = ruleset.scope(Scope::Signal | Scope::AbstractUnixSocket)?;
        }
        let mut created = ruleset.create()?;
        let unreadable = policy.deny_read.clone();
        // What runners read is added first: it is most of the rules, and needs no
        // answer from the namespace probes, which the mounts below may wait for.
        for path in cover::cover(&[PathBuf::from("/")], &unreadable) {
            created = add(created, &path, read)?;
        }
        // Every directory can be listed, those on the way to a hole included (the home
        // directory, say): names stay visible, the contents of a hole do not.
        created = add(created, std::path::Path::new("/"), AccessFs::ReadDir.into())?;
        // Read-only mounts keep `deny_write` read-only without holes in the grants; a
        // PID namespace of its own keeps what the program starts from outliving it.
        let mounts = ((!policy.deny_write.is_empty()
            || policy.own_processes
            || policy.private_tmp.is_some())
            && mounts::available())
        .then(|| {
            let ro = mounts::ReadOnly::new(&policy.deny_write).with_limits(policy.limits);
            let ro = match &policy.private_tmp {
                Some(dir) => ro.with_private_tmp(dir),
                None => ro,
            };
            let ro = if policy.own_processes && mounts::pid_namespaces() {
                ro.with_own_processes()
            } else {
                ro
            };
            if policy.own_processes && policy.own_network && mounts::net_namespaces() {
                ro.with_own_network()
            } else {
                ro
            }
        })
        .filter(|m| !m.is_empty());

        let mut unwritable = if mounts.is_some() {
            Vec::new()
        } else {
            policy.deny_write.clone()
        };
        unwritable.extend(policy.deny_read.iter().cloned());
        for root in &policy.write {
            // A hole that holds the root does not apply to it: a write grant names a
            // place inside an unreadable one on purpose (a leaf's own files).
            let resolved = |p: &PathBuf| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
            let holes: Vec<PathBuf> = unwritable
                .iter()
                .filter(|hole| !resolved(root).starts_with(resolved(hole)))
                .cloned()
                .collect();
            for path in cover::cover(std::slice::from_ref(root), &holes) {
                created = add(created, &path, all)?;
            }
        }
        for path in &policy.write_files {
            created = add(created, path, file_write & !AccessFs::Execute)?;
        }
        Ok(Confinement {
            ruleset: Some(created),
            mounts,
            limits: policy.limits,
            level,
        })
    }

    /// The same rules again, for another child: building them once and cloning is
    /// cheaper than building them per process.
    pub fn try_clone(&self) -> std::io::Result<Confinement> {
        Ok(Confinement {
            ruleset: self
                .ruleset
                .as_ref()
                .map(RulesetCreated::try_clone)
                .transpose()?,
            mounts: self.mounts.clone(),
            limits: self.limits,
            level: self.level.clone(),
        })
    }

    /// The same rules, with `dir` (which the rules let the program write) as a fresh
    /// memory file system of the program's own of at most the limits' `tmp` bytes, as
    /// [`Policy::private_tmp`] makes it: for runs that each get a `TMPDIR` of their own.
    /// Where the kernel refuses unprivileged user namespaces `dir` stays on disk.
    pub fn with_private_tmp(mut self, dir: &std::path::Path) -> Confinement {
        if self.ruleset.is_some() && mounts::available() {
            let mounts = self
                .mounts
                .take()
                .unwrap_or_else(|| mounts::ReadOnly::new(&[]).with_limits(self.limits));
            self.mounts = Some(mounts.with_private_tmp(dir)).filter(|m| !m.is_empty());
        }
        self
    }

    /// The same rules plus a write grant on `dir`, which must lie in no hole of the
    /// policy (an unreadable or read-only path): cheaper than preparing the whole
    /// policy again when runs differ only in a directory of their own.
    pub fn try_clone_writing(&self, dir: &std::path::Path) -> Result<Confinement, SandboxError> {
        let mut clone = self
            .try_clone()
            .map_err(|e| SandboxError::Clone(e.to_string()))?;
        if let Some(ruleset) = clone.ruleset.take() {
            clone.ruleset = Some(add(ruleset, dir, AccessFs::from_all(clone.abi()))?);
        }
        Ok(clone)
    }

    /// The Landlock ABI the rules were made for (V1 when there are none).
    fn abi(&self) -> ABI {
        match &self.level {
            Level::Full { abi } | Level::Partial { abi, .. } => ABI::from(*abi as i32),
            Level::None { .. } | Level::Disabled => ABI::V1,
        }
    }

    /// The level the child gets.
    pub fn level(&self) -> &Level {
        &self.level
    }

    /// Makes `command` apply the rules in its child before exec. A child that cannot
    /// apply them does not run: the spawn fails with the error.
    ///
    /// Confined or not, the program dies with the thread of tdd that started it
    /// ([`die_with_spawner`]).
    pub fn install(self, command: &mut Command) {
        if self.ruleset.is_none() && self.limits == Limits::default() {
            die_with_spawner(command);
            return;
        }
        let every_access = AccessFs::from_all(self.abi());
        let mounts = self.mounts;
        let limits = self.limits;
        let mut ruleset = self.ruleset;
        let spawner = nix::unistd::getpid();
        let apply = move || -> std::io::Result<()> {
            // Nothing the spawner inherited reaches the program (`close_range`).
            mounts::close_on_exec_from(3);
            limits::apply_memory(&limits)?;
            // The mounts first: once Landlock holds, no mount can change.
            let shm_mounted = match &mounts {
                Some(mounts) => mounts.apply()?,
                None => false,
            };
            if let Some(mut ruleset) = ruleset.take() {
                // A private shared-memory directory is granted on the root of its new
                // mount: Landlock passes over a directory a mount hides, so a rule on
                // it made before the mount would not reach what is written there. An
                // open of a short prepared path and one landlock_add_rule, no allocation
                // on success.
                if let Some(shm) = mounts
                    .as_ref()
                    .and_then(|m| m.private_shared_memory())
                    .filter(|_| shm_mounted)
                {
                    let fd = nix::fcntl::open(
                        shm,
                        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_CLOEXEC,
                        nix::sys::stat::Mode::empty(),
                    )?;
                    ruleset = ruleset
                        .add_rule(PathBeneath::new(fd, every_access))
                        .map_err(|_| std::io::Error::from_raw_os_error(libc_eperm()))?;
                }
                // `restrict_self` makes two system calls (prctl and
                // landlock_restrict_self) and allocates nothing on success.
                ruleset
                    .restrict_self()
                    .map_err(|_| std::io::Error::from_raw_os_error(libc_eperm()))?;
            }
            // The program dies with the thread of tdd that started it, whatever ends
            // that (a kill of tdd included): set last, after every change of this
            // process's credentials, which would clear it. A spawner already gone
            // leaves this process to init: it must not run.
            die_with(spawner)?;
            // Last, the PID namespace's init is forked: it inherits all of the above.
            if let Some(mounts) = &mounts {
                mounts.enter()?;
            }
            Ok(())
        };
        #[expect(
            unsafe_code,
            reason = "the confinement is applied between fork and exec, where only system \
                      calls on prepared data are allowed"
        )]
        // SAFETY: `apply` marks descriptors close-on-exec (close_range or fcntl), sets
        // the memory rlimit (setrlimit), then `ReadOnly::apply`
        // (unshare, prctl, writes of id maps built on the stack to /proc/self, setrlimit,
        // the loopback ioctls, mount on paths made before the fork), then
        // `restrict_self` (prctl and landlock_restrict_self on a ruleset made before the
        // fork), then prctl and getppid, then `ReadOnly::enter` (fork, prctl, waitpid,
        // close, _exit). Only system calls: no allocation (paths under PATH_MAX are made
        // C strings on the stack), no lock, no thread-local state. `EPERM` and `ESRCH`
        // are built from constants.
        unsafe {
            pre_exec(command, apply);
        }
    }
}

/// Makes the program `command` starts die (SIGKILL) when the thread that starts it
/// ends, whatever ends it: a kill of tdd included, so no runner is left running
/// unconfined when tdd is gone. A spawner already gone when the child would exec
/// leaves it to init: it does not run, and the spawn fails (`ESRCH`). What the program
/// itself starts is not covered: only a confined runner's own PID namespace ends
/// those with it.
pub fn die_with_spawner(command: &mut Command) {
    let spawner = nix::unistd::getpid();
    let apply = move || die_with(spawner);
    #[expect(
        unsafe_code,
        reason = "the death signal is set between fork and exec, where only system calls \
                  are allowed"
    )]
    // SAFETY: `apply` makes two system calls (prctl and getppid) and builds `ESRCH`
    // from a constant: no allocation, no lock, no thread-local state.
    unsafe {
        pre_exec(command, apply);
    }
}

/// In a child between fork and exec: SIGKILL when the thread that forked it ends, and
/// `ESRCH` when its parent is already not `spawner` (it was left to init). Two system
/// calls (prctl and getppid), no allocation.
fn die_with(spawner: nix::unistd::Pid) -> std::io::Result<()> {
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)?;
    if nix::unistd::getppid() != spawner {
        return Err(std::io::Error::from_raw_os_error(libc_esrch()));
    }
    Ok(())
}

/// `EPERM`, for a child that could not confine itself.
const fn libc_eperm() -> i32 {
    1
}

/// `ESRCH`, for a child whose spawner is gone.
const fn libc_esrch() -> i32 {
    3
}

/// Makes `command` run `apply` in its child, after fork and before exec; a child whose
/// `apply` fails does not run, and the spawn fails with the error.
///
/// # Safety
///
/// `apply` runs in a copy of a process that may have had many threads, of which only
/// the forking one goes on: a lock another thread held stays held forever. So after
/// fork, on every path that can be taken before exec, `apply` must:
/// - not allocate or free (the allocator's lock),
/// - take no lock (no `std::sync`, no stdio, no `println!`),
/// - touch no thread-local state and no lazily initialised static,
///
/// and make only async-signal-safe system calls on data prepared before the fork.
#[expect(
    unsafe_code,
    reason = "a wrapper of `CommandExt::pre_exec` that hands its contract on to the caller"
)]
unsafe fn pre_exec(
    command: &mut Command,
    apply: impl FnMut() -> std::io::Result<()> + Send + Sync + 'static,
) {
    // SAFETY: the caller upholds the contract above for `apply`.
    unsafe {
        command.pre_exec(apply);
    }
}

/// Adds a rule granting `access` beneath `path`, skipping a path that is gone. A file
/// gets only the rights that apply to files.
fn add(
    created: RulesetCreated,
    path: &std::path::Path,
    access: landlock::BitFlags<AccessFs>,
) -> Result<RulesetCreated, SandboxError> {
    let Ok(fd) = PathFd::new(path) else {
        return Ok(created);
    };
    let is_dir = std::fs::metadata(path).is_ok_and(|m| m.is_dir());
    let access = if is_dir {
        access
    } else {
        access & AccessFs::from_file(ABI::V6)
    };
    Ok(created.add_rule(PathBeneath::new(fd, access))?)
}

#[cfg(test)]
mod tests;
