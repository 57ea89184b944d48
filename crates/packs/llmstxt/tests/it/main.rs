//! weir-pack-llmstxt's integration tests: one binary, a module per area —
//! the streaming client against a scripted OpenAI-compatible server that
//! plays each quirk and fault on a real socket (`client`), and the tools
//! run by a real scheduler against it (`tools`).

mod client;
mod script;
mod tools;
