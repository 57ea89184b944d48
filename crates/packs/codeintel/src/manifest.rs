//! The packages a repository's manifests declare (`Cargo.toml`,
//! `package.json`, `pyproject.toml`, `go.mod`) and their dependencies on
//! each other: what `get_architecture` draws package edges from, as the
//! build tools see them rather than guessed from names.
//!
//! An edge joins two packages of the repository only where the build tool
//! would: Cargo by `path` (directly or through `workspace = true`: a
//! dependency without a path comes from a registry, whatever its name);
//! npm by a `file:`/`link:` path or, as workspaces link them, by the name
//! of exactly one package here; Python by the normalised name of exactly
//! one project here; Go by a `replace … => ./dir` or the module path of one
//! module here. Edge kinds keep the tool's word: Cargo's `normal`, `dev`
//! and `build`; npm's `normal`, `dev`, `peer`, `optional`; Python's
//! `normal`, `optional`, `dev`; Go's `normal`.

use std::collections::{BTreeSet, HashMap};

use toml_edit::{Document, Item, TableLike};

/// The file names read as manifests.
pub(crate) const NAMES: [&str; 4] = ["Cargo.toml", "package.json", "pyproject.toml", "go.mod"];

/// Whether `path`'s file name is a manifest's.
pub(crate) fn is_manifest(path: &str) -> bool {
    NAMES.contains(&path.rsplit('/').next().unwrap_or_default())
}

/// A package a manifest declares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Package {
    /// The manifest's path, relative to the root: the package's id.
    pub(crate) manifest: String,
    pub(crate) ecosystem: &'static str,
    pub(crate) name: String,
    /// Its directory (`.` at the root).
    pub(crate) dir: String,
}

/// The packages and the edges between them (`from` and `to` are
/// manifests), with what could not be read.
#[derive(Debug, Default)]
pub(crate) struct Packages {
    pub(crate) packages: Vec<Package>,
    pub(crate) edges: Vec<(String, String, String)>,
    pub(crate) warnings: Vec<String>,
}

/// A dependency as a manifest states it.
#[derive(Debug)]
struct Dependency {
    /// The depended-on package's name (Cargo's `package =` honoured).
    name: String,
    /// The key in the manifest (Cargo's name for `workspace = true`).
    key: String,
    kind: &'static str,
    /// A directory relative to the root, when the manifest names one.
    path: Option<String>,
    /// Cargo's `workspace = true`: the path is the workspace's.
    from_workspace: bool,
}

/// A manifest, read.
#[derive(Debug, Default)]
struct Manifest {
    path: String,
    dir: String,
    ecosystem: &'static str,
    name: Option<String>,
    dependencies: Vec<Dependency>,
    /// Cargo's `[workspace.dependencies]`: key → (package name, path).
    workspace: Option<HashMap<String, (String, Option<String>)>>,
    /// Go's `replace M => ./dir`: module → directory.
    replaces: HashMap<String, String>,
}

/// Reads the manifests (`(path, content)`, paths relative to the root)
/// and resolves their dependencies between each other.
pub(crate) fn resolve(files: &[(String, Vec<u8>)]) -> Packages {
    let mut out = Packages::default();
    let mut manifests = Vec::new();
    for (path, content) in files {
        let text = String::from_utf8_lossy(content);
        match read(path, &text) {
            Ok(manifest) => manifests.push(manifest),
            Err(why) => out.warnings.push(format!("{path}: {why}")),
        }
    }
    for m in &manifests {
        if let Some(name) = &m.name {
            out.packages.push(Package {
                manifest: m.path.clone(),
                ecosystem: m.ecosystem,
                name: name.clone(),
                dir: m.dir.clone(),
            });
        }
    }
    let by_dir: HashMap<(&str, &str), &str> = out
        .packages
        .iter()
        .map(|p| ((p.ecosystem, p.dir.as_str()), p.manifest.as_str()))
        .collect();
    let mut by_name: HashMap<(&str, String), Vec<&str>> = HashMap::new();
    for p in &out.packages {
        by_name
            .entry((p.ecosystem, normal_name(p.ecosystem, &p.name)))
            .or_default()
            .push(&p.manifest);
    }
    let mut edges = BTreeSet::new();
    for m in manifests.iter().filter(|m| m.name.is_some()) {
        for d in &m.dependencies {
            let path = match (&d.path, d.from_workspace) {
                (Some(path), _) => Some(path.clone()),
                (None, true) => workspace_path(&manifests, m, &d.key),
                (None, false) if m.ecosystem == "go" => m.replaces.get(&d.name).cloned(),
                (None, false) => None,
            };
            let target = match path {
                Some(dir) => by_dir.get(&(m.ecosystem, dir.as_str())).copied(),
                // Cargo takes a dependency without a path from a registry.
                None if m.ecosystem == "cargo" => None,
                None => match by_name
                    .get(&(m.ecosystem, normal_name(m.ecosystem, &d.name)))
                    .map(Vec::as_slice)
                {
                    Some([only]) => Some(*only),
                    _ => None,
                },
            };
            // A package may depend on itself (Cargo: a dev-dependency on
            // its own path, for features its tests need): kept, as the
            // build tool lists it.
            if let Some(target) = target {
                edges.insert((m.path.clone(), target.to_owned(), d.kind.to_owned()));
            }
        }
    }
    out.edges = edges.into_iter().collect();
    out
}

/// The directory the workspace above `member` gives dependency `key`.
fn workspace_path(manifests: &[Manifest], member: &Manifest, key: &str) -> Option<String> {
    manifests
        .iter()
        .filter(|w| {
            w.ecosystem == "cargo" && w.workspace.is_some() && is_within(&member.dir, &w.dir)
        })
        .max_by_key(|w| w.dir.len())
        .and_then(|w| w.workspace.as_ref()?.get(key)?.1.clone())
}

/// Whether `dir` is `parent` or under it.
fn is_within(dir: &str, parent: &str) -> bool {
    parent == "." || dir == parent || dir.starts_with(&format!("{parent}/"))
}

/// A name as the ecosystem compares names: Python's PEP 503 form, the
/// others as written.
fn normal_name(ecosystem: &str, name: &str) -> String {
    if ecosystem == "python" {
        name.to_lowercase().replace(['_', '.'], "-")
    } else {
        name.to_owned()
    }
}

fn read(path: &str, text: &str) -> Result<Manifest, String> {
    let dir = path.rsplit_once('/').map_or(".", |(dir, _)| dir).to_owned();
    let mut manifest = Manifest {
        path: path.to_owned(),
        dir,
        ..Manifest::default()
    };
    match path.rsplit('/').next().unwrap_or_default() {
        "Cargo.toml" => cargo(&mut manifest, text)?,
        "package.json" => npm(&mut manifest, text)?,
        "pyproject.toml" => python(&mut manifest, text)?,
        "go.mod" => go(&mut manifest, text),
        other => return Err(format!("{other} is not a manifest")),
    }
    Ok(manifest)
}

/// `rel` (a manifest's relative path) from `dir`, as a path relative to
/// the root; `None` when it leaves the root.
fn join(dir: &str, rel: &str) -> Option<String> {
    let mut parts: Vec<&str> = if dir == "." {
        Vec::new()
    } else {
        dir.split('/').collect()
    };
    for part in rel.trim_end_matches('/').split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            part => parts.push(part),
        }
    }
    Some(if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    })
}

fn cargo(m: &mut Manifest, text: &str) -> Result<(), String> {
    m.ecosystem = "cargo";
    let doc = Document::parse(text).map_err(|e| e.to_string())?;
    let root = doc.as_table();
    m.name = root
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(Item::as_str)
        .map(str::to_owned);
    let tables = [
        ("dependencies", "normal"),
        ("dev-dependencies", "dev"),
        ("dev_dependencies", "dev"),
        ("build-dependencies", "build"),
        ("build_dependencies", "build"),
    ];
    let mut sections: Vec<(&dyn TableLike, &'static str)> = Vec::new();
    for (table, kind) in tables {
        if let Some(t) = root.get(table).and_then(Item::as_table_like) {
            sections.push((t, kind));
        }
    }
    // `[target.'cfg(unix)'.dependencies]` and the like.
    if let Some(targets) = root.get("target").and_then(Item::as_table_like) {
        for (_, target) in targets.iter() {
            for (table, kind) in tables {
                if let Some(t) = target.get(table).and_then(Item::as_table_like) {
                    sections.push((t, kind));
                }
            }
        }
    }
    for (table, kind) in sections {
        for (key, value) in table.iter() {
            let spec = value.as_table_like();
            let field = |name: &str| spec.and_then(|s| s.get(name));
            m.dependencies.push(Dependency {
                name: field("package")
                    .and_then(Item::as_str)
                    .unwrap_or(key)
                    .to_owned(),
                key: key.to_owned(),
                kind,
                path: field("path")
                    .and_then(Item::as_str)
                    .and_then(|p| join(&m.dir, p)),
                from_workspace: field("workspace").and_then(Item::as_bool) == Some(true),
            });
        }
    }
    if let Some(workspace) = root.get("workspace").and_then(Item::as_table_like) {
        let mut deps = HashMap::new();
        if let Some(table) = workspace.get("dependencies").and_then(Item::as_table_like) {
            for (key, value) in table.iter() {
                let spec = value.as_table_like();
                let field = |name: &str| spec.and_then(|s| s.get(name)).and_then(Item::as_str);
                deps.insert(
                    key.to_owned(),
                    (
                        field("package").unwrap_or(key).to_owned(),
                        field("path").and_then(|p| join(&m.dir, p)),
                    ),
                );
            }
        }
        m.workspace = Some(deps);
    }
    Ok(())
}

fn npm(m: &mut Manifest, text: &str) -> Result<(), String> {
    m.ecosystem = "npm";
    let json: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    m.name = json["name"].as_str().map(str::to_owned);
    for (field, kind) in [
        ("dependencies", "normal"),
        ("devDependencies", "dev"),
        ("peerDependencies", "peer"),
        ("optionalDependencies", "optional"),
    ] {
        let Some(deps) = json[field].as_object() else {
            continue;
        };
        for (name, spec) in deps {
            let spec = spec.as_str().unwrap_or_default();
            let path = ["file:", "link:"]
                .iter()
                .find_map(|p| spec.strip_prefix(p))
                .and_then(|p| join(&m.dir, p));
            m.dependencies.push(Dependency {
                name: name.clone(),
                key: name.clone(),
                kind,
                path,
                from_workspace: false,
            });
        }
    }
    Ok(())
}

fn python(m: &mut Manifest, text: &str) -> Result<(), String> {
    m.ecosystem = "python";
    let doc = Document::parse(text).map_err(|e| e.to_string())?;
    let root = doc.as_table();
    let project = root.get("project");
    let poetry = root.get("tool").and_then(|t| t.get("poetry"));
    m.name = project
        .and_then(|p| p.get("name"))
        .or_else(|| poetry.and_then(|p| p.get("name")))
        .and_then(Item::as_str)
        .map(str::to_owned);
    let mut add = |requirement: &str, kind: &'static str| {
        let name: String = requirement
            .trim()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            .collect();
        if !name.is_empty() && name != "python" {
            m.dependencies.push(Dependency {
                key: name.clone(),
                name,
                kind,
                path: None,
                from_workspace: false,
            });
        }
    };
    let strings = |item: Option<&Item>| -> Vec<String> {
        item.and_then(Item::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    for requirement in strings(project.and_then(|p| p.get("dependencies"))) {
        add(&requirement, "normal");
    }
    let groups = [
        (
            project.and_then(|p| p.get("optional-dependencies")),
            "optional",
        ),
        (root.get("dependency-groups"), "dev"),
    ];
    for (table, kind) in groups {
        if let Some(table) = table.and_then(Item::as_table_like) {
            for (_, list) in table.iter() {
                for requirement in strings(Some(list)) {
                    add(&requirement, kind);
                }
            }
        }
    }
    let mut poetry_tables = vec![
        (poetry.and_then(|p| p.get("dependencies")), "normal"),
        (poetry.and_then(|p| p.get("dev-dependencies")), "dev"),
    ];
    if let Some(groups) = poetry
        .and_then(|p| p.get("group"))
        .and_then(Item::as_table_like)
    {
        for (_, group) in groups.iter() {
            poetry_tables.push((group.get("dependencies"), "dev"));
        }
    }
    for (table, kind) in poetry_tables {
        if let Some(table) = table.and_then(Item::as_table_like) {
            for (name, _) in table.iter() {
                add(name, kind);
            }
        }
    }
    Ok(())
}

fn go(m: &mut Manifest, text: &str) {
    m.ecosystem = "go";
    let mut block: Option<&str> = None;
    for line in text.lines() {
        let line = line.split("//").next().unwrap_or_default().trim();
        if line == ")" {
            block = None;
            continue;
        }
        let (verb, rest) = match block {
            Some(verb) => (verb, line),
            None => match line.split_once(char::is_whitespace) {
                Some((verb, rest)) => (verb, rest.trim()),
                None => continue,
            },
        };
        if rest == "(" {
            block = Some(verb);
            continue;
        }
        let mut words = rest.split_whitespace();
        match verb {
            "module" => m.name = words.next().map(|w| w.trim_matches('"').to_owned()),
            "require" => {
                if let Some(module) = words.next() {
                    m.dependencies.push(Dependency {
                        name: module.to_owned(),
                        key: module.to_owned(),
                        kind: "normal",
                        path: None,
                        from_workspace: false,
                    });
                }
            }
            "replace" => {
                if let Some((from, to)) = rest.split_once("=>") {
                    let from = from.split_whitespace().next().unwrap_or_default();
                    let to = to.split_whitespace().next().unwrap_or_default();
                    if to.starts_with('.')
                        && let Some(dir) = join(&m.dir, to)
                    {
                        m.replaces.insert(from.to_owned(), dir);
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, &str)]) -> Vec<(String, Vec<u8>)> {
        list.iter()
            .map(|(p, c)| ((*p).to_owned(), c.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn cargo_edges_follow_paths_and_the_workspace() {
        let found = resolve(&files(&[
            (
                "Cargo.toml",
                "[workspace]\nmembers = [\"crates/*\"]\n[workspace.dependencies]\na = { path = \"crates/a\" }\nserde = \"1\"\n",
            ),
            (
                "crates/a/Cargo.toml",
                "[package]\nname = \"a\"\n[dependencies]\nserde.workspace = true\n",
            ),
            (
                "crates/b/Cargo.toml",
                "[package]\nname = \"b\"\n[dependencies]\na.workspace = true\n[dev-dependencies]\nc = { path = \"../c\" }\n[target.'cfg(unix)'.build-dependencies]\nalias = { package = \"a\", path = \"../a\" }\n",
            ),
            // Same name as a package here, but from a registry: no edge.
            (
                "crates/c/Cargo.toml",
                "[package]\nname = \"c\"\n[dependencies]\nb = \"1\"\n",
            ),
        ]));
        let names: Vec<&str> = found.packages.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(
            found.edges,
            [
                (
                    "crates/b/Cargo.toml".into(),
                    "crates/a/Cargo.toml".into(),
                    "build".into()
                ),
                (
                    "crates/b/Cargo.toml".into(),
                    "crates/a/Cargo.toml".into(),
                    "normal".into()
                ),
                (
                    "crates/b/Cargo.toml".into(),
                    "crates/c/Cargo.toml".into(),
                    "dev".into()
                ),
            ]
        );
    }

    #[test]
    fn npm_python_and_go_edges() {
        let found = resolve(&files(&[
            (
                "web/package.json",
                r#"{"name": "web", "dependencies": {"ui": "workspace:*", "react": "18"}, "devDependencies": {"kit": "file:../kit"}}"#,
            ),
            ("ui/package.json", r#"{"name": "ui"}"#),
            ("kit/package.json", r#"{"name": "kit-renamed"}"#),
            (
                "py/app/pyproject.toml",
                "[project]\nname = \"app\"\ndependencies = [\"My_Lib>=1\", \"requests\"]\n",
            ),
            ("py/lib/pyproject.toml", "[project]\nname = \"my.lib\"\n"),
            (
                "go/a/go.mod",
                "module example.com/a\n\nrequire (\n\texample.com/b v0.0.0\n)\nreplace example.com/b => ../b\n",
            ),
            ("go/b/go.mod", "module example.com/b\n"),
        ]));
        let edges: Vec<(&str, &str, &str)> = found
            .edges
            .iter()
            .map(|(a, b, k)| (a.as_str(), b.as_str(), k.as_str()))
            .collect();
        assert_eq!(
            edges,
            [
                ("go/a/go.mod", "go/b/go.mod", "normal"),
                ("py/app/pyproject.toml", "py/lib/pyproject.toml", "normal"),
                ("web/package.json", "kit/package.json", "dev"),
                ("web/package.json", "ui/package.json", "normal"),
            ]
        );
    }

    #[test]
    fn a_broken_manifest_is_a_warning() {
        let found = resolve(&files(&[("Cargo.toml", "[package\nname = 1")]));
        assert!(found.packages.is_empty());
        assert_eq!(found.warnings.len(), 1, "{:?}", found.warnings);
    }
}
