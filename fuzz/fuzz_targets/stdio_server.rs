//! The server's stdio transport: `weir_mcp::transport::stdio::serve_lines`
//! (its bounded line reader, then `Incoming::parse` and dispatch) with the
//! input as everything a client writes, against a server with the fixture
//! tools, over in-memory pipes.
//!
//! The first byte picks the input pipe's capacity (1 to 64 bytes), so that
//! lines arrive cut everywhere; the message limit is 256 bytes, so that the
//! reader's discard-to-the-newline path runs. Time is virtual
//! (`weir_fuzz::spawn_clock`). Properties: `serve_lines` returns once its
//! input has closed, and every line the server writes is one JSON-RPC
//! message.
#![no_main]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use weir_mcp::ServerConfig;
use weir_mcp::transport::stdio::serve_lines;

/// How long (virtual) `serve_lines` may take after its input closes: it
/// waits 200 ms for what requests still running write.
const RETURN_WITHIN: Duration = Duration::from_secs(30);

/// A line the server wrote: one JSON-RPC 2.0 message, a request or
/// notification (a method) or a response (an id and one of result/error).
fn check_line(line: &[u8]) {
    let value: Value = serde_json::from_slice(line).unwrap_or_else(|error| {
        panic!(
            "the server wrote a line that is not JSON ({error}): {:?}",
            String::from_utf8_lossy(line)
        )
    });
    let object = value.as_object().expect("a message is an object");
    assert_eq!(object.get("jsonrpc"), Some(&Value::from("2.0")), "{value}");
    let answer = object.contains_key("result") as u8 + object.contains_key("error") as u8;
    match object.get("method") {
        Some(method) => assert!(method.is_string() && answer == 0, "{value}"),
        None => assert!(object.contains_key("id") && answer == 1, "{value}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&capacity, input)) = data.split_first() else {
        return;
    };
    let capacity = 1 + usize::from(capacity % 64);
    let runtime = weir_fuzz::runtime();
    let output = runtime.block_on(async {
        weir_fuzz::spawn_clock();
        let config = ServerConfig {
            max_message_bytes: 256,
            ..ServerConfig::default()
        };
        let server = weir_fuzz::fixtures_server(config).await;
        let (mut client_in, server_in) = tokio::io::duplex(capacity);
        let (server_out, mut client_out) = tokio::io::duplex(64 * 1024);
        // What the server writes, as it writes it: requests still running
        // when `serve_lines` returns may keep the pipe open.
        let written = Arc::new(Mutex::new(Vec::new()));
        let reader = tokio::spawn({
            let written = written.clone();
            async move {
                let mut buffer = [0; 4096];
                while let Ok(read @ 1..) = client_out.read(&mut buffer).await {
                    written.lock().unwrap().extend_from_slice(&buffer[..read]);
                }
            }
        });
        let writer = async move {
            // The server may stop reading only when its input ends.
            client_in
                .write_all(input)
                .await
                .expect("the server reads its input");
            // Dropped: the server sees the end of its input.
        };
        let serving =
            tokio::time::timeout(RETURN_WITHIN, serve_lines(server, server_in, server_out));
        let (served, ()) = tokio::join!(serving, writer);
        served
            .expect("serve_lines did not return after its input closed")
            .expect("in-memory pipes do not fail");
        tokio::time::sleep(Duration::from_millis(10)).await;
        reader.abort();
        std::mem::take(&mut *written.lock().unwrap())
    });
    drop(runtime);
    // Only whole lines: the server may have been cut off mid-line.
    let whole = output.len() - output.iter().rev().take_while(|&&b| b != b'\n').count();
    for line in output[..whole]
        .split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
    {
        check_line(line);
    }
});
