//! What the compound tools build on: a symbol's definitions, the
//! definitions that enclose its uses (callers), the names used inside a
//! definition (callees), and git's churn and co-change.
//!
//! Callers and callees come from the tags: a use's caller is the innermost
//! definition whose body holds its line. Languages whose tags have no
//! references (C, C++) have no callers.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use rusqlite::params;
use weir_core::{FailureCode, RunError};

use crate::language::Language;
use crate::query::{SYMBOL_COLUMNS, SymbolRow};
use crate::store::Store;

pub(crate) fn failed(store: &Store) -> impl Fn(rusqlite::Error) -> RunError + '_ {
    |e| RunError::new(FailureCode::ToolError, store.error(e).to_string())
}

/// A definition with the last line of its body.
#[derive(Clone, Debug)]
pub(crate) struct Definition {
    pub(crate) row: SymbolRow,
    pub(crate) body_end_line: u32,
}

fn definitions_where(
    store: &Store,
    condition: &str,
    params: &[&dyn rusqlite::ToSql],
) -> Result<Vec<Definition>, RunError> {
    let mut statement = store
        .conn
        .prepare_cached(&format!(
            "SELECT {SYMBOL_COLUMNS}, s.body_end_line FROM symbols s JOIN files f ON f.id = s.file_id
             WHERE s.is_def = 1 AND {condition} ORDER BY f.is_test, f.path, s.line"
        ))
        .map_err(failed(store))?;
    let rows = statement
        .query_map(params, |r| {
            Ok(Definition {
                row: SymbolRow::read(r)?,
                body_end_line: r.get(11)?,
            })
        })
        .map_err(failed(store))?;
    rows.collect::<Result<_, _>>().map_err(failed(store))
}

/// What `symbol` (a name, or a stableId `path:line:name`) names: its
/// definitions, the pinned one first.
pub(crate) fn definitions(store: &Store, symbol: &str) -> Result<Vec<Definition>, RunError> {
    let parts: Vec<&str> = symbol.rsplitn(3, ':').collect();
    if let [name, line, path] = parts.as_slice()
        && let Ok(line) = line.parse::<u32>()
    {
        let pinned = definitions_where(
            store,
            "f.path = ?1 AND s.line = ?2 AND s.name = ?3",
            &[path, &line, name],
        )?;
        if !pinned.is_empty() {
            return Ok(pinned);
        }
    }
    definitions_where(store, "s.name = ?1", &[&symbol])
}

/// The callers of `name`'s tagged uses in files of `families` (any, when
/// empty): for each use, the innermost definition enclosing it, if any.
/// Imports are no calls: they are left out.
fn callers(
    store: &Store,
    name: &str,
    families: &BTreeSet<String>,
) -> Result<Vec<Definition>, RunError> {
    let mut statement = store
        .conn
        .prepare_cached(&format!(
            "SELECT {SYMBOL_COLUMNS}, s.file_id, f.language FROM symbols s JOIN files f ON f.id = s.file_id
             WHERE s.name = ?1 AND s.is_def = 0 AND s.kind != 'import' ORDER BY f.path, s.line, s.col"
        ))
        .map_err(failed(store))?;
    let rows: Vec<(SymbolRow, i64)> = statement
        .query_map([name], |r| {
            Ok((SymbolRow::read(r)?, r.get(11)?, r.get::<_, String>(12)?))
        })
        .map_err(failed(store))?
        .filter(|row| {
            row.as_ref().map_or(true, |(_, _, language)| {
                families.is_empty() || families.contains(Language::family_of(language))
            })
        })
        .map(|row| row.map(|(symbol, file, _)| (symbol, file)))
        .collect::<Result<_, _>>()
        .map_err(failed(store))?;
    let mut enclosing = store
        .conn
        .prepare_cached(&format!(
            "SELECT {SYMBOL_COLUMNS}, s.body_end_line FROM symbols s JOIN files f ON f.id = s.file_id
             WHERE s.file_id = ?1 AND s.is_def = 1 AND s.line <= ?2 AND s.body_end_line >= ?2
             ORDER BY s.line DESC LIMIT 1"
        ))
        .map_err(failed(store))?;
    let mut found = Vec::with_capacity(rows.len());
    for (row, file_id) in rows {
        let caller = enclosing
            .query_map(params![file_id, row.line], |r| {
                Ok(Definition {
                    row: SymbolRow::read(r)?,
                    body_end_line: r.get(11)?,
                })
            })
            .map_err(failed(store))?
            .next()
            .transpose()
            .map_err(failed(store))?;
        found.extend(caller);
    }
    Ok(found)
}

/// The innermost definition in `path` whose body holds `line`.
pub(crate) fn enclosing(
    store: &Store,
    path: &str,
    line: u32,
) -> Result<Option<Definition>, RunError> {
    let mut statement = store
        .conn
        .prepare_cached(&format!(
            "SELECT {SYMBOL_COLUMNS}, s.body_end_line FROM symbols s JOIN files f ON f.id = s.file_id
             WHERE f.path = ?1 AND s.is_def = 1 AND s.line <= ?2 AND s.body_end_line >= ?2
             ORDER BY s.line DESC LIMIT 1"
        ))
        .map_err(failed(store))?;
    statement
        .query_map(params![path, line], |r| {
            Ok(Definition {
                row: SymbolRow::read(r)?,
                body_end_line: r.get(11)?,
            })
        })
        .map_err(failed(store))?
        .next()
        .transpose()
        .map_err(failed(store))
}

/// The distinct names `definition` uses in its body, with how often, in
/// order of first use.
pub(crate) fn callees(
    store: &Store,
    definition: &Definition,
) -> Result<Vec<(String, String, u64)>, RunError> {
    let mut statement = store
        .conn
        .prepare_cached(
            "SELECT s.name, s.kind FROM symbols s JOIN files f ON f.id = s.file_id
             WHERE f.path = ?1 AND s.is_def = 0 AND s.line >= ?2 AND s.line <= ?3
             ORDER BY s.line, s.col",
        )
        .map_err(failed(store))?;
    let rows = statement
        .query_map(
            params![
                definition.row.path,
                definition.row.line,
                definition.body_end_line
            ],
            |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
        )
        .map_err(failed(store))?;
    let mut order: Vec<(String, String, u64)> = Vec::new();
    for row in rows {
        let (name, kind) = row.map_err(failed(store))?;
        match order.iter_mut().find(|(n, _, _)| *n == name) {
            Some(seen) => seen.2 += 1,
            None => order.push((name, kind, 1)),
        }
    }
    Ok(order)
}

/// Git's churn of `path` (commits among the recent ones), if any.
pub(crate) fn churn(store: &Store, path: &str) -> Result<Option<(u64, i64)>, RunError> {
    let mut statement = store
        .conn
        .prepare_cached("SELECT commits, last_ms FROM git_churn WHERE path = ?1")
        .map_err(failed(store))?;
    statement
        .query_map([path], |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?)))
        .map_err(failed(store))?
        .next()
        .transpose()
        .map_err(failed(store))
}

/// The files that changed together with `path`, most often first.
pub(crate) fn cochanged(
    store: &Store,
    path: &str,
    limit: usize,
) -> Result<Vec<(String, u64)>, RunError> {
    let mut statement = store
        .conn
        .prepare_cached(
            "SELECT CASE WHEN a = ?1 THEN b ELSE a END, commits FROM git_cochange
             WHERE a = ?1 OR b = ?1 ORDER BY commits DESC, 1 LIMIT ?2",
        )
        .map_err(failed(store))?;
    let rows = statement
        .query_map(params![path, limit as i64], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64))
        })
        .map_err(failed(store))?;
    rows.collect::<Result<_, _>>().map_err(failed(store))
}

/// The files with the most churn under `prefix` ("" for all).
pub(crate) fn hotspots(
    store: &Store,
    prefix: &str,
    limit: usize,
) -> Result<Vec<(String, u64, i64)>, RunError> {
    let mut statement = store
        .conn
        .prepare_cached(
            "SELECT path, commits, last_ms FROM git_churn
             WHERE ?1 = '' OR path = ?1 OR substr(path, 1, length(?1) + 1) = ?1 || '/'
             ORDER BY commits DESC, last_ms DESC, path LIMIT ?2",
        )
        .map_err(failed(store))?;
    let rows = statement
        .query_map(params![prefix, limit as i64], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)? as u64,
                r.get(2)?,
            ))
        })
        .map_err(failed(store))?;
    rows.collect::<Result<_, _>>().map_err(failed(store))
}

/// Whether the index has git history and a SCIP index.
pub(crate) fn health(store: &Store) -> Result<(bool, bool), RunError> {
    let count = |sql: &str| {
        store
            .conn
            .query_row(sql, [], |r| r.get::<_, i64>(0))
            .map_err(failed(store))
    };
    let git = count("SELECT COUNT(*) FROM git_churn")? > 0;
    let scip = count("SELECT COUNT(*) FROM scip_documents")? > 0;
    Ok((git, scip))
}

/// The callers of `name` past its direct dependents (`direct`, level 1,
/// each with the name it uses), level by level up to `depth`: each caller
/// once, at the level it is first reached, with the name it calls
/// (`via`). Past level 1 callers come from the tags of `families`' files,
/// by name.
pub(crate) fn impact(
    store: &Store,
    name: &str,
    direct: Vec<Definition>,
    depth: usize,
    max_nodes: usize,
    families: &BTreeSet<String>,
    cancelled: &dyn Fn() -> bool,
) -> Result<Vec<(usize, Definition, String)>, RunError> {
    let mut reached: Vec<(usize, Definition, String)> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut names_seen: HashSet<String> = HashSet::from([name.to_owned()]);
    let mut frontier = Vec::new();
    for caller in direct {
        if reached.len() >= max_nodes || !seen.insert(caller.row.stable_id()) {
            continue;
        }
        if names_seen.insert(caller.row.name.clone()) {
            frontier.push(caller.row.name.clone());
        }
        reached.push((1, caller, name.to_owned()));
    }
    for level in 2..=depth {
        if frontier.is_empty() {
            break;
        }
        let mut next = Vec::new();
        for callee in &frontier {
            if cancelled() {
                return Err(crate::answer::Stopped.into());
            }
            let mut by_caller: BTreeMap<String, Definition> = BTreeMap::new();
            for caller in callers(store, callee, families)? {
                if caller.row.name != *callee {
                    by_caller.entry(caller.row.stable_id()).or_insert(caller);
                }
            }
            for (id, caller) in by_caller {
                if reached.len() >= max_nodes || !seen.insert(id) {
                    continue;
                }
                if names_seen.insert(caller.row.name.clone()) {
                    next.push(caller.row.name.clone());
                }
                reached.push((level, caller, callee.clone()));
            }
        }
        frontier = next;
    }
    Ok(reached)
}
