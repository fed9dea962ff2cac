//! Blindness is a type: building a `VerifierInput` from developer output does not
//! compile. Each file in `tests/ui/` tries one way in (a `String`, a leaf's stdout,
//! a leaf's `Response`) and its `.stderr` records the compiler's refusal.

#[test]
fn a_verifier_input_cannot_be_built_from_developer_output() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}
