//! The tools' arguments, parsed: each tool reads its own struct (an object
//! only, no unknown field, each field of its type and within its bounds)
//! before it touches a repository.

use std::ops::RangeInclusive;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use weir_core::RunError;
use weir_runtime::kit::{self, invalid};

use crate::query::architecture::Granularity;

/// `index_repo`'s arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct IndexArgs {
    pub(crate) path: String,
    #[serde(default)]
    pub(crate) force: bool,
}

/// `search_symbols`'s arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SymbolsArgs {
    pub(crate) repo: String,
    pub(crate) query: String,
    #[serde(default)]
    pub(crate) kind: Option<String>,
    #[serde(default)]
    pub(crate) limit: Option<u64>,
    #[serde(default)]
    pub(crate) cursor: Option<String>,
    #[serde(default)]
    pub(crate) page_size: Option<u64>,
}

/// `find_references`'s arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReferencesArgs {
    pub(crate) repo: String,
    pub(crate) symbol: String,
    #[serde(default)]
    pub(crate) include_tests: Option<bool>,
    #[serde(default)]
    pub(crate) text: Option<bool>,
    #[serde(default)]
    pub(crate) cursor: Option<String>,
    #[serde(default)]
    pub(crate) limit: Option<u64>,
    #[serde(default)]
    pub(crate) page_size: Option<u64>,
}

/// `get_architecture`'s arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ArchitectureArgs {
    pub(crate) repo: String,
    #[serde(default)]
    pub(crate) granularity: Option<String>,
    #[serde(default)]
    pub(crate) depth: Option<u64>,
    #[serde(default)]
    pub(crate) cursor: Option<String>,
    #[serde(default)]
    pub(crate) limit: Option<u64>,
}

/// `explore`'s arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExploreArgs {
    pub(crate) repo: String,
    pub(crate) path: String,
    #[serde(default)]
    pub(crate) cursor: Option<String>,
    #[serde(default)]
    pub(crate) page_size: Option<u64>,
}

/// `understand`'s arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UnderstandArgs {
    pub(crate) repo: String,
    pub(crate) symbol: String,
    #[serde(default)]
    pub(crate) cursor: Option<String>,
    #[serde(default)]
    pub(crate) page_size: Option<u64>,
}

/// `prepare_change`'s arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PrepareChangeArgs {
    pub(crate) repo: String,
    pub(crate) symbol: String,
    #[serde(default)]
    pub(crate) depth: Option<u64>,
    #[serde(default)]
    pub(crate) cursor: Option<String>,
    #[serde(default)]
    pub(crate) page_size: Option<u64>,
}

/// Each tool's arguments checked beyond their types: non-empty strings,
/// numbers within the schema's bounds.
pub(crate) trait Checked: DeserializeOwned {
    fn check(&self) -> Result<(), RunError>;
}

/// Parses a tool's `arguments` into `T`, checked.
pub(crate) fn parse<T: Checked>(arguments: Value) -> Result<T, RunError> {
    let parsed: T = kit::parse_object(arguments)?;
    parsed.check()?;
    Ok(parsed)
}

/// `value` (the argument `name`), refused when blank.
pub(crate) fn non_empty<'a>(name: &str, value: &'a str) -> Result<&'a str, RunError> {
    if value.trim().is_empty() {
        Err(invalid(format!("`{name}` must be a non-empty string")))
    } else {
        Ok(value)
    }
}

/// `value` (the argument `name`), refused outside `range`.
fn within(name: &str, value: Option<u64>, range: RangeInclusive<u64>) -> Result<(), RunError> {
    match value {
        Some(value) if !range.contains(&value) => Err(invalid(format!(
            "`{name}` must be from {} to {}, not {value}",
            range.start(),
            range.end()
        ))),
        _ => Ok(()),
    }
}

/// At least 1: a count of items.
const COUNT: RangeInclusive<u64> = 1..=u64::MAX;

impl Checked for IndexArgs {
    fn check(&self) -> Result<(), RunError> {
        non_empty("path", &self.path).map(drop)
    }
}

impl Checked for SymbolsArgs {
    fn check(&self) -> Result<(), RunError> {
        non_empty("repo", &self.repo)?;
        non_empty("query", &self.query)?;
        within("limit", self.limit, 1..=1000)?;
        within("page_size", self.page_size, COUNT)
    }
}

impl Checked for ReferencesArgs {
    fn check(&self) -> Result<(), RunError> {
        non_empty("repo", &self.repo)?;
        non_empty("symbol", &self.symbol)?;
        within("limit", self.limit, COUNT)?;
        within("page_size", self.page_size, COUNT)
    }
}

impl ArchitectureArgs {
    /// What a node of the map is; `depth` for modules.
    pub(crate) fn granularity(&self) -> Result<Granularity, RunError> {
        let depth = self.depth.unwrap_or(2).clamp(1, 10) as usize;
        Ok(match self.granularity.as_deref().unwrap_or("module") {
            "package" | "crate" => Granularity::Package,
            "module" => Granularity::Module { depth },
            "directory" => Granularity::Directory,
            "file" => Granularity::File,
            other => {
                return Err(invalid(format!(
                    "unknown granularity {other:?}: use package, module, directory or file"
                )));
            }
        })
    }
}

impl Checked for ArchitectureArgs {
    fn check(&self) -> Result<(), RunError> {
        non_empty("repo", &self.repo)?;
        within("depth", self.depth, 1..=10)?;
        within("limit", self.limit, COUNT)?;
        self.granularity().map(drop)
    }
}

impl Checked for ExploreArgs {
    fn check(&self) -> Result<(), RunError> {
        non_empty("repo", &self.repo)?;
        non_empty("path", &self.path)?;
        within("page_size", self.page_size, COUNT)
    }
}

impl Checked for UnderstandArgs {
    fn check(&self) -> Result<(), RunError> {
        non_empty("repo", &self.repo)?;
        non_empty("symbol", &self.symbol)?;
        within("page_size", self.page_size, COUNT)
    }
}

impl Checked for PrepareChangeArgs {
    fn check(&self) -> Result<(), RunError> {
        non_empty("repo", &self.repo)?;
        non_empty("symbol", &self.symbol)?;
        within("depth", self.depth, 1..=5)?;
        within("page_size", self.page_size, COUNT)
    }
}

#[cfg(test)]
mod tests {
    use weir_runtime::Roots;
    use weir_runtime::tool_contract::{ToolCheck, check_pack, fields_of, info_of};

    use super::*;
    use crate::{CodeIntelConfig, CodeIntelPack};

    /// Every tool's schema and parser agree (the check every pack runs).
    #[test]
    fn every_tool_s_schema_and_parser_agree() {
        let dir = std::env::temp_dir();
        let roots = Roots::new([dir.clone()]).unwrap();
        let pack = CodeIntelPack::new(CodeIntelConfig::new(dir.join("index"), roots));
        let info = |name: &str| info_of(&pack, name);
        fn check<'a, T: Checked + 'static>(info: weir_runtime::ToolInfo) -> ToolCheck<'a> {
            ToolCheck::new(info, |arguments| parse::<T>(arguments).map(drop))
                .fields(fields_of::<T>())
        }
        check_pack(
            &pack,
            vec![
                check::<IndexArgs>(info("index_repo")),
                check::<SymbolsArgs>(info("search_symbols")),
                check::<ReferencesArgs>(info("find_references")),
                check::<ArchitectureArgs>(info("get_architecture")),
                check::<ExploreArgs>(info("explore")),
                check::<UnderstandArgs>(info("understand")),
                check::<PrepareChangeArgs>(info("prepare_change")),
            ],
        );
    }
}
