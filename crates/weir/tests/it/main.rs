//! The `weir` binary, driven as a user would: one test binary, a module per
//! area — `runs` over a data directory (`cli`), `call`/`tools` against
//! servers (`call`), and the exec pack through `weir serve` (`exec`).

mod call;
mod cli;
mod exec;
