//! WebSocket connections on our HTTP servers and to upstreams, with soketto.
//!
//! Three places speak WebSocket: the app-server endpoint (OpenClaw's clients), the capture
//! forwarder (Codex's Responses WebSocket, passed on to the upstream) and the offline stub
//! (playing that upstream). Each accepts the upgrade on an axum route the same way, so it is
//! written once here: soketto checks the handshake and answers it, hyper hands over the
//! connection once the answer is out. The forwarder's upstream side is an HTTP/1.1 upgrade it
//! sends itself (so it sees the upstream's 101 headers, which Codex reads), then a soketto
//! client connection over the upgraded stream.

use axum::body::Body;
use axum::response::Response;
use http::HeaderMap;
use tokio_util::compat::TokioAsyncReadCompatExt;

/// The stream under a WebSocket accepted or opened here.
pub type Io = tokio_util::compat::Compat<hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>>;
pub type WsSender = soketto::connection::Sender<Io>;
pub type WsReceiver = soketto::connection::Receiver<Io>;

/// A TCP listener whose connections send each write at once (`TCP_NODELAY`). A WebSocket frame
/// goes out as a header and a payload; with Nagle's algorithm the second write waits for the
/// peer's delayed ACK, about 40 ms per event (measured: +47.75 ms to the first event through the
/// forwarder, `benches/capture_forward.rs`).
pub fn no_delay(
    listener: tokio::net::TcpListener,
) -> impl axum::serve::Listener<Io = tokio::net::TcpStream, Addr = std::net::SocketAddr> {
    use axum::serve::ListenerExt;
    listener.tap_io(|stream| {
        let _ = stream.set_nodelay(true);
    })
}

/// Whether a request asks to become a WebSocket.
pub fn is_upgrade(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::UPGRADE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.eq_ignore_ascii_case("websocket"))
}

/// The connection of an accepted upgrade, once the client has the 101.
pub struct Pending {
    request: http::Request<Body>,
    handshake: soketto::handshake::http::Server,
    max_message: usize,
}

impl Pending {
    /// The connection, or `None` when the client went away before it was made.
    pub async fn connect(self) -> Option<(WsSender, WsReceiver)> {
        let upgraded = match hyper::upgrade::on(self.request).await {
            Ok(upgraded) => upgraded,
            Err(error) => {
                tracing::debug!("WebSocket upgrade failed: {error}");
                return None;
            }
        };
        let io = hyper_util::rt::TokioIo::new(upgraded).compat();
        let mut builder = self.handshake.into_builder(io);
        builder.set_max_message_size(self.max_message);
        builder.set_max_frame_size(self.max_message);
        Some(builder.finish())
    }
}

/// A request that is not a valid WebSocket upgrade (answered 400).
#[derive(Debug)]
pub struct NotAnUpgrade;

impl axum::response::IntoResponse for NotAnUpgrade {
    fn into_response(self) -> Response {
        (
            http::StatusCode::BAD_REQUEST,
            "a WebSocket upgrade is expected",
        )
            .into_response()
    }
}

/// Answer a WebSocket upgrade: the 101 to return (more headers may be added to it), and the
/// connection to await once it is returned.
pub fn accept(
    request: http::Request<Body>,
    max_message: usize,
) -> Result<(Response, Pending), NotAnUpgrade> {
    let mut handshake = soketto::handshake::http::Server::new();
    let Ok(accepted) = handshake.receive_request(&request) else {
        return Err(NotAnUpgrade);
    };
    let (parts, ()) = accepted.into_parts();
    Ok((
        Response::from_parts(parts, Body::empty()),
        Pending {
            request,
            handshake,
            max_message,
        },
    ))
}

/// A client connection over a stream the upstream already upgraded (its 101 was read).
pub fn client_over(
    upgraded: hyper::upgrade::Upgraded,
    max_message: usize,
) -> (WsSender, WsReceiver) {
    let io = hyper_util::rt::TokioIo::new(upgraded).compat();
    let mut builder = soketto::connection::Builder::new(io, soketto::connection::Mode::Client);
    builder.set_max_message_size(max_message);
    builder.set_max_frame_size(max_message);
    builder.finish()
}

/// A fresh `Sec-WebSocket-Key` (16 random bytes, base64).
pub fn new_key() -> String {
    let mut bytes = [0u8; 16];
    let _ = getrandom::fill(&mut bytes);
    base64_encode(&bytes)
}

/// Standard base64 with padding (RFC 4648 §4), for the handshake key.
fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_base64_of_sixteen_bytes() {
        assert_eq!(
            base64_encode(b"the sample nonce"),
            "dGhlIHNhbXBsZSBub25jZQ=="
        );
        assert_eq!(base64_encode(b"f"), "Zg==");
        assert_eq!(base64_encode(b"fo"), "Zm8=");
        assert_eq!(base64_encode(b"foo"), "Zm9v");
        assert_eq!(new_key().len(), 24);
        let mut headers = HeaderMap::new();
        assert!(!is_upgrade(&headers));
        headers.insert(http::header::UPGRADE, "WebSocket".parse().expect("header"));
        assert!(is_upgrade(&headers));
    }
}
