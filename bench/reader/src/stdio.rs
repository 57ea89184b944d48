//! MCP over the server's stdin and stdout: one JSON-RPC message per line.

use std::io::Write;
use std::process::{ChildStdin, ChildStdout};
use std::time::Instant;

use serde_json::{Value, json};

use crate::Transport;
use crate::call::Call;
use crate::lines::Buffer;

pub struct StdioClient {
    input: ChildStdin,
    output: ChildStdout,
    buffer: Buffer,
    next_id: u64,
}

impl StdioClient {
    pub fn new(input: ChildStdin, output: ChildStdout) -> StdioClient {
        StdioClient {
            input,
            output,
            buffer: Buffer::new(),
            next_id: 1,
        }
    }

    fn send(&mut self, message: &Value) -> Result<(), String> {
        let mut line = serde_json::to_vec(message).expect("a Value serializes");
        line.push(b'\n');
        self.input
            .write_all(&line)
            .map_err(|e| format!("writing to the server's stdin: {e}"))
    }

    /// Hands each line to `each` until it returns true.
    fn read_until(
        &mut self,
        mut each: impl FnMut(&[u8]) -> Result<bool, String>,
    ) -> Result<(), String> {
        let Self { output, buffer, .. } = self;
        loop {
            while let Some(line) = buffer.next_line() {
                if each(line)? {
                    return Ok(());
                }
            }
            if buffer
                .fill(output)
                .map_err(|e| format!("reading stdout: {e}"))?
                == 0
            {
                return Err("the server closed its stdout".into());
            }
        }
    }

    fn request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))?;
        let mut reply = None;
        self.read_until(|line| {
            let message: Value = serde_json::from_slice(line).map_err(|e| e.to_string())?;
            let done = message["id"] == id && message.get("method").is_none();
            if done {
                reply = Some(message);
            }
            Ok(done)
        })?;
        Ok(reply.expect("read_until returned on the reply"))
    }
}

impl Transport for StdioClient {
    fn open(&mut self) -> Result<(), String> {
        let reply = self.request("initialize", crate::initialize_params())?;
        crate::check_initialized(&reply)?;
        self.send(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
    }

    fn next_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn stream(&mut self, call: &mut Call, id: u64) -> Result<(), String> {
        let request = json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": call.params(json!({})),
        });
        let mut line = serde_json::to_vec(&request).expect("a Value serializes");
        line.push(b'\n');
        call.sent_at = Some(Instant::now());
        self.input
            .write_all(&line)
            .map_err(|e| format!("writing to the server's stdin: {e}"))?;
        self.read_until(|line| call.take(line))
    }
}
