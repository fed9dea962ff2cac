//! Heartbeats from runner processes that take a while: how long the run has gone on and
//! how many tests the runner has reported finished so far.
//!
//! The crate prints nothing itself. A program installs one sink with [`install`]; every
//! runner process then reports to it at the installed interval while it runs. Without a
//! sink, nothing is counted.

use std::sync::OnceLock;
use std::time::Duration;

use crate::config::AdapterKind;

/// One heartbeat of a runner process still running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Beat<'a> {
    /// The project the runner observes.
    pub project: &'a str,
    /// Which of the observation's processes it is (`run`, `nextest`, `build`, ...).
    pub label: &'a str,
    /// Time since the process started.
    pub elapsed: Duration,
    /// Tests the runner has reported finished so far, where its live output says;
    /// `None` for runners that report only at the end.
    pub tests_seen: Option<u64>,
}

type Sink = Box<dyn Fn(&Beat<'_>) + Send + Sync>;

struct Installed {
    every: Duration,
    sink: Sink,
}

static INSTALLED: OnceLock<Installed> = OnceLock::new();

/// Sends a [`Beat`] to `sink` every `every` (at least 100 ms) while a runner process
/// runs. The first sink installed stays; returns whether this one was.
pub fn install(every: Duration, sink: impl Fn(&Beat<'_>) + Send + Sync + 'static) -> bool {
    INSTALLED
        .set(Installed {
            every: every.max(Duration::from_millis(100)),
            sink: Box::new(sink),
        })
        .is_ok()
}

/// The heartbeat interval, when a sink is installed.
pub(crate) fn interval() -> Option<Duration> {
    INSTALLED.get().map(|i| i.every)
}

/// Reports `beat` to the installed sink, if any.
pub(crate) fn send(beat: &Beat<'_>) {
    if let Some(installed) = INSTALLED.get() {
        (installed.sink)(beat);
    }
}

/// Which captured stream holds a runner's live per-test lines, and how to count them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Live {
    /// pytest `-q` on stdout: one character per finished test (`.`, `F`, `E`, `s`, `x`,
    /// `X`), in lines that end with a percentage.
    PytestDots,
    /// `go test -json` on stdout: a `pass`, `fail` or `skip` action naming a test.
    GoJson,
    /// cargo-nextest on stderr: a `PASS [`, `FAIL [`, `SKIP` or `TIMEOUT [` status line.
    NextestLines,
}

impl Live {
    /// The live stream of the process `label` of an `adapter` project, if it has one.
    pub(crate) fn of(adapter: AdapterKind, label: &str) -> Option<Live> {
        match (adapter, label) {
            (AdapterKind::Pytest, "run") => Some(Live::PytestDots),
            (AdapterKind::Go, "run") => Some(Live::GoJson),
            (AdapterKind::Cargo, "nextest") => Some(Live::NextestLines),
            _ => None,
        }
    }

    /// Whether the stream is stderr (else stdout).
    pub(crate) fn on_stderr(self) -> bool {
        self == Live::NextestLines
    }

    /// Finished tests in `text`, a prefix of the stream (its last line may be partial).
    pub(crate) fn count(self, text: &[u8]) -> u64 {
        let text = String::from_utf8_lossy(text);
        let lines = text.lines();
        let counted = match self {
            Live::PytestDots => lines.map(pytest_dots).sum(),
            Live::GoJson => lines
                .filter(|l| l.contains("\"Test\":"))
                .filter(|l| {
                    [
                        "\"Action\":\"pass\"",
                        "\"Action\":\"fail\"",
                        "\"Action\":\"skip\"",
                    ]
                    .iter()
                    .any(|a| l.contains(a))
                })
                .count(),
            Live::NextestLines => lines
                .map(str::trim_start)
                .filter(|l| {
                    ["PASS [", "FAIL [", "SKIP ", "TIMEOUT ["]
                        .iter()
                        .any(|s| l.starts_with(s))
                })
                .count(),
        };
        u64::try_from(counted).unwrap_or(u64::MAX)
    }
}

/// The finished tests a pytest `-q` progress line shows: its characters before the
/// `[ NN%]` column, when they are all progress characters.
fn pytest_dots(line: &str) -> usize {
    let marks = line.split('[').next().unwrap_or_default().trim_end();
    let progress = |c: char| matches!(c, '.' | 'F' | 'E' | 's' | 'x' | 'X');
    if !marks.is_empty() && marks.chars().all(progress) {
        marks.len()
    } else {
        0
    }
}

/// Reads what a live stream holds so far and counts its finished tests.
pub(crate) fn seen(live: Live, stdout: &std::fs::File, stderr: &std::fs::File) -> Option<u64> {
    let file = if live.on_stderr() { stderr } else { stdout };
    let bytes = crate::exec::read_capped(file)?;
    Some(live.count(&bytes))
}

#[cfg(test)]
mod tests {
    use super::Live;

    #[test]
    fn counts_finished_tests_in_each_live_stream() {
        let pytest = b"....F.s                                   [ 60%]\n..x";
        assert_eq!(Live::PytestDots.count(pytest), 10);
        assert_eq!(Live::PytestDots.count(b"2 passed in 0.01s\n"), 0);
        let go = concat!(
            "{\"Action\":\"run\",\"Package\":\"p\",\"Test\":\"TestA\"}\n",
            "{\"Action\":\"pass\",\"Package\":\"p\",\"Test\":\"TestA\",\"Elapsed\":0}\n",
            "{\"Action\":\"fail\",\"Package\":\"p\",\"Test\":\"TestB\",\"Elapsed\":0}\n",
            "{\"Action\":\"pass\",\"Package\":\"p\",\"Elapsed\":0}\n",
        );
        assert_eq!(Live::GoJson.count(go.as_bytes()), 2);
        let nextest = concat!(
            "    Starting 3 tests across 1 binary\n",
            "        PASS [   0.004s] calc tests::a\n",
            "        FAIL [   0.010s] calc tests::b\n",
            "        SKIP [         ] calc tests::c\n",
            "     Summary [   0.020s] 3 tests run: 1 passed, 1 failed, 1 skipped\n",
        );
        assert_eq!(Live::NextestLines.count(nextest.as_bytes()), 3);
    }
}
