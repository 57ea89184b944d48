//! Reading a SCIP index (`index.scip` at a repository's root, written by a
//! compiler-grade indexer such as scip-typescript or rust-analyzer): every
//! occurrence with its exact symbol, as plain rows for the store.
//!
//! A SCIP symbol names one entity (`rust-analyzer cargo shapes 0.1.0
//! Circle#area().`), so two methods both called `area` are two symbols and
//! their uses never mix, which no name-based search can promise. Local
//! symbols (`local 3`) are unique only within their document: their key
//! here is the symbol and the document's path.

use std::collections::HashMap;
use std::path::Path;

use protobuf::Message;
use scip::types::{Index, Occurrence, PositionEncoding, occurrence::Typed_range};

use crate::repo;

/// The file name looked for at a repository's root.
pub(crate) const FILE_NAME: &str = "index.scip";

/// `SymbolRole::Definition`, a bit of `Occurrence::symbol_roles`.
pub(crate) const ROLE_DEFINITION: i32 = 1;
/// `SymbolRole::Import`.
pub(crate) const ROLE_IMPORT: i32 = 2;
/// `SymbolRole::WriteAccess`.
pub(crate) const ROLE_WRITE: i32 = 4;

/// One symbol of the index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ScipSymbol {
    /// The SCIP symbol; a local one with ` @ path` after it.
    pub(crate) key: String,
    /// Its name as written in the code: the display name, else the last
    /// descriptor of the symbol, else (locals) the text at its definition.
    pub(crate) name: String,
    /// SCIP's kind (`Method`, `Class`, …), when the indexer gave one.
    pub(crate) kind: Option<String>,
    pub(crate) docs: Option<String>,
}

/// One occurrence. Lines and columns count from 1; columns in bytes, like
/// the tags'.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ScipOccurrence {
    /// Index into [`ScipIndex::symbols`].
    pub(crate) symbol: usize,
    pub(crate) path: String,
    pub(crate) line: u32,
    pub(crate) column: u32,
    pub(crate) end_line: u32,
    pub(crate) end_column: u32,
    pub(crate) roles: i32,
}

/// What the store keeps of an index.
#[derive(Debug, Default)]
pub(crate) struct ScipIndex {
    /// The documents (relative paths) the index covers.
    pub(crate) documents: Vec<String>,
    /// Documents left out because they name a file outside the repository
    /// (`../x`, an absolute path, a symlink out), each with why: never
    /// read, never stored.
    pub(crate) dropped: Vec<String>,
    pub(crate) symbols: Vec<ScipSymbol>,
    pub(crate) occurrences: Vec<ScipOccurrence>,
}

/// Why an index could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ScipError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} is not a SCIP index: {source}")]
    Decode {
        path: String,
        source: protobuf::Error,
    },
}

/// Reads the SCIP index at `path`, a file inside the repository `root`,
/// to be [`merge`]d: opened without following a symlink out of `root` (an
/// `index.scip` linked to another repository's is not read).
pub(crate) fn read(path: &str, root: &Path) -> Result<Index, ScipError> {
    let bytes =
        repo::read_beneath(root, path, MAX_INDEX_BYTES).map_err(|source| ScipError::Read {
            path: path.to_owned(),
            source,
        })?;
    parse(&bytes).map_err(|source| ScipError::Decode {
        path: path.to_owned(),
        source,
    })
}

/// An `index.scip`'s bytes, decoded and converted; `root` is the
/// repository, whose files give the names of local symbols and, for
/// indexers that count UTF-16 or UTF-32 units, the byte columns.
#[cfg_attr(not(feature = "fuzzing"), allow(dead_code))]
pub(crate) fn decode(bytes: &[u8], root: &Path) -> Result<ScipIndex, protobuf::Error> {
    Ok(convert(Index::parse_from_bytes(bytes)?, root))
}

/// Several indexes read as one (the repository's own `index.scip`, then
/// the indexers' outputs): a document a former part covers is left out of
/// later ones. With each kept document's source, by path.
pub(crate) fn merge(
    parts: Vec<(String, Index)>,
    root: &Path,
) -> (ScipIndex, HashMap<String, String>) {
    let mut merged = Index::new();
    let mut sources: HashMap<String, String> = HashMap::new();
    for (source, index) in parts {
        for document in index.documents {
            let path = document.relative_path.replace('\\', "/");
            if sources.contains_key(&path) {
                continue;
            }
            sources.insert(path, source.clone());
            merged.documents.push(document);
        }
        merged.external_symbols.extend(index.external_symbols);
    }
    (convert(merged, root), sources)
}

/// An index's bytes, decoded.
pub(crate) fn parse(bytes: &[u8]) -> Result<Index, protobuf::Error> {
    Index::parse_from_bytes(bytes)
}

/// The largest `index.scip` read (a big monorepo's is a few hundred MB).
const MAX_INDEX_BYTES: u64 = 2 << 30;

fn convert(index: Index, root: &Path) -> ScipIndex {
    let mut out = ScipIndex::default();
    let mut by_key: HashMap<String, usize> = HashMap::new();
    let describe = |out: &mut ScipIndex, id: usize, info: &scip::types::SymbolInformation| {
        let symbol = &mut out.symbols[id];
        if !info.display_name.is_empty() {
            symbol.name = info.display_name.clone();
        }
        let kind = info.kind.value();
        if kind != 0 {
            symbol.kind = info.kind.enum_value().ok().map(|k| format!("{k:?}"));
        }
        if let Some(docs) = info.documentation.iter().find(|d| !d.trim().is_empty()) {
            symbol.docs = Some(docs.trim().chars().take(600).collect());
        }
    };
    for document in index.documents {
        let path = document.relative_path.replace('\\', "/");
        if let Some(why) = repo::outside_reason(root, &path) {
            out.dropped.push(format!(
                "index.scip: the document {path:?} was dropped, never read: {why}"
            ));
            continue;
        }
        let units = match document.position_encoding.enum_value() {
            Ok(PositionEncoding::UTF16CodeUnitOffsetFromLineStart) => Units::Utf16,
            Ok(PositionEncoding::UTF32CodeUnitOffsetFromLineStart) => Units::Utf32,
            Ok(PositionEncoding::UTF8CodeUnitOffsetFromLineStart) => Units::Bytes,
            // Older indexers leave it unset (scip-typescript 0.4 does, and
            // counts UTF-16 units): told apart per line, below.
            _ => Units::Unknown,
        };
        // The document's lines, read once when a column or a name needs them.
        let mut lines: Option<Vec<String>> = None;
        let mut line_of = |n: u32| -> Option<String> {
            lines
                .get_or_insert_with(|| {
                    repo::read_beneath(root, &path, repo::MAX_READ_BYTES)
                        .map(|s| {
                            String::from_utf8_lossy(&s)
                                .split('\n')
                                .map(str::to_owned)
                                .collect()
                        })
                        .unwrap_or_default()
                })
                .get(n as usize)
                .cloned()
        };
        for occurrence in &document.occurrences {
            if occurrence.symbol.is_empty() {
                continue;
            }
            let Some([line, start, end_line, end]) = range(occurrence) else {
                continue;
            };
            let local = scip::symbol::is_local_symbol(&occurrence.symbol);
            let (column, end_column) = match units {
                Units::Bytes => (start, end),
                other => {
                    let text = line_of(line).unwrap_or_default();
                    let end_text = if end_line == line {
                        text.clone()
                    } else {
                        line_of(end_line).unwrap_or_default()
                    };
                    if let Units::Unknown = other {
                        let expected = (!local).then(|| descriptor_name(&occurrence.symbol));
                        guess_columns(&text, &end_text, (start, end), expected.as_deref())
                    } else {
                        (other.to_bytes(&text, start), other.to_bytes(&end_text, end))
                    }
                }
            };
            let key = if local {
                format!("{} @ {path}", occurrence.symbol)
            } else {
                occurrence.symbol.clone()
            };
            let id = match by_key.get(&key) {
                Some(id) => *id,
                None => {
                    let name = if local {
                        line_of(line)
                            .and_then(|t| {
                                t.get(column as usize..end_column as usize)
                                    .map(str::to_owned)
                            })
                            .unwrap_or_default()
                    } else {
                        descriptor_name(&occurrence.symbol)
                    };
                    intern(&mut out, &mut by_key, key, name)
                }
            };
            out.occurrences.push(ScipOccurrence {
                symbol: id,
                path: path.clone(),
                line: line + 1,
                column: column + 1,
                end_line: end_line + 1,
                end_column: end_column + 1,
                roles: occurrence.symbol_roles,
            });
        }
        for info in &document.symbols {
            let key = if scip::symbol::is_local_symbol(&info.symbol) {
                format!("{} @ {path}", info.symbol)
            } else {
                info.symbol.clone()
            };
            let id = intern(&mut out, &mut by_key, key, descriptor_name(&info.symbol));
            describe(&mut out, id, info);
        }
        out.documents.push(path);
    }
    for info in &index.external_symbols {
        let id = intern(
            &mut out,
            &mut by_key,
            info.symbol.clone(),
            descriptor_name(&info.symbol),
        );
        describe(&mut out, id, info);
    }
    out.symbols.iter_mut().for_each(|s| {
        if s.name.is_empty() {
            s.name = s.key.clone();
        }
    });
    out
}

/// The symbol `key`'s index, added with `name` when new.
fn intern(
    out: &mut ScipIndex,
    by_key: &mut HashMap<String, usize>,
    key: String,
    name: String,
) -> usize {
    *by_key.entry(key.clone()).or_insert_with(|| {
        out.symbols.push(ScipSymbol {
            key,
            name,
            kind: None,
            docs: None,
        });
        out.symbols.len() - 1
    })
}

/// `[line, start, end line, end]`, 0-based, from the typed range when
/// there is one (it overrides the old `range`), else from `range`.
fn range(occurrence: &Occurrence) -> Option<[u32; 4]> {
    let numbers: [i32; 4] = match &occurrence.typed_range {
        Some(Typed_range::SingleLineRange(r)) => {
            [r.line, r.start_character, r.line, r.end_character]
        }
        Some(Typed_range::MultiLineRange(r)) => {
            [r.start_line, r.start_character, r.end_line, r.end_character]
        }
        _ => match occurrence.range.as_slice() {
            [line, start, end] => [*line, *start, *line, *end],
            [line, start, end_line, end] => [*line, *start, *end_line, *end],
            _ => return None,
        },
    };
    if numbers.iter().any(|n| *n < 0) {
        return None;
    }
    Some(numbers.map(|n| n as u32))
}

/// The name a global symbol's last descriptor gives (`Circle#area().` →
/// `area`), or the whole symbol when it does not parse.
pub(crate) fn descriptor_name(symbol: &str) -> String {
    scip::symbol::parse_symbol(symbol)
        .ok()
        .and_then(|parsed| parsed.descriptors.last().map(|d| d.name.clone()))
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| symbol.to_owned())
}

/// Byte columns of `(start, end)` when the index does not say what its
/// columns count. On an ASCII line every count agrees. Elsewhere UTF-16
/// units (what LSP-based indexers count) and bytes are both tried: the one
/// whose text is the symbol's name wins, else the one that spans an
/// identifier, else UTF-16.
fn guess_columns(
    text: &str,
    end_text: &str,
    (start, end): (u32, u32),
    expected: Option<&str>,
) -> (u32, u32) {
    if text.is_ascii() && end_text.is_ascii() {
        return (start, end);
    }
    let utf16 = (
        Units::Utf16.to_bytes(text, start),
        Units::Utf16.to_bytes(end_text, end),
    );
    if text != end_text {
        return utf16; // a multi-line range: no name to check it against
    }
    let slice = |(a, b): (u32, u32)| text.get(a as usize..b as usize);
    if let Some(name) = expected {
        if slice(utf16) == Some(name) {
            return utf16;
        }
        if slice((start, end)) == Some(name) {
            return (start, end);
        }
    }
    let identifier = |s: Option<&str>| {
        s.is_some_and(|s| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_alphanumeric() || c == '_' || c == '$')
        })
    };
    if !identifier(slice(utf16)) && identifier(slice((start, end))) {
        return (start, end);
    }
    utf16
}

/// What an indexer's columns count.
#[derive(Clone, Copy)]
enum Units {
    Bytes,
    Utf16,
    Utf32,
    /// Not said: UTF-16 or bytes, guessed per line.
    Unknown,
}

impl Units {
    /// The byte offset in `line` of `units` code units.
    fn to_bytes(self, line: &str, units: u32) -> u32 {
        let mut counted = 0u32;
        for (at, c) in line.char_indices() {
            if counted >= units {
                return at as u32;
            }
            counted += match self {
                Units::Utf16 => c.len_utf16() as u32,
                _ => 1,
            };
        }
        line.len() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_outside_the_repository_are_dropped_unread() {
        use scip::types::Document;
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = base.join("repo");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(base.join("secret.rs"), "pub fn secret() {}\n").unwrap();
        std::fs::write(root.join("a.rs"), "pub fn area() {}\n").unwrap();
        std::os::unix::fs::symlink(base.join("secret.rs"), root.join("out.rs")).unwrap();
        std::os::unix::fs::symlink(&base, root.join("up")).unwrap();
        let absolute = base.join("secret.rs").display().to_string();
        let mut index = Index::new();
        for path in [
            "a.rs",
            "../secret.rs",
            &absolute,
            "out.rs",
            "up/secret.rs",
            "gone.rs",
        ] {
            let mut document = Document::new();
            document.relative_path = path.into();
            document.occurrences.push(Occurrence {
                range: vec![0, 7, 11],
                symbol: "local 1".into(),
                ..Default::default()
            });
            index.documents.push(document);
        }
        let read = convert(index, &root);
        // A missing file is kept (nothing is read of it).
        assert_eq!(read.documents, ["a.rs", "gone.rs"]);
        assert_eq!(read.dropped.len(), 4, "{:?}", read.dropped);
        assert!(
            read.occurrences
                .iter()
                .all(|o| o.path == "a.rs" || o.path == "gone.rs")
        );
        // The local symbol's name is read from the file inside only.
        assert!(read.symbols.iter().any(|s| s.name == "area"));
        assert!(!read.symbols.iter().any(|s| s.name.contains("secr")));
    }

    #[test]
    fn columns_after_wide_characters_become_bytes() {
        let line = "let s = \"π ≈ ∑\"; f(c.area());";
        let at = line.find("area").unwrap() as u32;
        let utf16 = line[..at as usize].encode_utf16().count() as u32;
        assert_ne!(utf16, at);
        assert_eq!(Units::Utf16.to_bytes(line, utf16), at);
        let chars = line[..at as usize].chars().count() as u32;
        assert_eq!(Units::Utf32.to_bytes(line, chars), at);
        // Unsaid: UTF-16 when that spells the name, bytes when they do.
        let range = (utf16, utf16 + 4);
        assert_eq!(guess_columns(line, line, range, Some("area")), (at, at + 4));
        assert_eq!(
            guess_columns(line, line, (at, at + 4), Some("area")),
            (at, at + 4)
        );
        assert_eq!(guess_columns(line, line, range, None), (at, at + 4));
        assert_eq!(guess_columns("plain", "plain", (1, 3), None), (1, 3));
    }
}
