//! Findings out of an agent's prose: severity, category, file:line, text.
//!
//! Agents write their critique as markdown, each a little differently, so
//! the extractor reads the shapes they use rather than one format:
//!
//! - a heading that starts with a severity (`### Critical: SQL injection`),
//!   the lines under it adding location (`File: auth.js:42`), category and
//!   detail until the next heading;
//! - a list item or line that starts with one (`- **High** (security)
//!   src/a.rs:12: …`, `1. [MEDIUM] …`, `Low: …`, `🔴 Critical — …`), its
//!   indented continuation lines adding detail;
//! - a table row with a severity cell (its header naming the columns).
//!
//! Markup (`**`, `__`, backticks) does not matter, nor bullet style, nor
//! CRLF. A section heading that names a category (`## Security issues`)
//! gives the findings under it that category unless they name their own.
//! Text with no severity marker yields no finding: the extractor never
//! guesses a severity. Pure: text in, findings out.

use serde::Serialize;

/// How bad a finding is, worst first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Severity {
    Critical,
    High,
    Medium,
    Low,
    Info,
}

impl Severity {
    /// The severity a word names, if any (`blocker`, `major`, `nit`…).
    fn from_word(word: &str) -> Option<Severity> {
        Some(match word.to_ascii_lowercase().as_str() {
            "critical" | "blocker" | "severe" | "catastrophic" => Severity::Critical,
            "high" | "major" | "serious" => Severity::High,
            "medium" | "moderate" | "med" => Severity::Medium,
            "low" | "minor" => Severity::Low,
            "info" | "informational" | "nit" | "note" | "nitpick" => Severity::Info,
            _ => return None,
        })
    }

    /// Its name, as in the structured result.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Severity::Critical => "critical",
            Severity::High => "high",
            Severity::Medium => "medium",
            Severity::Low => "low",
            Severity::Info => "info",
        }
    }
}

/// One finding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Finding {
    pub(crate) severity: Severity,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) category: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) line: Option<u32>,
    pub(crate) text: String,
}

/// Section words that name a category.
const CATEGORIES: &[&str] = &[
    "security",
    "performance",
    "architecture",
    "correctness",
    "reliability",
    "maintainability",
    "testing",
    "tests",
    "design",
    "documentation",
    "style",
    "scalability",
    "concurrency",
    "usability",
    "cost",
    "operations",
    "privacy",
    "compliance",
    "market",
    "feasibility",
];

/// Lines that open a field of a finding in a block: `File: …`, `Category: …`.
const LOCATION_LABELS: &[&str] = &["file", "location", "where", "path", "at"];
const CATEGORY_LABELS: &[&str] = &["category", "type", "area", "kind"];
const SEVERITY_LABELS: &[&str] = &["severity", "priority", "risk", "impact level"];

/// Most findings taken from one text: a runaway agent cannot flood the
/// result.
const MAX_FINDINGS: usize = 500;
/// Longest finding text kept, in bytes.
const MAX_TEXT: usize = 2_000;

/// The findings in `text`, in order of appearance.
pub(crate) fn extract(text: &str) -> Vec<Finding> {
    let mut reader = Reader::default();
    for line in text.lines() {
        reader.line(line.trim_end_matches('\r'));
        if reader.done.len() >= MAX_FINDINGS {
            break;
        }
    }
    let mut findings = reader.finish();
    // Locations are read with the markup taken out, which can join two
    // tokens: `a`.b would name a file `a.b` that the text does not. A file
    // is kept only as the text names it.
    for finding in &mut findings {
        if finding
            .file
            .as_deref()
            .is_some_and(|file| !text.contains(file))
        {
            finding.file = None;
            finding.line = None;
        }
    }
    findings
}

/// A finding being read, and how it continues.
#[derive(Debug)]
struct Open {
    finding: Finding,
    /// Whether a severity label or a heading gave it (it then takes every
    /// line until the next heading) or a list item (only its continuation).
    block: bool,
    /// The indentation of the item's first line.
    indent: usize,
    /// A blank line ended the item.
    closed: bool,
    /// The whole text, for the location.
    body: String,
}

#[derive(Debug, Default)]
struct Reader {
    done: Vec<Finding>,
    open: Option<Open>,
    section_category: Option<String>,
    /// A table's column roles, once its header row is read.
    table: Option<Columns>,
    in_code: bool,
}

#[derive(Debug, Default)]
struct Columns {
    severity: Option<usize>,
    category: Option<usize>,
    location: Option<usize>,
    text: Option<usize>,
}

impl Reader {
    fn line(&mut self, raw: &str) {
        let trimmed = raw.trim();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            self.in_code = !self.in_code;
            return;
        }
        if self.in_code {
            return;
        }
        if trimmed.is_empty() {
            self.table = None;
            if let Some(open) = &mut self.open
                && !open.block
            {
                open.closed = true;
            }
            return;
        }
        if let Some(heading) = heading(trimmed) {
            self.close();
            let plain = unmark(heading);
            match leading_severity(&plain) {
                Some((severity, rest)) => self.start(severity, rest, true, 0),
                None => self.section_category = category_in(&plain),
            }
            return;
        }
        if trimmed.starts_with('|') {
            self.table_row(trimmed);
            return;
        }
        let indent = raw.len() - raw.trim_start().len();
        let (bulleted, item) = strip_bullet(trimmed);
        let plain = unmark(item);
        if let Some((label, value)) = labelled(&plain)
            && let Some(open) = self.open.as_mut().filter(|open| !open.closed)
        {
            // A field of the finding being read.
            if SEVERITY_LABELS.contains(&label.as_str()) {
                if let Some(severity) = first_word(value).and_then(Severity::from_word) {
                    open.finding.severity = severity;
                }
                return;
            }
            if CATEGORY_LABELS.contains(&label.as_str()) {
                open.finding.category = Some(category_word(value));
                return;
            }
            if LOCATION_LABELS.contains(&label.as_str()) {
                open.body.push(' ');
                open.body.push_str(value);
                return;
            }
        }
        if let Some((label, value)) = labelled(&plain)
            && SEVERITY_LABELS.contains(&label.as_str())
            && let Some(severity) = first_word(value).and_then(Severity::from_word)
        {
            // `Severity: high` before anything else: a finding whose text follows.
            self.close();
            let rest = value[first_word(value).map_or(0, str::len)..].to_owned();
            self.start(severity, rest, true, indent);
            return;
        }
        if let Some((severity, rest)) = leading_severity(&plain) {
            self.close();
            self.start(severity, rest, false, indent);
            return;
        }
        let continues = self
            .open
            .as_ref()
            .is_some_and(|open| !open.closed && (open.block || !bulleted || indent > open.indent));
        if continues {
            let open = self.open.as_mut().expect("checked above");
            append(&mut open.finding.text, &plain);
            open.body.push(' ');
            open.body.push_str(item);
        } else if bulleted && indent == 0 {
            // A sibling item without a severity ends an item finding.
            if self.open.as_ref().is_some_and(|open| !open.block) {
                self.close();
            }
        }
    }

    fn start(&mut self, severity: Severity, rest: String, block: bool, indent: usize) {
        let (category, text) = inline_category(&rest);
        let text = text
            .trim_start_matches([':', '-', '—', '–', ' ', '.'])
            .trim()
            .to_owned();
        self.open = Some(Open {
            finding: Finding {
                severity,
                category: category.or_else(|| self.section_category.clone()),
                file: None,
                line: None,
                text: String::new(),
            },
            block,
            indent,
            closed: false,
            body: rest.clone(),
        });
        let open = self.open.as_mut().expect("just set");
        append(&mut open.finding.text, &text);
    }

    fn close(&mut self) {
        if let Some(mut open) = self.open.take() {
            if let Some((file, line)) = location(&open.body) {
                open.finding.file = Some(file);
                open.finding.line = line;
            }
            if open.finding.text.is_empty() {
                open.finding.text = open.finding.severity.name().to_owned();
            }
            self.done.push(open.finding);
        }
    }

    fn table_row(&mut self, row: &str) {
        self.close();
        let cells: Vec<String> = row
            .trim_matches('|')
            .split('|')
            .map(|cell| unmark(cell.trim()))
            .collect();
        if cells
            .iter()
            .all(|cell| cell.chars().all(|c| matches!(c, '-' | ':' | ' ')))
        {
            return; // the separator row
        }
        let lower: Vec<String> = cells.iter().map(|c| c.to_ascii_lowercase()).collect();
        let named = |names: &[&str]| lower.iter().position(|cell| names.contains(&cell.as_str()));
        if let Some(severity) = named(&["severity", "priority", "risk", "level"]) {
            self.table = Some(Columns {
                severity: Some(severity),
                category: named(&["category", "type", "area", "kind"]),
                location: named(&["file", "location", "where", "path", "file:line"]),
                text: named(&[
                    "issue",
                    "finding",
                    "description",
                    "problem",
                    "details",
                    "summary",
                    "title",
                ]),
            });
            return;
        }
        let columns = self.table.get_or_insert_with(Columns::default);
        let severity_at = columns.severity.filter(|&i| i < cells.len()).or_else(|| {
            cells
                .iter()
                .position(|cell| leading_severity(cell).is_some_and(|(_, rest)| rest.is_empty()))
        });
        let Some(at) = severity_at else { return };
        let Some((severity, _)) = leading_severity(&cells[at]) else {
            return;
        };
        let cell = |index: Option<usize>| index.and_then(|i| cells.get(i)).cloned();
        let text = cell(columns.text).unwrap_or_else(|| {
            cells
                .iter()
                .enumerate()
                .filter(|(i, _)| Some(*i) != columns.category && *i != at)
                .map(|(_, cell)| cell.clone())
                .max_by_key(String::len)
                .unwrap_or_default()
        });
        let located = cell(columns.location)
            .and_then(|cell| location(&cell))
            .or_else(|| location(&cells.join(" ")));
        let mut finding = Finding {
            severity,
            category: cell(columns.category)
                .filter(|c| !c.is_empty())
                .map(|c| category_word(&c))
                .or_else(|| self.section_category.clone()),
            file: None,
            line: None,
            text: String::new(),
        };
        append(&mut finding.text, &text);
        if finding.text.is_empty() {
            finding.text = severity.name().to_owned();
        }
        if let Some((file, line)) = located {
            finding.file = Some(file);
            finding.line = line;
        }
        self.done.push(finding);
    }

    fn finish(mut self) -> Vec<Finding> {
        self.close();
        self.done.truncate(MAX_FINDINGS);
        self.done
    }
}

/// Adds `more` to a finding's text, a space between, up to [`MAX_TEXT`].
fn append(text: &mut String, more: &str) {
    let more = more.trim();
    if more.is_empty() || text.len() >= MAX_TEXT {
        return;
    }
    if !text.is_empty() {
        text.push(' ');
    }
    let room = MAX_TEXT - text.len();
    let mut cut = more.len().min(room);
    while !more.is_char_boundary(cut) {
        cut -= 1;
    }
    text.push_str(&more[..cut]);
}

/// The text of a markdown heading (`## x`), or `None`.
fn heading(line: &str) -> Option<&str> {
    let rest = line.trim_start_matches('#');
    let level = line.len() - rest.len();
    ((1..=6).contains(&level) && (rest.is_empty() || rest.starts_with(' ')))
        .then(|| rest.trim().trim_end_matches('#').trim())
}

/// Whether the line is a list item, and the line without its bullet
/// (`-`, `*`, `+`, `•`, `1.`, `1)`, and a task box `[ ]`).
fn strip_bullet(line: &str) -> (bool, &str) {
    let mut rest = line;
    let mut bulleted = false;
    for bullet in ["- ", "* ", "+ ", "• "] {
        if let Some(after) = rest.strip_prefix(bullet) {
            rest = after;
            bulleted = true;
            break;
        }
    }
    if !bulleted {
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if (1..=3).contains(&digits) {
            let after = &rest[digits..];
            if let Some(after) = after
                .strip_prefix(". ")
                .or_else(|| after.strip_prefix(") "))
            {
                rest = after;
                bulleted = true;
            }
        }
    }
    for task in ["[ ] ", "[x] ", "[X] "] {
        if let Some(after) = rest.strip_prefix(task) {
            rest = after;
        }
    }
    (bulleted, rest.trim_start())
}

/// The line without emphasis markup and backticks; links keep their text.
fn unmark(text: &str) -> String {
    text.replace("**", "")
        .replace("__", "")
        .replace('`', "")
        .trim()
        .to_owned()
}

/// The severity a line opens with, and the rest of the line: `Critical:`,
/// `[HIGH]`, `(medium)`, `Low -`, `🔴 Critical`, `P0`… A severity word
/// must be followed by a separator, a bracket's end or the end, so prose
/// that merely begins with "High" ("High load makes…") is not a finding.
fn leading_severity(line: &str) -> Option<(Severity, String)> {
    // Emoji and other symbols before the word (🔴, ⚠️, ❗).
    let start = line.trim_start_matches(|c: char| {
        !c.is_alphanumeric() && !matches!(c, '[' | '(' | '{') && !c.is_whitespace()
    });
    let start = start.trim_start();
    let (bracketed, inner) = match start.chars().next() {
        Some(open @ ('[' | '(' | '{')) => {
            let close = match open {
                '[' => ']',
                '(' => ')',
                _ => '}',
            };
            let end = start.find(close)?;
            (true, &start[1..end])
        }
        _ => (false, start),
    };
    let word_end = inner
        .find(|c: char| !c.is_alphanumeric())
        .unwrap_or(inner.len());
    let word = &inner[..word_end];
    let severity = Severity::from_word(word).or_else(|| priority(word))?;
    let mut rest = &inner[word_end..];
    if bracketed {
        // `[HIGH severity]`: the rest of the bracket is fine, the text follows it.
        let tail = rest.trim();
        if !tail.is_empty() && !tail.eq_ignore_ascii_case("severity") {
            return None;
        }
        rest = &start[1 + inner.len() + 1..];
    } else {
        let after = rest.trim_start();
        let after = after
            .strip_prefix("severity")
            .or_else(|| after.strip_prefix("Severity"))
            .or_else(|| after.strip_prefix("SEVERITY"))
            .unwrap_or(after);
        let separated = after.is_empty()
            || after.starts_with([':', '-', '—', '–', '(', '[', '|', '/', ','])
            || (rest.starts_with(' ') && word.chars().all(|c| !c.is_lowercase()) && word.len() > 2);
        if !separated {
            return None;
        }
        rest = after;
    }
    Some((severity, rest.trim().to_owned()))
}

/// `P0`…`P4` as severities.
fn priority(word: &str) -> Option<Severity> {
    match word {
        "P0" | "p0" => Some(Severity::Critical),
        "P1" | "p1" => Some(Severity::High),
        "P2" | "p2" => Some(Severity::Medium),
        "P3" | "p3" => Some(Severity::Low),
        "P4" | "p4" => Some(Severity::Info),
        _ => None,
    }
}

/// `(security) rest` or `[security] rest` or `Security / rest`: a category
/// right after the severity.
fn inline_category(rest: &str) -> (Option<String>, String) {
    let trimmed = rest.trim_start_matches([':', ' ', '-']);
    for (open, close) in [('(', ')'), ('[', ']')] {
        if let Some(inner) = trimmed.strip_prefix(open)
            && let Some(end) = inner.find(close)
        {
            let word = inner[..end].trim();
            if !word.is_empty() && word.len() <= 40 && !looks_like_location(word) {
                return (Some(category_word(word)), inner[end + 1..].to_owned());
            }
        }
    }
    if let Some(slash) = trimmed.strip_prefix('/') {
        let end = slash.find(':').unwrap_or(slash.len());
        let word = slash[..end].trim();
        if !word.is_empty() && word.split_whitespace().count() <= 3 {
            return (Some(category_word(word)), slash[end..].to_owned());
        }
    }
    (None, rest.to_owned())
}

/// A category's canonical form: lowercase, words joined by `_`.
fn category_word(text: &str) -> String {
    text.trim()
        .trim_end_matches(['.', ':'])
        .split_whitespace()
        .map(str::to_ascii_lowercase)
        .collect::<Vec<_>>()
        .join("_")
}

/// A known category named in a section heading.
fn category_in(heading: &str) -> Option<String> {
    heading
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_ascii_lowercase)
        .find_map(|word| CATEGORIES.iter().find(|known| **known == word))
        .map(|known| if *known == "tests" { "testing" } else { known }.to_owned())
}

/// `Label: value` with a short label, lowercased.
fn labelled(line: &str) -> Option<(String, &str)> {
    let (label, value) = line.split_once(':')?;
    let label = label.trim().to_ascii_lowercase();
    (!label.is_empty() && label.len() <= 14 && label.split_whitespace().count() <= 2)
        .then_some((label, value.trim()))
}

fn first_word(text: &str) -> Option<&str> {
    text.split(|c: char| !c.is_alphanumeric())
        .find(|word| !word.is_empty())
}

/// The first `path:line` in `text`, else the first path with `line N`
/// after it, else the first path alone.
fn location(text: &str) -> Option<(String, Option<u32>)> {
    let tokens: Vec<&str> = text
        .split(|c: char| {
            c.is_whitespace()
                || matches!(
                    c,
                    '`' | '(' | ')' | '[' | ']' | ',' | '"' | '\'' | '*' | '<' | '>' | '|'
                )
        })
        .filter(|token| !token.is_empty())
        .collect();
    let mut bare: Option<(String, Option<u32>)> = None;
    for (i, token) in tokens.iter().enumerate() {
        let token = token.trim_end_matches(['.', ';', ':', '—', '-']);
        if token.contains("://") {
            continue;
        }
        let (path, line) = match (token.split_once("#L"), token.split_once(':')) {
            // `foo.rs#L42`, as links to a line are written.
            (Some((path, anchor)), _) => (path, leading_number(anchor)),
            (None, Some((path, rest))) => (path, leading_number(rest)),
            (None, None) => (token, None),
        };
        if !looks_like_path(path) {
            continue;
        }
        if line.is_some() {
            return Some((path.to_owned(), line));
        }
        if bare.is_none() {
            // `foo.rs line 42`, `foo.rs, L42`.
            let after = tokens.get(i + 1..i + 3).unwrap_or(&[]);
            let line = match after {
                [word, n, ..] if word.eq_ignore_ascii_case("line") => leading_number(n),
                [n, ..] => n.strip_prefix('L').and_then(leading_number),
                _ => None,
            };
            bare = Some((path.to_owned(), line));
        }
    }
    bare
}

/// The number `text` starts with, if any.
fn leading_number(text: &str) -> Option<u32> {
    let digits = text.len() - text.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    text[..digits].parse().ok()
}

fn looks_like_location(word: &str) -> bool {
    word.contains(':') || looks_like_path(word)
}

/// `src/a.rs`, `auth.js`, `Makefile`-like names with a slash, not `1.5`,
/// `e.g`, or a sentence's last word.
fn looks_like_path(token: &str) -> bool {
    if token.is_empty() || token.len() > 300 || token.starts_with('.') && token.len() < 3 {
        return false;
    }
    if !token
        .chars()
        .all(|c| c.is_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | '@' | '+' | '#'))
    {
        return false;
    }
    let name = token.rsplit('/').next().unwrap_or(token);
    let extension = name.rsplit_once('.');
    match extension {
        Some((stem, ext)) => {
            !stem.is_empty()
                && (1..=8).contains(&ext.len())
                && ext.chars().all(|c| c.is_ascii_alphanumeric())
                && ext.chars().any(|c| c.is_ascii_alphabetic())
                && !matches!(ext, "g" | "e" | "i" | "etc" | "ie")
        }
        None => {
            token.contains('/') && token.chars().any(char::is_alphabetic) && !token.ends_with('/')
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The findings as one line each: `severity category file:line | text`.
    fn check(text: &str, expected: &[&str]) {
        let got: Vec<String> = extract(text)
            .iter()
            .map(|f| {
                format!(
                    "{} {} {}:{} | {}",
                    f.severity.name(),
                    f.category.as_deref().unwrap_or("-"),
                    f.file.as_deref().unwrap_or("-"),
                    f.line.map_or("-".to_owned(), |l| l.to_string()),
                    f.text
                )
            })
            .collect();
        assert_eq!(got, expected, "from:\n{text}");
    }

    #[test]
    fn headings_with_a_severity_take_the_lines_under_them() {
        check(
            "## Security Issues\n\n### Critical: SQL Injection\nFile: auth.js:42\nThe query is built by concatenation.\n\n### High: Secrets in logs\nLocation: `src/log.rs` line 7\nCategory: privacy\n",
            &[
                "critical security auth.js:42 | SQL Injection The query is built by concatenation.",
                "high privacy src/log.rs:7 | Secrets in logs",
            ],
        );
    }

    #[test]
    fn list_items_in_many_spellings() {
        check(
            "- **High** (security) `src/auth.rs:12`: tokens compared with ==\n\
             * [MEDIUM] src/db.rs:88 — N+1 query in the loop\n\
             1. Low: naming is inconsistent\n\
             2) 🔴 Critical - unbounded recursion in parse() at lib/parse.py:3\n\
             + **Nit:** trailing whitespace\n\
             - P1 / performance: cache misses on every call (cache.go#L19)\n",
            &[
                "high security src/auth.rs:12 | src/auth.rs:12: tokens compared with ==",
                "medium - src/db.rs:88 | src/db.rs:88 — N+1 query in the loop",
                "low - -:- | naming is inconsistent",
                "critical - lib/parse.py:3 | unbounded recursion in parse() at lib/parse.py:3",
                "info - -:- | trailing whitespace",
                "high performance cache.go:19 | cache misses on every call (cache.go#L19)",
            ],
        );
    }

    #[test]
    fn continuation_lines_belong_to_their_item_and_siblings_end_it() {
        check(
            "- High: the lock is held across an await\n  in src/run.rs:40, which stalls every reader\n- a remark with no severity\n- Low: typo\n\nHigh load is not an issue here.\n",
            &[
                "high - src/run.rs:40 | the lock is held across an await in src/run.rs:40, which stalls every reader",
                "low - -:- | typo",
            ],
        );
    }

    #[test]
    fn tables_with_and_without_a_header() {
        check(
            "| Severity | Category | Location | Issue |\n|---|---|---|---|\n| **Critical** | Security | `api/handler.go:201` | No auth check |\n| low | style | README.md | Outdated badge |\n",
            &[
                "critical security api/handler.go:201 | No auth check",
                "low style README.md:- | Outdated badge",
            ],
        );
    }

    #[test]
    fn severity_labels_and_code_blocks() {
        check(
            "## Performance\n\n**Severity:** high\nThe cache is rebuilt per request (src/cache.rs:10).\n\n```\n- Critical: this is code, not a finding\n```\n",
            &[
                "high performance src/cache.rs:10 | The cache is rebuilt per request (src/cache.rs:10).",
            ],
        );
    }

    #[test]
    fn prose_without_markers_gives_nothing() {
        check(
            "This codebase is fine.\nHigh quality, low coupling. See https://example.invalid/a.rs:3.\n",
            &[],
        );
    }

    #[test]
    fn a_file_is_named_only_as_the_text_names_it() {
        let joined = extract("- P0: `Config`.load panics\n");
        assert_eq!((joined[0].file.as_deref(), joined[0].line), (None, None));
        let quoted = extract("- P0: panics in `src/a.rs`:12\n");
        assert_eq!(
            (quoted[0].file.as_deref(), quoted[0].line),
            (Some("src/a.rs"), Some(12))
        );
    }

    #[test]
    fn crlf_reads_like_lf() {
        let lf = "### Critical: overflow\nFile: a.c:9\n- Low: nit\n";
        assert_eq!(extract(lf), extract(&lf.replace('\n', "\r\n")));
    }

    proptest! {
        /// Any text: no panic, bounded output, every text non-empty, every
        /// file named in the input.
        #[test]
        fn any_text_is_safe(text in "(?s)[-#*|:\\[\\]()`a-zA-Z0-9 ./\n\r\u{1F534}é]{0,400}") {
            let findings = extract(&text);
            prop_assert!(findings.len() <= MAX_FINDINGS);
            for finding in findings {
                prop_assert!(!finding.text.is_empty());
                prop_assert!(finding.text.len() <= MAX_TEXT);
                if let Some(file) = &finding.file {
                    prop_assert!(text.contains(file.as_str()));
                }
            }
        }

        /// Bullet style and emphasis do not change what is found.
        #[test]
        fn bullets_and_markup_do_not_matter(
            severity in prop_oneof![Just("Critical"), Just("high"), Just("MEDIUM"), Just("Low")],
            bullet in prop_oneof![Just("- "), Just("* "), Just("+ "), Just("1. "), Just("")],
            bold in any::<bool>(),
            file in "[a-z]{1,8}/[a-z]{1,8}\\.(rs|py|ts)",
            line in 1u32..10_000,
        ) {
            let marked = if bold { format!("**{severity}**") } else { severity.to_owned() };
            let text = format!("{bullet}{marked}: broken thing in {file}:{line}\n");
            let findings = extract(&text);
            prop_assert_eq!(findings.len(), 1, "{}", text);
            prop_assert_eq!(findings[0].severity, Severity::from_word(severity).unwrap());
            prop_assert_eq!(findings[0].file.as_deref(), Some(file.as_str()));
            prop_assert_eq!(findings[0].line, Some(line));
        }
    }
}
