//! Short functions (issue 25, item 4): no production function longer than
//! [`LIMIT`] lines. Scans every crate's `src/` (tests, `#[cfg(test)]` items,
//! the files of `#[cfg(test)] mod x;` and the test kits under
//! `crates/testkit` excluded), measures each `fn`
//! body by brace matching over a copy of the text with string literals,
//! char literals and comments blanked, and names the longest.

use std::path::{Path, PathBuf};

/// The longest a production function may be, in lines from `fn` to its
/// closing brace. A ratchet, not a target: it is the longest function left
/// when it was set, and comes down as long ones are split (ARCHITECTURE.md,
/// "Short functions"). Set at 155 (critique's `args::parse`) when issue 25
/// split the longest (llms.txt's `generate::run` was 370 lines).
const LIMIT: usize = 155;

/// A function found in a file: its name, the line its `fn` is on, and its
/// length in lines.
#[derive(Debug, PartialEq)]
struct Function {
    name: String,
    line: usize,
    lines: usize,
}

/// `source` with every comment, string literal and char literal replaced by
/// spaces (newlines kept), so braces and keywords in them are not seen.
fn blank_literals(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    let blank = |out: &mut String, text: &[char]| {
        out.extend(text.iter().map(|&c| if c == '\n' { '\n' } else { ' ' }));
    };
    while i < chars.len() {
        let end = literal_end(&chars, i);
        if end > i {
            blank(&mut out, &chars[i..end]);
            i = end;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// Where the comment or literal starting at `i` ends (exclusive), or `i`
/// when none starts there.
fn literal_end(chars: &[char], i: usize) -> usize {
    let at = |k: usize| chars.get(k).copied().unwrap_or('\0');
    let ident_before = i > 0 && (at(i - 1).is_alphanumeric() || at(i - 1) == '_');
    match (at(i), at(i + 1)) {
        ('/', '/') => (i..chars.len())
            .find(|&k| at(k) == '\n')
            .unwrap_or(chars.len()),
        ('/', '*') => block_comment_end(chars, i),
        ('"', _) => quoted_end(chars, i + 1),
        ('b', '"') if !ident_before => quoted_end(chars, i + 2),
        ('r', '"' | '#') | ('b', 'r') if !ident_before => raw_end(chars, i),
        ('b', '\'') if !ident_before => char_end(chars, i + 1),
        ('\'', _) => char_end(chars, i),
        _ => i,
    }
}

fn block_comment_end(chars: &[char], start: usize) -> usize {
    let mut depth = 0;
    let mut k = start;
    while k + 1 < chars.len() {
        match (chars[k], chars[k + 1]) {
            ('/', '*') => {
                depth += 1;
                k += 2;
            }
            ('*', '/') => {
                depth -= 1;
                k += 2;
                if depth == 0 {
                    return k;
                }
            }
            _ => k += 1,
        }
    }
    chars.len()
}

/// The end of a `"…"` literal whose text starts at `k`.
fn quoted_end(chars: &[char], mut k: usize) -> usize {
    while k < chars.len() {
        match chars[k] {
            '\\' => k += 2,
            '"' => return k + 1,
            _ => k += 1,
        }
    }
    chars.len()
}

/// The end of a raw string (`r"…"`, `r#"…"#`, `br"…"`) starting at
/// `start`; `start` itself when it is an identifier such as `r#type`.
fn raw_end(chars: &[char], start: usize) -> usize {
    let mut k = start + if chars[start] == 'b' { 2 } else { 1 };
    let hashes = chars[k..].iter().take_while(|&&c| c == '#').count();
    k += hashes;
    if chars.get(k) != Some(&'"') {
        return start;
    }
    let close: Vec<char> = std::iter::once('"')
        .chain(std::iter::repeat_n('#', hashes))
        .collect();
    (k + 1..chars.len())
        .find(|&j| chars[j..].starts_with(&close))
        .map_or(chars.len(), |j| j + close.len())
}

/// The end of a char literal at `start` (`'a'`, `'\n'`, `'\u{1F600}'`), or
/// `start` when the quote begins a lifetime or label (`'a`, `'static`).
fn char_end(chars: &[char], start: usize) -> usize {
    match chars.get(start + 1) {
        Some('\\') => (start + 2..chars.len())
            .find(|&k| chars[k] == '\'')
            .map_or(chars.len(), |k| k + 1),
        Some(_) if chars.get(start + 2) == Some(&'\'') => start + 3,
        _ => start,
    }
}

/// Where the brace opened at `open` closes (its index), in blanked text.
fn matching_brace(text: &[char], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (k, &c) in text.iter().enumerate().skip(open) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
    None
}

/// The first `{` or `;` from `from` outside parentheses and brackets (a
/// return type `[u8; 4]` has a `;`), or `None`.
fn item_stop(text: &[char], from: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (k, &c) in text.iter().enumerate().skip(from) {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            '{' | ';' if depth == 0 => return Some(k),
            _ => {}
        }
    }
    None
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `text` (blanked) with every `#[cfg(test)]` item blanked too, and the
/// names of the `#[cfg(test)] mod name;` modules it declares.
fn without_test_items(text: &str) -> (Vec<char>, Vec<String>) {
    let mut chars: Vec<char> = text.chars().collect();
    let marker: Vec<char> = "#[cfg(test)]".chars().collect();
    let mut test_modules = Vec::new();
    let mut k = 0;
    while k < chars.len() {
        if !chars[k..].starts_with(&marker) {
            k += 1;
            continue;
        }
        let item = k + marker.len();
        let Some(stop) = item_stop(&chars, item) else {
            break;
        };
        let end = if chars[stop] == ';' {
            let words: String = chars[item..stop].iter().collect();
            if let ["mod", name] = words.split_whitespace().collect::<Vec<_>>()[..] {
                test_modules.push(name.to_owned());
            }
            stop
        } else {
            matching_brace(&chars, stop).unwrap_or(chars.len() - 1)
        };
        for c in &mut chars[k..=end] {
            if *c != '\n' {
                *c = ' ';
            }
        }
        k = end + 1;
    }
    (chars, test_modules)
}

/// The functions with bodies in `source`, outside `#[cfg(test)]` items, and
/// the `#[cfg(test)] mod name;` modules it declares.
fn functions(source: &str) -> (Vec<Function>, Vec<String>) {
    let (text, test_modules) = without_test_items(&blank_literals(source));
    let line_of = |k: usize| 1 + text[..k].iter().filter(|&&c| c == '\n').count();
    let mut found = Vec::new();
    for k in 0..text.len().saturating_sub(2) {
        let word = text[k] == 'f'
            && text[k + 1] == 'n'
            && text[k + 2].is_whitespace()
            && (k == 0 || !is_ident(text[k - 1]));
        if !word {
            continue;
        }
        let name_start = (k + 2..text.len()).find(|&j| !text[j].is_whitespace());
        let Some(name_start) = name_start.filter(|&j| is_ident(text[j])) else {
            continue; // a `fn(..)` pointer type
        };
        let name: String = text[name_start..]
            .iter()
            .take_while(|&&c| is_ident(c))
            .collect();
        let Some(stop) = item_stop(&text, name_start) else {
            continue;
        };
        if text[stop] == ';' {
            continue; // a declaration without a body
        }
        if let Some(close) = matching_brace(&text, stop) {
            let line = line_of(k);
            found.push(Function {
                name,
                line,
                lines: line_of(close) - line + 1,
            });
        }
    }
    (found, test_modules)
}

/// The directory a file's child modules live in.
fn module_dir(file: &Path) -> PathBuf {
    let parent = file.parent().expect("a file has a directory");
    match file.file_stem().and_then(|stem| stem.to_str()) {
        Some("lib" | "main" | "mod") => parent.to_path_buf(),
        Some(stem) => parent.join(stem),
        None => parent.to_path_buf(),
    }
}

/// Every production source file: `.rs` files under a crate's `src/`, not
/// under `tests/`, test data, build output or `crates/testkit` (crates
/// that exist for tests only, the layering test's `TEST_KITS`).
fn production_files(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![root.join("crates")];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("read a crates directory") {
            let path = entry.expect("a directory entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                if !matches!(
                    name,
                    "tests" | "benches" | "data" | "target" | "node_modules" | "testkit"
                ) {
                    pending.push(path);
                }
            } else if name.ends_with(".rs") && path.components().any(|p| p.as_os_str() == "src") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// Every production function of the workspace, with its file, longest
/// first.
fn production_functions(root: &Path) -> Vec<(PathBuf, Function)> {
    let files = production_files(root);
    let mut test_files = Vec::new();
    let mut all = Vec::new();
    for file in &files {
        let source = std::fs::read_to_string(file).expect("read a source file");
        let (found, test_modules) = functions(&source);
        for name in test_modules {
            let dir = module_dir(file);
            test_files.push(dir.join(format!("{name}.rs")));
            test_files.push(dir.join(name).join("mod.rs"));
        }
        all.extend(found.into_iter().map(|f| (file.clone(), f)));
    }
    all.retain(|(file, _)| !test_files.contains(file));
    all.sort_by_key(|(_, f)| std::cmp::Reverse(f.lines));
    all
}

#[test]
fn no_production_function_is_longer_than_the_limit() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let all = production_functions(root);
    assert!(all.len() > 1_000, "found only {} functions", all.len());
    let show = |(file, f): &(PathBuf, Function)| {
        let file = file.strip_prefix(root).unwrap_or(file).display();
        format!("{} lines: {} ({file}:{})", f.lines, f.name, f.line)
    };
    let longest: Vec<String> = all.iter().take(10).map(show).collect();
    let over_100 = all.iter().filter(|(_, f)| f.lines > 100).count();
    eprintln!(
        "{} production functions, {over_100} over 100 lines; the longest:\n{}",
        all.len(),
        longest.join("\n")
    );
    let over: Vec<String> = all
        .iter()
        .filter(|(_, f)| f.lines > LIMIT)
        .map(show)
        .collect();
    assert!(
        over.is_empty(),
        "production functions longer than {LIMIT} lines (split them):\n{}",
        over.join("\n")
    );
}

/// The scanner sees through what would fool it: braces and `fn` in
/// strings, raw strings, chars and comments; lifetimes; `fn` pointer types;
/// bodiless declarations; `#[cfg(test)]` items.
#[test]
fn the_scanner_measures_bodies_and_skips_literals_comments_and_tests() {
    let source = r####"
fn short() { let _ = "}"; }
fn tricky<'a>(x: &'a str) -> fn(u8) -> u8 {
    let _ = '{';
    let _ = '\'';
    let _ = b'}';
    let _ = r#"} fn fake() { "#;
    // } fn commented() {
    /* } /* nested { */ fn inside() { */
    let r#type = 1;
    todo!()
}
trait T { fn declared(&self) -> [u8; 2]; }
fn array() -> [u8; 2] {
    [0; 2]
}
#[cfg(test)]
mod tests {
    fn a_test_helper() {}
}
#[cfg(test)]
mod more_tests;
"####;
    let (found, test_modules) = functions(source);
    assert_eq!(
        found,
        vec![
            Function {
                name: "short".into(),
                line: 2,
                lines: 1
            },
            Function {
                name: "tricky".into(),
                line: 3,
                lines: 10
            },
            Function {
                name: "array".into(),
                line: 14,
                lines: 3
            },
        ]
    );
    assert_eq!(test_modules, vec!["more_tests".to_owned()]);
}
