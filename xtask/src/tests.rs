//! The flags of `cargo xtask test`.

use crate::Selection;
use crate::selection;

#[test]
fn flags_choose_what_runs_and_ci_turns_the_compile_fail_suite_on() {
    let everything = Selection {
        all: true,
        real_clis: true,
    };
    assert_eq!(selection(&[], true), Some(everything));
    assert_eq!(
        selection(&[], false),
        Some(Selection {
            all: false,
            real_clis: true
        })
    );
    assert_eq!(selection(&["--all"], false), Some(everything));
    assert_eq!(
        selection(&["--no-real-clis", "--all"], false),
        Some(Selection {
            all: true,
            real_clis: false
        })
    );
    assert_eq!(selection(&["--all", "--all"], false), None);
    assert_eq!(selection(&["--fast"], false), None);
}
