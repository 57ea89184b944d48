//! weir's MCP layer (work in progress).
#![warn(missing_docs)]

pub mod catalog;
pub mod fixtures;
