//! Blindness is a type: building a `VerifierInput` from developer output does not
//! compile. Each file in `tests/ui/` tries one way in (a `String`, a leaf's stdout,
//! a leaf's `Response`) and its `.stderr` records the compiler's refusal.
//!
//! trybuild compiles every case against a fresh build of the crates, which takes
//! about two minutes, so a plain `cargo test` lists this test as ignored instead of
//! running it. `cargo xtask test --all` runs it, and so does `cargo xtask test` under
//! CI; by hand: `cargo test --workspace --test blind -- --ignored`.

#[test]
#[ignore = "compile-fail suite (about two minutes): cargo xtask test --all, or cargo test --workspace --test blind -- --ignored"]
fn a_verifier_input_cannot_be_built_from_developer_output() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}
