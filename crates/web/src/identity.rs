//! Who a request comes from, as the guard found it, and which runs that
//! identity may see.
//!
//! The guard resolves the bearer token to an [`Identity`] (a credential's
//! name, admin or not) and hands it to every route as a request extension.
//! A run records its starter's name as its owner; an identity that is not
//! an admin sees, reads and cancels only the runs it owns, and another's run
//! is answered exactly like a run that does not exist. (weir-mcp maps an
//! identity onto its own `Caller` with the same rule.)
//!
//! An identity also carries the tools its credential may call (a tokens
//! file's `tools=`/`packs=`, see [`crate::credentials`]); the MCP server
//! lists and runs only those, and the scheduler holds every run it starts
//! to them.

use std::collections::BTreeSet;
use std::sync::Arc;

use weir_runtime::log::{RunFilter, RunSummary};

/// A client as the guard knows it: the credential it presented, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The credential's name; `None` when the server has no credentials.
    name: Option<Arc<str>>,
    /// Sees every run, whoever owns it.
    admin: bool,
    /// The tools it may call; `None`: every tool.
    tools: Option<Arc<BTreeSet<String>>>,
}

impl Identity {
    /// The client of a server without credentials: it sees every run, and
    /// its runs have no owner.
    pub fn local() -> Identity {
        Identity {
            name: None,
            admin: true,
            tools: None,
        }
    }

    /// The holder of the credential `name`.
    pub fn named(name: &str, admin: bool) -> Identity {
        Identity {
            name: Some(name.into()),
            admin,
            tools: None,
        }
    }

    /// The same identity, allowed only `tools` (`None`: every tool).
    pub fn with_tools(self, tools: Option<Arc<BTreeSet<String>>>) -> Identity {
        Identity { tools, ..self }
    }

    /// The tools it may call; `None`: every tool.
    pub fn allowed_tools(&self) -> Option<&Arc<BTreeSet<String>>> {
        self.tools.as_ref()
    }

    /// Whether it may call `tool`.
    pub fn may_call(&self, tool: &str) -> bool {
        self.tools.as_ref().is_none_or(|tools| tools.contains(tool))
    }

    /// The credential's name (`None` without credentials).
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Whether it sees every run.
    pub fn is_admin(&self) -> bool {
        self.admin
    }

    /// Whether it may see (read, follow, cancel) `run`.
    pub fn sees(&self, run: &RunSummary) -> bool {
        self.admin || (self.name.is_some() && run.owner.as_deref() == self.name.as_deref())
    }

    /// `filter`, narrowed to the runs it may see.
    pub fn narrow(&self, filter: RunFilter) -> RunFilter {
        if self.admin {
            return filter;
        }
        RunFilter {
            owner: self.name.as_deref().map(str::to_owned),
            ..filter
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use weir_core::{RunId, RunState};
    use weir_runtime::log::{RunFilter, RunSummary};

    use super::Identity;

    fn run(owner: Option<&str>) -> RunSummary {
        RunSummary {
            run_id: RunId::parse("r1").unwrap(),
            tool: "t".into(),
            arguments: json!({}),
            node: "n".into(),
            state: RunState::Working,
            events: 1,
            created_ts: 0,
            updated_ts: 0,
            finished_ts: None,
            owner: owner.map(str::to_owned),
            client: None,
            parent: None,
        }
    }

    #[test]
    fn an_identity_sees_its_own_runs_and_an_admin_every_run() {
        let alice = Identity::named("alice", false);
        let admin = Identity::named("root", true);
        let local = Identity::local();
        for (identity, owner, sees) in [
            (&alice, Some("alice"), true),
            (&alice, Some("bob"), false),
            (&alice, None, false),
            (&admin, Some("alice"), true),
            (&admin, None, true),
            (&local, Some("alice"), true),
            (&local, None, true),
        ] {
            assert_eq!(
                identity.sees(&run(owner)),
                sees,
                "{identity:?} on {owner:?}"
            );
        }
        assert_eq!(
            alice.narrow(RunFilter::default()).owner.as_deref(),
            Some("alice")
        );
        assert_eq!(admin.narrow(RunFilter::default()).owner, None);
    }
}
