//! weir-mcp's integration tests: the server over stdio (in-process pipes)
//! and HTTP (a real socket), driven message by message.

mod http;
mod input;
mod owners;
mod progress;
mod results;
mod snapshots;
mod stdio;
mod support;
