//! weir-runtime's integration tests: one binary, one module per area.
//! Store-specific tests live with their store (`weir-store-sqlite`).

mod contract;
mod registry;
mod scheduler;
mod scopes;
