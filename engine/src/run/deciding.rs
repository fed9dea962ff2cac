//! Deciding runs: the suite runs a gate rests on happen in the clean room, on one tree,
//! with the environment and runners pinned at run start.

use std::sync::Arc;

use super::RunError;
use super::Session;
use super::cleanroom::CleanRoom;
use super::state::RunState;
use crate::config::AdapterKind;
use crate::observe::Project;
use crate::observe::hermetic::InstallWatch;
use crate::observe::hermetic::PinnedEnv;
use crate::observe::hermetic::RunnerChanged;
use crate::observe::hermetic::Share;
use crate::observe::hermetic::runner_programs;

/// The run's pins with the dependencies taken anew, and what changed, in words.
pub(super) type Renewed = (Arc<PinnedEnv>, Vec<String>);

/// What a file pinned because a project's `env` names it is, in words.
const NAMED_IN_ENV: &str = "a file the project's env names";

/// The regular files `env`'s values name by absolute path, each value read as words
/// split at spaces, `=`, `,`, `;` and `:` (`-toolexec=/opt/tool`, `--import /x/hook.mjs`,
/// `/a/lib.so:/b/lib.so`). Directories are left out: a value naming one (a `HOME`, a
/// cache) is no program, and what a toolchain loads from its directories is pinned on
/// its own.
fn files_named_in(env: &[(String, String)]) -> Vec<std::path::PathBuf> {
    let mut files: Vec<std::path::PathBuf> = env
        .iter()
        .flat_map(|(_, value)| value.split([' ', '\t', '=', ',', ';', ':']))
        .filter(|word| word.starts_with('/'))
        .map(std::path::PathBuf::from)
        .filter(|path| std::fs::metadata(path).is_ok_and(|m| m.is_file()))
        .collect();
    files.sort();
    files.dedup();
    files
}

impl Session {
    /// The allow-listed environment of this process, with the runners of every configured
    /// project, the configuration chain above the clean room, and what the runners load
    /// from outside the commit pinned.
    ///
    /// A configuration file of the chain that is a named pipe, a socket or a device is
    /// refused ([`RunError::RunnerConfigNotRegular`]) before any toolchain is asked.
    pub(super) fn capture_env(&self) -> Result<PinnedEnv, RunError> {
        let programs = self
            .config
            .project
            .values()
            .flat_map(|p| runner_programs(p.adapter).iter().copied());
        // What the runners would read from the directories above the clean room's
        // checkout is pinned too: the commit judged does not hold it.
        let pinned = PinnedEnv::capture(programs).with_config_chain(self.clean_room().path());
        if let Some((path, found)) = pinned.unreadable_chain_entry() {
            return Err(RunError::RunnerConfigNotRegular {
                path: path.to_path_buf(),
                found,
            });
        }
        self.pin_installations(pinned)
    }

    /// `pinned`, with what the deciding runs load from outside the commit fingerprinted:
    /// the dependency directories the clean room links from the live tree, for a
    /// pytest project where its interpreter imports from, for a Go or cargo project its
    /// toolchain's installation and its dependencies' sources (never a directory of the
    /// work tree or of tdd's own state, whose files are judged or rebuilt for each run).
    /// The interpreter (and Go's `go`) is then started by the executable it said it is,
    /// never through a shim again, and rustup is told the sysroot asked here.
    ///
    /// A toolchain that does not answer in time is refused
    /// ([`RunError::ToolchainUnanswered`]): what it loads could not be pinned.
    fn pin_installations(&self, mut pinned: PinnedEnv) -> Result<PinnedEnv, RunError> {
        let venvs = self.dependency_dirs();
        let mut roots: Vec<(std::path::PathBuf, String)> = venvs
            .iter()
            .map(|dir| {
                let what = crate::observe::hermetic::DEPENDENCY_DIRECTORY;
                (dir.clone(), what.to_string())
            })
            .collect();
        let mut searched: Vec<(std::path::PathBuf, String)> = Vec::new();
        let mut unsearched: Vec<std::path::PathBuf> = Vec::new();
        let never = [self.work_tree.clone(), self.location.dir.clone()];
        let ours = |p: &std::path::Path| {
            p.starts_with(&self.work_tree) || p.starts_with(&self.location.dir)
        };
        // A virtual environment of the live tree (`uv run`'s `.venv`) loads the standard
        // library of the interpreter it was made from, outside it: that is pinned too.
        for venv in venvs {
            roots.extend(
                PinnedEnv::venv_base(&venv)
                    .into_iter()
                    .filter(|(p, _)| !ours(p)),
            );
        }
        for config in self.config.project.values() {
            let env: Vec<(String, String)> = config
                .env
                .iter()
                .filter(|(k, _)| !crate::observe::withheld_from_runners(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let root = self.work_tree.join(&config.root);
            // A program or file the project's `env` names by absolute path (a
            // `RUSTC_WRAPPER`, `GOFLAGS=-toolexec=...`, `NODE_OPTIONS=--import ...`) is
            // started or loaded by every deciding run, and no commit holds it.
            roots.extend(
                files_named_in(&env)
                    .into_iter()
                    .filter(|p| !ours(p))
                    .map(|p| (p, NAMED_IN_ENV.to_string())),
            );
            // Go and cargo: the toolchain's installation and the dependencies' sources
            // outside the work tree, and the toolchain named so that a version
            // manager's later choice plays no part.
            if let Some(toolchain) = pinned.toolchain_install(config.adapter, &env, &root)? {
                for (name, value) in &toolchain.vars {
                    if !config.env.contains_key(name) {
                        pinned = pinned.with_var(name, value);
                    }
                }
                if let Some((name, executable)) = toolchain.interpreter
                    && !config.env.contains_key("PATH")
                    && pinned.interpreter(&name).is_none()
                {
                    pinned = pinned.with_interpreter(&name, executable);
                }
                roots.extend(toolchain.roots.into_iter().filter(|(p, _)| !ours(p)));
            }
            if config.adapter != AdapterKind::Pytest {
                continue;
            }
            let Some(python) = pinned.python_install(&env, &root)? else {
                continue;
            };
            if let Some((leads, file, entry)) = python
                .relative
                .iter()
                .find(|(leads, _, _)| !leads.starts_with(&self.work_tree))
            {
                let file = root.join(file);
                return Err(RunError::PythonpathOutside {
                    line: line_naming(&file, entry),
                    file,
                    entry: entry.clone(),
                    leads: leads.clone(),
                });
            }
            // A project whose `env` sets its own PATH starts its own interpreter.
            if !config.env.contains_key("PATH") && pinned.interpreter(&python.name).is_none() {
                pinned = pinned.with_interpreter(&python.name, python.executable.clone());
            }
            for (name, value) in &python.vars {
                if !config.env.contains_key(name) {
                    pinned = pinned.with_var(name, value);
                }
            }
            roots.extend(python.roots.into_iter().filter(|(p, _)| !ours(p)));
            searched.extend(python.searched.into_iter().filter(|(p, _)| !ours(p)));
            unsearched.extend(python.unsearched);
        }
        Ok(pinned
            .with_installations_caching(roots, self.runs_javascript(), &unsearched, &never)
            .with_searched(searched))
    }

    /// Whether a project runs a JavaScript runner (or any command), which may write its
    /// caches under `node_modules` as it runs.
    fn runs_javascript(&self) -> bool {
        use crate::observe::config::AdapterKind;
        self.config.project.values().any(|config| {
            matches!(
                config.adapter,
                AdapterKind::Vitest
                    | AdapterKind::Jest
                    | AdapterKind::Mocha
                    | AdapterKind::NodeTest
                    | AdapterKind::Junit
            )
        })
    }

    /// The dependency directories of the live tree the clean room links (`node_modules`,
    /// `.venv`, `venv` of the work tree's root and of each project's) that exist now.
    fn dependency_dirs(&self) -> Vec<std::path::PathBuf> {
        let tops = std::iter::once(self.work_tree.clone()).chain(
            self.config
                .project
                .values()
                .map(|config| self.work_tree.join(&config.root)),
        );
        tops.flat_map(|top| {
            super::cleanroom::DEPENDENCY_DIRS
                .iter()
                .map(move |name| top.join(name))
        })
        .filter(|dir| dir.is_dir())
        .collect()
    }

    /// Refuses a dependency directory the clean room would link that `pinned` (taken at
    /// run start, or renewed by a cycle that declares `changes_dependencies`) did not
    /// fingerprint: one made since would serve the deciding runs bytes no check covers.
    fn no_dependency_dir_since(&self, pinned: &PinnedEnv) -> Result<(), RunError> {
        let made = self.dependency_dirs().into_iter().find(|dir| {
            !pinned
                .installs
                .iter()
                .any(|pin| pin.is_dependency() && pin.root == *dir)
        });
        match made {
            None => Ok(()),
            Some(dir) => Err(crate::observe::hermetic::RunnerChanged {
                name: dir.display().to_string(),
                was: "absent".to_string(),
                now: "a dependency directory the clean room would link, made since: \
                      declare `changes_dependencies` in the cycle that makes it, or \
                      remove it"
                    .to_string(),
            }
            .into()),
        }
    }

    /// For a cycle whose plan declares `changes_dependencies`: the run's pins with the
    /// dependencies taken as they are now, and what changed since they were pinned,
    /// recorded as `dependencies_changed`. `None` when nothing changed (nothing is
    /// recorded) or the run pinned nothing. Every other pin is kept as it was, so a
    /// runner, interpreter or toolchain changed in the same cycle is still refused.
    pub(super) fn renew_dependencies(
        &self,
        ledger: &mut tdd_ledger::Ledger,
        state: &RunState,
        n: u32,
    ) -> Result<Option<Renewed>, RunError> {
        let Some(pinned) = &state.pinned_env else {
            return Ok(None);
        };
        // Taken again by `stat` alone, of the dependencies pinned so far and the
        // dependency directories there now: no toolchain is asked while the cycle's
        // files (a `.cargo/config.toml` not yet reverted) are in the work tree.
        let roots = pinned
            .installs
            .iter()
            .filter(|p| p.is_dependency())
            .map(|p| (p.root.clone(), p.what.clone()))
            .chain(self.dependency_dirs().into_iter().map(|dir| {
                let what = crate::observe::hermetic::DEPENDENCY_DIRECTORY;
                (dir, what.to_string())
            }))
            .collect();
        let never = [self.work_tree.clone(), self.location.dir.clone()];
        let fresh = PinnedEnv::default().with_installations_caching(
            roots,
            self.runs_javascript(),
            &[],
            &never,
        );
        let changed = pinned.dependency_changes(&fresh);
        if changed.is_empty() {
            return Ok(None);
        }
        let installs: Vec<_> = fresh
            .installs
            .into_iter()
            .filter(|p| p.is_dependency())
            .collect();
        ledger.record(
            Some(&state.run_id),
            &super::events::RunEvent::DependenciesChanged(super::events::DependenciesChanged {
                n,
                changed: changed.clone(),
                installs: installs.clone(),
            }),
        )?;
        let renewed = pinned.as_ref().clone().with_dependencies_of(&installs);
        Ok(Some((Arc::new(renewed), changed)))
    }

    /// Refuses to act when tdd.toml is not the file the run started with.
    pub(super) fn check_config(&self, state: &RunState) -> Result<(), RunError> {
        if state.config_sha.is_empty() || state.config_sha == self.config_sha {
            return Ok(());
        }
        Err(RunError::ConfigChanged {
            recorded: state.config_sha.clone(),
            now: self.config_sha.clone(),
        })
    }

    /// This work tree's clean room.
    pub(super) fn clean_room(&self) -> CleanRoom {
        CleanRoom::of(&self.location.dir, &self.work_tree)
    }

    /// Builds, on a thread of its own, the rules that will confine the runners of each
    /// project in the clean room, where the clean room is already there: the close's
    /// first deciding run then takes them built instead of building them (milliseconds
    /// where a denied path sits beside many entries), while this thread resets the
    /// clean room. Nothing is made but what a run would make; a clean room made anew
    /// before its runs gets its rules built again by them.
    pub(super) fn prepare_clean_room_runners(&self) {
        if !self.config.sandbox.enabled {
            return;
        }
        let room = self.clean_room();
        let build = room.build_dir("");
        let there = |path: &std::path::Path| {
            std::fs::symlink_metadata(path).is_ok_and(|meta| meta.is_dir())
        };
        if !there(room.path()) || !there(&build) {
            return;
        }
        let place = super::confine::RunsIn::CleanRoom {
            tree: room.path(),
            build: &build,
        };
        let projects: Vec<Project> = self
            .config
            .project
            .iter()
            .filter_map(|(name, config)| Project::new(room.path(), name, config.clone()).ok())
            .map(|project| self.confine(project, place))
            .collect();
        // Where no thread can be made, the first run builds them, as it would have.
        let _ = std::thread::Builder::new()
            .name("runner rules".to_string())
            .spawn(move || projects.iter().for_each(crate::observe::prepare_runners));
    }

    /// Resets the clean room to `tree` and returns the projects `names` as seen there, with
    /// the run's pinned environment; the caller checks it ([`Session::check_pinned`]).
    pub(super) fn in_clean_room(
        &self,
        pinned: Option<&Arc<PinnedEnv>>,
        tree: &str,
        names: &[String],
    ) -> Result<Vec<Project>, RunError> {
        if let Some(env) = pinned {
            self.no_dependency_dir_since(env)?;
        }
        let room = self.clean_room();
        let roots: Vec<String> = names
            .iter()
            .filter_map(|n| self.config.project.get(n).map(|p| p.root.clone()))
            .collect();
        room.materialize(&self.work_tree, tree, &roots)?;
        names
            .iter()
            .map(|name| {
                // Its build output goes to the clean room's build directory, kept so
                // builds stay warm (`confine`).
                let config = self
                    .config
                    .project
                    .get(name)
                    .cloned()
                    .ok_or_else(|| RunError::UnknownProject { name: name.clone() })?;
                let build = room.build_dir("");
                let place = super::confine::RunsIn::CleanRoom {
                    tree: room.path(),
                    build: &build,
                };
                let project = self.confine(Project::new(room.path(), name, config)?, place);
                Ok(match pinned {
                    Some(env) => project.hermetic(Arc::clone(env)),
                    None => project,
                })
            })
            .collect()
    }
}

/// The check of what a close's deciding runs load from outside the commit: the
/// fingerprints of the pinned installations (tens of thousands of entries, judged by
/// change time), walked once on a thread of their own, on every core but one, with a
/// kernel watch ([`InstallWatch`]) put on what is walked; the runs' results count only
/// once [`InstallCheck::after_runs`] has passed.
///
/// One walk serves the whole close. The change time every write leaves is compared
/// with the one pinned at run start, so a walk begun after a run still sees a change
/// made before or while it ran, even one undone; and from the moment an entry is
/// walked, any change to it is queued by the kernel. A REFACTOR close walks from its
/// start. A GREEN walks once its targets passed alone, beside its suites and its
/// sensitivity run: a GREEN refused on its targets (the common refusal) commits
/// nothing, is refused on them whatever the installations hold, and so neither waits
/// for a walk nor shares the machine with one while its targets run.
pub(super) struct InstallCheck {
    pinned: Option<Arc<PinnedEnv>>,
    watch: Arc<InstallWatch>,
    /// Whether the walk was begun: it is begun once at most.
    begun: bool,
    /// The walk, until its answer is taken.
    walk: Option<Walking>,
}

/// A walk going on in its thread, or done in the caller's when no thread could be made.
enum Walking {
    Going(std::thread::JoinHandle<Result<(), RunnerChanged>>),
    Done(Result<(), RunnerChanged>),
}

/// When a close begins its walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FirstWalk {
    /// Once the targets passed alone ([`InstallCheck::watch_from_now`]): GREEN.
    AfterTargets,
    /// At once: a REFACTOR close has no target run to be refused on first.
    Now,
}

impl InstallCheck {
    /// The check of `pinned`'s installations, if any are pinned; walking from now when
    /// `first` says so.
    pub(super) fn start(pinned: Option<&Arc<PinnedEnv>>, first: FirstWalk) -> InstallCheck {
        let mut check = InstallCheck {
            pinned: pinned.cloned(),
            watch: Arc::new(InstallWatch::new()),
            begun: false,
            walk: None,
        };
        if let Some(env) = &check.pinned {
            env.watch_above_installs(&check.watch);
        }
        if first == FirstWalk::Now {
            check.watch_from_now();
        }
        check
    }

    /// Starts the walk, unless one was started: from the moment each entry is walked,
    /// any change to it is queued by the kernel.
    pub(super) fn watch_from_now(&mut self) {
        if self.begun {
            return;
        }
        self.begun = true;
        let Some(env) = self.pinned.as_ref().map(Arc::clone) else {
            return;
        };
        let (its_env, its_watch) = (Arc::clone(&env), Arc::clone(&self.watch));
        let spawned = std::thread::Builder::new()
            .name("install walk".to_string())
            .spawn(move || its_env.verify_installs_watching(Share::BesideARunner, &its_watch));
        self.walk = Some(match spawned {
            Ok(going) => Walking::Going(going),
            // No thread could be made: the walk is made here, on the gate's path.
            Err(_) => {
                Walking::Done(env.verify_installs_watching(Share::BesideARunner, &self.watch))
            }
        });
    }

    /// Waits for the walk, if one was begun: `Err` when something under an
    /// installation changed since run start.
    pub(super) fn finish(&mut self) -> Result<(), RunError> {
        self.walk.take().map_or(Ok(()), joined)
    }

    /// Refuses a commit when a pinned runner, the configuration chain above the clean
    /// room or what the runners load from outside the commit is not as it was at run
    /// start. Called after a close's last deciding run: a change made before an entry
    /// was walked leaves a change time the walk saw, and one made after it an event the
    /// kernel queued, so one made while the runs ran, even undone, is seen. Only what
    /// the watch cannot vouch for is walked again; a close whose walk was never begun
    /// is walked now.
    pub(super) fn after_runs(&mut self) -> Result<(), RunError> {
        self.watch_from_now();
        self.finish()?;
        match &self.pinned {
            Some(env) => Ok(env.verify_after_runs(&self.watch)?),
            None => Ok(()),
        }
    }
}

/// The walk's answer, once it ends.
fn joined(walk: Walking) -> Result<(), RunError> {
    match walk {
        Walking::Done(checked) => Ok(checked?),
        Walking::Going(going) => match going.join() {
            Ok(checked) => Ok(checked?),
            // A panic in the check is the check's own bug: it goes on as one.
            Err(panic) => std::panic::resume_unwind(panic),
        },
    }
}

/// The first line of `file` that names `entry` (1-based), 1 when none does or it cannot
/// be read.
fn line_naming(file: &std::path::Path, entry: &str) -> usize {
    crate::read::regular(file)
        .ok()
        .and_then(|bytes| {
            String::from_utf8_lossy(&bytes)
                .lines()
                .position(|line| line.contains(entry))
        })
        .map_or(1, |index| index + 1)
}
