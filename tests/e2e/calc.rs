//! The demo's calc crate and the one-criterion issue that adds `sub` to it: what the
//! `tdd conduct` tests build their repositories from.

use crate::support::Env;

/// The issue: one criterion.
pub const ISSUE_ONE: &str = "# Subtraction\n\nUsers need to subtract.\n\n## Acceptance criteria\n\n- [ ] `calc::sub(5, 2)` returns 3\n";
/// The plan a planner writes for it.
pub const PLAN_ONE: &str = "---\ncycles:\n  - n: 1\n    project: app\n    title: subtraction\n    test: app::calc::sub subtracts\n    files: [src/lib.rs]\n    stub_expected: [src/lib.rs]\n    criterion: \"1\"\n---\n";
/// The crate's library before the step.
pub const LIB: &str = include_str!("../../examples/demo/src/lib.rs");
/// What RED appends to it.
pub const STUB: &str = "\npub fn sub(_a: i32, _b: i32) -> i32 {\n    0\n}\n";
/// What GREEN makes of the stub.
pub const IMPL: &str = "\npub fn sub(a: i32, b: i32) -> i32 {\n    a - b\n}\n";
/// The test RED writes, as `tests/sub.rs`.
pub const TEST: &str = "#[test]\nfn subtracts() {\n    assert_eq!(calc::sub(5, 2), 3);\n}\n";

/// Writes the calc crate (manifest, library, its one test, `.gitignore`) into `env`.
pub fn write_crate(env: &Env) {
    env.write("Cargo.toml", include_str!("../../examples/demo/Cargo.toml"));
    env.write("src/lib.rs", LIB);
    env.write(
        "tests/add.rs",
        include_str!("../../examples/demo/tests/add.rs"),
    );
    env.write(".gitignore", "target/\nCargo.lock\n");
}
