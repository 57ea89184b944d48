//! weir-runtime's integration tests: one binary, one module per area.

mod crash;
mod properties;
mod scheduler;
mod stores;
mod support;
