//! weir-agents' tests: the parsers on the CLIs' real recorded output
//! (`parse`), and the drivers against the real CLIs run offline against
//! weir-fake-model (`clis`, in nextest's `agent-clis` group).

mod clis;
mod parse;
mod start;
