//! `get_architecture`: the repository's units (packages, modules,
//! directories or files) with their sizes, the dependency edges between
//! them, entry points, and the graph as Mermaid text.
//!
//! Edges are never guessed from names. Between packages they are the
//! manifests' dependencies (`manifest.rs`: Cargo's path and workspace
//! dependencies, npm workspaces, Python projects, Go modules), one per
//! kind (`normal`, `dev`, `build`, …). Between modules, directories and
//! files they are imports resolved to files (`imports.rs`), weighted by
//! how many, plus the manifests' dependencies of the packages inside.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::{Value, json};
use weir_core::{Meta, RunError};

use crate::answer::{Sink, paging};
use crate::query::graph::failed;
use crate::query::imports::import_graph;
use crate::query::references::merge;
use crate::query::{IndexState, directory};
use crate::store::Store;

/// How files are grouped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Granularity {
    /// The packages the manifests declare (crates, npm packages, Python
    /// projects, Go modules); edges are their dependencies on each other.
    Package,
    /// Directories cut to `depth` levels.
    Module {
        depth: usize,
    },
    Directory,
    File,
}

impl Granularity {
    fn unit(self, path: &str) -> String {
        match self {
            Granularity::File => path.to_owned(),
            Granularity::Directory => directory(path).to_owned(),
            Granularity::Module { depth } => {
                let dir = directory(path);
                if dir == "." {
                    return ".".into();
                }
                dir.split('/').take(depth).collect::<Vec<_>>().join("/")
            }
            Granularity::Package => unreachable!("packages are units by manifest"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Granularity::Package => "package",
            Granularity::Module { .. } => "module",
            Granularity::Directory => "directory",
            Granularity::File => "file",
        }
    }
}

/// What the summary and the Mermaid graph show at most: a graph a reader
/// can take in.
const SHOWN_MODULES: usize = 30;
const SHOWN_EDGES: usize = 60;

#[derive(Default)]
struct Unit {
    files: u64,
    symbols: u64,
    incoming: u64,
    outgoing: u64,
    /// Commits that changed its files lately (git), summed.
    churn: u64,
    languages: BTreeMap<String, u64>,
    /// A package's manifest, ecosystem and directory.
    package: Option<(String, String, String)>,
}

/// An edge between two units: the imports resolved from one into the
/// other (`strength`), and the manifests' dependency kinds joining them.
#[derive(Default)]
struct Edge {
    strength: u64,
    kinds: BTreeSet<String>,
}

/// The packages, each `(manifest, ecosystem, name, dir)`, and their edges
/// `(from manifest, to manifest, kind)`.
type Manifests = (
    Vec<(String, String, String, String)>,
    Vec<(String, String, String)>,
);

fn manifests(store: &Store) -> Result<Manifests, RunError> {
    let fail = failed(store);
    let mut statement = store
        .conn
        .prepare("SELECT manifest, ecosystem, name, dir FROM packages ORDER BY manifest")
        .map_err(&fail)?;
    let packages = statement
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .map_err(&fail)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(&fail)?;
    let mut statement = store
        .conn
        .prepare("SELECT manifest, target, kind FROM package_deps ORDER BY manifest, target, kind")
        .map_err(&fail)?;
    let edges = statement
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .map_err(&fail)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(&fail)?;
    Ok((packages, edges))
}

/// The package a file is in: the one with the deepest directory above it.
fn package_of<'a>(packages: &'a [(String, String, String, String)], path: &str) -> Option<&'a str> {
    packages
        .iter()
        .filter(|(_, _, _, dir)| dir == "." || path.starts_with(&format!("{dir}/")))
        .max_by_key(|(_, _, _, dir)| if dir == "." { 0 } else { dir.len() + 1 })
        .map(|(manifest, _, _, _)| manifest.as_str())
}

pub(crate) fn get_architecture(
    store: &Store,
    granularity: Granularity,
    sink: &mut Sink,
) -> Result<Value, RunError> {
    let state = IndexState::of(store);
    let (packages, package_edges) = manifests(store)?;
    let package_names: HashMap<&str, &str> = packages
        .iter()
        .map(|(manifest, _, name, _)| (manifest.as_str(), name.as_str()))
        .collect();
    // A package's unit is its name; two of one name keep their directory.
    let mut name_count: HashMap<&str, usize> = HashMap::new();
    for (_, _, name, _) in &packages {
        *name_count.entry(name.as_str()).or_default() += 1;
    }
    let package_unit = |manifest: &str| -> String {
        let name = package_names.get(manifest).copied().unwrap_or(manifest);
        if name_count.get(name).copied().unwrap_or(0) > 1 {
            format!("{name} ({})", directory(manifest))
        } else {
            name.to_owned()
        }
    };
    let unit_of = |path: &str| -> Option<String> {
        match granularity {
            Granularity::Package => package_of(&packages, path).map(package_unit),
            other => Some(other.unit(path)),
        }
    };
    let mut units: BTreeMap<String, Unit> = BTreeMap::new();
    if granularity == Granularity::Package {
        for (manifest, ecosystem, _, dir) in &packages {
            units.entry(package_unit(manifest)).or_default().package =
                Some((manifest.clone(), ecosystem.clone(), dir.clone()));
        }
    }
    let (unit_of_file, entrypoints) = scan_files(store, &unit_of, &mut units)?;
    let imports = import_graph(store, &|| sink.cancelled())?;
    let mut edges: BTreeMap<(String, String), Edge> = BTreeMap::new();
    for ((from, to), (count, _)) in &imports.edges {
        let (Some(from), Some(to)) = (unit_of_file.get(from), unit_of_file.get(to)) else {
            continue; // a test file, or outside every package
        };
        if from != to {
            edges
                .entry((from.clone(), to.clone()))
                .or_default()
                .strength += count;
        }
    }
    // The manifests' dependencies, on the units their packages are in.
    for (from, to, kind) in &package_edges {
        let place = |manifest: &str| match granularity {
            Granularity::Package => Some(package_unit(manifest)),
            other => Some(other.unit(manifest)),
        };
        if let (Some(from), Some(to)) = (place(from), place(to))
            && (from != to || granularity == Granularity::Package)
            && units.contains_key(&from)
            && units.contains_key(&to)
        {
            edges
                .entry((from, to))
                .or_default()
                .kinds
                .insert(kind.clone());
        }
    }
    for ((from, to), edge) in &edges {
        if let Some(unit) = units.get_mut(from) {
            unit.outgoing += edge.strength.max(1);
        }
        if let Some(unit) = units.get_mut(to) {
            unit.incoming += edge.strength.max(1);
        }
    }
    let edge_items = edge_items(&edges);
    sink.meta(Meta {
        total: Some((units.len() + edge_items.len()) as u64),
        backends: vec!["manifests".into(), "imports".into()],
        info: json!({"granularity": granularity.name(), "modules": units.len(), "edges": edge_items.len(), "chunking": "modules first, then edges by source"}),
        progress_unit: None,
    })?;
    for (name, unit) in &units {
        sink.item("modules", module_json(name, unit))?;
    }
    for item in &edge_items {
        let from = item["from"].as_str().unwrap_or_default();
        sink.item(&format!("edges:{from}"), item.clone())?;
    }
    // The biggest units and the strongest edges among them.
    let ranked = ranked(&units);
    let shown: Vec<&String> = ranked.iter().map(|(name, _)| *name).collect();
    let strongest = strongest(&edge_items, &shown);
    let left_out = (
        units.len() - shown.len(),
        edge_items.len() - strongest.len(),
    );
    let mermaid = mermaid(&shown, &strongest, left_out);
    let hotspots = crate::query::graph::hotspots(store, "", 10)?;
    let page = sink.page();
    let mut summary = paging(&page, &state.state_id);
    let mut limitations = vec![
        "edges come from the manifests (a package's dependencies on the repository's other packages) and from imports resolved to files; a name used without an import that resolves draws none".to_owned(),
        "test files are left out of the units and the import edges".to_owned(),
        format!("the summary and the Mermaid graph show the {SHOWN_MODULES} largest units and the {SHOWN_EDGES} strongest edges among them; the streamed items hold all"),
    ];
    if packages.is_empty() && granularity == Granularity::Package {
        limitations.push("no manifest (Cargo.toml, package.json, pyproject.toml, go.mod) declares a package here".into());
    }
    merge(
        &mut summary,
        json!({
            "granularity": granularity.name(),
            "moduleCount": units.len(),
            "edgeCount": edge_items.len(),
            "modules": ranked.iter().map(|(name, unit)| module_json(name, unit)).collect::<Vec<_>>(),
            "dependencyGraph": strongest,
            "notShown": {"modules": left_out.0, "edges": left_out.1},
            "entrypoints": entrypoints,
            "mermaid": mermaid,
            "hotspots": hotspots.iter().map(|(file, commits, last_ms)| json!({"file": file, "commits": commits, "lastChangeMs": last_ms})).collect::<Vec<_>>(),
            "confidence": "manifests and resolved imports",
            "externalImports": imports.external,
            "limitations": limitations,
            "provenance": state.provenance(&["manifests", "imports"], "syntactic", sink.elapsed_ms(), &sink.warnings),
        }),
    );
    Ok(summary)
}

/// Every non-test file: its unit's counts added to `units`; returns each
/// file's unit and the entrypoints.
fn scan_files(
    store: &Store,
    unit_of: &dyn Fn(&str) -> Option<String>,
    units: &mut BTreeMap<String, Unit>,
) -> Result<(HashMap<String, String>, Vec<String>), RunError> {
    let fail = failed(store);
    let mut unit_of_file: HashMap<String, String> = HashMap::new();
    let mut entrypoints = Vec::new();
    let mut statement = store
        .conn
        .prepare("SELECT f.path, f.language, (SELECT COUNT(*) FROM symbols s WHERE s.file_id = f.id AND s.is_def = 1), (SELECT commits FROM git_churn g WHERE g.path = f.path) FROM files f WHERE f.is_test = 0 ORDER BY f.path")
        .map_err(&fail)?;
    let rows = statement
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, Option<i64>>(3)?,
            ))
        })
        .map_err(&fail)?;
    for row in rows {
        let (path, language, symbols, churn) = row.map_err(&fail)?;
        if is_entrypoint(&path) {
            entrypoints.push(path.clone());
        }
        let Some(unit) = unit_of(&path) else {
            continue;
        };
        let entry = units.entry(unit.clone()).or_default();
        entry.files += 1;
        entry.symbols += symbols as u64;
        entry.churn += churn.unwrap_or(0) as u64;
        *entry.languages.entry(language).or_default() += 1;
        unit_of_file.insert(path, unit);
    }
    Ok((unit_of_file, entrypoints))
}

/// A unit as a `modules` item.
fn module_json(name: &str, unit: &Unit) -> Value {
    let mut item = json!({
        "moduleId": name,
        "name": name.rsplit('/').next().unwrap_or(name),
        "path": unit.package.as_ref().map_or(name, |(_, _, dir)| dir.as_str()),
        "fileCount": unit.files,
        "symbolCount": unit.symbols,
        "incomingEdges": unit.incoming,
        "outgoingEdges": unit.outgoing,
        "churn": unit.churn,
        "languages": unit.languages,
    });
    if let Some((manifest, ecosystem, _)) = &unit.package {
        item["manifest"] = json!(manifest);
        item["ecosystem"] = json!(ecosystem);
        item["name"] = json!(name);
    }
    item
}

/// One item per edge and kind: a package may depend on another both
/// normally and for its tests.
fn edge_items(edges: &BTreeMap<(String, String), Edge>) -> Vec<Value> {
    edges
        .iter()
        .flat_map(|((from, to), edge)| {
            let kinds: Vec<String> = if edge.kinds.is_empty() {
                vec!["import".into()]
            } else {
                edge.kinds.iter().cloned().collect()
            };
            kinds.into_iter().map(move |kind| {
                json!({"from": from, "to": to, "kind": kind, "strength": edge.strength, "source": if edge.kinds.is_empty() { "imports" } else { "manifest" }})
            })
        })
        .collect()
}

/// The biggest units, at most [`SHOWN_MODULES`].
fn ranked(units: &BTreeMap<String, Unit>) -> Vec<(&String, &Unit)> {
    let mut ranked: Vec<(&String, &Unit)> = units.iter().collect();
    ranked.sort_by(|a, b| {
        (b.1.symbols + b.1.incoming)
            .cmp(&(a.1.symbols + a.1.incoming))
            .then(a.0.cmp(b.0))
    });
    ranked.truncate(SHOWN_MODULES);
    ranked
}

/// The strongest edges among the `shown` units, at most [`SHOWN_EDGES`].
fn strongest<'a>(edge_items: &'a [Value], shown: &[&String]) -> Vec<&'a Value> {
    let mut strongest: Vec<&Value> = edge_items
        .iter()
        .filter(|e| {
            let is_shown = |key: &str| shown.iter().any(|s| Some(s.as_str()) == e[key].as_str());
            is_shown("from") && is_shown("to")
        })
        .collect();
    strongest.sort_by(|a, b| {
        b["strength"]
            .as_u64()
            .cmp(&a["strength"].as_u64())
            .then(a["from"].as_str().cmp(&b["from"].as_str()))
            .then(a["to"].as_str().cmp(&b["to"].as_str()))
    });
    strongest.truncate(SHOWN_EDGES);
    strongest
}

/// Whether a file is where a program or a library starts, by its name.
pub(crate) fn is_entrypoint(path: &str) -> bool {
    matches!(
        path.rsplit('/').next().unwrap_or_default(),
        "main.rs"
            | "lib.rs"
            | "main.go"
            | "__main__.py"
            | "main.py"
            | "index.js"
            | "index.ts"
            | "main.js"
            | "main.ts"
            | "main.c"
            | "main.cpp"
            | "Main.java"
    )
}

/// A Mermaid flowchart of `modules` and `edges` (strongest first), and a
/// comment saying what was left out.
fn mermaid(modules: &[&String], edges: &[&Value], left_out: (usize, usize)) -> String {
    let id = |name: &str| {
        modules
            .iter()
            .position(|m| m.as_str() == name)
            .map(|i| format!("m{i}"))
    };
    let mut text = String::from("graph LR\n");
    for (i, name) in modules.iter().enumerate() {
        text.push_str(&format!("  m{i}[\"{}\"]\n", name.replace('"', "'")));
    }
    for edge in edges {
        let (Some(from), Some(to)) = (
            id(edge["from"].as_str().unwrap_or_default()),
            id(edge["to"].as_str().unwrap_or_default()),
        ) else {
            continue;
        };
        let kind = edge["kind"].as_str().unwrap_or_default();
        let label = match edge["strength"].as_u64().unwrap_or(0) {
            0 => kind.to_owned(),
            n if kind == "import" => n.to_string(),
            n => format!("{kind} {n}"),
        };
        let arrow = if kind == "dev" { "-.->" } else { "-->" };
        text.push_str(&format!("  {from} {arrow}|{label}| {to}\n"));
    }
    if left_out != (0, 0) {
        text.push_str(&format!(
            "  %% not drawn: {} more modules, {} more edges (see the streamed items)\n",
            left_out.0, left_out.1
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_by_granularity() {
        let path = "src/runtime/task/mod.rs";
        assert_eq!(Granularity::File.unit(path), path);
        assert_eq!(Granularity::Directory.unit(path), "src/runtime/task");
        assert_eq!(Granularity::Module { depth: 2 }.unit(path), "src/runtime");
        assert_eq!(Granularity::Module { depth: 2 }.unit("lib.rs"), ".");
    }
}
