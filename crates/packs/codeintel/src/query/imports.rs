//! Imports resolved to files: which file a Rust `use`, a Python
//! `import`/`from` or a JavaScript/TypeScript `import`/`require` brings
//! names from. What `get_architecture` and `explore` draw file edges from,
//! instead of matching bare names.
//!
//! **Rust:** `crate::`, `self::`, `super::` and the names of the
//! repository's own crates (each `Cargo.toml`'s package, `-` as `_`) are
//! followed module by module (`a.rs` or `a/mod.rs`); a name a crate root
//! re-exports goes to the one file of that crate defining it. **Python:**
//! relative imports from the importer's package; absolute ones by the
//! module's dotted path, the file nearest the importer when several end so.
//! **JavaScript/TypeScript:** relative specifiers with the usual extensions
//! and `index` files; a bare one naming a package of the repository, to
//! its `index`. Whatever else (the standard library, registries) has no
//! file here and is counted as external.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use weir_core::RunError;

use crate::answer::Stopped;
use crate::query::graph::failed;
use crate::store::Store;

/// The file-level import graph.
#[derive(Debug, Default)]
pub(crate) struct ImportGraph {
    /// (importing file, imported file) → the names imported (`*` for a
    /// whole module), with how many import paths.
    pub(crate) edges: BTreeMap<(String, String), (u64, BTreeSet<String>)>,
    /// Import paths that named nothing in the repository.
    pub(crate) external: u64,
    /// Whether each file is a test (by path).
    pub(crate) is_test: HashMap<String, bool>,
}

/// What resolution needs to know about the repository.
struct Repo {
    files: HashSet<String>,
    /// Cargo packages: lib name → package directories.
    crates: HashMap<String, Vec<String>>,
    /// Cargo package directories, longest first.
    crate_dirs: Vec<String>,
    /// npm packages: name → directory.
    npm: HashMap<String, String>,
    /// Python modules: every dotted suffix of each file's module path.
    python: HashMap<String, Vec<String>>,
}

/// Resolves every import of the index.
pub(crate) fn import_graph(
    store: &Store,
    cancelled: &dyn Fn() -> bool,
) -> Result<ImportGraph, RunError> {
    let fail = failed(store);
    let mut graph = ImportGraph::default();
    let mut languages: HashMap<String, String> = HashMap::new();
    {
        let mut statement = store
            .conn
            .prepare("SELECT path, language, is_test FROM files")
            .map_err(&fail)?;
        let rows = statement
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, bool>(2)?,
                ))
            })
            .map_err(&fail)?;
        for row in rows {
            let (path, language, is_test) = row.map_err(&fail)?;
            graph.is_test.insert(path.clone(), is_test);
            languages.insert(path, language);
        }
    }
    let mut repo = Repo {
        files: languages.keys().cloned().collect(),
        crates: HashMap::new(),
        crate_dirs: Vec::new(),
        npm: HashMap::new(),
        python: HashMap::new(),
    };
    {
        let mut statement = store
            .conn
            .prepare("SELECT ecosystem, name, dir FROM packages")
            .map_err(&fail)?;
        let rows = statement
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })
            .map_err(&fail)?;
        for row in rows {
            let (ecosystem, name, dir) = row.map_err(&fail)?;
            match ecosystem.as_str() {
                "cargo" => {
                    repo.crates
                        .entry(name.replace('-', "_"))
                        .or_default()
                        .push(dir.clone());
                    repo.crate_dirs.push(dir);
                }
                "npm" => {
                    repo.npm.insert(name, dir);
                }
                _ => {}
            }
        }
    }
    repo.crate_dirs.sort_by_key(|d| std::cmp::Reverse(d.len()));
    for (path, language) in &languages {
        if language == "python" {
            for module in python_modules(path) {
                repo.python.entry(module).or_default().push(path.clone());
            }
        }
    }
    let mut definitions = DefinitionCache::default();
    let mut statement = store
        .conn
        .prepare("SELECT f.path, f.language, i.text FROM imports i JOIN files f ON f.id = i.file_id ORDER BY f.path, i.line")
        .map_err(&fail)?;
    let mut rows = statement.query([]).map_err(&fail)?;
    let mut n = 0u64;
    while let Some(row) = rows.next().map_err(&fail)? {
        n += 1;
        if n.is_multiple_of(1_000) && cancelled() {
            return Err(Stopped.into());
        }
        let path: String = row.get(0).map_err(&fail)?;
        let language: String = row.get(1).map_err(&fail)?;
        let text: String = row.get(2).map_err(&fail)?;
        let targets = match language.as_str() {
            "rust" => rust(&repo, store, &mut definitions, &path, &text),
            "python" => python(&repo, &path, &text),
            "javascript" | "typescript" | "tsx" => js(&repo, &path, &text),
            _ => Vec::new(),
        };
        if targets.is_empty() {
            graph.external += 1;
        }
        for (target, name) in targets {
            if target == path {
                continue;
            }
            let edge = graph.edges.entry((path.clone(), target)).or_default();
            edge.0 += 1;
            edge.1.insert(name);
        }
    }
    Ok(graph)
}

/// The files defining a Rust name, cached.
#[derive(Default)]
struct DefinitionCache(HashMap<String, Vec<String>>);

impl DefinitionCache {
    fn files(&mut self, store: &Store, name: &str) -> &[String] {
        self.0.entry(name.to_owned()).or_insert_with(|| {
            store
                .conn
                .prepare_cached(
                    "SELECT DISTINCT f.path FROM symbols s JOIN files f ON f.id = s.file_id
                     WHERE s.name = ?1 AND s.is_def = 1 AND f.language = 'rust'",
                )
                .and_then(|mut s| {
                    s.query_map([name], |r| r.get::<_, String>(0))?
                        .collect::<Result<Vec<_>, _>>()
                })
                .unwrap_or_default()
        })
    }
}

fn parent(dir: &str) -> Option<&str> {
    match dir {
        "." | "" => None,
        dir => Some(dir.rsplit_once('/').map_or(".", |(p, _)| p)),
    }
}

fn child(dir: &str, name: &str) -> String {
    if dir == "." || dir.is_empty() {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}

/// Every path a Rust `use` declaration names, as segments.
pub(crate) fn use_paths(text: &str) -> Vec<Vec<String>> {
    let text: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join(" ");
    // A `use` declaration, or a path written out in the code
    // (`weir_core::RunId`), which names no `use`.
    let tree = match text.find("use ") {
        Some(at) => &text[at + 4..],
        None => text.as_str(),
    };
    let tree = tree.trim().trim_end_matches(';').trim();
    let mut out = Vec::new();
    expand(Vec::new(), tree, &mut out);
    out
}

fn expand(prefix: Vec<String>, tree: &str, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim().trim_start_matches("::");
    if let Some(open) = tree.find('{') {
        let head: Vec<String> = segments(tree[..open].trim_end_matches(':'));
        let inner = tree[open + 1..].trim_end().trim_end_matches('}');
        let mut base = prefix;
        base.extend(head);
        for part in split_top(inner) {
            match part.trim() {
                "" => {}
                "self" => out.push(base.clone()),
                part => expand(base.clone(), part, out),
            }
        }
        return;
    }
    let tree = tree.split(" as ").next().unwrap_or_default();
    let mut path = prefix;
    path.extend(segments(tree));
    if !path.is_empty() {
        out.push(path);
    }
}

fn segments(path: &str) -> Vec<String> {
    path.split("::")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `a, b::{c, d}, e` split at the commas outside braces.
fn split_top(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (at, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// The directory a Rust file's child modules live in.
fn children_dir(path: &str, is_root: bool) -> String {
    let (dir, name) = path.rsplit_once('/').unwrap_or((".", path));
    if is_root || matches!(name, "mod.rs" | "lib.rs" | "main.rs") {
        dir.to_owned()
    } else {
        child(dir, name.trim_end_matches(".rs"))
    }
}

/// The crate root directory of a Rust file: its package's `src`, or (a
/// test, an example, a build script) its own directory.
fn crate_root(repo: &Repo, path: &str) -> Option<(String, bool)> {
    let package = repo
        .crate_dirs
        .iter()
        .find(|dir| dir.as_str() == "." || path.starts_with(&format!("{dir}/")))?;
    let src = child(package, "src");
    if path.starts_with(&format!("{src}/")) && !path.starts_with(&format!("{src}/bin/")) {
        Some((src, false))
    } else {
        let dir = path.rsplit_once('/').map_or(".", |(d, _)| d);
        Some((dir.to_owned(), true))
    }
}

/// Follows `segments` from the module whose children are in `dir` (file
/// `file`): the deepest module file reached, and the segments left.
fn follow<'s>(
    repo: &Repo,
    file: String,
    mut dir: String,
    segments: &'s [String],
) -> (String, &'s [String]) {
    let mut current = file;
    let mut used = 0;
    for segment in segments {
        let flat = child(&dir, &format!("{segment}.rs"));
        let nested = child(&child(&dir, segment), "mod.rs");
        if repo.files.contains(&flat) {
            current = flat;
        } else if repo.files.contains(&nested) {
            current = nested;
        } else {
            break;
        }
        dir = child(&dir, segment);
        used += 1;
    }
    (current, &segments[used..])
}

fn root_file(repo: &Repo, dir: &str) -> Option<String> {
    ["lib.rs", "main.rs"]
        .iter()
        .map(|name| child(dir, name))
        .find(|file| repo.files.contains(file))
}

fn rust(
    repo: &Repo,
    store: &Store,
    definitions: &mut DefinitionCache,
    path: &str,
    text: &str,
) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let Some((root_dir, root_is_file)) = crate_root(repo, path) else {
        return found;
    };
    let own_root = if root_is_file {
        Some(path.to_owned())
    } else {
        root_file(repo, &root_dir)
    };
    for segments in use_paths(text) {
        let Some(first) = segments.first() else {
            continue;
        };
        let mut dir = children_dir(path, root_is_file);
        let mut rest = &segments[1..];
        let start = match first.as_str() {
            "crate" => own_root.clone().map(|f| (f, root_dir.clone())),
            "self" => Some((path.to_owned(), dir.clone())),
            "super" => {
                let mut up = parent(&dir).map(str::to_owned);
                while rest.first().is_some_and(|s| s == "super") {
                    up = up.as_deref().and_then(parent).map(str::to_owned);
                    rest = &rest[1..];
                }
                up.map(|up| {
                    let file = root_file(repo, &up)
                        .or_else(|| Some(child(&up, "mod.rs")).filter(|f| repo.files.contains(f)))
                        .or_else(|| Some(format!("{up}.rs")).filter(|f| repo.files.contains(f)))
                        .unwrap_or_else(|| path.to_owned());
                    (file, up)
                })
            }
            name => crate_by_name(repo, path, name).and_then(|src| {
                dir = src.clone();
                root_file(repo, &src).map(|f| (f, src))
            }),
        };
        let Some((file, from)) = start else {
            continue;
        };
        let (mut target, left) = follow(repo, file, from, rest);
        let name = left
            .first()
            .or(segments.last())
            .cloned()
            .unwrap_or_default();
        // A name a crate root re-exports: the one file of the crate that
        // defines it.
        if let Some(item) = left.first()
            && (target.ends_with("/lib.rs") || target.ends_with("/main.rs"))
        {
            let crate_dir = target.rsplit_once('/').map_or(".", |(d, _)| d).to_owned();
            let defining: Vec<&String> = definitions
                .files(store, item)
                .iter()
                .filter(|f| f.starts_with(&format!("{crate_dir}/")))
                .collect();
            if let [only] = defining.as_slice() {
                target = (*only).clone();
            }
        }
        found.push((target, if name == "*" { "*".into() } else { name }));
    }
    found
}

/// The `src` directory of the repository's crate named `name` as a path
/// starts (`weir_runtime`), preferring the one nearest `path`.
fn crate_by_name(repo: &Repo, path: &str, name: &str) -> Option<String> {
    let dirs = repo.crates.get(name)?;
    let nearest = dirs.iter().max_by_key(|dir| common_prefix(dir, path))?;
    Some(child(nearest, "src"))
}

fn common_prefix(a: &str, b: &str) -> usize {
    a.split('/')
        .zip(b.split('/'))
        .take_while(|(x, y)| x == y)
        .count()
}

/// Every dotted module name a Python file answers to (`a/b/c.py`: `c`,
/// `b.c`, `a.b.c`; a package's `__init__.py`: its directory's).
fn python_modules(path: &str) -> Vec<String> {
    let stem = path.trim_end_matches(".pyi").trim_end_matches(".py");
    let mut parts: Vec<&str> = stem.split('/').collect();
    if parts.last() == Some(&"__init__") {
        parts.pop();
    }
    (0..parts.len())
        .map(|start| parts[start..].join("."))
        .collect()
}

fn python(repo: &Repo, path: &str, text: &str) -> Vec<(String, String)> {
    let text = text.replace(['(', ')', '\\', '\n'], " ");
    let text = text.trim();
    let mut found = Vec::new();
    let mut add = |module: &str, relative_to: Option<&str>, name: &str| -> bool {
        let target = match relative_to {
            Some(base) => {
                let rel = module.replace('.', "/");
                let stem = if rel.is_empty() {
                    base.to_owned()
                } else {
                    child(base, &rel)
                };
                [
                    format!("{stem}.py"),
                    format!("{stem}.pyi"),
                    child(&stem, "__init__.py"),
                ]
                .into_iter()
                .find(|f| repo.files.contains(f))
            }
            None => repo.python.get(module).and_then(|files| {
                files
                    .iter()
                    .max_by_key(|f| (common_prefix(f, path), std::cmp::Reverse(f.len())))
                    .cloned()
            }),
        };
        match target {
            Some(target) => {
                found.push((target, name.to_owned()));
                true
            }
            None => false,
        }
    };
    if let Some(rest) = text.strip_prefix("from ") {
        let Some((module, names)) = rest.split_once(" import ") else {
            return found;
        };
        let module = module.trim();
        let level = module.len() - module.trim_start_matches('.').len();
        let module = module.trim_start_matches('.');
        let base = (level > 0).then(|| {
            let mut dir = path.rsplit_once('/').map_or(".", |(d, _)| d).to_owned();
            for _ in 1..level {
                dir = parent(&dir).unwrap_or(".").to_owned();
            }
            dir
        });
        for name in names.split(',') {
            let name = name.split(" as ").next().unwrap_or_default().trim();
            if name.is_empty() {
                continue;
            }
            let submodule = if module.is_empty() {
                name.to_owned()
            } else {
                format!("{module}.{name}")
            };
            if name != "*" && add(&submodule, base.as_deref(), "*") {
                continue;
            }
            add(module, base.as_deref(), name);
        }
    } else if let Some(rest) = text.strip_prefix("import ") {
        for module in rest.split(',') {
            let module = module.split(" as ").next().unwrap_or_default().trim();
            if !module.is_empty() {
                add(module, None, "*");
            }
        }
    }
    found
}

const JS_EXTENSIONS: [&str; 8] = ["", ".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".d.ts"];

fn js(repo: &Repo, path: &str, spec: &str) -> Vec<(String, String)> {
    let dir = path.rsplit_once('/').map_or(".", |(d, _)| d);
    let base = if spec.starts_with('.') {
        let mut parts: Vec<&str> = if dir == "." {
            Vec::new()
        } else {
            dir.split('/').collect()
        };
        for part in spec.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    if parts.pop().is_none() {
                        return Vec::new();
                    }
                }
                part => parts.push(part),
            }
        }
        parts.join("/")
    } else {
        let mut segments = spec.split('/');
        let first = segments.next().unwrap_or_default();
        let name = if first.starts_with('@') {
            format!("{first}/{}", segments.next().unwrap_or_default())
        } else {
            first.to_owned()
        };
        let Some(package) = repo.npm.get(&name) else {
            return Vec::new();
        };
        let rest: Vec<&str> = segments.collect();
        if rest.is_empty() {
            package.clone()
        } else {
            child(package, &rest.join("/"))
        }
    };
    let stripped = ["js", "jsx", "mjs", "cjs"]
        .iter()
        .find_map(|ext| base.strip_suffix(&format!(".{ext}")))
        .unwrap_or(&base);
    let candidates = JS_EXTENSIONS
        .iter()
        .map(|ext| format!("{base}{ext}"))
        .chain(
            JS_EXTENSIONS[1..]
                .iter()
                .map(|ext| format!("{stripped}{ext}")),
        )
        .chain(
            JS_EXTENSIONS[1..]
                .iter()
                .map(|ext| format!("{base}/index{ext}")),
        )
        .chain(
            JS_EXTENSIONS[1..]
                .iter()
                .map(|ext| format!("{base}/src/index{ext}")),
        );
    for candidate in candidates {
        if repo.files.contains(&candidate) {
            return vec![(candidate, "*".into())];
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn use_trees_expand_to_paths() {
        let paths = use_paths(
            "pub(crate) use crate::query::{graph::{self, Definition}, references as r, *};",
        );
        let joined: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
        assert_eq!(
            joined,
            [
                "crate::query::graph",
                "crate::query::graph::Definition",
                "crate::query::references",
                "crate::query::*"
            ]
        );
        assert_eq!(use_paths("use ::std::io;")[0].join("::"), "std::io");
        assert_eq!(
            use_paths("weir_core::RunId")[0].join("::"),
            "weir_core::RunId"
        );
    }

    #[test]
    fn python_modules_of_a_file() {
        assert_eq!(
            python_modules("Lib/urllib/parse.py"),
            ["Lib.urllib.parse", "urllib.parse", "parse"]
        );
        assert_eq!(python_modules("pkg/__init__.py"), ["pkg"]);
    }
}
