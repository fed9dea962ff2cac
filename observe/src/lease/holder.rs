//! The process that holds a lease, named as the supervisor names a process.

use std::fs;
use std::io;

use serde::Deserialize;
use serde::Serialize;

use super::LeaseError;

/// The process that holds a lease: its pid and the start time the kernel reports in
/// field 22 of `/proc/<pid>/stat` (clock ticks since boot). Two processes never share
/// both, so a recycled pid never keeps a dead holder's lease alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Holder {
    /// The process id.
    pub pid: i32,
    /// Field 22 of `/proc/<pid>/stat`.
    pub start_time: u64,
}

impl Holder {
    /// This process.
    pub fn this_process() -> Result<Holder, LeaseError> {
        Holder::of(std::process::id() as i32)
    }

    /// The process that has `pid` now.
    pub fn of(pid: i32) -> Result<Holder, LeaseError> {
        let (_, start_time) = stat(pid).map_err(|source| LeaseError::NoHolder { pid, source })?;
        Ok(Holder { pid, start_time })
    }

    /// True when this very process (same pid, same start time) exists and is not a
    /// zombie; a pid now used by another process is not alive.
    pub fn is_alive(&self) -> bool {
        match stat(self.pid) {
            Ok((state, start)) => start == self.start_time && !matches!(state, b'Z' | b'X' | b'x'),
            Err(_) => false,
        }
    }
}

/// The state (field 3) and start time (field 22) of `/proc/<pid>/stat`. The command name
/// (field 2) may hold spaces and parentheses, so fields are counted after the last `)`.
fn stat(pid: i32) -> io::Result<(u8, u64)> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let bad = || io::Error::new(io::ErrorKind::InvalidData, format!("bad /proc/{pid}/stat"));
    let rest = &text[text.rfind(')').ok_or_else(bad)? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields
        .first()
        .and_then(|f| f.bytes().next())
        .ok_or_else(bad)?;
    let start = fields
        .get(19)
        .and_then(|f| f.parse().ok())
        .ok_or_else(bad)?;
    Ok((state, start))
}
