//! The supervisor's event loop: one thread, one `poll`, fixed buffers.
//!
//! It waits on the leaf's output pipes, the signal socket and the wake FIFO, with a
//! timeout that is the nearest deadline (wall, idle, grace, heartbeat). Each turn it
//! drains output, reaps children, and checks limits and requests. When the leaf has
//! been reaped it kills what is left of the tree, finishes the output files and
//! returns the exit record.

use std::fs::File;
use std::os::fd::AsFd;
use std::time::Duration;
use std::time::Instant;

use nix::poll::PollFd;
use nix::poll::PollFlags;
use nix::poll::PollTimeout;
use nix::sys::signal::Signal as NixSignal;
use time::OffsetDateTime;

use super::capture;
use super::capture::Stream;
use super::cleanup;
use super::cleanup::LeafStatus;
use super::signals;
use super::signals::Incoming;
use super::supervise::Spawned;
use super::supervise::log;
use super::supervise::report;
use crate::class::ExitClass;
use crate::class::KillReason;
use crate::class::Signal;
use crate::clock;
use crate::records;
use crate::records::ExitRecord;
use crate::records::Heartbeat;
use crate::records::Job;
use crate::records::KillRequest;
use crate::records::LeafDir;
use crate::records::ProcessId;
use crate::report::LeafEvent;
use crate::report::Reporter;

/// How long, after the whole tree is dead, the supervisor waits for the output pipes
/// to reach end-of-file. Only a process outside the tree holding a pipe open (passed
/// over a socket) can make it wait that long.
const DRAIN_BOUND: Duration = Duration::from_secs(2);

/// Why the supervisor is killing the leaf.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KillCause {
    Stuck(KillReason),
    Requested,
    External(i32),
}

/// A kill in progress.
#[derive(Debug, Clone, Copy)]
struct Kill {
    cause: KillCause,
    term_sent: Instant,
    sigkill_sent: Option<Instant>,
}

/// The state of one supervised leaf.
pub(super) struct Run<'a> {
    job: &'a Job,
    dir: &'a LeafDir,
    reporter: &'a dyn Reporter,
    leaf: ProcessId,
    started: Instant,
    stdout: Stream,
    stderr: Option<Stream>,
    incoming: Incoming,
    wake: Option<File>,
    buffer: Vec<u8>,
    last_output: Instant,
    last_output_at: Option<OffsetDateTime>,
    kill: Option<Kill>,
    heartbeat_seq: u64,
    next_tick: Instant,
}

impl<'a> Run<'a> {
    pub fn new(
        job: &'a Job,
        dir: &'a LeafDir,
        reporter: &'a dyn Reporter,
        spawned: Spawned,
        incoming: Incoming,
        wake: Option<File>,
    ) -> Run<'a> {
        Run {
            job,
            dir,
            reporter,
            leaf: spawned.leaf,
            started: spawned.started,
            stdout: spawned.stdout,
            stderr: spawned.stderr,
            incoming,
            wake,
            buffer: vec![0; capture::BUFFER_BYTES],
            last_output: spawned.started,
            last_output_at: None,
            kill: None,
            heartbeat_seq: 0,
            next_tick: spawned.started + Duration::from_millis(job.heartbeat_ms),
        }
    }

    /// Supervises the leaf until it is reaped and its tree is gone.
    pub fn supervise(mut self) -> ExitRecord {
        // Requests made before the leaf existed (a kill, a `now` stop) count too.
        let mut check_requests = true;
        let status = loop {
            if check_requests {
                self.check_requests();
            }
            let poked = self.wait_for_events();
            self.read_output();
            if let Some(status) = cleanup::reap(self.leaf.pid).leaf {
                break status;
            }
            let now = Instant::now();
            self.check_termination();
            self.check_limits(now);
            let tick = now >= self.next_tick;
            check_requests = poked || tick;
            if tick {
                self.check_directory();
                self.heartbeat();
                self.next_tick = now + Duration::from_millis(self.job.heartbeat_ms);
            }
        };
        self.finish(status)
    }

    /// Blocks until output, a signal or a wake-up arrives, or the nearest deadline.
    /// Returns whether the wake FIFO was written to.
    fn wait_for_events(&mut self) -> bool {
        let timeout = self.poll_timeout(Instant::now());
        let events = PollFlags::POLLIN;
        let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(4);
        fds.push(PollFd::new(self.incoming.wakeups.as_fd(), events));
        let wake_index = self.wake.as_ref().map(|wake| {
            fds.push(PollFd::new(wake.as_fd(), events));
            fds.len() - 1
        });
        for stream in [Some(&self.stdout), self.stderr.as_ref()]
            .into_iter()
            .flatten()
        {
            if let Some(fd) = stream.fd() {
                fds.push(PollFd::new(fd, events));
            }
        }
        // EINTR (a signal arrived) is just another wake-up.
        let _ = nix::poll::poll(&mut fds, timeout);
        let poked = wake_index
            .and_then(|index| fds[index].revents())
            .is_some_and(|revents| revents.contains(PollFlags::POLLIN));
        drop(fds);
        super::wake::drain(&self.incoming.wakeups);
        if let (true, Some(wake)) = (poked, self.wake.as_ref()) {
            super::wake::drain(wake);
        }
        poked
    }

    /// Time until the nearest deadline, rounded up to the next millisecond.
    fn poll_timeout(&self, now: Instant) -> PollTimeout {
        let mut next = self.next_tick;
        match self.kill {
            Some(kill) if kill.sigkill_sent.is_none() => {
                next = next.min(kill.term_sent + self.grace());
            }
            Some(_) => {}
            None => {
                if let Some(wall) = self.job.wall_timeout_ms {
                    next = next.min(self.started + Duration::from_millis(wall));
                }
                if let Some(idle) = self.job.idle_timeout_ms {
                    next = next.min(self.last_output + Duration::from_millis(idle));
                }
            }
        }
        let wait = next.saturating_duration_since(now);
        let millis = wait.as_millis() + u128::from(!wait.subsec_nanos().is_multiple_of(1_000_000));
        PollTimeout::try_from(millis).unwrap_or(PollTimeout::MAX)
    }

    fn grace(&self) -> Duration {
        Duration::from_millis(self.job.grace_ms)
    }

    /// Drains both pipes into their files; the cap starts a kill.
    fn read_output(&mut self) {
        let mut newly_cut = false;
        let mut bytes = 0;
        for stream in [Some(&mut self.stdout), self.stderr.as_mut()]
            .into_iter()
            .flatten()
        {
            let drained = stream.drain(&mut self.buffer);
            bytes += drained.bytes;
            newly_cut |= drained.newly_cut;
        }
        if bytes > 0 {
            self.last_output = Instant::now();
            self.last_output_at = Some(OffsetDateTime::now_utc());
        }
        if newly_cut {
            self.begin_kill(KillCause::Stuck(KillReason::OutputLimit));
        }
    }

    /// Passes a termination signal received by the supervisor on to the leaf.
    fn check_termination(&mut self) {
        if let Some(signal) = self.incoming.termination() {
            self.begin_kill(KillCause::External(signal));
        }
    }

    /// Escalates a kill in progress, or starts one when a limit is reached.
    fn check_limits(&mut self, now: Instant) {
        if let Some(kill) = self.kill {
            if kill.sigkill_sent.is_none() && now >= kill.term_sent + self.grace() {
                self.sigkill("the grace period after SIGTERM ran out");
            }
            return;
        }
        let since_start = now.saturating_duration_since(self.started);
        let since_output = now.saturating_duration_since(self.last_output);
        if self
            .job
            .wall_timeout_ms
            .is_some_and(|wall| since_start >= Duration::from_millis(wall))
        {
            self.begin_kill(KillCause::Stuck(KillReason::WallTimeout));
        } else if self
            .job
            .idle_timeout_ms
            .is_some_and(|idle| since_output >= Duration::from_millis(idle))
        {
            self.begin_kill(KillCause::Stuck(KillReason::IdleTimeout));
        }
    }

    /// Re-reads the stop request and this leaf's kill request.
    fn check_requests(&mut self) {
        if crate::stop::read_stop(&self.job.state_dir).is_some_and(|stop| stop.mode.kills_running())
        {
            self.begin_kill(KillCause::Requested);
        }
        match records::read_json::<KillRequest>(&self.dir.kill()) {
            Ok(Some(request)) => {
                self.begin_kill(KillCause::Requested);
                if request.force && self.kill.is_some_and(|kill| kill.sigkill_sent.is_none()) {
                    self.sigkill("a forced kill was requested");
                }
            }
            Ok(None) => {}
            Err(error) => log(format_args!("ignoring an unreadable kill request: {error}")),
        }
    }

    /// Ends the leaf when its directory was deleted: nobody can read its records or
    /// ask for its exit any more, and a leaf nobody can see must not run for ever.
    fn check_directory(&mut self) {
        if self.kill.is_none() && !self.dir.job().exists() {
            log(format_args!("the leaf directory is gone; ending the leaf"));
            self.begin_kill(KillCause::Requested);
        }
    }

    /// Starts the graceful kill of the leaf's group, unless one is already under way
    /// (the first cause is the one recorded).
    fn begin_kill(&mut self, cause: KillCause) {
        if self.kill.is_some() {
            return;
        }
        let now = Instant::now();
        self.kill = Some(Kill {
            cause,
            term_sent: now,
            sigkill_sent: None,
        });
        // SIGTERM to the leaf's whole process group, not just the leaf: a shell or a
        // test runner that is killed alone leaves its children running. SIGTERM first,
        // because agents and test runners flush logs and remove temporary files on it;
        // the grace period bounds how long they may take.
        if let Err(error) = signals::to_group(self.leaf.pid, NixSignal::SIGTERM) {
            log(format_args!(
                "SIGTERM to group {} failed: {error}",
                self.leaf.pid
            ));
        }
        self.report_signal(Signal::TERM, describe(cause));
        if self.job.grace_ms == 0 {
            self.sigkill("the grace period is zero");
        }
    }

    /// Ends the leaf's group without further delay.
    fn sigkill(&mut self, why: &str) {
        if let Some(kill) = self.kill.as_mut() {
            kill.sigkill_sent = Some(Instant::now());
        }
        // SIGKILL to the leaf's process group: it did not end within the grace period
        // (or a forced kill was asked for), and SIGKILL cannot be caught or ignored.
        let _ = signals::to_group(self.leaf.pid, NixSignal::SIGKILL);
        // SIGKILL to the leaf itself as well, in case it moved to another group
        // (setpgid); it is our unreaped child, so its pid is still its own.
        signals::to_child(self.leaf.pid, NixSignal::SIGKILL);
        self.report_signal(Signal::KILL, why.to_owned());
    }

    fn report_signal(&self, signal: Signal, why: String) {
        let event = LeafEvent::Signalled {
            id: self.job.id.clone(),
            signal,
            pgid: self.leaf.pid,
            why,
        };
        report(self.reporter, &event);
    }

    /// Writes `heartbeat.json` with the live tree, for readers and for loss cleanup.
    fn heartbeat(&mut self) {
        self.heartbeat_seq += 1;
        let heartbeat = Heartbeat {
            version: records::FORMAT_VERSION,
            at: clock::now_rfc3339(),
            seq: self.heartbeat_seq,
            stdout_bytes: self.stdout.seen,
            stderr_bytes: self.stderr.as_ref().map_or(0, |stream| stream.seen),
            last_output_at: self.last_output_at.map(clock::format),
            descendants: cleanup::live_tree(),
        };
        if let Err(error) = records::write_json(&self.dir.heartbeat(), &heartbeat) {
            log(format_args!("heartbeat not written: {error}"));
        }
    }

    /// Kills leftovers, drains and closes the output, and builds the exit record.
    fn finish(mut self, status: LeafStatus) -> ExitRecord {
        let reaped = Instant::now();
        let leaked = cleanup::kill_leftovers(self.leaf.pid, &self.incoming);
        let all_gone = Instant::now();
        self.drain_to_end();
        self.stdout.finish();
        let mut output_cut = self.stdout.cut;
        if let Some(stderr) = self.stderr.as_mut() {
            stderr.finish();
            output_cut |= stderr.cut;
        }
        let since_start = |at: Instant| clock::millis(at.saturating_duration_since(self.started));
        ExitRecord {
            version: records::FORMAT_VERSION,
            id: self.job.id.clone(),
            class: classify(self.kill.map(|kill| kill.cause), status),
            leaked,
            ended_at: clock::now_rfc3339(),
            duration_ms: Some(since_start(reaped)),
            first_signal_after_ms: self.kill.map(|kill| since_start(kill.term_sent)),
            sigkill_after_ms: self
                .kill
                .and_then(|kill| kill.sigkill_sent)
                .map(since_start),
            all_gone_after_ms: Some(since_start(all_gone)),
            stdout_bytes: self.stdout.seen,
            stderr_bytes: self.stderr.as_ref().map_or(0, |stream| stream.seen),
            output_cut,
            supervisor_peak_rss_kib: super::procfs::peak_rss_kib(None),
        }
    }

    /// Reads the pipes until end-of-file; bounded, since the tree is already dead.
    fn drain_to_end(&mut self) {
        let deadline = Instant::now() + DRAIN_BOUND;
        loop {
            self.read_output();
            let open =
                !self.stdout.is_closed() || self.stderr.as_ref().is_some_and(|s| !s.is_closed());
            let now = Instant::now();
            if !open || now >= deadline {
                if open {
                    log(format_args!(
                        "output pipes still open after the tree died; closing"
                    ));
                }
                return;
            }
            let mut fds: Vec<PollFd<'_>> = [Some(&self.stdout), self.stderr.as_ref()]
                .into_iter()
                .flatten()
                .filter_map(|stream| stream.fd())
                .map(|fd| PollFd::new(fd, PollFlags::POLLIN))
                .collect();
            let left = deadline.saturating_duration_since(now);
            let _ = nix::poll::poll(
                &mut fds,
                PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX),
            );
        }
    }
}

/// The exit class from the kill cause (ours comes first: if we signalled the leaf,
/// its own status only tells how it took it) and the wait status.
fn classify(cause: Option<KillCause>, status: LeafStatus) -> ExitClass {
    match (cause, status) {
        (Some(KillCause::Stuck(reason)), _) => ExitClass::KillStuck { reason },
        (Some(KillCause::Requested), _) => ExitClass::Stopped,
        (Some(KillCause::External(signal)), _) => ExitClass::KilledExternal {
            signal: Signal::from_raw(signal),
        },
        (None, LeafStatus::Code(code)) => ExitClass::Exited { code },
        (None, LeafStatus::Signal(signal)) => ExitClass::KilledExternal {
            signal: Signal::from_raw(signal),
        },
    }
}

/// A few words on why a kill started, for the `signalled` event.
fn describe(cause: KillCause) -> String {
    match cause {
        KillCause::Stuck(reason) => reason.to_string(),
        KillCause::Requested => String::from("a stop or kill was requested"),
        KillCause::External(signal) => {
            format!("the supervisor received {}", Signal::from_raw(signal))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_kill_decides_the_class_whatever_the_status() {
        let wall = KillCause::Stuck(KillReason::WallTimeout);
        let class = classify(Some(wall), LeafStatus::Code(0));
        assert_eq!(
            class,
            ExitClass::KillStuck {
                reason: KillReason::WallTimeout
            }
        );
        assert_eq!(
            classify(Some(KillCause::Requested), LeafStatus::Signal(15)),
            ExitClass::Stopped
        );
        assert_eq!(
            classify(None, LeafStatus::Code(127)),
            ExitClass::Exited { code: 127 }
        );
        assert_eq!(
            classify(None, LeafStatus::Signal(9)),
            ExitClass::KilledExternal {
                signal: Signal::KILL
            }
        );
    }
}
