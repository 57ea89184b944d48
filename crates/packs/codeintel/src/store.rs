//! The index of one repository: a SQLite file (WAL, so queries read while
//! an index run writes) with FTS5 for names, docs and each file's words.
//! SQL stays in this module and the query modules.

use std::collections::HashMap;
use std::path::Path;

use rusqlite::{Connection, OpenFlags, params};

use crate::extract::Extracted;
use crate::history::History;
use crate::manifest::Packages;
use crate::scip::ScipIndex;

/// Bumped when the schema changes: an index of another version is rebuilt
/// (it is a cache of the repository, never the only copy of anything).
/// 3: SCIP documents naming files outside the repository are no longer
/// kept, and an index of version 2 may hold some.
/// 4: Rust type uses, paths and `use` items are tagged, each file's
/// imports and the line its own tests start at are kept, and the
/// manifests' packages and their dependencies between each other.
const SCHEMA_VERSION: &str = "4";

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files(
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    language TEXT NOT NULL,
    mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL,
    hash TEXT NOT NULL,
    is_test INTEGER NOT NULL,
    has_error INTEGER NOT NULL,
    test_line INTEGER
);
CREATE TABLE IF NOT EXISTS imports(
    file_id INTEGER NOT NULL,
    line INTEGER NOT NULL,
    text TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS imports_by_file ON imports(file_id);
CREATE TABLE IF NOT EXISTS packages(
    manifest TEXT PRIMARY KEY,
    ecosystem TEXT NOT NULL,
    name TEXT NOT NULL,
    dir TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS package_deps(
    manifest TEXT NOT NULL,
    target TEXT NOT NULL,
    kind TEXT NOT NULL,
    PRIMARY KEY (manifest, target, kind)
);
CREATE TABLE IF NOT EXISTS symbols(
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL,
    name TEXT NOT NULL,
    name_lower TEXT NOT NULL,
    kind TEXT NOT NULL,
    is_def INTEGER NOT NULL,
    line INTEGER NOT NULL,
    col INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    end_col INTEGER NOT NULL,
    body_end_line INTEGER NOT NULL,
    context TEXT NOT NULL,
    docs TEXT
);
CREATE INDEX IF NOT EXISTS symbols_by_name ON symbols(name, is_def);
CREATE INDEX IF NOT EXISTS defs_by_lower ON symbols(name_lower) WHERE is_def = 1;
CREATE INDEX IF NOT EXISTS symbols_by_file ON symbols(file_id, line);
CREATE VIRTUAL TABLE IF NOT EXISTS defs_fts USING fts5(
    words, docs, content='', contentless_delete=1
);
CREATE TABLE IF NOT EXISTS scip_documents(path TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS scip_symbols(
    id INTEGER PRIMARY KEY,
    symbol TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    kind TEXT,
    docs TEXT
);
CREATE INDEX IF NOT EXISTS scip_symbols_by_name ON scip_symbols(name);
CREATE TABLE IF NOT EXISTS scip_occurrences(
    symbol_id INTEGER NOT NULL,
    path TEXT NOT NULL,
    line INTEGER NOT NULL,
    col INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    end_col INTEGER NOT NULL,
    roles INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS scip_occurrences_by_symbol ON scip_occurrences(symbol_id, path, line, col);
CREATE INDEX IF NOT EXISTS scip_occurrences_by_place ON scip_occurrences(path, line);
CREATE TABLE IF NOT EXISTS git_churn(path TEXT PRIMARY KEY, commits INTEGER NOT NULL, last_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS git_cochange(
    a TEXT NOT NULL, b TEXT NOT NULL, commits INTEGER NOT NULL, PRIMARY KEY (a, b)
);
CREATE VIRTUAL TABLE IF NOT EXISTS file_words USING fts5(
    words, content='', contentless_delete=1, detail=none,
    tokenize=\"unicode61 tokenchars '_'\"
);
";

/// Why the index could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite said no.
    #[error("the code index {path}: {source}")]
    Sqlite {
        /// The index file.
        path: String,
        /// What SQLite said.
        source: rusqlite::Error,
    },
}

/// A file the index already holds.
#[derive(Clone, Debug)]
pub(crate) struct KnownFile {
    pub(crate) id: i64,
    pub(crate) mtime_ns: i64,
    pub(crate) size: i64,
    pub(crate) hash: String,
}

/// What a file is, for `put_file`.
pub(crate) struct FileRow<'a> {
    pub(crate) path: &'a str,
    pub(crate) language: &'a str,
    pub(crate) mtime_ns: i64,
    pub(crate) size: i64,
    pub(crate) hash: &'a str,
    pub(crate) is_test: bool,
}

/// An open index.
pub(crate) struct Store {
    pub(crate) conn: Connection,
    path: String,
}

impl Store {
    /// Opens (or creates) the index at `path` for writing.
    pub(crate) fn open(path: &Path) -> Result<Store, StoreError> {
        let name = path.display().to_string();
        let fail = |source| StoreError::Sqlite {
            path: name.clone(),
            source,
        };
        let conn = Connection::open(path).map_err(fail)?;
        // Two servers (or `weir index` and a server) may index one
        // repository at once: the second waits for the first's commit.
        conn.busy_timeout(std::time::Duration::from_secs(30))
            .map_err(fail)?;
        conn.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;")
            .map_err(fail)?;
        let version: Option<String> = conn
            .query_row("SELECT value FROM meta WHERE key = 'schema'", [], |row| {
                row.get(0)
            })
            .ok();
        if version.as_deref().is_some_and(|v| v != SCHEMA_VERSION) {
            conn.execute_batch(
                "DROP TABLE IF EXISTS meta; DROP TABLE IF EXISTS files; DROP TABLE IF EXISTS symbols;
                 DROP TABLE IF EXISTS defs_fts; DROP TABLE IF EXISTS file_words;
                 DROP TABLE IF EXISTS scip_documents; DROP TABLE IF EXISTS scip_symbols;
                 DROP TABLE IF EXISTS scip_occurrences; DROP TABLE IF EXISTS git_churn;
                 DROP TABLE IF EXISTS git_cochange; DROP TABLE IF EXISTS imports;
                 DROP TABLE IF EXISTS packages; DROP TABLE IF EXISTS package_deps;",
            )
            .map_err(fail)?;
        }
        conn.execute_batch(SCHEMA).map_err(fail)?;
        conn.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema', ?1)",
            [SCHEMA_VERSION],
        )
        .map_err(fail)?;
        Ok(Store { conn, path: name })
    }

    /// Opens an existing index for reading only.
    pub(crate) fn open_read(path: &Path) -> Result<Store, StoreError> {
        let name = path.display().to_string();
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|source| StoreError::Sqlite {
            path: name.clone(),
            source,
        })?;
        Ok(Store { conn, path: name })
    }

    /// Maps a rusqlite error to this index's.
    pub(crate) fn error(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    pub(crate) fn known_files(&self) -> Result<HashMap<String, KnownFile>, StoreError> {
        let mut statement = self
            .conn
            .prepare("SELECT path, id, mtime_ns, size, hash FROM files")
            .map_err(|e| self.error(e))?;
        let rows = statement
            .query_map([], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    KnownFile {
                        id: row.get(1)?,
                        mtime_ns: row.get(2)?,
                        size: row.get(3)?,
                        hash: row.get(4)?,
                    },
                ))
            })
            .map_err(|e| self.error(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.error(e))
    }

    /// Forgets file `id` and everything found in it.
    pub(crate) fn remove_file(&self, id: i64) -> Result<(), StoreError> {
        self.conn
            .execute_batch(&format!(
                "DELETE FROM defs_fts WHERE rowid IN (SELECT id FROM symbols WHERE file_id = {id} AND is_def = 1);
                 DELETE FROM symbols WHERE file_id = {id};
                 DELETE FROM file_words WHERE rowid = {id};
                 DELETE FROM imports WHERE file_id = {id};
                 DELETE FROM files WHERE id = {id};"
            ))
            .map_err(|e| self.error(e))
    }

    /// The file is unchanged but for its time stamp.
    pub(crate) fn touch_file(&self, id: i64, mtime_ns: i64, size: i64) -> Result<(), StoreError> {
        self.conn
            .execute(
                "UPDATE files SET mtime_ns = ?2, size = ?3 WHERE id = ?1",
                params![id, mtime_ns, size],
            )
            .map(drop)
            .map_err(|e| self.error(e))
    }

    /// Adds a file and what was found in it.
    pub(crate) fn put_file(&self, file: &FileRow, found: &Extracted) -> Result<(), StoreError> {
        let fail = |e| self.error(e);
        self.conn
            .prepare_cached(
                "INSERT INTO files(path, language, mtime_ns, size, hash, is_test, has_error, test_line)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    file.path,
                    file.language,
                    file.mtime_ns,
                    file.size,
                    file.hash,
                    file.is_test,
                    found.has_error,
                    if file.is_test { Some(1) } else { found.test_line }
                ])
            })
            .map_err(fail)?;
        let file_id = self.conn.last_insert_rowid();
        let mut symbol = self
            .conn
            .prepare_cached(
                "INSERT INTO symbols(file_id, name, name_lower, kind, is_def, line, col, end_line, end_col, body_end_line, context, docs)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            )
            .map_err(fail)?;
        let mut fts = self
            .conn
            .prepare_cached("INSERT INTO defs_fts(rowid, words, docs) VALUES (?1, ?2, ?3)")
            .map_err(fail)?;
        for o in &found.occurrences {
            symbol
                .execute(params![
                    file_id,
                    o.name,
                    o.name.to_lowercase(),
                    o.kind,
                    o.is_def,
                    o.line,
                    o.column,
                    o.end_line,
                    o.end_column,
                    o.body_end_line,
                    o.context,
                    o.docs
                ])
                .map_err(fail)?;
            if o.is_def {
                let id = self.conn.last_insert_rowid();
                fts.execute(params![id, name_words(&o.name), o.docs])
                    .map_err(fail)?;
            }
        }
        let mut import = self
            .conn
            .prepare_cached("INSERT INTO imports(file_id, line, text) VALUES (?1, ?2, ?3)")
            .map_err(fail)?;
        for i in &found.imports {
            import
                .execute(params![file_id, i.line, i.text])
                .map_err(fail)?;
        }
        self.conn
            .prepare_cached("INSERT INTO file_words(rowid, words) VALUES (?1, ?2)")
            .and_then(|mut s| s.execute(params![file_id, found.words]))
            .map_err(fail)?;
        Ok(())
    }

    /// Replaces the SCIP part of the index with `index` (or drops it).
    pub(crate) fn replace_scip(&self, index: Option<&ScipIndex>) -> Result<(), StoreError> {
        let fail = |e| self.error(e);
        self.conn
            .execute_batch(
                "DELETE FROM scip_documents; DELETE FROM scip_symbols; DELETE FROM scip_occurrences;",
            )
            .map_err(fail)?;
        let Some(index) = index else { return Ok(()) };
        let mut document = self
            .conn
            .prepare_cached("INSERT OR IGNORE INTO scip_documents(path) VALUES (?1)")
            .map_err(fail)?;
        for path in &index.documents {
            document.execute([path]).map_err(fail)?;
        }
        let mut symbol = self
            .conn
            .prepare_cached(
                "INSERT INTO scip_symbols(id, symbol, name, kind, docs) VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .map_err(fail)?;
        for (id, s) in index.symbols.iter().enumerate() {
            symbol
                .execute(params![id as i64, s.key, s.name, s.kind, s.docs])
                .map_err(fail)?;
        }
        let mut occurrence = self
            .conn
            .prepare_cached(
                "INSERT INTO scip_occurrences(symbol_id, path, line, col, end_line, end_col, roles)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .map_err(fail)?;
        for o in &index.occurrences {
            occurrence
                .execute(params![
                    o.symbol as i64,
                    o.path,
                    o.line,
                    o.column,
                    o.end_line,
                    o.end_column,
                    o.roles
                ])
                .map_err(fail)?;
        }
        Ok(())
    }

    /// Replaces the packages the manifests declare and their dependencies
    /// on each other.
    pub(crate) fn replace_packages(&self, packages: &Packages) -> Result<(), StoreError> {
        let fail = |e| self.error(e);
        self.conn
            .execute_batch("DELETE FROM packages; DELETE FROM package_deps;")
            .map_err(fail)?;
        let mut package = self
            .conn
            .prepare_cached(
                "INSERT OR REPLACE INTO packages(manifest, ecosystem, name, dir) VALUES (?1, ?2, ?3, ?4)",
            )
            .map_err(fail)?;
        for p in &packages.packages {
            package
                .execute(params![p.manifest, p.ecosystem, p.name, p.dir])
                .map_err(fail)?;
        }
        let mut dependency = self
            .conn
            .prepare_cached(
                "INSERT OR IGNORE INTO package_deps(manifest, target, kind) VALUES (?1, ?2, ?3)",
            )
            .map_err(fail)?;
        for (from, to, kind) in &packages.edges {
            dependency.execute(params![from, to, kind]).map_err(fail)?;
        }
        Ok(())
    }

    /// Replaces the git history part of the index.
    pub(crate) fn replace_history(&self, history: &History) -> Result<(), StoreError> {
        let fail = |e| self.error(e);
        self.conn
            .execute_batch("DELETE FROM git_churn; DELETE FROM git_cochange;")
            .map_err(fail)?;
        let mut churn = self
            .conn
            .prepare_cached("INSERT INTO git_churn(path, commits, last_ms) VALUES (?1, ?2, ?3)")
            .map_err(fail)?;
        for (path, file) in &history.churn {
            churn
                .execute(params![path, file.commits as i64, file.last_ms])
                .map_err(fail)?;
        }
        let mut pair = self
            .conn
            .prepare_cached("INSERT INTO git_cochange(a, b, commits) VALUES (?1, ?2, ?3)")
            .map_err(fail)?;
        for ((a, b), commits) in &history.cochange {
            pair.execute(params![a, b, *commits as i64]).map_err(fail)?;
        }
        Ok(())
    }

    pub(crate) fn set_meta(&self, key: &str, value: &str) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)",
                [key, value],
            )
            .map(drop)
            .map_err(|e| self.error(e))
    }

    pub(crate) fn meta(&self, key: &str) -> Option<String> {
        self.conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |row| {
                row.get(0)
            })
            .ok()
    }
}

/// The words of a name for full-text search: the name, and its parts split
/// at `_` and at case changes (`JoinHandle` → `JoinHandle Join Handle`).
pub(crate) fn name_words(name: &str) -> String {
    let mut words = vec![name.to_owned()];
    let mut current = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if c == '_' || c == '$' {
            words.push(std::mem::take(&mut current));
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower {
            words.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        current.push(c);
    }
    words.push(current);
    words.retain(|w| !w.is_empty());
    words.dedup();
    if words.len() == 2 {
        words.pop(); // one part: the name itself
    }
    words.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_split_into_words() {
        assert_eq!(name_words("JoinHandle"), "JoinHandle Join Handle");
        assert_eq!(
            name_words("spawn_blocking"),
            "spawn_blocking spawn blocking"
        );
        assert_eq!(name_words("spawn"), "spawn");
        assert_eq!(name_words("HTTPServer"), "HTTPServer");
    }

    #[test]
    fn the_bundled_sqlite_has_fts5() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("index.sqlite")).unwrap();
        store
            .conn
            .execute(
                "INSERT INTO file_words(rowid, words) VALUES (7, 'spawn_blocking Foo')",
                [],
            )
            .unwrap();
        let hit: i64 = store
            .conn
            .query_row(
                "SELECT rowid FROM file_words WHERE file_words MATCH '\"spawn_blocking\"'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(hit, 7);
    }
}
