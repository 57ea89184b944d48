//! `find_references`: a name's definitions, then its uses grouped by file.
//!
//! Three backends. `scip`: when the repository has an `index.scip`, the
//! files it covers answer from it, exactly: each occurrence belongs to one
//! SCIP symbol, so two `area` methods never mix, and an item says which
//! (`symbolId`). Elsewhere, `tags`: the call sites, type uses and
//! implementations the grammars' tags queries find, and `text`: every other
//! whole-word occurrence, in the files whose words (an FTS5 table of each
//! file's identifiers) include the name — read when the query reaches
//! them, so the first file's uses go out before the last file is read.
//!
//! `symbol` is a name (`area`), a definition's `stableId` from
//! `search_symbols` (`src/shapes.rs:5:area`) or a SCIP symbol. The last
//! two pin the answer to one symbol when SCIP knows it: then only its
//! occurrences are given, and the answer is `exact`. In the files SCIP
//! covers it is trusted whole: a mention in a comment or a string is no
//! use, and a file edited since the indexer ran may have moved (index.scip
//! is as fresh as its indexer's last run).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;

use serde_json::{Value, json};
use weir_core::{FailureCode, Meta, RunError};

use crate::answer::{Sink, Stopped, paging};
use crate::indexer::is_test_path;
use crate::query::{IndexState, SYMBOL_COLUMNS, SymbolRow, location};
use crate::repo;
use crate::scip::{ROLE_DEFINITION, ROLE_IMPORT, ROLE_WRITE};
use crate::store::Store;

/// What was asked.
pub(crate) struct ReferencesQuery {
    pub(crate) symbol: String,
    pub(crate) include_tests: bool,
    /// Also whole-word text occurrences that no tag covers.
    pub(crate) text: bool,
}

/// How many items the summary shows itself.
const TOP_ITEMS: usize = 10;
/// How many files the summary counts by name.
const TOP_FILES: usize = 20;
/// How many SCIP symbols of one name the summary lists.
const TOP_SYMBOLS: usize = 20;

/// A SCIP symbol an answer is about.
#[derive(Clone, Debug)]
pub(crate) struct ScipTarget {
    pub(crate) id: i64,
    pub(crate) symbol: String,
    pub(crate) name: String,
    pub(crate) kind: Option<String>,
    pub(crate) docs: Option<String>,
}

/// What `symbol` asks about.
pub(crate) struct Target {
    /// The plain name, for tags and text.
    pub(crate) name: String,
    /// The SCIP symbols it means (empty without SCIP).
    pub(crate) scip: Vec<ScipTarget>,
    /// Whether `symbol` named one symbol (a stableId, a SCIP symbol) that
    /// SCIP resolved: then nothing but its occurrences answers.
    pub(crate) pinned: bool,
    pub(crate) warning: Option<String>,
}

/// The documents the repository's SCIP index covers (empty without one).
pub(crate) fn scip_documents(store: &Store) -> Result<HashSet<String>, RunError> {
    let failed =
        |e: rusqlite::Error| RunError::new(FailureCode::ToolError, store.error(e).to_string());
    let mut statement = store
        .conn
        .prepare_cached("SELECT path FROM scip_documents")
        .map_err(failed)?;
    let rows = statement
        .query_map([], |r| r.get::<_, String>(0))
        .map_err(failed)?;
    rows.collect::<Result<_, _>>().map_err(failed)
}

/// Resolves `symbol` (a name, a stableId `path:line:name`, or a SCIP
/// symbol) against the SCIP index.
pub(crate) fn resolve(store: &Store, symbol: &str, scip: bool) -> Result<Target, RunError> {
    let failed =
        |e: rusqlite::Error| RunError::new(FailureCode::ToolError, store.error(e).to_string());
    let targets =
        |sql: &str, params: &[&dyn rusqlite::ToSql]| -> Result<Vec<ScipTarget>, RunError> {
            let mut statement = store.conn.prepare_cached(sql).map_err(failed)?;
            let rows = statement
                .query_map(params, |r| {
                    Ok(ScipTarget {
                        id: r.get(0)?,
                        symbol: r.get(1)?,
                        name: r.get(2)?,
                        kind: r.get(3)?,
                        docs: r.get(4)?,
                    })
                })
                .map_err(failed)?;
            rows.collect::<Result<_, _>>().map_err(failed)
        };
    const COLUMNS: &str = "s.id, s.symbol, s.name, s.kind, s.docs";
    // `path:line:name`, as search_symbols' stableId.
    let parts: Vec<&str> = symbol.rsplitn(3, ':').collect();
    let pinned_by = match parts.as_slice() {
        [name, line, path] if !path.is_empty() && !name.is_empty() => {
            line.parse::<u32>().ok().map(|line| (*path, line, *name))
        }
        _ => None,
    };
    let is_scip_symbol = symbol.contains(' ');
    let name = match (pinned_by, is_scip_symbol) {
        (Some((_, _, name)), _) => name.to_owned(),
        (None, true) => crate::scip::descriptor_name(symbol),
        (None, false) => symbol.to_owned(),
    };
    if !scip {
        let warning = (pinned_by.is_some() || is_scip_symbol).then(|| {
            format!("the repository has no SCIP index: answering for every symbol named {name:?}")
        });
        return Ok(Target {
            name,
            scip: Vec::new(),
            pinned: false,
            warning,
        });
    }
    if let Some((path, line, name)) = pinned_by {
        let found = targets(
            &format!(
                "SELECT DISTINCT {COLUMNS} FROM scip_occurrences o JOIN scip_symbols s ON s.id = o.symbol_id
                 WHERE o.path = ?1 AND o.line = ?2 AND (o.roles & {ROLE_DEFINITION}) != 0 AND s.name = ?3"
            ),
            &[&path, &line, &name],
        )?;
        if !found.is_empty() {
            return Ok(Target {
                name: name.to_owned(),
                scip: found,
                pinned: true,
                warning: None,
            });
        }
        return Ok(Target {
            name: name.to_owned(),
            scip: targets(
                &format!(
                    "SELECT {COLUMNS} FROM scip_symbols s WHERE s.name = ?1 ORDER BY s.symbol"
                ),
                &[&name],
            )?,
            pinned: false,
            warning: Some(format!(
                "the SCIP index has no definition of {name:?} at {path}:{line}: answering for every symbol named {name:?}"
            )),
        });
    }
    if is_scip_symbol {
        let found = targets(
            &format!("SELECT {COLUMNS} FROM scip_symbols s WHERE s.symbol = ?1"),
            &[&symbol],
        )?;
        if let Some(first) = found.first() {
            return Ok(Target {
                name: first.name.clone(),
                pinned: true,
                scip: found,
                warning: None,
            });
        }
    }
    Ok(Target {
        scip: targets(
            &format!("SELECT {COLUMNS} FROM scip_symbols s WHERE s.name = ?1 ORDER BY s.symbol"),
            &[&name],
        )?,
        warning: is_scip_symbol.then(|| {
            format!(
                "the SCIP index has no symbol {symbol:?}: answering for every symbol named {name:?}"
            )
        }),
        name,
        pinned: false,
    })
}

/// One SCIP occurrence of a target.
#[derive(Clone, Debug)]
pub(crate) struct ScipHit {
    pub(crate) symbol_id: i64,
    pub(crate) path: String,
    pub(crate) line: u32,
    pub(crate) column: u32,
    pub(crate) end_line: u32,
    pub(crate) end_column: u32,
    pub(crate) roles: i32,
}

impl ScipHit {
    pub(crate) fn is_definition(&self) -> bool {
        self.roles & ROLE_DEFINITION != 0
    }

    /// The kind of use, in the words the other backends use.
    pub(crate) fn kind(&self) -> &'static str {
        if self.is_definition() {
            "definition"
        } else if self.roles & ROLE_IMPORT != 0 {
            "import"
        } else if self.roles & ROLE_WRITE != 0 {
            "write"
        } else {
            "reference"
        }
    }
}

/// Every occurrence of `targets`, by path, line and column.
pub(crate) fn scip_hits(store: &Store, targets: &[ScipTarget]) -> Result<Vec<ScipHit>, RunError> {
    let failed =
        |e: rusqlite::Error| RunError::new(FailureCode::ToolError, store.error(e).to_string());
    let mut hits = Vec::new();
    let mut statement = store
        .conn
        .prepare_cached(
            "SELECT symbol_id, path, line, col, end_line, end_col, roles FROM scip_occurrences
             WHERE symbol_id = ?1",
        )
        .map_err(failed)?;
    for target in targets {
        let rows = statement
            .query_map([target.id], |r| {
                Ok(ScipHit {
                    symbol_id: r.get(0)?,
                    path: r.get(1)?,
                    line: r.get(2)?,
                    column: r.get(3)?,
                    end_line: r.get(4)?,
                    end_column: r.get(5)?,
                    roles: r.get(6)?,
                })
            })
            .map_err(failed)?;
        for row in rows {
            hits.push(row.map_err(failed)?);
        }
    }
    hits.sort_by(|a, b| (&a.path, a.line, a.column).cmp(&(&b.path, b.line, b.column)));
    Ok(hits)
}

/// A file's lines, for `context`.
pub(crate) fn source_lines(root: &Path, path: &str) -> Vec<String> {
    repo::read_beneath(root, path, repo::MAX_READ_BYTES)
        .map(|s| {
            String::from_utf8_lossy(&s)
                .split('\n')
                .map(|l| l.trim().chars().take(200).collect())
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn find_references(
    store: &Store,
    root: &Path,
    query: &ReferencesQuery,
    sink: &mut Sink,
) -> Result<Value, RunError> {
    let state = IndexState::of(store);
    let failed =
        |e: rusqlite::Error| RunError::new(FailureCode::ToolError, store.error(e).to_string());
    let covered = scip_documents(store)?;
    let target = resolve(store, &query.symbol, !covered.is_empty())?;
    if let Some(warning) = &target.warning {
        sink.warning(warning.clone())?;
    }
    let name = target.name.as_str();
    let tests = if query.include_tests {
        ""
    } else {
        "AND f.is_test = 0"
    };
    // SCIP answers for the files it covers; a pinned symbol, for all.
    let scip = scip_hits(store, &target.scip)?
        .into_iter()
        .filter(|hit| query.include_tests || !is_test_path(&hit.path))
        .collect::<Vec<_>>();
    let syntactic = !target.pinned;
    let rows = |is_def: bool| -> Result<Vec<SymbolRow>, RunError> {
        if !syntactic {
            return Ok(Vec::new());
        }
        let mut statement = store
            .conn
            .prepare_cached(&format!(
                "SELECT {SYMBOL_COLUMNS} FROM symbols s JOIN files f ON f.id = s.file_id
                 WHERE s.name = ?1 AND s.is_def = ?2 {tests} ORDER BY f.path, s.line, s.col"
            ))
            .map_err(failed)?;
        let found = statement
            .query_map(rusqlite::params![name, is_def], SymbolRow::read)
            .map_err(failed)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(failed)?;
        Ok(found
            .into_iter()
            .filter(|row| !covered.contains(&row.path))
            .collect())
    };
    let definitions = rows(true)?;
    let mut by_file: BTreeMap<String, Vec<SymbolRow>> = BTreeMap::new();
    for row in rows(false)? {
        by_file.entry(row.path.clone()).or_default().push(row);
    }
    let indexed_references: usize = by_file.values().map(Vec::len).sum();
    // Files that mention the name: candidates for text occurrences.
    let mut files: BTreeSet<(String, bool)> = by_file
        .values()
        .map(|rows| (rows[0].path.clone(), rows[0].is_test))
        .collect();
    if query.text && syntactic {
        let mut statement = store
            .conn
            .prepare_cached(&format!(
                "SELECT f.path, f.is_test FROM file_words w JOIN files f ON f.id = w.rowid
                 WHERE file_words MATCH ?1 {tests}"
            ))
            .map_err(failed)?;
        let phrase = format!("\"{}\"", name.replace('"', "\"\""));
        let found = statement
            .query_map([phrase], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, bool>(1)?))
            })
            .map_err(failed)?;
        for file in found {
            let file = file.map_err(failed)?;
            if !covered.contains(&file.0) {
                files.insert(file);
            }
        }
    }
    let mut scip_uses: BTreeMap<String, Vec<&ScipHit>> = BTreeMap::new();
    for hit in scip.iter().filter(|hit| !hit.is_definition()) {
        scip_uses.entry(hit.path.clone()).or_default().push(hit);
        files.insert((hit.path.clone(), is_test_path(&hit.path)));
    }
    let fallback =
        !files.iter().all(|(path, _)| scip_uses.contains_key(path)) || !definitions.is_empty();
    let mut backends: Vec<&str> = Vec::new();
    if !target.scip.is_empty() {
        backends.push("scip");
    }
    if syntactic {
        backends.push("tags");
        if query.text {
            backends.push("text");
        }
    }
    let completeness = match (target.scip.is_empty(), fallback) {
        (true, _) => "syntactic",
        (false, false) => "exact",
        (false, true) => "mixed",
    };
    let symbol_ids: HashMap<i64, &ScipTarget> = target.scip.iter().map(|t| (t.id, t)).collect();
    sink.meta(Meta {
        // With text occurrences the total is known only once every file is read.
        total: (!(query.text && syntactic))
            .then_some((scip.len() + definitions.len() + indexed_references) as u64),
        backends: backends.iter().map(|b| (*b).to_owned()).collect(),
        info: json!({
            "symbol": query.symbol,
            "name": name,
            "scipSymbols": target.scip.len(),
            "definitions": definitions.len() + scip.iter().filter(|h| h.is_definition()).count(),
            "indexedReferences": indexed_references + scip.iter().filter(|h| !h.is_definition()).count(),
            "files": files.len(),
            "completeness": completeness,
            "chunking": "grouped by file: definitions first, then each file's uses in line order",
        }),
        progress_unit: None,
    })?;

    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut kinds: BTreeMap<String, u64> = BTreeMap::new();
    let mut per_symbol: BTreeMap<i64, (u64, u64)> = BTreeMap::new();
    let mut top: Vec<Value> = Vec::new();
    let mut changed = 0u64;
    let mut emit = |sink: &mut Sink, path: &str, item: Value, kind: &str| -> Result<(), Stopped> {
        *counts.entry(path.to_owned()).or_default() += 1;
        *kinds.entry(kind.to_owned()).or_default() += 1;
        if top.len() < TOP_ITEMS {
            top.push(item.clone());
        }
        sink.item(path, item)
    };
    let scip_item = |hit: &ScipHit, lines: &[String]| {
        let symbol = symbol_ids.get(&hit.symbol_id);
        json!({
            "location": location(&hit.path, hit.line, hit.column, hit.end_line, hit.end_column),
            "kind": hit.kind(),
            "symbolId": symbol.map(|s| s.symbol.as_str()),
            "context": lines.get(hit.line as usize - 1).cloned().unwrap_or_default(),
            "isTest": is_test_path(&hit.path),
            "backend": "scip",
        })
    };
    // Definitions first, SCIP's and the fallback's, by place.
    let mut firsts: Vec<(&str, u32, u32, Value, &str)> = Vec::new();
    let mut lines_of: HashMap<String, Vec<String>> = HashMap::new();
    for hit in scip.iter().filter(|hit| hit.is_definition()) {
        let lines = lines_of
            .entry(hit.path.clone())
            .or_insert_with(|| source_lines(root, &hit.path));
        per_symbol.entry(hit.symbol_id).or_default().0 += 1;
        firsts.push((
            &hit.path,
            hit.line,
            hit.column,
            scip_item(hit, lines),
            "definition",
        ));
    }
    for definition in &definitions {
        let item = json!({
            "location": definition.location(),
            "kind": "definition",
            "symbolKind": definition.kind,
            "context": definition.context,
            "isTest": definition.is_test,
            "backend": "tags",
        });
        firsts.push((
            &definition.path,
            definition.line,
            definition.column,
            item,
            "definition",
        ));
    }
    firsts.sort_by(|a, b| (a.0, a.1, a.2).cmp(&(b.0, b.1, b.2)));
    drop(lines_of);
    for (path, _, _, item, kind) in firsts {
        emit(sink, path, item, kind)?;
    }
    let defined_at: HashMap<&str, Vec<(u32, u32)>> =
        definitions.iter().fold(HashMap::new(), |mut at, d| {
            at.entry(d.path.as_str())
                .or_default()
                .push((d.line, d.column));
            at
        });
    for (path, is_test) in &files {
        if sink.cancelled() {
            return Err(Stopped.into());
        }
        if let Some(hits) = scip_uses.get(path) {
            let lines = source_lines(root, path);
            for hit in hits {
                per_symbol.entry(hit.symbol_id).or_default().1 += 1;
                emit(sink, path, scip_item(hit, &lines), hit.kind())?;
            }
            continue;
        }
        let tagged = by_file.get(path).map(Vec::as_slice).unwrap_or_default();
        let mut items: Vec<(u32, u32, Value, String)> = tagged
            .iter()
            .map(|r| {
                let item = json!({
                    "location": r.location(),
                    "kind": r.kind,
                    "context": r.context,
                    "isTest": r.is_test,
                    "backend": "tags",
                });
                (r.line, r.column, item, r.kind.clone())
            })
            .collect();
        if query.text {
            match repo::read_beneath(root, path, repo::MAX_READ_BYTES) {
                Ok(source) => {
                    let known: BTreeSet<(u32, u32)> = tagged
                        .iter()
                        .map(|r| (r.line, r.column))
                        .chain(defined_at.get(path.as_str()).into_iter().flatten().copied())
                        .collect();
                    for (line, column, text) in word_occurrences(&source, name.as_bytes()) {
                        if known.contains(&(line, column)) {
                            continue;
                        }
                        let end = column + name.len() as u32;
                        let item = json!({
                            "location": location(path, line, column, line, end),
                            "kind": "mention",
                            "context": text,
                            "isTest": is_test,
                            "backend": "text",
                        });
                        items.push((line, column, item, "mention".into()));
                    }
                    // A tag the file no longer has where the index says: the
                    // file changed since it was indexed.
                    if !tagged.is_empty() && !tags_still_there(&source, name, tagged) {
                        changed += 1;
                    }
                }
                Err(_) => changed += 1,
            }
            items.sort_by_key(|(line, column, _, _)| (*line, *column));
        }
        for (_, _, item, kind) in items {
            emit(sink, path, item, &kind)?;
        }
    }
    if changed > 0 {
        sink.warning(format!(
            "{changed} files changed or vanished since they were indexed: their tagged uses may be off; run index_repo again"
        ))?;
    }
    let mut by_count: Vec<(&String, &u64)> = counts.iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let page = sink.page();
    let mut summary = paging(&page, &state.state_id);
    let symbols: Vec<Value> = target
        .scip
        .iter()
        .take(TOP_SYMBOLS)
        .map(|t| {
            let (definitions, references) = per_symbol.get(&t.id).copied().unwrap_or_default();
            json!({
                "symbolId": t.symbol,
                "name": t.name,
                "kind": t.kind,
                "docs": t.docs,
                "definitions": definitions,
                "references": references,
            })
        })
        .collect();
    let extra = json!({
        "symbol": query.symbol,
        "totalCount": page.total,
        "definitions": kinds.get("definition").copied().unwrap_or(0),
        "fileCount": counts.len(),
        "byKind": kinds,
        "byFile": by_count.iter().take(TOP_FILES).map(|(file, count)| json!({"file": file, "count": count})).collect::<Vec<_>>(),
        "topItems": top,
        "symbols": symbols,
        "provenance": state.provenance(&backends, completeness, sink.elapsed_ms(), &sink.warnings),
    });
    merge(&mut summary, extra);
    Ok(summary)
}

/// Whether each tagged use is still at its place in `source`.
fn tags_still_there(source: &[u8], name: &str, tagged: &[SymbolRow]) -> bool {
    let lines: Vec<&[u8]> = source.split(|b| *b == b'\n').collect();
    tagged.iter().all(|r| {
        lines.get(r.line as usize - 1).is_some_and(|line| {
            let at = r.column as usize - 1;
            line.get(at..at + name.len()) == Some(name.as_bytes())
        })
    })
}

/// Whole-word occurrences of `word` in `source`: line, column (1-based,
/// bytes) and the line, trimmed and cut.
pub(crate) fn word_occurrences(source: &[u8], word: &[u8]) -> Vec<(u32, u32, String)> {
    let mut found = Vec::new();
    if word.is_empty() {
        return found;
    }
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    for (number, line) in source.split(|b| *b == b'\n').enumerate() {
        let mut from = 0;
        while let Some(at) = find(&line[from..], word) {
            let start = from + at;
            let end = start + word.len();
            let before = start == 0 || !is_word(line[start - 1]);
            let after = end == line.len() || !is_word(line[end]);
            if before && after {
                let text = String::from_utf8_lossy(line);
                let text = text.trim();
                let text = match text.char_indices().nth(200) {
                    Some((cut, _)) => format!("{}…", &text[..cut]),
                    None => text.to_owned(),
                };
                found.push((number as u32 + 1, start as u32 + 1, text));
            }
            from = start + 1;
        }
    }
    found
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    let first = needle[0];
    let mut from = 0;
    while from + needle.len() <= haystack.len() {
        let at = haystack[from..=haystack.len() - needle.len()]
            .iter()
            .position(|b| *b == first)?;
        let start = from + at;
        if &haystack[start..start + needle.len()] == needle {
            return Some(start);
        }
        from = start + 1;
    }
    None
}

/// Adds `extra`'s fields to `summary` (both objects).
pub(crate) fn merge(summary: &mut Value, extra: Value) {
    if let (Some(summary), Value::Object(extra)) = (summary.as_object_mut(), extra) {
        summary.extend(extra);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_words_only() {
        let found = word_occurrences(b"spawn(spawner);\n  x.spawn_blocking(); spawn\n", b"spawn");
        let at: Vec<(u32, u32)> = found.iter().map(|(l, c, _)| (*l, *c)).collect();
        assert_eq!(at, [(1, 1), (2, 23)]);
        assert_eq!(found[1].2, "x.spawn_blocking(); spawn");
    }
}
