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

/// Fails here if `TDD_FAILPOINT` names this point.
#[cfg(feature = "failpoints")]
pub fn hit(name: &str) {
    let Some(spec) = std::env::var_os("TDD_FAILPOINT") else {
        return;
    };
    let spec = spec.to_string_lossy();
    for entry in spec.split(',') {
        let Some((point, action)) = entry.split_once('=') else {
            continue;
        };
        if point != name {
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
