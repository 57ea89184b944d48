//! Who is calling, and which runs and tools that principal may reach: the
//! one type the HTTP guard (weir-web's) resolves a bearer token to, and
//! weir-mcp's sessions and handlers answer for.
//!
//! The transport decides the principal: over stdio there is one client, the
//! process that spawned weir, and it sees every run ([`Principal::local`]);
//! over HTTP the guard resolves the bearer token to a credential's
//! principal and hands it to every route, `/mcp` included, as a request
//! extension. A run records its caller's name as its owner. A principal
//! that is not an admin sees, reads and cancels only the runs it owns; to
//! it, another's run is answered exactly like a run that does not exist, so
//! that it cannot even learn that the run is there.
//!
//! A principal may also be held to some tools (its credential's `tools=`
//! and `packs=`): `tools/list` shows only those, `tools/call` of another is
//! answered exactly like a call of a tool that does not exist, and every
//! run it starts carries the set to its children
//! ([`RunOptions::allowed_tools`](crate::RunOptions::allowed_tools)).

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::log::{RunFilter, RunSummary};

/// A client as the server knows it: the credential it presented, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// The credential's name; `None` when the server has no credentials.
    name: Option<Arc<str>>,
    /// Sees every run, whoever owns it.
    admin: bool,
    /// The tools it may call; `None`: every tool.
    tools: Option<Arc<BTreeSet<String>>>,
}

impl Principal {
    /// The client of a server without credentials (stdio, or HTTP with no
    /// token): it sees every run, and its runs have no owner.
    pub fn local() -> Principal {
        Principal {
            name: None,
            admin: true,
            tools: None,
        }
    }

    /// The holder of the credential `name`.
    pub fn named(name: &str, admin: bool) -> Principal {
        Principal {
            name: Some(name.into()),
            admin,
            tools: None,
        }
    }

    /// The same principal, allowed only `tools` (`None`: every tool).
    pub fn with_tools(self, tools: Option<Arc<BTreeSet<String>>>) -> Principal {
        Principal { tools, ..self }
    }

    /// The tools it may call, for the runs it starts; `None`: every tool.
    pub fn allowed_tools(&self) -> Option<Arc<BTreeSet<String>>> {
        self.tools.clone()
    }

    /// Whether it may call `tool` (it sees it in `tools/list`).
    pub fn may_call(&self, tool: &str) -> bool {
        self.tools.as_ref().is_none_or(|tools| tools.contains(tool))
    }

    /// The owner the runs it starts get.
    pub fn owner(&self) -> Option<String> {
        self.name.as_deref().map(str::to_owned)
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
            owner: self.owner(),
            ..filter
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use weir_core::{RunId, RunState};

    use super::Principal;
    use crate::log::{RunFilter, RunSummary};

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
    fn a_caller_sees_its_own_runs_and_an_admin_every_run() {
        let alice = Principal::named("alice", false);
        let admin = Principal::named("root", true);
        let local = Principal::local();
        for (caller, owner, sees) in [
            (&alice, Some("alice"), true),
            (&alice, Some("bob"), false),
            (&alice, None, false),
            (&admin, Some("alice"), true),
            (&admin, None, true),
            (&local, Some("alice"), true),
            (&local, None, true),
        ] {
            assert_eq!(caller.sees(&run(owner)), sees, "{caller:?} on {owner:?}");
        }
        assert_eq!(
            alice.narrow(RunFilter::default()).owner.as_deref(),
            Some("alice")
        );
        assert_eq!(admin.narrow(RunFilter::default()).owner, None);
        assert_eq!(local.owner(), None);
    }

    #[test]
    fn a_caller_may_call_every_tool_unless_held_to_some() {
        let only = Some(std::sync::Arc::new(["plan_run".to_owned()].into()));
        let scoped = Principal::named("alice", false).with_tools(only);
        assert!(scoped.may_call("plan_run"));
        assert!(!scoped.may_call("execute_code"));
        assert!(Principal::local().may_call("execute_code"));
        assert!(Principal::named("root", true).may_call("agent_run"));
        assert_ne!(scoped, Principal::named("alice", false));
    }
}
