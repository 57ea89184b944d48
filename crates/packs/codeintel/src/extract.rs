//! One file's definitions and references, from its grammar's tags query,
//! and the identifiers it mentions (which the text-mention search needs).

use std::collections::HashSet;
use std::sync::atomic::AtomicUsize;

use tree_sitter_tags::TagsContext;

use crate::language::Language;

/// Longest `context` line kept, in characters.
const CONTEXT_CHARS: usize = 200;
/// Longest doc text kept, in characters.
const DOCS_CHARS: usize = 600;
/// Longest import statement kept, in characters.
const IMPORT_CHARS: usize = 2_000;

/// A definition or a reference in a file. Lines and columns count from 1;
/// columns in bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Occurrence {
    pub(crate) name: String,
    /// The tags query's syntax type: `function`, `class`, `call`, …
    pub(crate) kind: String,
    pub(crate) is_def: bool,
    pub(crate) line: u32,
    pub(crate) column: u32,
    pub(crate) end_line: u32,
    pub(crate) end_column: u32,
    /// For a definition, the last line of the whole item (its body).
    pub(crate) body_end_line: u32,
    /// The line the name is on, trimmed.
    pub(crate) context: String,
    pub(crate) docs: Option<String>,
}

/// An import statement (Rust's `use`, Python's `import`/`from`), or the
/// module a JavaScript import names (the string, unquoted): what
/// `get_architecture` resolves to a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Import {
    pub(crate) line: u32,
    pub(crate) text: String,
}

/// The syntax type of weir's import-statement patterns (`queries/`): kept
/// as imports, never as symbols.
const IMPORT_STATEMENT: &str = "importstatement";

/// What the index keeps of a file.
#[derive(Debug, Default)]
pub(crate) struct Extracted {
    pub(crate) occurrences: Vec<Occurrence>,
    pub(crate) imports: Vec<Import>,
    /// The first line of the file's own tests (`#[cfg(test)]`, `#[test]`
    /// in Rust): a use at or after it is a test's.
    pub(crate) test_line: Option<u32>,
    /// Every distinct identifier in the file, space-separated.
    pub(crate) words: String,
    /// Whether tree-sitter met a syntax error (the tags are still good
    /// around it).
    pub(crate) has_error: bool,
}

/// Why a file gave nothing.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ExtractError {
    #[error("cancelled")]
    Cancelled,
    #[error("{0}")]
    Tags(String),
}

/// Parses `source` as `language`. `cancel` non-zero stops the parse.
pub(crate) fn extract(
    context: &mut TagsContext,
    language: Language,
    source: &[u8],
    cancel: Option<&AtomicUsize>,
) -> Result<Extracted, ExtractError> {
    let config = language
        .tags()
        .map_err(|why| ExtractError::Tags(why.into()))?;
    let lines = LineStarts::new(source);
    let mut occurrences = Vec::new();
    let mut imports = Vec::new();
    let has_error;
    {
        let (tags, error) = match context.generate_tags(config, source, cancel) {
            Ok(generated) => generated,
            Err(tree_sitter_tags::Error::Cancelled) => return Err(ExtractError::Cancelled),
            Err(error) => return Err(ExtractError::Tags(error.to_string())),
        };
        has_error = error;
        for tag in tags {
            let tag = match tag {
                Ok(tag) => tag,
                Err(tree_sitter_tags::Error::Cancelled) => return Err(ExtractError::Cancelled),
                Err(error) => return Err(ExtractError::Tags(error.to_string())),
            };
            let Ok(name) = std::str::from_utf8(&source[tag.name_range.clone()]) else {
                continue;
            };
            let line = tag.span.start.row as u32 + 1;
            let kind = config.syntax_type_name(tag.syntax_type_id);
            if kind == IMPORT_STATEMENT {
                imports.push((
                    tag.name_range.clone(),
                    Import {
                        line,
                        text: cut(name.trim_matches(['"', '\'', '`']), IMPORT_CHARS),
                    },
                ));
                continue;
            }
            let context_line = String::from_utf8_lossy(&source[tag.line_range.clone()]);
            let docs = match tag.docs {
                Some(docs) if tag.is_definition => Some(docs),
                _ if tag.is_definition => docs_near(language, source, &lines, tag.range.start),
                _ => None,
            };
            occurrences.push(Occurrence {
                name: name.to_owned(),
                kind: kind.to_owned(),
                is_def: tag.is_definition,
                line,
                column: tag.span.start.column as u32 + 1,
                end_line: tag.span.end.row as u32 + 1,
                end_column: tag.span.end.column as u32 + 1,
                body_end_line: lines.line_of(tag.range.end.saturating_sub(1)).max(line),
                context: cut(context_line.trim(), CONTEXT_CHARS),
                docs: docs
                    .map(|docs| cut(docs.trim(), DOCS_CHARS))
                    .filter(|d| !d.is_empty()),
            });
        }
    }
    // A name can be captured twice at one place (a Rust method is a method
    // and a function): keep the first, which is the more specific pattern.
    let mut seen = HashSet::new();
    occurrences.retain(|o| seen.insert((o.line, o.column, o.is_def)));
    // A path inside a `use` declaration is that declaration's: one import.
    let imports = imports
        .iter()
        .filter(|(range, _)| {
            !imports.iter().any(|(outer, _)| {
                outer != range && outer.start <= range.start && range.end <= outer.end
            })
        })
        .map(|(_, import)| import.clone())
        .collect();
    Ok(Extracted {
        occurrences,
        imports,
        test_line: (language == Language::Rust)
            .then(|| rust_test_line(source))
            .flatten(),
        words: identifiers(source),
        has_error,
    })
}

/// The first line that opens a Rust test: `#[cfg(test)]`, `#[test]`, or a
/// runtime's `#[tokio::test]`-like attribute.
fn rust_test_line(source: &[u8]) -> Option<u32> {
    source
        .split(|b| *b == b'\n')
        .position(|line| {
            let line = line.trim_ascii_start();
            line.starts_with(b"#[cfg(test)]")
                || line.starts_with(b"#[test]")
                || (line.starts_with(b"#[")
                    && line.split(|b| *b == b']').next().is_some_and(|attr| {
                        attr.ends_with(b"::test") || attr.windows(7).any(|w| w == b"::test(")
                    }))
        })
        .map(|at| at as u32 + 1)
}

/// Byte offsets where lines start.
struct LineStarts(Vec<usize>);

impl LineStarts {
    fn new(source: &[u8]) -> LineStarts {
        let mut starts = vec![0];
        starts.extend(
            source
                .iter()
                .enumerate()
                .filter(|(_, byte)| **byte == b'\n')
                .map(|(at, _)| at + 1),
        );
        LineStarts(starts)
    }

    /// The 1-based line of byte `offset`.
    fn line_of(&self, offset: usize) -> u32 {
        self.0.partition_point(|start| *start <= offset) as u32
    }

    /// Line `line` (1-based) without its end.
    fn text<'a>(&self, source: &'a [u8], line: u32) -> Option<&'a str> {
        let start = *self.0.get(line as usize - 1)?;
        let end = self
            .0
            .get(line as usize)
            .map_or(source.len(), |next| next - 1);
        std::str::from_utf8(&source[start..end.max(start)]).ok()
    }
}

/// The doc comment above a definition (`///`, `//`, `#` lines, skipping
/// attributes and decorators), or a Python docstring below it, for grammars
/// whose tags query captures no docs.
fn docs_near(
    language: Language,
    source: &[u8],
    lines: &LineStarts,
    item_start: usize,
) -> Option<String> {
    let first = lines.line_of(item_start);
    if language == Language::Python {
        return python_docstring(source, lines, first);
    }
    let marker = match language {
        Language::Rust => "///",
        Language::Ruby => "#",
        _ => "//",
    };
    let mut docs = Vec::new();
    let mut line = first;
    while line > 1 {
        line -= 1;
        let text = lines.text(source, line)?.trim();
        if let Some(doc) = text.strip_prefix(marker) {
            docs.push(doc.trim());
        } else if text.starts_with("#[") || text.starts_with('@') {
            continue;
        } else {
            break;
        }
    }
    docs.reverse();
    (!docs.is_empty()).then(|| docs.join("\n"))
}

/// The string that opens the body of the definition on line `first`.
fn python_docstring(source: &[u8], lines: &LineStarts, first: u32) -> Option<String> {
    let mut line = first;
    // The signature may run over several lines: the body starts after the
    // line that ends with `:`.
    while !lines.text(source, line)?.trim_end().ends_with(':') {
        line += 1;
        if line > first + 20 {
            return None;
        }
    }
    let body = loop {
        line += 1;
        let text = lines.text(source, line)?.trim();
        if !text.is_empty() {
            break text;
        }
    };
    let body = body.trim_start_matches(['r', 'R', 'u', 'U']);
    let quote = ["\"\"\"", "'''"]
        .into_iter()
        .find(|q| body.starts_with(q))?;
    let mut text = body[3..].to_owned();
    while !text.contains(quote) {
        line += 1;
        text.push('\n');
        text.push_str(lines.text(source, line)?.trim());
        if text.len() > DOCS_CHARS * 2 {
            break;
        }
    }
    Some(
        text.split(quote)
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned(),
    )
}

/// Every distinct ASCII identifier in `source`, space-separated.
fn identifiers(source: &[u8]) -> String {
    let mut seen = HashSet::new();
    let mut at = 0;
    while at < source.len() {
        let byte = source[at];
        if byte.is_ascii_alphabetic() || byte == b'_' {
            let start = at;
            while at < source.len() && (source[at].is_ascii_alphanumeric() || source[at] == b'_') {
                at += 1;
            }
            seen.insert(&source[start..at]);
        } else if byte.is_ascii_digit() {
            // A number's letters (0x1f, 1e9) are not identifiers.
            while at < source.len() && source[at].is_ascii_alphanumeric() {
                at += 1;
            }
        } else {
            at += 1;
        }
    }
    let mut words = String::with_capacity(seen.iter().map(|w| w.len() + 1).sum());
    for word in seen {
        if !words.is_empty() {
            words.push(' ');
        }
        words.push_str(std::str::from_utf8(word).expect("ASCII"));
    }
    words
}

/// `text` cut to `chars` characters.
fn cut(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(language: Language, source: &str) -> Vec<(String, String, bool, u32)> {
        let extracted =
            extract(&mut TagsContext::new(), language, source.as_bytes(), None).unwrap();
        extracted
            .occurrences
            .into_iter()
            .map(|o| (o.name, o.kind, o.is_def, o.line))
            .collect()
    }

    fn own(list: &[(&str, &str, bool, u32)]) -> Vec<(String, String, bool, u32)> {
        list.iter()
            .map(|(n, k, d, l)| ((*n).into(), (*k).into(), *d, *l))
            .collect()
    }

    #[test]
    fn rust_definitions_references_and_docs() {
        let source = "/// Adds.\n#[inline]\nfn add(a: u32) -> u32 {\n    helper(a)\n}\nstruct S;\nimpl S {\n    fn m(&self) { self.go(); }\n}\n";
        assert_eq!(
            tags(Language::Rust, source),
            own(&[
                ("add", "function", true, 3),
                ("helper", "call", false, 4),
                ("S", "class", true, 6),
                ("S", "implementation", false, 7),
                ("m", "method", true, 8),
                ("go", "call", false, 8),
            ])
        );
        let extracted = extract(
            &mut TagsContext::new(),
            Language::Rust,
            source.as_bytes(),
            None,
        )
        .unwrap();
        let add = &extracted.occurrences[0];
        assert_eq!(add.docs.as_deref(), Some("Adds."));
        assert_eq!(add.body_end_line, 5);
        assert_eq!(add.context, "fn add(a: u32) -> u32 {");
        let mut words: Vec<&str> = extracted.words.split(' ').collect();
        words.sort();
        assert_eq!(
            words,
            [
                "Adds", "S", "a", "add", "fn", "go", "helper", "impl", "inline", "m", "self",
                "struct", "u32"
            ]
        );
    }

    #[test]
    fn python_docstrings_are_the_docs() {
        let source =
            "def area(r):\n    \"\"\"The area\n    of a circle.\"\"\"\n    return square(r)\n";
        let extracted = extract(
            &mut TagsContext::new(),
            Language::Python,
            source.as_bytes(),
            None,
        )
        .unwrap();
        assert_eq!(
            extracted.occurrences[0].docs.as_deref(),
            Some("The area\nof a circle.")
        );
        assert_eq!(
            tags(Language::Python, source),
            own(&[("area", "function", true, 1), ("square", "call", false, 4)])
        );
    }

    #[test]
    fn rust_type_uses_paths_imports_and_macro_arguments_are_tagged() {
        let source = "use weir_runtime::{RunContext, Tool as T};\nimpl Tool for Explore {\n    fn run(&self, ctx: RunContext, all: Vec<RunContext>) {\n        let c = RunContext::new(1);\n        println!(\"{}\", helper(RunContext));\n    }\n}\n#[cfg(test)]\nmod tests {}\n";
        let found: Vec<(String, String, u32)> = tags(Language::Rust, source)
            .into_iter()
            .filter(|(name, _, is_def, _)| {
                !is_def
                    && ["RunContext", "Tool", "Explore", "new", "helper"].contains(&name.as_str())
            })
            .map(|(name, kind, _, line)| (name, kind, line))
            .collect();
        let expected: Vec<(String, String, u32)> = [
            ("RunContext", "import", 1),
            ("Tool", "import", 1),
            ("Tool", "implementation", 2),
            ("Explore", "type", 2),
            ("RunContext", "type", 3),
            ("RunContext", "type", 3),
            ("RunContext", "type", 4),
            ("new", "call", 4),
            ("helper", "call", 5),
            ("RunContext", "type", 5),
        ]
        .iter()
        .map(|(n, k, l)| ((*n).into(), (*k).into(), *l))
        .collect();
        assert_eq!(found, expected);
        let extracted = extract(
            &mut TagsContext::new(),
            Language::Rust,
            source.as_bytes(),
            None,
        )
        .unwrap();
        assert_eq!(extracted.test_line, Some(8));
        assert_eq!(
            extracted.imports,
            [Import {
                line: 1,
                text: "use weir_runtime::{RunContext, Tool as T};".into()
            }]
        );
    }

    #[test]
    fn imports_of_python_and_javascript_are_kept() {
        let python = extract(
            &mut TagsContext::new(),
            Language::Python,
            b"import os.path\nfrom .x import (a,\n  b)\n",
            None,
        )
        .unwrap();
        let texts: Vec<&str> = python.imports.iter().map(|i| i.text.as_str()).collect();
        assert_eq!(texts, ["import os.path", "from .x import (a,\n  b)"]);
        let js = extract(
            &mut TagsContext::new(),
            Language::TypeScript,
            b"import { a } from './x';\nconst z = require(\"../z\");\nexport * from './w';\n",
            None,
        )
        .unwrap();
        let texts: Vec<&str> = js.imports.iter().map(|i| i.text.as_str()).collect();
        assert_eq!(texts, ["./x", "../z", "./w"]);
        assert!(
            js.occurrences
                .iter()
                .any(|o| o.name == "a" && o.kind == "import")
        );
    }

    #[test]
    fn a_raised_flag_cancels_the_parse() {
        let flag = AtomicUsize::new(1);
        let source = "fn f() {}\n".repeat(10_000);
        let result = extract(
            &mut TagsContext::new(),
            Language::Rust,
            source.as_bytes(),
            Some(&flag),
        );
        assert!(matches!(result, Err(ExtractError::Cancelled)), "{result:?}");
    }
}
