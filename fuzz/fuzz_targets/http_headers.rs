//! The header parsers the HTTP transport's security rests on
//! (`weir_mcp::transport::http::headers`), each on the whole input.
//!
//! Properties, each against an independent reading of the rule rather than
//! the parser's own code:
//! - an authority that parses prints as something that parses to the same
//!   value (for a name, the value is the name and its port: nothing was
//!   skipped);
//! - a loopback verdict holds only for `localhost`, 127/8 or `[::1]`, with
//!   at most `:port` after it;
//! - an origin round-trips the same way, and is loopback only over HTTP(S);
//! - `application/json` is read only from a value that is that essence
//!   (any case), then parameters;
//! - a bearer token is exactly what follows `bearer` (any case) and spaces;
//! - `tokens_match` is equality; `parse_seq` is the decimal value, or none.
#![no_main]

use std::net::{Ipv4Addr, Ipv6Addr};

use libfuzzer_sys::fuzz_target;
use weir_mcp::transport::http::headers::{
    Host, bearer_token, parse_authority, parse_media_type, parse_origin, parse_seq, tokens_match,
};

/// `localhost`, a dotted-quad in 127/8 or a bracketed `::1`, spelled any
/// way the standard library reads as such.
fn loopback_literal(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<Ipv4Addr>()
            .is_ok_and(|ip| ip.octets()[0] == 127)
        || host
            .strip_prefix('[')
            .and_then(|inner| inner.strip_suffix(']'))
            .and_then(|inner| inner.parse::<Ipv6Addr>().ok())
            .is_some_and(|ip| ip == Ipv6Addr::LOCALHOST)
}

/// `value` without a final `:port` (1 to 5 digits, at most 65535).
fn without_port(value: &str) -> &str {
    match value.rsplit_once(':') {
        Some((host, port))
            if (1..=5).contains(&port.len())
                && port.bytes().all(|b| b.is_ascii_digit())
                && port.parse::<u32>().is_ok_and(|p| p <= 65535) =>
        {
            host
        }
        _ => value,
    }
}

fn check_authority(value: &[u8]) {
    let Ok(authority) = parse_authority(value) else {
        return;
    };
    let text = std::str::from_utf8(value).expect("an authority that parses is ASCII");
    assert!(value.iter().all(u8::is_ascii_graphic), "{text:?}");
    let printed = authority.to_string();
    assert_eq!(
        parse_authority(printed.as_bytes()),
        Ok(authority),
        "{text:?} printed as {printed:?}"
    );
    // A name is kept as written: what follows it is the port, all of it
    // (leading zeros are allowed, so compare the number).
    if let Host::Name(name) = authority.host {
        let rest = text
            .strip_prefix(name)
            .expect("a name is where the value starts");
        let port = rest
            .strip_prefix(':')
            .map(|digits| digits.parse::<u16>().ok());
        assert_eq!(
            port.flatten(),
            authority.port,
            "part of {text:?} was skipped"
        );
        assert_eq!(
            port.is_none(),
            rest.is_empty(),
            "part of {text:?} was skipped"
        );
    }
    if authority.host.is_loopback() {
        assert!(
            loopback_literal(without_port(text)),
            "{text:?} was read as loopback"
        );
    }
    assert!(authority.host.same(&authority.host));
}

fn check_origin(value: &[u8]) {
    let Ok(origin) = parse_origin(value) else {
        return;
    };
    let text = std::str::from_utf8(value).expect("an origin that parses is ASCII");
    let printed = origin.to_string();
    let again = parse_origin(printed.as_bytes()).expect("a printed origin parses");
    assert_eq!(again, origin, "{text:?} printed as {printed:?}");
    assert!(origin.same(&again) && again.same(&origin));
    let (scheme, rest) = text.split_once("://").expect("an origin has ://");
    assert_eq!(scheme, origin.scheme);
    if origin.is_loopback() {
        assert!(
            scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https"),
            "{text:?}"
        );
        assert!(
            loopback_literal(without_port(rest)),
            "{text:?} was read as loopback"
        );
    }
}

fn check_media_type(value: &[u8]) {
    let Ok(media) = parse_media_type(value) else {
        return;
    };
    assert!(
        value
            .iter()
            .all(|b| b.is_ascii_graphic() || *b == b' ' || *b == b'\t')
    );
    if media.is_json() {
        const JSON: &[u8] = b"application/json";
        assert!(
            value.len() >= JSON.len() && value[..JSON.len()].eq_ignore_ascii_case(JSON),
            "{:?} read as JSON",
            String::from_utf8_lossy(value)
        );
        assert!(
            matches!(value.get(JSON.len()), None | Some(b';' | b' ' | b'\t')),
            "{:?} read as JSON",
            String::from_utf8_lossy(value)
        );
        assert!(
            media
                .charset
                .is_none_or(|charset| charset.eq_ignore_ascii_case("utf-8"))
        );
    }
}

fn check_bearer(value: &[u8]) {
    const SCHEME: &[u8] = b"bearer";
    let expected = (value.len() > SCHEME.len()
        && value[..SCHEME.len()].eq_ignore_ascii_case(SCHEME))
    .then(|| &value[SCHEME.len()..])
    .filter(|rest| rest.first() == Some(&b' '))
    .map(|rest| &rest[rest.iter().take_while(|&&b| b == b' ').count()..])
    .filter(|token| !token.is_empty());
    assert_eq!(bearer_token(value), expected);
}

fn check_seq(value: &[u8]) {
    let expected = if !value.is_empty() && value.iter().all(u8::is_ascii_digit) {
        let digits = &value[value.iter().take_while(|&&b| b == b'0').count()..];
        match digits.len() {
            0 => Some(0),
            1..=20 => std::str::from_utf8(digits)
                .unwrap()
                .parse::<u128>()
                .ok()
                .and_then(|n| u64::try_from(n).ok()),
            _ => None,
        }
    } else {
        None
    };
    assert_eq!(
        parse_seq(value),
        expected,
        "{:?}",
        String::from_utf8_lossy(value)
    );
}

fuzz_target!(|data: &[u8]| {
    check_authority(data);
    check_origin(data);
    check_media_type(data);
    check_bearer(data);
    check_seq(data);
    let (presented, expected) = data.split_at(data.len() / 2);
    assert_eq!(tokens_match(presented, expected), presented == expected);
    assert!(tokens_match(data, data));
});
