use super::*;

fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    dir
}

#[test]
fn keys_are_the_last_segment_lower_cased() {
    assert_eq!(
        key_of("@fastify/merge-json-schemas").as_deref(),
        Some("merge-json-schemas")
    );
    assert_eq!(key_of("More.Itertools").as_deref(), Some("more_itertools"));
    assert_eq!(key_of("github.com/google/uuid").as_deref(), Some("uuid"));
    assert_eq!(key_of(""), None);
    assert_eq!(key_of("..."), None);
}

#[test]
fn pytest_testpaths_follow_pytests_own_order_of_files() {
    let dir = project(&[
        (
            "pytest.ini",
            "[pytest]\ntestpaths =\n    toolz/tests\n    other\naddopts = -q\n",
        ),
        (
            "pyproject.toml",
            "[project]\nname = \"toolz\"\n[tool.pytest.ini_options]\ntestpaths = [\"ignored\"]\n",
        ),
        ("toolz/tests/test_a.py", ""),
    ]);
    let declared = read(dir.path(), AdapterKind::Pytest);
    assert_eq!(declared.name.as_deref(), Some("toolz"));
    assert_eq!(declared.test_paths, ["toolz/tests/", "other"]);
    assert_eq!(
        declared.test_paths_from.as_deref(),
        Some("pytest.ini (testpaths)")
    );

    let dir = project(&[(
        "pyproject.toml",
        "[tool.poetry]\nname = \"pkg\"\n[tool.pytest.ini_options]\ntestpaths = \"t\"\n",
    )]);
    let declared = read(dir.path(), AdapterKind::Pytest);
    assert_eq!(declared.name.as_deref(), Some("pkg"));
    assert_eq!(declared.test_paths, ["t"]);

    let dir = project(&[(
        "setup.cfg",
        "[metadata]\nname = six\n\n[tool:pytest]\ntestpaths = test_six.py\n",
    )]);
    let declared = read(dir.path(), AdapterKind::Pytest);
    assert_eq!(declared.name.as_deref(), Some("six"));
    assert_eq!(declared.test_paths, ["test_six.py"]);
    assert_eq!(
        declared.test_paths_from.as_deref(),
        Some("setup.cfg (testpaths)")
    );
}

#[test]
fn a_pytest_project_without_testpaths_declares_none() {
    let dir = project(&[("pytest.ini", "[pytest]\naddopts = -q\n")]);
    assert_eq!(read(dir.path(), AdapterKind::Pytest), Declared::default());
}

#[test]
fn the_test_script_gives_node_test_its_files() {
    let dir = project(&[(
        "package.json",
        r#"{"name": "classnames", "scripts": {"test": "npm run build && node --test ./tests/*.js"}}"#,
    )]);
    let declared = read(dir.path(), AdapterKind::NodeTest);
    assert_eq!(declared.name.as_deref(), Some("classnames"));
    assert_eq!(declared.test_paths, ["tests/*.js"]);
    assert!(declared.runner_args.is_empty());
}

#[test]
fn the_test_script_gives_mocha_its_interface_and_its_directory() {
    let dir = project(&[
        (
            "package.json",
            r#"{"name": "jsonpath", "scripts": {"test": "mocha -u tdd --reporter dot test && jshint lib"}}"#,
        ),
        ("test/query.js", ""),
    ]);
    let declared = read(dir.path(), AdapterKind::Mocha);
    assert_eq!(declared.runner_args, ["-u", "tdd"]);
    assert_eq!(declared.test_paths, ["test/"]);
    assert_eq!(
        declared.test_paths_from.as_deref(),
        Some("package.json (scripts.test)")
    );
}

#[test]
fn a_script_without_paths_declares_none() {
    let dir = project(&[(
        "package.json",
        r#"{"name": "@fastify/merge-json-schemas", "scripts": {"test": "c8 --100 node --test && tstyche"}}"#,
    )]);
    let declared = read(dir.path(), AdapterKind::NodeTest);
    assert_eq!(declared.name.as_deref(), Some("merge-json-schemas"));
    assert!(declared.test_paths.is_empty());
    assert_eq!(declared.test_paths_from, None);
}

#[test]
fn cargo_declares_its_name_and_test_targets_outside_tests() {
    let dir = project(&[(
        "Cargo.toml",
        "[package]\nname = \"Str-Sim\"\n\n[[test]]\nname = \"lib\"\npath = \"src/tests.rs\"\n\n[[test]]\nname = \"it\"\npath = \"tests/it.rs\"\n",
    )]);
    let declared = read(dir.path(), AdapterKind::Cargo);
    assert_eq!(declared.name.as_deref(), Some("str-sim"));
    assert_eq!(declared.test_paths, ["src/tests.rs"]);
}

#[test]
fn a_go_module_is_named_after_its_path_without_a_major_version() {
    let dir = project(&[("go.mod", "module github.com/google/uuid/v2\n\ngo 1.21\n")]);
    assert_eq!(
        read(dir.path(), AdapterKind::Go).name.as_deref(),
        Some("uuid")
    );
}
