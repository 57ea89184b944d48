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
    if matches!(file.kind, Kind::Readme | Kind::Doc)
        && let (Some(heading), _) = markdown_head(&file.text)
    {
        let heading = plain(&heading);
        if !heading.is_empty() && heading.chars().count() <= 60 {
            return heading;
        }
    }
    file.path.clone()
}

/// A file's note without a model: what the file says about itself.
pub(crate) fn note(file: &File) -> String {
    let file_name = file.path.rsplit('/').next().unwrap_or(&file.path);
    match file.kind {
        Kind::Readme | Kind::Doc => match markdown_head(&file.text) {
            (_, Some(paragraph)) => first_sentences(&paragraph, 160),
            (Some(title), None) => title,
            (None, None) => format!("Documentation: {}", file.path),
        },
        Kind::Manifest => {
            let found = manifest(&file.path, &file.text);
            let what = format!("{file_name} manifest");
            match (found.name, found.description) {
                (Some(name), Some(description)) => {
                    format!("{what} of {name}: {}", first_sentences(&description, 140))
                }
                (Some(name), None) => format!("{what} of {name}"),
                (None, Some(description)) => {
                    format!("{what}: {}", first_sentences(&description, 140))
                }
                (None, None) => what,
            }
        }
        Kind::Example => format!("Example: {}", file.path),
        Kind::Meta => {
            let stem = file_name.split('.').next().unwrap_or(file_name);
            let mut words = stem.to_ascii_lowercase().replace('_', " ");
            if let Some(first) = words.get_mut(0..1) {
                first.make_ascii_uppercase();
            }
            words
        }
    }
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

/// The H2 a file's link goes in.
pub(crate) fn section_of(kind: Kind) -> &'static str {
    match kind {
        Kind::Readme | Kind::Doc => "Docs",
        Kind::Manifest => "Packages",
        Kind::Example => "Examples",
        Kind::Meta => crate::spec::OPTIONAL,
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
        assert!(note(&file("docs/a.md", Kind::Doc, &long)).chars().count() <= 161);
        assert_eq!(note(&file("LICENSE", Kind::Meta, "MIT")), "License");
        assert_eq!(
            note(&file("CODE_OF_CONDUCT.md", Kind::Meta, "")),
            "Code of conduct"
        );
        assert_eq!(
            note(&file(
                "crates/x/Cargo.toml",
                Kind::Manifest,
                "[package]\nname = \"x\"\n"
            )),
            "Cargo.toml manifest of x"
        );
        assert_eq!(
            summary(&[], "empty"),
            "empty: a repository of 0 documented files."
        );
    }
}
