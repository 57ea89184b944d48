//! What both transports hand back for a request, and what they answer
//! when the server asks the client something.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use weir_mcp_wire::jsonrpc::{RpcError, code, error_response, response};

use crate::error::ClientError;
use crate::events::{present_raw, raw_string};

/// A message about a request, or why no more will come.
pub(crate) type Inbound = Result<Message, ClientError>;

/// What a transport hands an exchange at once: one message, or several
/// read together (a stdio server that wrote faster than its lines were
/// routed). One hand-over, and one wake-up of the call, for the lot.
#[derive(Debug)]
pub(crate) enum Delivery {
    One(Inbound),
    Many(Vec<Inbound>),
}

impl From<Inbound> for Delivery {
    fn from(message: Inbound) -> Delivery {
        Delivery::One(message)
    }
}

/// A message from the server about a request, read only as far as
/// routing needs: a notification's params stay the text the server wrote,
/// and the call reads from it the fields it uses. No JSON tree is built
/// per notification (a stream of partials is thousands a second), and
/// what weir relays is what the server wrote.
#[derive(Clone, Debug)]
pub(crate) enum Message {
    /// A notification; `params` is `{}` when it had none.
    Notification {
        method: String,
        params: Box<RawValue>,
    },
    /// The answer: the result as the server wrote it (a tool's result
    /// may hold thousands of blocks, read once, into their types), or the
    /// JSON-RPC error object.
    Response {
        id: Value,
        outcome: Result<Box<RawValue>, Value>,
    },
}

/// One JSON-RPC message the server sent, as the transports read it.
#[derive(Debug)]
pub(crate) enum Parsed {
    /// The server asks the client something ([`answer_server_request`]).
    Request { id: Value, method: String },
    /// About one of the client's requests.
    Message(Message),
}

/// The parts of a JSON-RPC message, borrowed from its text.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    jsonrpc: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "present")]
    id: Option<Value>,
    #[serde(borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "present_raw")]
    params: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present_raw")]
    result: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "present")]
    error: Option<Value>,
}

/// A field that is there, `null` included (`Option` alone reads `null`
/// as absent; JSON-RPC's `"result": null` is an answer).
fn present<'de, D: Deserializer<'de>>(field: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(field).map(Some)
}

/// Reads one message the server sent; `None` for what is not JSON-RPC (a
/// banner, a stray print, a malformed message), which is skipped. The
/// rules are `Incoming`'s (weir-mcp-wire): `jsonrpc` "2.0", an id that
/// is a string or an integer, params an object.
pub(crate) fn parse(bytes: &[u8]) -> Option<Parsed> {
    let envelope: Envelope = serde_json::from_slice(bytes).ok()?;
    if envelope.jsonrpc.map(RawValue::get) != Some("\"2.0\"") {
        return None;
    }
    if let Some(id) = &envelope.id
        && !(id.is_string() || id.is_i64() || id.is_u64())
    {
        return None;
    }
    match (envelope.method, envelope.id) {
        (Some(method), Some(id)) => Some(Parsed::Request {
            id,
            method: method.into_owned(),
        }),
        (Some(method), None) => {
            let params = match envelope.params {
                None => RawValue::from_string("{}".to_owned()).ok()?,
                Some(params) if params.get().starts_with('{') => params.to_owned(),
                Some(_) => return None,
            };
            Some(Parsed::Message(Message::Notification {
                method: method.into_owned(),
                params,
            }))
        }
        (None, Some(id)) if envelope.result.is_some() || envelope.error.is_some() => {
            let outcome = match (envelope.error, envelope.result) {
                (Some(error), _) => Err(error),
                (None, Some(result)) => Ok(result.to_owned()),
                (None, None) => unreachable!("checked: a result or an error"),
            };
            Some(Parsed::Message(Message::Response { id, outcome }))
        }
        (None, _) => None,
    }
}

/// The fields a notification is routed by.
#[derive(Deserialize)]
struct RouteKeys<'a> {
    #[serde(rename = "progressToken", borrow)]
    progress: Option<&'a RawValue>,
    #[serde(rename = "partialResultToken", borrow)]
    partial: Option<&'a RawValue>,
}

impl Message {
    /// A notification's `progressToken`, else its `partialResultToken`
    /// (the first that is a string): which call it is about.
    pub(crate) fn token(&self) -> Option<Cow<'_, str>> {
        let Message::Notification { params, .. } = self else {
            return None;
        };
        let keys: RouteKeys = serde_json::from_str(params.get()).ok()?;
        [keys.progress, keys.partial]
            .into_iter()
            .flatten()
            .find_map(raw_string)
    }
}

/// The tokens a request's notifications carry (`progressToken`,
/// `partialResultToken`): how a stdio connection routes them.
pub(crate) type Tokens = Vec<String>;

/// The messages about one request: notifications routed to it, then its
/// response. Dropping it stops the routing (and, over HTTP, closes the
/// request's stream).
pub(crate) struct Exchange {
    messages: mpsc::Receiver<Delivery>,
    /// The rest of the last [`Delivery::Many`], handed out first.
    pending: std::vec::IntoIter<Inbound>,
    /// Held only to be dropped with the exchange, which is what ends the
    /// transport's part (a stdio route, an HTTP stream's reader); boxed so
    /// that an exchange need not know either transport.
    _guard: Option<Box<dyn Send + Sync>>,
}

impl Exchange {
    /// The exchange of `messages`, which `guard` keeps coming until dropped.
    pub(crate) fn new(
        messages: mpsc::Receiver<Delivery>,
        guard: impl Send + Sync + 'static,
    ) -> Exchange {
        Exchange {
            messages,
            pending: Vec::new().into_iter(),
            _guard: Some(Box::new(guard)),
        }
    }

    /// An exchange that already holds its one answer (a JSON response).
    pub(crate) fn answered(message: Inbound) -> Exchange {
        let (sender, messages) = mpsc::channel(1);
        let _ = sender.try_send(message.into());
        Exchange {
            messages,
            pending: Vec::new().into_iter(),
            _guard: None,
        }
    }

    /// The next message if one is already here (`None` when there is
    /// none yet, or no more: [`Exchange::next`] tells which).
    pub(crate) fn ready(&mut self) -> Option<Inbound> {
        loop {
            if let Some(message) = self.pending.next() {
                return Some(message);
            }
            let delivery = self.messages.try_recv().ok()?;
            if let Some(message) = self.unpack(delivery) {
                return Some(message);
            }
        }
    }

    /// The next message; `None` once the transport has nothing more.
    pub(crate) async fn next(&mut self) -> Option<Inbound> {
        loop {
            if let Some(message) = self.pending.next() {
                return Some(message);
            }
            let delivery = self.messages.recv().await?;
            if let Some(message) = self.unpack(delivery) {
                return Some(message);
            }
        }
    }

    /// The first message of `delivery`, the rest kept for later.
    fn unpack(&mut self, delivery: Delivery) -> Option<Inbound> {
        match delivery {
            Delivery::One(message) => Some(message),
            Delivery::Many(messages) => {
                self.pending = messages.into_iter();
                self.pending.next()
            }
        }
    }
}

/// The answer to a request the server sent: this client only answers
/// `ping` (and lists no roots); anything else is refused, so the server
/// can carry on without it.
pub(crate) fn answer_server_request(id: &Value, method: &str) -> Value {
    match method {
        "ping" => response(id, json!({})),
        "roots/list" => response(id, json!({ "roots": [] })),
        other => error_response(
            id,
            &RpcError::new(
                code::METHOD_NOT_FOUND,
                format!("weir's MCP client does not handle {other}"),
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notification(text: &str) -> Message {
        match parse(text.as_bytes()) {
            Some(Parsed::Message(message @ Message::Notification { .. })) => message,
            other => panic!("{text}: {other:?}"),
        }
    }

    /// The rules of weir-mcp-wire's `Incoming`, without a JSON tree: a
    /// notification's params are kept as written.
    #[test]
    fn messages_are_read_as_far_as_routing_needs() {
        let written = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"z":1, "progressToken":"t","a":[1]}}"#;
        let message = notification(written);
        let Message::Notification { method, params } = &message else {
            unreachable!()
        };
        assert_eq!(method, "notifications/progress");
        assert_eq!(params.get(), r#"{"z":1, "progressToken":"t","a":[1]}"#);
        assert_eq!(message.token().as_deref(), Some("t"));
        let partial = notification(
            r#"{"jsonrpc":"2.0","method":"m","params":{"progressToken":7,"partialResultToken":"p\u0031"}}"#,
        );
        assert_eq!(partial.token().as_deref(), Some("p1"));
        let bare = notification(r#"{"jsonrpc":"2.0","method":"notifications/message"}"#);
        assert!(matches!(&bare, Message::Notification { params, .. } if params.get() == "{}"));
        assert_eq!(bare.token(), None);
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":3,"result":null}"#),
            Some(Parsed::Message(Message::Response { id, outcome: Ok(result) })) if id == json!(3) && result.get() == "null"
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":"a","error":{"code":1},"result":{}}"#),
            Some(Parsed::Message(Message::Response {
                outcome: Err(_),
                ..
            }))
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            Some(Parsed::Request { method, .. }) if method == "ping"
        ));
        for refused in [
            "Server listening on stdio",
            r#"{"jsonrpc":"1.0","method":"m"}"#,
            r#"{"jsonrpc":"2.0","method":"m","params":[1]}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"[{"jsonrpc":"2.0","method":"m"}]"#,
        ] {
            assert!(parse(refused.as_bytes()).is_none(), "{refused}");
        }
    }
}
