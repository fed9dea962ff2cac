use tdd_observe::FailureKind;
use tdd_observe::TargetStatus::*;
use tdd_observe::config::AdapterKind;

use crate::common::Fixture;
use crate::common::TestResult;
use crate::common::require;
use tdd_observe::observe_target;

const CALC: &str = r#"package calc

import "testing"

func TestAdd(t *testing.T) {
	if 1+1 != 2 {
		t.Fatal("bad")
	}
}

func TestFail(t *testing.T) { t.Errorf("expected %d, got %d", 3, 2) }

func TestSkip(t *testing.T) { t.Skip("later") }

func TestSub(t *testing.T) {
	t.Run("one case", func(t *testing.T) {})
	t.Run("two", func(t *testing.T) { t.Error("nope") })
}
"#;

const PANICS: &str = r#"package panics

import "testing"

func TestPanic(t *testing.T) {
	var m map[string]int
	m["a"] = 1
}
"#;

fn fixture() -> Result<Fixture, Box<dyn std::error::Error>> {
    require(&["go", "version"], "apt-get install -y golang-go");
    Fixture::new(
        AdapterKind::Go,
        &[
            ("go.mod", "module example.com/m\n\ngo 1.19\n"),
            ("calc/calc_test.go", CALC),
            ("panics/panics_test.go", PANICS),
            (
                "broken/broken_test.go",
                "package broken\n\nimport \"testing\"\n\nfunc TestX(t *testing.T) { _ = undefinedThing }\n",
            ),
        ],
    )
}

#[test]
fn go_outcomes() -> TestResult {
    let fx = fixture()?;
    let observation = fx.run_all()?;
    let collection = fx.collect()?;
    assert_eq!(observation.runner_error, None);
    assert!(
        collection.ids.contains("app::example.com/m/calc::TestSub"),
        "{collection:?}"
    );
    assert_eq!(observation.collection_errors.len(), 1, "{observation:?}");
    assert_eq!(observation.collection_errors[0].kind, FailureKind::Compile);
    fx.expect(
        &observation,
        &collection,
        &[
            ("example.com/m/calc::TestAdd", Passed),
            ("example.com/m/calc::TestSub/one_case", Passed),
            ("example.com/m/calc::TestSub/two", FailedAssertion),
            ("example.com/m/calc::TestFail", FailedAssertion),
            ("example.com/m/panics::TestPanic", FailedError),
            ("example.com/m/calc::TestSkip", NotRun),
            ("example.com/m/broken::TestX", CompileError),
            ("example.com/m/calc::TestNope", NotFound),
        ],
    );
    fx.expect_alone("example.com/m/calc::TestAdd", Passed)?;
    fx.expect_alone("example.com/m/calc::TestSub/two", FailedAssertion)?;
    fx.expect_alone("example.com/m/broken::TestX", CompileError)?;
    fx.expect_alone("example.com/m/calc::TestNope", NotFound)?;
    Ok(())
}

/// A test name without its package finds the one test of that name under
/// `./...`; a name two packages share is ambiguous and names both.
#[test]
fn go_names_without_their_package() -> TestResult {
    let fx = fixture()?;
    std::fs::create_dir_all(fx.dir.path().join("again"))?;
    std::fs::write(
        fx.dir.path().join("again/again_test.go"),
        "package again\n\nimport \"testing\"\n\nfunc TestSkip(t *testing.T) {}\n",
    )?;
    let alone = |native: &str| observe_target(fx.adapter.as_ref(), &fx.project, native);
    let (_, add) = alone("TestAdd")?;
    assert_eq!(add.status, Passed, "{add:?}");
    assert_eq!(add.matched, vec!["app::example.com/m/calc::TestAdd"]);
    let (_, two) = alone("TestSub/two")?;
    assert_eq!(two.status, FailedAssertion, "{two:?}");
    assert_eq!(two.matched, vec!["app::example.com/m/calc::TestSub/two"]);
    let (_, shared) = alone("TestSkip")?;
    assert_eq!(shared.status, NotFound, "{shared:?}");
    assert!(
        shared
            .detail
            .as_deref()
            .is_some_and(|d| d.contains("ambiguous")),
        "{shared:?}"
    );
    assert_eq!(shared.matched.len(), 2, "{shared:?}");
    fx.expect_alone("TestNope", NotFound)?;
    Ok(())
}
