//! The compound questions, each answering in one call what would take an
//! agent several: `explore` (what is in a directory or file), `understand`
//! (a symbol: definition, uses, callers, callees) and `prepare_change`
//! (what a change to a symbol touches, and how risky it is). Each streams
//! its parts in stages, grouped (definitions, then uses by file, then the
//! call graph), and sums them up in its result.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use serde_json::{Value, json};
use weir_core::{FailureCode, Meta, RunError};

use crate::answer::{Sink, Stopped, paging};
use crate::language::Language;
use crate::query::architecture::is_entrypoint;
use crate::query::graph::{self, Definition, failed};
use crate::query::imports::import_graph;
use crate::query::references::{Reference, ReferenceSet, ReferencesQuery, merge};
use crate::query::{IndexState, SYMBOL_COLUMNS, SymbolRow, directory, location};
use crate::store::Store;

/// How many entries of a list a summary shows (CKB's caps are about this).
const SHOWN: usize = 20;
/// References listed per file in `understand`'s summary, and the
/// characters of context each keeps: the summary stays a few KB.
const LINES_PER_FILE: usize = 5;
const CONTEXT_CHARS: usize = 120;
/// A name defined in more places than this is too ambiguous to draw a
/// dependency for (as in `get_architecture`).
const MAX_DEFINITIONS: usize = 3;
/// Most callers `prepare_change` follows.
const MAX_IMPACT: usize = 500;

fn definition_json(d: &Definition) -> Value {
    json!({
        "stableId": d.row.stable_id(),
        "name": d.row.name,
        "kind": d.row.kind,
        "location": location(&d.row.path, d.row.line, d.row.column, d.body_end_line, 0),
        "isTest": d.row.is_test,
        "docs": d.row.docs,
        "signature": d.row.context,
    })
}

/// A definition in a list (callers, dependents): where, not what it says.
fn brief_json(d: &Definition) -> Value {
    json!({
        "stableId": d.row.stable_id(),
        "name": d.row.name,
        "kind": d.row.kind,
        "location": location(&d.row.path, d.row.line, d.row.column, d.body_end_line, 0),
        "isTest": d.row.is_test,
    })
}

fn not_found(symbol: &str) -> RunError {
    RunError::new(
        FailureCode::InvalidArguments,
        format!("no definition of {symbol:?} in the index"),
    )
    .with_remediation("find the name with search_symbols and pass its name or stableId")
}

/// The definitions `symbol` names and, when there are several and the
/// caller did not pick one, what CKB calls the ambiguity.
fn target(store: &Store, symbol: &str) -> Result<(Vec<Definition>, Value), RunError> {
    let definitions = graph::definitions(store, symbol)?;
    if definitions.is_empty() {
        return Err(not_found(symbol));
    }
    let ambiguity = (definitions.len() > 1).then(|| {
        json!({
            "matchCount": definitions.len(),
            "topMatches": definitions.iter().take(5).map(|d| d.row.stable_id()).collect::<Vec<_>>(),
            "hint": "several definitions have this name: the first is described; pass a stableId to pick another",
        })
    });
    Ok((definitions, ambiguity.unwrap_or(Value::Null)))
}

fn limitations(set: &ReferenceSet) -> Value {
    let mut list = vec![
        "callers past the direct dependents come from tree-sitter tags, by name: same-named symbols share them".to_owned(),
        "a caller is the innermost definition whose body holds the use".to_owned(),
    ];
    if set.completeness != "exact" {
        list.insert(
            0,
            format!(
                "the references are find_references' for {:?}: {}",
                set.target.name,
                set.precision()
            ),
        );
    }
    json!(list)
}

/// The reference set `find_references` gives for `symbol` with its
/// defaults (tests and text mentions included), all of it.
fn references<'a>(
    store: &'a Store,
    root: &'a Path,
    symbol: &str,
    sink: &Sink,
) -> Result<(ReferenceSet<'a>, Vec<Reference>), RunError> {
    let query = ReferencesQuery {
        symbol: symbol.to_owned(),
        include_tests: true,
        text: true,
    };
    let set = ReferenceSet::open(store, root, &query)?;
    let all = set.collect(&|| sink.cancelled())?;
    Ok((set, all))
}

/// How a reference set sums up, in every compound answer alike (the
/// counts are find_references' own).
fn reference_counts(all: &[Reference]) -> Value {
    let files: BTreeSet<&str> = all.iter().map(|r| r.path.as_str()).collect();
    let mut kinds: BTreeMap<&str, u64> = BTreeMap::new();
    for r in all {
        *kinds.entry(r.kind.as_str()).or_default() += 1;
    }
    json!({
        "totalCount": all.len(),
        "fileCount": files.len(),
        "definitions": all.iter().filter(|r| r.is_definition()).count(),
        "uses": all.iter().filter(|r| !r.is_definition()).count(),
        "byKind": kinds,
    })
}

/// The test files among the uses: a test file, or a file whose own tests
/// (`#[cfg(test)]`) hold the use.
fn related_tests(all: &[Reference]) -> BTreeSet<&str> {
    all.iter()
        .filter(|r| r.is_test && !r.is_definition())
        .map(|r| r.path.as_str())
        .collect()
}

/// The definitions enclosing the uses that depend on `main` (not its own
/// definitions' bodies), with how many uses each holds.
fn dependents(
    store: &Store,
    main: &Definition,
    all: &[Reference],
) -> Result<Vec<(Definition, u64)>, RunError> {
    let mut by_id: BTreeMap<String, (Definition, u64)> = BTreeMap::new();
    for r in all.iter().filter(|r| r.is_dependent_use()) {
        if let Some(caller) = graph::enclosing(store, &r.path, r.line)?
            && caller.row.name != main.row.name
        {
            by_id.entry(caller.row.stable_id()).or_insert((caller, 0)).1 += 1;
        }
    }
    let mut list: Vec<(Definition, u64)> = by_id.into_values().collect();
    list.sort_by(|a, b| {
        b.1.cmp(&a.1)
            .then(a.0.row.stable_id().cmp(&b.0.row.stable_id()))
    });
    Ok(list)
}

/// Whether two files' languages may use each other's names.
fn same_family(a: &str, b: &str) -> bool {
    let family = |p: &str| Language::of(Path::new(p)).map(Language::family);
    family(a) == family(b)
}

/// `understand {symbol}`: the definition, the references `find_references`
/// gives for the same symbol (exact where SCIP covers them), callers from
/// the uses, callees from the tags.
pub(crate) fn understand(
    store: &Store,
    root: &Path,
    symbol: &str,
    sink: &mut Sink,
) -> Result<Value, RunError> {
    let state = IndexState::of(store);
    let (definitions, ambiguity) = target(store, symbol)?;
    let main = &definitions[0];
    let (set, all) = references(store, root, symbol, sink)?;
    for warning in &set.warnings {
        sink.warning(warning.clone())?;
    }
    let callees = graph::callees(store, main)?;
    let counts = reference_counts(&all);
    sink.meta(Meta {
        total: None,
        backends: set.backends.iter().map(|b| (*b).to_owned()).collect(),
        info: json!({
            "symbol": symbol,
            "completeness": set.completeness,
            "precision": set.precision(),
            "definitions": definitions.len(),
            "references": counts["totalCount"],
            "files": counts["fileCount"],
            "chunking": "the definition, then references grouped by file (find_references' set), then callers, then callees",
        }),
        progress_unit: None,
    })?;
    sink.item("definition", definition_json(main))?;
    let mut by_file: BTreeMap<&str, Vec<&Reference>> = BTreeMap::new();
    for r in &all {
        by_file.entry(r.path.as_str()).or_default().push(r);
    }
    for (path, refs) in &by_file {
        for r in refs {
            sink.item(path, r.json())?;
        }
    }
    let callers = dependents(store, main, &all)?;
    let caller_json = |(d, calls): &(Definition, u64)| {
        let mut item = brief_json(d);
        item["calls"] = json!(calls);
        item
    };
    for caller in &callers {
        sink.item("callers", caller_json(caller))?;
    }
    let mut callee_items = Vec::new();
    for (name, kind, calls) in &callees {
        let defined_at: Vec<String> = graph::definitions(store, name)?
            .iter()
            .filter(|d| same_family(&d.row.path, &main.row.path))
            .take(MAX_DEFINITIONS)
            .map(|d| d.row.stable_id())
            .collect();
        let item = json!({"name": name, "kind": kind, "calls": calls, "definedAt": defined_at});
        sink.item("callees", item.clone())?;
        callee_items.push(item);
    }
    let tests = related_tests(&all);
    let page = sink.page();
    let mut summary = paging(&page, &state.state_id);
    let mut files: Vec<(&&str, &Vec<&Reference>)> = by_file.iter().collect();
    files.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(b.0)));
    let mut references = counts;
    references["byFile"] = files
        .iter()
        .take(SHOWN)
        .map(|(file, refs)| json!({
            "file": file,
            "count": refs.len(),
            "references": refs.iter().take(LINES_PER_FILE).map(|r| json!({"line": r.line, "kind": r.kind, "context": r.context.chars().take(CONTEXT_CHARS).collect::<String>()})).collect::<Vec<_>>(),
        }))
        .collect();
    references["truncated"] = json!(files.len() > SHOWN);
    merge(
        &mut summary,
        json!({
            "symbol": symbol,
            "precision": set.precision(),
            "definition": definition_json(main),
            "ambiguity": ambiguity,
            "references": references,
            "callers": callers.iter().take(SHOWN).map(caller_json).collect::<Vec<_>>(),
            "callerCount": callers.len(),
            "callees": callee_items.into_iter().take(SHOWN).collect::<Vec<_>>(),
            "relatedTests": tests,
            "limitations": limitations(&set),
            "provenance": state.provenance(&set.backends, set.completeness, sink.elapsed_ms(), &sink.warnings),
        }),
    );
    Ok(summary)
}

/// The risk of a change: each factor's share of a score from 0 to 1, the
/// level from the score.
struct Risk {
    factors: Vec<(&'static str, f64, f64)>,
    score: f64,
    level: &'static str,
}

impl Risk {
    /// From the reference files (besides the definition's), the direct
    /// dependents, the callers reached, the directories touched, whether
    /// a test uses the symbol, and git's churn of its file.
    fn assess(
        files: usize,
        direct: usize,
        callers: usize,
        modules: usize,
        tests: usize,
        commits: u64,
    ) -> Risk {
        let share = |value: f64, full: f64, weight: f64| (value / full).min(1.0) * weight;
        let factors = vec![
            (
                "referenceFiles",
                files as f64,
                share(files as f64, 20.0, 0.3),
            ),
            (
                "directDependents",
                direct as f64,
                share(direct as f64, 20.0, 0.2),
            ),
            (
                "transitiveCallers",
                callers as f64,
                share(callers as f64, 50.0, 0.1),
            ),
            (
                "moduleSpread",
                modules as f64,
                share(modules.saturating_sub(1) as f64, 5.0, 0.15),
            ),
            (
                "noRelatedTests",
                if tests == 0 { 1.0 } else { 0.0 },
                if tests == 0 { 0.1 } else { 0.0 },
            ),
            ("churn", commits as f64, share(commits as f64, 20.0, 0.15)),
        ];
        let score: f64 = factors.iter().map(|(_, _, s)| s).sum();
        let score = (score * 100.0).round() / 100.0;
        let level = if score < 0.3 {
            "low"
        } else if score < 0.6 {
            "medium"
        } else {
            "high"
        };
        Risk {
            factors,
            score,
            level,
        }
    }
}

/// `prepare_change {symbol, depth}`: the references `find_references`
/// gives, the definitions that hold them (direct dependents), their
/// callers to `depth`, the test files among them, co-change, and the risk.
pub(crate) fn prepare_change(
    store: &Store,
    root: &Path,
    symbol: &str,
    depth: usize,
    sink: &mut Sink,
) -> Result<Value, RunError> {
    let state = IndexState::of(store);
    let (definitions, ambiguity) = target(store, symbol)?;
    let main = &definitions[0];
    let (set, all) = references(store, root, symbol, sink)?;
    for warning in &set.warnings {
        sink.warning(warning.clone())?;
    }
    let direct = dependents(store, main, &all)?;
    let direct_count = direct.len();
    let cancelled = || sink.cancelled();
    let impact = graph::impact(
        store,
        &main.row.name,
        direct.into_iter().map(|(d, _)| d).collect(),
        depth,
        MAX_IMPACT,
        &set.families,
        &cancelled,
    )?;
    let uses: Vec<&Reference> = all.iter().filter(|r| r.is_dependent_use()).collect();
    let defined_in: BTreeSet<&str> = all
        .iter()
        .filter(|r| r.is_definition())
        .map(|r| r.path.as_str())
        .collect();
    let dependent_files: BTreeSet<&str> = uses
        .iter()
        .map(|r| r.path.as_str())
        .filter(|p| !defined_in.contains(p))
        .collect();
    let mut modules: BTreeSet<&str> = uses.iter().map(|r| directory(&r.path)).collect();
    modules.insert(directory(&main.row.path));
    let tests = related_tests(&all);
    let churn = graph::churn(store, &main.row.path)?;
    let cochange = cochange(store, &main.row.path, churn)?;
    let max_depth = impact.iter().map(|(level, _, _)| *level).max().unwrap_or(0);
    let counts = reference_counts(&all);
    sink.meta(Meta {
        total: Some((1 + impact.len() + tests.len() + cochange.len()) as u64),
        backends: set.backends.iter().map(|b| (*b).to_owned()).chain(["git".to_owned()]).collect(),
        info: json!({
            "symbol": symbol,
            "depthBound": depth,
            "precision": set.precision(),
            "references": counts["totalCount"],
            "files": counts["fileCount"],
            "chunking": "the target, then callers by depth, then related tests, then co-change files",
        }),
        progress_unit: None,
    })?;
    sink.item("target", definition_json(main))?;
    for entry in &impact {
        sink.item(&format!("impact depth {}", entry.0), impact_json(entry))?;
    }
    for test in &tests {
        sink.item("tests", json!({"file": test}))?;
    }
    for file in &cochange {
        sink.item("cochange", file.clone())?;
    }
    let commits = churn.map_or(0, |(commits, _)| commits);
    let risk = Risk::assess(
        dependent_files.len(),
        direct_count,
        impact.len(),
        modules.len(),
        tests.len(),
        commits,
    );
    let suggestions = suggestions(main, tests.is_empty(), &cochange, direct_count);
    let (git, _) = graph::health(store)?;
    let mut warnings = sink.warnings.clone();
    if !git {
        warnings.push("no git history in the index: churn and co-change are unknown".into());
    }
    let page = sink.page();
    let mut summary = paging(&page, &state.state_id);
    let mut by_depth: BTreeMap<usize, u64> = BTreeMap::new();
    for (level, _, _) in &impact {
        *by_depth.entry(*level).or_default() += 1;
    }
    let mut backends = set.backends.clone();
    if git {
        backends.push("git");
    }
    let mut references = counts;
    references["dependentFileCount"] = json!(dependent_files.len());
    merge(
        &mut summary,
        json!({
            "symbol": symbol,
            "precision": set.precision(),
            "target": definition_json(main),
            "ambiguity": ambiguity,
            "references": references,
            "directDependentCount": direct_count,
            "directDependents": impact.iter().filter(|(level, _, _)| *level == 1).take(SHOWN).map(impact_json).collect::<Vec<_>>(),
            "transitiveImpact": {
                "totalCallers": impact.len(),
                "moduleSpread": modules.len(),
                "maxDepth": max_depth,
                "depthBound": depth,
                "byDepth": by_depth.iter().map(|(d, n)| json!({"depth": d, "callers": n})).collect::<Vec<_>>(),
                "truncated": impact.len() >= MAX_IMPACT,
            },
            "relatedTests": tests,
            "coChangeFiles": cochange,
            "riskAssessment": {
                "level": risk.level,
                "score": risk.score,
                "factors": risk.factors.iter().map(|(name, value, s)| json!({"factor": name, "value": value, "contribution": (s * 100.0).round() / 100.0})).collect::<Vec<_>>(),
                "suggestions": suggestions,
            },
            "limitations": limitations(&set),
            "provenance": state.provenance(&backends, set.completeness, sink.elapsed_ms(), &warnings),
        }),
    );
    Ok(summary)
}

/// A caller as `prepare_change` lists it: its depth and the name it was
/// reached through.
fn impact_json((level, d, via): &(usize, Definition, String)) -> Value {
    let mut item = brief_json(d);
    item["depth"] = json!(level);
    item["via"] = json!(via);
    item
}

/// The files that usually change with `path`, each with how often, as a
/// share of `path`'s own commits (`churn`).
fn cochange(store: &Store, path: &str, churn: Option<(u64, i64)>) -> Result<Vec<Value>, RunError> {
    Ok(graph::cochanged(store, path, 10)?
        .into_iter()
        .map(|(file, commits)| {
            let ratio = churn.map_or(0.0, |(own, _)| commits as f64 / own.max(1) as f64);
            json!({"file": file, "commits": commits, "ratio": (ratio * 100.0).round() / 100.0})
        })
        .collect())
}

/// What to do before changing `main`: add a test, check what changes with
/// it, keep the old signature for many dependents.
fn suggestions(
    main: &Definition,
    no_tests: bool,
    cochange: &[Value],
    direct_count: usize,
) -> Vec<String> {
    let mut suggestions = Vec::new();
    if no_tests {
        suggestions.push(format!(
            "no test file references {}: add a test before changing it",
            main.row.name
        ));
    }
    if !cochange.is_empty() {
        suggestions.push(format!(
            "{} usually changes with {}: check it too",
            main.row.path,
            cochange
                .iter()
                .take(3)
                .filter_map(|c| c["file"].as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if direct_count > 5 {
        suggestions.push(
            "many direct dependents: keep the old signature beside the new one while they move"
                .into(),
        );
    }
    suggestions
}

/// Edges, strongest first.
fn ranked(edges: &BTreeMap<String, u64>) -> Vec<(&String, &u64)> {
    let mut list: Vec<(&String, &u64)> = edges.iter().collect();
    list.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    list
}

/// How many of a scope's definitions `explore` counts uses of, by the
/// references `find_references` gives (the most imported first).
const KEY_CANDIDATES: usize = 25;

/// `explore {path}`: `path` relative to the repository, a directory or a
/// file; empty or `.` for the whole. Its dependencies are the imports
/// resolved to files, both ways; its key symbols, those of its definitions
/// that files outside import, ranked by their references (find_references'
/// set) in those files.
pub(crate) fn explore(
    store: &Store,
    root: &Path,
    path: &str,
    sink: &mut Sink,
) -> Result<Value, RunError> {
    let state = IndexState::of(store);
    let scope = path.trim().trim_start_matches("./").trim_end_matches('/');
    let scope = if scope == "." { "" } else { scope };
    let in_scope = |p: &str| {
        scope.is_empty()
            || p == scope
            || (p.starts_with(scope) && p.as_bytes().get(scope.len()) == Some(&b'/'))
    };
    let own = scope_definitions(store, scope)?;
    let files = scope_files(store, &in_scope)?;
    if files.is_empty() {
        return Err(RunError::new(
            FailureCode::InvalidArguments,
            format!("no indexed source file is at or under {path:?}"),
        )
        .with_remediation("pass a directory or file relative to the repository's root, or \".\""));
    }
    // Imports crossing the scope's edge, both ways; the names files
    // outside import from it, and which files import each.
    let imports = import_graph(store, &|| sink.cancelled())?;
    let mut outgoing: BTreeMap<String, u64> = BTreeMap::new();
    let mut incoming: BTreeMap<String, u64> = BTreeMap::new();
    let mut importers: HashMap<&str, BTreeSet<&str>> = HashMap::new();
    let mut glob_importers: BTreeSet<&str> = BTreeSet::new();
    for ((from, to), (count, names)) in &imports.edges {
        match (in_scope(from), in_scope(to)) {
            (true, false) => *outgoing.entry(to.clone()).or_default() += count,
            (false, true) => {
                *incoming.entry(from.clone()).or_default() += count;
                for name in names {
                    if name == "*" {
                        glob_importers.insert(from);
                    } else {
                        importers.entry(name).or_default().insert(from);
                    }
                }
            }
            _ => {}
        }
    }
    let used_from_outside = used_from_outside(
        store,
        root,
        &own,
        (&importers, &glob_importers),
        &in_scope,
        sink,
    )?;
    let (git, scip) = graph::health(store)?;
    let hotspots = graph::hotspots(store, scope, 10)?;
    sink.meta(Meta {
        total: Some((own.len() + outgoing.len() + incoming.len()) as u64),
        backends: if git { vec!["tags".into(), "git".into()] } else { vec!["tags".into()] },
        info: json!({"path": scope, "files": files.len(), "chunking": "definitions grouped by file, then dependencies out and in"}),
        progress_unit: None,
    })?;
    let mut by_kind: BTreeMap<&str, u64> = BTreeMap::new();
    for row in &own {
        *by_kind.entry(&row.kind).or_default() += 1;
        sink.item(
            &row.path,
            json!({
                "stableId": row.stable_id(),
                "name": row.name,
                "kind": row.kind,
                "location": row.location(),
                "isTest": row.is_test,
                "docs": row.docs,
            }),
        )?;
    }
    for (direction, edges) in [("outgoing", &outgoing), ("incoming", &incoming)] {
        for (file, strength) in ranked(edges) {
            sink.item(
                &format!("dependencies {direction}"),
                json!({"direction": direction, "file": file, "strength": strength}),
            )?;
        }
    }
    let mut key: Vec<&SymbolRow> = own.iter().filter(|r| !r.is_test).collect();
    key.sort_by(|a, b| {
        let used = |r: &SymbolRow| used_from_outside.get(&r.stable_id()).copied().unwrap_or(0);
        used(b)
            .cmp(&used(a))
            .then(a.path.cmp(&b.path))
            .then(a.line.cmp(&b.line))
    });
    let mut languages: BTreeMap<&str, u64> = BTreeMap::new();
    for (language, _) in files.values() {
        *languages.entry(language).or_default() += 1;
    }
    let page = sink.page();
    let mut summary = paging(&page, &state.state_id);
    merge(
        &mut summary,
        json!({
            "path": if scope.is_empty() { "." } else { scope },
            "overview": {
                "fileCount": files.len(),
                "testFileCount": files.values().filter(|(_, t)| *t).count(),
                "symbolCount": own.len(),
                "languages": languages,
            },
            "symbolsByKind": by_kind,
            "keySymbols": key.iter().take(10).map(|r| json!({
                "stableId": r.stable_id(),
                "name": r.name,
                "kind": r.kind,
                "usedFromOutside": used_from_outside.get(&r.stable_id()).copied().unwrap_or(0),
            })).collect::<Vec<_>>(),
            "dependencies": {"outgoing": edge_json(&outgoing), "incoming": edge_json(&incoming)},
            "entrypoints": files.keys().filter(|f| is_entrypoint(f)).collect::<Vec<_>>(),
            "hotspots": hotspots.iter().map(|(file, commits, last_ms)| json!({"file": file, "commits": commits, "lastChangeMs": last_ms})).collect::<Vec<_>>(),
            "health": {"scipAvailable": scip, "gitAvailable": git},
            "limitations": [
                "dependencies are imports resolved to files (Rust use, Python import, JavaScript/TypeScript import and require); uses without an import that resolves are not counted",
                format!("key symbols: the {KEY_CANDIDATES} definitions most imported from outside, ranked by their references (find_references' set) in the files that import them"),
            ],
            "provenance": state.provenance(if git { &["imports", "tags", "text", "git"] } else { &["imports", "tags", "text"] }, if scip { "mixed" } else { "syntactic" }, sink.elapsed_ms(), &sink.warnings),
        }),
    );
    Ok(summary)
}

/// The definitions at or under `scope` (a path, or empty for the whole).
fn scope_definitions(store: &Store, scope: &str) -> Result<Vec<SymbolRow>, RunError> {
    let fail = failed(store);
    let mut own: Vec<SymbolRow> = Vec::new();
    let mut statement = store
        .conn
        .prepare(&format!(
            "SELECT {SYMBOL_COLUMNS} FROM symbols s JOIN files f ON f.id = s.file_id
             WHERE s.is_def = 1 AND (?1 = '' OR f.path = ?1 OR substr(f.path, 1, length(?1) + 1) = ?1 || '/')
             ORDER BY f.path, s.line, s.col"
        ))
        .map_err(&fail)?;
    let rows = statement
        .query_map([scope], SymbolRow::read)
        .map_err(&fail)?;
    for row in rows {
        own.push(row.map_err(&fail)?);
    }
    Ok(own)
}

/// The indexed files in scope: each one's language and whether it is a
/// test.
fn scope_files(
    store: &Store,
    in_scope: &dyn Fn(&str) -> bool,
) -> Result<BTreeMap<String, (String, bool)>, RunError> {
    let fail = failed(store);
    let mut files: BTreeMap<String, (String, bool)> = BTreeMap::new();
    let mut statement = store
        .conn
        .prepare("SELECT path, language, is_test FROM files ORDER BY path")
        .map_err(&fail)?;
    let rows = statement
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get(1)?, r.get(2)?)))
        .map_err(&fail)?;
    for row in rows {
        let (file, language, is_test) = row.map_err(&fail)?;
        if in_scope(&file) {
            files.insert(file, (language, is_test));
        }
    }
    Ok(files)
}

/// How often each of the scope's key candidates is used from outside it:
/// the definitions imported by name, then (for whole-module imports) the
/// rest, in order, at most [`KEY_CANDIDATES`]; each counted by its
/// references in the files that import it. `importers`: the files
/// importing each name, and those importing the whole module.
fn used_from_outside(
    store: &Store,
    root: &Path,
    own: &[SymbolRow],
    (importers, glob_importers): (&HashMap<&str, BTreeSet<&str>>, &BTreeSet<&str>),
    in_scope: &dyn Fn(&str) -> bool,
    sink: &Sink,
) -> Result<HashMap<String, u64>, RunError> {
    let mut candidates: Vec<&SymbolRow> = own
        .iter()
        .filter(|r| {
            !r.is_test && (importers.contains_key(r.name.as_str()) || !glob_importers.is_empty())
        })
        .collect();
    candidates.sort_by_key(|r| {
        std::cmp::Reverse(importers.get(r.name.as_str()).map_or(0, BTreeSet::len))
    });
    candidates.truncate(KEY_CANDIDATES);
    let mut used_from_outside: HashMap<String, u64> = HashMap::new();
    for candidate in &candidates {
        if sink.cancelled() {
            return Err(Stopped.into());
        }
        let query = ReferencesQuery {
            symbol: candidate.stable_id(),
            include_tests: true,
            text: true,
        };
        let set = ReferenceSet::open(store, root, &query)?;
        let from = importers.get(candidate.name.as_str());
        let count = set
            .collect(&|| sink.cancelled())?
            .iter()
            .filter(|r| {
                !r.is_definition()
                    && !in_scope(&r.path)
                    && (from.is_some_and(|f| f.contains(r.path.as_str()))
                        || glob_importers.contains(r.path.as_str()))
            })
            .count() as u64;
        used_from_outside.insert(candidate.stable_id(), count);
    }
    Ok(used_from_outside)
}

/// The strongest of `edges` as the summary shows them.
fn edge_json(edges: &BTreeMap<String, u64>) -> Vec<Value> {
    ranked(edges)
        .into_iter()
        .take(SHOWN)
        .map(|(file, strength)| json!({"file": file, "strength": strength}))
        .collect()
}
