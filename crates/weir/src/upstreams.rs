//! The upstream MCP servers the operator declares, by name: the only other
//! servers a plan step (`server: NAME`) can reach. Declared on the command
//! line (`--upstream NAME=URL`, `--upstream 'NAME=-- COMMAND ARGS…'`,
//! `--upstream-token-env NAME=VAR`) or in a file (`--upstreams FILE`) in
//! the `mcpServers` form Claude Code, Claude Desktop and Cursor read:
//!
//! ```json
//! {"mcpServers": {
//!   "docs":   {"command": "docs-server", "args": ["--stdio"], "env": {"DOCS_KEY": "${DOCS_KEY}"}},
//!   "github": {"type": "http", "url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${GH_TOKEN}"}}
//! }}
//! ```
//!
//! A server of the file may also say what weir does with it, in a `"weir"`
//! object the other programs ignore: `{"maxConcurrent": N}` (at most N calls
//! at once; more wait their turn) and `{"timeoutSeconds": S}` (a call that
//! has not ended after S seconds fails as timed out), `{"isolation":
//! "per-caller"}` (one server process or session per caller, for servers
//! that keep state; `"shared"`, one for all, is the default) and
//! `{"idleSeconds": S}` (a per-caller one that has had no call for S
//! seconds, 600 unless said, is ended).
//!
//! This is the one place declarations are read, so that everything built on
//! upstreams reads them alike. What a declaration may not do, whoever
//! writes it: forward weir's own credential ([`WEIR_OWN`] cannot be named
//! as an upstream's token or expanded into a declaration), or hand a stdio
//! upstream weir's environment (it starts with only its declared `env`,
//! plus `PATH` and `HOME` unless declared).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::Value;

use crate::cli::UpstreamArgs;

/// Environment variables that hold weir's own credential: never sent to an
/// upstream.
pub(crate) const WEIR_OWN: &[&str] = &["WEIR_TOKEN", "WEIR_REMOTE_TOKEN"];

/// The name of `weir wrap`'s one upstream (in messages, and in a tokens
/// file's `packs=upstream:wrapped`).
pub(crate) const WRAPPED: &str = "wrapped";

/// The declared upstreams, by name.
#[derive(Clone, Debug, Default)]
pub(crate) struct Upstreams {
    servers: BTreeMap<String, Upstream>,
    limits: BTreeMap<String, Limits>,
}

/// What weir does with one upstream's calls (an upstreams file's `"weir"`):
/// none of these unless said.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Limits {
    /// At most this many calls at once; more wait their turn.
    pub(crate) max_concurrent: Option<usize>,
    /// A call that has not ended after this long fails as timed out.
    pub(crate) timeout: Option<Duration>,
    /// One connection for all callers, or one per caller.
    pub(crate) isolation: Isolation,
    /// A per-caller connection with no call for this long is ended
    /// ([`DEFAULT_IDLE`] unless said).
    pub(crate) idle: Option<Duration>,
}

/// How long a per-caller upstream's process may go without a call.
pub(crate) const DEFAULT_IDLE: Duration = Duration::from_secs(600);

/// Whose calls share an upstream's process (or HTTP session).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Isolation {
    /// Every caller's: the default.
    #[default]
    Shared,
    /// Each caller (the credential's name) its own; callers without a
    /// name share the one of [`Isolation::Shared`].
    PerCaller,
}

/// How one upstream is reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Upstream {
    /// A program serving MCP on its stdin and stdout, started (no shell)
    /// with this environment and no other.
    Stdio {
        program: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
    },
    /// A Streamable HTTP endpoint; `headers` go with every request.
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
}

impl Upstreams {
    /// The declarations of `args`, read and checked: names, forms, the
    /// file, the token variables. Reads weir's environment (for `${VAR}`,
    /// the tokens, and a stdio upstream's `PATH` and `HOME`).
    pub(crate) fn from_args(args: &UpstreamArgs) -> anyhow::Result<Upstreams> {
        let env = |name: &str| std::env::var(name).ok();
        let mut upstreams = Upstreams::default();
        if let Some(path) = &args.upstreams_file {
            for (name, upstream, limits) in read_file(path, &env)? {
                upstreams
                    .declare(name.clone(), upstream)
                    .with_context(|| format!("in the upstreams file {}", path.display()))?;
                upstreams.limits.insert(name, limits);
            }
        }
        for declaration in &args.upstream {
            let (name, upstream) = parse_flag(declaration, &env)
                .with_context(|| format!("in --upstream {declaration:?}"))?;
            upstreams.declare(name, upstream)?;
        }
        for pair in &args.upstream_token_env {
            upstreams
                .bearer_from(pair, &env)
                .with_context(|| format!("in --upstream-token-env {pair:?}"))?;
        }
        Ok(upstreams)
    }

    /// `weir wrap`'s one upstream, [`WRAPPED`]: `command` (a program and
    /// its arguments, already split), started with weir's environment but
    /// for weir's own credential. Unlike a declaration, the whole command
    /// line is the user's own, as with any wrapper: a server that reads a
    /// key from the environment the host gave weir still finds it.
    pub(crate) fn wrapped(command: &[String]) -> anyhow::Result<Upstreams> {
        let Some((program, args)) = command.split_first() else {
            bail!("no command to wrap: write `weir wrap -- COMMAND ARGS…`");
        };
        let env = std::env::vars()
            .filter(|(key, _)| !WEIR_OWN.contains(&key.as_str()))
            .collect();
        let mut upstreams = Upstreams::default();
        upstreams.declare(
            WRAPPED.to_owned(),
            Upstream::Stdio {
                program: program.clone(),
                args: args.to_vec(),
                env,
            },
        )?;
        Ok(upstreams)
    }

    /// Whether no upstream is declared.
    pub(crate) fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    fn declare(&mut self, name: String, upstream: Upstream) -> anyhow::Result<()> {
        check_name(&name)?;
        if self.servers.contains_key(&name) {
            bail!("the upstream {name:?} is declared twice");
        }
        self.servers.insert(name, upstream);
        Ok(())
    }

    /// `NAME=VAR`: the HTTP upstream NAME gets `Authorization: Bearer $VAR`.
    fn bearer_from(
        &mut self,
        pair: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> anyhow::Result<()> {
        let Some((name, var)) = pair.split_once('=') else {
            bail!("expected NAME=VAR: an upstream's name and the variable holding its token");
        };
        refuse_own(var)?;
        let token = env(var)
            .filter(|token| !token.is_empty())
            .with_context(|| format!("the variable {var} is not set"))?;
        match self.servers.get_mut(name) {
            Some(Upstream::Http { headers, .. }) => {
                if headers
                    .iter()
                    .any(|(header, _)| header.eq_ignore_ascii_case("authorization"))
                {
                    bail!("the upstream {name:?} already has an Authorization header");
                }
                headers.push(("Authorization".into(), format!("Bearer {token}")));
                Ok(())
            }
            Some(Upstream::Stdio { .. }) => bail!(
                "the upstream {name:?} is a command; give it its token in its env (an upstreams file's \"env\")"
            ),
            None => {
                bail!("no upstream {name:?} is declared (declare it with --upstream {name}=URL)")
            }
        }
    }

    /// The declared names, sorted.
    pub(crate) fn names(&self) -> Vec<String> {
        self.servers.keys().cloned().collect()
    }

    /// The upstream declared as `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&Upstream> {
        self.servers.get(name)
    }

    /// What weir does with `name`'s calls.
    pub(crate) fn limits(&self, name: &str) -> Limits {
        self.limits.get(name).copied().unwrap_or_default()
    }
}

/// 1 to 64 of `A-Z a-z 0-9 _ - .`: a name a plan can spell.
fn check_name(name: &str) -> anyhow::Result<()> {
    let fine = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if !fine {
        bail!(
            "the upstream name {name:?} is not valid: use 1 to 64 of A-Z, a-z, 0-9, '_', '-' or '.'"
        );
    }
    Ok(())
}

fn refuse_own(var: &str) -> anyhow::Result<()> {
    if WEIR_OWN.contains(&var) {
        bail!(
            "{var} is weir's own credential, which weir never sends to another server; give the upstream a token of its own"
        );
    }
    Ok(())
}

/// `NAME=URL` or `NAME=-- COMMAND ARGS…`.
fn parse_flag(
    declaration: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<(String, Upstream)> {
    let Some((name, rest)) = declaration.split_once('=') else {
        bail!("expected NAME=URL or 'NAME=-- COMMAND ARGS…'");
    };
    let rest = rest.trim();
    let upstream = if let Some(command) = rest.strip_prefix("--") {
        let mut words = split_words(command)?.into_iter();
        let program = words
            .next()
            .context("no command after `--`; write 'NAME=-- COMMAND ARGS…'")?;
        Upstream::Stdio {
            program,
            args: words.collect(),
            env: stdio_env(Vec::new(), env),
        }
    } else if rest.starts_with("http://") || rest.starts_with("https://") {
        Upstream::Http {
            url: rest.to_owned(),
            headers: Vec::new(),
        }
    } else {
        bail!(
            "{rest:?} is neither an http:// or https:// URL nor a command after `--` ('NAME=-- COMMAND ARGS…')"
        );
    };
    Ok((name.to_owned(), upstream))
}

/// A stdio upstream's whole environment: what it declares, plus `PATH`
/// and `HOME` from weir's own unless it declares them.
fn stdio_env(
    mut declared: Vec<(String, String)>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<(String, String)> {
    for key in ["PATH", "HOME"] {
        if !declared.iter().any(|(name, _)| name == key)
            && let Some(value) = env(key)
        {
            declared.push((key.to_owned(), value));
        }
    }
    declared
}

/// Words as a shell would split them, without running one: blanks
/// separate, `'…'` and `"…"` quote, `\` escapes the next character
/// (outside single quotes). Nothing is expanded.
fn split_words(line: &str) -> anyhow::Result<Vec<String>> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if let Some(done) = word.take() {
                    words.push(done);
                }
            }
            '\'' => {
                let word = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => bail!("a ' is not closed"),
                    }
                }
            }
            '"' => {
                let word = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => word.push(chars.next().context("a \" is not closed")?),
                        Some(c) => word.push(c),
                        None => bail!("a \" is not closed"),
                    }
                }
            }
            '\\' => word
                .get_or_insert_with(String::new)
                .push(chars.next().context("a \\ ends the command")?),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    Ok(words)
}

/// The declarations of an `mcpServers` file.
fn read_file(
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<Vec<(String, Upstream, Limits)>> {
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the upstreams file {shown}"))?;
    let file: Value = serde_json::from_str(&text)
        .with_context(|| format!("the upstreams file {shown} is not JSON"))?;
    let Some(servers) = file.get("mcpServers").and_then(Value::as_object) else {
        bail!("the upstreams file {shown} has no \"mcpServers\" object");
    };
    let mut declared = Vec::new();
    for (name, server) in servers {
        if server.get("disabled").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        let within = || format!("in {shown}, server {name:?}");
        let upstream = from_json(server, env).with_context(within)?;
        let limits = limits_of(server).with_context(within)?;
        declared.push((name.clone(), upstream, limits));
    }
    Ok(declared)
}

/// One server of an `mcpServers` file: `{command, args?, env?}` or
/// `{url, type?: "http", headers?}`; `${VAR}` and `${VAR:-default}` in its
/// strings are read from weir's environment.
fn from_json(server: &Value, env: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<Upstream> {
    let text = |value: &Value, what: &str| -> anyhow::Result<String> {
        let raw = value
            .as_str()
            .with_context(|| format!("{what} must be a string"))?;
        expand(raw, env).with_context(|| format!("in {what}"))
    };
    let pairs = |key: &str| -> anyhow::Result<Vec<(String, String)>> {
        match server.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Object(entries)) => entries
                .iter()
                .map(|(name, value)| Ok((name.clone(), text(value, &format!("{key}.{name}"))?)))
                .collect(),
            Some(_) => bail!("\"{key}\" must be an object of strings"),
        }
    };
    let kind = server.get("type").and_then(Value::as_str);
    match (server.get("command"), server.get("url"), kind) {
        (Some(command), None, None | Some("stdio")) => {
            let args = match server.get("args") {
                None => Vec::new(),
                Some(Value::Array(args)) => args
                    .iter()
                    .enumerate()
                    .map(|(i, arg)| text(arg, &format!("args[{i}]")))
                    .collect::<anyhow::Result<_>>()?,
                Some(_) => bail!("\"args\" must be a list of strings"),
            };
            Ok(Upstream::Stdio {
                program: text(command, "command")?,
                args,
                env: stdio_env(pairs("env")?, env),
            })
        }
        (None, Some(url), None | Some("http" | "streamable-http" | "streamableHttp")) => {
            let url = text(url, "url")?;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                bail!("\"url\" must be an http:// or https:// URL");
            }
            Ok(Upstream::Http {
                url,
                headers: pairs("headers")?,
            })
        }
        (None, Some(_), Some("sse")) => bail!(
            "\"type\": \"sse\" (the old HTTP+SSE transport) is not supported; weir speaks Streamable HTTP (\"type\": \"http\")"
        ),
        _ => bail!(
            "expected {{\"command\", \"args\"?, \"env\"?}} or {{\"url\", \"type\"?: \"http\", \"headers\"?}}"
        ),
    }
}

/// A server's `"weir"` object: `{"maxConcurrent"?: N ≥ 1, "timeoutSeconds"?:
/// S > 0, "isolation"?: "shared" | "per-caller", "idleSeconds"?: S > 0}`.
fn limits_of(server: &Value) -> anyhow::Result<Limits> {
    let Some(weir) = server.get("weir") else {
        return Ok(Limits::default());
    };
    let Some(weir) = weir.as_object() else {
        bail!("\"weir\" must be an object: {{\"maxConcurrent\"?: N, \"timeoutSeconds\"?: S}}");
    };
    if let Some(other) = weir.keys().find(|key| {
        !matches!(
            key.as_str(),
            "maxConcurrent" | "timeoutSeconds" | "isolation" | "idleSeconds"
        )
    }) {
        bail!(
            "\"weir\" has no key {other:?}: it takes \"maxConcurrent\", \"timeoutSeconds\", \"isolation\" and \"idleSeconds\""
        );
    }
    let max_concurrent = weir
        .get("maxConcurrent")
        .map(|n| {
            n.as_u64()
                .filter(|n| *n >= 1)
                .and_then(|n| usize::try_from(n).ok())
                .context("\"weir.maxConcurrent\" must be a whole number, 1 or more")
        })
        .transpose()?;
    let seconds = |key: &str| {
        weir.get(key)
            .map(|s| {
                s.as_f64()
                    .filter(|s| s.is_finite() && *s > 0.0 && *s < 1e9)
                    .map(Duration::from_secs_f64)
                    .with_context(|| format!("\"weir.{key}\" must be a number of seconds above 0"))
            })
            .transpose()
    };
    let isolation = match weir.get("isolation").map(|value| value.as_str()) {
        None | Some(Some("shared")) => Isolation::Shared,
        Some(Some("per-caller")) => Isolation::PerCaller,
        Some(_) => bail!("\"weir.isolation\" must be \"shared\" or \"per-caller\""),
    };
    Ok(Limits {
        max_concurrent,
        timeout: seconds("timeoutSeconds")?,
        isolation,
        idle: seconds("idleSeconds")?,
    })
}

/// `${VAR}` and `${VAR:-default}` replaced from the environment; an unset
/// variable without a default, or weir's own credential, is an error.
fn expand(raw: &str, env: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<String> {
    let mut out = String::new();
    let mut rest = raw;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').context("a ${ is not closed")?;
        let inside = &after[..end];
        let (var, default) = match inside.split_once(":-") {
            Some((var, default)) => (var, Some(default)),
            None => (inside, None),
        };
        refuse_own(var)?;
        match (env(var), default) {
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => out.push_str(default),
            (None, None) => bail!("the variable {var} is not set"),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "PATH" => Some("/bin".into()),
            "HOME" => Some("/home/w".into()),
            "GH_TOKEN" => Some("gh".into()),
            "WEIR_REMOTE_TOKEN" => Some("weirs-own".into()),
            _ => None,
        }
    }

    #[test]
    fn flags_declare_urls_and_commands_split_without_a_shell() {
        let (name, http) = parse_flag("docs=http://127.0.0.1:9/mcp", &env).unwrap();
        assert_eq!(name, "docs");
        assert_eq!(
            http,
            Upstream::Http {
                url: "http://127.0.0.1:9/mcp".into(),
                headers: vec![]
            }
        );
        let (_, stdio) = parse_flag(
            r#"local=-- weir serve --stdio "a b" 'c $d' e\ f ;touch"#,
            &env,
        )
        .unwrap();
        assert_eq!(
            stdio,
            Upstream::Stdio {
                program: "weir".into(),
                args: ["serve", "--stdio", "a b", "c $d", "e f", ";touch"]
                    .map(str::to_owned)
                    .into(),
                env: vec![
                    ("PATH".into(), "/bin".into()),
                    ("HOME".into(), "/home/w".into())
                ],
            }
        );
        for bad in ["docs", "docs=ftp://x", "docs=--", "docs=-- 'open"] {
            assert!(parse_flag(bad, &env).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_file_in_the_mcp_servers_form_reads_with_its_variables() {
        let server = serde_json::json!({"url": "https://x/mcp", "type": "http", "headers": {"Authorization": "Bearer ${GH_TOKEN}", "X-Plain": "${UNSET:-d}"}});
        assert_eq!(
            from_json(&server, &env).unwrap(),
            Upstream::Http {
                url: "https://x/mcp".into(),
                headers: vec![
                    ("Authorization".into(), "Bearer gh".into()),
                    ("X-Plain".into(), "d".into())
                ]
            }
        );
        let server = serde_json::json!({"command": "srv", "args": ["--stdio"], "env": {"KEY": "k", "PATH": "/opt"}});
        assert_eq!(
            from_json(&server, &env).unwrap(),
            Upstream::Stdio {
                program: "srv".into(),
                args: vec!["--stdio".into()],
                env: vec![
                    ("KEY".into(), "k".into()),
                    ("PATH".into(), "/opt".into()),
                    ("HOME".into(), "/home/w".into())
                ],
            }
        );
        for bad in [
            serde_json::json!({"url": "https://x", "headers": {"A": "${WEIR_REMOTE_TOKEN}"}}),
            serde_json::json!({"url": "https://x", "headers": {"A": "${MISSING}"}}),
            serde_json::json!({"url": "https://x", "type": "sse"}),
            serde_json::json!({"url": "file:///etc/passwd"}),
            serde_json::json!({"command": "a", "url": "https://x"}),
        ] {
            assert!(from_json(&bad, &env).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_servers_weir_object_sets_its_limits() {
        let server = serde_json::json!({"command": "srv", "weir": {"maxConcurrent": 2, "timeoutSeconds": 1.5}});
        assert_eq!(
            limits_of(&server).unwrap(),
            Limits {
                max_concurrent: Some(2),
                timeout: Some(Duration::from_millis(1500)),
                ..Limits::default()
            }
        );
        let server = serde_json::json!({"weir": {"isolation": "per-caller", "idleSeconds": 30}});
        assert_eq!(
            limits_of(&server).unwrap(),
            Limits {
                isolation: Isolation::PerCaller,
                idle: Some(Duration::from_secs(30)),
                ..Limits::default()
            }
        );
        assert_eq!(
            limits_of(&serde_json::json!({"command": "srv"})).unwrap(),
            Limits::default()
        );
        for bad in [
            serde_json::json!({"weir": {"maxConcurrent": 0}}),
            serde_json::json!({"weir": {"maxConcurrent": 1.5}}),
            serde_json::json!({"weir": {"timeoutSeconds": -1}}),
            serde_json::json!({"weir": {"timeout": 5}}),
            serde_json::json!({"weir": {"isolation": "per-session"}}),
            serde_json::json!({"weir": {"idleSeconds": 0}}),
            serde_json::json!({"weir": 5}),
        ] {
            assert!(limits_of(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn weirs_own_credential_cannot_be_an_upstreams_token() {
        let mut upstreams = Upstreams::default();
        let (name, upstream) = parse_flag("docs=http://127.0.0.1:9/mcp", &env).unwrap();
        upstreams.declare(name, upstream).unwrap();
        let own = upstreams
            .bearer_from("docs=WEIR_REMOTE_TOKEN", &env)
            .unwrap_err();
        assert!(own.to_string().contains("weir's own credential"), "{own}");
        upstreams.bearer_from("docs=GH_TOKEN", &env).unwrap();
        assert_eq!(
            upstreams.get("docs"),
            Some(&Upstream::Http {
                url: "http://127.0.0.1:9/mcp".into(),
                headers: vec![("Authorization".into(), "Bearer gh".into())]
            })
        );
        assert!(upstreams.declare("docs".into(), upstream_http()).is_err());
        assert!(upstreams.declare("a b".into(), upstream_http()).is_err());
    }

    fn upstream_http() -> Upstream {
        Upstream::Http {
            url: "http://x".into(),
            headers: vec![],
        }
    }
}
