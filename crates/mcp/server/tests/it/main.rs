//! weir-mcp's integration tests: the server over stdio (in-process pipes)
//! and HTTP (a real socket), driven message by message.

mod http;
mod in_process;
mod input;
mod owners;
mod progress;
mod results;
mod snapshots;
mod stdio;
mod support;
