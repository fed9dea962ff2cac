//! Where a tree's symlinks lead, resolved against the tree itself.
//!
//! A committed symlink whose target lies outside the repository makes a verdict depend
//! on bytes no commit holds (and that an agent can change after the gate). The clean
//! room refuses such a tree; this module decides which links leave it, the way the
//! kernel would resolve them in a checkout, without touching any file system.

use std::collections::HashMap;
use std::collections::VecDeque;

/// The most links followed while resolving one path, as the kernel's own limit: a
/// longer chain is a loop, and is treated as leaving the tree.
const MAX_HOPS: usize = 40;

/// A symlink of a tree: its path and its target, as bytes.
pub type Link = (Vec<u8>, Vec<u8>);

/// The symlinks of `links` (tree path → target, both as bytes) whose resolution, inside a
/// checkout of the tree, leaves its root: an absolute target, a `..` above the root, a
/// chain through other links of the tree that does either or loops, or one that reaches
/// a tree path of `outside` (the dependency directories a checkout links from the live
/// tree, which no commit holds). Sorted by path.
pub fn leaving_tree(links: &HashMap<Vec<u8>, Vec<u8>>, outside: &[Vec<u8>]) -> Vec<Link> {
    let mut out: Vec<Link> = links
        .iter()
        .filter(|(path, _)| leaves(links, outside, path))
        .map(|(path, target)| (path.clone(), target.clone()))
        .collect();
    out.sort();
    out
}

fn parts(path: &[u8]) -> impl DoubleEndedIterator<Item = &[u8]> {
    path.split(|b| *b == b'/')
}

/// Whether the link at `link` resolves outside the root, or through one of `outside`.
fn leaves(links: &HashMap<Vec<u8>, Vec<u8>>, outside: &[Vec<u8>], link: &[u8]) -> bool {
    let Some(target) = links.get(link) else {
        return false;
    };
    let mut dir: Vec<&[u8]> = parts(link).collect();
    dir.pop();
    let mut at: Vec<Vec<u8>> = dir.into_iter().map(<[u8]>::to_vec).collect();
    let mut pending: VecDeque<Vec<u8>> = VecDeque::new();
    let mut hops = 0;
    if !follow(target, &mut pending) {
        return true;
    }
    while let Some(part) = pending.pop_front() {
        match part.as_slice() {
            b"" | b"." => {}
            b".." => {
                if at.pop().is_none() {
                    return true;
                }
            }
            _ => {
                at.push(part);
                if outside.contains(&at.join(&b'/')) {
                    return true;
                }
                if let Some(next) = links.get(&at.join(&b'/')) {
                    hops += 1;
                    at.pop();
                    if hops > MAX_HOPS || !follow(next, &mut pending) {
                        return true;
                    }
                }
            }
        }
    }
    false
}

/// Puts `target`'s parts in front of what is left to resolve; `false` when the target is
/// absolute (it leaves the tree whatever follows).
fn follow(target: &[u8], pending: &mut VecDeque<Vec<u8>>) -> bool {
    if target.first() == Some(&b'/') {
        return false;
    }
    for part in parts(target).rev() {
        pending.push_front(part.to_vec());
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(links: &[(&str, &str)]) -> HashMap<Vec<u8>, Vec<u8>> {
        links
            .iter()
            .map(|(p, t)| (p.as_bytes().to_vec(), t.as_bytes().to_vec()))
            .collect()
    }

    fn leaving(links: &[(&str, &str)]) -> Vec<String> {
        leaving_tree(&tree(links), &[])
            .into_iter()
            .map(|(p, _)| String::from_utf8_lossy(&p).into_owned())
            .collect()
    }

    #[test]
    fn a_link_into_a_directory_linked_from_outside_leaves_the_tree() {
        let links = tree(&[
            ("calc.py", ".venv/calc_real.py"),
            ("lib/m.py", "../.venv/x/../m.py"),
            ("ok.py", "src/ok.py"),
        ]);
        let outside = [b".venv".to_vec()];
        let leaving: Vec<Vec<u8>> = leaving_tree(&links, &outside)
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        assert_eq!(leaving, [b"calc.py".to_vec(), b"lib/m.py".to_vec()]);
        assert!(leaving_tree(&links, &[]).is_empty());
    }

    #[test]
    fn links_that_stay_inside_are_kept() {
        let none: Vec<String> = Vec::new();
        assert_eq!(
            leaving(&[
                ("a", "b"),
                ("dir/up", "../file"),
                ("dir/deep/x", "../../dir/./y"),
                ("self", "."),
            ]),
            none
        );
    }

    #[test]
    fn absolute_targets_and_climbs_above_the_root_leave() {
        assert_eq!(
            leaving(&[
                ("abs", "/etc/passwd"),
                ("up", "../outside"),
                ("dir/up", "../../x")
            ]),
            vec!["abs", "dir/up", "up"]
        );
    }

    #[test]
    fn a_chain_is_resolved_as_the_kernel_would() {
        // `a/..` goes to the parent of what `a` points at: the root's parent.
        assert_eq!(
            leaving(&[("a", "."), ("b", "a/..")]),
            vec!["b"],
            "lexically `a/..` is the root, but through the link it is above it"
        );
        // Through a link into a subdirectory, `..` stays inside.
        assert_eq!(
            leaving(&[("a", "x/y"), ("b", "a/..")]),
            Vec::<String>::new()
        );
        // A link to a link that leaves, leaves.
        assert_eq!(leaving(&[("a", "b"), ("b", "/tmp")]), vec!["a", "b"]);
    }

    #[test]
    fn a_loop_counts_as_leaving() {
        assert_eq!(leaving(&[("a", "b"), ("b", "a")]), vec!["a", "b"]);
    }

    const LINKS: [&str; 5] = ["a", "b", "d/a", "d/b", "d/e/a"];
    const TARGETS: [&str; 14] = [
        ".",
        "..",
        "a",
        "b",
        "d",
        "d/e",
        "../a",
        "../..",
        "d/..",
        "a/..",
        "/tmp",
        "e/..",
        "../b/..",
        "./d/./e/../a",
    ];

    proptest::proptest! {
        /// The resolver agrees with the kernel: each link is made for real and resolved
        /// by `canonicalize`; it leaves the tree exactly when the kernel's answer is
        /// outside the root or a loop.
        #[test]
        fn agrees_with_the_kernel(choice in proptest::collection::vec(
            (0..LINKS.len(), 0..TARGETS.len()), 1..5,
        )) {
            let links: HashMap<Vec<u8>, Vec<u8>> = choice
                .iter()
                .map(|(l, t)| (LINKS[*l].as_bytes().to_vec(), TARGETS[*t].as_bytes().to_vec()))
                .collect();
            let outer = tempfile::tempdir().expect("tempdir");
            let root = outer.path().join("root");
            for dir in ["root/d/e", "a", "b"] {
                std::fs::create_dir_all(outer.path().join(dir)).expect("dirs");
            }
            for (path, target) in &links {
                let at = root.join(String::from_utf8_lossy(path).as_ref());
                std::os::unix::fs::symlink(String::from_utf8_lossy(target).as_ref(), &at)
                    .expect("link");
            }
            let root = root.canonicalize().expect("root");
            let leaving: Vec<Vec<u8>> = leaving_tree(&links, &[]).into_iter().map(|(p, _)| p).collect();
            for path in links.keys() {
                let at = root.join(String::from_utf8_lossy(path).as_ref());
                let kernel = match at.canonicalize() {
                    Ok(real) => !real.starts_with(&root),
                    Err(e) if e.raw_os_error() == Some(nix::errno::Errno::ELOOP as i32) => true,
                    // Resolved to something that does not exist: no verdict from the kernel.
                    Err(_) => continue,
                };
                proptest::prop_assert_eq!(
                    leaving.contains(path),
                    kernel,
                    "{:?} in {:?}", String::from_utf8_lossy(path), links
                );
            }
        }
    }
}
