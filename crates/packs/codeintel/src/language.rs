//! The languages the index reads: which files are whose, and each one's
//! tree-sitter grammar with the tags query its grammar crate ships, plus
//! weir's own patterns (`queries/`) where the grammar's miss uses: Rust's
//! type uses, paths and `use` items, and every language's imports.

use std::path::Path;
use std::sync::OnceLock;

use tree_sitter_tags::TagsConfiguration;

/// weir's patterns, appended to the grammars' own (which win where both
/// tag a node: theirs come first).
const RUST_EXTRA: &str = include_str!("../queries/rust.scm");
const PYTHON_EXTRA: &str = include_str!("../queries/python.scm");
const JAVASCRIPT_EXTRA: &str = include_str!("../queries/javascript.scm");

/// A language the index parses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Language {
    /// `.rs`
    Rust,
    /// `.py`, `.pyi`
    Python,
    /// `.js`, `.mjs`, `.cjs`, `.jsx`
    JavaScript,
    /// `.ts`, `.mts`, `.cts`
    TypeScript,
    /// `.tsx`
    Tsx,
    /// `.go`
    Go,
    /// `.java`
    Java,
    /// `.c`, `.h`
    C,
    /// `.cc`, `.cpp`, `.cxx`, `.hpp`, `.hh`, `.hxx`
    Cpp,
    /// `.rb`
    Ruby,
}

impl Language {
    /// Every language, in the order `list` shows them.
    pub(crate) const ALL: [Language; 10] = [
        Language::Rust,
        Language::Python,
        Language::JavaScript,
        Language::TypeScript,
        Language::Tsx,
        Language::Go,
        Language::Java,
        Language::C,
        Language::Cpp,
        Language::Ruby,
    ];

    /// The language of `path`, by its extension.
    pub(crate) fn of(path: &Path) -> Option<Language> {
        let extension = path.extension()?.to_str()?;
        Some(match extension {
            "rs" => Language::Rust,
            "py" | "pyi" => Language::Python,
            "js" | "mjs" | "cjs" | "jsx" => Language::JavaScript,
            "ts" | "mts" | "cts" => Language::TypeScript,
            "tsx" => Language::Tsx,
            "go" => Language::Go,
            "java" => Language::Java,
            "c" | "h" => Language::C,
            "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" => Language::Cpp,
            "rb" => Language::Ruby,
            _ => return None,
        })
    }

    /// Its name in the index and in answers.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Language::Rust => "rust",
            Language::Python => "python",
            Language::JavaScript => "javascript",
            Language::TypeScript => "typescript",
            Language::Tsx => "tsx",
            Language::Go => "go",
            Language::Java => "java",
            Language::C => "c",
            Language::Cpp => "cpp",
            Language::Ruby => "ruby",
        }
    }

    /// The family whose files may use each other's names: a Rust symbol's
    /// uses are only in Rust files, a JavaScript one's in JavaScript and
    /// TypeScript, a C one's in C and C++.
    pub(crate) fn family(self) -> &'static str {
        match self {
            Language::JavaScript | Language::TypeScript | Language::Tsx => "js",
            Language::C | Language::Cpp => "c",
            other => other.name(),
        }
    }

    /// The family of a language named as the index stores it.
    pub(crate) fn family_of(name: &str) -> &str {
        Language::ALL
            .iter()
            .find(|l| l.name() == name)
            .map_or(name, |l| l.family())
    }

    /// The tags configuration, compiled once per process (compiling a tags
    /// query takes milliseconds; a file takes less). `Err` says why a
    /// grammar's own query does not load, which would be a bug in a pin.
    pub(crate) fn tags(self) -> Result<&'static TagsConfiguration, &'static str> {
        static CONFIGS: [OnceLock<Result<TagsConfiguration, String>>; 10] =
            [const { OnceLock::new() }; 10];
        let index = Language::ALL
            .iter()
            .position(|language| *language == self)
            .expect("every language is in ALL");
        CONFIGS[index]
            .get_or_init(|| self.configure().map_err(|error| error.to_string()))
            .as_ref()
            .map_err(String::as_str)
    }

    fn configure(self) -> Result<TagsConfiguration, tree_sitter_tags::Error> {
        use tree_sitter_typescript as ts;
        // TypeScript's query holds only what TypeScript adds to JavaScript:
        // the two run together against the TypeScript grammar.
        let typescript_tags = || {
            format!(
                "{}\n{}\n{JAVASCRIPT_EXTRA}",
                tree_sitter_javascript::TAGS_QUERY,
                ts::TAGS_QUERY
            )
        };
        match self {
            Language::Rust => TagsConfiguration::new(
                tree_sitter_rust::LANGUAGE.into(),
                &format!("{}\n{RUST_EXTRA}", tree_sitter_rust::TAGS_QUERY),
                "",
            ),
            Language::Python => TagsConfiguration::new(
                tree_sitter_python::LANGUAGE.into(),
                &format!("{}\n{PYTHON_EXTRA}", tree_sitter_python::TAGS_QUERY),
                "",
            ),
            Language::JavaScript => TagsConfiguration::new(
                tree_sitter_javascript::LANGUAGE.into(),
                &format!("{}\n{JAVASCRIPT_EXTRA}", tree_sitter_javascript::TAGS_QUERY),
                tree_sitter_javascript::LOCALS_QUERY,
            ),
            Language::TypeScript => TagsConfiguration::new(
                ts::LANGUAGE_TYPESCRIPT.into(),
                &typescript_tags(),
                ts::LOCALS_QUERY,
            ),
            Language::Tsx => TagsConfiguration::new(
                ts::LANGUAGE_TSX.into(),
                &typescript_tags(),
                ts::LOCALS_QUERY,
            ),
            Language::Go => TagsConfiguration::new(
                tree_sitter_go::LANGUAGE.into(),
                tree_sitter_go::TAGS_QUERY,
                "",
            ),
            Language::Java => TagsConfiguration::new(
                tree_sitter_java::LANGUAGE.into(),
                tree_sitter_java::TAGS_QUERY,
                "",
            ),
            Language::C => TagsConfiguration::new(
                tree_sitter_c::LANGUAGE.into(),
                tree_sitter_c::TAGS_QUERY,
                "",
            ),
            Language::Cpp => TagsConfiguration::new(
                tree_sitter_cpp::LANGUAGE.into(),
                tree_sitter_cpp::TAGS_QUERY,
                "",
            ),
            Language::Ruby => TagsConfiguration::new(
                tree_sitter_ruby::LANGUAGE.into(),
                tree_sitter_ruby::TAGS_QUERY,
                tree_sitter_ruby::LOCALS_QUERY,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_grammar_loads_its_tags_query() {
        for language in Language::ALL {
            let tags = language.tags();
            assert!(tags.is_ok(), "{}: {:?}", language.name(), tags.err());
        }
    }
}
