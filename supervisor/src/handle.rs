//! `LeafHandle`: one leaf, seen from any process, through the files of its directory.
//!
//! Every read goes through the files the supervisor writes, so a handle opened by id
//! in another process sees what the launching process sees. A read that finds the
//! supervisor gone without an exit record records `supervisor_lost` and kills the
//! leaf's tree; see `unix/lost.rs`.

use std::io::Write;
use std::path::Path;
use std::process::Child;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use crate::class::ExitClass;
use crate::clock;
use crate::error::LeafError;
use crate::records;
use crate::records::ExitRecord;
use crate::records::Heartbeat;
use crate::records::Job;
use crate::records::KillRequest;
use crate::records::LaunchRecord;
use crate::records::LeafDir;
use crate::report::LeafEvent;
use crate::report::Reporter;
use crate::tail::Follower;

/// Where a leaf is in its life, as its files say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeafStatus {
    /// The job is written but the supervisor has not recorded a launch yet.
    Starting,
    /// The leaf was launched and its supervisor is alive.
    Running {
        /// The launch record.
        launch: LaunchRecord,
        /// The latest heartbeat, if one was written yet.
        heartbeat: Option<Heartbeat>,
    },
    /// The exit is recorded; it will not change.
    Finished(ExitRecord),
}

/// What [`LeafHandle::wait`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitOutcome {
    /// The leaf has finished.
    Finished(ExitRecord),
    /// The maximum wait passed with the leaf still running.
    StillRunning,
}

/// One leaf. Dropping the handle never affects the leaf.
pub struct LeafHandle {
    id: String,
    dir: LeafDir,
    job: Job,
    reporter: Arc<dyn Reporter>,
    /// The supervisor process, when this handle's process started it (and has not
    /// reaped it yet).
    child: Option<Child>,
    /// Where [`LeafHandle::follow`] stopped in stdout and stderr.
    followers: Option<(Follower, Option<Follower>)>,
    /// When this handle was made: polling slows down as the leaf runs longer.
    since: Instant,
}

/// How [`LeafHandle::kill`] ends a leaf.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kill {
    /// SIGTERM to its process group, the grace period, then SIGKILL.
    Graceful,
    /// SIGKILL at once.
    Now,
}

impl LeafHandle {
    /// A handle for a supervisor this process has just started.
    pub(crate) fn spawned(
        id: String,
        dir: LeafDir,
        job: Job,
        reporter: Arc<dyn Reporter>,
        child: Child,
    ) -> LeafHandle {
        LeafHandle {
            id,
            dir,
            job,
            reporter,
            child: Some(child),
            followers: None,
            since: Instant::now(),
        }
    }

    /// Opens the leaf `id` under `leaves_dir`.
    pub(crate) fn open(
        leaves_dir: &Path,
        id: &str,
        reporter: Arc<dyn Reporter>,
    ) -> Result<LeafHandle, LeafError> {
        if id.is_empty() || id.contains('/') || id == "." || id == ".." {
            return Err(LeafError::InvalidId { id: id.to_owned() });
        }
        let dir = LeafDir::new(leaves_dir.join(id));
        let job = records::read_json::<Job>(&dir.job())?.ok_or_else(|| LeafError::NotFound {
            id: id.to_owned(),
            state_dir: leaves_dir.parent().unwrap_or(leaves_dir).to_path_buf(),
        })?;
        Ok(LeafHandle {
            id: id.to_owned(),
            dir,
            job,
            reporter,
            child: None,
            followers: None,
            since: Instant::now(),
        })
    }

    /// The leaf id, unique within its state directory.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The leaf's directory (job, launch, heartbeat and exit records, default logs).
    pub fn dir(&self) -> &Path {
        &self.dir.path
    }

    /// The leaf's label, if it was given one.
    pub fn name(&self) -> Option<&str> {
        self.job.name.as_deref()
    }

    /// The argument vector, program first.
    pub fn argv(&self) -> &[String] {
        &self.job.argv
    }

    /// When the leaf was created (UTC RFC 3339).
    pub fn created_at(&self) -> &str {
        &self.job.created_at
    }

    /// The file stdout is captured to (stderr too, when merged).
    pub fn stdout_path(&self) -> &Path {
        &self.job.stdout
    }

    /// The file stderr is captured to; `None` when merged into stdout.
    pub fn stderr_path(&self) -> Option<&Path> {
        self.job.stderr.as_deref()
    }

    pub(crate) fn dir_paths(&self) -> &LeafDir {
        &self.dir
    }

    /// The launch record, once the supervisor has written it.
    pub fn launch_record(&self) -> Result<Option<LaunchRecord>, LeafError> {
        Ok(records::read_json(&self.dir.launch())?)
    }

    /// The latest heartbeat, if any was written.
    pub fn heartbeat(&self) -> Result<Option<Heartbeat>, LeafError> {
        Ok(records::read_json(&self.dir.heartbeat())?)
    }

    /// The current status. If the supervisor is gone and recorded no exit, this
    /// records `supervisor_lost`, kills the leaf's tree, and reports the exit.
    pub fn status(&mut self) -> Result<LeafStatus, LeafError> {
        if let Some(exit) = records::read_json::<ExitRecord>(&self.dir.exit())? {
            self.reap_supervisor();
            return Ok(LeafStatus::Finished(exit));
        }
        let Some(launch) = self.launch_record()? else {
            // Not launched yet. Only the process that started the supervisor can tell
            // a slow start from a supervisor that died before spawning anything.
            if self.supervisor_exit_status().is_none() {
                return Ok(LeafStatus::Starting);
            }
            // It exited; look again, since it writes its records before it exits.
            if let Some(exit) = records::read_json::<ExitRecord>(&self.dir.exit())? {
                return Ok(LeafStatus::Finished(exit));
            }
            let launch = self.launch_record()?;
            return self.record_lost(launch.as_ref()).map(LeafStatus::Finished);
        };
        if !self.supervisor_gone(&launch) {
            let heartbeat = self.heartbeat()?;
            return Ok(LeafStatus::Running { launch, heartbeat });
        }
        // The supervisor writes `exit.json` before it exits, so only a second look,
        // after seeing it gone, can tell a finished leaf from a lost supervisor.
        if let Some(exit) = records::read_json::<ExitRecord>(&self.dir.exit())? {
            return Ok(LeafStatus::Finished(exit));
        }
        self.record_lost(Some(&launch)).map(LeafStatus::Finished)
    }

    /// Waits until the leaf finishes, or at most `max`. Polls the leaf's files with
    /// pauses proportional to how long this handle has existed (0.5 ms to 50 ms), so
    /// short leaves return quickly and long ones cost next to nothing.
    pub fn wait(&mut self, max: Option<Duration>) -> Result<WaitOutcome, LeafError> {
        let deadline = max.map(|max| Instant::now() + max);
        let mut backoff = Backoff::since(self.since);
        loop {
            if let LeafStatus::Finished(exit) = self.status()? {
                return Ok(WaitOutcome::Finished(exit));
            }
            let pause = backoff.next_pause();
            match deadline {
                Some(deadline) if Instant::now() >= deadline => {
                    return Ok(WaitOutcome::StillRunning);
                }
                Some(deadline) => {
                    std::thread::sleep(
                        pause.min(deadline.saturating_duration_since(Instant::now())),
                    );
                }
                None => std::thread::sleep(pause),
            }
        }
    }

    /// Asks the supervisor to kill the leaf (class `stopped`): with [`Kill::Graceful`]
    /// SIGTERM to its group, the grace period, then SIGKILL; with [`Kill::Now`], SIGKILL
    /// at once. Returns without waiting; a kill of a finished leaf does nothing.
    pub fn kill(&self, how: Kill) -> Result<(), LeafError> {
        let request = KillRequest {
            version: records::FORMAT_VERSION,
            force: how == Kill::Now,
            requested_at: clock::now_rfc3339(),
        };
        records::write_json(&self.dir.kill(), &request)?;
        crate::unix::wake::poke(&self.dir.wake());
        Ok(())
    }

    /// Copies the leaf's output to `stdout` and `stderr` as it is written, until the
    /// leaf finishes (then everything is copied) or `max` passes. Successive calls
    /// continue where the previous one stopped.
    pub fn follow(
        &mut self,
        stdout: &mut dyn Write,
        stderr: &mut dyn Write,
        max: Option<Duration>,
    ) -> Result<WaitOutcome, LeafError> {
        let deadline = max.map(|max| Instant::now() + max);
        let (mut out, mut err) = self.followers.take().unwrap_or_else(|| {
            (
                Follower::new(self.job.stdout.clone()),
                self.job.stderr.clone().map(Follower::new),
            )
        });
        let outcome = self.follow_with(&mut out, err.as_mut(), stdout, stderr, deadline);
        self.followers = Some((out, err));
        outcome
    }

    fn follow_with(
        &mut self,
        out: &mut Follower,
        mut err: Option<&mut Follower>,
        stdout: &mut dyn Write,
        stderr: &mut dyn Write,
        deadline: Option<Instant>,
    ) -> Result<WaitOutcome, LeafError> {
        let mut backoff = Backoff::since(self.since);
        loop {
            // Status first: once it says finished, the files are complete, and the
            // pumps below copy everything that is left.
            let finished = match self.status()? {
                LeafStatus::Finished(exit) => Some(exit),
                _ => None,
            };
            let mut moved = pump(out, stdout)?;
            if let Some(err) = err.as_deref_mut() {
                moved += pump(err, stderr)?;
            }
            if let Some(exit) = finished {
                return Ok(WaitOutcome::Finished(exit));
            }
            if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                return Ok(WaitOutcome::StillRunning);
            }
            if moved == 0 {
                std::thread::sleep(backoff.next_pause());
            }
        }
    }

    /// True when the supervisor of this launch no longer exists.
    fn supervisor_gone(&mut self, launch: &LaunchRecord) -> bool {
        if self.child.is_some() {
            return self.supervisor_exit_status().is_some();
        }
        !launch.supervisor.is_alive()
    }

    /// When this process started the supervisor and it has exited, its wait status
    /// (the child is reaped by this call).
    pub(crate) fn supervisor_exit_status(&mut self) -> Option<String> {
        let child = self.child.as_mut()?;
        match child.try_wait() {
            Ok(Some(status)) => {
                self.child = None;
                Some(status.to_string())
            }
            Ok(None) => None,
            Err(error) => {
                self.child = None;
                Some(format!("unknown ({error})"))
            }
        }
    }

    /// Kills the supervisor this process started, which recorded nothing in time, and
    /// records the loss (killing the leaf, should it have been launched after all).
    pub(crate) fn abandon_supervisor(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGKILL (std's `Child::kill`) to our own supervisor child: it recorded no
            // launch within the timeout, so it is stuck or far too slow, and as our
            // unreaped child its pid cannot belong to anybody else.
            let _ = child.kill();
            let _ = child.wait();
        }
        if !self.dir.exit().exists() {
            let launch = self.launch_record().ok().flatten();
            let _ = self.record_lost(launch.as_ref());
        }
    }

    /// Reaps the supervisor this process started, once it has recorded the exit, if
    /// it has already exited; otherwise `Drop` leaves that to a thread, so a reader
    /// never waits for the supervisor's own teardown.
    fn reap_supervisor(&mut self) {
        if let Some(child) = self.child.as_mut()
            && matches!(child.try_wait(), Ok(Some(_)))
        {
            self.child = None;
        }
    }

    /// Records `supervisor_lost`, after killing the leaf's tree, unless another
    /// reader got there first; either way returns the recorded exit.
    pub(crate) fn record_lost(
        &mut self,
        launch: Option<&LaunchRecord>,
    ) -> Result<ExitRecord, LeafError> {
        let heartbeat = self.heartbeat().ok().flatten();
        let leaked = launch.map_or(0, |launch| {
            crate::unix::lost::kill_lost_tree(launch, heartbeat.as_ref())
        });
        let mut exit = ExitRecord::without_run(&self.id, ExitClass::SupervisorLost, leaked);
        if let Some(heartbeat) = &heartbeat {
            exit.stdout_bytes = heartbeat.stdout_bytes;
            exit.stderr_bytes = heartbeat.stderr_bytes;
        }
        if records::create_json(&self.dir.exit(), &exit)? {
            // A failed report cannot undo the loss; the record on disk is the truth.
            let _ = self
                .reporter
                .report(&LeafEvent::Exited { exit: exit.clone() });
            return Ok(exit);
        }
        let recorded = records::read_json::<ExitRecord>(&self.dir.exit())?;
        Ok(recorded.unwrap_or(exit))
    }
}

impl Drop for LeafHandle {
    fn drop(&mut self) {
        // A supervisor we started must be reaped by us, or it stays a zombie for as
        // long as this process lives. It may run for hours; a thread waits for it.
        if let Some(mut child) = self.child.take()
            && !matches!(child.try_wait(), Ok(Some(_)))
        {
            std::thread::spawn(move || child.wait());
        }
    }
}

fn pump(follower: &mut Follower, sink: &mut dyn Write) -> Result<u64, LeafError> {
    follower.pump(sink).map_err(|source| LeafError::Output {
        path: follower.path().to_path_buf(),
        source,
    })
}

/// Pauses for polling loops, proportional to how long the wait has lasted: a
/// sixteenth of it, between 0.5 ms and 50 ms. Short leaves are noticed within a
/// fraction of a millisecond; a leaf that runs for an hour costs twenty cheap reads a
/// second; and the delay in noticing an exit is never more than about 6% of the wait.
pub(crate) struct Backoff {
    since: Instant,
}

impl Backoff {
    const MIN: Duration = Duration::from_micros(500);
    const MAX: Duration = Duration::from_millis(50);

    pub(crate) fn since(since: Instant) -> Backoff {
        Backoff { since }
    }

    pub(crate) fn next_pause(&mut self) -> Duration {
        (self.since.elapsed() / 16).clamp(Backoff::MIN, Backoff::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_grow_with_the_wait_and_stay_bounded() {
        let now = Instant::now();
        assert_eq!(Backoff::since(now).next_pause(), Backoff::MIN);
        let long_ago = now.checked_sub(Duration::from_secs(3600)).unwrap_or(now);
        let pause = Backoff::since(long_ago).next_pause();
        assert!(pause == Backoff::MAX || long_ago == now);
    }
}
