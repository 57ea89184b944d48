//! What the repository says about itself, without a model: its name, a
//! summary, a title and a one-line description of each file, and the
//! sections they go in. Pure: the files come in as text.
//!
//! This is the whole of the fallback, and the starting point when a model
//! is there: the model's answers replace the summary and the notes one by
//! one, and any it could not give keep these.

use crate::gather::{File, Kind};

/// A manifest's name and description, read from its text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Manifest {
    pub(crate) name: Option<String>,
    pub(crate) description: Option<String>,
}

/// `name` and `description` of a manifest, by its file name. TOML and
/// JSON are read only as far as these two keys need (no parser
/// dependency for two strings).
pub(crate) fn manifest(path: &str, text: &str) -> Manifest {
    let name = path.rsplit('/').next().unwrap_or(path);
    match name {
        "package.json" | "composer.json" | "deno.json" => {
            let value: serde_json::Value = serde_json::from_str(text).unwrap_or_default();
            let field = |key: &str| {
                value[key]
                    .as_str()
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
            };
            Manifest {
                name: field("name"),
                description: field("description"),
            }
        }
        "Cargo.toml" => toml_fields(text, &["package"]),
        "pyproject.toml" => toml_fields(text, &["project", "tool.poetry"]),
        "go.mod" => Manifest {
            name: text.lines().find_map(|line| {
                let module = line.trim().strip_prefix("module ")?;
                Some(module.trim().rsplit('/').next()?.to_owned())
            }),
            description: None,
        },
        _ => Manifest::default(),
    }
}

/// `name` and `description` as basic strings in the first of `tables`.
fn toml_fields(text: &str, tables: &[&str]) -> Manifest {
    let mut found = Manifest::default();
    let mut table = String::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[') {
            table = header.trim_end_matches(']').trim().to_owned();
            continue;
        }
        if !tables.contains(&table.as_str()) {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let value = value.trim();
        let Some(value) = value
            .strip_prefix('"')
            .and_then(|v| v.rsplit_once('"'))
            .map(|(v, _)| v.replace("\\\"", "\""))
        else {
            continue;
        };
        match key.trim() {
            "name" if found.name.is_none() => found.name = Some(value),
            "description" if found.description.is_none() => found.description = Some(value),
            _ => {}
        }
    }
    found
}

/// The first H1 of a markdown text, and its first paragraph of prose
/// (badges, HTML and headings skipped), as one line.
pub(crate) fn markdown_head(text: &str) -> (Option<String>, Option<String>) {
    let mut title = None;
    let mut paragraph: Vec<&str> = Vec::new();
    let mut in_fence = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        if let Some(heading) = trimmed.strip_prefix("# ") {
            if title.is_none() {
                title = Some(heading.trim().to_owned());
            }
            if !paragraph.is_empty() {
                break;
            }
            continue;
        }
        let prose = !(trimmed.is_empty()
            || trimmed.starts_with('#')
            || trimmed.starts_with('<')
            || trimmed.starts_with("[![")
            || trimmed.starts_with("![")
            || trimmed.starts_with('|')
            || trimmed.starts_with("---")
            || trimmed.starts_with("==="));
        if prose {
            paragraph.push(trimmed);
        } else if !paragraph.is_empty() {
            break;
        }
    }
    let paragraph = (!paragraph.is_empty()).then(|| plain(&paragraph.join(" ")));
    (title, paragraph)
}

/// Markdown's emphasis and link syntax taken out of a line of prose.
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' | '_' | '`' => {}
            // `[text](url)` → `text`.
            ']' if chars.peek() == Some(&'(') => {
                for skipped in chars.by_ref() {
                    if skipped == ')' {
                        break;
                    }
                }
            }
            '[' => {}
            c => out.push(c),
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The first sentence or two of `text`, at most `max` characters, cut at
/// a word.
pub(crate) fn first_sentences(text: &str, max: usize) -> String {
    let mut end = text.len();
    // The end of the first sentence, if it is not too short to say much.
    for (at, _) in text.match_indices(". ") {
        if at >= 40 {
            end = at + 1;
            break;
        }
    }
    let sentence = &text[..end];
    if sentence.chars().count() <= max {
        return sentence.trim().to_owned();
    }
    let cut: String = sentence.chars().take(max).collect();
    let cut = cut.rsplit_once(' ').map_or(cut.as_str(), |(head, _)| head);
    format!("{}…", cut.trim_end_matches([',', ';', ':']))
}

/// A file's link title: a document's own H1 when it has a short one, else
/// its path.
pub(crate) fn title(file: &File) -> String {
    let markdown = file.kind == Kind::Meta
        && [".md", ".markdown", ".rst"]
            .iter()
            .any(|ext| file.path.to_ascii_lowercase().ends_with(ext));
    if (matches!(file.kind, Kind::Readme | Kind::Doc) || markdown)
        && let (Some(heading), _) = markdown_head(&file.text)
    {
        let heading = plain(&heading);
        if !heading.is_empty() && heading.chars().count() <= 60 {
            return heading;
        }
    }
    file.path.clone()
}

/// A file's note without a model: what the file says about itself, or
/// `None` when it says nothing its link does not (a note that repeats the
/// path or the title tells a reader nothing).
pub(crate) fn note(file: &File) -> Option<String> {
    let note = match file.kind {
        Kind::Readme | Kind::Doc => markdown_head(&file.text)
            .1
            .map(|paragraph| first_sentences(&paragraph, 160)),
        Kind::Manifest => manifest_note(&file.path, &file.text),
        Kind::Example => leading_comment(&file.text).map(|text| first_sentences(&text, 160)),
        Kind::Meta => match markdown_head(&file.text) {
            (_, Some(paragraph)) => Some(first_sentences(&paragraph, 160)),
            // A license's first line names it ("MIT License").
            _ => file
                .text
                .lines()
                .map(str::trim)
                .find(|line| !line.is_empty())
                .filter(|line| line.chars().count() <= 80)
                .map(|line| plain(line.trim_start_matches('#'))),
        },
    }?;
    let said = |other: &str| note.eq_ignore_ascii_case(other.trim());
    (!note.is_empty() && !said(&file.path) && !said(&title(file))).then_some(note)
}

/// What a manifest says: the package and its description, or the
/// workspace and its members.
fn manifest_note(path: &str, text: &str) -> Option<String> {
    let found = manifest(path, text);
    match (found.name, found.description) {
        (Some(name), Some(description)) => {
            Some(format!("{name}: {}", first_sentences(&description, 140)))
        }
        (Some(name), None) => Some(format!("the package {name}")),
        (None, Some(description)) => Some(first_sentences(&description, 140)),
        (None, None) => {
            workspace_members(text).map(|members| format!("the workspace: {members} members"))
        }
    }
}

/// How many members a Cargo workspace (`members = [...]`) or an npm one
/// (`"workspaces": [...]`) lists.
fn workspace_members(text: &str) -> Option<usize> {
    let start = text
        .find("members")
        .or_else(|| text.find("\"workspaces\""))?;
    let list = &text[start..];
    let list = &list[list.find('[')? + 1..];
    let list = &list[..list.find(']')?];
    let count = list.split(',').filter(|item| item.contains('"')).count();
    (count > 0).then_some(count)
}

/// The comment an example opens with (`//!`, `//`, `#`, `--`, a
/// docstring), as one line; `None` when it opens with code.
fn leading_comment(text: &str) -> Option<String> {
    let mut lines: Vec<&str> = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if lines.is_empty() && (trimmed.is_empty() || trimmed.starts_with("#!")) {
            continue;
        }
        let comment = ["//!", "///", "//", "--", "# ", "\"\"\"", "/*", "*"]
            .iter()
            .find_map(|mark| trimmed.strip_prefix(mark));
        match comment {
            Some(rest) => {
                let rest = rest
                    .trim()
                    .trim_end_matches("*/")
                    .trim_end_matches("\"\"\"")
                    .trim();
                if rest.is_empty() && !lines.is_empty() {
                    break;
                }
                if !rest.is_empty() {
                    lines.push(rest);
                }
            }
            None => break,
        }
    }
    let text = plain(&lines.join(" "));
    (!text.is_empty()).then_some(text)
}

/// The project's name: the caller's, the root manifest's, the README's H1,
/// or the directory's.
pub(crate) fn name(files: &[File], fallback: &str) -> String {
    let root_manifest = files
        .iter()
        .filter(|file| file.kind == Kind::Manifest && !file.path.contains('/'))
        .find_map(|file| manifest(&file.path, &file.text).name);
    let readme_title = files
        .iter()
        .find(|file| file.kind == Kind::Readme)
        .and_then(|file| markdown_head(&file.text).0)
        .map(|title| plain(&title));
    root_manifest
        .or(readme_title)
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| fallback.to_owned())
}

/// The project's summary without a model: the root manifest's
/// description, else the README's first paragraph, else a count.
pub(crate) fn summary(files: &[File], name: &str) -> String {
    let described = files
        .iter()
        .filter(|file| file.kind == Kind::Manifest && !file.path.contains('/'))
        .find_map(|file| manifest(&file.path, &file.text).description);
    let readme = files
        .iter()
        .find(|file| file.kind == Kind::Readme)
        .and_then(|file| markdown_head(&file.text).1);
    match described.or(readme) {
        Some(text) => first_sentences(&text, 300),
        None => format!("{name}: a repository of {} documented files.", files.len()),
    }
}

/// The H2 a file's link goes in. `Docs`: the README, the project's docs
/// (at the root or in its docs folder) and the policies a contributor
/// reads (security, contributing); `Packages`: the root manifest;
/// `Examples`; and `Optional`, what a reader short of room can skip: the
/// docs and manifests of the project's parts, license, changelog.
pub(crate) fn section_of(file: &File) -> &'static str {
    let stem = file
        .path
        .split('.')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    match file.kind {
        Kind::Readme => "Docs",
        Kind::Doc if crate::gather::top_level(&file.path) => "Docs",
        Kind::Meta if matches!(stem.as_str(), "security" | "contributing") => "Docs",
        Kind::Manifest if !file.path.contains('/') => "Packages",
        Kind::Example => "Examples",
        Kind::Doc | Kind::Manifest | Kind::Meta => crate::spec::OPTIONAL,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, kind: Kind, text: &str) -> File {
        File {
            path: path.into(),
            kind,
            text: text.into(),
            bytes: text.len() as u64,
            truncated: false,
        }
    }

    #[test]
    fn manifests_give_their_name_and_description() {
        let cargo = "[workspace]\nmembers = []\n[package]\nname = \"demo\"\ndescription = \"Says \\\"hi\\\".\"\n[dependencies]\nname = \"no\"\n";
        assert_eq!(
            manifest("Cargo.toml", cargo),
            Manifest {
                name: Some("demo".into()),
                description: Some("Says \"hi\".".into())
            }
        );
        assert_eq!(
            manifest(
                "web/package.json",
                r#"{"name": "web", "description": " A site "}"#
            ),
            Manifest {
                name: Some("web".into()),
                description: Some("A site".into())
            }
        );
        assert_eq!(
            manifest("go.mod", "module example.org/tools/fetch\n\ngo 1.22\n")
                .name
                .as_deref(),
            Some("fetch")
        );
        assert_eq!(
            manifest("pyproject.toml", "[tool.poetry]\nname = \"p\"\n")
                .name
                .as_deref(),
            Some("p")
        );
    }

    #[test]
    fn a_readme_gives_its_title_and_first_paragraph() {
        let text = "<p align=center>logo</p>\n# **Demo** tool\n\n[![ci](x)](y)\n\nDemo is a *small* tool for [demos](https://x).\nIt works.\n\n## Use\n\nRun it.\n";
        assert_eq!(
            markdown_head(text),
            (
                Some("**Demo** tool".into()),
                Some("Demo is a small tool for demos. It works.".into())
            )
        );
        let readme = file("README.md", Kind::Readme, text);
        assert_eq!(title(&readme), "Demo tool");
        assert_eq!(name(std::slice::from_ref(&readme), "dir"), "Demo tool");
        assert_eq!(
            summary(&[readme], "Demo"),
            "Demo is a small tool for demos. It works."
        );
    }

    #[test]
    fn notes_say_what_a_file_is_without_a_model() {
        let long = "word ".repeat(100);
        assert!(
            note(&file("docs/a.md", Kind::Doc, &long))
                .unwrap()
                .chars()
                .count()
                <= 161
        );
        assert_eq!(
            note(&file("LICENSE", Kind::Meta, "\n  MIT License\n\nCopyright")).as_deref(),
            Some("MIT License")
        );
        assert_eq!(note(&file("CODE_OF_CONDUCT.md", Kind::Meta, "")), None);
        assert_eq!(
            note(&file(
                "crates/x/Cargo.toml",
                Kind::Manifest,
                "[package]\nname = \"x\"\n"
            ))
            .as_deref(),
            Some("the package x")
        );
        assert_eq!(
            note(&file(
                "Cargo.toml",
                Kind::Manifest,
                "[workspace]\nmembers = [\n  \"a\",\n  \"b\", # c\n]\n"
            ))
            .as_deref(),
            Some("the workspace: 2 members")
        );
        assert_eq!(
            note(&file(
                "examples/run.rs",
                Kind::Example,
                "//! Runs a *demo* against\n//! a server.\n\nfn main() {}\n"
            ))
            .as_deref(),
            Some("Runs a demo against a server.")
        );
        assert_eq!(
            note(&file("examples/bare.rs", Kind::Example, "fn main() {}\n")),
            None
        );
        // A note that repeats the path or the title is none.
        assert_eq!(
            note(&file("docs/x.md", Kind::Doc, "# Guide\n\ndocs/x.md\n")),
            None
        );
        assert_eq!(
            summary(&[], "empty"),
            "empty: a repository of 0 documented files."
        );
    }
}
