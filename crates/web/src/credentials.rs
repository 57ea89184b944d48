//! The bearer tokens an HTTP server accepts, each naming a caller.
//!
//! One token (`weir serve --token`) is one credential, `default`, an admin:
//! whoever holds it sees every run, as before there were names. A tokens
//! file (`weir serve --tokens-file`) holds several, one per line:
//!
//! ```text
//! # NAME  SECRET                                                                    [admin]
//! alice   sha256:4b9f2d5e0c6f3a1b8e7d9c2a5f4e3d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e
//! ops     sha256:0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9 admin
//! ci      token:correct-horse-battery-staple
//! ```
//!
//! - `NAME`: 1 to 64 of `A-Z a-z 0-9 . _ - @`; it becomes the owner of the
//!   runs its holder starts.
//! - `SECRET`: `sha256:` and the 64 hex digits of the token's SHA-256 (the
//!   file then holds no secret: `printf %s "$TOKEN" | sha256sum`), or
//!   `token:` and the token itself.
//! - `admin`, optionally: the holder sees and cancels every run.
//!
//! Blank lines and lines starting with `#` are skipped. A line that is not
//! one of these, a name or a token given twice, and a file with no
//! credential at all are errors naming the line.
//!
//! ```
//! use weir_web::credentials::Credentials;
//! let credentials = Credentials::parse("alice token:a-long-token\nroot token:another admin\n").unwrap();
//! assert_eq!(credentials.names().collect::<Vec<_>>(), ["alice", "root"]);
//! let error = Credentials::parse("alice token:x\nalice token:y\n").unwrap_err();
//! assert_eq!(error.to_string(), "line 2: the name \"alice\" is given twice (first on line 1); each credential needs its own name");
//! ```

use weir_runtime::log::kit::sha256_hex;

use crate::headers::tokens_match;
use crate::identity::Identity;

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
            }],
        }
    }

    /// Reads a tokens file (the format is in the module's docs).
    pub fn parse(text: &str) -> Result<Credentials, CredentialsError> {
        let mut list: Vec<(usize, Credential)> = Vec::new();
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
            let credential = parse_line(line).map_err(error)?;
            if let Some((first, _)) = list.iter().find(|(_, c)| c.name == credential.name) {
                return Err(error(format!(
                    "the name {:?} is given twice (first on line {first}); each credential needs its own name",
                    credential.name
                )));
            }
            if let Some((first, other)) = list.iter().find(|(_, c)| c.digest == credential.digest) {
                return Err(error(format!(
                    "this token is also {:?}'s (line {first}); give each credential its own token",
                    other.name
                )));
            }
            list.push((number, credential));
        }
        if list.is_empty() {
            return Err(CredentialsError {
                line: lines,
                message: "no credential in the file; write one per line: NAME sha256:HEX [admin]"
                    .into(),
            });
        }
        Ok(Credentials {
            list: list.into_iter().map(|(_, credential)| credential).collect(),
        })
    }

    /// Whether there are none (every request is admitted).
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The credentials' names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.list.iter().map(|credential| credential.name.as_str())
    }

    /// Whether any credential was given as the token itself (`token:`), so
    /// that whoever reads the file can use it.
    pub fn holds_tokens(&self) -> bool {
        self.list.iter().any(|credential| credential.plain)
    }

    /// The identity a presented token names; `None` when it is no one's.
    /// Every credential is compared, in time that does not depend on which
    /// one matches or how much of a digest a guess got right.
    pub(crate) fn identify(&self, presented: &[u8]) -> Option<Identity> {
        let digest = sha256_hex(presented);
        let mut found = None;
        for credential in &self.list {
            if tokens_match(digest.as_bytes(), credential.digest.as_bytes()) {
                found = Some(credential);
            }
        }
        found.map(|credential| Identity::named(&credential.name, credential.admin))
    }
}

/// `NAME SECRET [admin]`.
fn parse_line(line: &str) -> Result<Credential, String> {
    let fields: Vec<&str> = line.split_ascii_whitespace().collect();
    let (name, secret, admin) = match fields[..] {
        [name, secret] => (name, secret, false),
        [name, secret, "admin"] => (name, secret, true),
        [_, _, flag] => {
            return Err(format!(
                "unknown flag {flag:?}; the only one is admin (NAME SECRET [admin])"
            ));
        }
        _ => {
            return Err(format!(
                "expected NAME SECRET [admin], got {} fields; a token cannot contain spaces",
                fields.len()
            ));
        }
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
    Ok(Credential {
        name: name.to_owned(),
        admin,
        digest,
        plain,
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
            Some(Identity::named("alice", false))
        );
        assert_eq!(
            credentials.identify(b"root-token"),
            Some(Identity::named("root", true))
        );
        assert_eq!(
            credentials.identify(b"bob-token"),
            Some(Identity::named("bob", false))
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
            Some(Identity::named(DEFAULT_NAME, true))
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
                "line 1: expected NAME SECRET [admin], got 1 fields",
            ),
            (
                "\nalice token:a b c",
                "line 2: expected NAME SECRET [admin], got 4 fields",
            ),
            ("alice token:a root", "line 1: unknown flag \"root\""),
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

    #[test]
    fn debug_shows_no_digest() {
        let credentials = Credentials::single("s3cret");
        let shown = format!("{credentials:?}");
        assert_eq!(shown, r#"[("default", true)]"#);
    }
}
