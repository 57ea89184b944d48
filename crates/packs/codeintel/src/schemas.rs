//! The tools' output schemas: what their summaries promise.

use serde_json::{Value, json};

/// Paging and provenance, in every query's summary.
fn query_summary(own: Value, required: &[&str]) -> Value {
    let mut properties = json!({
        "total": {"type": "integer", "description": "Items in the whole answer."},
        "offset": {"type": "integer", "description": "Where this page starts."},
        "returned": {"type": "integer", "description": "Items this call streamed."},
        "truncated": {"type": "boolean", "description": "Whether this page is not the whole answer."},
        "truncationInfo": {"type": ["object", "null"], "properties": {
            "reason": {"type": "string"}, "originalCount": {"type": "integer"}, "returnedCount": {"type": "integer"}
        }},
        "nextCursor": {"type": ["string", "null"], "description": "Pass as `cursor` for the next page; null on the last."},
        "firstChunkMs": {"type": ["integer", "null"], "description": "When the first chunk went out, from the query's start."},
        "topItems": {"type": "array", "items": {"type": "object"}},
        "provenance": {
            "type": "object",
            "properties": {
                "repoStateId": {"type": "string"},
                "repoStateDirty": {"type": "boolean"},
                "gitHead": {"type": ["string", "null"]},
                "indexedAtMs": {"type": "integer"},
                "backends": {"type": "array", "items": {"type": "string"}},
                "completeness": {"type": "string", "enum": ["syntactic", "exact"]},
                "queryDurationMs": {"type": "integer"},
                "warnings": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["repoStateId", "repoStateDirty", "backends", "completeness", "warnings"]
        }
    });
    if let (Some(all), Value::Object(own)) = (properties.as_object_mut(), own) {
        all.extend(own);
    }
    let mut all_required = vec![
        "total",
        "offset",
        "returned",
        "truncated",
        "nextCursor",
        "provenance",
    ];
    all_required.extend_from_slice(required);
    json!({"type": "object", "properties": properties, "required": all_required})
}

pub(crate) fn references_summary() -> Value {
    query_summary(
        json!({
            "symbol": {"type": "string"},
            "totalCount": {"type": "integer"},
            "definitions": {"type": "integer"},
            "fileCount": {"type": "integer"},
            "byKind": {"type": "object", "additionalProperties": {"type": "integer"}},
            "byFile": {"type": "array", "items": {"type": "object", "properties": {"file": {"type": "string"}, "count": {"type": "integer"}}}}
        }),
        &[
            "symbol",
            "totalCount",
            "definitions",
            "fileCount",
            "byKind",
            "byFile",
            "topItems",
        ],
    )
}

pub(crate) fn search_summary() -> Value {
    query_summary(
        json!({
            "query": {"type": "string"},
            "totalCount": {"type": "integer"},
            "limit": {"type": "integer"},
            "byTier": {"type": "object", "additionalProperties": {"type": "integer"}}
        }),
        &["query", "totalCount", "byTier", "topItems"],
    )
}

pub(crate) fn architecture_summary() -> Value {
    query_summary(
        json!({
            "granularity": {"type": "string", "enum": ["module", "directory", "file"]},
            "moduleCount": {"type": "integer"},
            "edgeCount": {"type": "integer"},
            "modules": {"type": "array", "items": {"type": "object"}},
            "dependencyGraph": {"type": "array", "items": {"type": "object"}},
            "entrypoints": {"type": "array", "items": {"type": "string"}},
            "mermaid": {"type": "string"},
            "confidence": {"type": "string"},
            "limitations": {"type": "array", "items": {"type": "string"}}
        }),
        &[
            "granularity",
            "moduleCount",
            "edgeCount",
            "modules",
            "dependencyGraph",
            "entrypoints",
            "mermaid",
        ],
    )
}

pub(crate) fn index_report() -> Value {
    json!({
        "type": "object",
        "properties": {
            "root": {"type": "string"},
            "index": {"type": "string", "description": "The index file."},
            "files": {"type": "integer"},
            "parsed": {"type": "integer"},
            "unchanged": {"type": "integer"},
            "removed": {"type": "integer"},
            "failed": {"type": "array", "items": {"type": "string"}},
            "skipped_large": {"type": "integer"},
            "definitions": {"type": "integer"},
            "references": {"type": "integer"},
            "languages": {"type": "object", "additionalProperties": {"type": "integer"}},
            "elapsed_ms": {"type": "integer"},
            "state_id": {"type": "string"},
            "git_head": {"type": ["string", "null"]},
            "dirty": {"type": "boolean"}
        },
        "required": ["root", "index", "files", "parsed", "unchanged", "removed", "definitions", "references", "languages", "elapsed_ms", "state_id"]
    })
}
