//! `weir tools`: the tools an MCP server offers, with their arguments.

use std::io::Write;

use serde_json::Value;
use weir_client::{TaskSupport, ToolDescription};

use crate::cli::ToolsArgs;
use crate::exit::Outcome;
use crate::remote;

pub(crate) async fn run(args: ToolsArgs) -> anyhow::Result<Outcome> {
    let client = match remote::connect(&args.server).await {
        Ok(client) => client,
        Err(error) => return Ok(remote::report(&error, &args.server)),
    };
    let listed = client.list_tools().await;
    client.close().await;
    let tools = match listed {
        Ok(tools) => tools,
        Err(error) => return Ok(remote::report(&error, &args.server)),
    };
    let text = if args.json {
        serde_json::to_string_pretty(&tools)? + "\n"
    } else {
        tools.iter().map(describe).collect()
    };
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        // `| head`: the reader has what it wanted.
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(Outcome::Completed),
        written => written.map(|()| Outcome::Completed).map_err(Into::into),
    }
}

/// A tool in a few lines: name, what it does, how it runs, its arguments.
fn describe(tool: &ToolDescription) -> String {
    let mut text = tool.name.clone();
    let summary = tool
        .description
        .as_deref()
        .or(tool.title.as_deref())
        .and_then(|text| text.lines().next())
        .unwrap_or_default();
    if !summary.is_empty() {
        text.push_str(&format!(" — {summary}"));
    }
    let mut traits = Vec::new();
    if tool.streams {
        traits.push("streams");
    }
    match tool.task_support {
        TaskSupport::Required => traits.push("runs as a task"),
        TaskSupport::Optional => traits.push("task optional"),
        TaskSupport::Forbidden => {}
    }
    if !traits.is_empty() {
        text.push_str(&format!(" [{}]", traits.join(", ")));
    }
    text.push('\n');
    let schema = &tool.input_schema;
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let properties = schema.get("properties").and_then(Value::as_object);
    let width = properties
        .and_then(|p| p.keys().map(String::len).max())
        .unwrap_or(0);
    for (name, property) in properties.into_iter().flatten() {
        let kind = kind(property);
        let mut line = format!("    {name:<width$}  {kind:<8}");
        if let Some(about) = property
            .get("description")
            .and_then(Value::as_str)
            .and_then(|text| text.lines().next())
        {
            line.push_str(&format!("  {about}"));
        }
        let mut notes = Vec::new();
        if required.contains(&name.as_str()) {
            notes.push("required".to_owned());
        }
        if let Some(choices) = property.get("enum").and_then(Value::as_array) {
            let choices: Vec<String> = choices.iter().map(Value::to_string).collect();
            notes.push(format!("one of {}", choices.join(", ")));
        }
        if let Some(default) = property.get("default") {
            notes.push(format!("default {default}"));
        }
        if !notes.is_empty() {
            line.push_str(&format!(" ({})", notes.join("; ")));
        }
        text.push_str(line.trim_end());
        text.push('\n');
        // What goes in a list of objects: its fields, on the next line.
        if let Some(fields) = item_fields(property) {
            text.push_str(&format!("    {:<width$}  each: {fields}\n", ""));
        }
    }
    text
}

/// A schema's type in a word: `string`, `integer|null`, `string[]` for an
/// array of strings, `object[]`; `any` when it does not say.
fn kind(schema: &Value) -> String {
    match schema.get("type") {
        Some(Value::String(kind)) if kind == "array" => match schema.get("items") {
            Some(items) if items.get("type").is_some() => format!("{}[]", kind_of(items)),
            _ => "array".into(),
        },
        Some(_) => kind_of(schema),
        None => "any".into(),
    }
}

/// A schema's own type name(s), without looking into arrays.
fn kind_of(schema: &Value) -> String {
    match schema.get("type") {
        Some(Value::String(kind)) => kind.clone(),
        Some(Value::Array(kinds)) => kinds
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join("|"),
        _ => "any".into(),
    }
}

/// For an array of objects: `{name: string, args?: object, after?: string[]}`
/// (`?`: not required).
fn item_fields(schema: &Value) -> Option<String> {
    let items = schema.get("items")?;
    let properties = items.get("properties")?.as_object()?;
    let required: Vec<&str> = items
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let fields: Vec<String> = properties
        .iter()
        .map(|(name, field)| {
            let optional = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            format!("{name}{optional}: {}", kind(field))
        })
        .collect();
    Some(format!("{{{}}}", fields.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A list says what it holds; a list of objects, their fields.
    #[test]
    fn arrays_show_their_items_shape() {
        let tool = ToolDescription {
            name: "run".into(),
            title: None,
            description: None,
            input_schema: json!({"type": "object", "properties": {
                "args": {"type": "array", "items": {"type": "string"}},
                "files": {"type": "array", "items": {"type": "object", "required": ["path"],
                    "properties": {"path": {"type": "string"}, "mode": {"type": ["integer", "null"]},
                                   "tags": {"type": "array", "items": {"type": "string"}}}}},
                "any": {"type": "array"}
            }}),
            output_schema: None,
            task_support: TaskSupport::Forbidden,
            streams: false,
        };
        assert_eq!(
            describe(&tool),
            "run\n    any    array\n    args   string[]\n    files  object[]\n           each: {mode?: integer|null, path: string, tags?: string[]}\n"
        );
    }

    #[test]
    fn a_tool_reads_as_name_summary_and_arguments() {
        let tool = ToolDescription {
            name: "stream".into(),
            title: None,
            description: Some("Streams items.\nMore detail.".into()),
            input_schema: json!({"type": "object", "required": ["count"], "properties": {
                "count": {"type": "integer", "description": "How many.", "default": 10},
                "mode": {"type": "string", "enum": ["text", "items"]}
            }}),
            output_schema: None,
            task_support: TaskSupport::Optional,
            streams: true,
        };
        assert_eq!(
            describe(&tool),
            "stream — Streams items. [streams, task optional]\n    count  integer   How many. (required; default 10)\n    mode   string   (one of \"text\", \"items\")\n"
        );
    }
}
