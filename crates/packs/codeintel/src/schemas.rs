//! The tools' output schemas: what their summaries promise.

use serde_json::{Value, json};

/// Paging and provenance, in every query's summary.
fn query_summary(own: Value, required: &[&str]) -> Value {
    let mut properties = json!({
        "total": {"type": "integer", "description": "Items in the whole answer."},
        "offset": {"type": "integer", "description": "Where this page starts."},
        "returned": {"type": "integer", "description": "Items streamed."},
        "truncated": {"type": "boolean", "description": "Not the whole answer."},
        "truncationInfo": {"type": ["object", "null"], "properties": {
            "reason": {"type": "string"}, "originalCount": {"type": "integer"}, "returnedCount": {"type": "integer"}
        }},
        "nextCursor": {"type": ["string", "null"], "description": "The next page's cursor; null on the last."},
        "firstChunkMs": {"type": ["integer", "null"], "description": "ms to the first chunk."},
        "provenance": {
            "type": "object",
            "properties": {
                "repoStateId": {"type": "string"},
                "repoStateDirty": {"type": "boolean"},
                "gitHead": {"type": ["string", "null"]},
                "indexedAtMs": {"type": "integer"},
                "backends": {"type": "array", "items": {"type": "string"}},
                "completeness": {"type": "string", "enum": ["syntactic", "mixed", "exact"], "description": "How many items SCIP resolved: all, some, none."},
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

/// What a list tool's final result adds: the first line and the page's
/// items, each as `item` describes it.
fn listed(item: Value) -> Value {
    json!({
        "headline": {"type": "string", "description": "The text's first line."},
        "items": {"type": "array", "items": item, "description": "This page's items."}
    })
}

/// Adds `more`'s properties to `own` (both objects).
fn with(mut own: Value, more: Value) -> Value {
    if let (Some(own), Value::Object(more)) = (own.as_object_mut(), more) {
        own.extend(more);
    }
    own
}

pub(crate) fn references_summary() -> Value {
    let item = json!({"type": "object", "properties": {
        "file": {"type": "string"},
        "line": {"type": "integer"},
        "column": {"type": "integer"},
        "kind": {"type": "string", "description": "definition, call, type, impl, import, reference, mention…"},
        "symbolKind": {"type": "string", "description": "A definition's kind: function, class…"},
        "context": {"type": "string", "description": "The line, trimmed."},
        "backend": {"type": "string", "description": "scip, tags or text."},
        "symbolId": {"type": "string", "description": "From SCIP."}
    }, "required": ["file", "line", "column", "kind", "context"]});
    query_summary(
        with(
            json!({
                "symbol": {"type": "string"},
                "definitions": {"type": "integer"},
                "fileCount": {"type": "integer"},
                "byKind": {"type": "object", "additionalProperties": {"type": "integer"}},
                "byFile": {"type": "array", "items": {"type": "object", "properties": {"file": {"type": "string"}, "count": {"type": "integer"}}}},
                "symbols": {"type": "array", "description": "SCIP symbols with counts.", "items": {"type": "object", "properties": {
                    "symbolId": {"type": "string"}, "name": {"type": "string"}, "kind": {"type": ["string", "null"]}, "docs": {"type": ["string", "null"]},
                    "definitions": {"type": "integer"}, "references": {"type": "integer"}
                }}}
            }),
            listed(item),
        ),
        &[
            "symbol",
            "definitions",
            "fileCount",
            "byKind",
            "byFile",
            "headline",
            "items",
        ],
    )
}

pub(crate) fn search_summary() -> Value {
    let item = json!({"type": "object", "properties": {
        "stableId": {"type": "string", "description": "path:line:name, a symbol for find_references or understand."},
        "kind": {"type": "string"},
        "endLine": {"type": "integer", "description": "Where the definition ends."},
        "docs": {"type": "string"},
        "context": {"type": "string"},
        "match": {"type": "string", "enum": ["exact", "exact_ignoring_case", "prefix", "text"]},
        "score": {"type": "number"}
    }, "required": ["stableId", "kind", "match"]});
    query_summary(
        with(
            json!({
                "query": {"type": "string"},
                "limit": {"type": "integer"},
                "byTier": {"type": "object", "additionalProperties": {"type": "integer"}}
            }),
            listed(item),
        ),
        &["query", "byTier", "headline", "items"],
    )
}

pub(crate) fn architecture_summary() -> Value {
    let item = json!({"type": "object", "description": "A module (path, fileCount, symbolCount, …) or an edge (from, to, kind, strength)."});
    query_summary(
        with(
            json!({
                "granularity": {"type": "string", "enum": ["package", "module", "directory", "file"]},
                "moduleCount": {"type": "integer"},
                "edgeCount": {"type": "integer"},
                "modules": {"type": "array", "items": {"type": "object"}},
                "dependencyGraph": {"type": "array", "items": {"type": "object"}},
                "entrypoints": {"type": "array", "items": {"type": "string"}},
                "mermaid": {"type": "string"},
                "hotspots": {"type": "array", "items": {"type": "object"}, "description": "Most-committed files lately."},
                "confidence": {"type": "string"},
                "limitations": {"type": "array", "items": {"type": "string"}}
            }),
            listed(item),
        ),
        &[
            "granularity",
            "moduleCount",
            "edgeCount",
            "modules",
            "dependencyGraph",
            "entrypoints",
            "mermaid",
            "headline",
            "items",
        ],
    )
}

pub(crate) fn explore_summary() -> Value {
    query_summary(
        json!({
            "path": {"type": "string"},
            "overview": {"type": "object", "properties": {
                "fileCount": {"type": "integer"}, "testFileCount": {"type": "integer"},
                "symbolCount": {"type": "integer"}, "languages": {"type": "object"}
            }},
            "symbolsByKind": {"type": "object", "additionalProperties": {"type": "integer"}},
            "keySymbols": {"type": "array", "items": {"type": "object"}},
            "dependencies": {"type": "object", "properties": {
                "outgoing": {"type": "array", "items": {"type": "object"}},
                "incoming": {"type": "array", "items": {"type": "object"}}
            }},
            "entrypoints": {"type": "array", "items": {"type": "string"}},
            "hotspots": {"type": "array", "items": {"type": "object"}, "description": "Most-committed files lately."},
            "health": {"type": "object", "properties": {"scipAvailable": {"type": "boolean"}, "gitAvailable": {"type": "boolean"}}}
        }),
        &[
            "path",
            "overview",
            "symbolsByKind",
            "keySymbols",
            "dependencies",
            "entrypoints",
            "hotspots",
            "health",
        ],
    )
}

/// A definition as the compound tools describe it.
fn definition() -> Value {
    json!({"type": "object", "properties": {
        "stableId": {"type": "string"}, "name": {"type": "string"}, "kind": {"type": "string"},
        "location": {"type": "object"}, "docs": {"type": ["string", "null"]}, "signature": {"type": "string"}
    }})
}

pub(crate) fn understand_summary() -> Value {
    query_summary(
        json!({
            "symbol": {"type": "string"},
            "definition": definition(),
            "ambiguity": {"type": ["object", "null"], "properties": {
                "matchCount": {"type": "integer"}, "topMatches": {"type": "array", "items": {"type": "string"}}, "hint": {"type": "string"}
            }},
            "references": {"type": "object", "properties": {
                "totalCount": {"type": "integer"}, "fileCount": {"type": "integer"},
                "byFile": {"type": "array", "items": {"type": "object"}}, "truncated": {"type": "boolean"}
            }},
            "callers": {"type": "array", "items": {"type": "object"}},
            "callees": {"type": "array", "items": {"type": "object"}},
            "relatedTests": {"type": "array", "items": {"type": "string"}}
        }),
        &[
            "symbol",
            "definition",
            "references",
            "callers",
            "callees",
            "relatedTests",
        ],
    )
}

pub(crate) fn prepare_change_summary() -> Value {
    query_summary(
        json!({
            "symbol": {"type": "string"},
            "target": definition(),
            "ambiguity": {"type": ["object", "null"]},
            "directDependents": {"type": "array", "items": {"type": "object"}},
            "transitiveImpact": {"type": "object", "properties": {
                "totalCallers": {"type": "integer"}, "moduleSpread": {"type": "integer"},
                "maxDepth": {"type": "integer"}, "depthBound": {"type": "integer"},
                "byDepth": {"type": "array", "items": {"type": "object"}}, "truncated": {"type": "boolean"}
            }},
            "relatedTests": {"type": "array", "items": {"type": "string"}},
            "coChangeFiles": {"type": "array", "items": {"type": "object", "properties": {
                "file": {"type": "string"}, "commits": {"type": "integer"}, "ratio": {"type": "number"}
            }}},
            "riskAssessment": {"type": "object", "properties": {
                "level": {"type": "string", "enum": ["low", "medium", "high"]},
                "score": {"type": "number"},
                "factors": {"type": "array", "items": {"type": "object"}},
                "suggestions": {"type": "array", "items": {"type": "string"}}
            }, "required": ["level", "score", "factors"]}
        }),
        &[
            "symbol",
            "target",
            "directDependents",
            "transitiveImpact",
            "relatedTests",
            "coChangeFiles",
            "riskAssessment",
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
            "dirty": {"type": "boolean"},
            "scip_documents": {"type": "integer", "description": "Files index.scip covers."},
            "scip_occurrences": {"type": "integer"},
            "backends": {"type": "object", "description": "Per language: backend (scip-python, scip-typescript, rust-analyzer, index.scip, tags), why, scip_files.", "additionalProperties": {"type": "object"}},
            "git_commits": {"type": "integer", "description": "Recent commits read."},
            "warnings": {"type": "array", "items": {"type": "string"}, "description": "What was left out, and why."}
        },
        "required": ["root", "index", "files", "parsed", "unchanged", "removed", "definitions", "references", "languages", "elapsed_ms", "state_id"]
    })
}
