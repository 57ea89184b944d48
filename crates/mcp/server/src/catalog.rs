//! Resources, prompts and completions: the MCP surface beside tools.
//!
//! Tools are runs (weir-runtime); a [`Catalog`] serves the rest. Its types
//! are rmcp's model types, the wire shapes of MCP, because nothing below
//! this crate needs them. weir's own runs and artifacts are resources too;
//! the server adds those itself (`weir://runs/...`).

use async_trait::async_trait;
use rmcp::model::{GetPromptResult, Prompt, Resource, ResourceContents, ResourceTemplate};
use serde_json::{Map, Value};
/// An upstream's refusal, passed on ([`UpstreamSource::request`]).
pub use weir_mcp_wire::jsonrpc::RpcError;

/// Why a catalog could not answer.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// No resource, template or prompt of that name or URI.
    #[error("{0}")]
    NotFound(String),
    /// The arguments do not fit.
    #[error("{0}")]
    InvalidArguments(String),
}

/// A static or computed set of resources and prompts.
#[async_trait]
pub trait Catalog: Send + Sync + 'static {
    /// Resources to list.
    fn resources(&self) -> Vec<Resource> {
        Vec::new()
    }

    /// Resource templates to list.
    fn resource_templates(&self) -> Vec<ResourceTemplate> {
        Vec::new()
    }

    /// The contents of `uri`, or `None` when this catalog does not know it.
    async fn read_resource(&self, _uri: &str) -> Option<Vec<ResourceContents>> {
        None
    }

    /// Prompts to list.
    fn prompts(&self) -> Vec<Prompt> {
        Vec::new()
    }

    /// Renders prompt `name` with `arguments`.
    async fn get_prompt(
        &self,
        name: &str,
        _arguments: &Map<String, Value>,
    ) -> Result<GetPromptResult, CatalogError> {
        Err(CatalogError::NotFound(format!("no prompt {name:?}")))
    }

    /// Completion values for argument `argument` (partly typed as `value`) of
    /// the prompt or resource template named by `reference` (`{type, name|uri}`).
    async fn complete(&self, _reference: &Value, _argument: &str, _value: &str) -> Vec<String> {
        Vec::new()
    }
}

/// A catalog with nothing in it.
pub struct EmptyCatalog;

impl Catalog for EmptyCatalog {}

/// The upstream MCP servers whose resources and prompts this server passes
/// through, filled by the program that embeds it (weir's binary, over
/// `weir-client`). The server shapes what it serves (names, routing, which
/// caller sees what); an upstream answers one request at a time.
#[async_trait]
pub trait UpstreamSource: Send + Sync + 'static {
    /// The upstreams, by name.
    fn names(&self) -> Vec<String>;

    /// Sends `method` with `params` to `upstream` and returns its result, or
    /// its refusal as the error to answer (an unreachable upstream: an
    /// internal error saying so).
    async fn request(&self, upstream: &str, method: &str, params: Value)
    -> Result<Value, RpcError>;
}

/// How the upstreams' resources and prompts are served.
#[derive(Clone)]
pub struct PassThrough {
    /// Where they come from.
    pub source: std::sync::Arc<dyn UpstreamSource>,
    /// Prompts named `NAME__prompt`, as the upstreams' tools are; `false`
    /// (one upstream, `weir wrap`): as the upstream names them.
    pub prefixed: bool,
}

impl std::fmt::Debug for PassThrough {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PassThrough")
            .field("upstreams", &self.source.names())
            .field("prefixed", &self.prefixed)
            .finish()
    }
}
