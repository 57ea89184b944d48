//! Who a request comes from, and which runs that caller may see.
//!
//! The transport decides the caller: over stdio there is one client, the
//! process that spawned weir, and it sees every run ([`Caller::local`]); over
//! HTTP the bearer token names a credential, which the binary's guard
//! (weir-web's) resolves, and hands to `/mcp` as this request extension.
//! A run records its caller's name as its owner. A caller that is not an
//! admin sees, reads and cancels only the runs it owns; to it, another's run
//! is answered exactly like a run that does not exist, so that it cannot
//! even learn that the run is there.
//!
//! A caller may also be held to some tools (its credential's `tools=` and
//! `packs=`): `tools/list` shows only those, `tools/call` of another is
//! answered exactly like a call of a tool that does not exist, and every
//! run it starts carries the set to its children
//! (`RunOptions::allowed_tools`).

use std::collections::BTreeSet;
use std::sync::Arc;

use weir_runtime::log::{RunFilter, RunSummary};

/// A client as the server knows it: the credential it presented, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// The credential's name; `None` when the server has no credentials.
    name: Option<Arc<str>>,
    /// Sees every run, whoever owns it.
    admin: bool,
    /// The tools it may call; `None`: every tool.
    tools: Option<Arc<BTreeSet<String>>>,
}

impl Caller {
    /// The client of a server without credentials (stdio, or HTTP with no
    /// token): it sees every run, and its runs have no owner.
    pub fn local() -> Caller {
        Caller {
            name: None,
            admin: true,
            tools: None,
        }
    }

    /// The holder of the credential `name`.
    pub fn named(name: &str, admin: bool) -> Caller {
        Caller {
            name: Some(name.into()),
            admin,
            tools: None,
        }
    }

    /// The same caller, allowed only `tools` (`None`: every tool).
    pub fn with_tools(self, tools: Option<Arc<BTreeSet<String>>>) -> Caller {
        Caller { tools, ..self }
    }

    /// The tools it may call, for the runs it starts; `None`: every tool.
    pub(crate) fn allowed_tools(&self) -> Option<Arc<BTreeSet<String>>> {
        self.tools.clone()
    }

    /// Whether it may call `tool` (it sees it in `tools/list`).
    pub(crate) fn may_call(&self, tool: &str) -> bool {
        self.tools.as_ref().is_none_or(|tools| tools.contains(tool))
    }

    /// The owner the runs it starts get.
    pub(crate) fn owner(&self) -> Option<String> {
        self.name.as_deref().map(str::to_owned)
    }

    /// Whether it may see (read, follow, cancel) `run`.
    pub(crate) fn sees(&self, run: &RunSummary) -> bool {
        self.admin || (self.name.is_some() && run.owner.as_deref() == self.name.as_deref())
    }

    /// `filter`, narrowed to the runs it may see.
    pub(crate) fn narrow(&self, filter: RunFilter) -> RunFilter {
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
    use weir_runtime::log::{RunFilter, RunSummary};

    use super::Caller;

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
        let alice = Caller::named("alice", false);
        let admin = Caller::named("root", true);
        let local = Caller::local();
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
        let scoped = Caller::named("alice", false).with_tools(only);
        assert!(scoped.may_call("plan_run"));
        assert!(!scoped.may_call("execute_code"));
        assert!(Caller::local().may_call("execute_code"));
        assert!(Caller::named("root", true).may_call("agent_run"));
        assert_ne!(scoped, Caller::named("alice", false));
    }
}
