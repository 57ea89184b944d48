//! `find_references`: a name's definitions, then its uses grouped by file.
//!
//! Two backends. `tags`: the call sites, type uses and implementations the
//! grammars' tags queries find (in the index). `text`: every other
//! whole-word occurrence, in the files whose words (an FTS5 table of each
//! file's identifiers) include the name — read when the query reaches
//! them, so the first file's uses go out before the last file is read.
//! Together they find what `rg -w` finds, each use labelled with its kind.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use serde_json::{Value, json};
use weir_core::{FailureCode, Meta, RunError};

use crate::answer::{Sink, Stopped, paging};
use crate::query::{IndexState, SYMBOL_COLUMNS, SymbolRow, location};
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

pub(crate) fn find_references(
    store: &Store,
    root: &Path,
    query: &ReferencesQuery,
    sink: &mut Sink,
) -> Result<Value, RunError> {
    let state = IndexState::of(store);
    let failed =
        |e: rusqlite::Error| RunError::new(FailureCode::ToolError, store.error(e).to_string());
    let name = query.symbol.as_str();
    let tests = if query.include_tests {
        ""
    } else {
        "AND f.is_test = 0"
    };
    let rows = |is_def: bool| -> Result<Vec<SymbolRow>, RunError> {
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
        Ok(found)
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
    if query.text {
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
            files.insert(file.map_err(failed)?);
        }
    }
    let backends: &[&str] = if query.text {
        &["tags", "text"]
    } else {
        &["tags"]
    };
    sink.meta(Meta {
        // With text occurrences the total is known only once every file is read.
        total: (!query.text).then_some((definitions.len() + indexed_references) as u64),
        backends: backends.iter().map(|b| (*b).to_owned()).collect(),
        info: json!({
            "symbol": name,
            "definitions": definitions.len(),
            "indexedReferences": indexed_references,
            "files": files.len(),
            "completeness": "syntactic",
            "chunking": "grouped by file: definitions first, then each file's uses in line order",
        }),
        progress_unit: None,
    })?;

    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut kinds: BTreeMap<String, u64> = BTreeMap::new();
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
    for definition in &definitions {
        let item = json!({
            "location": definition.location(),
            "kind": "definition",
            "symbolKind": definition.kind,
            "context": definition.context,
            "isTest": definition.is_test,
            "backend": "tags",
        });
        emit(sink, &definition.path, item, "definition")?;
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
            match std::fs::read(root.join(path)) {
                Ok(source) => {
                    let known: BTreeSet<(u32, u32)> = tagged
                        .iter()
                        .map(|r| (r.line, r.column))
                        .chain(defined_at.get(path.as_str()).into_iter().flatten().copied())
                        .collect();
                    let mut stale = false;
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
                        stale = true;
                    }
                    if stale {
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
    let extra = json!({
        "symbol": name,
        "totalCount": page.total,
        "definitions": definitions.len(),
        "fileCount": counts.len(),
        "byKind": kinds,
        "byFile": by_count.iter().take(TOP_FILES).map(|(file, count)| json!({"file": file, "count": count})).collect::<Vec<_>>(),
        "topItems": top,
        "provenance": state.provenance(backends, sink.elapsed_ms(), &sink.warnings),
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
