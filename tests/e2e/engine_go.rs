//! The engine end to end on a real Go module: RED on a stub, GREEN judged in the clean
//! room, which builds with a Go build cache of its own (never the user's `GOCACHE`,
//! which test code run in the live tree could have written).

use crate::support::Env;

const PLAN: &str = "---\ncycles:\n  - n: 1\n    project: go\n    title: subtraction\n    test: go::example.com/calc::TestSub\n    stub_expected: [calc.go]\n---\n";
const ADD: &str = "package calc\n\nfunc Add(a, b int) int { return a + b }\n";
const TEST: &str = "package calc\n\nimport \"testing\"\n\nfunc TestSub(t *testing.T) {\n\tif got := Sub(5, 2); got != 3 {\n\t\tt.Fatalf(\"Sub(5, 2) = %d, want 3\", got)\n\t}\n}\n";

#[test]
fn a_go_cycle_is_judged_in_the_clean_room_with_a_build_cache_of_its_own() {
    let shared = tempfile::tempdir().expect("shared cache");
    let env = Env::new().with_env("GOCACHE", shared.path().to_str().expect("utf-8"));
    env.write("go.mod", "module example.com/calc\n\ngo 1.18\n");
    env.write("calc.go", ADD);
    env.write(
        "tdd.toml",
        "[project.go]\nadapter = \"go\"\n\n[locks]\nimpl = [\"calc.go\"]\ntest = [\"*_test.go\"]\n",
    );
    env.write(".tdd/plan.md", PLAN);
    env.commit_all("a module that can only add");
    let (exit, value) = env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    assert_eq!(exit, 0, "{value}");
    env.write("calc_test.go", TEST);
    env.write(
        "calc.go",
        &format!("{ADD}\nfunc Sub(a, b int) int {{ return 0 }}\n"),
    );
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["to"], "AWAITING_IMPL", "{value}");
    env.write(
        "calc.go",
        &format!("{ADD}\nfunc Sub(a, b int) int {{ return a - b }}\n"),
    );
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["to"], "AWAITING_REFACTOR", "{value}");
    let written: Vec<_> = crate::conduct::files_under(shared.path())
        .into_iter()
        .map(|(path, _)| path)
        .collect();
    assert!(
        written.is_empty(),
        "the user's GOCACHE was written: {written:?}"
    );
}
