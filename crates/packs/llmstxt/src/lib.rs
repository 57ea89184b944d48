//! weir's llms.txt pack: `llmstxt_generate` and `llmstxt_validate`.
//!
//! **For:** describing a repository for language models — an `llms.txt`
//! (the llmstxt.org spec), `llms-full.txt`, `llms-ctx.txt` and `llms.json`,
//! written as artifacts of one streamed run — with an OpenAI-compatible
//! model where one is configured ([`llm`]: chat completions streamed over
//! SSE, robust to the quirks servers have), and a deterministic fallback
//! from the repository alone where none is, or where it stops answering.
//! And checking such files ([`validate`]).
//!
//! **Not for:** protocols. The pack reports through its `RunContext`; the
//! [`llm`] module knows HTTP and SSE but neither MCP nor runs. It depends
//! on `weir-core` and `weir-runtime`, never on an MCP crate, a store or
//! another pack.
//!
//! **A run of `llmstxt_generate`:**
//!
//! 1. *Source:* a directory inside one of the server's roots
//!    ([`weir_runtime::Roots`]; files read beneath it, never through a
//!    symlink out of it), or — only for hosts the operator allows
//!    ([`CloneConfig`]) — an `https://` URL cloned with `git clone --depth
//!    1` under a fixed safe configuration into a directory of the run's
//!    own (removed with the run, cancel included).
//! 2. *Gathered* (milestone): README, docs, manifests, examples, and the
//!    license/changelog kind, as git sees the tree (`.gitignore`, hidden
//!    files out), ranked (the README, the project's docs and policies
//!    first), capped in files and bytes. Generated files and results,
//!    vendored trees, fixtures, lock files, tooling manifests and files
//!    alike but for a date or number are left out, and the result names
//!    each with why. The parts' docs and manifests, license and changelog
//!    go under `## Optional`.
//! 3. *Summarized*: the model is asked, in one small prompt, what the
//!    project is; its tokens stream as `partial` events of group `model`,
//!    each answer on a line of its own after a `label: `.
//! 4. *Section k/n*: one small prompt per link (up to `max_model_links`)
//!    for its note.
//! 5. *Written*: the four artifacts; `llms.txt` is validated before it is
//!    stored. With `write: true`, `llms.txt`, `llms-full.txt` and
//!    `llms-ctx.txt` go into the source directory too — never over a file
//!    there without `overwrite: true` (checked before any work). The
//!    result carries the file and the structured form.
//!
//! Whatever the model does not give — no endpoint, its breaker open, an
//! answer that broke off mid-stream (a `warning` says so; never a silently
//! short note) — comes from the files themselves: the manifest's
//! description, the README's first paragraph, each document's own opening
//! sentence. `mode` says which: `model`, `mixed` or `fallback`, and a
//! fallback `llms.txt` carries the comment `<!-- Generated via fallback
//! path (no model): why. -->`.
//!
//! ```
//! use weir_pack_llmstxt::validate;
//! let checked = validate("# demo\n\n> A demo.\n\n## Docs\n\n- [README](README.md): start here\n");
//! assert!(checked.valid);
//! assert_eq!(checked.document.sections[0].links[0].url, "README.md");
//! ```
#![warn(missing_docs)]

mod args;
mod formats;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod gather;
mod generate;
pub mod llm;
mod project;
mod source;
mod spec;
mod tools;

use std::sync::Arc;

use weir_runtime::{Pack, Roots, Tool};

pub use source::{CloneConfig, CloneHostError};
pub use spec::{Finding, Link, LlmsTxt, OPTIONAL, Section, Validation, validate};

/// What the operator configured: the model, where sources may be, and
/// which URLs may be cloned.
#[derive(Clone, Debug)]
pub struct LlmsTxtConfig {
    /// The model, or `None` for the fallback only.
    pub model: Option<llm::ChatConfig>,
    /// The directories a source (and a file to validate) must lie in.
    pub roots: Roots,
    /// Which URLs may be cloned (by default none).
    pub clone: CloneConfig,
}

impl LlmsTxtConfig {
    /// No model, sources inside `roots`, no clones.
    pub fn new(roots: Roots) -> LlmsTxtConfig {
        LlmsTxtConfig {
            model: None,
            roots,
            clone: CloneConfig::default(),
        }
    }
}

/// The pack: its tools share one model client (and so one breaker).
pub struct LlmsTxtPack {
    client: Option<Arc<llm::ChatClient>>,
    roots: Roots,
    clone: Arc<CloneConfig>,
}

impl LlmsTxtPack {
    /// The pack, with a model where `config.model` says where one is, else
    /// the fallback only. Fails on an endpoint URL it cannot call.
    pub fn new(config: LlmsTxtConfig) -> Result<LlmsTxtPack, llm::LlmError> {
        let client = config
            .model
            .map(llm::ChatClient::new)
            .transpose()?
            .map(Arc::new);
        Ok(LlmsTxtPack {
            client,
            roots: config.roots,
            clone: Arc::new(config.clone),
        })
    }
}

impl Pack for LlmsTxtPack {
    fn name(&self) -> &'static str {
        "llmstxt"
    }

    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        vec![
            Arc::new(tools::GenerateTool {
                client: self.client.clone(),
                roots: self.roots.clone(),
                clone: self.clone.clone(),
            }),
            Arc::new(tools::ValidateTool {
                roots: self.roots.clone(),
            }),
        ]
    }
}
