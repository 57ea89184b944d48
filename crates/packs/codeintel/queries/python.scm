; weir's additions to tree-sitter-python's tags query: what an import
; brings in, and the whole statement for resolving it to a file (kept apart
; from the symbols: see extract.rs).

(import_from_statement name: (dotted_name (identifier) @name .)) @reference.import
(import_from_statement name: (aliased_import name: (dotted_name (identifier) @name .))) @reference.import
(import_statement) @name @reference.importstatement
(import_from_statement) @name @reference.importstatement
