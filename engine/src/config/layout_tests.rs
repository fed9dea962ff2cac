use super::*;

fn list(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn pytest_tests_are_found_where_they_are() {
    // toolz keeps them inside the package, six at the root.
    let files = list(&[
        "setup.py",
        "toolz/__init__.py",
        "toolz/tests/test_a.py",
        "toolz/tests/deep/test_b.py",
        "toolz/sandbox/tests/test_c.py",
    ]);
    let entries = discovered(AdapterKind::Pytest, &files);
    assert_eq!(entries, ["toolz/sandbox/tests/", "toolz/tests/"]);
    let files = list(&["six.py", "test_six.py"]);
    assert_eq!(discovered(AdapterKind::Pytest, &files), ["test_six.py"]);
}

#[test]
fn javascript_tests_are_found_in_their_conventional_places() {
    let files = list(&[
        "index.js",
        "tests/index.js",
        "src/a.test.ts",
        "src/types.d.ts",
        "README.md",
    ]);
    assert_eq!(
        discovered(AdapterKind::NodeTest, &files),
        ["**/*.test.*", "tests/"]
    );
}

#[test]
fn entries_match_as_a_shell_and_pytest_would() {
    let dir = Path::new("/nonexistent");
    let files = list(&[
        "tests/a.js",
        "tests/deep/b.js",
        "tests/data.json",
        "index.js",
    ]);
    assert_eq!(
        matched(AdapterKind::NodeTest, dir, &list(&["tests/*.js"]), &files),
        1
    );
    assert_eq!(
        matched(AdapterKind::NodeTest, dir, &list(&["tests/"]), &files),
        2
    );
    assert_eq!(
        matched(AdapterKind::NodeTest, dir, &list(&["test/"]), &files),
        0
    );
    let files = list(&["tests/helpers.py", "tests/test_x.py", "test_six.py"]);
    assert_eq!(
        matched(AdapterKind::Pytest, dir, &list(&["tests"]), &files),
        1
    );
    assert_eq!(
        matched(AdapterKind::Pytest, dir, &list(&["test_six.py"]), &files),
        1
    );
}

#[test]
fn root_files_are_locked_as_implementation() {
    let (implementation, test) = locks(AdapterKind::NodeTest, &list(&["tests/*.js"]));
    assert!(implementation.contains(&"**/*.js".to_string()));
    assert!(implementation.contains(&"!tests/*.js".to_string()));
    assert!(implementation.contains(&"!node_modules/**".to_string()));
    assert_eq!(test[0], "tests/*.js");
    let (implementation, test) = locks(AdapterKind::Pytest, &list(&["toolz/tests/"]));
    assert_eq!(implementation[..2], ["**/*.py", "!toolz/tests/**"]);
    assert_eq!(test[0], "toolz/tests/**");
}
