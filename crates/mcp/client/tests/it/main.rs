//! weir-client's integration tests: the client against a real weir server.

mod server;
