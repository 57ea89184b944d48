//! The `weir` binary, driven as a user would: one test binary, a module per
//! area — `runs` over a data directory (`cli`), `call`/`tools` against
//! servers (`call`), the exec pack through `weir serve` (`exec`) and its
//! hardening against hostile runs (`exec_hardening`), the real Claude Code
//! and Gemini CLIs as MCP hosts of `weir serve --stdio` (`hosts`), a tool
//! waiting on its client's answer (`input`), and the crate layering over
//! `cargo metadata` (`layering`).

mod call;
mod cli;
mod edges;
mod exec;
mod exec_hardening;
mod hosts;
mod input;
mod layering;
