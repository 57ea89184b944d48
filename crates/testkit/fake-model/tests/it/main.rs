//! weir-fake-model's tests: each protocol's streams as a client reads them
//! (one module per protocol), the script's rules, the binary, and the real
//! coding-agent CLIs run offline against the fake (`clis`).

mod anthropic;
mod chat;
mod clis;
mod gemini;
mod responses;
mod script;
mod support;
