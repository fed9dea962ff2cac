//! "Everything under these roots except those paths", as the set of hierarchies that
//! Landlock can grant.
//!
//! Landlock grants are hierarchical and additive: a right on a directory holds for all
//! that is beneath it, and nothing can be taken back below. So a root with a hole in it
//! is granted as its entries, one by one, skipping the hole; a hole deeper down is
//! reached by granting each entry along the way. The directories on the way to a hole
//! are not granted themselves, so nothing can be created or removed directly in them.

use std::path::Path;
use std::path::PathBuf;

/// The hierarchies that together cover every path under `roots` except those under
/// `holes`. Holes are compared as given and as resolved (symlinks followed), so a hole
/// reached through a link is still left out; entries that cannot be listed are skipped
/// (a hierarchy nobody can read needs no grant).
pub(crate) fn cover(roots: &[PathBuf], holes: &[PathBuf]) -> Vec<PathBuf> {
    let holes: Vec<PathBuf> = holes
        .iter()
        .flat_map(|h| [Some(h.clone()), std::fs::canonicalize(h).ok()])
        .flatten()
        .collect();
    let mut out = Vec::new();
    for root in roots {
        let resolved = std::fs::canonicalize(root).unwrap_or_else(|_| root.clone());
        cover_one(&resolved, &holes, &mut out);
    }
    out
}

fn cover_one(path: &Path, holes: &[PathBuf], out: &mut Vec<PathBuf>) {
    if holes.iter().any(|h| path.starts_with(h)) {
        return;
    }
    if !holes.iter().any(|h| h.starts_with(path)) {
        out.push(path.to_path_buf());
        return;
    }
    // A hole lies beneath: grant the entries one by one. A symlink is granted as the
    // link (Landlock resolves it to its target), unless the target is a hole.
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    for entry in entries.flatten() {
        let child = entry.path();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir {
            cover_one(&child, holes, out);
        } else {
            let target = std::fs::canonicalize(&child).unwrap_or_else(|_| child.clone());
            let in_hole = |p: &Path| holes.iter().any(|h| p.starts_with(h));
            if !in_hole(&child) && !in_hole(&target) {
                out.push(child);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hole_is_left_out_and_its_siblings_are_granted_one_by_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        for sub in ["a/x", "a/y", "b"] {
            std::fs::create_dir_all(root.join(sub)).expect("mkdir");
        }
        std::fs::write(root.join("a/file"), "f").expect("write");
        let mut got = cover(std::slice::from_ref(&root), &[root.join("a/x")]);
        got.sort();
        assert_eq!(got, [root.join("a/file"), root.join("a/y"), root.join("b")]);
        // No hole: the root itself. The root a hole: nothing.
        assert_eq!(cover(std::slice::from_ref(&root), &[]), vec![root.clone()]);
        assert!(cover(&[root.join("a")], &[root.join("a")]).is_empty());
    }

    #[test]
    fn a_link_into_a_hole_is_left_out() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        std::fs::create_dir_all(root.join("secret")).expect("mkdir");
        std::fs::create_dir_all(root.join("open")).expect("mkdir");
        std::fs::write(root.join("secret/key"), "k").expect("write");
        std::os::unix::fs::symlink(root.join("secret/key"), root.join("open/key")).expect("ln");
        let got = cover(&[root.join("open")], &[root.join("secret")]);
        // `open` holds no hole by path, so it is granted whole; the link's target stays
        // out of reach because Landlock checks the resolved file, which is not granted.
        assert_eq!(got, [root.join("open")]);
        let got = cover(
            std::slice::from_ref(&root),
            &[root.join("open/key"), root.join("secret")],
        );
        assert!(got.is_empty(), "{got:?}");
    }
}
