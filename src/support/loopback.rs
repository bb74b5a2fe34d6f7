//! Loopback listeners that only Codex calls (the offline stub, the recording forwarder): bound to
//! `127.0.0.1:0` behind a secret first path segment, and browser-proof (no `Origin`, `Host` must
//! name the listener itself).

use std::net::SocketAddr;

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::error::{Error, Result};

/// A listener on `127.0.0.1:0` for a server only Codex calls (the stub, the recording
/// forwarder), with its address and a secret first path segment (128 random bits from the OS).
pub(crate) async fn bind(
    what: &'static str,
) -> Result<(tokio::net::TcpListener, SocketAddr, String)> {
    let bind = |source| Error::Bind { what, source };
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(bind)?;
    let addr = listener.local_addr().map_err(bind)?;
    let secret = crate::support::hex::random(16).map_err(bind)?;
    Ok((listener, addr, secret))
}

/// The browser-proofing of a loopback listener on `port` that only Codex calls (the stub, the
/// recording forwarder): any `Origin` is a web page, any `Host` but the listener's own names a
/// DNS-rebound one; both 403, naming `who`.
pub(crate) fn refusal(headers: &HeaderMap, port: u16, who: &str) -> Option<Response> {
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
