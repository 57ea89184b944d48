//! MCP's wire vocabulary, shared by weir's server (`weir-mcp`) and client
//! (`weir-client`): JSON-RPC 2.0 framing and error codes ([`jsonrpc`]), the
//! protocol revisions and the `_meta` keys and extension ids they name
//! ([`revision`]).
//!
//! **For:** the words both sides must spell the same way. **Not for:** IO,
//! sessions or dispatch (each side owns its own), nor MCP's result shapes
//! (the server writes those in its `wire` module, the client reads them).
//! Messages stay `serde_json::Value` here; methods parse their own params.
//!
//! ```
//! use weir_mcp_wire::jsonrpc::{Incoming, code};
//! use weir_mcp_wire::revision::SUPPORTED_VERSIONS;
//!
//! let request = Incoming::parse(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).unwrap();
//! assert!(matches!(request, Incoming::Request { .. }));
//! let (_, error) = Incoming::parse(b"{").unwrap_err();
//! assert_eq!(error.code, code::PARSE_ERROR);
//! assert_eq!(SUPPORTED_VERSIONS[0], "2026-07-28");
//! ```
#![warn(missing_docs)]

pub mod jsonrpc;
pub mod revision;
