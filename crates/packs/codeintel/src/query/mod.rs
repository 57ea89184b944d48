//! The questions the index answers. Each runs on a blocking thread against
//! a read-only connection, handing its items to a [`Sink`](crate::answer::Sink)
//! in the order they are shown, and returns its summary.

pub(crate) mod architecture;
pub(crate) mod compound;
pub(crate) mod graph;
pub(crate) mod imports;
pub(crate) mod references;
pub(crate) mod symbols;

use rusqlite::Row;
use serde_json::{Value, json};

use crate::store::Store;

/// What the answer was computed from.
#[derive(Clone, Debug)]
pub(crate) struct IndexState {
    pub(crate) state_id: String,
    pub(crate) dirty: bool,
    pub(crate) git_head: Option<String>,
    pub(crate) indexed_at_ms: u64,
}

impl IndexState {
    pub(crate) fn of(store: &Store) -> IndexState {
        IndexState {
            state_id: store.meta("state_id").unwrap_or_default(),
            dirty: store.meta("dirty").as_deref() == Some("1"),
            git_head: store.meta("git_head").filter(|h| !h.is_empty()),
            indexed_at_ms: store
                .meta("indexed_at_ms")
                .and_then(|ms| ms.parse().ok())
                .unwrap_or(0),
        }
    }

    /// The provenance envelope of an answer (CKB's field names).
    /// `completeness`: `exact` when every item came from a SCIP index (a
    /// compiler's resolution), `mixed` when some did, `syntactic` when
    /// tags and text gave them all.
    pub(crate) fn provenance(
        &self,
        backends: &[&str],
        completeness: &str,
        duration_ms: u64,
        warnings: &[String],
    ) -> Value {
        json!({
            "repoStateId": self.state_id,
            "repoStateDirty": self.dirty,
            "gitHead": self.git_head,
            "indexedAtMs": self.indexed_at_ms,
            "backends": backends,
            "completeness": completeness,
            "queryDurationMs": duration_ms,
            "warnings": warnings,
        })
    }
}

/// The columns [`location`] reads, after `f.path` and `f.is_test`.
pub(crate) const SYMBOL_COLUMNS: &str = "f.path, f.is_test, s.name, s.kind, s.line, s.col, s.end_line, s.end_col, s.context, s.docs, s.id";

/// A symbol row (selected with [`SYMBOL_COLUMNS`]).
#[derive(Clone, Debug)]
pub(crate) struct SymbolRow {
    pub(crate) path: String,
    pub(crate) is_test: bool,
    pub(crate) name: String,
    pub(crate) kind: String,
    pub(crate) line: u32,
    pub(crate) column: u32,
    pub(crate) end_line: u32,
    pub(crate) end_column: u32,
    pub(crate) context: String,
    pub(crate) docs: Option<String>,
    pub(crate) id: i64,
}

impl SymbolRow {
    pub(crate) fn read(row: &Row) -> rusqlite::Result<SymbolRow> {
        Ok(SymbolRow {
            path: row.get(0)?,
            is_test: row.get(1)?,
            name: row.get(2)?,
            kind: row.get(3)?,
            line: row.get(4)?,
            column: row.get(5)?,
            end_line: row.get(6)?,
            end_column: row.get(7)?,
            context: row.get(8)?,
            docs: row.get(9)?,
            id: row.get(10)?,
        })
    }

    pub(crate) fn location(&self) -> Value {
        location(
            &self.path,
            self.line,
            self.column,
            self.end_line,
            self.end_column,
        )
    }

    /// `path:line:name`, which names a definition as long as the file
    /// keeps its shape.
    pub(crate) fn stable_id(&self) -> String {
        format!("{}:{}:{}", self.path, self.line, self.name)
    }
}

pub(crate) fn location(
    path: &str,
    line: u32,
    column: u32,
    end_line: u32,
    end_column: u32,
) -> Value {
    json!({
        "fileId": path,
        "startLine": line,
        "startColumn": column,
        "endLine": end_line,
        "endColumn": end_column,
    })
}

/// The directory of a file path (`.` at the root).
pub(crate) fn directory(path: &str) -> &str {
    path.rsplit_once('/').map_or(".", |(dir, _)| dir)
}
