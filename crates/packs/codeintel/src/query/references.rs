//! `find_references`: a name's definitions, then its uses grouped by file.
//!
//! Three backends. `scip`: when the repository has an `index.scip`, the
//! files it covers answer from it, exactly: each occurrence belongs to one
//! SCIP symbol, so two `area` methods never mix, and an item says which
//! (`symbolId`). Elsewhere, `tags`: the call sites, type uses and
//! implementations the grammars' tags queries find, and `text`: every other
//! whole-word occurrence, in the files whose words (an FTS5 table of each
//! file's identifiers) include the name — read when the query reaches
//! them, so the first file's uses go out before the last file is read.
//!
//! `symbol` is a name (`area`), a definition's `stableId` from
//! `search_symbols` (`src/shapes.rs:5:area`) or a SCIP symbol. The last
//! two pin the answer to one symbol when SCIP knows it: then only its
//! occurrences are given, and the answer is `exact`. In the files SCIP
//! covers it is trusted whole: a mention in a comment or a string is no
//! use, and a file edited since the indexer ran may have moved (index.scip
//! is as fresh as its indexer's last run).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;

use serde_json::{Value, json};
use weir_core::{FailureCode, Meta, RunError};

use crate::answer::{Sink, Stopped, paging};
use crate::indexer::is_test_path;
use crate::language::Language;
use crate::query::{IndexState, SYMBOL_COLUMNS, SymbolRow, location};
use crate::repo;
use crate::scip::{ROLE_DEFINITION, ROLE_IMPORT, ROLE_WRITE};
use crate::store::Store;

/// What was asked.
pub(crate) struct ReferencesQuery {
    pub(crate) symbol: String,
    pub(crate) include_tests: bool,
    /// Also whole-word text occurrences that no tag covers.
    pub(crate) text: bool,
}

/// How many items the summary shows itself.
const TOP_ITEMS: usize = 10;
/// How many files the summary counts by name.
const TOP_FILES: usize = 20;
/// How many SCIP symbols of one name the summary lists.
const TOP_SYMBOLS: usize = 20;

/// A SCIP symbol an answer is about.
#[derive(Clone, Debug)]
pub(crate) struct ScipTarget {
    pub(crate) id: i64,
    pub(crate) symbol: String,
    pub(crate) name: String,
    pub(crate) kind: Option<String>,
    pub(crate) docs: Option<String>,
}

/// What `symbol` asks about.
pub(crate) struct Target {
    /// The plain name, for tags and text.
    pub(crate) name: String,
    /// The SCIP symbols it means (empty without SCIP).
    pub(crate) scip: Vec<ScipTarget>,
    /// Whether `symbol` named one symbol (a stableId, a SCIP symbol) that
    /// SCIP resolved: then nothing but its occurrences answers.
    pub(crate) pinned: bool,
    pub(crate) warning: Option<String>,
}

/// The documents the repository's SCIP index covers (empty without one).
pub(crate) fn scip_documents(store: &Store) -> Result<HashSet<String>, RunError> {
    let failed =
        |e: rusqlite::Error| RunError::new(FailureCode::ToolError, store.error(e).to_string());
    let mut statement = store
        .conn
        .prepare_cached("SELECT path FROM scip_documents")
        .map_err(failed)?;
    let rows = statement
        .query_map([], |r| r.get::<_, String>(0))
        .map_err(failed)?;
    rows.collect::<Result<_, _>>().map_err(failed)
}

/// Resolves `symbol` (a name, a stableId `path:line:name`, or a SCIP
/// symbol) against the SCIP index.
pub(crate) fn resolve(store: &Store, symbol: &str, scip: bool) -> Result<Target, RunError> {
    let failed =
        |e: rusqlite::Error| RunError::new(FailureCode::ToolError, store.error(e).to_string());
    let targets =
        |sql: &str, params: &[&dyn rusqlite::ToSql]| -> Result<Vec<ScipTarget>, RunError> {
            let mut statement = store.conn.prepare_cached(sql).map_err(failed)?;
            let rows = statement
                .query_map(params, |r| {
                    Ok(ScipTarget {
                        id: r.get(0)?,
                        symbol: r.get(1)?,
                        name: r.get(2)?,
                        kind: r.get(3)?,
                        docs: r.get(4)?,
                    })
                })
                .map_err(failed)?;
            rows.collect::<Result<_, _>>().map_err(failed)
        };
    const COLUMNS: &str = "s.id, s.symbol, s.name, s.kind, s.docs";
    // `path:line:name`, as search_symbols' stableId.
    let parts: Vec<&str> = symbol.rsplitn(3, ':').collect();
    let pinned_by = match parts.as_slice() {
        [name, line, path] if !path.is_empty() && !name.is_empty() => {
            line.parse::<u32>().ok().map(|line| (*path, line, *name))
        }
        _ => None,
    };
    let is_scip_symbol = symbol.contains(' ');
    let name = match (pinned_by, is_scip_symbol) {
        (Some((_, _, name)), _) => name.to_owned(),
        (None, true) => crate::scip::descriptor_name(symbol),
        (None, false) => symbol.to_owned(),
    };
    if !scip {
        let warning = (pinned_by.is_some() || is_scip_symbol).then(|| {
            format!("the repository has no SCIP index: answering for every symbol named {name:?}")
        });
        return Ok(Target {
            name,
            scip: Vec::new(),
            pinned: false,
            warning,
        });
    }
    if let Some((path, line, name)) = pinned_by {
        let found = targets(
            &format!(
                "SELECT DISTINCT {COLUMNS} FROM scip_occurrences o JOIN scip_symbols s ON s.id = o.symbol_id
                 WHERE o.path = ?1 AND o.line = ?2 AND (o.roles & {ROLE_DEFINITION}) != 0 AND s.name = ?3"
            ),
            &[&path, &line, &name],
        )?;
        if !found.is_empty() {
            return Ok(Target {
                name: name.to_owned(),
                scip: found,
                pinned: true,
                warning: None,
            });
        }
        return Ok(Target {
            name: name.to_owned(),
            scip: targets(
                &format!(
                    "SELECT {COLUMNS} FROM scip_symbols s WHERE s.name = ?1 ORDER BY s.symbol"
                ),
                &[&name],
            )?,
            pinned: false,
            warning: Some(format!(
                "the SCIP index has no definition of {name:?} at {path}:{line}: answering for every symbol named {name:?}"
            )),
        });
    }
    if is_scip_symbol {
        let found = targets(
            &format!("SELECT {COLUMNS} FROM scip_symbols s WHERE s.symbol = ?1"),
            &[&symbol],
        )?;
        if let Some(first) = found.first() {
            return Ok(Target {
                name: first.name.clone(),
                pinned: true,
                scip: found,
                warning: None,
            });
        }
    }
    Ok(Target {
        scip: targets(
            &format!("SELECT {COLUMNS} FROM scip_symbols s WHERE s.name = ?1 ORDER BY s.symbol"),
            &[&name],
        )?,
        warning: is_scip_symbol.then(|| {
            format!(
                "the SCIP index has no symbol {symbol:?}: answering for every symbol named {name:?}"
            )
        }),
        name,
        pinned: false,
    })
}

/// One SCIP occurrence of a target.
#[derive(Clone, Debug)]
pub(crate) struct ScipHit {
    pub(crate) symbol_id: i64,
    pub(crate) path: String,
    pub(crate) line: u32,
    pub(crate) column: u32,
    pub(crate) end_line: u32,
    pub(crate) end_column: u32,
    pub(crate) roles: i32,
}

impl ScipHit {
    pub(crate) fn is_definition(&self) -> bool {
        self.roles & ROLE_DEFINITION != 0
    }

    /// The kind of use, in the words the other backends use.
    pub(crate) fn kind(&self) -> &'static str {
        if self.is_definition() {
            "definition"
        } else if self.roles & ROLE_IMPORT != 0 {
            "import"
        } else if self.roles & ROLE_WRITE != 0 {
            "write"
        } else {
            "reference"
        }
    }
}

/// Every occurrence of `targets`, by path, line and column.
pub(crate) fn scip_hits(store: &Store, targets: &[ScipTarget]) -> Result<Vec<ScipHit>, RunError> {
    let failed =
        |e: rusqlite::Error| RunError::new(FailureCode::ToolError, store.error(e).to_string());
    let mut hits = Vec::new();
    let mut statement = store
        .conn
        .prepare_cached(
            "SELECT symbol_id, path, line, col, end_line, end_col, roles FROM scip_occurrences
             WHERE symbol_id = ?1",
        )
        .map_err(failed)?;
    for target in targets {
        let rows = statement
            .query_map([target.id], |r| {
                Ok(ScipHit {
                    symbol_id: r.get(0)?,
                    path: r.get(1)?,
                    line: r.get(2)?,
                    column: r.get(3)?,
                    end_line: r.get(4)?,
                    end_column: r.get(5)?,
                    roles: r.get(6)?,
                })
            })
            .map_err(failed)?;
        for row in rows {
            hits.push(row.map_err(failed)?);
        }
    }
    hits.sort_by(|a, b| (&a.path, a.line, a.column).cmp(&(&b.path, b.line, b.column)));
    Ok(hits)
}

/// A file's lines, for `context`.
pub(crate) fn source_lines(root: &Path, path: &str) -> Vec<String> {
    repo::read_beneath(root, path, repo::MAX_READ_BYTES)
        .map(|s| {
            String::from_utf8_lossy(&s)
                .split('\n')
                .map(|l| l.trim().chars().take(200).collect())
                .collect()
        })
        .unwrap_or_default()
}

/// One item of a reference set: a definition or a use.
#[derive(Clone, Debug)]
pub(crate) struct Reference {
    pub(crate) path: String,
    pub(crate) line: u32,
    pub(crate) column: u32,
    pub(crate) end_line: u32,
    pub(crate) end_column: u32,
    /// `definition`, or the use's kind: `call`, `type`, `import`,
    /// `implementation`, `reference`, `write` (SCIP), `mention` (text).
    pub(crate) kind: String,
    pub(crate) context: String,
    /// In a test file, or after the line a file's own tests start at.
    pub(crate) is_test: bool,
    /// `scip`, `tags` or `text`.
    pub(crate) backend: &'static str,
    /// The SCIP symbol, when SCIP gave it.
    pub(crate) symbol_id: Option<String>,
    /// A tagged definition's kind (`function`, `class`, …).
    pub(crate) symbol_kind: Option<String>,
}

impl Reference {
    pub(crate) fn is_definition(&self) -> bool {
        self.kind == "definition"
    }

    /// Whether the use depends on the symbol (a mention in a comment or a
    /// string does not; an import only names it).
    pub(crate) fn is_dependent_use(&self) -> bool {
        !matches!(self.kind.as_str(), "definition" | "mention" | "import")
    }

    pub(crate) fn json(&self) -> Value {
        let mut item = json!({
            "location": location(&self.path, self.line, self.column, self.end_line, self.end_column),
            "kind": self.kind,
            "context": self.context,
            "isTest": self.is_test,
            "backend": self.backend,
        });
        if let Some(symbol) = &self.symbol_id {
            item["symbolId"] = json!(symbol);
        }
        if let Some(kind) = &self.symbol_kind {
            item["symbolKind"] = json!(kind);
        }
        item
    }
}

/// The references of one symbol, as every tool that needs them computes
/// them (`find_references`, `understand`, `prepare_change`, `explore`):
/// the definitions at once, then each file's uses when asked, so a caller
/// that streams sends the first file's before the last is read.
pub(crate) struct ReferenceSet<'a> {
    store: &'a Store,
    root: &'a Path,
    pub(crate) target: Target,
    pub(crate) include_tests: bool,
    pub(crate) text: bool,
    /// Whether tags and text answer too (not when SCIP pinned the symbol).
    syntactic: bool,
    covered: HashSet<String>,
    pub(crate) definitions: Vec<Reference>,
    /// The files that may hold uses, in order, with whether each is a
    /// test file.
    pub(crate) files: BTreeSet<(String, bool)>,
    tagged: BTreeMap<String, Vec<SymbolRow>>,
    scip_uses: BTreeMap<String, Vec<ScipHit>>,
    symbol_ids: HashMap<i64, String>,
    /// The language families the uses may be in (empty: any).
    pub(crate) families: BTreeSet<String>,
    pub(crate) indexed_references: usize,
    pub(crate) backends: Vec<&'static str>,
    pub(crate) completeness: &'static str,
    pub(crate) warnings: Vec<String>,
}

/// A definition the tags found, as a reference; a test when its file is
/// one, or when it is at or past the line where the file's tests begin
/// (`test_line`).
fn tagged_definition(row: SymbolRow, test_line: Option<u32>) -> Reference {
    Reference {
        is_test: row.is_test || test_line.is_some_and(|t| row.line >= t),
        path: row.path,
        line: row.line,
        column: row.column,
        end_line: row.end_line,
        end_column: row.end_column,
        kind: "definition".into(),
        context: row.context,
        backend: "tags",
        symbol_id: None,
        symbol_kind: Some(row.kind),
    }
}

/// The files whose text has `name` as a word (the full-text index), not
/// covered by SCIP and in a language family the uses may be in; `tests`
/// is the SQL that leaves tests out, or empty.
fn files_with_the_word(
    store: &Store,
    name: &str,
    tests: &str,
    covered: &HashSet<String>,
    family_ok: &dyn Fn(&str) -> bool,
) -> Result<Vec<(String, bool)>, RunError> {
    let failed =
        |e: rusqlite::Error| RunError::new(FailureCode::ToolError, store.error(e).to_string());
    let mut files = Vec::new();
    let mut statement = store
        .conn
        .prepare_cached(&format!(
            "SELECT f.path, f.is_test, f.language FROM file_words w JOIN files f ON f.id = w.rowid
             WHERE file_words MATCH ?1 {tests}"
        ))
        .map_err(failed)?;
    let phrase = format!("\"{}\"", name.replace('"', "\"\""));
    let found = statement
        .query_map([phrase], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, bool>(1)?,
                row.get::<_, String>(2)?,
            ))
        })
        .map_err(failed)?;
    for file in found {
        let (path, is_test, language) = file.map_err(failed)?;
        if !covered.contains(&path) && family_ok(&language) {
            files.push((path, is_test));
        }
    }
    Ok(files)
}

impl<'a> ReferenceSet<'a> {
    /// Resolves `query.symbol` and finds its definitions and the files its
    /// uses may be in.
    pub(crate) fn open(
        store: &'a Store,
        root: &'a Path,
        query: &ReferencesQuery,
    ) -> Result<ReferenceSet<'a>, RunError> {
        let failed =
            |e: rusqlite::Error| RunError::new(FailureCode::ToolError, store.error(e).to_string());
        let covered = scip_documents(store)?;
        let target = resolve(store, &query.symbol, !covered.is_empty())?;
        let mut warnings: Vec<String> = target.warning.iter().cloned().collect();
        let name = target.name.clone();
        let tests = if query.include_tests {
            ""
        } else {
            "AND f.is_test = 0"
        };
        let scip = scip_hits(store, &target.scip)?
            .into_iter()
            .filter(|hit| query.include_tests || !is_test_path(&hit.path))
            .collect::<Vec<_>>();
        let syntactic = !target.pinned;
        let families = families_of(store, &query.symbol, &name)?;
        let family_ok = |language: &str| {
            families.is_empty() || families.contains(Language::family_of(language))
        };
        let rows = |is_def: bool| -> Result<Vec<(SymbolRow, Option<u32>)>, RunError> {
            if !syntactic {
                return Ok(Vec::new());
            }
            let mut statement = store
                .conn
                .prepare_cached(&format!(
                    "SELECT {SYMBOL_COLUMNS}, f.language, f.test_line FROM symbols s JOIN files f ON f.id = s.file_id
                     WHERE s.name = ?1 AND s.is_def = ?2 {tests} ORDER BY f.path, s.line, s.col"
                ))
                .map_err(failed)?;
            let found = statement
                .query_map(rusqlite::params![name, is_def], |r| {
                    Ok((SymbolRow::read(r)?, r.get::<_, String>(11)?, r.get(12)?))
                })
                .map_err(failed)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(failed)?;
            Ok(found
                .into_iter()
                .filter(|(row, language, _)| !covered.contains(&row.path) && family_ok(language))
                .map(|(row, _, test_line)| (row, test_line))
                .collect())
        };
        let mut definitions: Vec<Reference> = rows(true)?
            .into_iter()
            .map(|(row, test_line)| tagged_definition(row, test_line))
            .filter(|d| query.include_tests || !d.is_test)
            .collect();
        let mut tagged: BTreeMap<String, Vec<SymbolRow>> = BTreeMap::new();
        for (row, _) in rows(false)? {
            tagged.entry(row.path.clone()).or_default().push(row);
        }
        let indexed_references = tagged.values().map(Vec::len).sum();
        let mut files: BTreeSet<(String, bool)> = tagged
            .values()
            .map(|rows| (rows[0].path.clone(), rows[0].is_test))
            .collect();
        if query.text && syntactic {
            files.extend(files_with_the_word(
                store, &name, tests, &covered, &family_ok,
            )?);
        }
        let symbol_ids: HashMap<i64, String> = target
            .scip
            .iter()
            .map(|t| (t.id, t.symbol.clone()))
            .collect();
        let mut scip_uses: BTreeMap<String, Vec<ScipHit>> = BTreeMap::new();
        let mut lines_of: HashMap<String, Vec<String>> = HashMap::new();
        for hit in scip {
            if hit.is_definition() {
                let lines = lines_of
                    .entry(hit.path.clone())
                    .or_insert_with(|| source_lines(root, &hit.path));
                definitions.push(scip_reference(&hit, lines, &symbol_ids));
            } else {
                files.insert((hit.path.clone(), is_test_path(&hit.path)));
                scip_uses.entry(hit.path.clone()).or_default().push(hit);
            }
        }
        definitions.sort_by(|a, b| (&a.path, a.line, a.column).cmp(&(&b.path, b.line, b.column)));
        let fallback = !files.iter().all(|(path, _)| scip_uses.contains_key(path))
            || definitions.iter().any(|d| d.backend != "scip");
        let mut backends: Vec<&'static str> = Vec::new();
        if !target.scip.is_empty() {
            backends.push("scip");
        }
        if syntactic {
            backends.push("tags");
            if query.text {
                backends.push("text");
            }
        }
        let completeness = match (target.scip.is_empty(), fallback) {
            (true, _) => "syntactic",
            (false, false) => "exact",
            (false, true) => "mixed",
        };
        if families.is_empty() && syntactic {
            warnings.push(format!(
                "no definition of {name:?} in the index: its uses are looked for in every language"
            ));
        }
        Ok(ReferenceSet {
            store,
            root,
            target,
            include_tests: query.include_tests,
            text: query.text,
            syntactic,
            covered,
            definitions,
            files,
            tagged,
            scip_uses,
            symbol_ids,
            families,
            indexed_references,
            backends,
            completeness,
            warnings,
        })
    }

    /// The uses in `path` (one of [`Self::files`]) in line order, and
    /// whether the file changed since it was indexed.
    pub(crate) fn uses_in(&self, path: &str, is_test: bool) -> (Vec<Reference>, bool) {
        let test_line = if is_test {
            Some(1)
        } else {
            self.test_line(path)
        };
        let in_test = |line: u32| test_line.is_some_and(|t| line >= t);
        let keep = |r: &Reference| self.include_tests || !r.is_test;
        if let Some(hits) = self.scip_uses.get(path) {
            let lines = source_lines(self.root, path);
            let uses = hits
                .iter()
                .map(|hit| {
                    let mut r = scip_reference(hit, &lines, &self.symbol_ids);
                    r.is_test = r.is_test || in_test(hit.line);
                    r
                })
                .filter(keep)
                .collect();
            return (uses, false);
        }
        let name = self.target.name.as_str();
        let tagged = self.tagged.get(path).map(Vec::as_slice).unwrap_or_default();
        let mut uses: Vec<Reference> = tagged
            .iter()
            .map(|r| Reference {
                path: r.path.clone(),
                line: r.line,
                column: r.column,
                end_line: r.end_line,
                end_column: r.end_column,
                kind: r.kind.clone(),
                context: r.context.clone(),
                is_test: in_test(r.line),
                backend: "tags",
                symbol_id: None,
                symbol_kind: None,
            })
            .collect();
        let mut changed = false;
        if self.text && self.syntactic && !self.covered.contains(path) {
            match repo::read_beneath(self.root, path, repo::MAX_READ_BYTES) {
                Ok(source) => {
                    let known: BTreeSet<(u32, u32)> = tagged
                        .iter()
                        .map(|r| (r.line, r.column))
                        .chain(
                            self.definitions
                                .iter()
                                .filter(|d| d.path == path)
                                .map(|d| (d.line, d.column)),
                        )
                        .collect();
                    for (line, column, text) in word_occurrences(&source, name.as_bytes()) {
                        if known.contains(&(line, column)) {
                            continue;
                        }
                        uses.push(Reference {
                            path: path.to_owned(),
                            line,
                            column,
                            end_line: line,
                            end_column: column + name.len() as u32,
                            kind: "mention".into(),
                            context: text,
                            is_test: in_test(line),
                            backend: "text",
                            symbol_id: None,
                            symbol_kind: None,
                        });
                    }
                    // A tag the file no longer has where the index says: the
                    // file changed since it was indexed.
                    changed = !tagged.is_empty() && !tags_still_there(&source, name, tagged);
                }
                Err(_) => changed = true,
            }
            uses.sort_by_key(|r| (r.line, r.column));
        }
        uses.retain(keep);
        (uses, changed)
    }

    /// The line `path`'s own tests start at, if it has any.
    fn test_line(&self, path: &str) -> Option<u32> {
        self.store
            .conn
            .prepare_cached("SELECT test_line FROM files WHERE path = ?1")
            .and_then(|mut s| s.query_row([path], |r| r.get::<_, Option<u32>>(0)))
            .ok()
            .flatten()
    }

    /// The whole set: definitions, then every file's uses.
    pub(crate) fn collect(&self, cancelled: &dyn Fn() -> bool) -> Result<Vec<Reference>, Stopped> {
        let mut all = self.definitions.clone();
        for (path, is_test) in &self.files {
            if cancelled() {
                return Err(Stopped);
            }
            all.extend(self.uses_in(path, *is_test).0);
        }
        Ok(all)
    }

    /// One line saying how the references were found, for the first
    /// sentence of an answer.
    pub(crate) fn precision(&self) -> String {
        match self.completeness {
            "exact" => "exact: every reference from the SCIP index".into(),
            "mixed" => {
                "partly exact: SCIP where its index covers the files, elsewhere matched by name"
                    .into()
            }
            _ => format!(
                "by name only, without a SCIP index: every {}symbol named {:?} counts",
                self.families
                    .iter()
                    .map(|f| format!("{f} "))
                    .collect::<String>(),
                self.target.name
            ),
        }
    }
}

/// The language families of `name`'s definitions (of the one `symbol`
/// pins, when it is a stableId), empty when the index defines no such
/// name: a use is looked for only in files of these families.
fn families_of(store: &Store, symbol: &str, name: &str) -> Result<BTreeSet<String>, RunError> {
    let failed =
        |e: rusqlite::Error| RunError::new(FailureCode::ToolError, store.error(e).to_string());
    let parts: Vec<&str> = symbol.rsplitn(3, ':').collect();
    let pinned = match parts.as_slice() {
        [_, line, path] if line.parse::<u32>().is_ok() => Some(*path),
        _ => None,
    };
    let mut statement = store
        .conn
        .prepare_cached(
            "SELECT DISTINCT f.language FROM symbols s JOIN files f ON f.id = s.file_id
             WHERE s.name = ?1 AND s.is_def = 1 AND (?2 IS NULL OR f.path = ?2)",
        )
        .map_err(failed)?;
    let mut families: BTreeSet<String> = statement
        .query_map(rusqlite::params![name, pinned], |r| r.get::<_, String>(0))
        .map_err(failed)?
        .map(|l| l.map(|l| Language::family_of(&l).to_owned()))
        .collect::<Result<_, _>>()
        .map_err(failed)?;
    if families.is_empty() && pinned.is_some() {
        families = families_of(store, name, name)?;
    }
    Ok(families)
}

fn scip_reference(hit: &ScipHit, lines: &[String], symbols: &HashMap<i64, String>) -> Reference {
    Reference {
        path: hit.path.clone(),
        line: hit.line,
        column: hit.column,
        end_line: hit.end_line,
        end_column: hit.end_column,
        kind: hit.kind().into(),
        context: lines
            .get(hit.line as usize - 1)
            .cloned()
            .unwrap_or_default(),
        is_test: is_test_path(&hit.path),
        backend: "scip",
        symbol_id: symbols.get(&hit.symbol_id).cloned(),
        symbol_kind: None,
    }
}

pub(crate) fn find_references(
    store: &Store,
    root: &Path,
    query: &ReferencesQuery,
    sink: &mut Sink,
) -> Result<Value, RunError> {
    let state = IndexState::of(store);
    let set = ReferenceSet::open(store, root, query)?;
    for warning in &set.warnings {
        sink.warning(warning.clone())?;
    }
    let scip_uses: usize = set.scip_uses.values().map(Vec::len).sum();
    sink.meta(Meta {
        // With text occurrences the total is known only once every file is read.
        total: (!(set.text && set.syntactic))
            .then_some((set.definitions.len() + set.indexed_references + scip_uses) as u64),
        backends: set.backends.iter().map(|b| (*b).to_owned()).collect(),
        info: json!({
            "symbol": query.symbol,
            "name": set.target.name,
            "scipSymbols": set.target.scip.len(),
            "definitions": set.definitions.len(),
            "indexedReferences": set.indexed_references + scip_uses,
            "files": set.files.len(),
            "completeness": set.completeness,
            "precision": set.precision(),
            "languages": set.families,
            "chunking": "grouped by file: definitions first, then each file's uses in line order",
        }),
        progress_unit: None,
    })?;
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut kinds: BTreeMap<String, u64> = BTreeMap::new();
    let mut per_symbol: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    let mut top: Vec<Value> = Vec::new();
    let mut changed = 0u64;
    let mut emit = |sink: &mut Sink, r: &Reference| -> Result<(), Stopped> {
        *counts.entry(r.path.clone()).or_default() += 1;
        *kinds.entry(r.kind.clone()).or_default() += 1;
        let item = r.json();
        if top.len() < TOP_ITEMS {
            top.push(item.clone());
        }
        sink.item(&r.path, item)
    };
    for definition in &set.definitions {
        emit(sink, definition)?;
    }
    for (path, is_test) in &set.files {
        if sink.cancelled() {
            return Err(Stopped.into());
        }
        let (uses, file_changed) = set.uses_in(path, *is_test);
        changed += u64::from(file_changed);
        for r in &uses {
            emit(sink, r)?;
        }
    }
    for r in set.definitions.iter() {
        if let Some(symbol) = &r.symbol_id {
            per_symbol.entry(symbol).or_default().0 += 1;
        }
    }
    for hits in set.scip_uses.values() {
        for hit in hits {
            if let Some(symbol) = set.symbol_ids.get(&hit.symbol_id) {
                per_symbol.entry(symbol).or_default().1 += 1;
            }
        }
    }
    if changed > 0 {
        sink.warning(format!(
            "{changed} files changed or vanished since they were indexed: their tagged uses may be off; run index_repo again"
        ))?;
    }
    let mut by_count: Vec<(&String, &u64)> = counts.iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let page = sink.page();
    let mut summary = paging(&page, &state.state_id);
    let symbols: Vec<Value> = set
        .target
        .scip
        .iter()
        .take(TOP_SYMBOLS)
        .map(|t| {
            let (definitions, references) = per_symbol
                .get(t.symbol.as_str())
                .copied()
                .unwrap_or_default();
            json!({
                "symbolId": t.symbol,
                "name": t.name,
                "kind": t.kind,
                "docs": t.docs,
                "definitions": definitions,
                "references": references,
            })
        })
        .collect();
    let extra = json!({
        "symbol": query.symbol,
        "totalCount": page.total,
        "definitions": kinds.get("definition").copied().unwrap_or(0),
        "fileCount": counts.len(),
        "byKind": kinds,
        "byFile": by_count.iter().take(TOP_FILES).map(|(file, count)| json!({"file": file, "count": count})).collect::<Vec<_>>(),
        "topItems": top,
        "symbols": symbols,
        "precision": set.precision(),
        "provenance": state.provenance(&set.backends, set.completeness, sink.elapsed_ms(), &sink.warnings),
    });
    merge(&mut summary, extra);
    Ok(summary)
}

/// Whether each tagged use is still at its place in `source`.
fn tags_still_there(source: &[u8], name: &str, tagged: &[SymbolRow]) -> bool {
    let lines: Vec<&[u8]> = source.split(|b| *b == b'\n').collect();
    tagged.iter().all(|r| {
        lines.get(r.line as usize - 1).is_some_and(|line| {
            let at = r.column as usize - 1;
            line.get(at..at + name.len()) == Some(name.as_bytes())
        })
    })
}

/// Whole-word occurrences of `word` in `source`: line, column (1-based,
/// bytes) and the line, trimmed and cut.
pub(crate) fn word_occurrences(source: &[u8], word: &[u8]) -> Vec<(u32, u32, String)> {
    let mut found = Vec::new();
    if word.is_empty() {
        return found;
    }
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    for (number, line) in source.split(|b| *b == b'\n').enumerate() {
        let mut from = 0;
        while let Some(at) = find(&line[from..], word) {
            let start = from + at;
            let end = start + word.len();
            let before = start == 0 || !is_word(line[start - 1]);
            let after = end == line.len() || !is_word(line[end]);
            if before && after {
                let text = String::from_utf8_lossy(line);
                let text = text.trim();
                let text = match text.char_indices().nth(200) {
                    Some((cut, _)) => format!("{}…", &text[..cut]),
                    None => text.to_owned(),
                };
                found.push((number as u32 + 1, start as u32 + 1, text));
            }
            from = start + 1;
        }
    }
    found
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    let first = needle[0];
    let mut from = 0;
    while from + needle.len() <= haystack.len() {
        let at = haystack[from..=haystack.len() - needle.len()]
            .iter()
            .position(|b| *b == first)?;
        let start = from + at;
        if &haystack[start..start + needle.len()] == needle {
            return Some(start);
        }
        from = start + 1;
    }
    None
}

/// Adds `extra`'s fields to `summary` (both objects).
pub(crate) fn merge(summary: &mut Value, extra: Value) {
    if let (Some(summary), Value::Object(extra)) = (summary.as_object_mut(), extra) {
        summary.extend(extra);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_words_only() {
        let found = word_occurrences(b"spawn(spawner);\n  x.spawn_blocking(); spawn\n", b"spawn");
        let at: Vec<(u32, u32)> = found.iter().map(|(l, c, _)| (*l, *c)).collect();
        assert_eq!(at, [(1, 1), (2, 23)]);
        assert_eq!(found[1].2, "x.spawn_blocking(); spawn");
    }
}
