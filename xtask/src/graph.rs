//! The crate graph docs/ARCHITECTURE.md draws, checked against the manifests.
//!
//! The "Crates" table names, for each member of the workspace, the crates of ours it
//! depends on. These tests derive the same graph from every member's `Cargo.toml`
//! (normal dependencies only: a dev-dependency ships in no build of `tdd`) and fail,
//! naming the crate and both lists, when the page and the code disagree.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::path::Path;

use crate::workspace_root;

/// Each member's directory (as the page writes it) and crate name, with the crates of
/// ours it depends on, by short name (`engine` for `tdd-engine`).
type Graph = BTreeMap<(String, String), BTreeSet<String>>;

/// The short name the page uses for a crate of ours: `tdd-engine` is `engine`. A cell
/// such as "`tdd` (binary)" names the crate in its first code span.
fn short(cell: &str) -> String {
    let name = match cell.strip_prefix('`') {
        Some(rest) => rest.split('`').next().unwrap_or(rest),
        None => cell,
    };
    name.strip_prefix("tdd-").unwrap_or(name).to_owned()
}

fn manifest(dir: &Path) -> toml::Table {
    let path = dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.parse()
        .unwrap_or_else(|e| panic!("{} is not TOML: {e}", path.display()))
}

/// The members of the workspace, as the root manifest lists them.
fn members(root: &Path) -> Vec<String> {
    let manifest = manifest(root);
    manifest["workspace"]["members"]
        .as_array()
        .expect("the root manifest lists its members")
        .iter()
        .map(|m| m.as_str().expect("a member is a path").to_owned())
        .collect()
}

/// The graph the manifests declare.
fn from_manifests(root: &Path) -> Graph {
    let mut graph = Graph::new();
    for member in members(root) {
        let manifest = manifest(&root.join(&member));
        let name = manifest["package"]["name"]
            .as_str()
            .expect("a member has a package name")
            .to_owned();
        let ours = manifest
            .get("dependencies")
            .and_then(toml::Value::as_table)
            .map(|deps| {
                deps.keys()
                    .filter(|dep| dep.starts_with("tdd-"))
                    .map(|dep| short(dep))
                    .collect()
            })
            .unwrap_or_default();
        let dir = if member == "." {
            "src/".to_owned()
        } else {
            format!("{member}/")
        };
        graph.insert((dir, name), ours);
    }
    graph
}

/// The graph the page's "Crates" table draws.
fn from_page(page: &str) -> Graph {
    let table = page
        .split("\n## Crates\n")
        .nth(1)
        .expect("docs/ARCHITECTURE.md has a \"## Crates\" section")
        .split("\n## ")
        .next()
        .unwrap_or_default();
    let mut graph = Graph::new();
    for row in table.lines().filter(|line| line.starts_with("| `")) {
        let cells: Vec<&str> = row.trim_matches('|').split(" | ").map(str::trim).collect();
        let [dir, name, _owns, depends] = cells[..] else {
            panic!("a row of the crate table has not four cells: {row}");
        };
        let ours = match depends {
            "none" => BTreeSet::new(),
            list => list.split(',').map(|dep| short(dep.trim())).collect(),
        };
        graph.insert((dir.trim_matches('`').to_owned(), short(name)), ours);
    }
    graph
}

/// The graph with every crate name in its short form, as the page writes them.
fn shortened(graph: Graph) -> Graph {
    graph
        .into_iter()
        .map(|((dir, name), deps)| ((dir, short(&name)), deps))
        .collect()
}

#[test]
fn the_architecture_page_draws_the_crate_graph_the_manifests_declare() {
    let root = workspace_root();
    let page = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md"))
        .expect("docs/ARCHITECTURE.md is readable");
    let declared = shortened(from_manifests(&root));
    let drawn = from_page(&page);
    let mut wrong = Vec::new();
    for (key, deps) in &declared {
        match drawn.get(key) {
            None => wrong.push(format!("{} ({}) has no row", key.1, key.0)),
            Some(said) if said != deps => wrong.push(format!(
                "{} depends on {deps:?}, the page says {said:?}",
                key.1
            )),
            Some(_) => {}
        }
    }
    for key in drawn.keys().filter(|key| !declared.contains_key(*key)) {
        wrong.push(format!(
            "{} ({}) is no member of the workspace",
            key.1, key.0
        ));
    }
    assert!(
        wrong.is_empty(),
        "docs/ARCHITECTURE.md's crate table disagrees with the manifests:\n  {}",
        wrong.join("\n  ")
    );
}

#[test]
fn every_library_crate_has_a_readme() {
    let root = workspace_root();
    let missing: Vec<String> = members(&root)
        .into_iter()
        .filter(|member| member != "." && member != "xtask")
        .filter(|member| !root.join(member).join("README.md").is_file())
        .collect();
    assert!(
        missing.is_empty(),
        "library crates without a README.md: {missing:?}"
    );
}

#[test]
fn the_page_is_read_as_it_is_written() {
    let page = "# A\n\n## Crates\n\n| Directory | Crate | Owns | Depends on (ours) |\n\
                |---|---|---|---|\n\
                | `src/` | `tdd` (binary) | x | engine, `tdd-sandbox` |\n\
                | `ledger/` | `tdd-ledger` | y | none |\n\n## Next\n\n| `no/` | `row` | z | w |\n";
    let graph = from_page(page);
    assert_eq!(graph.len(), 2, "{graph:?}");
    assert_eq!(
        graph[&("src/".to_owned(), "tdd".to_owned())],
        BTreeSet::from(["engine".to_owned(), "sandbox".to_owned()])
    );
    assert!(graph[&("ledger/".to_owned(), "ledger".to_owned())].is_empty());
}

#[test]
fn no_build_for_use_has_the_failpoints() {
    // Only a dev-dependency may turn the engine's `failpoints` feature on: then the
    // workspace's tests have their crash points and `cargo build`/`cargo install` do not.
    let root = workspace_root();
    let mut on = Vec::new();
    for member in members(&root) {
        let manifest = manifest(&root.join(&member));
        let features = |table: Option<&toml::Value>| {
            table
                .and_then(|deps| deps.get("tdd-engine"))
                .and_then(|dep| dep.get("features"))
                .and_then(toml::Value::as_array)
                .is_some_and(|list| list.iter().any(|f| f.as_str() == Some("failpoints")))
        };
        if features(manifest.get("dependencies")) {
            on.push(format!("{member}/Cargo.toml [dependencies]"));
        }
        let defaults = manifest
            .get("features")
            .and_then(|f| f.get("default"))
            .and_then(toml::Value::as_array);
        if defaults.is_some_and(|list| {
            list.iter()
                .filter_map(toml::Value::as_str)
                .any(|f| f.contains("failpoints"))
        }) {
            on.push(format!("{member}/Cargo.toml default features"));
        }
    }
    let root_manifest = manifest(&root);
    let workspace_dep = root_manifest["workspace"]["dependencies"].get("tdd-engine");
    if workspace_dep
        .and_then(|dep| dep.get("features"))
        .is_some_and(|f| f.to_string().contains("failpoints"))
    {
        on.push("Cargo.toml [workspace.dependencies]".to_owned());
    }
    assert!(
        on.is_empty(),
        "failpoints turned on for builds for use by: {on:?}"
    );
}
