//! `get_architecture`: the repository's units (modules, directories or
//! files) with their sizes, the dependency edges between them (a use in one
//! of a name defined in the other, weighted by how many), entry points, and
//! the graph as Mermaid text.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Value, json};
use weir_core::{FailureCode, Meta, RunError};

use crate::answer::{Sink, paging};
use crate::query::references::merge;
use crate::query::{IndexState, directory};
use crate::store::Store;

/// How files are grouped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Granularity {
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
        }
    }
}

/// A name defined in more places than this is too ambiguous to draw an
/// edge for (`new`, `get`, `__init__`).
const MAX_DEFINITIONS: usize = 3;
/// What the summary and the Mermaid graph show at most (CKB's caps).
const SHOWN_MODULES: usize = 20;
const SHOWN_EDGES: usize = 50;

#[derive(Default)]
struct Unit {
    files: u64,
    symbols: u64,
    incoming: u64,
    outgoing: u64,
    /// Commits that changed its files lately (git), summed.
    churn: u64,
    languages: BTreeMap<String, u64>,
}

pub(crate) fn get_architecture(
    store: &Store,
    granularity: Granularity,
    sink: &mut Sink,
) -> Result<Value, RunError> {
    let state = IndexState::of(store);
    let failed =
        |e: rusqlite::Error| RunError::new(FailureCode::ToolError, store.error(e).to_string());
    let conn = &store.conn;
    let mut units: BTreeMap<String, Unit> = BTreeMap::new();
    let mut unit_of_file: HashMap<i64, String> = HashMap::new();
    let mut entrypoints = Vec::new();
    {
        let mut statement = conn
            .prepare("SELECT f.id, f.path, f.language, (SELECT COUNT(*) FROM symbols s WHERE s.file_id = f.id AND s.is_def = 1), (SELECT commits FROM git_churn g WHERE g.path = f.path) FROM files f WHERE f.is_test = 0 ORDER BY f.path")
            .map_err(failed)?;
        let rows = statement
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, Option<i64>>(4)?,
                ))
            })
            .map_err(failed)?;
        for row in rows {
            let (id, path, language, symbols, churn) = row.map_err(failed)?;
            if is_entrypoint(&path) {
                entrypoints.push(path.clone());
            }
            let unit = granularity.unit(&path);
            let entry = units.entry(unit.clone()).or_default();
            entry.files += 1;
            entry.symbols += symbols as u64;
            entry.churn += churn.unwrap_or(0) as u64;
            *entry.languages.entry(language).or_default() += 1;
            unit_of_file.insert(id, unit);
        }
    }
    if sink.cancelled() {
        return Err(crate::answer::Stopped.into());
    }
    // Where each name is defined, for names defined in few places.
    let mut defined: HashMap<String, Vec<String>> = HashMap::new();
    {
        let mut statement = conn
            .prepare("SELECT name, file_id FROM symbols WHERE is_def = 1")
            .map_err(failed)?;
        let rows = statement
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
            .map_err(failed)?;
        for row in rows {
            let (name, file) = row.map_err(failed)?;
            if let Some(unit) = unit_of_file.get(&file) {
                let places = defined.entry(name).or_default();
                if places.len() <= MAX_DEFINITIONS {
                    places.push(unit.clone());
                }
            }
        }
    }
    defined.retain(|_, places| places.len() <= MAX_DEFINITIONS);
    let mut edges: BTreeMap<(String, String), u64> = BTreeMap::new();
    {
        let mut statement = conn
            .prepare("SELECT name, file_id FROM symbols WHERE is_def = 0")
            .map_err(failed)?;
        let mut rows = statement.query([]).map_err(failed)?;
        let mut n = 0u64;
        while let Some(row) = rows.next().map_err(failed)? {
            n += 1;
            if n.is_multiple_of(10_000) && sink.cancelled() {
                return Err(crate::answer::Stopped.into());
            }
            let name = row.get_ref(0).map_err(failed)?.as_str().unwrap_or_default();
            let Some(places) = defined.get(name) else {
                continue;
            };
            let Some(from) = unit_of_file.get(&row.get::<_, i64>(1).map_err(failed)?) else {
                continue;
            };
            if places.contains(from) {
                continue; // defined here too: a local use
            }
            for to in places {
                *edges.entry((from.clone(), to.clone())).or_default() += 1;
            }
        }
    }
    for ((from, to), strength) in &edges {
        if let Some(unit) = units.get_mut(from) {
            unit.outgoing += strength;
        }
        if let Some(unit) = units.get_mut(to) {
            unit.incoming += strength;
        }
    }
    let granularity_name = match granularity {
        Granularity::Module { .. } => "module",
        Granularity::Directory => "directory",
        Granularity::File => "file",
    };
    sink.meta(Meta {
        total: Some((units.len() + edges.len()) as u64),
        backends: vec!["tags".into()],
        info: json!({"granularity": granularity_name, "modules": units.len(), "edges": edges.len(), "chunking": "modules first, then edges by source"}),
        progress_unit: None,
    })?;
    let module_json = |name: &str, unit: &Unit| {
        json!({
            "moduleId": name,
            "name": name.rsplit('/').next().unwrap_or(name),
            "path": name,
            "fileCount": unit.files,
            "symbolCount": unit.symbols,
            "incomingEdges": unit.incoming,
            "outgoingEdges": unit.outgoing,
            "churn": unit.churn,
            "languages": unit.languages,
        })
    };
    for (name, unit) in &units {
        sink.item("modules", module_json(name, unit))?;
    }
    for ((from, to), strength) in &edges {
        sink.item(
            &format!("edges:{from}"),
            json!({"from": from, "to": to, "kind": "reference", "strength": strength}),
        )?;
    }
    // The biggest units and the strongest edges among them.
    let mut ranked: Vec<(&String, &Unit)> = units.iter().collect();
    ranked.sort_by(|a, b| {
        (b.1.symbols + b.1.incoming)
            .cmp(&(a.1.symbols + a.1.incoming))
            .then(a.0.cmp(b.0))
    });
    ranked.truncate(SHOWN_MODULES);
    let shown: Vec<&String> = ranked.iter().map(|(name, _)| *name).collect();
    let mut strongest: Vec<(&(String, String), &u64)> = edges
        .iter()
        .filter(|((from, to), _)| shown.contains(&from) && shown.contains(&to))
        .collect();
    strongest.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    strongest.truncate(SHOWN_EDGES);
    let mermaid = mermaid(&shown, &strongest);
    let hotspots = crate::query::graph::hotspots(store, "", 10)?;
    let page = sink.page();
    let mut summary = paging(&page, &state.state_id);
    merge(
        &mut summary,
        json!({
            "granularity": granularity_name,
            "moduleCount": units.len(),
            "edgeCount": edges.len(),
            "modules": ranked.iter().map(|(name, unit)| module_json(name, unit)).collect::<Vec<_>>(),
            "dependencyGraph": strongest.iter().map(|((from, to), strength)| json!({"from": from, "to": to, "kind": "reference", "strength": strength})).collect::<Vec<_>>(),
            "entrypoints": entrypoints,
            "mermaid": mermaid,
            "hotspots": hotspots.iter().map(|(file, commits, last_ms)| json!({"file": file, "commits": commits, "lastChangeMs": last_ms})).collect::<Vec<_>>(),
            "confidence": "syntactic",
            "limitations": [
                format!("edges come from uses of names defined in at most {MAX_DEFINITIONS} places: a use of a more common name is not attributed"),
                "test files are left out",
                format!("the summary shows the {SHOWN_MODULES} largest units and the {SHOWN_EDGES} strongest edges among them; the streamed items hold all"),
            ],
            "provenance": state.provenance(&["tags"], "syntactic", sink.elapsed_ms(), &sink.warnings),
        }),
    );
    Ok(summary)
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

/// A Mermaid flowchart of `modules` and `edges`.
fn mermaid(modules: &[&String], edges: &[(&(String, String), &u64)]) -> String {
    let id = |name: &String| {
        modules
            .iter()
            .position(|m| *m == name)
            .map(|i| format!("m{i}"))
    };
    let mut text = String::from("graph LR\n");
    for (i, name) in modules.iter().enumerate() {
        text.push_str(&format!("  m{i}[\"{}\"]\n", name.replace('"', "'")));
    }
    for ((from, to), strength) in edges {
        if let (Some(from), Some(to)) = (id(from), id(to)) {
            text.push_str(&format!("  {from} -->|{strength}| {to}\n"));
        }
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
