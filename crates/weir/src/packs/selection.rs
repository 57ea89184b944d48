//! `weir serve --tools` and `--no-tools`: which tools are served, named by
//! tool, by pack or by a pattern with `*`. A host loads every tool it is
//! offered into its model's context, so an operator who needs three tools
//! should be able to serve three.

use crate::cli::ServeArgs;

/// The pack of weir's own tools over its runs (`runs_*`, `get_status`),
/// which the MCP server serves itself.
pub(crate) const RUNS: &str = "runs";

/// The tools `--tools` and `--no-tools` ask for.
#[derive(Debug, Default)]
pub(crate) struct Selection {
    /// `--tools`: only what these name; `None`: everything.
    only: Option<Vec<String>>,
    /// `--no-tools`, and the packs of `--no-exec`, `--no-codeintel` and
    /// `--no-critique`, which are its aliases.
    without: Vec<String>,
}

impl Selection {
    pub(crate) fn from_args(args: &ServeArgs) -> Selection {
        let mut without = args.no_tools.clone();
        #[cfg(feature = "exec")]
        if args.exec.no_exec {
            without.push("exec".into());
        }
        #[cfg(feature = "codeintel")]
        if args.codeintel.no_codeintel {
            without.push("codeintel".into());
        }
        #[cfg(feature = "critique")]
        if args.critique.no_critique {
            without.push("critique".into());
        }
        let only = (!args.tools.is_empty()).then(|| args.tools.clone());
        Selection { only, without }
    }

    /// Whether the pack `pack` is built at all: not when it is left out by
    /// name, nor when `--tools` names only other packs (a pack may probe
    /// the machine, or fail to start, for tools nobody asked for). A name
    /// that may be a tool's needs every pack built to be looked up.
    pub(crate) fn builds(&self, pack: &str) -> bool {
        if self.without.iter().any(|name| matches(name, pack)) {
            return false;
        }
        self.only.as_ref().is_none_or(|only| {
            only.iter()
                .any(|name| matches(name, pack) || !PACKS.iter().any(|known| matches(name, known)))
        })
    }

    /// Whether the tool `tool` of the pack `pack` is served.
    pub(crate) fn serves(&self, pack: &str, tool: &str) -> bool {
        let named = |name: &String| matches(name, pack) || matches(name, tool);
        self.only.as_ref().is_none_or(|only| only.iter().any(named))
            && !self.without.iter().any(named)
    }

    /// Refuses a name that matches no pack and no tool of `offered` (each
    /// pack built, with all its tools), naming the choices.
    pub(crate) fn check(&self, offered: &[(String, Vec<String>)]) -> anyhow::Result<()> {
        let packs = PACKS
            .iter()
            .map(|pack| (*pack).to_owned())
            .chain(offered.iter().map(|(pack, _)| pack.clone()))
            .collect::<std::collections::BTreeSet<_>>();
        let tools = offered.iter().flat_map(|(_, tools)| tools);
        let known = |name: &String| {
            packs.iter().any(|pack| matches(name, pack))
                || tools.clone().any(|tool| matches(name, tool))
        };
        let given = self.only.iter().flatten().chain(&self.without);
        let unknown: Vec<&str> = given
            .filter(|name| !known(name))
            .map(String::as_str)
            .collect();
        if unknown.is_empty() {
            return Ok(());
        }
        let packs: Vec<&str> = packs.iter().map(String::as_str).collect();
        let tools: Vec<&str> = tools.map(String::as_str).collect();
        anyhow::bail!(
            "--tools/--no-tools: no pack or tool is named {}; the packs are {} and the tools {}",
            unknown.join(", "),
            packs.join(", "),
            tools.join(", ")
        )
    }
}

/// The packs a name may name, whether this build has them or not
/// (`fixtures` and `upstream:NAME` are named once served).
const PACKS: &[&str] = &[
    "exec",
    "codeintel",
    "critique",
    "agents",
    "llmstxt",
    "plan",
    RUNS,
];

/// Whether `pattern` (`*` matching any run of characters) matches `name`
/// whole.
fn matches(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::{Selection, matches};

    #[test]
    fn a_pattern_matches_whole_names_with_stars_for_any_run() {
        for (pattern, name, expected) in [
            ("exec", "exec", true),
            ("exec", "execute_code", false),
            ("roast*", "roast", true),
            ("roast*", "roast_idea", true),
            ("*_code", "execute_code", true),
            ("*_code", "list_languages", false),
            ("r*s*t", "roast", true),
            ("a*a", "a", false),
            ("*", "anything", true),
        ] {
            assert_eq!(matches(pattern, name), expected, "{pattern} on {name}");
        }
    }

    fn selection(only: &[&str], without: &[&str]) -> Selection {
        let owned = |names: &[&str]| names.iter().map(|name| (*name).to_owned()).collect();
        Selection {
            only: (!only.is_empty()).then(|| owned(only)),
            without: owned(without),
        }
    }

    #[test]
    fn packs_named_alone_build_only_those() {
        let only = selection(&["codeintel", "exec"], &[]);
        assert!(only.builds("exec") && only.builds("codeintel"));
        assert!(!only.builds("critique"));
        assert!(only.serves("exec", "execute_code"));
        assert!(!only.serves("runs", "runs_list"));
        // A tool's name: every pack is built to find it.
        let tool = selection(&["execute_code"], &[]);
        assert!(tool.builds("critique"));
        assert!(tool.serves("exec", "execute_code") && !tool.serves("exec", "list_languages"));
        let without = selection(&[], &["critique", "runs_cancel"]);
        assert!(!without.builds("critique") && without.builds("exec"));
        assert!(without.serves("runs", "runs_list") && !without.serves("runs", "runs_cancel"));
    }

    #[test]
    fn a_name_that_matches_nothing_is_refused_with_the_choices() {
        let offered = vec![("exec".to_owned(), vec!["execute_code".to_owned()])];
        assert!(
            selection(&["exec", "execute_*"], &["runs"])
                .check(&offered)
                .is_ok()
        );
        let error = selection(&["exce"], &[])
            .check(&offered)
            .unwrap_err()
            .to_string();
        assert!(error.contains("named exce;"), "{error}");
        assert!(
            error.contains("codeintel") && error.contains("execute_code"),
            "{error}"
        );
    }
}
