; weir's additions to tree-sitter-javascript's tags query (TypeScript's
; too): what an import brings in, and the module a statement imports, for
; resolving it to a file (kept apart from the symbols: see extract.rs).

(import_specifier name: (identifier) @name) @reference.import
(import_clause (identifier) @name) @reference.import
(import_statement source: (string) @name) @reference.importstatement
(export_statement source: (string) @name) @reference.importstatement
((call_expression
    function: (identifier)
    arguments: (arguments . (string) @name)) @reference.importstatement
    (#match? @reference.importstatement "^require\\s*\\("))
