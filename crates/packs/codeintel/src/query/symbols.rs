//! `search_symbols`: definitions whose name matches, with a kind filter,
//! ranked by one score: bonuses for the name (exact as written, exact
//! ignoring case and `_`, prefix, every query word in it by how much of
//! the name they cover) plus FTS5's BM25 over name parts and docs. So
//! `parse url` puts `parse_url` and `urlparse` before `urlunparse`, whose
//! docs say as much but whose name holds more than was asked.

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

/// The tiers, best first: how a definition's name matched.
const TIERS: [&str; 4] = ["exact", "exact_ignoring_case", "prefix", "text"];

/// Candidates each way of matching contributes at most, before ranking.
const CANDIDATES: usize = 500;

/// A definition that matched, before ranking.
struct Candidate {
    tier: usize,
    row: SymbolRow,
    /// FTS5's BM25 for the match, when full text found it (lower is
    /// better, as FTS5 has it).
    bm25: Option<f64>,
}

/// The query's words, lowercased: `parse url`, `parseUrl` and `parse_url`
/// all give `parse`, `url`.
fn query_words(text: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in text.chars() {
        if !c.is_alphanumeric() || (c.is_uppercase() && previous_lower) {
            words.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        if c.is_alphanumeric() {
            current.extend(c.to_lowercase());
        }
    }
    words.push(current);
    words.retain(|w| !w.is_empty());
    words.sort();
    words.dedup();
    words
}

/// How well `name` answers `text` (whose words are `words`): bonuses for
/// the name itself (exact, exact ignoring case and `_`, prefix, every
/// query word in it, by how much of the name they cover), then BM25 over
/// name parts and docs, normalised by the best in the answer (`best`).
fn score(
    name: &str,
    text: &str,
    words: &[String],
    bm25: Option<f64>,
    best: f64,
    is_test: bool,
) -> f64 {
    let lower = name.to_lowercase();
    let squash = |s: &str| -> String {
        s.chars()
            .filter(|c| c.is_alphanumeric())
            .flat_map(char::to_lowercase)
            .collect()
    };
    let mut score = 0.0;
    if name == text {
        score += 3.0;
    } else if lower == text.to_lowercase() || (!words.is_empty() && squash(name) == squash(text)) {
        score += 2.5;
    } else if lower.starts_with(&text.to_lowercase()) {
        score += 1.5;
    }
    if !words.is_empty() && words.iter().all(|w| lower.contains(w.as_str())) {
        let covered: usize = words.iter().map(|w| w.len()).sum();
        let letters = lower.chars().filter(|c| c.is_alphanumeric()).count().max(1);
        score += (covered as f64 / letters as f64).min(1.0);
    }
    // Full text orders what the name alone does not: an exact name is
    // the answer whatever its docs say.
    if let Some(bm25) = bm25
        && best > 0.0
        && score < 2.5
    {
        score += 0.5 * (-bm25 / best).clamp(0.0, 1.0);
    }
    if is_test {
        score -= 0.1;
    }
    score
}

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
    let words = query_words(text);
    let kind = query.kind.as_deref().unwrap_or("");
    let limit = query.limit as usize;
    let mut candidates: Vec<Candidate> = Vec::new();
    let mut seen = HashSet::new();
    let base = format!(
        "SELECT {SYMBOL_COLUMNS}, NULL FROM symbols s JOIN files f ON f.id = s.file_id WHERE s.is_def = 1 AND (?2 = '' OR s.kind = ?2)"
    );
    // Names holding every query word (`urlparse` for `parse url`): the
    // lowered names' index is scanned, not the table.
    let contains: String = (0..words.len().min(4))
        .map(|i| format!(" AND instr(s.name_lower, ?{}) > 0", i + 4))
        .collect();
    let tiers = [
        format!("{base} AND s.name = ?1 ORDER BY f.is_test, f.path, s.line LIMIT ?3"),
        format!("{base} AND s.name_lower = lower(?1) ORDER BY f.is_test, f.path, s.line LIMIT ?3"),
        // A range on the lowered name: the index answers it, as LIKE would not.
        format!("{base} AND s.name_lower >= lower(?1) AND s.name_lower < lower(?1) || char(1114111) ORDER BY length(s.name), f.is_test, f.path, s.line LIMIT ?3"),
        format!("SELECT {SYMBOL_COLUMNS}, bm25(defs_fts) FROM defs_fts JOIN symbols s ON s.id = defs_fts.rowid JOIN files f ON f.id = s.file_id
                 WHERE defs_fts MATCH ?1 AND (?2 = '' OR s.kind = ?2) ORDER BY bm25(defs_fts), f.is_test LIMIT ?3"),
        format!("{base}{contains} AND ?1 != '' ORDER BY length(s.name), f.is_test, f.path LIMIT ?3"),
    ];
    for (tier, sql) in tiers.iter().enumerate() {
        if text.is_empty() || (tier == 4 && words.len() < 2) {
            continue;
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
        let mut params: Vec<Box<dyn rusqlite::ToSql>> = vec![
            Box::new(argument),
            Box::new(kind.to_owned()),
            Box::new(CANDIDATES.max(limit * 2) as i64),
        ];
        if tier == 4 {
            params.extend(
                words
                    .iter()
                    .take(4)
                    .map(|w| Box::new(w.clone()) as Box<dyn rusqlite::ToSql>),
            );
        }
        let mut statement = store.conn.prepare_cached(sql).map_err(failed)?;
        let rows = statement
            .query_map(rusqlite::params_from_iter(params.iter()), |r| {
                Ok((SymbolRow::read(r)?, r.get::<_, Option<f64>>(11)?))
            })
            .map_err(failed)?;
        for row in rows {
            let (row, bm25) = row.map_err(failed)?;
            if seen.insert(row.id) {
                candidates.push(Candidate {
                    tier: tier.min(3),
                    row,
                    bm25,
                });
            } else if let Some(known) = candidates.iter_mut().find(|c| c.row.id == row.id) {
                known.bm25 = known.bm25.or(bm25);
            }
        }
    }
    let best = candidates
        .iter()
        .filter_map(|c| c.bm25)
        .map(|b| -b)
        .fold(0.0, f64::max);
    let mut found: Vec<(usize, SymbolRow, f64)> = candidates
        .into_iter()
        .map(|c| {
            let score = score(&c.row.name, text, &words, c.bm25, best, c.row.is_test);
            (c.tier, c.row, score)
        })
        .collect();
    found.sort_by(|a, b| {
        b.2.total_cmp(&a.2)
            .then(a.0.cmp(&b.0))
            .then(a.1.name.len().cmp(&b.1.name.len()))
            .then(a.1.path.cmp(&b.1.path))
            .then(a.1.line.cmp(&b.1.line))
    });
    found.truncate(limit);
    sink.meta(Meta {
        total: Some(found.len() as u64),
        backends: vec!["tags".into(), "fts5".into()],
        info: json!({"query": text, "kind": query.kind, "limit": limit, "ranking": "one score: name bonuses (exact, exact ignoring case and _, prefix, every query word in the name by coverage) plus BM25 over name parts and docs; definitions only"}),
        progress_unit: None,
    })?;
    let mut top = Vec::new();
    for (tier, row, score) in &found {
        let tier_name = TIERS[*tier];
        let score = (score * 1000.0).round() / 1000.0;
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
            "byTier": TIERS.iter().enumerate().map(|(i, name)| (name.to_string(), json!(found.iter().filter(|(t, _, _)| *t == i).count()))).collect::<serde_json::Map<_, _>>(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_words_split_like_names() {
        assert_eq!(query_words("parse url"), ["parse", "url"]);
        assert_eq!(query_words("parse_url"), ["parse", "url"]);
        assert_eq!(query_words("JoinHandle"), ["handle", "join"]);
    }

    #[test]
    fn a_name_of_only_the_query_words_beats_one_with_more() {
        let words = query_words("parse url");
        let of = |name: &str| score(name, "parse url", &words, Some(-1.0), 1.0, false);
        assert!(
            of("parse_url") > of("urlparse"),
            "the words as asked, in order"
        );
        assert!(of("urlparse") > of("urlunparse"));
        assert!(of("urlunparse") > of("unquote"));
    }
}
