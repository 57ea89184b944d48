//! `search_symbols`: definitions whose name matches, ranked exact (as
//! written, then ignoring case) > prefix > full text (name parts and docs,
//! by BM25), with a kind filter.

use std::collections::HashSet;

use serde_json::{Value, json};
use weir_core::{FailureCode, Meta, RunError};

use crate::answer::Sink;
use crate::answer::paging;
use crate::query::references::merge;
use crate::query::{IndexState, SYMBOL_COLUMNS, SymbolRow, directory};
use crate::store::Store;

/// What was asked.
pub(crate) struct SymbolsQuery {
    pub(crate) query: String,
    pub(crate) kind: Option<String>,
    pub(crate) limit: u64,
}

/// The tiers, best first, with the score each gives.
const TIERS: [(&str, f64); 4] = [
    ("exact", 1.0),
    ("exact_ignoring_case", 0.9),
    ("prefix", 0.7),
    ("text", 0.5),
];

pub(crate) fn search_symbols(
    store: &Store,
    query: &SymbolsQuery,
    sink: &mut Sink,
) -> Result<Value, RunError> {
    let state = IndexState::of(store);
    let failed =
        |e: rusqlite::Error| RunError::new(FailureCode::ToolError, store.error(e).to_string());
    let text = query.query.trim();
    let lower = text.to_lowercase();
    let kind = query.kind.as_deref().unwrap_or("");
    let limit = query.limit as usize;
    let mut found: Vec<(usize, SymbolRow)> = Vec::new();
    let mut seen = HashSet::new();
    let base = format!(
        "SELECT {SYMBOL_COLUMNS} FROM symbols s JOIN files f ON f.id = s.file_id WHERE s.is_def = 1 AND (?2 = '' OR s.kind = ?2)"
    );
    let tiers = [
        format!("{base} AND s.name = ?1 ORDER BY f.is_test, f.path, s.line LIMIT ?3"),
        format!("{base} AND s.name_lower = lower(?1) ORDER BY f.is_test, f.path, s.line LIMIT ?3"),
        // A range on the lowered name: the index answers it, as LIKE would not.
        format!("{base} AND s.name_lower >= lower(?1) AND s.name_lower < lower(?1) || char(1114111) ORDER BY length(s.name), f.is_test, f.path, s.line LIMIT ?3"),
        format!("SELECT {SYMBOL_COLUMNS} FROM defs_fts JOIN symbols s ON s.id = defs_fts.rowid JOIN files f ON f.id = s.file_id
                 WHERE defs_fts MATCH ?1 AND (?2 = '' OR s.kind = ?2) ORDER BY bm25(defs_fts), f.is_test LIMIT ?3"),
    ];
    for (tier, sql) in tiers.iter().enumerate() {
        if found.len() >= limit || text.is_empty() {
            break;
        }
        let argument = if tier == 3 {
            match fts_query(text) {
                Some(query) => query,
                None => continue,
            }
        } else if tier == 1 {
            lower.clone()
        } else {
            text.to_owned()
        };
        let mut statement = store.conn.prepare_cached(sql).map_err(failed)?;
        let rows = statement
            .query_map(
                rusqlite::params![argument, kind, (limit * 2) as i64],
                SymbolRow::read,
            )
            .map_err(failed)?;
        for row in rows {
            let row = row.map_err(failed)?;
            if found.len() < limit && seen.insert(row.id) {
                found.push((tier, row));
            }
        }
    }
    sink.meta(Meta {
        total: Some(found.len() as u64),
        backends: vec!["tags".into(), "fts5".into()],
        info: json!({"query": text, "kind": query.kind, "limit": limit, "ranking": "exact > exact ignoring case > prefix > full text; definitions only"}),
        progress_unit: None,
    })?;
    let mut top = Vec::new();
    for (tier, row) in &found {
        let (tier_name, score) = TIERS[*tier];
        let item = json!({
            "stableId": row.stable_id(),
            "name": row.name,
            "kind": row.kind,
            "moduleId": directory(&row.path),
            "location": row.location(),
            "isTest": row.is_test,
            "docs": row.docs,
            "context": row.context,
            "match": tier_name,
            "score": score,
        });
        if top.len() < 10 {
            top.push(item.clone());
        }
        sink.item(tier_name, item)?;
    }
    let page = sink.page();
    let mut summary = paging(&page, &state.state_id);
    merge(
        &mut summary,
        json!({
            "query": text,
            "totalCount": found.len(),
            "limit": limit,
            "byTier": TIERS.iter().enumerate().map(|(i, (name, _))| (name.to_string(), json!(found.iter().filter(|(t, _)| *t == i).count()))).collect::<serde_json::Map<_, _>>(),
            "topItems": top,
            "provenance": state.provenance(&["tags", "fts5"], "syntactic", sink.elapsed_ms(), &sink.warnings),
        }),
    );
    Ok(summary)
}

/// The words of `text` as an FTS5 query of prefixes, all required:
/// `join hand` → `"join"* "hand"*`.
fn fts_query(text: &str) -> Option<String> {
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| format!("\"{w}\"*"))
        .collect();
    (!words.is_empty()).then(|| words.join(" "))
}
