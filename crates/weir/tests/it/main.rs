//! The `weir` binary, driven as a user would: one test binary, a module per
//! area — `weir agent` on the real agent CLIs (`agent`), `runs` over a
//! data directory (`cli`), `call`/`tools` against servers (`call`), the
//! code intelligence tools through `weir index` and `weir serve` (`codeintel`), the
//! critique pack's tools on the real agent CLIs (`critique`), the runs
//! dashboard in headless Chromium (`dashboard`), the exec pack through `weir serve` (`exec`) and its
//! hardening against hostile runs (`exec_hardening`), the real Claude Code
//! and Gemini CLIs as MCP hosts of `weir serve --stdio` (`hosts`), a tool
//! waiting on its client's answer (`input`), who can see a run and that
//! secrets are never read back (`ownership`), a failed program as a failed
//! call and the README's plan example (`outcomes`), plans of tool calls through `weir plan run` (`plan`), llms.txt with the real
//! small model (`llmstxt`), several nodes on one Redis (`nodes`), and the crate layering over
//! `cargo metadata` (`layering`).

mod agent;
mod call;
mod call_output;
mod cli;
#[cfg(feature = "codeintel")]
mod codeintel;
#[cfg(feature = "codeintel")]
mod codeintel_host; // issue 23: Claude Code pages find_references by the cursor
#[cfg(feature = "codeintel")]
mod codeintel_scip; // issue 23's ground truth: weir against scip-python
#[cfg(feature = "codeintel")]
mod codeintel_truth; // issue 23's acceptance on this repository
mod codex_host; // issue 24, finding 9: the real Codex CLI as host, its tool search and approvals
mod critique;
mod dashboard;
mod doc_examples; // Issue 24, finding 6: the README and docs' runnable examples and links.
mod edges;
mod exec;
mod exec_hardening;
mod function_length; // issue 25, item 4: no production function over a limit
mod hosts;
mod input;
mod layering;
mod llmstxt;
#[cfg(feature = "redis")]
mod nodes;
mod outcomes;
mod ownership;
#[cfg(feature = "plan")]
mod plan;

// Issue 22: a caller reaches only what the operator granted. One module per
// surface, each test naming its finding.
#[cfg(feature = "critique")]
mod sec_agents;
#[cfg(feature = "codeintel")]
mod sec_codeintel;
mod sec_every_tool;
#[cfg(feature = "llmstxt")]
mod sec_llmstxt;
#[cfg(feature = "plan")]
mod sec_plan;
mod sec_scopes;
mod sse_body; // weir-core's SSE parser over the bodies tests read

// Issue 24, findings 5 and 9: the tool list's hints, choice and size.
mod tool_list;

mod runs_cli; // Issue 24, finding 7: weir runs on a data directory, a server, a Redis.

// Issue 26: existing MCP servers served as runs.
mod wrap;
mod wrap_host; // Claude Code as host of weir wrap around a 90 s upstream call
mod wrap_upstreams; // an HTTP upstream by URL; per-caller upstream processes
