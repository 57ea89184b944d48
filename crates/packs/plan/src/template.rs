//! References to earlier steps (`${steps.ID.FIELD…}`) and the arguments
//! templated from them.
//!
//! A reference is `steps.ID.FIELD`, where FIELD is one of `result` (the
//! step's `structuredContent`, followed by any path of object keys and
//! array indexes: `steps.fetch.result.items.0.name`), `text` (its text
//! content, joined), `outcome` (`completed`, `failed`, `canceled`,
//! `skipped`), `run_id` (its last attempt's run), `error` (its error
//! message) and `attempts`.
//!
//! In a step's `args`, a string that is exactly one `${…}` becomes the
//! value it names, of whatever type (`"${steps.count.result.n}"` can be
//! the number 3); a reference inside longer text is written into it (a
//! string as itself, anything else as JSON). `$${` writes a literal `${`.

use serde_json::Value;

/// A step's field a reference can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// Its structured result, and a path into it.
    Result,
    /// Its text content, joined.
    Text,
    /// How it ended.
    Outcome,
    /// Its last attempt's run id.
    RunId,
    /// Its error message.
    Error,
    /// How many attempts it made.
    Attempts,
}

impl Field {
    fn parse(name: &str) -> Option<Field> {
        Some(match name {
            "result" => Field::Result,
            "text" => Field::Text,
            "outcome" => Field::Outcome,
            "run_id" => Field::RunId,
            "error" => Field::Error,
            "attempts" => Field::Attempts,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Field::Result => "result",
            Field::Text => "text",
            Field::Outcome => "outcome",
            Field::RunId => "run_id",
            Field::Error => "error",
            Field::Attempts => "attempts",
        }
    }
}

/// `steps.ID.FIELD[.path…]`, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    /// The step.
    pub step: String,
    /// Which of its fields.
    pub field: Field,
    /// Keys and indexes into `result`.
    pub path: Vec<String>,
}

impl Reference {
    /// Parses `steps.ID.FIELD[.path…]` (without `${ }`).
    pub fn parse(text: &str) -> Result<Reference, String> {
        let mut parts = text.split('.');
        let bad = |why: &str| format!("${{{text}}} is not a reference: {why}");
        if parts.next() != Some("steps") {
            return Err(bad("it must start with `steps.`"));
        }
        let step = parts
            .next()
            .filter(|id| !id.is_empty())
            .ok_or_else(|| bad("name a step after `steps.`"))?;
        let field = parts.next().ok_or_else(|| {
            bad("name a field after the step: result, text, outcome, run_id, error or attempts")
        })?;
        let field = Field::parse(field).ok_or_else(|| {
            bad(&format!(
                "{field:?} is not a field of a step; use result, text, outcome, run_id, error or attempts"
            ))
        })?;
        let path: Vec<String> = parts.map(str::to_owned).collect();
        if path.iter().any(String::is_empty) {
            return Err(bad("a path has no empty parts"));
        }
        if field != Field::Result && !path.is_empty() {
            return Err(bad("only `result` has fields of its own"));
        }
        Ok(Reference {
            step: step.to_owned(),
            field,
            path,
        })
    }

    /// As written in a plan.
    pub fn written(&self) -> String {
        let mut text = format!("${{steps.{}.{}", self.step, self.field.name());
        for part in &self.path {
            text.push('.');
            text.push_str(part);
        }
        text.push('}');
        text
    }

    /// Follows the path into `value` (the step's `result`).
    pub fn walk<'a>(&self, mut value: &'a Value) -> Result<&'a Value, String> {
        for (depth, part) in self.path.iter().enumerate() {
            let next = match value {
                Value::Object(fields) => fields.get(part),
                Value::Array(items) => part.parse::<usize>().ok().and_then(|i| items.get(i)),
                _ => None,
            };
            value = next.ok_or_else(|| {
                let at = if depth == 0 {
                    format!("step {}'s result", self.step)
                } else {
                    format!(
                        "{} of step {}'s result",
                        self.path[..depth].join("."),
                        self.step
                    )
                };
                format!("{}: {at} has no {part:?}", self.written())
            })?;
        }
        Ok(value)
    }
}

/// A piece of a templated string.
#[derive(Clone, Debug, PartialEq)]
enum Piece {
    Text(String),
    Ref(Reference),
}

/// Splits a string into text and references.
fn pieces(text: &str) -> Result<Vec<Piece>, String> {
    let mut pieces = Vec::new();
    let mut literal = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        literal.push_str(&rest[..at]);
        let after = &rest[at..];
        if let Some(escaped) = after.strip_prefix("$${") {
            literal.push_str("${");
            rest = escaped;
        } else if let Some(open) = after.strip_prefix("${") {
            let end = open.find('}').ok_or_else(|| {
                format!("{text:?} opens a reference with ${{ and never closes it")
            })?;
            if !literal.is_empty() {
                pieces.push(Piece::Text(std::mem::take(&mut literal)));
            }
            pieces.push(Piece::Ref(Reference::parse(open[..end].trim())?));
            rest = &open[end + 1..];
        } else {
            literal.push('$');
            rest = &after[1..];
        }
    }
    literal.push_str(rest);
    if !literal.is_empty() || pieces.is_empty() {
        pieces.push(Piece::Text(literal));
    }
    Ok(pieces)
}

/// Every reference in the strings of `value`, in order.
pub fn references(value: &Value) -> Result<Vec<Reference>, String> {
    let mut found = Vec::new();
    visit(value, &mut |text| {
        for piece in pieces(text)? {
            if let Piece::Ref(reference) = piece {
                found.push(reference);
            }
        }
        Ok(())
    })?;
    Ok(found)
}

fn visit(value: &Value, on: &mut dyn FnMut(&str) -> Result<(), String>) -> Result<(), String> {
    match value {
        Value::String(text) => on(text),
        Value::Array(items) => items.iter().try_for_each(|item| visit(item, on)),
        Value::Object(fields) => fields.values().try_for_each(|field| visit(field, on)),
        _ => Ok(()),
    }
}

/// `value` with each reference replaced by what `lookup` gives for it.
pub fn render(
    value: &Value,
    lookup: &dyn Fn(&Reference) -> Result<Value, String>,
) -> Result<Value, String> {
    Ok(match value {
        Value::String(text) => match &pieces(text)?[..] {
            [Piece::Ref(reference)] => lookup(reference)?,
            pieces => {
                let mut out = String::new();
                for piece in pieces {
                    match piece {
                        Piece::Text(text) => out.push_str(text),
                        Piece::Ref(reference) => match lookup(reference)? {
                            Value::String(text) => out.push_str(&text),
                            other => out.push_str(&other.to_string()),
                        },
                    }
                }
                Value::String(out)
            }
        },
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| render(item, lookup))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(key, field)| Ok((key.clone(), render(field, lookup)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn lookup(reference: &Reference) -> Result<Value, String> {
        let results = json!({"fetch": {"n": 3, "items": [{"name": "a"}], "s": "text"}});
        match reference.field {
            Field::Result => reference.walk(&results[&reference.step]).cloned(),
            Field::Outcome => Ok(json!("completed")),
            _ => Err("no".into()),
        }
    }

    #[test]
    fn a_whole_string_reference_keeps_its_type_and_others_are_written_in() {
        let args = json!({
            "count": "${steps.fetch.result.n}",
            "name": "${steps.fetch.result.items.0.name}",
            "line": "n=${steps.fetch.result.n}, s=${ steps.fetch.result.s }, $${not} $5",
            "nested": ["${steps.fetch.outcome}"],
        });
        assert_eq!(
            render(&args, &lookup).unwrap(),
            json!({
                "count": 3,
                "name": "a",
                "line": "n=3, s=text, ${not} $5",
                "nested": ["completed"],
            })
        );
    }

    #[test]
    fn a_missing_field_says_where_the_path_stopped() {
        let error = render(&json!("${steps.fetch.result.items.0.size}"), &lookup).unwrap_err();
        assert_eq!(
            error,
            "${steps.fetch.result.items.0.size}: items.0 of step fetch's result has no \"size\""
        );
    }

    #[test]
    fn malformed_references_are_explained() {
        let cases = [
            ("${fetch.result}", "it must start with `steps.`"),
            ("${steps.fetch}", "name a field after the step"),
            (
                "${steps.fetch.output}",
                "\"output\" is not a field of a step",
            ),
            (
                "${steps.fetch.outcome.x}",
                "only `result` has fields of its own",
            ),
            ("${steps.fetch.result", "never closes it"),
        ];
        for (text, expected) in cases {
            let error = references(&json!({ "a": text })).unwrap_err();
            assert!(error.contains(expected), "{text}: {error}");
        }
    }

    proptest! {
        /// Text without `$` renders as itself, and a reference written
        /// back from its parts parses to the same reference.
        #[test]
        fn plain_text_is_untouched(text in "[^$]*") {
            prop_assert_eq!(render(&json!(text), &lookup).unwrap(), json!(text));
        }

        #[test]
        fn references_round_trip(step in "[a-z0-9_-]{1,10}", path in proptest::collection::vec("[a-z0-9]{1,5}", 0..4)) {
            let reference = Reference { step, field: Field::Result, path };
            let written = reference.written();
            let inner = &written[2..written.len() - 1];
            prop_assert_eq!(Reference::parse(inner).unwrap(), reference);
        }
    }
}
