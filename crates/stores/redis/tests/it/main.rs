//! weir-store-redis's integration tests: one binary, one module per area,
//! against a real `redis-server` this binary starts (`server.rs`).

mod contract;
mod entries;
mod hostile;
mod server;
mod shared;
