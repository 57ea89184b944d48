; weir's additions to tree-sitter-rust's tags query (appended to it, so a
; node the grammar's own patterns tag keeps their kind: a definition's name
; is never also a use).

; Calls through a path: `RunContext::new(..)`, `fs::read(..)`.
(call_expression
    function: (scoped_identifier name: (identifier) @name)) @reference.call

; Type uses: signatures, generics, fields, `let` types, struct literals and
; patterns, trait bounds, `impl X for Y`.
(type_identifier) @name @reference.type

; A type's name as the head of a path: `RunContext::new`, `Kind::Variant`.
((scoped_identifier path: (identifier) @name) @reference.type
    (#match? @name "^[A-Z]"))
((scoped_type_identifier path: (identifier) @name) @reference.type
    (#match? @name "^[A-Z]"))

; What `use` brings in: `use a::b::X`, `use a::{X, y::Z}`, `use a::X as Y`.
(use_declaration argument: (scoped_identifier name: (identifier) @name)) @reference.import
(use_declaration argument: (identifier) @name) @reference.import
(use_as_clause path: (scoped_identifier name: (identifier) @name)) @reference.import
(use_as_clause path: (identifier) @name) @reference.import
(use_list (identifier) @name) @reference.import
(use_list (scoped_identifier name: (identifier) @name)) @reference.import

; Inside macro arguments (token trees, which the grammar leaves unparsed):
; a capitalised name is a type, a name before parentheses a call.
((token_tree (identifier) @name) @reference.type
    (#match? @name "^[A-Z]"))
(token_tree (identifier) @name . (token_tree)) @reference.call

; The whole statement, for resolving imports to files (kept apart from
; the symbols: see extract.rs).
(use_declaration) @name @reference.importstatement

; …and as the last segment of a longer path: `super::Config::new`,
; `crate::config::Config::default`.
((scoped_identifier path: (scoped_identifier name: (identifier) @name)) @reference.type
    (#match? @name "^[A-Z]"))

; A path into another crate written out in the code (`weir_core::RunId`,
; `weir_pack_exec::ExecPack::detect(..)`), which imports without a `use`:
; kept with the import statements (the standard library's are left out).
((scoped_identifier path: (identifier)) @name @reference.importstatement
    (#match? @name "^[a-z_][a-z0-9_]*::")
    (#not-match? @name "^(std|core|alloc)::"))
((scoped_type_identifier path: (identifier)) @name @reference.importstatement
    (#match? @name "^[a-z_][a-z0-9_]*::")
    (#not-match? @name "^(std|core|alloc)::"))
