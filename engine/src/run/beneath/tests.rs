use super::*;

fn outside_untouched(outside: &Path, names: &[&str]) {
    let mut found: Vec<String> = std::fs::read_dir(outside)
        .expect("outside")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    assert_eq!(found, names, "nothing outside is removed or added");
}

/// A directory swapped for a link to one outside, before or during a removal: the link
/// is what goes, and everything outside stays, permissions included.
#[test]
fn a_removal_never_follows_a_link_to_outside() {
    let top = tempfile::tempdir().expect("top");
    let outside = tempfile::tempdir().expect("outside");
    std::fs::write(outside.path().join("keep.py"), "x").expect("keep");
    std::fs::create_dir(outside.path().join("locked")).expect("locked");
    std::fs::set_permissions(
        outside.path().join("locked"),
        std::fs::Permissions::from_mode(0o500),
    )
    .expect("chmod");
    std::fs::create_dir_all(top.path().join("pkg/sub")).expect("dirs");
    std::fs::write(top.path().join("pkg/sub/keep.py"), "y").expect("inside");
    std::os::unix::fs::symlink(outside.path(), top.path().join("pkg/link")).expect("link");
    std::os::unix::fs::symlink(outside.path().join("locked"), top.path().join("pkg/locked"))
        .expect("link");
    std::fs::set_permissions(
        top.path().join("pkg"),
        std::fs::Permissions::from_mode(0o500),
    )
    .expect("chmod");
    let dir = open_dir(top.path()).expect("open");
    remove_tree_at(&dir, b"pkg").expect("removed");
    assert!(!top.path().join("pkg").exists());
    outside_untouched(outside.path(), &["keep.py", "locked"]);
    let mode = std::fs::metadata(outside.path().join("locked"))
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o500, "the permissions outside are unchanged");
}

/// A component of the way swapped for a link: opening or making the way fails, and
/// nothing is made outside.
#[test]
fn a_way_through_a_link_is_refused_and_makes_nothing_outside() {
    let top = tempfile::tempdir().expect("top");
    let outside = tempfile::tempdir().expect("outside");
    std::os::unix::fs::symlink(outside.path(), top.path().join("tests")).expect("link");
    let dir = open_dir(top.path()).expect("open");
    for way in [Way::Open, Way::Make] {
        assert!(
            dir_of(&dir, &[b"tests", b"deeper"], way).is_err(),
            "{way:?}"
        );
    }
    outside_untouched(outside.path(), &[]);
    // Replacing takes the link away (never what it points to) and makes the way real.
    let made = dir_of(&dir, &[b"tests", b"deeper"], Way::Replace).expect("replaced");
    assert_eq!(kind_at(&made, b"x").expect("stat"), None);
    assert_eq!(kind_at(&dir, b"tests").expect("stat"), Some(Kind::Dir));
    outside_untouched(outside.path(), &[]);
}

#[test]
fn a_path_that_climbs_has_no_components() {
    for path in [&b"../x"[..], b"a//b", b"a/./b", b"", b"a/"] {
        assert!(components(path).is_err(), "{path:?}");
    }
    assert_eq!(components(b"a/b").expect("plain"), vec![&b"a"[..], b"b"]);
}

#[test]
fn entries_can_be_listed_twice_from_one_handle() {
    let top = tempfile::tempdir().expect("top");
    std::fs::write(top.path().join("f"), "x").expect("file");
    std::fs::create_dir(top.path().join("d")).expect("dir");
    std::os::unix::fs::symlink("f", top.path().join("l")).expect("link");
    let dir = open_dir(top.path()).expect("open");
    let mut first = entries(&dir).expect("first");
    first.sort();
    let expected = vec![
        (b"d".to_vec(), Kind::Dir),
        (b"f".to_vec(), Kind::File),
        (b"l".to_vec(), Kind::Link),
    ];
    assert_eq!(first, expected);
    let mut second = entries(&dir).expect("second");
    second.sort();
    assert_eq!(second, expected);
}
