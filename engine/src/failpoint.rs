//! Test-only failpoints: `TDD_FAILPOINT=<name>=<action>` makes `tdd` fail at a named point.
//!
//! One mechanism for the binary and every crate (the conductor's crash tests use it).
//!
//! Tests use them to prove that a crash anywhere loses nothing. Actions: `panic`
//! (an internal error) and `kill` (SIGKILL to this process, as a crash would).
//!
//! Compiled in only with the `failpoints` feature, which the workspace's own tests enable
//! (the binary's dev-dependency on this crate) and no build of `tdd` for use does: there
//! [`hit`] does nothing and `TDD_FAILPOINT` is not read.

/// Does nothing: this build has no failpoints (the `failpoints` feature is off).
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn hit(_name: &str) {}

/// How many times `name` has been reached in this process, this time included.
#[cfg(feature = "failpoints")]
fn reached(name: &str) -> u32 {
    use std::collections::HashMap;
    use std::sync::Mutex;
    use std::sync::OnceLock;
    static COUNTS: OnceLock<Mutex<HashMap<String, u32>>> = OnceLock::new();
    let mut counts = COUNTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let count = counts.entry(name.to_string()).or_insert(0);
    *count += 1;
    *count
}

/// Fails here if `TDD_FAILPOINT` names this point (`name=action`, or `name#k=action` for
/// its k-th time).
#[cfg(feature = "failpoints")]
pub fn hit(name: &str) {
    let Some(spec) = std::env::var_os("TDD_FAILPOINT") else {
        return;
    };
    let spec = spec.to_string_lossy();
    let mut count = None;
    for entry in spec.split(',') {
        let Some((point, action)) = entry.split_once('=') else {
            continue;
        };
        // `name#k` fails at the k-th time the point is reached, not the first.
        let (point, nth) = match point.split_once('#') {
            Some((point, k)) => (point, k.parse::<u32>().unwrap_or(1)),
            None => (point, 1),
        };
        if point != name || *count.get_or_insert_with(|| reached(name)) != nth {
            continue;
        }
        match action {
            "panic" => panic!("failpoint {name} reached"),
            "kill" => {
                // SIGKILL to ourselves: the one way to die that runs no destructor and no
                // handler, exactly like the OOM killer or a power cut of the process.
                let _ = std::process::Command::new("kill")
                    .args(["-9", &std::process::id().to_string()])
                    .status();
                std::process::abort();
            }
            _ => {}
        }
    }
}
