//! The environment a deciding run sees: an allow-list captured once, runners pinned.
//!
//! A gate must not depend on who calls `tdd advance`. The caller's environment is
//! the agent's to shape (a fake `python3` first on `PATH`, `PYTHONPATH`,
//! `PYTEST_ADDOPTS`, `NODE_OPTIONS`, `RUSTFLAGS`, `GOFLAGS`, ...), so a deciding run
//! gets only the variables of [`ALLOWED`], as they were when the run started, plus
//! the project's own `env` from `tdd.toml` (which is itself locked). The programs a
//! runner starts through (`python3`, `node`, `cargo`, ...) are resolved through that
//! captured `PATH` at run start and pinned by path and content hash; before each
//! deciding run the resolution is repeated, and a different file or different bytes
//! refuse the run instead of running it. What those programs load from outside the
//! commit (an interpreter's library and site-packages, the user site, the real
//! executable behind a shim, the project's dependency directories) is fingerprinted at
//! run start and checked the same way ([`InstallPin`]).

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::path::PathBuf;

use serde::Deserialize;
use serde::Serialize;
use sha2::Digest;

use crate::config::AdapterKind;

mod chain;
mod install;
mod python;
mod toolchain;
mod watch;

pub use chain::ChainEntry;
pub use install::InstallPin;
pub use install::Share;
pub use toolchain::ToolchainInstall;
pub use toolchain::Unanswered;
pub use watch::InstallWatch;

/// Variables a deciding run inherits from the environment captured at run start.
///
/// Locale, identity, home and the toolchains' own homes: what a runner needs to start
/// and find its caches, nothing that changes what a test does.
pub const ALLOWED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "LC_NUMERIC",
    "LC_TIME",
    "TZ",
    "TMPDIR",
    "TERM",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "GOROOT",
    "GOPATH",
    "GOCACHE",
    "GOMODCACHE",
    "GOPROXY",
    "GONOSUMDB",
    "GOTOOLCHAIN",
    "GIT_CONFIG_NOSYSTEM",
];

/// What a project's dependency directory (`node_modules`, `.venv`, `venv` of the live
/// tree) is called among the pins.
pub const DEPENDENCY_DIRECTORY: &str = "a dependency directory of the live tree";
/// What a cargo dependency's sources outside the work tree are called among the pins.
pub const CARGO_DEPENDENCY: &str = "the source of a cargo dependency";
/// What a Go module's sources outside the work tree are called among the pins.
pub const GO_MODULE: &str = "the source of a Go module";

/// The environment and runner pins recorded when a run started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinnedEnv {
    /// The allow-listed variables, as they were.
    pub vars: BTreeMap<String, String>,
    /// The programs the run's runners start through, resolved on the captured `PATH`.
    pub runners: Vec<RunnerPin>,
    /// Entries of the caller's `PATH` left out of the captured one: empty and relative
    /// entries, which a runner would resolve against whatever directory it starts in
    /// (a committed `bin/python3` in the checkout judged).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped_path: Vec<String>,
    /// The checkout whose configuration chain is pinned: see
    /// [`PinnedEnv::with_config_chain`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain_root: Option<PathBuf>,
    /// The configuration files found above `chain_root` at run start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chain: Vec<ChainEntry>,
    /// What the runners load from outside the commit (an interpreter's library and
    /// site-packages, the project's dependency directories), fingerprinted at run
    /// start: see [`PinnedEnv::with_installations`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub installs: Vec<InstallPin>,
    /// Runner names a deciding run starts by the executable they led to at run start
    /// (`python3` → the interpreter behind a version-manager shim, or a virtual
    /// environment's own link), never through `PATH` again.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub interpreters: BTreeMap<String, PathBuf>,
}

/// Where a pinned Python loads from, as it said at run start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PythonInstall {
    /// The runner name it was started by (`python3`).
    pub name: String,
    /// The executable as the interpreter knows itself, with no shim between.
    pub executable: PathBuf,
    /// What to fingerprint, each with what it is in words: the executable and its
    /// virtual environment's `pyvenv.cfg`, then the standard library, site-packages and
    /// the user site, then the shared libraries it maps.
    pub roots: Vec<(PathBuf, String)>,
    /// The directories its start searches that a file planted in would change what it
    /// loads (its executable's directory and the one above, for a `pyvenv.cfg`; its
    /// prefix's `lib`, for a zip of its library or a shared library; the nearest
    /// existing directory above an entry of its module path that does not exist), each
    /// with what it is in words: fingerprinted themselves, not what is below them
    /// ([`InstallPin::take_shallow`]). Only those this user can write: no other can be
    /// planted in by the code tdd runs.
    pub searched: Vec<(PathBuf, String)>,
    /// Variables deciding runs start it with: `PYTHONNOUSERSITE=1` where it would add a
    /// user site that did not exist at `run start`, so none made later is loaded.
    pub vars: Vec<(String, String)>,
    /// In a virtual environment made without them, the base interpreter's site
    /// directories: below its standard library, but on no module path, so nothing is
    /// imported from them by name ([`PinnedEnv::with_installations_caching`] leaves
    /// them out of the library's fingerprint unless a root names them).
    pub unsearched: Vec<PathBuf>,
    /// The relative `pythonpath` entries of pytest's configuration files in the
    /// directory asked in, each as (where it leads from there, the file, the entry).
    pub relative: Vec<(PathBuf, String, String)>,
}

/// The directories the start of the interpreter that said `loads` searches
/// ([`PythonInstall::searched`]), those this user can write, each once.
fn python_searched(loads: &python::Loads, name: &str) -> Vec<(PathBuf, String)> {
    let real = std::fs::canonicalize(&loads.executable).ok();
    let mut dirs: Vec<PathBuf> = Vec::new();
    for exe in std::iter::once(&loads.executable).chain(real.as_ref()) {
        if let Some(bin) = exe.parent() {
            dirs.push(bin.to_path_buf());
            dirs.extend(bin.parent().map(Path::to_path_buf));
        }
    }
    dirs.extend(loads.prefix.iter().map(|prefix| prefix.join("lib")));
    // Where an entry that is not there would be: the nearest directory above it that is.
    for absent in &loads.absent {
        dirs.extend(
            absent
                .ancestors()
                .skip(1)
                .find(|dir| dir.is_dir())
                .map(Path::to_path_buf),
        );
    }
    let writable = |dir: &Path| {
        nix::unistd::access(dir, nix::unistd::AccessFlags::W_OK).is_ok()
            && std::fs::symlink_metadata(dir).is_ok_and(|meta| meta.is_dir())
    };
    let mut searched: Vec<(PathBuf, String)> = Vec::new();
    for dir in dirs {
        if writable(&dir) && !searched.iter().any(|(d, _)| *d == dir) {
            searched.push((dir, format!("a directory {name} searches as it starts")));
        }
    }
    searched
}

/// How many rounds of links leading out are followed: a link met in what one leads to
/// is followed too, this many deep.
const LINK_ROUNDS: usize = 4;

/// The pins of `taken`, and a pin of what each link met below them leads to where that
/// is covered by no pin (outside every root, or in an entry a root leaves out) and lies
/// below none of `never`: those are loaded as much as the roots are.
fn pinned_with_links(taken: Vec<(InstallPin, Vec<PathBuf>)>, never: &[PathBuf]) -> Vec<InstallPin> {
    let never: Vec<PathBuf> = never
        .iter()
        .map(|dir| std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone()))
        .collect();
    let mut pins = Vec::new();
    // Each pin with its root as the kernel resolves it, resolved once.
    let mut reals: Vec<Option<PathBuf>> = Vec::new();
    let mut links: Vec<(PathBuf, PathBuf)> = Vec::new();
    for (pin, met) in taken {
        links.extend(met.into_iter().map(|link| (link, pin.root.clone())));
        reals.push(std::fs::canonicalize(&pin.root).ok());
        pins.push(pin);
    }
    for _ in 0..LINK_ROUNDS {
        if links.is_empty() {
            break;
        }
        let mut targets: Vec<(PathBuf, PathBuf)> = std::mem::take(&mut links)
            .into_iter()
            .filter_map(|(link, from)| std::fs::canonicalize(&link).ok().map(|t| (t, from)))
            .filter(|(target, _)| !never.iter().any(|n| target.starts_with(n)))
            .collect();
        targets.sort();
        targets.dedup_by(|a, b| a.0 == b.0);
        for (target, from) in targets {
            let covered = pins
                .iter()
                .zip(&reals)
                .any(|(pin, real)| real.as_deref().is_some_and(|r| pin.covers(r, &target)));
            // A file or a directory: a link to a device (`/dev/null`) or into a kernel's
            // file system (`/proc`) leads to nothing a file could be planted in.
            let plantable = || {
                std::fs::metadata(&target).is_ok_and(|m| m.is_file() || m.is_dir())
                    && !install::on_kernel_file_system(&target)
            };
            if covered || !plantable() {
                continue;
            }
            let what = format!("what a link in {} leads to", from.display());
            if let Some((pin, met)) = InstallPin::take_noting_links(&target, &what, Vec::new()) {
                links.extend(met.into_iter().map(|link| (link, target.clone())));
                reals.push(Some(target.clone()));
                pins.push(pin);
            }
        }
    }
    pins
}

/// What the JavaScript runners write into `node_modules` as they run (Vitest's results
/// cache under `.vite`, tools' caches under `.cache`): left out of its fingerprint, or
/// the project's own runs in the live tree would refuse the next deciding run.
const RUNNER_CACHES: &[&str] = &[".vite", ".cache"];

/// One program resolved through `PATH` at run start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunnerPin {
    /// The name as an argv starts it (`python3`).
    pub name: String,
    /// The file `PATH` resolved it to, symlinks followed.
    pub path: PathBuf,
    /// SHA-256 of the file's bytes.
    pub sha256: String,
    /// Device, inode, size, mtime and ctime (ns) of the file when it was hashed: equal
    /// stat data means unchanged bytes, so a check need not rehash.
    pub stat: [i64; 5],
}

/// A pinned runner that is no longer the one the run started with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{name}` was {was} at run start and is now {now}")]
pub struct RunnerChanged {
    /// The program name.
    pub name: String,
    /// What it was.
    pub was: String,
    /// What it is now.
    pub now: String,
}

/// `path` with only its absolute entries, and the entries left out (empty ones as
/// `""`), in order: an empty or relative entry names a different directory for every
/// directory a runner starts in, so nothing found through it could be pinned.
fn absolute_path(path: &str) -> (String, Vec<String>) {
    let (kept, dropped): (Vec<&str>, Vec<&str>) =
        path.split(':').partition(|entry| entry.starts_with('/'));
    let dropped = if path.is_empty() { Vec::new() } else { dropped };
    (
        kept.join(":"),
        dropped.into_iter().map(str::to_string).collect(),
    )
}

/// The programs an adapter's runs may start through.
pub fn runner_programs(adapter: AdapterKind) -> &'static [&'static str] {
    match adapter {
        AdapterKind::Pytest => &["python3", "python", "uv", "poetry", "pdm", "sh"],
        AdapterKind::Vitest | AdapterKind::Jest | AdapterKind::Mocha | AdapterKind::NodeTest => {
            &["node", "npx", "npm", "sh"]
        }
        // The C compilers cgo starts, and the linker rustc starts (`cc`): a program of
        // the same name planted earlier on PATH would compile or link the tests.
        AdapterKind::Go => &["go", "gcc", "cc", "sh"],
        AdapterKind::Cargo => &["cargo", "cargo-nextest", "rustc", "cc", "sh"],
        AdapterKind::Junit => &["sh"],
    }
}

impl PinnedEnv {
    /// Captures the allow-listed variables of this process and pins `programs` on its
    /// `PATH` (names not found are left unpinned: a run that needs one fails to start).
    pub fn capture<'a>(programs: impl IntoIterator<Item = &'a str>) -> PinnedEnv {
        let mut vars: BTreeMap<String, String> = ALLOWED
            .iter()
            .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
            .collect();
        let (path, dropped_path) = absolute_path(vars.get("PATH").map_or("", String::as_str));
        if vars.contains_key("PATH") {
            vars.insert("PATH".to_string(), path.clone());
        }
        let mut names: Vec<&str> = programs.into_iter().collect();
        names.sort_unstable();
        names.dedup();
        let runners = names
            .into_iter()
            .filter_map(|name| {
                let file = resolve(&path, name)?;
                let sha256 = hash_file(&file).ok()?;
                let stat = stat_of(&file)?;
                Some(RunnerPin {
                    name: name.to_string(),
                    path: file,
                    sha256,
                    stat,
                })
            })
            .collect();
        PinnedEnv {
            vars,
            runners,
            dropped_path,
            chain_root: None,
            chain: Vec::new(),
            installs: Vec::new(),
            interpreters: BTreeMap::new(),
        }
    }

    /// The same, with each of `roots` (a path and what it is, in words) fingerprinted:
    /// [`PinnedEnv::verify`] then refuses a deciding run when anything under one of them
    /// appeared, went or changed since. A root inside another is pinned on its own and
    /// left out of the outer one when it is a direct entry of it, and dropped otherwise
    /// (the outer one covers it).
    ///
    /// A link met below a root that leads out of every root (a module in site-packages
    /// that is a link to a file elsewhere) has what it leads to pinned as a root of its
    /// own, and so on for the links met there, but never below `never` (the work tree
    /// and tdd's own state, whose files are judged or rebuilt for each run).
    pub fn with_installations(self, roots: Vec<(PathBuf, String)>) -> PinnedEnv {
        self.with_installations_caching(roots, true, &[], &[])
    }

    /// [`PinnedEnv::with_installations`], leaving the runner caches under a
    /// `node_modules` (`.vite`, `.cache`) out of its fingerprint only when `caching`: a
    /// project with no JavaScript runner writes nothing there, so nothing there is left
    /// unchecked. Each directory of `unsearched` ([`PythonInstall::unsearched`]) that is
    /// a direct entry of a root and no root itself is left out of that root.
    pub fn with_installations_caching(
        mut self,
        roots: Vec<(PathBuf, String)>,
        caching: bool,
        unsearched: &[PathBuf],
        never: &[PathBuf],
    ) -> PinnedEnv {
        let mut roots = roots;
        roots.sort_by(|a, b| a.0.cmp(&b.0));
        roots.dedup_by(|a, b| a.0 == b.0);
        let inside = |inner: &Path, outer: &Path| inner != outer && inner.starts_with(outer);
        let kept: Vec<&(PathBuf, String)> = roots
            .iter()
            .filter(|(root, _)| {
                !roots
                    .iter()
                    .any(|(outer, _)| inside(root, outer) && root.parent() != Some(outer))
            })
            .collect();
        let taken: Vec<(InstallPin, Vec<PathBuf>)> = kept
            .iter()
            .filter_map(|(root, what)| {
                let mut skip: Vec<String> = kept
                    .iter()
                    .filter(|(inner, _)| inner.parent() == Some(root.as_path()))
                    .filter_map(|(inner, _)| inner.file_name())
                    .map(|name| name.to_string_lossy().into_owned())
                    .collect();
                if caching && root.file_name().is_some_and(|n| n == "node_modules") {
                    skip.extend(RUNNER_CACHES.iter().map(|c| (*c).to_string()));
                }
                skip.extend(
                    unsearched
                        .iter()
                        .filter(|dir| dir.parent() == Some(root.as_path()))
                        .filter(|dir| !roots.iter().any(|(other, _)| other == *dir))
                        .filter_map(|dir| dir.file_name())
                        .map(|name| name.to_string_lossy().into_owned()),
                );
                InstallPin::take_noting_links(root, what, skip)
            })
            .collect();
        self.installs = pinned_with_links(taken, never);
        self
    }

    /// Where the pinned `python3` (else `python`) loads from, asked in `cwd` with the
    /// captured environment and `env` on top, as a deciding run starts it: `None` when
    /// no Python is pinned or it fails, [`Unanswered`] when it does not answer in time.
    pub fn python_install(
        &self,
        env: &[(String, String)],
        cwd: &Path,
    ) -> Result<Option<PythonInstall>, Unanswered> {
        let Some(pin) = ["python3", "python"]
            .iter()
            .find_map(|name| self.runners.iter().find(|r| r.name == *name))
        else {
            return Ok(None);
        };
        // Started by name through the captured PATH, as a deciding run would start it: a
        // virtual environment's interpreter is a link whose own path says which
        // environment it is, and a shim leads where it leads now.
        self.ask_python(Path::new(&pin.name), &pin.name, env, cwd)
    }

    /// What the virtual environment `venv` (a directory holding `pyvenv.cfg`, such as
    /// the `.venv` that `uv run` or an in-project `poetry run` starts) loads from outside
    /// itself: the executable of the interpreter it was made from and that interpreter's
    /// library directory, read from `pyvenv.cfg` and the links of `bin/`, nothing of the
    /// environment run (the work tree's files are not run unconfined). Empty when it is
    /// no virtual environment or names nothing that exists.
    pub fn venv_base(venv: &Path) -> Vec<(PathBuf, String)> {
        python::venv_base(venv)
            .into_iter()
            .map(|(path, what)| (path, format!("{what} of {}", venv.display())))
            .collect()
    }

    /// What `program` (started as a deciding run would start it) says it loads from,
    /// each root labelled with `name`.
    fn ask_python(
        &self,
        program: &Path,
        name: &str,
        env: &[(String, String)],
        cwd: &Path,
    ) -> Result<Option<PythonInstall>, Unanswered> {
        let mut vars: Vec<(String, String)> = self
            .vars
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        vars.push(("PYTHONDONTWRITEBYTECODE".into(), "1".into()));
        vars.extend(env.iter().cloned());
        let Some(loads) = python::load_paths(program, &vars, cwd)? else {
            return Ok(None);
        };
        let searched = python_searched(&loads, name);
        let vars = loads
            .absent_user_site
            .iter()
            .map(|_| ("PYTHONNOUSERSITE".to_string(), "1".to_string()))
            .collect();
        // A virtual environment's `pyvenv.cfg` (beside the executable or one directory
        // up) says, at every start, which interpreter's library it loads and whether
        // that interpreter's site-packages are on its path: pinned by its bytes.
        let configs: Vec<PathBuf> = loads
            .executable
            .parent()
            .into_iter()
            .flat_map(|bin| [Some(bin), bin.parent()])
            .flatten()
            .map(|dir| dir.join("pyvenv.cfg"))
            .filter(|cfg| std::fs::symlink_metadata(cfg).is_ok_and(|m| m.is_file()))
            .collect();
        let roots = std::iter::once((loads.executable.clone(), format!("{name}'s interpreter")))
            .chain(
                configs
                    .into_iter()
                    .map(|cfg| (cfg, format!("{name}'s virtual environment configuration"))),
            )
            .chain(
                loads
                    .paths
                    .into_iter()
                    .map(|p| (p, format!("what {name} imports"))),
            )
            .chain(
                loads
                    .objects
                    .into_iter()
                    .map(|p| (p, format!("a library {name} maps"))),
            )
            .collect();
        Ok(Some(PythonInstall {
            name: name.to_string(),
            executable: loads.executable,
            roots,
            searched,
            vars,
            unsearched: loads.unsearched,
            relative: loads.relative,
        }))
    }

    /// What the Go or cargo toolchain a deciding run of `adapter` starts loads from
    /// outside the commit, asked in `cwd` with the captured environment and `env` on
    /// top: the toolchain's installation and the dependencies' sources outside the
    /// work tree ([`ToolchainInstall`]). `None` for the other adapters, and when the
    /// toolchain fails (a run that needs it fails on its own); [`Unanswered`] when it
    /// does not answer in time.
    pub fn toolchain_install(
        &self,
        adapter: AdapterKind,
        env: &[(String, String)],
        cwd: &Path,
    ) -> Result<Option<ToolchainInstall>, Unanswered> {
        let mut vars: Vec<(String, String)> = self
            .vars
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        vars.extend(env.iter().cloned());
        match adapter {
            AdapterKind::Cargo => toolchain::cargo(&vars, cwd),
            AdapterKind::Go => toolchain::go(&vars, cwd),
            _ => Ok(None),
        }
    }

    /// What differs between this pin's dependencies (the dependency directories and
    /// the dependencies' sources, [`InstallPin::is_dependency`]) and `fresh`'s, taken
    /// now: each entry that changed, and each root that is new or no longer there, in
    /// words. Empty when the dependencies are as they were.
    pub fn dependency_changes(&self, fresh: &PinnedEnv) -> Vec<String> {
        let was: Vec<&InstallPin> = self.installs.iter().filter(|p| p.is_dependency()).collect();
        let now: Vec<&InstallPin> = fresh
            .installs
            .iter()
            .filter(|p| p.is_dependency())
            .collect();
        let mut changes = Vec::new();
        for pin in &was {
            if !now.iter().any(|n| n.root == pin.root) {
                changes.push(format!("{}: no longer a dependency", pin.root.display()));
            } else if let Some((path, before, after)) = pin.first_change(Share::EveryCore) {
                changes.push(format!("{}: {before}, now {after}", path.display()));
            }
        }
        for pin in &now {
            if !was.iter().any(|w| w.root == pin.root) {
                changes.push(format!("{}: a new dependency", pin.root.display()));
            }
        }
        changes
    }

    /// The same, with its dependency pins replaced by those among `installs`; every
    /// other pin (runners, interpreters, toolchains, the configuration chain) is kept
    /// as it was, whatever `installs` holds.
    pub fn with_dependencies_of(mut self, installs: &[InstallPin]) -> PinnedEnv {
        self.installs.retain(|p| !p.is_dependency());
        self.installs
            .extend(installs.iter().filter(|p| p.is_dependency()).cloned());
        self
    }

    /// The same, with each directory of `dirs` fingerprinted itself and by the names it
    /// lists, not what is below them ([`InstallPin::take_shallow`]): for the
    /// directories an interpreter searches as it starts. A directory already pinned
    /// this way is not pinned again.
    pub fn with_searched(mut self, dirs: Vec<(PathBuf, String)>) -> PinnedEnv {
        for (dir, what) in dirs {
            let pinned = self.installs.iter().any(|p| p.shallow && p.root == dir);
            if !pinned && let Some(pin) = InstallPin::take_shallow(&dir, &what) {
                self.installs.push(pin);
            }
        }
        self
    }

    /// The same, with `name` set to `value` for every deciding run (a variable the
    /// environment captured is replaced).
    pub fn with_var(mut self, name: &str, value: &str) -> PinnedEnv {
        self.vars.insert(name.to_string(), value.to_string());
        self
    }

    /// The same, with deciding runs that start `name` starting `executable` instead: the
    /// interpreter a shim led to at run start, so that where the shim leads later (a
    /// global version switched) plays no part.
    pub fn with_interpreter(mut self, name: &str, executable: PathBuf) -> PinnedEnv {
        self.interpreters.insert(name.to_string(), executable);
        self
    }

    /// What a deciding run starts for the program `name`: the interpreter pinned for it,
    /// if any ([`PinnedEnv::with_interpreter`]).
    pub fn interpreter(&self, name: &str) -> Option<&Path> {
        self.interpreters.get(name).map(PathBuf::as_path)
    }

    /// The same, with the configuration chain above `tree` pinned (the runner
    /// configuration files in every directory above it, cargo's in the captured
    /// `CARGO_HOME`, else `~/.cargo`, Go's and npm's user configuration in the captured
    /// home): [`PinnedEnv::verify`] then refuses a deciding
    /// run when any of them appeared, went or changed since.
    pub fn with_config_chain(mut self, tree: &Path) -> PinnedEnv {
        self.chain = chain::scan(tree, self.cargo_home().as_deref(), self.home().as_deref());
        self.chain_root = Some(tree.to_path_buf());
        self
    }

    /// The first entry of the pinned configuration chain that a runner could not read
    /// as a file or a directory, itself or where its link leads (a named pipe, a socket,
    /// a device), with what it is in words: a toolchain asked at `run start`, or a
    /// runner, that opens it would wait on a pipe for ever.
    pub fn unreadable_chain_entry(&self) -> Option<(&Path, &'static str)> {
        self.chain.iter().find_map(|entry| {
            let kind = std::fs::metadata(&entry.path).ok()?.file_type();
            (!kind.is_file() && !kind.is_dir())
                .then(|| (entry.path.as_path(), crate::kind_in_words(kind)))
        })
    }

    /// The home a deciding run gets, as the run captured it.
    fn home(&self) -> Option<PathBuf> {
        self.vars
            .get("HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    }

    /// Where cargo reads its home configuration from, as the run captured it.
    fn cargo_home(&self) -> Option<PathBuf> {
        self.vars
            .get("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| self.vars.get("HOME").map(|h| Path::new(h).join(".cargo")))
            .filter(|p| p.is_absolute())
    }

    /// Checks that every pinned program still resolves to the same file with the same
    /// bytes through the captured `PATH`, and that the configuration chain, when
    /// pinned, is as it was.
    pub fn verify(&self) -> Result<(), RunnerChanged> {
        self.verify_runners()?;
        self.verify_installs(Share::EveryCore)
    }

    /// [`PinnedEnv::verify`] of the runners and the configuration chain only: a few
    /// files, checked before a deciding run starts.
    pub fn verify_runners(&self) -> Result<(), RunnerChanged> {
        let path = self.vars.get("PATH").cloned().unwrap_or_default();
        for pin in &self.runners {
            let changed = |now: String| RunnerChanged {
                name: pin.name.clone(),
                was: pin.path.display().to_string(),
                now,
            };
            let Some(file) = resolve(&path, &pin.name) else {
                return Err(changed("not found on PATH".into()));
            };
            if file != pin.path {
                return Err(changed(file.display().to_string()));
            }
            if stat_of(&file) == Some(pin.stat) {
                continue;
            }
            match hash_file(&file) {
                Ok(sha) if sha == pin.sha256 => {}
                Ok(_) => return Err(changed(format!("{} with other bytes", file.display()))),
                Err(e) => return Err(changed(format!("unreadable ({e})"))),
            }
        }
        if let Some(root) = &self.chain_root {
            let now = chain::scan(root, self.cargo_home().as_deref(), self.home().as_deref());
            if let Some((path, was, now)) = chain::first_change(&self.chain, &now) {
                return Err(RunnerChanged {
                    name: path.display().to_string(),
                    was,
                    now,
                });
            }
        }
        Ok(())
    }

    /// [`PinnedEnv::verify`] of what the runners load from outside the commit only (the
    /// fingerprints, [`InstallPin`]). Each is judged by change time, which any write
    /// sets for good: a change is seen by every check after it, so this one may run
    /// beside the deciding runs it guards, whose results count only if it passes
    /// ([`Share::BesideARunner`], so it leaves them a core).
    pub fn verify_installs(&self, share: Share) -> Result<(), RunnerChanged> {
        for pin in &self.installs {
            pin.first_change(share)
                .map_or(Ok(()), |c| Err(changed_in(pin, c)))?;
        }
        Ok(())
    }

    /// Watches every directory above each pinned installation for being moved or
    /// removed, and records every link on the way, from now: called as a gate begins,
    /// before any deciding run, so that a directory on the way swapped and put back
    /// while runs went on before the walk began is named by
    /// [`PinnedEnv::verify_after_runs`] too. A few watches a root; nothing is walked.
    pub fn watch_above_installs(&self, watch: &InstallWatch) {
        for pin in &self.installs {
            watch.watch_above(&pin.root);
        }
    }

    /// [`PinnedEnv::verify_installs`], watching each root as it is walked (see
    /// [`InstallWatch`]), so that [`PinnedEnv::verify_after_runs`] can tell, once the runs
    /// it guards are over, whether anything changed since without walking again.
    pub fn verify_installs_watching(
        &self,
        share: Share,
        watch: &InstallWatch,
    ) -> Result<(), RunnerChanged> {
        for pin in &self.installs {
            let change = pin.first_change_watched(share, watch);
            change.map_or(Ok(()), |c| Err(changed_in(pin, c)))?;
        }
        Ok(())
    }

    /// [`PinnedEnv::verify`] after deciding runs that a watched walk
    /// ([`PinnedEnv::verify_installs_watching`]) guarded: the runners and the
    /// configuration chain by their bytes as always; a directory on the way to a root
    /// moved, removed or replaced since its walk began refuses, even put back; each
    /// root the kernel's queue proves unchanged is not walked again, every other one is
    /// (on every core).
    pub fn verify_after_runs(&self, watch: &InstallWatch) -> Result<(), RunnerChanged> {
        self.verify_runners()?;
        if let Some((dir, root)) = watch.moved() {
            return Err(RunnerChanged {
                name: dir.display().to_string(),
                was: "in place as the runs began".to_string(),
                now: format!(
                    "moved, removed or replaced while they ran (on the way to {})",
                    root.display()
                ),
            });
        }
        for pin in self.installs.iter().filter(|pin| !pin.held_by(watch)) {
            let change = pin.first_change(Share::EveryCore);
            change.map_or(Ok(()), |c| Err(changed_in(pin, c)))?;
        }
        Ok(())
    }
}

/// The refusal for `pin`'s first change: the path, what it was and what it is.
fn changed_in(pin: &InstallPin, (path, was, now): (PathBuf, String, String)) -> RunnerChanged {
    RunnerChanged {
        name: path.display().to_string(),
        was,
        now: format!("{now} (in {}, {})", pin.what, pin.root.display()),
    }
}

/// The first executable `name` on `path`, with symlinks resolved.
fn resolve(path: &str, name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .and_then(|found| found.canonicalize().ok())
}

fn stat_of(file: &Path) -> Option<[i64; 5]> {
    std::fs::metadata(file).ok().as_ref().map(stat_record)
}

/// Device, inode, size, modification and change times (ns) of `m`: equal records mean
/// an unchanged file (the change time is the kernel's, set by any write).
pub fn stat_record(m: &std::fs::Metadata) -> [i64; 5] {
    let ns = |s: i64, n: i64| s.saturating_mul(1_000_000_000).saturating_add(n);
    [
        i64::try_from(m.dev()).unwrap_or(i64::MAX),
        i64::try_from(m.ino()).unwrap_or(i64::MAX),
        i64::try_from(m.size()).unwrap_or(i64::MAX),
        ns(m.mtime(), m.mtime_nsec()),
        ns(m.ctime(), m.ctime_nsec()),
    ]
}

fn hash_file(file: &Path) -> std::io::Result<String> {
    let mut hasher = sha2::Sha256::new();
    let mut f = std::fs::File::open(file)?;
    std::io::copy(&mut f, &mut hasher)?;
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pinned_in(dir: &Path, name: &str, body: &str) -> PinnedEnv {
        use std::os::unix::fs::PermissionsExt;
        let file = dir.join(name);
        std::fs::write(&file, body).expect("write");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let path = dir.display().to_string();
        let resolved = resolve(&path, name).expect("resolves");
        PinnedEnv {
            vars: BTreeMap::from([("PATH".to_string(), path)]),
            runners: vec![RunnerPin {
                name: name.into(),
                sha256: hash_file(&resolved).expect("hash"),
                stat: stat_of(&resolved).expect("stat"),
                path: resolved,
            }],
            dropped_path: Vec::new(),
            chain_root: None,
            chain: Vec::new(),
            installs: Vec::new(),
            interpreters: BTreeMap::new(),
        }
    }

    #[test]
    fn an_interpreter_is_pinned_with_the_libraries_it_maps_and_the_directories_it_searches() {
        let dir = tempfile::tempdir().expect("dir");
        let python = PinnedEnv::capture(["python3"])
            .python_install(&[], dir.path())
            .expect("python3 answers in time")
            .expect("python3 answers");
        // The C library, mapped by every interpreter, is pinned as a file of its own.
        let maps_libc = |(path, what): &(PathBuf, String)| {
            what.contains("maps")
                && path
                    .file_name()
                    .is_some_and(|name| name.to_string_lossy().starts_with("libc"))
        };
        assert!(python.roots.iter().any(maps_libc), "{:?}", python.roots);
        // Its executable's directory, where a `pyvenv.cfg` would move its prefix, is
        // pinned by its own record wherever this user could plant one there.
        let bin = python.executable.parent().expect("a directory");
        let writable = nix::unistd::access(bin, nix::unistd::AccessFlags::W_OK).is_ok();
        assert_eq!(
            python.searched.iter().any(|(searched, _)| searched == bin),
            writable,
            "{:?}",
            python.searched
        );
    }

    #[test]
    fn a_shallow_pin_sees_an_entry_planted_even_once_removed_and_nothing_below() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::create_dir_all(dir.path().join("lib/python3.11")).expect("lib");
        let lib = dir.path().join("lib");
        let pin = InstallPin::take_shallow(&lib, "searched").expect("pin");
        // Below its entries: not its business (other pins walk them).
        std::fs::write(lib.join("python3.11/os.py"), "x = 1\n").expect("below");
        assert_eq!(pin.first_change(Share::EveryCore), None);
        // Once the kernel's clock has passed the directory's change time (so that a
        // change now leaves another), an entry planted is seen, and still seen once
        // removed again.
        let pinned_ctime = |path: &Path| {
            let meta = std::fs::symlink_metadata(path).expect("stat");
            (meta.ctime(), meta.ctime_nsec())
        };
        let before = pinned_ctime(&lib);
        let tick = dir.path().join("tick");
        let passed = (0..100_000).any(|_| {
            std::fs::write(&tick, "").expect("tick");
            pinned_ctime(&tick) > before
        });
        assert!(passed, "the clock never moved");
        std::fs::write(lib.join("python311.zip"), "zip").expect("plant");
        assert!(pin.first_change(Share::EveryCore).is_some());
        std::fs::remove_file(lib.join("python311.zip")).expect("remove");
        let (path, was, now) = pin.first_change(Share::EveryCore).expect("removed again");
        assert_eq!(
            (path, was.as_str(), now.as_str()),
            (lib, "present", "changed since run start")
        );
    }

    /// A pin of one site-packages under `dir/prefix`; the pin and the prefix.
    fn pinned_site(dir: &Path) -> (PinnedEnv, PathBuf) {
        let site = dir.join("prefix/lib/site-packages");
        std::fs::create_dir_all(&site).expect("site");
        std::fs::write(site.join("six.py"), "six = 6\n").expect("module");
        let mut pinned = pinned_in(dir, "runner", "#!/bin/sh\nexit 0\n");
        pinned.installs = vec![InstallPin::take(&site, "site-packages").expect("pin")];
        (pinned, dir.join("prefix"))
    }

    /// `prefix` moved away, a copy with a planted module put in its place and taken
    /// away again, and `prefix` put back: as a process racing the runs would.
    fn swap_and_put_back(dir: &Path, prefix: &Path) {
        let site = prefix.join("lib/site-packages");
        std::fs::rename(prefix, dir.join("away")).expect("away");
        std::fs::create_dir_all(&site).expect("copy");
        std::fs::write(site.join("sitecustomize.py"), "import evil\n").expect("plant");
        std::fs::remove_dir_all(prefix).expect("copy gone");
        std::fs::rename(dir.join("away"), prefix).expect("back");
    }

    #[test]
    fn a_directory_above_an_installation_moved_and_put_back_while_the_runs_ran_refuses() {
        let dir = tempfile::tempdir().expect("dir");
        let (pinned, prefix) = pinned_site(dir.path());
        let watch = InstallWatch::new();
        assert_eq!(
            pinned.verify_installs_watching(Share::EveryCore, &watch),
            Ok(())
        );
        // While the runs run.
        swap_and_put_back(dir.path(), &prefix);
        let refused = pinned
            .verify_after_runs(&watch)
            .expect_err("moved meanwhile");
        assert_eq!(refused.name, prefix.display().to_string(), "{refused}");
        assert_eq!(pinned.verify(), Ok(()), "a walk alone sees nothing");
    }

    #[test]
    fn a_directory_above_an_installation_swapped_before_the_walk_but_after_the_gate_began_refuses()
    {
        let dir = tempfile::tempdir().expect("dir");
        let (pinned, prefix) = pinned_site(dir.path());
        let watch = InstallWatch::new();
        pinned.watch_above_installs(&watch);
        // While a first run runs alone, before the walk begins.
        swap_and_put_back(dir.path(), &prefix);
        assert_eq!(
            pinned.verify_installs_watching(Share::EveryCore, &watch),
            Ok(()),
            "the walk alone sees nothing"
        );
        let refused = pinned
            .verify_after_runs(&watch)
            .expect_err("moved meanwhile");
        assert_eq!(refused.name, prefix.display().to_string(), "{refused}");
    }

    #[test]
    fn an_unchanged_runner_verifies() {
        let dir = tempfile::tempdir().expect("dir");
        let pinned = pinned_in(dir.path(), "runner", "#!/bin/sh\nexit 0\n");
        assert_eq!(pinned.verify(), Ok(()));
    }

    #[test]
    fn a_runner_with_other_bytes_is_refused() {
        let dir = tempfile::tempdir().expect("dir");
        let pinned = pinned_in(dir.path(), "runner", "#!/bin/sh\nexit 0\n");
        std::fs::write(dir.path().join("runner"), "#!/bin/sh\nexit 1\n").expect("rewrite");
        let err = pinned.verify().expect_err("changed bytes");
        assert!(err.now.contains("other bytes"), "{err}");
    }

    #[test]
    fn a_runner_shadowed_earlier_on_path_is_refused() {
        let dir = tempfile::tempdir().expect("dir");
        let first = dir.path().join("first");
        let second = dir.path().join("second");
        std::fs::create_dir_all(&first).expect("mkdir");
        std::fs::create_dir_all(&second).expect("mkdir");
        let mut pinned = pinned_in(&second, "runner", "#!/bin/sh\nexit 0\n");
        pinned.vars.insert(
            "PATH".into(),
            format!("{}:{}", first.display(), second.display()),
        );
        assert_eq!(pinned.verify(), Ok(()));
        let _ = pinned_in(&first, "runner", "#!/bin/sh\nexit 0\n");
        assert!(
            pinned.verify().is_err(),
            "a fake earlier on PATH must be refused"
        );
    }

    #[test]
    fn capture_keeps_only_allowed_variables() {
        let pinned = PinnedEnv::capture([]);
        assert!(pinned.vars.keys().all(|k| ALLOWED.contains(&k.as_str())));
    }

    #[test]
    fn only_absolute_path_entries_are_kept_and_the_rest_are_named() {
        assert_eq!(
            absolute_path("bin:/usr/bin::./node_modules/.bin:/bin"),
            (
                "/usr/bin:/bin".to_string(),
                vec!["bin".into(), "".into(), "./node_modules/.bin".into()]
            )
        );
        assert_eq!(absolute_path("/usr/bin"), ("/usr/bin".into(), Vec::new()));
        assert_eq!(absolute_path(""), (String::new(), Vec::new()));
    }

    /// Renewing the dependencies moves only their pins: an installation named among the
    /// new ones is ignored, and a change to one is still seen; what changed is named.
    #[test]
    fn only_dependencies_are_renewed_and_their_changes_named() {
        let dir = tempfile::tempdir().expect("dir");
        let site = dir.path().join("site-packages");
        let modules = dir.path().join("node_modules");
        std::fs::create_dir_all(&site).expect("site");
        std::fs::create_dir_all(modules.join("left-pad")).expect("modules");
        let bin = tempfile::tempdir().expect("bin");
        let roots = || {
            vec![
                (site.clone(), "what python3 imports".to_string()),
                (modules.clone(), DEPENDENCY_DIRECTORY.to_string()),
            ]
        };
        let pinned = pinned_in(bin.path(), "runner", "#!/bin/sh\n").with_installations(roots());
        std::fs::create_dir_all(modules.join("right-pad")).expect("install");
        std::fs::write(site.join("evil.pth"), "import evil\n").expect("plant");
        let fresh = pinned_in(bin.path(), "runner", "#!/bin/sh\n").with_installations(roots());
        let changes = pinned.dependency_changes(&fresh);
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert!(changes[0].contains("right-pad"), "{changes:?}");
        let renewed = pinned.clone().with_dependencies_of(&fresh.installs);
        let changed = renewed
            .verify()
            .expect_err("the site-packages change is still seen");
        assert!(changed.name.contains("evil.pth"), "{changed}");
        std::fs::remove_file(site.join("evil.pth")).expect("unplant");
        let unchanged = pinned_in(bin.path(), "runner", "#!/bin/sh\n").with_installations(roots());
        let renewed = unchanged.clone().with_dependencies_of(&fresh.installs);
        assert_eq!(renewed.verify(), Ok(()));
        assert!(unchanged.dependency_changes(&fresh).is_empty());
    }

    #[test]
    fn a_nested_installation_is_pinned_once_and_runner_caches_are_left_out() {
        let dir = tempfile::tempdir().expect("dir");
        let lib = dir.path().join("lib");
        let site = lib.join("site-packages");
        let deep = site.join("pkg");
        let modules = dir.path().join("node_modules");
        for d in [
            &deep,
            &modules.join(".vite/vitest"),
            &modules.join("left-pad"),
        ] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        let bin = tempfile::tempdir().expect("bin");
        let pinned = pinned_in(bin.path(), "runner", "#!/bin/sh\n").with_installations(vec![
            (deep.clone(), "deep".into()),
            (site.clone(), "site".into()),
            (lib.clone(), "lib".into()),
            (modules.clone(), "deps".into()),
        ]);
        let roots: Vec<(&Path, &[String])> = pinned
            .installs
            .iter()
            .map(|i| (i.root.as_path(), i.skip.as_slice()))
            .collect();
        let skipped = |names: &[&str]| names.iter().map(|n| (*n).to_string()).collect::<Vec<_>>();
        assert_eq!(
            roots,
            vec![
                (lib.as_path(), skipped(&["site-packages"]).as_slice()),
                (site.as_path(), [].as_slice()),
                (modules.as_path(), skipped(&[".vite", ".cache"]).as_slice()),
            ]
        );
        // A write to the runner's cache is no change; one to a package is, named.
        std::fs::write(modules.join(".vite/vitest/results.json"), "{}").expect("cache");
        assert_eq!(pinned.verify(), Ok(()));
        std::fs::write(deep.join("__init__.py"), "").expect("plant");
        let refused = pinned.verify().expect_err("a planted module");
        assert_eq!(refused.name, deep.display().to_string());
        assert!(refused.now.contains("(in site,"), "{refused:?}");
    }

    #[test]
    fn what_a_link_below_a_root_leads_to_outside_every_root_is_pinned_too() {
        let dir = tempfile::tempdir().expect("dir");
        let site = dir.path().join("site-packages");
        let outside = dir.path().join("outside");
        let ours = dir.path().join("work-tree");
        for d in [&site, &outside.join("pkg"), &ours] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        std::fs::write(outside.join("sc.py"), "").expect("empty");
        std::fs::write(ours.join("calc.py"), "").expect("calc");
        std::os::unix::fs::symlink(outside.join("sc.py"), site.join("sitecustomize.py"))
            .expect("link to a file");
        std::os::unix::fs::symlink(outside.join("pkg"), site.join("pkg")).expect("link to a dir");
        std::os::unix::fs::symlink(ours.join("calc.py"), site.join("calc.py")).expect("ours");
        let bin = tempfile::tempdir().expect("bin");
        let pinned = pinned_in(bin.path(), "runner", "#!/bin/sh\n").with_installations_caching(
            vec![(site.clone(), "site".into())],
            false,
            &[],
            std::slice::from_ref(&ours),
        );
        let roots: Vec<&Path> = pinned.installs.iter().map(|p| p.root.as_path()).collect();
        let real = |p: &Path| std::fs::canonicalize(p).expect("real");
        assert!(
            roots.contains(&real(&outside.join("sc.py")).as_path()),
            "{roots:?}"
        );
        assert!(
            roots.contains(&real(&outside.join("pkg")).as_path()),
            "{roots:?}"
        );
        assert_eq!(
            roots.len(),
            3,
            "never what lies in the work tree: {roots:?}"
        );
        std::fs::write(ours.join("calc.py"), "def sub(): pass\n").expect("edit ours");
        assert_eq!(pinned.verify(), Ok(()));
        std::fs::write(outside.join("sc.py"), "import evil\n").expect("write through");
        let refused = pinned.verify().expect_err("written where a link leads");
        assert!(refused.name.ends_with("sc.py"), "{refused:?}");
        std::fs::write(outside.join("pkg/__init__.py"), "import evil\n").expect("plant");
        let refused = pinned
            .verify()
            .expect_err("a module planted where a link leads");
        assert!(
            [refused.name.as_str(), refused.now.as_str()]
                .iter()
                .any(|s| s.contains("pkg")),
            "{refused:?}"
        );
    }

    #[test]
    fn site_packages_a_virtual_environment_leaves_out_are_left_out_of_its_library() {
        let dir = tempfile::tempdir().expect("dir");
        let lib = dir.path().join("lib/python3.11");
        let site = lib.join("site-packages");
        for d in [&lib.join("json"), &site.join("cfnlint")] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        let bin = tempfile::tempdir().expect("bin");
        let pin = |roots: Vec<(PathBuf, String)>| {
            pinned_in(bin.path(), "runner", "#!/bin/sh\n").with_installations_caching(
                roots,
                false,
                std::slice::from_ref(&site),
                &[],
            )
        };
        let alone = pin(vec![(lib.clone(), "stdlib".into())]);
        assert_eq!(alone.installs.len(), 1);
        assert_eq!(alone.installs[0].skip, vec!["site-packages".to_string()]);
        // A root of its own (a `.pth` or an environment that shares it names it): pinned.
        let named = pin(vec![
            (lib.clone(), "stdlib".into()),
            (site.clone(), "site".into()),
        ]);
        std::fs::write(site.join("cfnlint/planted.py"), "").expect("plant");
        assert_eq!(
            alone.verify(),
            Ok(()),
            "on no module path: nothing loads it"
        );
        let refused = named.verify().expect_err("a root of its own");
        assert!(refused.name.contains("cfnlint"), "{refused:?}");
        // The standard library itself is still pinned whole.
        std::fs::write(lib.join("json/planted.py"), "").expect("plant");
        assert!(alone.verify().is_err());
    }
}
