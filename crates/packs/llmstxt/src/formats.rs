//! The two expanded forms of an llms.txt, written and checked. Pure.
//!
//! - **llms-full.txt** (not in the spec: a convention started by
//!   Mintlify): the llms.txt's H1 and summary, then every linked document
//!   in full, each under `## {title}` and a `Source: {url}` line.
//! - **llms-ctx.txt** (the form of the reference `llms_txt2ctx`, without
//!   the Optional section): XML, `<project title=… summary=…>` holding the
//!   info text and one element per section, named after it in lower case,
//!   of `<doc title=… desc=…>` elements with each document's text. Text
//!   and attributes are escaped, so the file is well-formed XML.

use crate::spec::{Finding, LlmsTxt, OPTIONAL};

/// A linked document's text, by URL, as the generator read it.
pub(crate) trait Documents {
    /// The text behind `url`, and whether it was cut.
    fn text(&self, url: &str) -> Option<(&str, bool)>;
}

fn cut_note(truncated: bool) -> &'static str {
    if truncated {
        "\n\n[… cut here: the file is longer than the size limit]"
    } else {
        ""
    }
}

/// llms-full.txt for `doc` (normalized as it renders).
pub(crate) fn full(doc: &LlmsTxt, documents: &dyn Documents) -> String {
    let doc = doc.normalized();
    let mut text = format!("# {}\n", doc.title);
    if let Some(summary) = &doc.summary {
        text.push_str(&format!("\n> {summary}\n"));
    }
    for link in doc.sections.iter().flat_map(|section| &section.links) {
        let Some((body, truncated)) = documents.text(&link.url) else {
            continue;
        };
        text.push_str(&format!(
            "\n## {}\n\nSource: {}\n\n{}{}\n",
            link.title,
            link.url,
            body.trim_end(),
            cut_note(truncated)
        ));
    }
    text
}

/// Escapes text for XML content or a quoted attribute.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

/// A section's element name: lower case, XML-safe.
fn tag(section: &str) -> String {
    let mut name: String = section
        .to_lowercase()
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { '_' })
        .collect();
    if !name.starts_with(|c: char| c.is_alphabetic() || c == '_') {
        name.insert(0, '_');
    }
    name
}

/// llms-ctx.txt for `doc`: its sections but Optional.
pub(crate) fn ctx(doc: &LlmsTxt, documents: &dyn Documents) -> String {
    let doc = doc.normalized();
    let mut text = format!("<project title=\"{}\"", escape(&doc.title));
    if let Some(summary) = &doc.summary {
        text.push_str(&format!(" summary=\"{}\"", escape(summary)));
    }
    text.push_str(">\n");
    for block in &doc.info {
        text.push_str(&escape(block));
        text.push('\n');
    }
    for section in doc.sections.iter().filter(|s| s.name != OPTIONAL) {
        let name = tag(&section.name);
        text.push_str(&format!("<{name}>"));
        for link in &section.links {
            text.push_str(&format!("<doc title=\"{}\"", escape(&link.title)));
            if let Some(note) = &link.note {
                text.push_str(&format!(" desc=\"{}\"", escape(note)));
            }
            text.push('>');
            if let Some((body, truncated)) = documents.text(&link.url) {
                text.push_str(&escape(body.trim_end()));
                text.push_str(&escape(cut_note(truncated)));
            }
            text.push_str("</doc>");
        }
        text.push_str(&format!("</{name}>\n"));
    }
    text.push_str("</project>\n");
    text
}

/// Line number (1-based) of byte `at` in `text`.
fn line_of(text: &str, at: usize) -> usize {
    text[..at].matches('\n').count() + 1
}

/// What is wrong with an llms-ctx.txt: not well-formed, not a `project`
/// of sections of `doc`s with titles.
pub(crate) fn check_ctx(text: &str) -> Vec<Finding> {
    let mut errors = Vec::new();
    let mut open: Vec<(String, usize)> = Vec::new();
    let mut seen_project = false;
    let mut rest = 0;
    let finding = |line, message: String| Finding { line, message };
    while let Some(offset) = text[rest..].find(['<', '>']) {
        let at = rest + offset;
        if text[at..].starts_with('>') {
            errors.push(finding(
                line_of(text, at),
                "a bare `>` in text: write &gt;".into(),
            ));
            rest = at + 1;
            continue;
        }
        let Some(end) = text[at..].find('>').map(|end| at + end) else {
            errors.push(finding(
                line_of(text, at),
                "a `<` that opens no tag: write &lt;".into(),
            ));
            break;
        };
        let inside = &text[at + 1..end];
        rest = end + 1;
        let line = line_of(text, at);
        if let Some(name) = inside.strip_prefix('/') {
            match open.pop() {
                Some((opened, _)) if opened == name => {}
                Some((opened, opened_at)) => errors.push(finding(
                    line,
                    format!("</{name}> closes <{opened}> of line {opened_at}"),
                )),
                None => errors.push(finding(line, format!("</{name}> closes nothing"))),
            }
            continue;
        }
        let name: String = inside.chars().take_while(|c| !c.is_whitespace()).collect();
        let valid_name = name
            .chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
            && name
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '-');
        if !valid_name {
            errors.push(finding(
                line,
                format!("<{inside}> is not a tag: write &lt;"),
            ));
            continue;
        }
        if !inside[name.len()..].matches('"').count().is_multiple_of(2) {
            errors.push(finding(
                line,
                format!("<{name}> has an unclosed attribute value"),
            ));
        }
        let has_title = inside.contains(" title=\"");
        match (open.len(), name.as_str()) {
            (0, "project") if !seen_project => {
                seen_project = true;
                if !has_title {
                    errors.push(finding(line, "<project> needs a title attribute".into()));
                }
            }
            (0, _) => errors.push(finding(
                line,
                format!("<{name}> outside the one <project> element"),
            )),
            (2, "doc") => {
                if !has_title {
                    errors.push(finding(line, "<doc> needs a title attribute".into()));
                }
            }
            (1, "doc") => errors.push(finding(line, "<doc> outside a section element".into())),
            (1, _) => {}
            _ => errors.push(finding(
                line,
                format!("<{name}> nested too deep: a project holds sections, a section docs"),
            )),
        }
        open.push((name, line));
    }
    for (name, line) in open {
        errors.push(finding(line, format!("<{name}> is never closed")));
    }
    if !seen_project && errors.is_empty() {
        errors.push(finding(0, "no <project> element".into()));
    }
    errors
}

/// What is wrong with an llms-full.txt: no H1 first, or a `Source:` line
/// that does not follow a `## ` title.
pub(crate) fn check_full(text: &str) -> Vec<Finding> {
    let mut errors = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    match lines.iter().position(|line| !line.trim().is_empty()) {
        Some(first) if lines[first].starts_with("# ") => {}
        Some(first) => errors.push(Finding {
            line: first + 1,
            message: "llms-full.txt starts with the project's H1 (`# Name`)".into(),
        }),
        None => errors.push(Finding {
            line: 0,
            message: "the file is empty".into(),
        }),
    }
    for (index, line) in lines.iter().enumerate() {
        if line.starts_with("Source: ") {
            let titled =
                index >= 2 && lines[index - 2].starts_with("## ") && lines[index - 1].is_empty();
            if !titled {
                errors.push(Finding {
                    line: index + 1,
                    message: "a `Source:` line comes right after its document's `## title` and a blank line".into(),
                });
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::spec::{Link, Section};

    struct Texts(BTreeMap<&'static str, &'static str>);

    impl Documents for Texts {
        fn text(&self, url: &str) -> Option<(&str, bool)> {
            self.0.get(url).map(|text| (*text, url.ends_with("big.md")))
        }
    }

    fn sample() -> (LlmsTxt, Texts) {
        let link = |title: &str, url: &str, note: Option<&str>| Link {
            title: title.into(),
            url: url.into(),
            note: note.map(Into::into),
        };
        let doc = LlmsTxt {
            title: "demo <x>".into(),
            summary: Some("Says \"hi\" & more.".into()),
            info: vec!["Read me first.".into()],
            sections: vec![
                Section {
                    name: "Docs".into(),
                    links: vec![
                        link("README", "README.md", Some("Start")),
                        link("Big", "docs/big.md", None),
                    ],
                },
                Section {
                    name: "Core API".into(),
                    links: vec![link("Cargo", "Cargo.toml", None)],
                },
                Section {
                    name: OPTIONAL.into(),
                    links: vec![link("License", "LICENSE", None)],
                },
            ],
        };
        let texts = Texts(BTreeMap::from([
            ("README.md", "# demo\n\nUse <b> tags & co.\n"),
            ("docs/big.md", "big"),
            ("Cargo.toml", "[package]\n"),
            ("LICENSE", "MIT"),
        ]));
        (doc, texts)
    }

    #[test]
    fn ctx_is_escaped_xml_without_optional() {
        let (doc, texts) = sample();
        let text = ctx(&doc, &texts);
        assert_eq!(
            text,
            "<project title=\"demo &lt;x&gt;\" summary=\"Says &quot;hi&quot; &amp; more.\">\nRead me first.\n<docs><doc title=\"README\" desc=\"Start\"># demo\n\nUse &lt;b&gt; tags &amp; co.</doc><doc title=\"Big\">big\n\n[… cut here: the file is longer than the size limit]</doc></docs>\n<core_api><doc title=\"Cargo\">[package]</doc></core_api>\n</project>\n"
        );
        assert_eq!(check_ctx(&text), vec![]);
    }

    #[test]
    fn full_has_every_document_under_its_title() {
        let (doc, texts) = sample();
        let text = full(&doc, &texts);
        assert!(text.starts_with(
            "# demo <x>\n\n> Says \"hi\" & more.\n\n## README\n\nSource: README.md\n\n# demo\n"
        ));
        assert!(text.contains("## License\n\nSource: LICENSE\n\nMIT\n"));
        assert_eq!(check_full(&text), vec![]);
    }

    #[test]
    fn broken_files_are_named_with_their_lines() {
        let ctx_cases: &[(&str, &str)] = &[
            ("", "no <project>"),
            ("<project>\n</project>", "title attribute"),
            (
                "<project title=\"t\">\n<docs><doc>x</doc></docs></project>",
                "title attribute",
            ),
            (
                "<project title=\"t\">\n<docs>a < b</docs></project>",
                "is not a tag",
            ),
            ("<project title=\"t\">\n<docs>\n</project>", "closes <docs>"),
            (
                "<project title=\"t\"><doc title=\"d\"></doc></project>",
                "outside a section",
            ),
            (
                "<project title=\"t\"></project><project title=\"u\"></project>",
                "outside the one",
            ),
        ];
        for (text, needle) in ctx_cases {
            let errors = check_ctx(text);
            assert!(
                errors.iter().any(|e| e.message.contains(needle)),
                "{text:?}: {errors:?}"
            );
        }
        let errors = check_full("intro\n# T\nSource: x\n");
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert_eq!((errors[0].line, errors[1].line), (1, 3));
    }
}
