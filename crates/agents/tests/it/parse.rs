//! Each CLI's real stdout (recorded from the pinned versions against a
//! fake endpoint, in tests/data) through its parser, one event a line.
//! `UPDATE_EXPECT=1` rewrites the expectations.

use expect_test::{Expect, expect};
use weir_agents::parse::Parser;
use weir_agents::{AgentEvent, CliKind};

/// The events of `file` as `cli`'s parser reads it, one a line: its JSON
/// form, unknown lines by their type only (some are 20 KB).
fn check(cli: CliKind, include_partial: bool, control: bool, file: &str, expected: Expect) {
    let path = format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"));
    let events = Parser::new(&cli, include_partial, control).lines(&text);
    let rendered: Vec<String> = events
        .iter()
        .map(|event| match event {
            AgentEvent::Unknown { line } => format!(
                "unknown {}",
                line.get("type")
                    .map_or_else(|| line.to_string(), ToString::to_string)
            ),
            other => serde_json::to_string(other).unwrap(),
        })
        .collect();
    expected.assert_eq(&(rendered.join("\n") + "\n"));
}

#[test]
fn claude_light_mode_gives_each_block_whole() {
    check(
        CliKind::Claude,
        false,
        false,
        "claude-p-stream-json.ndjson",
        expect![[r#"
            {"type":"session_started","session_id":"d77a5472-39fb-440b-ba8c-acd3857df4e5","model":"claude-opus-5-5"}
            {"type":"text_delta","text":"Hi! (scripted reply from fake server)"}
            {"type":"message","text":"Hi! (scripted reply from fake server)"}
            {"type":"result","text":"Hi! (scripted reply from fake server)","is_error":false,"subtype":"success","usage":{"input_tokens":11,"output_tokens":7},"cost_usd":0.00018399999999999997,"duration_ms":182,"session_id":"d77a5472-39fb-440b-ba8c-acd3857df4e5"}
        "#]],
    );
}

#[test]
fn claude_partial_messages_give_deltas_and_whole_messages_once() {
    check(
        CliKind::Claude,
        true,
        false,
        "claude-p-stream-json-partial.ndjson",
        expect![[r#"
            {"type":"session_started","session_id":"eafb0367-3af0-450c-82fc-8d56bd03d469","model":"claude-opus-5-5"}
            {"type":"text_delta","text":"Hi! (scripted reply "}
            {"type":"text_delta","text":"from fake server)"}
            {"type":"message","text":"Hi! (scripted reply from fake server)"}
            {"type":"result","text":"Hi! (scripted reply from fake server)","is_error":false,"subtype":"success","usage":{"input_tokens":11,"output_tokens":7},"cost_usd":0.00018399999999999997,"duration_ms":184,"session_id":"eafb0367-3af0-450c-82fc-8d56bd03d469"}
        "#]],
    );
}

#[test]
fn claude_thinking_and_two_turns_on_one_process() {
    check(
        CliKind::Claude,
        true,
        true,
        "claude-multiturn-thinking-partial.out.ndjson",
        expect![[r#"
            unknown "control_response"
            {"type":"session_started","session_id":"db76a2df-c8d8-4882-a257-8e722c46ceac","model":"claude-opus-5-5"}
            {"type":"thinking_delta","text":"The user wants "}
            {"type":"thinking_delta","text":"a greeting. Keep "}
            {"type":"thinking_delta","text":"it short."}
            {"type":"text_delta","text":"Hello there!"}
            {"type":"message","text":"Hello there!"}
            {"type":"result","text":"Hello there!","is_error":false,"subtype":"success","usage":{"input_tokens":11,"output_tokens":7},"cost_usd":0.00018399999999999997,"duration_ms":157,"session_id":"db76a2df-c8d8-4882-a257-8e722c46ceac"}
            {"type":"session_started","session_id":"db76a2df-c8d8-4882-a257-8e722c46ceac","model":"claude-opus-5-5"}
            {"type":"text_delta","text":"Second turn reply."}
            {"type":"message","text":"Second turn reply."}
            {"type":"result","text":"Second turn reply.","is_error":false,"subtype":"success","usage":{"input_tokens":11,"output_tokens":7},"cost_usd":0.00036799999999999995,"duration_ms":34,"session_id":"db76a2df-c8d8-4882-a257-8e722c46ceac"}
        "#]],
    );
}

#[test]
fn claude_api_error_is_an_error_result_despite_its_success_subtype() {
    check(
        CliKind::Claude,
        false,
        false,
        "claude-api-error-500.ndjson",
        expect![[r#"
            {"type":"session_started","session_id":"434e5c25-fedd-47a7-94c9-ebe1efe11829","model":"claude-opus-5-5"}
            {"type":"text_delta","text":"API Error: 500 scripted server error. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your inference gateway (127.0.0.1:18080)."}
            {"type":"message","text":"API Error: 500 scripted server error. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your inference gateway (127.0.0.1:18080)."}
            {"type":"result","text":"API Error: 500 scripted server error. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your inference gateway (127.0.0.1:18080).","is_error":true,"subtype":"success","usage":{"input_tokens":0,"output_tokens":0},"cost_usd":0.0,"duration_ms":154,"session_id":"434e5c25-fedd-47a7-94c9-ebe1efe11829"}
        "#]],
    );
}

#[test]
fn claude_denied_tool_is_reported_once_from_the_result_in_light_mode() {
    check(
        CliKind::Claude,
        false,
        false,
        "claude-can-use-tool-deny.out.ndjson",
        expect![[r#"
            unknown "control_response"
            {"type":"session_started","session_id":"bc896060-8518-4a27-8bf4-daa5cedb01ea","model":"claude-opus-5-5"}
            {"type":"text_delta","text":"I'll create a file."}
            {"type":"message","text":"I'll create a file."}
            {"type":"tool_use","id":"toolu_1fbc71bd2d2f42e59414","name":"Bash","input":{"command":"touch marker.txt && echo created","description":"Create marker file"}}
            unknown "control_request"
            {"type":"tool_result","id":"toolu_1fbc71bd2d2f42e59414","content":"denied by test host","is_error":true}
            {"type":"text_delta","text":"Done."}
            {"type":"message","text":"Done."}
            {"type":"permission_request","tool_name":"Bash","input":{"command":"touch marker.txt && echo created","description":"Create marker file"},"tool_use_id":"toolu_1fbc71bd2d2f42e59414","allowed":false}
            {"type":"result","text":"Done.","is_error":false,"subtype":"success","usage":{"input_tokens":22,"output_tokens":14},"cost_usd":0.00036799999999999995,"duration_ms":316,"session_id":"bc896060-8518-4a27-8bf4-daa5cedb01ea"}
        "#]],
    );
}

#[test]
fn claude_interrupted_turn_ends_with_an_error_result() {
    check(
        CliKind::Claude,
        true,
        true,
        "claude-interrupt.out.ndjson",
        expect![[r#"
            unknown "control_response"
            {"type":"session_started","session_id":"65600f45-4c23-4d98-b424-d6f6441b6437","model":"claude-opus-5-5"}
            {"type":"text_delta","text":"one two three "}
            unknown "control_response"
            {"type":"message","text":"one two three "}
            {"type":"result","text":null,"is_error":true,"subtype":"error_during_execution","usage":{"input_tokens":0,"output_tokens":0},"cost_usd":0.000144,"duration_ms":1039,"session_id":"65600f45-4c23-4d98-b424-d6f6441b6437"}
        "#]],
    );
}

#[test]
fn codex_items_become_messages_tool_uses_and_results() {
    check(
        CliKind::Codex,
        false,
        false,
        "codex-exec-apply-patch-and-command.ndjson",
        expect![[r#"
            {"type":"session_started","session_id":"01a201a6-d360-7632-b945-2eb770365112","model":null}
            {"type":"text_delta","text":"Creating a file with apply_patch."}
            {"type":"message","text":"Creating a file with apply_patch."}
            {"type":"tool_use","id":"item_1","name":"file_change","input":{"changes":[{"kind":"add","path":"$AGENTCLI/cwd-codex/hello.txt"}]}}
            {"type":"tool_result","id":"item_1","content":"add $AGENTCLI/cwd-codex/hello.txt","is_error":false}
            {"type":"text_delta","text":"Now a command."}
            {"type":"message","text":"Now a command."}
            {"type":"tool_use","id":"item_3","name":"command_execution","input":{"command":"/bin/bash -lc 'cat hello.txt'"}}
            {"type":"tool_result","id":"item_3","content":"hello world\n","is_error":false}
            {"type":"text_delta","text":"All done."}
            {"type":"message","text":"All done."}
            {"type":"result","text":"All done.","is_error":false,"subtype":"turn.completed","usage":{"input_tokens":33,"output_tokens":21},"cost_usd":null,"duration_ms":null,"session_id":"01a201a6-d360-7632-b945-2eb770365112"}
        "#]],
    );
}

#[test]
fn codex_reasoning_is_thinking() {
    check(
        CliKind::Codex,
        false,
        false,
        "codex-exec-reasoning.ndjson",
        expect![[r#"
            {"type":"session_started","session_id":"01a201ad-712b-7813-8492-6ba945e981eb","model":null}
            {"type":"thinking_delta","text":"**Planning** I should greet the user."}
            {"type":"text_delta","text":"Hello!"}
            {"type":"message","text":"Hello!"}
            {"type":"result","text":"Hello!","is_error":false,"subtype":"turn.completed","usage":{"input_tokens":11,"output_tokens":7},"cost_usd":null,"duration_ms":null,"session_id":"01a201ad-712b-7813-8492-6ba945e981eb"}
        "#]],
    );
}

#[test]
fn codex_failed_turn_is_an_error_and_an_error_result() {
    check(
        CliKind::Codex,
        false,
        false,
        "codex-exec-error-500.ndjson",
        expect![[r#"
            {"type":"session_started","session_id":"01a201aa-da4d-7551-aea0-32908bc130eb","model":null}
            {"type":"error","message":"We’re currently experiencing high demand, which may cause temporary errors."}
            {"type":"result","text":"We’re currently experiencing high demand, which may cause temporary errors.","is_error":true,"subtype":"turn.failed","usage":null,"cost_usd":null,"duration_ms":null,"session_id":"01a201aa-da4d-7551-aea0-32908bc130eb"}
        "#]],
    );
}

#[test]
fn codex_warning_item_is_an_error_event_not_the_end() {
    check(
        CliKind::Codex,
        false,
        false,
        "codex-exec-unknown-model-warning.ndjson",
        expect![[r#"
            {"type":"session_started","session_id":"01a201a6-4697-7540-a6d3-1c28f8acf0cb","model":null}
            {"type":"error","message":"Model metadata for `gpt-5.1-codex` not found. Defaulting to fallback metadata; this can degrade performance and cause issues."}
            {"type":"text_delta","text":"Hi! (scripted reply from fake server)"}
            {"type":"message","text":"Hi! (scripted reply from fake server)"}
            {"type":"result","text":"Hi! (scripted reply from fake server)","is_error":false,"subtype":"turn.completed","usage":{"input_tokens":11,"output_tokens":7},"cost_usd":null,"duration_ms":null,"session_id":"01a201a6-4697-7540-a6d3-1c28f8acf0cb"}
        "#]],
    );
}

#[test]
fn gemini_deltas_are_gathered_into_messages() {
    check(
        CliKind::Gemini,
        false,
        false,
        "gemini-hello.ndjson",
        expect![[r#"
            {"type":"session_started","session_id":"bff85726-feb4-498a-8aae-eb6274019cfe","model":"gemini-2.5-flash"}
            {"type":"text_delta","text":"Hi! (scripted reply "}
            {"type":"text_delta","text":"from fake server)"}
            {"type":"message","text":"Hi! (scripted reply from fake server)"}
            {"type":"result","text":"Hi! (scripted reply from fake server)","is_error":false,"subtype":"success","usage":{"input_tokens":11,"output_tokens":7},"cost_usd":null,"duration_ms":53,"session_id":"bff85726-feb4-498a-8aae-eb6274019cfe"}
        "#]],
    );
}

#[test]
fn gemini_tools_and_a_tool_that_is_not_registered() {
    check(
        CliKind::Gemini,
        false,
        false,
        "gemini-tools-default-mode.ndjson",
        expect![[r#"
            {"type":"session_started","session_id":"e7866176-c8f0-4043-8560-a622346fb926","model":"auto"}
            {"type":"text_delta","text":"Let me read "}
            {"type":"text_delta","text":"the file."}
            {"type":"message","text":"Let me read the file."}
            {"type":"tool_use","id":"read_file__read_file_1795324231926_0","name":"read_file","input":{"file_path":"notes.txt"}}
            {"type":"tool_result","id":"read_file__read_file_1795324231926_0","content":"","is_error":false}
            {"type":"text_delta","text":"Now a shell "}
            {"type":"text_delta","text":"command."}
            {"type":"message","text":"Now a shell command."}
            {"type":"tool_use","id":"run_shell_command__run_shell_command_1795324232019_0","name":"run_shell_command","input":{"command":"echo hello-from-tool > out.txt && cat out.txt","description":"write out.txt"}}
            {"type":"tool_result","id":"run_shell_command__run_shell_command_1795324232019_0","content":"Tool \"run_shell_command\" not found. Did you mean one of: \"update_topic\", \"grep_search\", \"invoke_agent\"?","is_error":true}
            {"type":"text_delta","text":"All done."}
            {"type":"message","text":"All done."}
            {"type":"result","text":"All done.","is_error":false,"subtype":"success","usage":{"input_tokens":44,"output_tokens":28},"cost_usd":null,"duration_ms":186,"session_id":"e7866176-c8f0-4043-8560-a622346fb926"}
        "#]],
    );
}

#[test]
fn gemini_api_error_is_an_error_result() {
    check(
        CliKind::Gemini,
        false,
        false,
        "gemini-error-400.ndjson",
        expect![[r#"
            {"type":"session_started","session_id":"6cc1ac92-2d7f-4371-90f3-3001170e6d08","model":"auto"}
            {"type":"result","text":"[API Error: {\"error\":{\"code\":400,\"message\":\"scripted bad request\",\"status\":\"INVALID_ARGUMENT\"}}]","is_error":true,"subtype":"error","usage":{"input_tokens":11,"output_tokens":7},"cost_usd":null,"duration_ms":0,"session_id":"6cc1ac92-2d7f-4371-90f3-3001170e6d08"}
        "#]],
    );
}

#[test]
fn unknown_and_broken_lines_are_kept_not_fatal() {
    let mut parser = Parser::new(&CliKind::Codex, false, false);
    let events = parser.lines(
        "not json at all\n{\"type\":\"brand.new\",\"x\":1}\n\n{\"type\":\"turn.started\"}\n",
    );
    assert_eq!(
        events,
        [
            AgentEvent::Unknown {
                line: "not json at all".into()
            },
            AgentEvent::Unknown {
                line: serde_json::json!({"type": "brand.new", "x": 1})
            },
        ]
    );
}

#[test]
fn a_custom_command_gets_its_own_line_parser() {
    let cli = CliKind::Custom {
        name: "echo".into(),
        parser: std::sync::Arc::new(|line: &str| {
            vec![AgentEvent::TextDelta {
                text: line.to_uppercase(),
            }]
        }),
    };
    let mut parser = Parser::new(&cli, false, false);
    assert_eq!(
        parser.lines("a\nb\n"),
        [
            AgentEvent::TextDelta { text: "A".into() },
            AgentEvent::TextDelta { text: "B".into() }
        ]
    );
}
