//! Loopback listeners that only Codex calls (the offline stub, the recording forwarder): bound to
//! `127.0.0.1:0` behind a secret first path segment, and browser-proof (no `Origin`, `Host` must
//! name the listener itself).

use std::net::SocketAddr;

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::error::{Error, Result};

/// A listener on `127.0.0.1:0` for a server only Codex calls (the stub, the recording
/// forwarder), with its address and a secret first path segment (128 random bits from the OS).
pub async fn bind(what: &'static str) -> Result<(tokio::net::TcpListener, SocketAddr, String)> {
    let bind = |source| Error::Bind { what, source };
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(bind)?;
    let addr = listener.local_addr().map_err(bind)?;
    let secret = crate::hex::random(16).map_err(bind)?;
    Ok((listener, addr, secret))
}

/// The browser-proofing of a loopback listener on `port` that only Codex calls (the stub, the
/// recording forwarder): any `Origin` is a web page, any `Host` but the listener's own names a
/// DNS-rebound one; both 403, naming `who`.
pub fn refusal(headers: &HeaderMap, port: u16, who: &str) -> Option<Response> {
    if headers.contains_key("origin") {
        return Some(
            (
                StatusCode::FORBIDDEN,
                format!("{who}: browser requests are refused"),
            )
                .into_response(),
        );
    }
    let host = headers
        .get("host")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    let allowed = [format!("127.0.0.1:{port}"), format!("localhost:{port}")];
    if !allowed.iter().any(|name| name == host) {
        return Some((StatusCode::FORBIDDEN, format!("{who}: unexpected Host")).into_response());
    }
    None
}

/// A listener address as people write it: `IP:PORT` (`[::1]:PORT` for IPv6), `localhost:PORT`
/// (taken as `127.0.0.1`), with or without `ws://` or `http://` in front, so `serve --listen`
/// and `app-server --listen ws://...` take the same forms. Any other host name is refused with
/// the reason: it is not looked up, since a name could resolve to an address off loopback.
pub fn parse_listen_addr(text: &str) -> std::result::Result<SocketAddr, String> {
    let bare = ["ws://", "http://"]
        .iter()
        .find_map(|scheme| text.strip_prefix(scheme))
        .unwrap_or(text)
        .trim_end_matches('/');
    if let Ok(addr) = bare.parse::<SocketAddr>() {
        return Ok(addr);
    }
    match bare.rsplit_once(':') {
        Some((host, port)) if host.eq_ignore_ascii_case("localhost") => port
            .parse::<u16>()
            .map(|port| SocketAddr::from(([127, 0, 0, 1], port)))
            .map_err(|_| format!("{text}: the port `{port}` is not a number from 0 to 65535")),
        Some((host, _)) if !host.is_empty() && host.parse::<std::net::IpAddr>().is_err() => Err(format!(
            "{text}: `{host}` is a host name; give an IP address (127.0.0.1:PORT) or localhost:PORT (a name is not looked up: it could resolve off loopback)"
        )),
        _ => Err(format!(
            "{text}: not an address; give IP:PORT (127.0.0.1:19175), localhost:PORT, or either after ws://"
        )),
    }
}

#[cfg(test)]
mod listen_tests {
    use super::parse_listen_addr;

    #[test]
    fn listen_addresses_take_the_forms_people_write() {
        for (text, expected) in [
            ("127.0.0.1:19175", "127.0.0.1:19175"),
            ("ws://127.0.0.1:19175", "127.0.0.1:19175"),
            ("ws://127.0.0.1:19175/", "127.0.0.1:19175"),
            ("http://127.0.0.1:7077", "127.0.0.1:7077"),
            ("localhost:7077", "127.0.0.1:7077"),
            ("ws://LocalHost:0", "127.0.0.1:0"),
            ("[::1]:7077", "[::1]:7077"),
        ] {
            assert_eq!(
                parse_listen_addr(text).map(|addr| addr.to_string()),
                Ok(expected.to_string()),
                "{text}"
            );
        }
        let named = parse_listen_addr("ws://example.com:80").expect_err("a host name");
        assert!(
            named.contains("host name") && named.contains("example.com"),
            "{named}"
        );
        let bare = parse_listen_addr("localhost").expect_err("no port");
        assert!(bare.contains("IP:PORT"), "{bare}");
        let port = parse_listen_addr("localhost:http").expect_err("a named port");
        assert!(port.contains("not a number"), "{port}");
    }
}
