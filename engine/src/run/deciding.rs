//! Deciding runs: the suite runs a gate rests on happen in the clean room, on one tree,
//! with the environment and runners pinned at run start.

use std::sync::Arc;

use super::Engine;
use super::RunError;
use super::cleanroom::CleanRoom;
use super::state::RunState;
use crate::config::AdapterKind;
use crate::observe::Project;
use crate::observe::hermetic::PinnedEnv;
use crate::observe::hermetic::runner_programs;

impl Engine {
    /// The allow-listed environment of this process, with the runners of every configured
    /// project and the configuration chain above the clean room pinned.
    pub(super) fn capture_env(&self) -> PinnedEnv {
        let programs = self
            .config
            .project
            .values()
            .flat_map(|p| runner_programs(p.adapter).iter().copied());
        // What the runners would read from the directories above the clean room's
        // checkout is pinned too: the commit judged does not hold it.
        PinnedEnv::capture(programs).with_config_chain(self.clean_room().path())
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

    /// Resets the clean room to `tree` and returns the projects `names` as seen there, with
    /// the run's pinned environment (after checking that its runners are unchanged).
    pub(super) fn in_clean_room(
        &self,
        pinned: Option<&Arc<PinnedEnv>>,
        tree: &str,
        names: &[String],
    ) -> Result<Vec<Project>, RunError> {
        if let Some(env) = pinned {
            env.verify()?;
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
                let mut config = self
                    .config
                    .project
                    .get(name)
                    .cloned()
                    .ok_or_else(|| RunError::UnknownProject { name: name.clone() })?;
                if config.adapter == AdapterKind::Cargo
                    && !config.env.contains_key("CARGO_TARGET_DIR")
                {
                    // A build directory of its own beside the clean room: never the live
                    // tree's, which the agent can write, and kept so builds stay warm.
                    let dir = room.build_dir(&format!("{name}-cargo-target"));
                    config
                        .env
                        .insert("CARGO_TARGET_DIR".into(), dir.display().to_string());
                }
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
