//! The run as a whole, projected onto MCP: one `CallToolResult`.
//!
//! The final result ([`ResultBuilder`]) is what a model reads, often the
//! only thing: content blocks in the order the run produced them, where a
//! partial group's text (a program's stdout, say) is one stream — its
//! consecutive blocks are merged into one, since hosts join blocks with
//! blank lines; text without a group is an item per block, kept as it came
//! — and, when the run's text came in more than one group, each merged
//! block begins with its group's name on a line of its own, `[stderr]`
//! (plain text, since models read no annotations). A tool that
//! declares text fields (`ToolInfo::with_text_fields`) also gets its
//! groups' text in `structuredContent`, for hosts that hand the model only
//! that.

use serde_json::{Map, Value, json};
use weir_core::{Content, EventKind, RunEvent, RunId};
use weir_runtime::with_streamed_fields;

use crate::wire::{McpContent, TEXT_BLOCK_LEN, content_len, json_len, text_json_len};
use weir_mcp_wire::revision::meta_key;

/// MCP's JSON form of a content block, as a value.
pub(crate) fn content_json(content: &Content) -> Value {
    serde_json::to_value(McpContent(content)).expect("content blocks serialize")
}

/// Builds the final `CallToolResult` from a run's events: complete up to
/// `limit` bytes, then truncated with a link to the whole run.
///
/// The limit counts what grows with the output: content blocks as JSON,
/// structured items, and text carried in text fields; once something does
/// not fit, nothing after it is kept (whole stream chunks, whole blocks),
/// and a note and a `resource_link` end the content. A group's stream is
/// counted as the one block it becomes, with room for its `[group]` line
/// whether or not it gets one, so the limit holds either way.
pub(crate) struct ResultBuilder {
    run_id: RunId,
    limit: usize,
    used: usize,
    truncated: bool,
    content: Vec<Piece>,
    items: Vec<Value>,
    structured: Option<Value>,
    error: Option<String>,
    /// Whether the run handed back a result: it completed, or it failed
    /// with one (`RunError::result`). A failed run's text fields are
    /// filled in only then.
    has_result: bool,
    /// Every group a text partial came in, kept or not, in order of first
    /// appearance: with more than one, each stream's block is labelled.
    groups: Vec<String>,
    /// The tool's text fields: each group, and its text so far.
    fields: Vec<(String, String)>,
    /// How many blocks of `content` came from partials: those before the
    /// terminal event's.
    streamed: Option<usize>,
    /// The run's terminal event, by its type name.
    ended: Option<&'static str>,
    /// Say on the result how the run ended (`Scope::run_notices`).
    run_notices: bool,
}

/// A block of the final content, before it is written.
enum Piece {
    /// The text of consecutive partial blocks of one group.
    Stream { group: String, text: String },
    /// A text block without a group: just its text, written as a block
    /// at the end. Kept apart from `Block` because a run's result may hold
    /// hundreds of them: as a JSON value each cost about 800 bytes for 100
    /// of text (a map, its keys), 10,000 runs' results 1.6 GB (issue 27).
    Text(Box<str>),
    /// Any other block, as MCP writes it.
    Block(Value),
}

/// The first line of a group's block when a run has several: `[stderr]`.
fn group_label(group: &str) -> String {
    format!("[{group}]\n")
}

/// A text content block, with `text` moved in (not copied by `json!`).
/// Inserted one by one: collecting a map from a list first makes a
/// vector of the pairs to sort, one more allocation for each of the
/// thousands of blocks a stream's result holds.
fn text_block(text: String) -> Value {
    let mut block = Map::new();
    block.insert("type".into(), "text".into());
    block.insert("text".into(), Value::String(text));
    Value::Object(block)
}

impl ResultBuilder {
    pub(crate) fn new(run_id: RunId, limit: usize) -> ResultBuilder {
        ResultBuilder {
            run_id,
            limit,
            used: 0,
            truncated: false,
            content: Vec::new(),
            items: Vec::new(),
            structured: None,
            error: None,
            has_result: false,
            groups: Vec::new(),
            fields: Vec::new(),
            streamed: None,
            ended: None,
            run_notices: false,
        }
    }

    /// The result will say, in `_meta["io.weir/run"]`, which run it is,
    /// how it ended, how many of its first content blocks the partials
    /// carried (a client that showed them need not show them again) and
    /// whether the content was cut.
    pub(crate) fn run_notices(&mut self) {
        self.run_notices = true;
    }

    /// The run's tool declared these text fields (`ToolInfo::text_fields`):
    /// the text of each group goes into `structuredContent` too. Must come
    /// before the run's partials (the follower calls it on `started`).
    pub(crate) fn text_fields(&mut self, groups: &[String]) {
        self.fields = groups
            .iter()
            .map(|group| (group.clone(), String::new()))
            .collect();
    }

    /// Whether `size` more bytes fit; once something did not, nothing does.
    fn fits(&mut self, size: usize) -> bool {
        if self.truncated || self.used + size > self.limit {
            self.truncated = true;
            return false;
        }
        self.used += size;
        true
    }

    fn keep_content(&mut self, block: &Content) {
        if !self.truncated && self.fits(content_len(block)) {
            self.content.push(match block {
                Content::Text { text } => Piece::Text(text.as_str().into()),
                block => Piece::Block(content_json(block)),
            });
        }
    }

    fn keep_item(&mut self, item: &Value) {
        if !self.truncated && self.fits(json_len(item)) {
            self.items.push(item.clone());
        }
    }

    /// `text`, written to `group`: appended to the group's block when it is
    /// the last one, else the start of a new one; and to its field.
    fn keep_stream(&mut self, group: &str, text: &str) {
        if !self.groups.iter().any(|seen| seen == group) {
            self.groups.push(group.to_owned());
        }
        if self.truncated {
            return;
        }
        let field = self.fields.iter().position(|(name, _)| name == group);
        let continues =
            matches!(self.content.last(), Some(Piece::Stream { group: last, .. }) if last == group);
        let text_len = text_json_len(text);
        let block_len = if continues {
            0
        } else {
            TEXT_BLOCK_LEN + text_json_len(&group_label(group))
        };
        let field_len = if field.is_some() { text_len } else { 0 };
        if !self.fits(block_len + text_len + field_len) {
            return;
        }
        match self.content.last_mut() {
            Some(Piece::Stream { text: stream, .. }) if continues => stream.push_str(text),
            _ => self.content.push(Piece::Stream {
                group: group.to_owned(),
                text: text.to_owned(),
            }),
        }
        if let Some(index) = field {
            self.fields[index].1.push_str(text);
        }
    }

    pub(crate) fn add(&mut self, event: &RunEvent) {
        if event.kind.is_terminal() {
            self.streamed.get_or_insert(self.content.len());
            self.ended = Some(event.kind.type_name());
        }
        match &event.kind {
            EventKind::Partial(partial) => {
                for block in &partial.content {
                    match (block, &partial.group) {
                        (Content::Text { text }, Some(group)) => self.keep_stream(group, text),
                        (block, _) => self.keep_content(block),
                    }
                }
                for item in &partial.items {
                    self.keep_item(item);
                }
            }
            EventKind::Completed(completed) => {
                for block in &completed.content {
                    self.keep_content(block);
                }
                self.structured = completed.structured.clone();
                self.has_result = true;
            }
            EventKind::Failed(failed) => {
                // A failed run may still hand back what it produced (a
                // program that exited non-zero: its exit code, its output).
                if let Some(result) = &failed.error.result {
                    for block in &result.content {
                        self.keep_content(block);
                    }
                    self.structured = result.structured.clone();
                    self.has_result = true;
                }
                self.error = Some(failed.error.to_string());
            }
            EventKind::Canceled(canceled) => {
                self.error = Some(format!("canceled: {}", canceled.reason))
            }
            _ => {}
        }
    }

    pub(crate) fn finish(mut self) -> Value {
        let is_error = self.error.is_some();
        let labelled = self.groups.len() > 1;
        let run = self.run_notices.then(|| {
            json!({
                "id": self.run_id.as_str(),
                "state": self.ended,
                "streamed": self.streamed.unwrap_or(self.content.len()),
                "truncated": self.truncated,
            })
        });
        let mut content: Vec<Value> = self
            .content
            .into_iter()
            .map(|piece| match piece {
                Piece::Stream { group, mut text } => {
                    if labelled {
                        text.insert_str(0, &group_label(&group));
                    }
                    text_block(text)
                }
                Piece::Text(text) => text_block(text.into()),
                Piece::Block(block) => block,
            })
            .collect();
        if let Some(error) = self.error.take() {
            content.push(json!({ "type": "text", "text": error }));
        }
        let uri = format!("weir://runs/{}", self.run_id);
        if self.truncated {
            content.push(json!({
                "type": "text",
                "text": format!(
                    "[output truncated at {} bytes; the whole output is in run {}: page through it with the runs_events tool, or read the resource {uri}]",
                    self.limit, self.run_id
                ),
            }));
            content.push(json!({
                "type": "resource_link",
                "uri": uri,
                "name": format!("run {}", self.run_id),
                "mimeType": "application/json",
            }));
        }
        // Moved in, not written with `json!`: that macro serializes its
        // arguments into a new value, a copy of up to `limit` bytes.
        let mut result = Map::new();
        result.insert("content".into(), Value::Array(content));
        let mut structured = self.structured.or_else(|| {
            (!self.items.is_empty()).then(|| {
                Value::Object(Map::from_iter([("items".into(), Value::Array(self.items))]))
            })
        });
        if !is_error || self.has_result {
            structured =
                with_streamed_fields(structured, self.fields, self.truncated, &self.run_id);
        }
        if let Some(structured) = structured {
            result.insert("structuredContent".into(), structured);
        }
        if is_error {
            result.insert("isError".into(), true.into());
        }
        if let Some(run) = run {
            result.insert("_meta".into(), json!({ meta_key::WEIR_RUN: run }));
        }
        Value::Object(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::projection::tests::{event, output, partial};
    use crate::wire::to_json;
    use weir_core::{Completed, RunId};

    /// The final result of `kinds` (after `started`), for a tool with
    /// text fields `fields`, with a result limit of `limit` bytes.
    fn result_of(limit: usize, fields: &[&str], kinds: Vec<EventKind>) -> Value {
        let mut builder = ResultBuilder::new(RunId::parse("r").unwrap(), limit);
        builder.text_fields(&fields.iter().map(|f| (*f).to_owned()).collect::<Vec<_>>());
        for (i, kind) in kinds.into_iter().enumerate() {
            builder.add(&event(i as u64 + 1, 1_000, kind));
        }
        builder.finish()
    }

    fn texts(result: &Value) -> Vec<&str> {
        result["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|block| block["text"].as_str())
            .collect()
    }

    fn completed(structured: Option<Value>) -> EventKind {
        EventKind::Completed(Completed {
            content: vec![Content::text("[exit code 0]")],
            structured,
        })
    }

    /// Asked, the result says which run it is, how it ended and how many
    /// of its first blocks the partials carried; else it says nothing.
    #[test]
    fn the_result_says_how_the_run_ended_when_asked() {
        let kinds = || {
            vec![
                output("stdout", "a\n"),
                output("stderr", "b\n"),
                partial("item"),
                EventKind::Canceled(weir_core::Canceled {
                    reason: "by another client".into(),
                }),
            ]
        };
        let mut builder = ResultBuilder::new(RunId::parse("r").unwrap(), 4096);
        builder.run_notices();
        for (i, kind) in kinds().into_iter().enumerate() {
            builder.add(&event(i as u64 + 1, 1_000, kind));
        }
        let result = builder.finish();
        assert_eq!(
            result["_meta"]["io.weir/run"],
            json!({"id": "r", "state": "canceled", "streamed": 3, "truncated": false})
        );
        assert_eq!(texts(&result).len(), 4, "{result}");
        assert!(result_of(4096, &[], kinds()).get("_meta").is_none());
    }

    /// A group's text is one stream: its consecutive blocks become one
    /// block, joined as written (the text has its own newlines, and a line
    /// cut by a pause is whole again). Text without a group is an item per
    /// block, and the tool's own final blocks stay as they are.
    #[test]
    fn a_groups_consecutive_text_is_one_block() {
        let result = result_of(
            4096,
            &[],
            vec![
                output("stdout", "line 1\n"),
                output("stdout", "line 2\nhalf a "),
                output("stdout", "line\n"),
                partial("item a"),
                partial("item b"),
                output("stdout", "line 4\n"),
                completed(None),
            ],
        );
        assert_eq!(
            texts(&result),
            [
                "line 1\nline 2\nhalf a line\n",
                "item a",
                "item b",
                "line 4\n",
                "[exit code 0]"
            ]
        );
        assert!(result.get("structuredContent").is_none());
    }

    /// With more than one group, each block says which it is; the lines of
    /// a stream keep their order across the other group's.
    #[test]
    fn blocks_say_their_group_when_there_are_several() {
        let result = result_of(
            4096,
            &[],
            vec![
                output("stdout", "a\n"),
                output("stdout", "b\n"),
                output("stderr", "warning: x\n"),
                output("stdout", "c\n"),
                completed(None),
            ],
        );
        assert_eq!(
            texts(&result),
            [
                "[stdout]\na\nb\n",
                "[stderr]\nwarning: x\n",
                "[stdout]\nc\n",
                "[exit code 0]"
            ]
        );
    }

    /// A tool with text fields gets each group's text in its structured
    /// result, beside its own fields (a value it set under those names is
    /// replaced), with whether it was cut and where the run is.
    #[test]
    fn text_fields_carry_each_groups_text() {
        let result = result_of(
            4096,
            &["stdout", "stderr"],
            vec![
                output("stdout", "1\n"),
                output("stderr", "oops\n"),
                output("stdout", "2\n"),
                output("weir", "[a notice]\n"),
                completed(Some(json!({"exit_code": 0, "stdout": "the tool's own"}))),
            ],
        );
        assert_eq!(
            result["structuredContent"],
            json!({
                "exit_code": 0,
                "stdout": "1\n2\n",
                "stderr": "oops\n",
                "output_truncated": false,
                "output_uri": "weir://runs/r",
            })
        );
        // Without a structured result of its own, the fields alone; a
        // failed run has no structured result.
        let alone = result_of(4096, &["stdout"], vec![completed(None)]);
        assert_eq!(
            alone["structuredContent"],
            json!({"stdout": "", "output_truncated": false, "output_uri": "weir://runs/r"})
        );
        let failed = result_of(
            4096,
            &["stdout"],
            vec![
                output("stdout", "1\n"),
                EventKind::Failed(weir_core::Failed {
                    error: weir_core::RunError::new(weir_core::FailureCode::Timeout, "too slow"),
                }),
            ],
        );
        assert!(failed.get("structuredContent").is_none(), "{failed}");
        assert_eq!(failed["isError"], true);
        assert_eq!(texts(&failed), ["1\n", "too slow"]);
    }

    /// A run that failed with a result (a program that exited non-zero) is
    /// an error that still carries everything: its streams, its own
    /// content, its structured result with the text fields, then why.
    #[test]
    fn a_failed_run_with_a_result_keeps_it() {
        let result = result_of(
            4096,
            &["stdout", "stderr"],
            vec![
                output("stdout", "1\n"),
                output("stderr", "oops\n"),
                EventKind::Failed(weir_core::Failed {
                    error: weir_core::RunError::new(
                        weir_core::FailureCode::ToolError,
                        "the program exited with code 3",
                    )
                    .with_result(Completed {
                        content: vec![Content::text("[exit code 3]")],
                        structured: Some(json!({"exit_code": 3})),
                    }),
                }),
            ],
        );
        assert_eq!(result["isError"], true);
        assert_eq!(
            texts(&result),
            [
                "[stdout]\n1\n",
                "[stderr]\noops\n",
                "[exit code 3]",
                "the program exited with code 3"
            ]
        );
        assert_eq!(
            result["structuredContent"],
            json!({
                "exit_code": 3,
                "stdout": "1\n",
                "stderr": "oops\n",
                "output_truncated": false,
                "output_uri": "weir://runs/r",
            })
        );
    }

    /// Past the limit, content and text fields stop at the same chunk,
    /// the fields say so and point at the run, and the content ends with
    /// the note and the link.
    #[test]
    fn a_cut_stream_says_so_in_content_and_fields() {
        let chunk = "x".repeat(99) + "\n";
        let result = result_of(
            // Room for one block of two chunks, each counted twice.
            TEXT_BLOCK_LEN + text_json_len(&group_label("stdout")) + 4 * text_json_len(&chunk),
            &["stdout"],
            vec![
                output("stdout", &chunk),
                output("stdout", &chunk),
                output("stdout", &chunk),
                completed(Some(json!({"exit_code": 0}))),
            ],
        );
        let structured = &result["structuredContent"];
        assert_eq!(structured["stdout"], chunk.repeat(2));
        assert_eq!(structured["output_truncated"], true);
        assert_eq!(structured["output_uri"], "weir://runs/r");
        let content = result["content"].as_array().unwrap();
        assert_eq!(content[0]["text"], chunk.repeat(2));
        assert!(
            content[1]["text"]
                .as_str()
                .unwrap()
                .starts_with("[output truncated at")
        );
        assert_eq!(content[2]["type"], "resource_link");
        assert_eq!(content.len(), 3, "the summary came after the cut: {result}");
    }

    /// A chunk of a stream: its group (none, or one of three), and text
    /// with what needs escaping.
    fn chunk() -> impl proptest::strategy::Strategy<Value = (Option<&'static str>, String)> {
        use proptest::prelude::*;
        (
            prop::sample::select(vec![None, Some("stdout"), Some("stderr"), Some("weir")]),
            "(\\PC|[\n\t\"\\\\]){0,40}",
        )
    }

    proptest::proptest! {
        /// Whatever the chunks and the limit: what the content holds (and
        /// the fields carry) fits in the limit, labels included; each
        /// group's text is a prefix of what it streamed, whole when
        /// nothing was cut; no two blocks in a row are of one group.
        #[test]
        fn the_limit_holds_and_streams_stay_whole(
            chunks in proptest::collection::vec(chunk(), 0..30),
            limit in 0usize..3_000,
        ) {
            let kinds: Vec<EventKind> = chunks
                .iter()
                .map(|(group, text)| match group {
                    Some(group) => output(group, text),
                    None => partial(text),
                })
                .collect();
            let result = result_of(limit, &["stdout"], kinds.clone());
            let content = result["content"].as_array().unwrap();
            let truncated = result["structuredContent"]["output_truncated"] == true;
            let kept = if truncated { &content[..content.len() - 2] } else { &content[..] };
            let carried = result["structuredContent"]["stdout"].as_str().unwrap();
            let used: usize = kept.iter().map(|block| to_json(block).len()).sum::<usize>()
                + text_json_len(carried);
            proptest::prop_assert!(used <= limit, "{used} > {limit}: {result}");
            let streamed = |group: &str| -> String {
                chunks.iter().filter(|(g, _)| *g == Some(group)).map(|(_, t)| t.as_str()).collect()
            };
            proptest::prop_assert!(streamed("stdout").starts_with(carried));
            if !truncated {
                proptest::prop_assert_eq!(carried, streamed("stdout"));
                proptest::prop_assert_eq!(kept.len(), {
                    let mut blocks = 0;
                    let mut last: Option<Option<&str>> = None;
                    for (group, _) in &chunks {
                        if group.is_none() || last != Some(*group) {
                            blocks += 1;
                        }
                        last = Some(*group);
                    }
                    blocks
                });
            }
        }
    }
}
