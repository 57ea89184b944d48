//! One measured `tools/call stream`: recognising its messages as they
//! arrive, counting items and checking them.
//!
//! Per item the reader does as little as a client can and still know what
//! it got: the line must begin with the exact bytes weir writes before the
//! `seq` (method, token, field order), and the digits after them must be the
//! next seq. Nothing is parsed into a JSON tree, so the reader's cost per
//! item is a prefix compare and a few digits, and the figures measure the
//! server. A message that does not match the prefix is parsed in full: an
//! item written another way (another field order, say) still counts, through
//! the slow path, and the report says how many went that way.

use std::time::Instant;

use serde_json::{Value, json};

/// The method of a SEP-2998 partial result.
pub const PARTIAL_METHOD: &str = "notifications/tools/partial_result";

/// What the reader knows about one call while it streams.
pub struct Call {
    id: u64,
    token: String,
    count: u64,
    size: usize,
    /// Every item in full (the warm-up call); otherwise the first and the
    /// last in full and the rest by prefix and seq.
    check_all: bool,
    /// The bytes before each item's seq, as weir writes them.
    prefix: Vec<u8>,
    /// Items received; also the seq the next one must carry.
    pub items: u64,
    /// Items that did not match `prefix` and were parsed in full.
    pub slow_items: u64,
    /// Messages that were neither an item nor the response.
    pub others: u64,
    /// When the `tools/call` was written (the transport sets it).
    pub sent_at: Option<Instant>,
    pub first_item_at: Option<Instant>,
    /// When the response arrived, and its `result`.
    pub finished: Option<(Instant, Value)>,
}

impl Call {
    pub fn new(id: u64, count: u64, size: usize, check_all: bool) -> Call {
        let token = format!("r-{id}");
        let prefix = format!(
            r#"{{"jsonrpc":"2.0","method":"{PARTIAL_METHOD}","params":{{"partialResultToken":"{token}","seq":"#
        )
        .into_bytes();
        Call {
            id,
            token,
            count,
            size,
            check_all,
            prefix,
            items: 0,
            slow_items: 0,
            others: 0,
            sent_at: None,
            first_item_at: None,
            finished: None,
        }
    }

    pub fn token(&self) -> &str {
        &self.token
    }

    /// The `tools/call` params, `_meta` included (`extra_meta` adds to it:
    /// a stateless request's protocol version and capabilities).
    pub fn params(&self, extra_meta: Value) -> Value {
        let mut meta = json!({ "partialResultToken": self.token });
        if let (Some(meta), Value::Object(extra)) = (meta.as_object_mut(), extra_meta) {
            meta.extend(extra);
        }
        json!({
            "name": "stream",
            "arguments": { "count": self.count, "size": self.size, "interval_ms": 0, "mode": "text" },
            "_meta": meta,
        })
    }

    /// Takes one JSON-RPC message; `Ok(true)` once it was the call's
    /// response.
    pub fn take(&mut self, message: &[u8]) -> Result<bool, String> {
        if let Some(rest) = message.strip_prefix(self.prefix.as_slice()) {
            let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
            let seq = parse_seq(&rest[..digits])
                .ok_or_else(|| format!("item {} has no seq: {}", self.items, excerpt(message)))?;
            self.check_seq(seq, message)?;
            if self.check_all || seq == 0 || seq + 1 == self.count {
                let parsed = serde_json::from_slice(message)
                    .map_err(|e| format!("item {seq} is not JSON ({e}): {}", excerpt(message)))?;
                self.check_item(&parsed)?;
            }
            return self.count_item();
        }
        // Taken before parsing: the response arrived now, and the time the
        // reader spends reading it is not the server's.
        let arrived = Instant::now();
        let parsed: Value = serde_json::from_slice(message)
            .map_err(|e| format!("a message is not JSON ({e}): {}", excerpt(message)))?;
        if parsed["method"] == PARTIAL_METHOD
            && parsed["params"]["partialResultToken"] == self.token
        {
            let seq = parsed["params"]["seq"].as_u64().unwrap_or(u64::MAX);
            self.check_seq(seq, message)?;
            self.check_item(&parsed)?;
            self.slow_items += 1;
            return self.count_item();
        }
        if parsed.get("method").is_none() && parsed["id"] == self.id {
            let Value::Object(mut response) = parsed else {
                unreachable!("indexed as an object above")
            };
            let result = match (response.remove("result"), response.remove("error")) {
                (Some(result), None) => result,
                (_, error) => return Err(format!("tools/call failed: {}", json!(error))),
            };
            self.finished = Some((arrived, result));
            return Ok(true);
        }
        self.others += 1;
        Ok(false)
    }

    fn check_seq(&self, seq: u64, message: &[u8]) -> Result<(), String> {
        if seq != self.items {
            return Err(format!(
                "seq {seq} where {} was due (seqs must be dense from 0): {}",
                self.items,
                excerpt(message)
            ));
        }
        Ok(())
    }

    fn count_item(&mut self) -> Result<bool, String> {
        if self.items == 0 {
            self.first_item_at = Some(Instant::now());
        }
        self.items += 1;
        Ok(false)
    }

    /// An item in full: method, token, seq and its exact text.
    fn check_item(&self, message: &Value) -> Result<(), String> {
        let params = &message["params"];
        let seq = self.items;
        let expected = json!([{ "type": "text", "text": item_text(seq, self.size) }]);
        if message["method"] != PARTIAL_METHOD
            || params["partialResultToken"] != self.token
            || params["seq"] != seq
            || params["content"] != expected
        {
            return Err(format!("item {seq} is not as expected: {message}"));
        }
        Ok(())
    }

    /// After the response: every item came, and the result is the stream
    /// fixture's.
    pub fn check_end(&self) -> Result<(), String> {
        let Some((_, result)) = &self.finished else {
            return Err("the stream ended without the tools/call response".into());
        };
        if result["isError"] == true || result["structuredContent"]["count"] != self.count {
            let text = result.to_string();
            return Err(format!(
                "unexpected result: {}",
                &text[..text.floor_char_boundary(300)]
            ));
        }
        if self.items != self.count {
            return Err(format!("{} items, expected {}", self.items, self.count));
        }
        Ok(())
    }
}

fn parse_seq(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    Some(
        digits
            .iter()
            .fold(0u64, |n, d| n * 10 + u64::from(d - b'0')),
    )
}

/// Item `index` of the stream fixture: `00000042:xxxx…`, exactly `size`
/// bytes (crates/fixtures/src/stream.rs).
pub fn item_text(index: u64, size: usize) -> String {
    let mut text = format!("{index:08}:");
    if text.len() >= size {
        text.truncate(size);
    } else {
        text.extend(std::iter::repeat_n('x', size - text.len()));
    }
    text
}

fn excerpt(message: &[u8]) -> String {
    String::from_utf8_lossy(&message[..message.len().min(300)]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(token: &str, seq: u64, size: usize) -> Vec<u8> {
        format!(
            r#"{{"jsonrpc":"2.0","method":"{PARTIAL_METHOD}","params":{{"partialResultToken":"{token}","seq":{seq},"content":[{{"type":"text","text":"{}"}}]}}}}"#,
            item_text(seq, size)
        )
        .into_bytes()
    }

    #[test]
    fn counts_dense_items_and_the_response() {
        let mut call = Call::new(7, 3, 12, false);
        for seq in 0..3 {
            assert!(!call.take(&item("r-7", seq, 12)).unwrap());
        }
        let response =
            br#"{"jsonrpc":"2.0","id":7,"result":{"content":[],"structuredContent":{"count":3}}}"#;
        assert!(call.take(response).unwrap());
        call.check_end().unwrap();
        assert_eq!((call.items, call.slow_items, call.others), (3, 0, 0));
    }

    #[test]
    fn a_gap_or_a_wrong_text_is_an_error() {
        let mut call = Call::new(7, 3, 12, false);
        call.take(&item("r-7", 0, 12)).unwrap();
        assert!(call.take(&item("r-7", 2, 12)).is_err());
        let mut call = Call::new(7, 3, 12, true);
        assert!(call.take(&item("r-7", 0, 11)).is_err());
    }

    #[test]
    fn another_field_order_takes_the_slow_path() {
        let mut call = Call::new(1, 1, 9, false);
        let message = br#"{"method":"notifications/tools/partial_result","jsonrpc":"2.0","params":{"seq":0,"partialResultToken":"r-1","content":[{"type":"text","text":"00000000:"}]}}"#;
        call.take(message).unwrap();
        assert_eq!((call.items, call.slow_items), (1, 1));
    }

    #[test]
    fn item_texts_match_the_fixture() {
        assert_eq!(item_text(42, 12), "00000042:xxx");
        assert_eq!(item_text(42, 4), "0000");
    }
}
