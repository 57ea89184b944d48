//! The request headers the HTTP edge's security rests on, parsed whole
//! (here, below both weir-web's guard and weir-mcp's `/mcp`): `Host` and
//! `Origin` (DNS-rebinding protection), `Content-Type` and `Authorization`,
//! and the seq in `Last-Event-ID`.
//!
//! Each function reads the raw bytes of one header value and either
//! understands all of them or says why not: nothing is matched by prefix,
//! and bytes that are not visible ASCII are never skipped over. They are
//! pure and public so that tests and fuzz targets can call them directly;
//! what to answer (400, 403, 415, 401) is the transport's decision.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::Seq;

/// Why a header value was not understood.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// A byte that is not visible ASCII (a control byte, or a byte of a
    /// UTF-8 or Latin-1 sequence).
    #[error("it holds a byte that is not visible ASCII")]
    NotText,
    /// Nothing where a host belongs.
    #[error("it names no host")]
    NoHost,
    /// The host is neither a DNS name, a dotted IPv4 address nor a
    /// bracketed IPv6 address.
    #[error("its host is not a DNS name, an IPv4 address or a bracketed IPv6 address")]
    BadHost,
    /// The port is not 1 to 5 digits up to 65535.
    #[error("its port is not a number from 0 to 65535")]
    BadPort,
    /// Something follows the host and port.
    #[error("something follows the host and port")]
    TrailingBytes,
    /// An origin that is not `scheme://host[:port]`.
    #[error("it is not scheme://host[:port]")]
    BadOrigin,
    /// The opaque origin `null` (a sandboxed frame, a local file, a redirect
    /// across origins): it names no site that could be allowed.
    #[error("it is the opaque origin null, which names no site")]
    NullOrigin,
    /// A media type that is not `type/subtype` with `; name=value`
    /// parameters.
    #[error("it is not a media type (type/subtype; name=value)")]
    BadMediaType,
}

/// The host of an authority.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Host<'a> {
    /// A DNS name, as written (names compare without regard to case).
    Name(&'a str),
    /// A dotted-decimal IPv4 address.
    Ipv4(Ipv4Addr),
    /// An IPv6 address (written in brackets).
    Ipv6(Ipv6Addr),
}

impl Host<'_> {
    /// `localhost`, 127.0.0.0/8 or `::1`: names a DNS-rebinding attacker
    /// cannot point at their own site.
    pub fn is_loopback(&self) -> bool {
        match self {
            Host::Name(name) => name.eq_ignore_ascii_case("localhost"),
            Host::Ipv4(ip) => ip.is_loopback(),
            Host::Ipv6(ip) => ip.is_loopback(),
        }
    }

    /// The same host: names without regard to case, addresses by value.
    pub fn same(&self, other: &Host<'_>) -> bool {
        match (self, other) {
            (Host::Name(a), Host::Name(b)) => a.eq_ignore_ascii_case(b),
            (Host::Ipv4(a), Host::Ipv4(b)) => a == b,
            (Host::Ipv6(a), Host::Ipv6(b)) => a == b,
            _ => false,
        }
    }
}

impl fmt::Display for Host<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(name) => f.write_str(name),
            Host::Ipv4(ip) => write!(f, "{ip}"),
            Host::Ipv6(ip) => write!(f, "[{ip}]"),
        }
    }
}

/// `host[:port]`, as in `Host` (RFC 9110 §7.2) and in an origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Authority<'a> {
    /// The host.
    pub host: Host<'a>,
    /// The port, when one is written.
    pub port: Option<u16>,
}

impl fmt::Display for Authority<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.host)?;
        match self.port {
            Some(port) => write!(f, ":{port}"),
            None => Ok(()),
        }
    }
}

/// Longest DNS name (RFC 1035 §2.3.4, in its text form).
const MAX_NAME: usize = 253;

/// Parses a `Host` value: a DNS name, a dotted IPv4 address or a bracketed
/// IPv6 address, then an optional `:port`, then nothing.
///
/// Names are letters, digits, `-`, `_` and `.`; neither userinfo nor
/// percent-encoding is allowed in `Host`, and a browser never sends them.
pub fn parse_authority(value: &[u8]) -> Result<Authority<'_>, HeaderError> {
    let text = visible_ascii(value)?;
    let (host, rest) = match text.strip_prefix('[') {
        Some(bracketed) => {
            let (inside, rest) = bracketed.split_once(']').ok_or(HeaderError::BadHost)?;
            // `Ipv6Addr`'s parser takes no zone id (`%eth0`) and no IPvFuture.
            let ip = inside.parse().map_err(|_| HeaderError::BadHost)?;
            (Host::Ipv6(ip), rest)
        }
        None => {
            let end = text.find(':').unwrap_or(text.len());
            let (name, rest) = text.split_at(end);
            (parse_name(name)?, rest)
        }
    };
    let port = match rest {
        "" => None,
        _ => {
            let digits = rest.strip_prefix(':').ok_or(HeaderError::TrailingBytes)?;
            Some(parse_port(digits)?)
        }
    };
    Ok(Authority { host, port })
}

fn parse_name(name: &str) -> Result<Host<'_>, HeaderError> {
    if name.is_empty() {
        return Err(HeaderError::NoHost);
    }
    if name.len() > MAX_NAME
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err(HeaderError::BadHost);
    }
    // Strict dotted decimal: `127.1` or `0x7f.0.0.1` stay names, which are
    // not loopback, so a lenient resolver's reading never widens the rule.
    Ok(match name.parse::<Ipv4Addr>() {
        Ok(ip) => Host::Ipv4(ip),
        Err(_) => Host::Name(name),
    })
}

fn parse_port(digits: &str) -> Result<u16, HeaderError> {
    // `u16::from_str` would also take a leading `+`.
    if digits.is_empty() || digits.len() > 5 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(HeaderError::BadPort);
    }
    digits.parse().map_err(|_| HeaderError::BadPort)
}

/// A serialized origin (RFC 6454 §6.2): `scheme://host[:port]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Origin<'a> {
    /// The scheme, as written (schemes compare without regard to case).
    pub scheme: &'a str,
    /// Host and port.
    pub authority: Authority<'a>,
}

impl Origin<'_> {
    /// The port, with the scheme's default when none is written
    /// (`https://a.example` and `https://a.example:443` are one origin).
    pub fn port(&self) -> Option<u16> {
        let default = |schemes: [&str; 2], port| {
            schemes
                .iter()
                .any(|scheme| self.scheme.eq_ignore_ascii_case(scheme))
                .then_some(port)
        };
        self.authority
            .port
            .or_else(|| default(["http", "ws"], 80))
            .or_else(|| default(["https", "wss"], 443))
    }

    /// The same origin: scheme and host without regard to case, the same
    /// port once defaults are filled in.
    pub fn same(&self, other: &Origin<'_>) -> bool {
        self.scheme.eq_ignore_ascii_case(other.scheme)
            && self.authority.host.same(&other.authority.host)
            && self.port() == other.port()
    }

    /// A page served from this machine over HTTP(S): `http://localhost:3000`,
    /// `https://127.0.0.1`, `http://[::1]:8080`.
    pub fn is_loopback(&self) -> bool {
        (self.scheme.eq_ignore_ascii_case("http") || self.scheme.eq_ignore_ascii_case("https"))
            && self.authority.host.is_loopback()
    }
}

impl fmt::Display for Origin<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme, self.authority)
    }
}

/// Parses an `Origin` value: `scheme://host[:port]` and nothing else (no
/// path, no userinfo). `null` is [`HeaderError::NullOrigin`].
pub fn parse_origin(value: &[u8]) -> Result<Origin<'_>, HeaderError> {
    let text = visible_ascii(value)?;
    if text == "null" {
        return Err(HeaderError::NullOrigin);
    }
    let (scheme, authority) = text.split_once("://").ok_or(HeaderError::BadOrigin)?;
    // RFC 3986 §3.1: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )
    let mut chars = scheme.bytes();
    let scheme_ok = chars.next().is_some_and(|b| b.is_ascii_alphabetic())
        && chars.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    if !scheme_ok {
        return Err(HeaderError::BadOrigin);
    }
    let authority = parse_authority(authority.as_bytes()).map_err(|error| match error {
        // A path or userinfo: still not an origin.
        HeaderError::TrailingBytes | HeaderError::BadHost | HeaderError::BadPort => {
            HeaderError::BadOrigin
        }
        other => other,
    })?;
    Ok(Origin { scheme, authority })
}

/// A media type (RFC 9110 §8.3.1): `type/subtype *( OWS ";" OWS name=value )`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MediaType<'a> {
    /// The type, as written (compare without regard to case).
    pub kind: &'a str,
    /// The subtype, as written (compare without regard to case).
    pub subtype: &'a str,
    /// The `charset` parameter's value, unquoted, if given.
    pub charset: Option<&'a str>,
}

impl MediaType<'_> {
    /// `application/json`, in UTF-8 (JSON has no other encoding, RFC 8259
    /// §8.1): no charset, or `utf-8`.
    pub fn is_json(&self) -> bool {
        self.kind.eq_ignore_ascii_case("application")
            && self.subtype.eq_ignore_ascii_case("json")
            && self
                .charset
                .is_none_or(|charset| charset.eq_ignore_ascii_case("utf-8"))
    }
}

/// Parses a `Content-Type` value whole: `application/jsonx` is its own
/// subtype, and a parameter that does not parse refuses the whole value.
pub fn parse_media_type(value: &[u8]) -> Result<MediaType<'_>, HeaderError> {
    let text = visible_ascii_or_space(value)?;
    let (essence, mut params) = match text.find(';') {
        Some(at) => text.split_at(at),
        None => (text, ""),
    };
    let (kind, subtype) = essence
        .trim_end_matches([' ', '\t'])
        .split_once('/')
        .ok_or(HeaderError::BadMediaType)?;
    if !is_token(kind) || !is_token(subtype) {
        return Err(HeaderError::BadMediaType);
    }
    let mut charset = None;
    while let Some(rest) = params.strip_prefix(';') {
        let rest = rest.trim_start_matches([' ', '\t']);
        if rest.is_empty() {
            break; // a trailing `;` is tolerated, as browsers do
        }
        let (name, rest) = rest.split_once('=').ok_or(HeaderError::BadMediaType)?;
        if !is_token(name) {
            return Err(HeaderError::BadMediaType);
        }
        let (value, rest) = match rest.strip_prefix('"') {
            Some(quoted) => {
                // No escapes: a charset never needs one, and a value that
                // uses one is refused rather than half-read.
                let (inside, rest) = quoted.split_once('"').ok_or(HeaderError::BadMediaType)?;
                if inside.contains('\\') {
                    return Err(HeaderError::BadMediaType);
                }
                (inside, rest)
            }
            None => {
                let end = rest.find([';', ' ', '\t']).unwrap_or(rest.len());
                let (value, rest) = rest.split_at(end);
                if !is_token(value) {
                    return Err(HeaderError::BadMediaType);
                }
                (value, rest)
            }
        };
        params = rest.trim_start_matches([' ', '\t']);
        if !params.is_empty() && !params.starts_with(';') {
            return Err(HeaderError::BadMediaType);
        }
        if name.eq_ignore_ascii_case("charset") {
            charset = Some(value);
        }
    }
    Ok(MediaType {
        kind,
        subtype,
        charset,
    })
}

/// RFC 9110 §5.6.2: `1*tchar`.
fn is_token(text: &str) -> bool {
    const SYMBOLS: &[u8] = b"!#$%&'*+-.^_`|~";
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || SYMBOLS.contains(&b))
}

/// The credentials of an `Authorization: Bearer <token>` value; `None` for
/// any other scheme. The scheme is matched without regard to case (RFC 9110
/// §11.1), then one or more spaces; the token is every byte after them, as
/// the server's `--token` may be any text.
pub fn bearer_token(value: &[u8]) -> Option<&[u8]> {
    const SCHEME: &[u8] = b"bearer";
    if value.len() <= SCHEME.len() || !value[..SCHEME.len()].eq_ignore_ascii_case(SCHEME) {
        return None;
    }
    let rest = &value[SCHEME.len()..];
    let spaces = rest.iter().take_while(|&&b| b == b' ').count();
    let token = &rest[spaces..];
    // At least one space, then something.
    (spaces > 0 && !token.is_empty()).then_some(token)
}

/// Whether `presented` is `expected`, in time that depends only on the
/// length of `expected`: how far a guess matches is not measurable.
pub fn tokens_match(presented: &[u8], expected: &[u8]) -> bool {
    let mut difference = u8::from(presented.len() != expected.len());
    for (i, &want) in expected.iter().enumerate() {
        let got = presented.get(i).copied().unwrap_or(!want);
        difference |= std::hint::black_box(got ^ want);
    }
    std::hint::black_box(difference) == 0
}

/// The seq of a `Last-Event-ID` on `GET /runs/{id}/events`: decimal digits
/// only (no sign, no spaces), at most `u64::MAX`; `None` otherwise.
pub fn parse_seq(value: &[u8]) -> Option<Seq> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// The value as text, if every byte is visible ASCII (`!` to `~`).
fn visible_ascii(value: &[u8]) -> Result<&str, HeaderError> {
    if value.is_empty() {
        return Err(HeaderError::NoHost);
    }
    if !value.iter().all(u8::is_ascii_graphic) {
        return Err(HeaderError::NotText);
    }
    std::str::from_utf8(value).map_err(|_| HeaderError::NotText)
}

/// Like [`visible_ascii`], also allowing spaces and tabs inside (around
/// parameters).
fn visible_ascii_or_space(value: &[u8]) -> Result<&str, HeaderError> {
    if !value
        .iter()
        .all(|b| b.is_ascii_graphic() || matches!(b, b' ' | b'\t'))
    {
        return Err(HeaderError::NotText);
    }
    std::str::from_utf8(value).map_err(|_| HeaderError::NotText)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// `(value, Some(loopback?))` when it parses, `None` when it does not.
    #[test]
    fn hosts() {
        let cases: &[(&[u8], Option<bool>)] = &[
            (b"localhost", Some(true)),
            (b"LocalHost:8765", Some(true)),
            (b"127.0.0.1", Some(true)),
            (b"127.0.0.1:80", Some(true)),
            (b"127.8.9.10:1", Some(true)),
            (b"[::1]", Some(true)),
            (b"[::1]:8765", Some(true)),
            (b"[0:0:0:0:0:0:0:1]:80", Some(true)),
            (b"example.com", Some(false)),
            (b"example.com:443", Some(false)),
            (b"localhost.evil.com", Some(false)),
            (b"127.0.0.1.evil.com", Some(false)),
            (b"127.1", Some(false)),
            (b"0x7f.0.0.1", Some(false)),
            (b"[::ffff:127.0.0.1]", Some(false)),
            (b"[2001:db8::1]:80", Some(false)),
            // Finding 6: something after the port or the bracket.
            (b"127.0.0.1:80.evil.com", None),
            (b"[::1]evil.com", None),
            (b"[::1]:80evil", None),
            (b"localhost:80:80", None),
            (b"localhost:", None),
            (b"localhost:+80", None),
            (b"localhost:65536", None),
            (b"localhost:000080", None),
            (b"evil.com@localhost", None),
            (b"localhost/path", None),
            (b"local host", None),
            (b"localhost%2ecom", None),
            (b"[::1", None),
            (b"[evil.com]", None),
            (b"[fe80::1%eth0]", None),
            (b":80", None),
            (b"", None),
            // Not ASCII: Latin-1 and UTF-8 bytes, control bytes.
            (b"localhost\xff", None),
            (b"l\xc3\xb6calhost", None),
            (b"127.0.0.1\x00", None),
        ];
        for (value, want) in cases {
            let got = parse_authority(value).ok().map(|a| a.host.is_loopback());
            assert_eq!(got, *want, "{:?}", String::from_utf8_lossy(value));
        }
        assert_eq!(
            parse_authority(b"[::1]:8765"),
            Ok(Authority {
                host: Host::Ipv6(Ipv6Addr::LOCALHOST),
                port: Some(8765)
            })
        );
        assert_eq!(
            parse_authority(b"127.0.0.1:80.evil.com"),
            Err(HeaderError::BadPort)
        );
        assert_eq!(
            parse_authority(b"[::1]evil.com"),
            Err(HeaderError::TrailingBytes)
        );
    }

    #[test]
    fn origins() {
        let cases: &[(&[u8], Option<bool>)] = &[
            (b"http://localhost:3000", Some(true)),
            (b"https://127.0.0.1", Some(true)),
            (b"HTTP://[::1]:8080", Some(true)),
            (b"https://app.example", Some(false)),
            (b"chrome-extension://abc", Some(false)),
            (b"file://localhost", Some(false)),
            (b"http://localhost:3000/path", None),
            (b"http://localhost:3000.evil.com", None),
            (b"http://[::1]evil.com", None),
            (b"http://user@localhost", None),
            (b"localhost:3000", None),
            (b"://localhost", None),
            (b"1http://localhost", None),
            (b"http://", None),
            (b"null", None),
            (b"http://localhost\xff", None),
        ];
        for (value, want) in cases {
            let got = parse_origin(value).ok().map(|o| o.is_loopback());
            assert_eq!(got, *want, "{:?}", String::from_utf8_lossy(value));
        }
        assert_eq!(parse_origin(b"null"), Err(HeaderError::NullOrigin));
        let origin = |text: &'static str| parse_origin(text.as_bytes()).unwrap();
        assert!(origin("https://App.Example").same(&origin("https://app.example:443")));
        assert!(origin("http://a.example:80").same(&origin("HTTP://a.example")));
        assert!(!origin("http://a.example").same(&origin("https://a.example")));
        assert!(!origin("https://a.example:8443").same(&origin("https://a.example")));
    }

    #[test]
    fn media_types() {
        let cases: &[(&[u8], Option<bool>)] = &[
            (b"application/json", Some(true)),
            (b"Application/JSON", Some(true)),
            (b"application/json; charset=utf-8", Some(true)),
            (b"application/json;charset=UTF-8", Some(true)),
            (b"application/json ; charset=\"utf-8\"", Some(true)),
            (b"application/json;", Some(true)),
            (b"application/json; foo=bar; charset=utf-8", Some(true)),
            (b"application/jsonx", Some(false)),
            (b"application/json-seq", Some(false)),
            (b"application/json+x", Some(false)),
            (b"text/json", Some(false)),
            (b"text/plain", Some(false)),
            (b"application/json; charset=latin1", Some(false)),
            (b"application/json x", None),
            (b"application/json; charset", None),
            (b"application/json; charset=utf-8 x", None),
            (b"application/json; charset=\"utf-8", None),
            (b"application/json; charset=\"u\\tf-8\"", None),
            (b"application/", None),
            (b"/json", None),
            (b"application", None),
            (b"", None),
            (b"application/json\xff", None),
        ];
        for (value, want) in cases {
            let got = parse_media_type(value).ok().map(|m| m.is_json());
            assert_eq!(got, *want, "{:?}", String::from_utf8_lossy(value));
        }
    }

    #[test]
    fn bearer_schemes_and_tokens() {
        let cases: &[(&[u8], Option<&[u8]>)] = &[
            (b"Bearer s3cret", Some(b"s3cret")),
            (b"bearer s3cret", Some(b"s3cret")),
            (b"BEARER   s3cret", Some(b"s3cret")),
            (b"Bearer my secret", Some(b"my secret")),
            (b"Bearers3cret", None),
            (b"Bearer", None),
            (b"Bearer ", None),
            (b"Bearer\ts3cret", None),
            (b"Basic czNjcmV0", None),
            (b"Bearerx s3cret", None),
            (b"", None),
        ];
        for (value, want) in cases {
            assert_eq!(
                bearer_token(value),
                *want,
                "{:?}",
                String::from_utf8_lossy(value)
            );
        }
        assert!(tokens_match(b"s3cret", b"s3cret"));
        for wrong in [&b"s3cre"[..], b"s3cret!", b"S3cret", b"", b"s3cre\xf4"] {
            assert!(!tokens_match(wrong, b"s3cret"), "{wrong:?}");
        }
    }

    #[test]
    fn seqs() {
        assert_eq!(parse_seq(b"0"), Some(0));
        assert_eq!(parse_seq(b"18446744073709551615"), Some(u64::MAX));
        for bad in [
            &b"18446744073709551616"[..],
            b"-1",
            b"+1",
            b" 1",
            b"1 ",
            b"",
            b"0x10",
            b"run.5",
        ] {
            assert_eq!(parse_seq(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    fn hosts_strategy() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<[u8; 4]>().prop_map(|ip| Ipv4Addr::from(ip).to_string()),
            any::<[u16; 8]>().prop_map(|ip| format!("[{}]", Ipv6Addr::from(ip))),
            "[a-zA-Z0-9_-]{1,20}(\\.[a-zA-Z0-9_-]{1,20}){0,3}",
            Just("localhost".to_owned()),
            Just("127.0.0.1".to_owned()),
            Just("[::1]".to_owned()),
        ]
    }

    proptest! {
        /// Nothing panics, whatever the bytes.
        #[test]
        fn any_bytes_are_answered(value in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = parse_authority(&value);
            let _ = parse_origin(&value);
            let _ = parse_media_type(&value);
            let _ = bearer_token(&value);
            let _ = parse_seq(&value);
        }

        /// What parses as an authority is exactly what it prints as (up to
        /// the spelling of an IP address): nothing before, after or inside
        /// it was skipped.
        #[test]
        fn an_accepted_authority_is_the_whole_value(value in "[ -~]{0,40}") {
            if let Ok(authority) = parse_authority(value.as_bytes()) {
                let printed = authority.to_string();
                match authority.host {
                    Host::Name(_) => prop_assert_eq!(printed, value),
                    Host::Ipv4(_) | Host::Ipv6(_) => {
                        prop_assert_eq!(parse_authority(printed.as_bytes()), Ok(authority))
                    }
                }
            }
        }

        /// Every host with every port round-trips.
        #[test]
        fn hosts_and_ports_round_trip(host in hosts_strategy(), port in proptest::option::of(any::<u16>())) {
            let value = match port {
                Some(port) => format!("{host}:{port}"),
                None => host.clone(),
            };
            let authority = parse_authority(value.as_bytes()).unwrap();
            prop_assert_eq!(authority.port, port);
            prop_assert_eq!(authority.to_string().to_ascii_lowercase(), value.to_ascii_lowercase());
        }

        /// A loopback host with anything but `:port` after it is refused or
        /// not loopback: no suffix turns a foreign name into a local one.
        #[test]
        fn a_suffix_never_keeps_a_host_loopback(
            host in prop_oneof![Just("localhost"), Just("127.0.0.1"), Just("[::1]")],
            port in proptest::option::of(any::<u16>()),
            suffix in "[ -~]{1,20}",
        ) {
            let base = match port {
                Some(port) => format!("{host}:{port}"),
                None => host.to_owned(),
            };
            let value = format!("{base}{suffix}");
            let digits = |text: &str| text.bytes().all(|b| b.is_ascii_digit());
            // Digits lengthen the port (or the address); with no port yet,
            // `digits:digits` adds one.
            let extends_port = match port {
                Some(_) => digits(&suffix),
                None => {
                    let (more, port) = suffix.split_once(':').unwrap_or((&suffix, ""));
                    digits(more) && digits(port)
                }
            };
            if !extends_port {
                prop_assert!(
                    parse_authority(value.as_bytes()).is_err()
                        || !parse_authority(value.as_bytes()).unwrap().host.is_loopback(),
                    "{value:?} read as loopback"
                );
            }
        }

        /// Bytes outside visible ASCII anywhere refuse the value.
        #[test]
        fn a_non_ascii_byte_anywhere_refuses(
            host in hosts_strategy(),
            at in any::<prop::sample::Index>(),
            byte in prop_oneof![0x80u8..=0xff, 0u8..0x21, Just(0x7fu8)],
        ) {
            let mut value = host.into_bytes();
            value.insert(at.index(value.len() + 1), byte);
            prop_assert!(parse_authority(&value).is_err());
            let mut origin = b"http://".to_vec();
            origin.extend_from_slice(&value);
            prop_assert!(parse_origin(&origin).is_err());
        }

        /// Only `json` itself is JSON: any subtype that merely starts with it is not.
        #[test]
        fn json_is_the_whole_subtype(tail in "[a-zA-Z0-9.+-]{1,10}") {
            let value = format!("application/json{tail}");
            prop_assert!(!parse_media_type(value.as_bytes()).is_ok_and(|m| m.is_json()));
        }

        /// The scheme is read without regard to case.
        #[test]
        fn bearer_in_any_case(mask in any::<[bool; 6]>(), token in "[!-~]{1,40}") {
            let scheme: String = "bearer"
                .chars()
                .zip(mask)
                .map(|(c, upper)| if upper { c.to_ascii_uppercase() } else { c })
                .collect();
            let value = format!("{scheme} {token}");
            prop_assert_eq!(bearer_token(value.as_bytes()), Some(token.as_bytes()));
        }

        /// Comparing tokens is equality.
        #[test]
        fn tokens_match_is_equality(
            a in proptest::collection::vec(any::<u8>(), 0..40),
            b in proptest::collection::vec(any::<u8>(), 0..40),
        ) {
            prop_assert_eq!(tokens_match(&a, &b), a == b);
            prop_assert!(tokens_match(&a, &a));
        }
    }
}
