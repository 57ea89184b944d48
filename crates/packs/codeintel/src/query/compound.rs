//! The compound questions, each answering in one call what would take an
//! agent several: `explore` (what is in a directory or file), `understand`
//! (a symbol: definition, uses, callers, callees) and `prepare_change`
//! (what a change to a symbol touches, and how risky it is). Each streams
//! its parts in stages, grouped (definitions, then uses by file, then the
//! call graph), and sums them up in its result.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;

use serde_json::{Value, json};
use weir_core::{FailureCode, Meta, RunError};

use crate::answer::{Sink, Stopped, paging};
use crate::indexer::is_test_path;
use crate::query::architecture::is_entrypoint;
use crate::query::graph::{self, Definition, failed};
use crate::query::references::{self, merge};
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

fn limitations() -> Value {
    json!([
        "callers and callees come from tree-sitter tags, by name: same-named symbols share them; so do uses, unless a SCIP index covers the definition",
        "a caller is the innermost definition whose body holds the use",
    ])
}

/// The uses of `main` a SCIP index knows exactly, when it covers main's
/// file and has main's definition: each with its caller from the tags.
fn exact_uses(
    store: &Store,
    root: &Path,
    main: &Definition,
) -> Result<Option<Vec<graph::Use>>, RunError> {
    if !references::scip_documents(store)?.contains(&main.row.path) {
        return Ok(None);
    }
    let target = references::resolve(store, &main.row.stable_id(), true)?;
    if !target.pinned {
        return Ok(None);
    }
    let mut uses = Vec::new();
    let mut lines: HashMap<String, Vec<String>> = HashMap::new();
    for hit in references::scip_hits(store, &target.scip)? {
        if hit.is_definition() {
            continue;
        }
        let text = lines
            .entry(hit.path.clone())
            .or_insert_with(|| references::source_lines(root, &hit.path));
        let row = SymbolRow {
            is_test: is_test_path(&hit.path),
            name: main.row.name.clone(),
            kind: hit.kind().to_owned(),
            line: hit.line,
            column: hit.column,
            end_line: hit.end_line,
            end_column: hit.end_column,
            context: text.get(hit.line as usize - 1).cloned().unwrap_or_default(),
            docs: None,
            id: 0,
            path: hit.path,
        };
        let caller = graph::enclosing(store, &row.path, row.line)?;
        uses.push(graph::Use { row, caller });
    }
    Ok(Some(uses))
}

/// `understand {symbol}`. Its uses are exact when a SCIP index covers the
/// definition; the callers and callees come from the tags either way.
pub(crate) fn understand(
    store: &Store,
    root: &Path,
    symbol: &str,
    sink: &mut Sink,
) -> Result<Value, RunError> {
    let state = IndexState::of(store);
    let (definitions, ambiguity) = target(store, symbol)?;
    let main = &definitions[0];
    let exact = exact_uses(store, root, main)?;
    let (backends, completeness): (&[&str], &str) = match exact {
        Some(_) => (&["scip", "tags"], "mixed"),
        None => (&["tags"], "syntactic"),
    };
    let uses = match exact {
        Some(uses) => uses,
        None => graph::uses(store, &main.row.name)?,
    };
    let callees = graph::callees(store, main)?;
    sink.meta(Meta {
        total: None,
        backends: backends.iter().map(|b| (*b).to_owned()).collect(),
        info: json!({
            "symbol": symbol,
            "completeness": completeness,
            "definitions": definitions.len(),
            "references": uses.len(),
            "chunking": "the definition, then uses grouped by file, then callers, then callees",
        }),
        progress_unit: None,
    })?;
    sink.item("definition", definition_json(main))?;
    let mut by_file: BTreeMap<&str, Vec<&graph::Use>> = BTreeMap::new();
    for u in &uses {
        by_file.entry(u.row.path.as_str()).or_default().push(u);
    }
    let mut callers: BTreeMap<String, (&Definition, u64)> = BTreeMap::new();
    let mut tests: BTreeSet<&str> = BTreeSet::new();
    for (path, uses) in &by_file {
        for u in uses {
            let caller = u.caller.as_ref().filter(|c| c.row.name != main.row.name);
            if let Some(caller) = caller {
                callers
                    .entry(caller.row.stable_id())
                    .or_insert((caller, 0))
                    .1 += 1;
            }
            if u.row.is_test {
                tests.insert(path);
            }
            sink.item(
                path,
                json!({
                    "location": u.row.location(),
                    "kind": u.row.kind,
                    "context": u.row.context,
                    "isTest": u.row.is_test,
                    "caller": caller.map(|c| c.row.stable_id()),
                }),
            )?;
        }
    }
    let mut callers: Vec<(&Definition, u64)> = callers.into_values().collect();
    callers.sort_by(|a, b| {
        b.1.cmp(&a.1)
            .then(a.0.row.stable_id().cmp(&b.0.row.stable_id()))
    });
    let caller_json = |(d, calls): &(&Definition, u64)| {
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
            .take(MAX_DEFINITIONS)
            .map(|d| d.row.stable_id())
            .collect();
        let item = json!({"name": name, "kind": kind, "calls": calls, "definedAt": defined_at});
        sink.item("callees", item.clone())?;
        callee_items.push(item);
    }
    let page = sink.page();
    let mut summary = paging(&page, &state.state_id);
    let mut files: Vec<(&&str, &Vec<&graph::Use>)> = by_file.iter().collect();
    files.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(b.0)));
    merge(
        &mut summary,
        json!({
            "symbol": symbol,
            "definition": definition_json(main),
            "ambiguity": ambiguity,
            "references": {
                "totalCount": uses.len(),
                "fileCount": by_file.len(),
                "byFile": files.iter().take(SHOWN).map(|(file, uses)| json!({
                    "file": file,
                    "count": uses.len(),
                    "references": uses.iter().take(LINES_PER_FILE).map(|u| json!({"line": u.row.line, "kind": u.row.kind, "context": u.row.context.chars().take(CONTEXT_CHARS).collect::<String>()})).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
                "truncated": files.len() > SHOWN,
            },
            "callers": callers.iter().take(SHOWN).map(caller_json).collect::<Vec<_>>(),
            "callees": callee_items.into_iter().take(SHOWN).collect::<Vec<_>>(),
            "relatedTests": tests,
            "limitations": limitations(),
            "provenance": state.provenance(backends, completeness, sink.elapsed_ms(), &sink.warnings),
        }),
    );
    Ok(summary)
}

/// `prepare_change {symbol, depth}`.
pub(crate) fn prepare_change(
    store: &Store,
    symbol: &str,
    depth: usize,
    sink: &mut Sink,
) -> Result<Value, RunError> {
    let state = IndexState::of(store);
    let (definitions, ambiguity) = target(store, symbol)?;
    let main = &definitions[0];
    let cancelled = || sink.cancelled();
    let impact = graph::impact(store, &main.row.name, depth, MAX_IMPACT, &cancelled)?;
    let direct: Vec<&(usize, Definition, String)> =
        impact.iter().filter(|(level, _, _)| *level == 1).collect();
    let mut modules: BTreeSet<&str> = impact
        .iter()
        .map(|(_, d, _)| directory(&d.row.path))
        .collect();
    modules.insert(directory(&main.row.path));
    let mut tests: BTreeSet<String> = impact
        .iter()
        .filter(|(_, d, _)| d.row.is_test)
        .map(|(_, d, _)| d.row.path.clone())
        .collect();
    for u in graph::uses(store, &main.row.name)? {
        if u.row.is_test {
            tests.insert(u.row.path);
        }
    }
    let churn = graph::churn(store, &main.row.path)?;
    let cochange: Vec<Value> = graph::cochanged(store, &main.row.path, 10)?
        .into_iter()
        .map(|(file, commits)| {
            let ratio = churn.map_or(0.0, |(own, _)| commits as f64 / own.max(1) as f64);
            json!({"file": file, "commits": commits, "ratio": (ratio * 100.0).round() / 100.0})
        })
        .collect();
    let max_depth = impact.iter().map(|(level, _, _)| *level).max().unwrap_or(0);
    sink.meta(Meta {
        total: Some((1 + impact.len() + tests.len() + cochange.len()) as u64),
        backends: vec!["tags".into(), "git".into()],
        info: json!({
            "symbol": symbol,
            "depthBound": depth,
            "chunking": "the target, then callers by depth, then related tests, then co-change files",
        }),
        progress_unit: None,
    })?;
    sink.item("target", definition_json(main))?;
    let impact_json = |(level, d, via): &(usize, Definition, String)| {
        let mut item = brief_json(d);
        item["depth"] = json!(level);
        item["via"] = json!(via);
        item
    };
    for entry in &impact {
        sink.item(&format!("impact depth {}", entry.0), impact_json(entry))?;
    }
    for test in &tests {
        sink.item("tests", json!({"file": test}))?;
    }
    for file in &cochange {
        sink.item("cochange", file.clone())?;
    }
    // The risk: each factor's share of a score from 0 to 1.
    let share = |value: f64, full: f64, weight: f64| (value / full).min(1.0) * weight;
    let commits = churn.map_or(0, |(commits, _)| commits);
    let factors = [
        (
            "directDependents",
            direct.len() as f64,
            share(direct.len() as f64, 10.0, 0.3),
        ),
        (
            "transitiveCallers",
            impact.len() as f64,
            share(impact.len() as f64, 30.0, 0.2),
        ),
        (
            "moduleSpread",
            modules.len() as f64,
            share(modules.len().saturating_sub(1) as f64, 4.0, 0.2),
        ),
        (
            "noRelatedTests",
            if tests.is_empty() { 1.0 } else { 0.0 },
            if tests.is_empty() { 0.15 } else { 0.0 },
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
    let mut suggestions = Vec::new();
    if tests.is_empty() {
        suggestions.push(format!(
            "no test uses {}: add one before changing it",
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
    if direct.len() > 5 {
        suggestions.push(
            "many direct dependents: keep the old signature beside the new one while they move"
                .into(),
        );
    }
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
    merge(
        &mut summary,
        json!({
            "symbol": symbol,
            "target": definition_json(main),
            "ambiguity": ambiguity,
            "directDependents": direct.iter().take(SHOWN).map(|e| impact_json(e)).collect::<Vec<_>>(),
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
                "level": level,
                "score": score,
                "factors": factors.iter().map(|(name, value, s)| json!({"factor": name, "value": value, "contribution": (s * 100.0).round() / 100.0})).collect::<Vec<_>>(),
                "suggestions": suggestions,
            },
            "limitations": limitations(),
            "provenance": state.provenance(if git { &["tags", "git"] } else { &["tags"] }, "syntactic", sink.elapsed_ms(), &warnings),
        }),
    );
    Ok(summary)
}

/// Edges, strongest first.
fn ranked(edges: &BTreeMap<String, u64>) -> Vec<(&String, &u64)> {
    let mut list: Vec<(&String, &u64)> = edges.iter().collect();
    list.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    list
}

/// `explore {path}`: `path` relative to the repository, a directory or a
/// file; empty or `.` for the whole.
pub(crate) fn explore(store: &Store, path: &str, sink: &mut Sink) -> Result<Value, RunError> {
    let state = IndexState::of(store);
    let fail = failed(store);
    let scope = path.trim().trim_start_matches("./").trim_end_matches('/');
    let scope = if scope == "." { "" } else { scope };
    let in_scope = |p: &str| {
        scope.is_empty()
            || p == scope
            || (p.starts_with(scope) && p.as_bytes().get(scope.len()) == Some(&b'/'))
    };
    // Where each name is defined (up to one place more than counts: more
    // is too common to follow), and the scope's own definitions in order.
    let mut defined_in: HashMap<String, Vec<String>> = HashMap::new();
    let mut own: Vec<SymbolRow> = Vec::new();
    {
        let mut statement = store
            .conn
            .prepare(&format!(
                "SELECT {SYMBOL_COLUMNS} FROM symbols s JOIN files f ON f.id = s.file_id
                 WHERE s.is_def = 1 ORDER BY f.path, s.line, s.col"
            ))
            .map_err(&fail)?;
        let mut rows = statement.query([]).map_err(&fail)?;
        while let Some(row) = rows.next().map_err(&fail)? {
            let path = row.get_ref(0).map_err(&fail)?.as_str().unwrap_or_default();
            let name = row.get_ref(2).map_err(&fail)?.as_str().unwrap_or_default();
            let places = defined_in.entry(name.to_owned()).or_default();
            if places.len() <= MAX_DEFINITIONS {
                places.push(path.to_owned());
            }
            if in_scope(path) {
                own.push(SymbolRow::read(row).map_err(&fail)?);
            }
        }
    }
    let mut files: BTreeMap<String, (String, bool)> = BTreeMap::new();
    {
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
    }
    if files.is_empty() {
        return Err(RunError::new(
            FailureCode::InvalidArguments,
            format!("no indexed source file is at or under {path:?}"),
        )
        .with_remediation("pass a directory or file relative to the repository's root, or \".\""));
    }
    // Uses crossing the scope's edge, both ways, and how often each of the
    // scope's names is used from outside.
    let own_names: HashSet<&str> = own.iter().map(|r| r.name.as_str()).collect();
    let mut outgoing: BTreeMap<String, u64> = BTreeMap::new();
    let mut incoming: BTreeMap<String, u64> = BTreeMap::new();
    let mut used_from_outside: HashMap<&str, u64> = HashMap::new();
    {
        let mut statement = store
            .conn
            .prepare("SELECT s.name, f.path FROM symbols s JOIN files f ON f.id = s.file_id WHERE s.is_def = 0")
            .map_err(&fail)?;
        let mut rows = statement.query([]).map_err(&fail)?;
        let mut n = 0u64;
        while let Some(row) = rows.next().map_err(&fail)? {
            n += 1;
            if n.is_multiple_of(10_000) && sink.cancelled() {
                return Err(Stopped.into());
            }
            let name: String = row.get(0).map_err(&fail)?;
            let from: String = row.get(1).map_err(&fail)?;
            let Some(places) = defined_in.get(name.as_str()) else {
                continue;
            };
            if places.len() > MAX_DEFINITIONS {
                continue;
            }
            let inside = in_scope(&from);
            if inside && !own_names.contains(name.as_str()) {
                for to in places {
                    *outgoing.entry((*to).to_owned()).or_default() += 1;
                }
            } else if !inside && let Some(name) = own_names.get(name.as_str()) {
                *incoming.entry(from).or_default() += 1;
                *used_from_outside.entry(name).or_default() += 1;
            }
        }
    }
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
        let used = |r: &SymbolRow| used_from_outside.get(r.name.as_str()).copied().unwrap_or(0);
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
    let edge_json = |edges: &BTreeMap<String, u64>| {
        ranked(edges)
            .into_iter()
            .take(SHOWN)
            .map(|(file, strength)| json!({"file": file, "strength": strength}))
            .collect::<Vec<_>>()
    };
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
                "usedFromOutside": used_from_outside.get(r.name.as_str()).copied().unwrap_or(0),
            })).collect::<Vec<_>>(),
            "dependencies": {"outgoing": edge_json(&outgoing), "incoming": edge_json(&incoming)},
            "entrypoints": files.keys().filter(|f| is_entrypoint(f)).collect::<Vec<_>>(),
            "hotspots": hotspots.iter().map(|(file, commits, last_ms)| json!({"file": file, "commits": commits, "lastChangeMs": last_ms})).collect::<Vec<_>>(),
            "health": {"scipAvailable": scip, "gitAvailable": git},
            "provenance": state.provenance(if git { &["tags", "git"] } else { &["tags"] }, "syntactic", sink.elapsed_ms(), &sink.warnings),
        }),
    );
    Ok(summary)
}
