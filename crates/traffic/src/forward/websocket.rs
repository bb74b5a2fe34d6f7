//! The forwarder's Responses WebSocket (Codex's preferred transport for model requests).
//!
//! Codex's upgrade is answered only after the upstream answered an upgrade of its own, so a
//! refusal (a 426 that sends Codex to HTTP, a 401) reaches Codex as the upstream gave it, and an
//! acceptance carries the upstream's 101 headers (`x-codex-turn-state`, `x-models-etag`,
//! `openai-model`, `x-reasoning-included`: Codex reads them). Then every data frame goes through
//! as it comes, both ways; pings and closes are answered per hop. Each hop has its own handshake
//! (its own key) and no compression.
//!
//! Recording: over the WebSocket Codex sends `response.create` frames that may name the
//! `previous_response_id` and carry only the items after it. What the model receives is then
//! the previous request's input, that response's output and the new items: the recorder keeps
//! the last two per connection and files each request whole, as HTTP would have carried it (its
//! path says `websocket`). The events coming back are the ones SSE carries, one per frame, and
//! make up `model-response.json` as on HTTP. A warm-up (`generate: false`) is followed, never
//! filed. The turn's metadata travels in `client_metadata` and is filed as the header HTTP has.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use serde_json::Value;
use tokio::sync::mpsc;

use super::{passes, AnswerRecorder, ForwarderState, UPSTREAM_TIMEOUT};
use crate::record::CapturedRequest;
use crate::record::Recorded;
use clawbridge_support::queue::ByteSender;
use clawbridge_support::task::Tasks;
use clawbridge_support::ws::{WsReceiver, WsSender};

/// Largest frame either side may send (a whole prompt with images stays far below it).
const MAX_FRAME: usize = 64 * 1024 * 1024;
/// Bytes of an upstream's refusal passed back to Codex.
const MAX_REFUSAL_BODY: usize = 64 * 1024;
/// The path recorded for a request that came over the WebSocket.
pub const WEBSOCKET_PATH: &str = "/v1/responses (websocket)";

/// Headers of one hop's handshake that are not passed to the other.
fn own_handshake_header(name: &str) -> bool {
    name.starts_with("sec-websocket-")
}

/// Codex's upgrade to `rest` (`responses`): the upstream's upgrade first, then both connected.
pub(super) async fn forward_websocket(
    state: Arc<ForwarderState>,
    rest: String,
    request: http::Request<Body>,
) -> Response {
    if !state.websocket {
        // `--no-websocket`: 426 sends Codex to HTTP at once.
        return (
            StatusCode::UPGRADE_REQUIRED,
            "capture forwarder: WebSocket not forwarded (--no-websocket); use HTTP",
        )
            .into_response();
    }
    let query = request
        .uri()
        .query()
        .map(|query| format!("?{query}"))
        .unwrap_or_default();
    let url = format!(
        "{}/{rest}{query}",
        state.upstream.base_for(request.headers())
    );
    let opened = tokio::time::timeout(
        UPSTREAM_TIMEOUT,
        open_upstream(&state, &url, request.headers()),
    )
    .await;
    let (answer, upgraded) = match opened {
        Ok(Ok(opened)) => opened,
        Ok(Err(reason)) => {
            tracing::warn!("capture forwarder: the upstream WebSocket failed ({reason})");
            return (
                StatusCode::BAD_GATEWAY,
                "capture forwarder: cannot open the upstream WebSocket",
            )
                .into_response();
        }
        Err(_) => {
            return (
                StatusCode::GATEWAY_TIMEOUT,
                "capture forwarder: no answer from the upstream",
            )
                .into_response()
        }
    };
    let Some(upgraded) = upgraded else {
        // The upstream said no: Codex hears it as it was said.
        return refusal(answer).await;
    };
    let headers = request.headers().clone();
    let (mut accepted, pending) = match clawbridge_support::ws::accept(request, MAX_FRAME) {
        Ok(accepted) => accepted,
        Err(refused) => return refused.into_response(),
    };
    for (name, value) in answer.headers() {
        if passes(name) && !own_handshake_header(name.as_str()) {
            accepted.headers_mut().append(name, value.clone());
        }
    }
    let upstream = clawbridge_support::ws::client_over(upgraded, MAX_FRAME);
    let conversation = Conversation::new(&headers, state.sink.clone(), Arc::clone(&state));
    let tasks = state.tasks.clone();
    state.tasks.spawn_cancellable(async move {
        if let Some(codex) = pending.connect().await {
            pump(codex, upstream, conversation, &tasks).await;
        }
    });
    accepted
}

/// An upstream's answer that was not a 101, for Codex: status, headers, a bounded body.
async fn refusal(answer: http::Response<hyper::body::Incoming>) -> Response {
    use http_body_util::BodyExt;
    let (parts, body) = answer.into_parts();
    let limited = http_body_util::Limited::new(body, MAX_REFUSAL_BODY);
    let bytes = tokio::time::timeout(std::time::Duration::from_secs(10), limited.collect())
        .await
        .ok()
        .and_then(Result::ok)
        .map(|collected| collected.to_bytes())
        .unwrap_or_default();
    let mut response = Response::builder().status(parts.status);
    for (name, value) in &parts.headers {
        if passes(name) {
            response = response.header(name, value);
        }
    }
    response
        .body(Body::from(bytes))
        .unwrap_or_else(|_| StatusCode::BAD_GATEWAY.into_response())
}

/// Send the upstream an upgrade of our own with Codex's headers (its credentials included);
/// the upgraded stream when it answered 101.
async fn open_upstream(
    state: &ForwarderState,
    url: &str,
    headers: &HeaderMap,
) -> Result<
    (
        http::Response<hyper::body::Incoming>,
        Option<hyper::upgrade::Upgraded>,
    ),
    String,
> {
    let uri: http::Uri = url.parse().map_err(|_| "not a URL".to_string())?;
    let secure = match uri.scheme_str() {
        Some("https") | Some("wss") => true,
        Some("http") | Some("ws") => false,
        _ => return Err("the upstream is neither http(s) nor ws(s)".into()),
    };
    let host = uri
        .host()
        .ok_or("the upstream URL names no host")?
        .to_string();
    let port = uri.port_u16().unwrap_or(if secure { 443 } else { 80 });
    let authority = match uri.port_u16() {
        Some(port) => format!("{host}:{port}"),
        None => host.clone(),
    };
    let path = uri
        .path_and_query()
        .map_or("/".to_string(), |path| path.as_str().to_string());
    let tcp = tokio::net::TcpStream::connect((host.trim_matches(['[', ']']), port))
        .await
        .map_err(|error| format!("cannot connect to the upstream: {error}"))?;
    let _ = tcp.set_nodelay(true);
    let mut request = http::Request::builder()
        .method(http::Method::GET)
        .uri(path)
        .header(http::header::HOST, &authority)
        .header(http::header::CONNECTION, "Upgrade")
        .header(http::header::UPGRADE, "websocket")
        .header(http::header::SEC_WEBSOCKET_VERSION, "13")
        .header(
            http::header::SEC_WEBSOCKET_KEY,
            clawbridge_support::ws::new_key(),
        );
    for (name, value) in headers {
        if passes(name) && !own_handshake_header(name.as_str()) {
            request = request.header(name, value);
        }
    }
    let request = request
        .body(http_body_util::Empty::<Bytes>::new())
        .map_err(|error| format!("cannot build the upgrade: {error}"))?;
    let response = if secure {
        let name = clawbridge_support::tls::server_name(&host)
            .ok_or_else(|| "the upstream's host is not a TLS server name".to_string())?;
        let tls = tokio_rustls::TlsConnector::from(Arc::clone(&state.tls))
            .connect(name, tcp)
            .await
            .map_err(|error| format!("TLS with the upstream failed: {error}"))?;
        send_upgrade(tls, request, &state.tasks).await?
    } else {
        send_upgrade(tcp, request, &state.tasks).await?
    };
    if response.status() != StatusCode::SWITCHING_PROTOCOLS {
        return Ok((response, None));
    }
    let mut response = response;
    let upgraded = hyper::upgrade::on(&mut response)
        .await
        .map_err(|error| format!("the upstream's upgrade failed: {error}"))?;
    Ok((response, Some(upgraded)))
}

async fn send_upgrade<S>(
    stream: S,
    request: http::Request<http_body_util::Empty<Bytes>>,
    tasks: &Tasks,
) -> Result<http::Response<hyper::body::Incoming>, String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|error| format!("HTTP with the upstream failed: {error}"))?;
    tasks.spawn_cancellable(async move {
        if let Err(error) = connection.with_upgrades().await {
            tracing::debug!("capture forwarder: upstream connection: {error}");
        }
    });
    sender
        .send_request(request)
        .await
        .map_err(|error| format!("the upgrade request failed: {error}"))
}

/// Frames copied for the recorder, waiting at most, in number and in bytes (past either a copy
/// is dropped, never a frame).
const RECORDER_QUEUE: usize = 256;
const RECORDER_QUEUE_BYTES: usize = 256 * 1024 * 1024;
/// How long a request's copy waits for its answer to begin before the recorder takes it up.
const REQUEST_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// A copy of one text frame for the recorder: when it came, from which side, its bytes.
struct Copy {
    at: Instant,
    from_codex: bool,
    bytes: Vec<u8>,
}

/// The copies on their way to the recorder.
#[derive(Clone)]
struct Copies {
    sender: ByteSender<Copy>,
}

impl Copies {
    /// Offer a copy to the recorder; never waits.
    fn offer(&self, from_codex: bool, at: Instant, bytes: &[u8]) {
        // The budget is checked before the copy is made: a dropped copy costs nothing.
        let sent = self.sender.offer_with(bytes.len(), || Copy {
            at,
            from_codex,
            bytes: bytes.to_vec(),
        });
        if !sent {
            tracing::warn!("capture forwarder: a frame copy was dropped (the recorder is behind)");
        }
    }
}

/// Both directions until either side closes; then the other is closed too. Each text frame is
/// passed on first and copied to the recorder's own task after, so recording (parsing a whole
/// prompt) never holds a frame up.
async fn pump(
    codex: (WsSender, WsReceiver),
    upstream: (WsSender, WsReceiver),
    mut conversation: Conversation,
    tasks: &Tasks,
) {
    let (to_codex, from_codex) = codex;
    let (to_upstream, from_upstream) = upstream;
    let (sender, mut copied) =
        clawbridge_support::queue::byte_queue::<Copy>(RECORDER_QUEUE_BYTES, Some(RECORDER_QUEUE));
    let copies = Copies { sender };
    let recorder = tasks.spawn(async move {
        // A request is taken up once its answer has begun (the upstream's first event has gone
        // on to Codex), or when nothing came for REQUEST_WAIT: parsing a whole prompt takes a
        // few milliseconds of a core, and done at once it held the first event up (measured:
        // +3.06 ms to the first event on an open socket, +0.39 ms without it;
        // benches/capture_forward.rs). Its time stamp is the one it arrived with.
        let mut waiting: Option<Copy> = None;
        loop {
            let next = match waiting {
                Some(_) => match tokio::time::timeout(REQUEST_WAIT, copied.recv()).await {
                    Ok(next) => next,
                    Err(_) => {
                        if let Some(request) = waiting.take() {
                            conversation.request(&request.bytes, request.at);
                        }
                        continue;
                    }
                },
                None => copied.recv().await,
            };
            let Some(copy) = next else { break };
            if copy.from_codex {
                if let Some(earlier) = waiting.replace(copy) {
                    conversation.request(&earlier.bytes, earlier.at);
                }
            } else {
                if let Some(request) = waiting.take() {
                    conversation.request(&request.bytes, request.at);
                }
                conversation.event(&copy.bytes, copy.at);
            }
        }
        if let Some(request) = waiting.take() {
            conversation.request(&request.bytes, request.at);
        }
        conversation.closed();
    });
    let mut outbound =
        tasks.spawn_cancellable(relay(from_codex, to_upstream, copies.clone(), true));
    let mut inbound = tasks.spawn_cancellable(relay(from_upstream, to_codex, copies, false));
    tokio::select! {
        _ = &mut outbound => {
            // Codex closed: what the upstream still sends has nobody to go to.
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), &mut inbound).await;
            inbound.abort();
        }
        _ = &mut inbound => outbound.abort(),
    }
    // The copy senders are gone with their tasks: the recorder files what it holds and ends.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), recorder).await;
}

/// One direction: every data frame from `from` to `to` as it comes, text frames copied for the
/// recorder after they went out; a close or an error ends it and closes `to`.
async fn relay(mut from: WsReceiver, mut to: WsSender, copies: Copies, from_codex: bool) {
    let mut data = Vec::new();
    loop {
        data.clear();
        let received = from.receive(&mut data).await;
        let at = Instant::now();
        let text = match received {
            Ok(soketto::Incoming::Data(soketto::Data::Text(_))) => true,
            Ok(soketto::Incoming::Data(soketto::Data::Binary(_))) => false,
            Ok(soketto::Incoming::Pong(_)) => continue,
            Ok(soketto::Incoming::Closed(_)) | Err(_) => break,
        };
        let sent = if text {
            to.send_text(&String::from_utf8_lossy(&data)).await
        } else {
            to.send_binary(&data).await
        };
        if sent.is_err() || to.flush().await.is_err() {
            break;
        }
        if text {
            copies.offer(from_codex, at, &data);
        }
    }
    let _ = to.close().await;
}

/// One WebSocket connection's requests and responses, as the recorder sees them.
struct Conversation {
    /// Codex's upgrade headers (credentials among them; the writer keeps only its few).
    headers: BTreeMap<String, String>,
    sink: mpsc::Sender<Recorded>,
    state: Arc<ForwarderState>,
    /// The whole input of the last request, the output of its response, and that response's id:
    /// what a `previous_response_id` stands for.
    input: Vec<Value>,
    output: Vec<Value>,
    response_id: Option<String>,
    /// The request being answered: its id, its answer so far, and whether it is filed.
    current: Option<(u64, AnswerRecorder, bool)>,
}

impl Conversation {
    fn new(headers: &HeaderMap, sink: mpsc::Sender<Recorded>, state: Arc<ForwarderState>) -> Self {
        Conversation {
            headers: headers
                .iter()
                .map(|(name, value)| {
                    (
                        name.as_str().to_string(),
                        value.to_str().unwrap_or("<binary>").to_string(),
                    )
                })
                .collect(),
            sink,
            state,
            input: Vec::new(),
            output: Vec::new(),
            response_id: None,
            current: None,
        }
    }

    /// A frame from Codex (that came `at`): a `response.create` is filed whole.
    fn request(&mut self, frame: &[u8], at: Instant) {
        let Ok(Value::Object(mut body)) = serde_json::from_slice::<Value>(frame) else {
            return;
        };
        if body.get("type").and_then(Value::as_str) != Some("response.create") {
            return;
        }
        body.remove("type");
        let new_items = match body.remove("input") {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        };
        let mut notes = Vec::new();
        let mut input = match body.remove("previous_response_id") {
            Some(Value::String(previous)) if Some(&previous) == self.response_id.as_ref() => {
                let mut whole = std::mem::take(&mut self.input);
                whole.append(&mut self.output);
                whole
            }
            Some(Value::String(_)) => {
                notes.push("the previous response is not one this connection saw; the input holds only the new items");
                Vec::new()
            }
            _ => Vec::new(),
        };
        input.extend(new_items);
        self.input = input.clone();
        self.output.clear();
        self.response_id = None;
        body.insert("input".into(), Value::Array(input));
        let filed = body.get("generate") != Some(&Value::Bool(false));
        let id = self
            .state
            .next
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut recorder = AnswerRecorder::new(StatusCode::SWITCHING_PROTOCOLS.as_u16(), at);
        for note in notes {
            recorder.note(note);
        }
        if filed && self.sink.capacity() > 0 {
            let mut headers = self.headers.clone();
            if let Some(metadata) = body
                .get("client_metadata")
                .and_then(|metadata| metadata.get("x-codex-turn-metadata"))
                .and_then(Value::as_str)
            {
                headers.insert("x-codex-turn-metadata".into(), metadata.to_string());
            }
            let request = CapturedRequest {
                path: WEBSOCKET_PATH.to_string(),
                headers,
                body: Value::Object(body),
                at: Some(std::time::SystemTime::now()),
            };
            super::file_request(&self.sink, id, request);
        }
        self.current = Some((id, recorder, filed));
    }

    /// A frame from the upstream (that came `at`): one event of the current response.
    fn event(&mut self, frame: &[u8], at: Instant) {
        let Some((_, recorder, _)) = self.current.as_mut() else {
            return;
        };
        let Some(value) = recorder.frame(frame, at) else {
            return;
        };
        let kind = value["type"].as_str().unwrap_or("");
        if let Some(id) = value["response"]["id"].as_str() {
            self.response_id = Some(id.to_string());
        }
        if matches!(
            kind,
            "response.completed" | "response.failed" | "response.incomplete" | "error"
        ) {
            self.output = match value["response"]["output"].as_array() {
                Some(output) if !output.is_empty() => output.clone(),
                _ => recorder.items().to_vec(),
            };
            self.finish(None);
        }
    }

    /// The connection ended: a response still open is filed as it stands.
    fn closed(&mut self) {
        self.finish(Some("the WebSocket closed before the response ended"));
    }

    fn finish(&mut self, note: Option<&'static str>) {
        let Some((id, mut recorder, filed)) = self.current.take() else {
            return;
        };
        if let Some(note) = note {
            recorder.note(note);
        }
        if filed {
            let response = recorder.finish();
            let _ = self.sink.try_send(Recorded::Response { id, response });
        }
    }
}
