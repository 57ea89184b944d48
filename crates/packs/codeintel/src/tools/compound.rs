//! `explore`, `understand` and `prepare_change`: the compound questions
//! (`query/compound.rs`) as tools.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use weir_core::{Completed, RunError};
use weir_runtime::{Hints, RunContext, Tool, ToolInfo};

use super::args::{self, ExploreArgs, PrepareChangeArgs, UnderstandArgs};
use super::{answer, completed, open_repo, open_store, page_of};
use crate::Shared;
use crate::query::compound::{explore, prepare_change, understand};
use crate::schemas;

/// The input schema of a compound tool: `repo`, its own fields, paging.
fn compound_schema(own: Value, required: &str) -> Value {
    let mut properties = json!({
        "repo": {"type": "string", "description": "The repository's directory (indexed first if it has no index)."},
        "cursor": {"type": "string", "description": "A previous answer's nextCursor: the next page."},
        "page_size": {"type": "integer", "minimum": 1, "description": "Items per page (at most the server's)."}
    });
    if let (Some(all), Value::Object(own)) = (properties.as_object_mut(), own) {
        all.extend(own);
    }
    json!({
        "type": "object",
        "properties": properties,
        "required": ["repo", required],
        "additionalProperties": false
    })
}

/// `explore`.
pub(crate) struct Explore(pub(crate) Arc<Shared>);

#[async_trait]
impl Tool for Explore {
    fn info(&self) -> ToolInfo {
        let mut info = ToolInfo::new(
            "explore",
            "What is in a directory or file of a repository: its definitions by kind (streamed grouped by file), its key symbols (most used from outside), its dependencies out and in (files, with strength), entry points, and git hot spots. Start here to find your way in an unfamiliar area.",
            compound_schema(
                json!({"path": {"type": "string", "description": "A directory or file relative to the repository's root; \".\" for all of it."}}),
                "path",
            ),
        );
        info.output_schema = Some(weir_core::output_contract(&schemas::explore_summary()));
        info.streams = true;
        info.with_hints(Hints::READ_ONLY)
    }

    async fn run(&self, ctx: RunContext, args: Value) -> Result<Completed, RunError> {
        let args: ExploreArgs = args::parse(args)?;
        let path = args.path;
        let (root, db) = open_repo(&ctx, &self.0, &args.repo).await?;
        let (page, warning) = page_of(&self.0, args.page_size, args.cursor.as_deref(), &db)?;
        let summary = answer(&ctx, &self.0, page, warning, move |sink| {
            explore(&open_store(&db)?, &root, &path, sink)
        })
        .await?;
        let headline = format!(
            "explore {} (dependencies from imports resolved to files): {} files, {} definitions; {} files it imports from, {} that import it; entry points {}",
            summary["path"].as_str().unwrap_or_default(),
            summary["overview"]["fileCount"],
            summary["overview"]["symbolCount"],
            summary["dependencies"]["outgoing"]
                .as_array()
                .map_or(0, Vec::len),
            summary["dependencies"]["incoming"]
                .as_array()
                .map_or(0, Vec::len),
            summary["entrypoints"],
        );
        Ok(completed(headline, summary))
    }
}

/// `understand`.
pub(crate) struct Understand(pub(crate) Arc<Shared>);

#[async_trait]
impl Tool for Understand {
    fn info(&self) -> ToolInfo {
        let mut info = ToolInfo::new(
            "understand",
            "Everything about one symbol in one call: its definition (docs, signature, span), its uses summed up by file, its callers and its callees; when several definitions share the name, which ones (pass a stableId to pick). Streams the definition, then uses by file, then callers, then callees.",
            compound_schema(
                json!({"symbol": {"type": "string", "description": "A name, or a definition's stableId from search_symbols (path:line:name)."}}),
                "symbol",
            ),
        );
        info.output_schema = Some(weir_core::output_contract(&schemas::understand_summary()));
        info.streams = true;
        info.with_hints(Hints::READ_ONLY)
    }

    async fn run(&self, ctx: RunContext, args: Value) -> Result<Completed, RunError> {
        let args: UnderstandArgs = args::parse(args)?;
        let symbol = args.symbol.trim().to_owned();
        let (root, db) = open_repo(&ctx, &self.0, &args.repo).await?;
        let (page, warning) = page_of(&self.0, args.page_size, args.cursor.as_deref(), &db)?;
        let summary = answer(&ctx, &self.0, page, warning, move |sink| {
            understand(&open_store(&db)?, &root, &symbol, sink)
        })
        .await?;
        let headline = format!(
            "understand {}, {}. {} {} at {}: {} references ({} uses) in {} files, the same set as find_references; {} callers, {} callees, {} test files",
            summary["definition"]["stableId"]
                .as_str()
                .unwrap_or_default(),
            summary["precision"].as_str().unwrap_or_default(),
            summary["definition"]["kind"].as_str().unwrap_or_default(),
            summary["definition"]["name"].as_str().unwrap_or_default(),
            summary["definition"]["location"]["fileId"]
                .as_str()
                .unwrap_or_default(),
            summary["references"]["totalCount"],
            summary["references"]["uses"],
            summary["references"]["fileCount"],
            summary["callerCount"],
            summary["callees"].as_array().map_or(0, Vec::len),
            summary["relatedTests"].as_array().map_or(0, Vec::len),
        );
        Ok(completed(headline, summary))
    }
}

/// `prepare_change`.
pub(crate) struct PrepareChange(pub(crate) Arc<Shared>);

#[async_trait]
impl Tool for PrepareChange {
    fn info(&self) -> ToolInfo {
        let mut info = ToolInfo::new(
            "prepare_change",
            "Before changing a symbol: its direct dependents, its transitive impact (callers of callers, to a depth bound), the tests that exercise it, the files git history says change with it, and a risk level with the factors behind it. Streams the target, callers by depth, tests, co-change files.",
            compound_schema(
                json!({
                    "symbol": {"type": "string", "description": "A name, or a definition's stableId from search_symbols (path:line:name)."},
                    "depth": {"type": "integer", "minimum": 1, "maximum": 5, "default": 3, "description": "How many levels of callers to follow."}
                }),
                "symbol",
            ),
        );
        info.output_schema = Some(weir_core::output_contract(
            &schemas::prepare_change_summary(),
        ));
        info.streams = true;
        info.with_hints(Hints::READ_ONLY)
    }

    async fn run(&self, ctx: RunContext, args: Value) -> Result<Completed, RunError> {
        let args: PrepareChangeArgs = args::parse(args)?;
        let symbol = args.symbol.trim().to_owned();
        let depth = args.depth.unwrap_or(3).clamp(1, 5) as usize;
        let (root, db) = open_repo(&ctx, &self.0, &args.repo).await?;
        let (page, warning) = page_of(&self.0, args.page_size, args.cursor.as_deref(), &db)?;
        let summary = answer(&ctx, &self.0, page, warning, move |sink| {
            prepare_change(&open_store(&db)?, &root, &symbol, depth, sink)
        })
        .await?;
        let headline = format!(
            "prepare_change {}, {}. Risk {} ({}): {} references in {} files ({} besides its own), {} direct dependents, {} callers to depth {}, {} test files reference it, {} co-change files",
            summary["target"]["stableId"].as_str().unwrap_or_default(),
            summary["precision"].as_str().unwrap_or_default(),
            summary["riskAssessment"]["level"]
                .as_str()
                .unwrap_or_default(),
            summary["riskAssessment"]["score"],
            summary["references"]["totalCount"],
            summary["references"]["fileCount"],
            summary["references"]["dependentFileCount"],
            summary["directDependentCount"],
            summary["transitiveImpact"]["totalCallers"],
            summary["transitiveImpact"]["maxDepth"],
            summary["relatedTests"].as_array().map_or(0, Vec::len),
            summary["coChangeFiles"].as_array().map_or(0, Vec::len),
        );
        Ok(completed(headline, summary))
    }
}
