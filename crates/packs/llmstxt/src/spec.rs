//! The llms.txt format: the document as data ([`LlmsTxt`]), its rendering,
//! and the validator ([`validate`]). Pure: no IO.
//!
//! The spec (llmstxt.org), in order: an H1 with the project's name (the
//! only required part); a blockquote summary; zero or more markdown blocks
//! of any kind but headings; zero or more H2 sections, each a file list of
//! `- [name](url)` items, each optionally followed by `: notes`. An H2
//! named exactly `Optional` holds links a shorter context may skip. The
//! reference parser fails on any line of a section that is not such an
//! item, so the validator does too.

use serde::{Deserialize, Serialize};

/// The H2 whose links may be skipped for a shorter context.
pub const OPTIONAL: &str = "Optional";

/// An llms.txt document, structured.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlmsTxt {
    /// The H1: the project's name.
    pub title: String,
    /// The blockquote: what the project is, in a sentence or two.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Markdown blocks between the summary and the first section.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub info: Vec<String>,
    /// The H2 file lists.
    #[serde(default)]
    pub sections: Vec<Section>,
}

/// An H2 file list.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Section {
    /// The H2's text.
    pub name: String,
    /// Its items.
    pub links: Vec<Link>,
}

/// `- [title](url): note`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    /// The link text.
    pub title: String,
    /// Where it points.
    pub url: String,
    /// What is there, in a phrase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One thing the validator found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// 1-based line number; 0 for the file as a whole.
    pub line: usize,
    /// What is wrong and what to write instead.
    pub message: String,
}

/// What [`validate`] says of a text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Validation {
    /// No errors (warnings allowed).
    pub valid: bool,
    /// What breaks the spec (or the reference parser).
    pub errors: Vec<Finding>,
    /// What the spec allows but a reader would miss (no summary, an empty
    /// section, `Optional` before other sections).
    pub warnings: Vec<Finding>,
    /// The document as read, as far as it could be.
    pub document: LlmsTxt,
}

/// One line of text: what a title, summary, name or note may hold.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A heading's text as a reader takes it: without the `#`s and spaces
/// around it.
fn heading_text(text: &str) -> String {
    one_line(text.trim_matches(|c: char| c == '#' || c.is_whitespace()))
}

impl LlmsTxt {
    /// The document with every field made renderable: one-line titles,
    /// summary and notes; link titles without brackets; URLs without
    /// spaces or parentheses (percent-encoded); info blocks without blank
    /// lines or lines that a reader would take for a heading, quote or
    /// fence. [`render`](LlmsTxt::render) renders this, so what it writes
    /// always validates and reads back as this.
    pub fn normalized(&self) -> LlmsTxt {
        let title = heading_text(&self.title);
        LlmsTxt {
            title: if title.is_empty() {
                "Untitled".into()
            } else {
                title
            },
            summary: self
                .summary
                .as_deref()
                .map(one_line)
                .filter(|summary| !summary.is_empty()),
            info: self
                .info
                .iter()
                .flat_map(|block| normalize_block(block))
                .collect(),
            sections: self
                .sections
                .iter()
                .map(|section| Section {
                    name: match heading_text(&section.name) {
                        name if name.is_empty() => "Links".into(),
                        name => name,
                    },
                    links: section.links.iter().map(normalize_link).collect(),
                })
                .collect(),
        }
    }

    /// The document as llms.txt text (of its [normalized](LlmsTxt::normalized) form).
    ///
    /// ```
    /// use weir_pack_llmstxt::{Link, LlmsTxt, Section, validate};
    /// let doc = LlmsTxt {
    ///     title: "demo".into(),
    ///     summary: Some("A demo project.".into()),
    ///     info: vec!["Start with the README.".into()],
    ///     sections: vec![Section {
    ///         name: "Docs".into(),
    ///         links: vec![Link { title: "README".into(), url: "README.md".into(), note: Some("Overview".into()) }],
    ///     }],
    /// };
    /// let text = doc.render();
    /// assert_eq!(text, "# demo\n\n> A demo project.\n\nStart with the README.\n\n## Docs\n\n- [README](README.md): Overview\n");
    /// let checked = validate(&text);
    /// assert!(checked.valid);
    /// assert_eq!(checked.document, doc);
    /// ```
    pub fn render(&self) -> String {
        let doc = self.normalized();
        let mut text = format!("# {}\n", doc.title);
        if let Some(summary) = &doc.summary {
            text.push_str(&format!("\n> {summary}\n"));
        }
        for block in &doc.info {
            text.push_str(&format!("\n{block}\n"));
        }
        for section in &doc.sections {
            text.push_str(&format!("\n## {}\n", section.name));
            if !section.links.is_empty() {
                text.push('\n');
            }
            for link in &section.links {
                text.push_str(&format!("- [{}]({})", link.title, link.url));
                if let Some(note) = &link.note {
                    text.push_str(&format!(": {note}"));
                }
                text.push('\n');
            }
        }
        text
    }
}

fn normalize_block(block: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Vec<String> = Vec::new();
    for line in block.lines() {
        let line = line.trim_end();
        if line.trim().is_empty() {
            if !current.is_empty() {
                blocks.push(current.join("\n"));
                current.clear();
            }
            continue;
        }
        let trimmed = line.trim_start();
        let escaped = if trimmed.starts_with(['#', '>']) || is_fence(trimmed) {
            format!("\\{trimmed}")
        } else {
            trimmed.to_owned()
        };
        current.push(escaped);
    }
    if !current.is_empty() {
        blocks.push(current.join("\n"));
    }
    blocks
}

fn normalize_link(link: &Link) -> Link {
    let unbracketed = |text: &str| one_line(&text.replace(['[', ']'], ""));
    let title = unbracketed(&link.title);
    let mut url = String::new();
    for c in link.url.trim().chars() {
        match c {
            ' ' => url.push_str("%20"),
            '(' => url.push_str("%28"),
            ')' => url.push_str("%29"),
            c if c.is_whitespace() => {}
            c => url.push(c),
        }
    }
    if url.is_empty() {
        url.push('#');
    }
    Link {
        title: match title.is_empty() {
            true => match unbracketed(&url) {
                title if title.is_empty() => "link".into(),
                title => title,
            },
            false => title,
        },
        url,
        note: link
            .note
            .as_deref()
            .map(one_line)
            .filter(|note| !note.is_empty()),
    }
}

fn is_fence(line: &str) -> bool {
    line.starts_with("```") || line.starts_with("~~~")
}

/// `(level, text)` of an ATX heading line.
fn heading(line: &str) -> Option<(usize, String)> {
    let level = line.bytes().take_while(|&b| b == b'#').count();
    if level == 0 || level > 6 {
        return None;
    }
    let rest = &line[level..];
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    Some((level, heading_text(rest)))
}

/// `- [title](url)` with an optional `: note`, as the reference parser
/// reads it.
fn link_item(line: &str) -> Option<Link> {
    let rest = line.strip_prefix('-')?.trim_start();
    let rest = rest.strip_prefix('[')?;
    let close = rest.find(']')?;
    let title = &rest[..close];
    let rest = rest[close + 1..].strip_prefix('(')?;
    let end = rest.find(')')?;
    let url = &rest[..end];
    let after = rest[end + 1..].trim_end();
    let note = match after {
        "" => None,
        after => Some(after.strip_prefix(':')?.trim().to_owned()),
    };
    if title.is_empty() || url.is_empty() {
        return None;
    }
    Some(Link {
        title: title.to_owned(),
        url: url.to_owned(),
        note: note.filter(|note| !note.is_empty()),
    })
}

/// Where [`validate`] is in the file.
#[derive(PartialEq)]
enum Part {
    BeforeTitle,
    /// After the H1, before anything but blank lines.
    AfterTitle,
    Summary,
    Info,
    Section,
}

/// Checks `text` against the llms.txt spec and reads it.
///
/// ```
/// use weir_pack_llmstxt::validate;
/// let checked = validate("# demo\n\n## Docs\n\n- [README](README.md)\nsee above\n");
/// assert!(!checked.valid);
/// assert_eq!(checked.errors[0].line, 6);
/// assert!(checked.errors[0].message.contains("file list"));
/// assert!(checked.warnings[0].message.contains("summary"));
/// ```
pub fn validate(text: &str) -> Validation {
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    let mut document = LlmsTxt::default();
    let error = |list: &mut Vec<Finding>, line: usize, message: String| {
        list.push(Finding { line, message })
    };

    let mut part = Part::BeforeTitle;
    let mut summary: Vec<String> = Vec::new();
    let mut block: Vec<String> = Vec::new();
    let mut in_fence = false;
    let mut section_lines: Vec<usize> = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let number = index + 1;
        let line = raw.trim_end();
        if in_fence && matches!(part, Part::Info | Part::AfterTitle | Part::Summary) {
            block.push(line.to_owned());
            if is_fence(line.trim_start()) {
                in_fence = false;
            }
            continue;
        }
        let blank = line.trim().is_empty();
        let head = heading(line);
        match part {
            Part::BeforeTitle => match head {
                _ if blank => {}
                Some((1, title)) if !title.is_empty() => {
                    document.title = title;
                    part = Part::AfterTitle;
                }
                _ => {
                    error(
                        &mut errors,
                        number,
                        "an llms.txt file starts with an H1 naming the project (`# Name`)".into(),
                    );
                    // Read on as if the title were there, to find more.
                    part = Part::Info;
                    if let Some((2, name)) = head {
                        part = Part::Section;
                        section_lines.push(number);
                        document.sections.push(Section {
                            name,
                            links: Vec::new(),
                        });
                    }
                }
            },
            _ if head.as_ref().is_some_and(|(level, _)| *level == 2) => {
                let (_, name) = head.expect("checked");
                flush_block(&mut block, &mut document.info);
                if part == Part::Summary {
                    document.summary = Some(summary.join(" "));
                }
                part = Part::Section;
                if name.is_empty() {
                    error(&mut errors, number, "an H2 needs a name (`## Docs`)".into());
                }
                if document.sections.iter().any(|section| section.name == name) {
                    error(
                        &mut errors,
                        number,
                        format!(
                            "a second section named {name:?}: the reference parser keeps only one of them; merge them"
                        ),
                    );
                }
                section_lines.push(number);
                document.sections.push(Section {
                    name,
                    links: Vec::new(),
                });
            }
            _ if head.is_some() => {
                let (level, _) = head.expect("checked");
                error(&mut errors, number, misplaced_heading(level, &part));
            }
            Part::AfterTitle | Part::Summary if line.trim_start().starts_with('>') => {
                part = Part::Summary;
                let quoted = line.trim_start()[1..].trim();
                summary.push(quoted.to_owned());
            }
            Part::AfterTitle if blank => {}
            Part::Summary if blank => {
                document.summary = Some(summary.join(" "));
                part = Part::Info;
            }
            Part::AfterTitle | Part::Summary | Part::Info => {
                if part == Part::Summary {
                    // A line right after the quote, without a blank line:
                    // a lazy continuation in markdown.
                    summary.push(line.trim().to_owned());
                    continue;
                }
                part = Part::Info;
                if blank {
                    flush_block(&mut block, &mut document.info);
                } else {
                    if is_fence(line.trim_start()) {
                        in_fence = true;
                    }
                    block.push(line.to_owned());
                }
            }
            Part::Section => {
                if blank {
                    continue;
                }
                let section = document.sections.last_mut().expect("in a section");
                if let Some(message) = section_item(section, line) {
                    error(&mut errors, number, message);
                }
            }
        }
    }
    if part == Part::Summary {
        document.summary = Some(summary.join(" "));
    }
    if in_fence {
        error(
            &mut errors,
            text.lines().count(),
            "a code fence is never closed".into(),
        );
    }
    flush_block(&mut block, &mut document.info);
    if part == Part::BeforeTitle {
        error(
            &mut errors,
            0,
            "the file is empty: an llms.txt file starts with an H1 naming the project (`# Name`)"
                .into(),
        );
    }
    if part != Part::BeforeTitle && document.summary.is_none() {
        error(
            &mut warnings,
            0,
            "no summary: a blockquote (`> …`) after the H1 tells a reader what the project is"
                .into(),
        );
    }
    section_warnings(&document, &section_lines, &mut warnings);
    Validation {
        valid: errors.is_empty(),
        errors,
        warnings,
        document,
    }
}

/// What is wrong with a heading other than the title and the H2s.
fn misplaced_heading(level: usize, part: &Part) -> String {
    match (level, part) {
        (1, _) => "a second H1: an llms.txt file has exactly one, its first line".into(),
        (_, Part::Section) => format!(
            "an H{level} inside a section: a section holds only `- [name](url): notes` items (make it an H2 of its own)"
        ),
        _ => format!(
            "an H{level} before the first section: only H2 sections may follow the summary (make it an H2, or plain text)"
        ),
    }
}

/// A non-blank line inside `section`: a link, added to it, or what is
/// wrong with the line.
fn section_item(section: &mut Section, line: &str) -> Option<String> {
    match link_item(line.trim_start()) {
        Some(link) => {
            let spaced = link.url.contains(char::is_whitespace).then(|| {
                format!(
                    "the URL {:?} has spaces: percent-encode them (%20)",
                    link.url
                )
            });
            section.links.push(link);
            spaced
        }
        None if line.trim_start().starts_with(['*', '+']) => Some(format!(
            "items of section {:?} start with `- `, not `{}`",
            section.name,
            &line.trim_start()[..1]
        )),
        None => Some(format!(
            "line in section {:?} is not a file list item `- [name](url): notes` (the reference parser fails on it; move prose above the first section)",
            section.name
        )),
    }
}

/// Warnings about the sections as a whole: one without links, an Optional
/// section that is not last. `lines`: each section's heading line.
fn section_warnings(document: &LlmsTxt, lines: &[usize], warnings: &mut Vec<Finding>) {
    for (section, line) in document.sections.iter().zip(lines) {
        if section.links.is_empty() {
            warnings.push(Finding {
                line: *line,
                message: format!("section {:?} has no links", section.name),
            });
        }
    }
    if let Some(position) = document.sections.iter().position(|s| s.name == OPTIONAL)
        && position + 1 != document.sections.len()
    {
        warnings.push(Finding {
            line: lines[position],
            message: "the Optional section is usually last: what follows it is read as required"
                .into(),
        });
    }
}

fn flush_block(block: &mut Vec<String>, info: &mut Vec<String>) {
    if !block.is_empty() {
        info.push(block.join("\n"));
        block.clear();
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn messages(findings: &[Finding]) -> Vec<(usize, &str)> {
        findings
            .iter()
            .map(|finding| (finding.line, finding.message.as_str()))
            .collect()
    }

    #[test]
    fn a_full_document_reads_back() {
        let text = "# weir\n\n> A streaming runtime\n> for long tools.\n\nSome notes.\nMore.\n\n```\n# not a heading\n```\n\n## Docs\n\n- [README](README.md): the start\n- [Design](docs/design.md)\n\n## Optional\n\n- [Changes](CHANGELOG.md)\n";
        let checked = validate(text);
        assert_eq!(messages(&checked.errors), vec![]);
        assert_eq!(messages(&checked.warnings), vec![]);
        let doc = checked.document;
        assert_eq!(doc.title, "weir");
        assert_eq!(
            doc.summary.as_deref(),
            Some("A streaming runtime for long tools.")
        );
        assert_eq!(
            doc.info,
            vec!["Some notes.\nMore.", "```\n# not a heading\n```"]
        );
        assert_eq!(doc.sections.len(), 2);
        assert_eq!(doc.sections[0].links[0].note.as_deref(), Some("the start"));
        assert_eq!(doc.sections[0].links[1].note, None);
    }

    #[test]
    fn each_broken_rule_is_named_with_its_line() {
        let cases: &[(&str, usize, &str)] = &[
            ("", 0, "empty"),
            ("intro\n# T\n", 1, "starts with an H1"),
            ("# T\n> s\n\n### Deep\n", 4, "before the first section"),
            ("# T\n> s\n\n## A\n\n- [a](b)\n# Again\n", 7, "second H1"),
            ("# T\n> s\n\n## A\n\n### Sub\n", 6, "inside a section"),
            ("# T\n> s\n\n## A\n\ntext\n", 6, "not a file list item"),
            ("# T\n> s\n\n## A\n\n* [a](b)\n", 6, "start with `- `"),
            ("# T\n> s\n\n## A\n\n- [a](b c)\n", 6, "has spaces"),
            (
                "# T\n> s\n\n## A\n- [a](b)\n## A\n- [c](d)\n",
                6,
                "second section",
            ),
            ("# T\n> s\n\n```\ncode\n", 5, "never closed"),
        ];
        for (text, line, needle) in cases {
            let checked = validate(text);
            assert!(!checked.valid, "{text:?}");
            assert!(
                checked
                    .errors
                    .iter()
                    .any(|e| e.line == *line && e.message.contains(needle)),
                "{text:?}: {:?}",
                checked.errors
            );
        }
    }

    #[test]
    fn warnings_do_not_make_a_file_invalid() {
        let checked = validate("# T\n\n## Optional\n\n- [a](b)\n\n## Empty\n");
        assert!(checked.valid);
        let found = messages(&checked.warnings);
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(found[0].1.contains("no summary"));
        assert_eq!(found[1], (7, "section \"Empty\" has no links"));
        assert!(found[2].1.contains("Optional section is usually last"));
    }

    fn text() -> impl Strategy<Value = String> {
        // Anything a model or a file might say, markdown's own characters
        // and line breaks included.
        "[ a-zA-Z0-9#>\\[\\]()`~:*_.\n-]{0,40}"
    }

    fn document() -> impl Strategy<Value = LlmsTxt> {
        let link = (text(), text(), proptest::option::of(text()))
            .prop_map(|(title, url, note)| Link { title, url, note });
        let section = (text(), proptest::collection::vec(link, 0..4))
            .prop_map(|(name, links)| Section { name, links });
        (
            text(),
            proptest::option::of(text()),
            proptest::collection::vec(text(), 0..3),
            proptest::collection::vec(section, 0..4),
        )
            .prop_map(|(title, summary, info, sections)| LlmsTxt {
                title,
                summary,
                info,
                sections,
            })
    }

    proptest! {
        /// Whatever goes in, what `render` writes is valid and reads back
        /// as the normalized document (section names aside, which must be
        /// unique to be valid: made so here).
        #[test]
        fn rendered_documents_validate_and_read_back(mut doc in document()) {
            for (index, section) in doc.sections.iter_mut().enumerate() {
                section.name = format!("{} {index}", heading_text(&section.name));
            }
            let text = doc.render();
            let checked = validate(&text);
            prop_assert!(checked.errors.is_empty(), "{:?}\n{}", checked.errors, text);
            prop_assert_eq!(checked.document, doc.normalized());
        }

        /// The validator is total: any text gets a verdict, never a panic,
        /// and a file is valid exactly when it has no errors.
        #[test]
        fn any_text_gets_a_verdict(text in "[ a-z#>\\[\\]()`:*\n-]{0,200}") {
            let checked = validate(&text);
            prop_assert_eq!(checked.valid, checked.errors.is_empty());
        }
    }
}
