//! weir-store-redis's integration tests: one binary, one module per area,
//! against a real `redis-server` this binary starts (`server.rs`).

mod contract;
mod hostile;
mod server;
mod shared;
