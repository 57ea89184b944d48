//! The bearer tokens an HTTP server accepts, each naming a caller and what
//! it may call.
//!
//! One token (`weir serve --token`) is one credential, `default`, an admin:
//! whoever holds it sees every run and calls every tool, as before there
//! were names. A tokens file (`weir serve --tokens-file`) holds several,
//! one per line:
//!
//! ```text
//! # NAME  SECRET                                                                    [admin | tools=… packs=…]
//! alice   sha256:4b9f2d5e0c6f3a1b8e7d9c2a5f4e3d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e
//! ops     sha256:0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9 admin
//! ci      token:correct-horse-battery-staple packs=exec,runs
//! review  token:another-long-token tools=find_references,search_symbols packs=critique
//! ```
//!
//! - `NAME`: 1 to 64 of `A-Z a-z 0-9 . _ - @`; it becomes the owner of the
//!   runs its holder starts.
//! - `SECRET`: `sha256:` and the 64 hex digits of the token's SHA-256 (the
//!   file then holds no secret: `printf %s "$TOKEN" | sha256sum`), or
//!   `token:` and the token itself.
//! - `admin`, optionally: the holder sees and cancels every run, and calls
//!   every tool. It takes no `tools=` or `packs=` (an admin keeps all).
//! - `tools=NAME,…` and/or `packs=NAME,…`, optionally, in any order: the
//!   holder may call these tools and every tool of these packs, and nothing
//!   else. The packs are `exec`, `codeintel`, `critique`, `agents`,
//!   `llmstxt`, `plan`, `runs` (weir's own `runs_*` tools and `get_status`), with
//!   `--fixtures`, `fixtures`, and `upstream:NAME` for the tools weir
//!   serves of each declared upstream server `NAME` (`weir wrap`'s is
//!   `upstream:wrapped`).
//! - Neither: every tool **except the agent tools** (`agent_run` and the
//!   `roast` tools, which start coding-agent CLIs on the server's machine);
//!   a line grants those only by naming them (`tools=agent_run`) or their
//!   packs (`packs=agents`, `packs=critique`).
//!
//! A tool a holder may not call is not in its `tools/list`, and calling it
//! is refused exactly as calling a tool that does not exist (the same
//! JSON-RPC error, naming only the tools it may call). The scope holds for
//! everything the holder's runs start: a `plan_run` step or an agent's
//! weir tool is a child run, and a child may call only what its root's
//! caller may. Which runs a holder sees is unchanged: its own, or every
//! run for an admin.
//!
//! Blank lines and lines starting with `#` are skipped. A line that is not
//! one of these, a name or a token given twice, and a file with no
//! credential at all are errors naming the line. [`Credentials::parse`]
//! checks the syntax; [`Credentials::resolve`] then checks each name in
//! `tools=` and `packs=` against the tools and packs this server serves:
//! a name it does not serve is an error naming the line — a typo, and also
//! a tool or pack that is switched off (`--no-exec`) or not built, since a
//! grant that silently means nothing today would silently mean something
//! after a restart with other options.
//!
//! ```
//! use weir_web::credentials::{Credentials, ServedTools};
//! let credentials = Credentials::parse("alice token:a-long-token tools=execute_code\nroot token:another admin\n").unwrap();
//! assert_eq!(credentials.names().collect::<Vec<_>>(), ["alice", "root"]);
//! let error = Credentials::parse("alice token:x\nalice token:y\n").unwrap_err();
//! assert_eq!(error.to_string(), "line 2: the name \"alice\" is given twice (first on line 1); each credential needs its own name");
//! let served = ServedTools::from_packs([("exec", vec!["execute_code", "validate_code"])]);
//! let error = Credentials::parse("alice token:x tools=execute_cod").unwrap().resolve(&served).unwrap_err();
//! assert_eq!(error.to_string(), "line 1: tools=execute_cod: this server serves no tool \"execute_cod\" (it serves execute_code, validate_code); a tool of a pack that is off or not built cannot be granted: fix the name, or enable its pack");
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use weir_runtime::Principal;
use weir_runtime::log::kit::sha256_hex;

use crate::headers::tokens_match;

/// One token and who holds it.
#[derive(Clone, PartialEq, Eq)]
struct Credential {
    name: String,
    admin: bool,
    /// Hex SHA-256 of the token: only a digest is kept in memory, and a
    /// presented token is compared by its digest.
    digest: String,
    /// Whether the file held the token itself rather than its digest.
    plain: bool,
    /// Its line in the file (0 for `--token`'s).
    line: usize,
    /// `tools=` and `packs=` as written; both empty without either.
    granted: Granted,
    /// The tools it may call; `None`: every one. Until
    /// [`Credentials::resolve`], only what `tools=` names (packs unread),
    /// and every tool for a line without a grant.
    tools: Option<Arc<BTreeSet<String>>>,
}

/// What a line grants, as written.
#[derive(Clone, Default, PartialEq, Eq)]
struct Granted {
    tools: Vec<String>,
    packs: Vec<String>,
}

impl Granted {
    fn is_empty(&self) -> bool {
        self.tools.is_empty() && self.packs.is_empty()
    }
}

/// The tokens an HTTP server accepts; none means every request is admitted,
/// as one client that sees every run.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    list: Vec<Credential>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Names and flags only: digests of weak tokens can be guessed.
        f.debug_list()
            .entries(self.list.iter().map(|c| (&c.name, c.admin)))
            .finish()
    }
}

/// The name the one token of `--token` gets.
pub const DEFAULT_NAME: &str = "default";

/// Why a tokens file was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("line {line}: {message}")]
pub struct CredentialsError {
    /// The line, from 1 (the last line when the file has no credential).
    pub line: usize,
    /// What is wrong with it, and how to write it.
    pub message: String,
}

/// What a server serves, for [`Credentials::resolve`]: each pack's tools
/// by the pack's name (`Pack::name`; weir's own tools as `runs`), and
/// which of them are agent tools (they start coding-agent CLIs), which a
/// line without `tools=` or `packs=` does not get.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServedTools {
    /// Pack name to its tools' names.
    pub packs: BTreeMap<String, BTreeSet<String>>,
    /// The agent tools among them.
    pub agent_tools: BTreeSet<String>,
}

impl ServedTools {
    /// Packs and their tools, no agent tools.
    pub fn from_packs<'a>(packs: impl IntoIterator<Item = (&'a str, Vec<&'a str>)>) -> ServedTools {
        ServedTools {
            packs: packs
                .into_iter()
                .map(|(pack, tools)| {
                    let tools = tools.into_iter().map(str::to_owned).collect();
                    (pack.to_owned(), tools)
                })
                .collect(),
            agent_tools: BTreeSet::new(),
        }
    }

    /// Every tool, of every pack.
    fn all(&self) -> BTreeSet<String> {
        self.packs.values().flatten().cloned().collect()
    }
}

impl Credentials {
    /// No credentials: every request is admitted.
    pub fn none() -> Credentials {
        Credentials::default()
    }

    /// The one token of `--token`: the credential [`DEFAULT_NAME`], an admin.
    pub fn single(token: &str) -> Credentials {
        Credentials {
            list: vec![Credential {
                name: DEFAULT_NAME.into(),
                admin: true,
                digest: sha256_hex(token.as_bytes()),
                plain: true,
                line: 0,
                granted: Granted::default(),
                tools: None,
            }],
        }
    }

    /// Reads a tokens file (the format is in the module's docs). Its grants
    /// are read as names only: [`Credentials::resolve`] checks them against
    /// what the server serves and expands packs.
    pub fn parse(text: &str) -> Result<Credentials, CredentialsError> {
        let mut list: Vec<Credential> = Vec::new();
        let mut lines = 0;
        for (index, line) in text.lines().enumerate() {
            let number = index + 1;
            lines = number;
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let error = |message: String| CredentialsError {
                line: number,
                message,
            };
            let credential = parse_line(line, number).map_err(error)?;
            if let Some(first) = list.iter().find(|c| c.name == credential.name) {
                return Err(error(format!(
                    "the name {:?} is given twice (first on line {}); each credential needs its own name",
                    credential.name, first.line
                )));
            }
            if let Some(other) = list.iter().find(|c| c.digest == credential.digest) {
                return Err(error(format!(
                    "this token is also {:?}'s (line {}); give each credential its own token",
                    other.name, other.line
                )));
            }
            list.push(credential);
        }
        if list.is_empty() {
            return Err(CredentialsError {
                line: lines,
                message: "no credential in the file; write one per line: NAME sha256:HEX [admin]"
                    .into(),
            });
        }
        Ok(Credentials { list })
    }

    /// Each credential's tools, against what the server serves: an admin
    /// keeps every tool; a line without `tools=` or `packs=` gets every tool
    /// but the agent tools; a line with them gets exactly what they name.
    /// A name the server does not serve is an error naming its line.
    pub fn resolve(mut self, served: &ServedTools) -> Result<Credentials, CredentialsError> {
        let all = served.all();
        for credential in &mut self.list {
            if credential.admin {
                continue;
            }
            let error = |message: String| CredentialsError {
                line: credential.line,
                message,
            };
            let granted = &credential.granted;
            let tools: BTreeSet<String> = if granted.is_empty() {
                all.difference(&served.agent_tools).cloned().collect()
            } else {
                let mut tools = BTreeSet::new();
                for tool in &granted.tools {
                    if !all.contains(tool) {
                        let served = all.iter().cloned().collect::<Vec<_>>().join(", ");
                        return Err(error(format!(
                            "tools={tool}: this server serves no tool {tool:?} (it serves {served}); a tool of a pack that is off or not built cannot be granted: fix the name, or enable its pack"
                        )));
                    }
                    tools.insert(tool.clone());
                }
                for pack in &granted.packs {
                    let Some(pack_tools) = served.packs.get(pack) else {
                        let served = served.packs.keys().cloned().collect::<Vec<_>>().join(", ");
                        return Err(error(format!(
                            "packs={pack}: this server serves no pack {pack:?} (it serves {served}); a pack that is off or not built cannot be granted: fix the name, or enable the pack"
                        )));
                    };
                    tools.extend(pack_tools.iter().cloned());
                }
                tools
            };
            credential.tools = Some(Arc::new(tools));
        }
        Ok(self)
    }

    /// Whether there are none (every request is admitted).
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The credentials' names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.list.iter().map(|credential| credential.name.as_str())
    }

    /// The tools the credential `name` may call (`None`: every tool, or no
    /// such credential).
    pub fn tools_of(&self, name: &str) -> Option<&BTreeSet<String>> {
        self.list
            .iter()
            .find(|credential| credential.name == name)
            .and_then(|credential| credential.tools.as_deref())
    }

    /// Whether any credential was given as the token itself (`token:`), so
    /// that whoever reads the file can use it.
    pub fn holds_tokens(&self) -> bool {
        self.list.iter().any(|credential| credential.plain)
    }

    /// The identity a presented token names; `None` when it is no one's.
    /// Every credential is compared, in time that does not depend on which
    /// one matches or how much of a digest a guess got right.
    pub(crate) fn identify(&self, presented: &[u8]) -> Option<Principal> {
        let digest = sha256_hex(presented);
        let mut found = None;
        for credential in &self.list {
            if tokens_match(digest.as_bytes(), credential.digest.as_bytes()) {
                found = Some(credential);
            }
        }
        found.map(|credential| {
            Principal::named(&credential.name, credential.admin)
                .with_tools(credential.tools.clone())
        })
    }
}

/// `NAME SECRET [admin]`, or `NAME SECRET [tools=LIST] [packs=LIST]`.
fn parse_line(line: &str, number: usize) -> Result<Credential, String> {
    const FORM: &str = "NAME SECRET [admin], or NAME SECRET [tools=A,B] [packs=C,D]";
    let fields: Vec<&str> = line.split_ascii_whitespace().collect();
    let [name, secret, flags @ ..] = &fields[..] else {
        return Err(format!(
            "expected {FORM}, got {} fields; a token cannot contain spaces",
            fields.len()
        ));
    };
    let valid_name = name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'@'));
    if !valid_name {
        return Err(format!(
            "invalid name {name:?}: use 1 to 64 of A-Z, a-z, 0-9, '.', '_', '-' or '@'"
        ));
    }
    let (digest, plain) = if let Some(hex) = secret.strip_prefix("sha256:") {
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!(
                "the secret of {name:?} is not sha256: and 64 hex digits; write the SHA-256 of the token (printf %s \"$TOKEN\" | sha256sum)"
            ));
        }
        (hex.to_ascii_lowercase(), false)
    } else if let Some(token) = secret.strip_prefix("token:") {
        if token.is_empty() {
            return Err(format!("the token of {name:?} is empty"));
        }
        (sha256_hex(token.as_bytes()), true)
    } else {
        return Err(format!(
            "the secret of {name:?} must start with sha256: (the token's SHA-256, preferred) or token: (the token itself)"
        ));
    };
    let mut admin = false;
    let mut granted = Granted::default();
    for flag in flags {
        let (list, names) = match flag.split_once('=') {
            None if *flag == "admin" && !admin => {
                admin = true;
                continue;
            }
            None if *flag == "admin" => return Err("admin is given twice".into()),
            Some(("tools", names)) => (&mut granted.tools, names),
            Some(("packs", names)) => (&mut granted.packs, names),
            _ => {
                return Err(format!(
                    "unknown flag {flag:?}; a line is {FORM} (a token cannot contain spaces)"
                ));
            }
        };
        let key = &flag[..flag.len() - names.len() - 1];
        if !list.is_empty() {
            return Err(format!(
                "{key}= is given twice; list every name in one {key}=, separated by commas"
            ));
        }
        for entry in names.split(',') {
            let valid = !entry.is_empty()
                && entry
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'));
            if !valid {
                return Err(format!(
                    "{key}={names}: {entry:?} is not a name; list names separated by commas, without spaces"
                ));
            }
            list.push(entry.to_owned());
        }
    }
    if admin && !granted.is_empty() {
        return Err(format!(
            "{name:?} is an admin, which calls every tool: drop admin, or drop tools= and packs="
        ));
    }
    // Before resolving: named tools only; without a grant, every tool.
    let tools =
        (!admin && !granted.is_empty()).then(|| Arc::new(granted.tools.iter().cloned().collect()));
    Ok(Credential {
        name: (*name).to_owned(),
        admin,
        digest,
        plain,
        line: number,
        granted,
        tools,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> String {
        Credentials::parse(text).unwrap_err().to_string()
    }

    #[test]
    fn each_token_names_its_holder() {
        let alice_digest = sha256_hex(b"alice-token");
        let text = format!(
            "# who may call\n\nalice sha256:{}\n  root token:root-token admin  \nbob\ttoken:bob-token\n",
            alice_digest.to_ascii_uppercase()
        );
        let credentials = Credentials::parse(&text).unwrap();
        assert_eq!(
            credentials.names().collect::<Vec<_>>(),
            ["alice", "root", "bob"]
        );
        assert!(credentials.holds_tokens());
        assert_eq!(
            credentials.identify(b"alice-token"),
            Some(Principal::named("alice", false))
        );
        assert_eq!(
            credentials.identify(b"root-token"),
            Some(Principal::named("root", true))
        );
        assert_eq!(
            credentials.identify(b"bob-token"),
            Some(Principal::named("bob", false))
        );
        for wrong in [
            &b""[..],
            b"alice-toke",
            b"alice-token ",
            alice_digest.as_bytes(),
        ] {
            assert_eq!(credentials.identify(wrong), None, "{wrong:?}");
        }
        let hashed = Credentials::parse(&format!("alice sha256:{alice_digest}")).unwrap();
        assert!(!hashed.holds_tokens());
    }

    #[test]
    fn the_single_token_is_the_default_admin() {
        let credentials = Credentials::single("s3cret");
        assert_eq!(
            credentials.identify(b"s3cret"),
            Some(Principal::named(DEFAULT_NAME, true))
        );
        assert_eq!(credentials.identify(b"s3cre"), None);
        assert!(Credentials::none().is_empty());
    }

    #[test]
    fn bad_lines_are_refused_naming_the_line() {
        let digest = sha256_hex(b"t");
        for (text, expected) in [
            (
                "alice",
                "line 1: expected NAME SECRET [admin], or NAME SECRET [tools=A,B] [packs=C,D], got 1 fields",
            ),
            ("\nalice token:a b c", "line 2: unknown flag \"b\""),
            ("alice token:a root", "line 1: unknown flag \"root\""),
            ("alice token:a tool=x", "line 1: unknown flag \"tool=x\""),
            ("alice token:a admin admin", "line 1: admin is given twice"),
            (
                "alice token:a tools=x tools=y",
                "line 1: tools= is given twice; list every name in one tools=",
            ),
            (
                "alice token:a packs=exec,,plan",
                "line 1: packs=exec,,plan: \"\" is not a name",
            ),
            ("alice token:a tools=", "line 1: tools=: \"\" is not a name"),
            (
                "alice token:a tools=a/b",
                "line 1: tools=a/b: \"a/b\" is not a name",
            ),
            (
                "root token:a admin tools=execute_code",
                "line 1: \"root\" is an admin, which calls every tool",
            ),
            ("al/ice token:a", "line 1: invalid name \"al/ice\""),
            (
                "alice hunter2",
                "line 1: the secret of \"alice\" must start with sha256:",
            ),
            (
                "alice sha256:abc",
                "line 1: the secret of \"alice\" is not sha256: and 64 hex digits",
            ),
            ("alice token:", "line 1: the token of \"alice\" is empty"),
            (
                "a token:x\nb token:y\na token:z",
                "line 3: the name \"a\" is given twice (first on line 1)",
            ),
            ("", "line 0: no credential in the file"),
            ("# nobody\n", "line 1: no credential in the file"),
        ] {
            let got = error(text);
            assert!(got.starts_with(expected), "{text:?}: {got}");
        }
        let same_token = format!("a token:t\nb sha256:{digest}");
        assert_eq!(
            error(&same_token),
            "line 2: this token is also \"a\"'s (line 1); give each credential its own token"
        );
        let long_name = format!("{} token:x", "n".repeat(65));
        assert!(error(&long_name).contains("invalid name"));
    }

    fn served() -> ServedTools {
        let mut served = ServedTools::from_packs([
            ("exec", vec!["execute_code", "validate_code"]),
            ("critique", vec!["roast", "agent_run", "critique_status"]),
            ("plan", vec!["plan_run"]),
            ("runs", vec!["runs_list", "get_status"]),
        ]);
        served.agent_tools = ["roast", "agent_run"].map(str::to_owned).into();
        served
    }

    fn tools_of(credentials: &Credentials, name: &str) -> Option<Vec<String>> {
        credentials
            .tools_of(name)
            .map(|tools| tools.iter().cloned().collect())
    }

    #[test]
    fn grants_name_tools_and_packs_and_the_default_leaves_out_agents() {
        let text = "\
            root token:r admin\n\
            plain token:p\n\
            one token:o tools=plan_run\n\
            mixed token:m packs=exec,runs tools=agent_run\n\
            critic token:c packs=critique\n";
        let parsed = Credentials::parse(text).unwrap();
        // Before resolving: the named tools only, packs not yet read.
        assert_eq!(tools_of(&parsed, "one"), Some(vec!["plan_run".into()]));
        assert_eq!(tools_of(&parsed, "mixed"), Some(vec!["agent_run".into()]));
        assert_eq!(tools_of(&parsed, "plain"), None);
        let resolved = parsed.resolve(&served()).unwrap();
        assert_eq!(tools_of(&resolved, "root"), None);
        assert_eq!(
            tools_of(&resolved, "plain").unwrap(),
            [
                "critique_status",
                "execute_code",
                "get_status",
                "plan_run",
                "runs_list",
                "validate_code"
            ]
        );
        assert_eq!(tools_of(&resolved, "one").unwrap(), ["plan_run"]);
        assert_eq!(
            tools_of(&resolved, "mixed").unwrap(),
            [
                "agent_run",
                "execute_code",
                "get_status",
                "runs_list",
                "validate_code"
            ]
        );
        assert_eq!(
            tools_of(&resolved, "critic").unwrap(),
            ["agent_run", "critique_status", "roast"]
        );
        let one = resolved.identify(b"o").unwrap();
        assert!(one.may_call("plan_run") && !one.may_call("execute_code"));
        let root = resolved.identify(b"r").unwrap();
        assert!(root.may_call("agent_run") && root.allowed_tools().is_none());
    }

    #[test]
    fn a_grant_of_what_the_server_does_not_serve_is_refused_naming_the_line() {
        let resolve = |text: &str| {
            Credentials::parse(text)
                .unwrap()
                .resolve(&served())
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            resolve("a token:a\nb token:b tools=plan_run,index_repo"),
            "line 2: tools=index_repo: this server serves no tool \"index_repo\" (it serves agent_run, critique_status, execute_code, get_status, plan_run, roast, runs_list, validate_code); a tool of a pack that is off or not built cannot be granted: fix the name, or enable its pack"
        );
        assert_eq!(
            resolve("\n\nb token:b packs=codeintel"),
            "line 3: packs=codeintel: this server serves no pack \"codeintel\" (it serves critique, exec, plan, runs); a pack that is off or not built cannot be granted: fix the name, or enable the pack"
        );
    }

    #[test]
    fn debug_shows_no_digest() {
        let credentials = Credentials::single("s3cret");
        let shown = format!("{credentials:?}");
        assert_eq!(shown, r#"[("default", true)]"#);
    }
}
