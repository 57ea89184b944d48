//! weir-store-sqlite's integration tests: one binary, one module per area.

mod contract;
mod crash;
mod file;
mod scheduler;
mod schema;
mod segments;
