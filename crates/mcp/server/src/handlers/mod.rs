//! One module per group of MCP methods, each a set of free functions over
//! the [`ServerState`](crate::state::ServerState). The dispatcher
//! ([`crate::server`]) calls them; they never call it back.

pub(crate) mod builtin;
pub(crate) mod lifecycle;
pub(crate) mod prompts;
pub(crate) mod resources;
pub(crate) mod tasks;
pub(crate) mod tools;
pub(crate) mod upstream;
