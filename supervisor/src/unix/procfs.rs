//! Reading `/proc`: process identity (pid plus start time), parentage, process group
//! and session, and peak memory.
//!
//! Everything the crate decides about "is this still our process" goes through here,
//! so that a pid recycled by the kernel is never mistaken for the process we started.

use std::collections::HashMap;
use std::collections::HashSet;
use std::fs;
use std::io;

use crate::records::ProcessId;

/// The fields of `/proc/<pid>/stat` the supervisor needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcStat {
    pub pid: i32,
    /// Field 3: `R`, `S`, `D`, `Z`, `T`, ...
    pub state: u8,
    /// Field 4.
    pub ppid: i32,
    /// Field 5: the process group.
    pub pgrp: i32,
    /// Field 6: the session.
    pub session: i32,
    /// Field 22: start time in clock ticks since boot.
    pub start_time: u64,
}

impl ProcStat {
    /// A zombie (exited, not yet reaped) or dead process: it can no longer run, write
    /// or be harmed by a signal.
    pub fn is_zombie(&self) -> bool {
        matches!(self.state, b'Z' | b'X' | b'x')
    }

    /// The identity of this process.
    pub fn id(&self) -> ProcessId {
        ProcessId {
            pid: self.pid,
            start_time: self.start_time,
        }
    }
}

/// Parses the text of `/proc/<pid>/stat`. The command name (field 2) may contain
/// spaces and parentheses, so parsing starts after the last `)`.
pub(crate) fn parse_stat(pid: i32, text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `fields[0]` is field 3 of the man page, so field N is `fields[N - 3]`.
    Some(ProcStat {
        pid,
        state: *fields.first()?.as_bytes().first()?,
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        session: fields.get(3)?.parse().ok()?,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

/// Reads `/proc/<pid>/stat`; `NotFound` when no such process exists.
pub(crate) fn read_stat(pid: i32) -> io::Result<ProcStat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat"))?;
    parse_stat(pid, &text)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("bad /proc/{pid}/stat")))
}

/// True when the process with this identity exists and is not a zombie.
pub(crate) fn is_alive(id: ProcessId) -> bool {
    match read_stat(id.pid) {
        Ok(stat) => stat.start_time == id.start_time && !stat.is_zombie(),
        Err(_) => false,
    }
}

/// Every process visible in `/proc`. Processes that vanish while scanning are skipped.
pub(crate) fn scan() -> io::Result<Vec<ProcStat>> {
    let mut processes = Vec::new();
    for entry in fs::read_dir("/proc")? {
        let Ok(entry) = entry else { continue };
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<i32>().ok())
        else {
            continue;
        };
        if let Ok(stat) = read_stat(pid) {
            processes.push(stat);
        }
    }
    Ok(processes)
}

/// The processes of a supervisor's tree: every descendant of `root` by parentage,
/// plus every member of `session` (the supervisor's own session, which a descendant
/// leaves only by calling `setsid`; such a process is still found by parentage, or,
/// once orphaned, re-parented to the subreaper `root`). `root` itself is excluded.
pub(crate) fn tree(processes: &[ProcStat], root: i32, session: i32) -> Vec<ProcStat> {
    let mut children: HashMap<i32, Vec<&ProcStat>> = HashMap::new();
    for process in processes {
        children.entry(process.ppid).or_default().push(process);
    }
    let mut found: HashSet<i32> = HashSet::new();
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(parent) = stack.pop() {
        for child in children.get(&parent).into_iter().flatten() {
            if child.pid != root && found.insert(child.pid) {
                out.push(**child);
                stack.push(child.pid);
            }
        }
    }
    for process in processes {
        if process.session == session && process.pid != root && found.insert(process.pid) {
            out.push(*process);
        }
    }
    out
}

/// Peak resident set size (`VmHWM`) in KiB of `pid`, or of this process for `None`.
pub(crate) fn peak_rss_kib(pid: Option<i32>) -> Option<u64> {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/status"),
        None => String::from("/proc/self/status"),
    };
    let text = fs::read_to_string(path).ok()?;
    let line = text.lines().find(|line| line.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_with_spaces_and_parentheses() {
        let text = "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 9876 0 0";
        let stat = parse_stat(42, text).expect("parses");
        assert_eq!(stat.state, b'S');
        assert_eq!((stat.ppid, stat.pgrp, stat.session), (1, 42, 42));
        assert_eq!(stat.start_time, 9876);
        assert!(parse_stat(1, "1 (x) S 0").is_none());
    }

    #[test]
    fn this_process_is_alive_and_a_wrong_start_time_is_not() {
        let me = ProcessId::of(std::process::id() as i32).expect("own stat");
        assert!(is_alive(me));
        assert!(!is_alive(ProcessId {
            pid: me.pid,
            start_time: me.start_time + 1
        }));
        assert!(peak_rss_kib(None).is_some_and(|kib| kib > 0));
    }

    #[test]
    fn tree_follows_parents_and_session() {
        let stat = |pid, ppid, session| ProcStat {
            pid,
            state: b'S',
            ppid,
            pgrp: pid,
            session,
            start_time: 1,
        };
        // 10 is the root; 11 its child; 12 a grandchild that left the session;
        // 13 an orphan still in the session; 14 unrelated.
        let all = [
            stat(10, 1, 10),
            stat(11, 10, 10),
            stat(12, 11, 12),
            stat(13, 1, 10),
            stat(14, 1, 14),
        ];
        let mut pids: Vec<i32> = tree(&all, 10, 10).iter().map(|p| p.pid).collect();
        pids.sort_unstable();
        assert_eq!(pids, vec![11, 12, 13]);
    }
}
