//! The recording forwarder: `--capture DIR` on real runs.
//!
//! Codex is pointed (`-c openai_base_url=...`, as `--offline` points it at the stub) at a
//! loopback server that passes every model request on to the upstream Codex would have used and
//! streams the answer back as it comes, chunk by chunk, never buffered. On the way it keeps a
//! copy of the request (for `model-request.json` and `layers.md`) and reads the answer's
//! server-sent events to record the response (`model-response.json`: the output items, the usage
//! with `cached_tokens`, the status, the time to first byte and to completion). The copies go to
//! the capture writer over a bounded queue: a full queue drops the copy, never the traffic.
//!
//! The upstream: `--upstream URL`, else the base URL Codex was configured with, else Codex's own
//! default for the request's credential (docs/codex-wire.md §11): a ChatGPT login (Codex sends
//! `chatgpt-account-id`) goes to `https://chatgpt.com/backend-api/codex`, an API key to
//! `https://api.openai.com/v1`. TLS with rustls and the system's roots, plus `--upstream-ca`.
//!
//! Safe by default, as the stub is: loopback only, a random secret first path segment (only the
//! Codex given the URL can use it), `Origin` refused, `Host` must be the listener's. Credentials
//! pass through to the upstream untouched and are never logged or recorded.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::response::{IntoResponse, Response};
use axum::Router;
use http::{HeaderMap, HeaderName, Method, StatusCode};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::record::{CapturedRequest, Recorded};
use crate::stub::MAX_REQUEST_BODY;
use clawbridge_support::error::{Error, Result};
use clawbridge_support::task::Tasks;

mod websocket;

/// Codex's default upstreams (codex-rs/core/src/model_provider_info.rs, `to_api_provider`).
pub const CHATGPT_UPSTREAM: &str = "https://chatgpt.com/backend-api/codex";
pub const API_KEY_UPSTREAM: &str = "https://api.openai.com/v1";
/// Bytes of one answer the recorder reads at most (the traffic itself is never capped).
const MAX_RECORDED_ANSWER: usize = 64 * 1024 * 1024;
/// Connecting to the upstream and getting its headers.
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(120);

/// Where model requests go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Upstream {
    /// This base URL (ending before `/responses`).
    Fixed(String),
    /// Codex's default for the request's credential.
    ByCredential,
}

impl Upstream {
    fn base_for(&self, headers: &HeaderMap) -> String {
        match self {
            Upstream::Fixed(url) => url.trim_end_matches('/').to_string(),
            Upstream::ByCredential if headers.contains_key("chatgpt-account-id") => {
                CHATGPT_UPSTREAM.to_string()
            }
            Upstream::ByCredential => API_KEY_UPSTREAM.to_string(),
        }
    }
}

/// How to start a forwarder.
#[derive(Clone, Debug)]
pub struct ForwarderSettings {
    pub upstream: Upstream,
    /// An extra root certificate (PEM) for the upstream's TLS.
    pub extra_ca: Option<std::path::PathBuf>,
    /// Forward Codex's Responses WebSocket (`false`: `--no-websocket`, Codex is sent to HTTP).
    pub websocket: bool,
}

struct ForwarderState {
    client: reqwest::Client,
    /// The TLS configuration both transports use (the system's roots and `--upstream-ca`).
    tls: Arc<rustls::ClientConfig>,
    websocket: bool,
    upstream: Upstream,
    sink: mpsc::Sender<Recorded>,
    port: u16,
    secret: String,
    next: std::sync::atomic::AtomicU64,
    /// The server, each answer's relay and each WebSocket's pumps; cancelled with the forwarder.
    tasks: Tasks,
}

/// A running forwarder; dropping it stops it (its server and every relay of it).
pub struct Forwarder {
    pub addr: SocketAddr,
    secret: String,
    _stop: tokio_util::sync::DropGuard,
}

impl Forwarder {
    /// Bind `127.0.0.1:0` and forward until dropped; what it records goes to `sink`.
    pub async fn start(settings: ForwarderSettings, sink: mpsc::Sender<Recorded>) -> Result<Self> {
        let tls = Arc::new(clawbridge_support::tls::client_config(
            settings.extra_ca.as_deref(),
            "--upstream-ca",
        )?);
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(30))
            .no_proxy()
            .http1_only()
            .use_preconfigured_tls((*tls).clone())
            .build()
            .map_err(|error| Error::InvalidArgument {
                flag: "--upstream-ca".into(),
                message: format!("cannot set up TLS: {error}"),
            })?;
        let (listener, addr, secret) =
            clawbridge_support::loopback::bind("the capture forwarder").await?;
        let state = Arc::new(ForwarderState {
            client,
            tls,
            websocket: settings.websocket,
            upstream: settings.upstream,
            sink,
            port: addr.port(),
            secret: secret.clone(),
            next: std::sync::atomic::AtomicU64::new(1),
            tasks: Tasks::new(),
        });
        let tasks = state.tasks.clone();
        let router = Router::new()
            .route(
                "/{secret}/v1/{*rest}",
                axum::routing::get(get_or_upgrade).fallback(forward),
            )
            .layer(DefaultBodyLimit::max(MAX_REQUEST_BODY))
            .with_state(state);
        let stopped = tasks.token().clone().cancelled_owned();
        tasks.spawn(async move {
            let served = axum::serve(clawbridge_support::ws::no_delay(listener), router)
                .with_graceful_shutdown(stopped);
            if let Err(error) = served.await {
                tracing::warn!("the capture forwarder stopped: {error}");
            }
        });
        Ok(Forwarder {
            addr,
            secret,
            _stop: tasks.drop_guard(),
        })
    }

    /// The base URL to give Codex (`openai_base_url`).
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/{}/v1", self.addr.port(), self.secret)
    }
}

/// A GET: Codex's Responses WebSocket when it asks for one, else forwarded as any request.
async fn get_or_upgrade(
    State(state): State<Arc<ForwarderState>>,
    axum::extract::Path((secret, rest)): axum::extract::Path<(String, String)>,
    request: http::Request<Body>,
) -> Response {
    if let Some(refusal) = refused(&state, request.headers(), &secret) {
        return refusal;
    }
    if clawbridge_support::ws::is_upgrade(request.headers()) {
        return websocket::forward_websocket(state, rest, request).await;
    }
    let headers = request.headers().clone();
    forward(
        State(state),
        axum::extract::Path((secret, rest)),
        headers,
        Method::GET,
        Bytes::new(),
    )
    .await
}

/// Hop-by-hop headers (RFC 9110 §7.6.1) and those the client sets again.
fn passes(name: &HeaderName) -> bool {
    !matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "proxy-connection"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "host"
            | "content-length"
            | "accept-encoding"
    )
}

fn refused(state: &ForwarderState, headers: &HeaderMap, secret: &str) -> Option<Response> {
    use subtle::ConstantTimeEq;
    if let Some(refusal) =
        clawbridge_support::loopback::refusal(headers, state.port, "capture forwarder")
    {
        return Some(refusal);
    }
    let same: bool = state.secret.as_bytes().ct_eq(secret.as_bytes()).into();
    (!same).then(|| (StatusCode::NOT_FOUND, "capture forwarder: no such path").into_response())
}

async fn forward(
    State(state): State<Arc<ForwarderState>>,
    axum::extract::Path((secret, rest)): axum::extract::Path<(String, String)>,
    headers: HeaderMap,
    method: Method,
    body: Bytes,
) -> Response {
    if let Some(refusal) = refused(&state, &headers, &secret) {
        return refusal;
    }
    if headers.contains_key(http::header::UPGRADE) {
        // An upgrade by any method but GET is no WebSocket (those come through get_or_upgrade).
        return (
            StatusCode::UPGRADE_REQUIRED,
            "capture forwarder: a WebSocket upgrade is a GET",
        )
            .into_response();
    }
    let url = format!("{}/{rest}", state.upstream.base_for(&headers));
    let id = state
        .next
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let is_responses = method == Method::POST && rest == "responses";
    if is_responses {
        let kept: std::collections::BTreeMap<String, String> = headers
            .iter()
            .map(|(name, value)| {
                (
                    name.as_str().to_string(),
                    value.to_str().unwrap_or("<binary>").to_string(),
                )
            })
            .collect();
        // The copy is parsed only while the writer keeps up.
        if state.sink.capacity() > 0 {
            file_request(&state.sink, id, CapturedRequest::from_parts(kept, &body));
        }
    }
    let mut upstream = state.client.request(method, &url);
    for (name, value) in headers.iter().filter(|(name, _)| passes(name)) {
        upstream = upstream.header(name, value);
    }
    let started = Instant::now();
    let sent = tokio::time::timeout(UPSTREAM_TIMEOUT, upstream.body(body).send()).await;
    let answer = match sent {
        Ok(Ok(answer)) => answer,
        Ok(Err(error)) => {
            let reason = if error.is_connect() {
                "cannot connect to the upstream"
            } else {
                "the upstream request failed"
            };
            let detail = describe(error);
            tracing::warn!("capture forwarder: {reason} ({detail})");
            if is_responses {
                file_failure(
                    &state.sink,
                    id,
                    502,
                    &format!("{reason} ({detail})"),
                    started,
                );
            }
            return (
                StatusCode::BAD_GATEWAY,
                format!("capture forwarder: {reason}"),
            )
                .into_response();
        }
        Err(_) => {
            let reason = "no answer from the upstream";
            if is_responses {
                file_failure(&state.sink, id, 504, reason, started);
            }
            return (
                StatusCode::GATEWAY_TIMEOUT,
                format!("capture forwarder: {reason}"),
            )
                .into_response();
        }
    };
    let status = answer.status();
    let mut response = Response::builder().status(status.as_u16());
    for (name, value) in answer.headers().iter().filter(|(name, _)| passes(name)) {
        response = response.header(name.as_str(), value.as_bytes());
    }
    let mut stream = answer.bytes_stream();
    let (chunks, body_stream) = mpsc::channel::<std::result::Result<Bytes, std::io::Error>>(64);
    let sink = state.sink.clone();
    state.tasks.spawn_cancellable(async move {
        use futures_util::StreamExt;
        let mut recorder = AnswerRecorder::new(status.as_u16(), started);
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(bytes) => {
                    if is_responses {
                        recorder.feed(&bytes);
                    }
                    if chunks.send(Ok(bytes)).await.is_err() {
                        recorder.note("the client went away before the answer ended");
                        break;
                    }
                }
                Err(error) => {
                    recorder.note("the upstream's answer broke off");
                    let _ = chunks
                        .send(Err(std::io::Error::other(describe(error))))
                        .await;
                    break;
                }
            }
        }
        if is_responses {
            let response = recorder.finish();
            let _ = sink.try_send(Recorded::Response { id, response });
        }
    });
    let body = Body::from_stream(relayed_body(body_stream));
    response.body(body).unwrap_or_else(|_| {
        (
            StatusCode::BAD_GATEWAY,
            "capture forwarder: bad upstream headers",
        )
            .into_response()
    })
}

/// A request that never reached the upstream (or got no answer) is filed with its failure as
/// its response (`httpStatus` what Codex was answered, `status` "failed", `error.message` why),
/// so a capture never shows a request with nothing said about what became of it.
fn file_failure(
    sink: &mpsc::Sender<Recorded>,
    id: u64,
    status: u16,
    reason: &str,
    started: Instant,
) {
    let response = json!({
        "httpStatus": status,
        "status": "failed",
        "output": [],
        "usage": null,
        "events": 0,
        "timings": {
            "firstByteMs": null,
            "totalMs": (started.elapsed().as_secs_f64() * 1000.0 * 10.0).round() / 10.0,
        },
        "error": {"message": format!("capture forwarder: {reason}")},
    });
    let _ = sink.try_send(Recorded::Response { id, response });
}

/// Hand a request copy to the capture writer; a writer that is behind loses the copy, never
/// the request.
fn file_request(sink: &mpsc::Sender<Recorded>, id: u64, request: CapturedRequest) {
    if sink.try_send(Recorded::Request { id, request }).is_err() {
        tracing::warn!("capture forwarder: a request copy was dropped (the writer is behind)");
    }
}

/// A reqwest error and its causes, without its URL (no URLs in logs).
fn describe(error: reqwest::Error) -> String {
    let error = error.without_url();
    let mut text = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

/// The body stream handed to the client: the chunks as the relay task sends them.
fn relayed_body(
    receiver: mpsc::Receiver<std::result::Result<Bytes, std::io::Error>>,
) -> impl futures_util::Stream<Item = std::result::Result<Bytes, std::io::Error>> {
    futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|item| (item, receiver))
    })
}

/// Reads an answer's server-sent events as they pass, for `model-response.json`.
struct AnswerRecorder {
    status: u16,
    started: Instant,
    first_byte: Option<Duration>,
    pending: Vec<u8>,
    /// How much of `pending` has been searched for an event's end without finding one: a
    /// large event arriving in many chunks is searched once, not once per chunk.
    scanned: usize,
    read: usize,
    /// The last `response` object an event carried (`response.completed` has it whole).
    response: Option<Value>,
    /// Output items as they completed (when no completed response comes).
    items: Vec<Value>,
    /// How the answer ended, from its last `response.completed`/`.failed`/`.incomplete` event.
    ended: Option<&'static str>,
    events: usize,
    /// The error of a WebSocket `error` event (HTTP carries errors in the response object).
    error: Option<Value>,
    /// When the last WebSocket frame came (the recorder may read it later).
    last_frame: Option<Instant>,
    /// A body that is not an event stream (an error answer), kept short.
    other: Vec<u8>,
    notes: Vec<&'static str>,
}

impl AnswerRecorder {
    fn new(status: u16, started: Instant) -> Self {
        AnswerRecorder {
            status,
            started,
            first_byte: None,
            pending: Vec::new(),
            scanned: 0,
            read: 0,
            response: None,
            items: Vec::new(),
            ended: None,
            events: 0,
            error: None,
            last_frame: None,
            other: Vec::new(),
            notes: Vec::new(),
        }
    }

    fn note(&mut self, note: &'static str) {
        self.notes.push(note);
    }

    fn feed(&mut self, bytes: &[u8]) {
        if self.first_byte.is_none() {
            self.first_byte = Some(self.started.elapsed());
        }
        self.read += bytes.len();
        if self.read > MAX_RECORDED_ANSWER {
            if !self.notes.contains(&"recording stopped at the size cap") {
                self.notes.push("recording stopped at the size cap");
            }
            return;
        }
        self.pending.extend_from_slice(bytes);
        // A separator may straddle the last chunk's end: search again from 3 bytes before it.
        // Events are taken out by offset and the rest moved once, so many small events in one
        // chunk cost one pass too.
        let mut start = 0;
        let mut from = self.scanned.saturating_sub(3);
        while let Some((at, length)) = find_event_end(&self.pending[from..]) {
            let end = from + at;
            let event = self.pending[start..end].to_vec();
            self.event(&event);
            start = end + length;
            from = start;
        }
        self.pending.drain(..start);
        self.scanned = self.pending.len();
        if self.events == 0
            && self.pending.len() > 4096
            && !self.pending.starts_with(b"event:")
            && !self.pending.starts_with(b"data:")
        {
            // Not an event stream: keep the start of it.
            if self.other.len() < 4096 {
                let take = (4096 - self.other.len()).min(self.pending.len());
                self.other.extend_from_slice(&self.pending[..take]);
            }
            self.pending.clear();
            self.scanned = 0;
        }
    }

    fn event(&mut self, event: &[u8]) {
        let text = String::from_utf8_lossy(event);
        let data: String = text
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(|data| data.strip_prefix(' ').unwrap_or(data))
            .collect::<Vec<_>>()
            .join("\n");
        if data.is_empty() {
            return;
        }
        self.events += 1;
        if let Ok(value) = serde_json::from_str::<Value>(&data) {
            self.event_value(&value);
        }
    }

    /// One WebSocket frame (that came `at`): one event, as the data of an SSE event (returned
    /// parsed).
    fn frame(&mut self, frame: &[u8], at: Instant) -> Option<Value> {
        if self.first_byte.is_none() {
            self.first_byte = Some(at.saturating_duration_since(self.started));
        }
        self.last_frame = Some(at);
        self.read += frame.len();
        self.events += 1;
        let value = serde_json::from_slice::<Value>(frame).ok()?;
        if self.read <= MAX_RECORDED_ANSWER {
            self.event_value(&value);
        } else if !self.notes.contains(&"recording stopped at the size cap") {
            self.notes.push("recording stopped at the size cap");
        }
        Some(value)
    }

    /// The output items completed so far.
    fn items(&self) -> &[Value] {
        &self.items
    }

    fn event_value(&mut self, value: &Value) {
        match value["type"].as_str() {
            Some("response.output_item.done") => self.items.push(value["item"].clone()),
            Some("response.completed") => self.ended = Some("completed"),
            Some("response.failed") => self.ended = Some("failed"),
            Some("response.incomplete") => self.ended = Some("incomplete"),
            Some("error") => {
                self.ended = Some("failed");
                if value["error"].is_object() {
                    self.error = Some(value["error"].clone());
                }
            }
            _ => {}
        }
        if value["response"].is_object() {
            self.response = Some(value["response"].clone());
        }
    }

    fn finish(mut self) -> Value {
        if self.events == 0 && !self.pending.is_empty() && self.other.len() < 4096 {
            let take = (4096 - self.other.len()).min(self.pending.len());
            self.other.extend_from_slice(&self.pending[..take]);
        }
        let total = match self.last_frame {
            Some(at) => at.saturating_duration_since(self.started),
            None => self.started.elapsed(),
        };
        let response = self.response.take().unwrap_or(Value::Null);
        let output = match response["output"].as_array() {
            Some(output) if !output.is_empty() => Value::Array(output.clone()),
            _ => Value::Array(self.items),
        };
        let mut document = json!({
            "httpStatus": self.status,
            "status": match response["status"].as_str() {
                Some(status) => Value::from(status),
                None => self.ended.map_or(Value::Null, Value::from),
            },
            "output": output,
            "usage": response["usage"].clone(),
            "events": self.events,
            "timings": {
                "firstByteMs": self.first_byte.map(|d| (d.as_secs_f64() * 1000.0 * 10.0).round() / 10.0),
                "totalMs": (total.as_secs_f64() * 1000.0 * 10.0).round() / 10.0,
            },
        });
        if !self.other.is_empty() {
            document["body"] = Value::String(String::from_utf8_lossy(&self.other).into_owned());
        }
        if response["error"].is_object() {
            document["error"] = response["error"].clone();
        } else if let Some(error) = self.error.take() {
            document["error"] = error;
        }
        if !self.notes.is_empty() {
            document["notes"] = json!(self.notes);
        }
        document
    }
}

/// The end of the first event in `buffer`: (its length, the separator's length). One pass over
/// the line feeds: a blank line is `\n\n` or `\r\n\r\n`, whichever comes first.
fn find_event_end(buffer: &[u8]) -> Option<(usize, usize)> {
    memchr::memchr_iter(b'\n', buffer).find_map(|at| {
        let crlf = at > 0
            && buffer[at - 1] == b'\r'
            && buffer.get(at + 1..at + 3) == Some(b"\r\n".as_slice());
        if crlf {
            return Some((at - 1, 4));
        }
        (buffer.get(at + 1) == Some(&b'\n')).then_some((at, 2))
    })
}

/// `--capture DIR` on a real run: where to record, and where to forward.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiveCaptureSettings {
    pub dir: std::path::PathBuf,
    /// `--upstream URL` (else as [`live_upstream`] finds it).
    pub upstream: Option<String>,
    /// `--upstream-ca FILE`.
    pub upstream_ca: Option<std::path::PathBuf>,
    /// `--no-websocket`: Codex's Responses WebSocket is answered 426 (Codex then uses HTTP).
    pub no_websocket: bool,
}

/// A running live capture: the forwarder and the writer of what it records.
pub struct LiveCapture {
    forwarder: Forwarder,
    writer: tokio::task::JoinHandle<()>,
    /// The writer's; it ends when the forwarder's copies stop coming.
    _tasks: Tasks,
}

impl LiveCapture {
    /// Start recording into `settings.dir` (made 0700). `codex_args` and `codex_home` are where
    /// Codex's own base URL may be configured.
    pub async fn start(
        settings: &LiveCaptureSettings,
        codex_args: &[std::ffi::OsString],
        codex_home: Option<&std::path::Path>,
        known: std::sync::Arc<std::sync::Mutex<crate::capture::live::Known>>,
    ) -> Result<LiveCapture> {
        clawbridge_support::fs::create_private_dir(&settings.dir).map_err(|source| {
            Error::Write {
                path: settings.dir.clone(),
                source,
            }
        })?;
        let upstream = live_upstream(settings.upstream.as_deref(), codex_args, codex_home);
        match &upstream {
            Upstream::Fixed(url) => {
                tracing::info!("--capture: model requests are recorded on their way to {url}")
            }
            Upstream::ByCredential => tracing::info!(
                "--capture: model requests are recorded on their way to Codex's default upstream"
            ),
        }
        let (sink, recorded) = mpsc::channel(64);
        let forwarder = Forwarder::start(
            ForwarderSettings {
                upstream,
                extra_ca: settings.upstream_ca.clone(),
                websocket: !settings.no_websocket,
            },
            sink,
        )
        .await?;
        let writer = crate::capture::live::CaptureWriter::new(settings.dir.clone(), known);
        let tasks = Tasks::new();
        Ok(LiveCapture {
            forwarder,
            writer: tasks.spawn(writer.run_recorded(recorded)),
            _tasks: tasks,
        })
    }

    /// The base URL Codex is given.
    pub fn base_url(&self) -> String {
        self.forwarder.base_url()
    }

    /// Stop forwarding; let the writer finish what it holds (bounded).
    pub async fn finish(self) {
        drop(self.forwarder);
        let _ = tokio::time::timeout(Duration::from_secs(5), self.writer).await;
    }
}

/// The upstream model requests go to when recorded live: `--upstream`, else the base URL Codex
/// is configured with (a `-c openai_base_url=` among its arguments, `OPENAI_BASE_URL`, or
/// `openai_base_url` in `<codex home>/config.toml`), else Codex's default for each request's
/// credential (docs/codex-wire.md §12).
pub fn live_upstream(
    explicit: Option<&str>,
    codex_args: &[std::ffi::OsString],
    codex_home: Option<&std::path::Path>,
) -> Upstream {
    if let Some(url) = explicit {
        return Upstream::Fixed(url.to_string());
    }
    let unquote = |value: &str| {
        value
            .trim()
            .trim_matches('"')
            .trim_matches('\'')
            .to_string()
    };
    let from_args = codex_args
        .iter()
        .filter_map(|arg| arg.to_str())
        .filter_map(|arg| arg.strip_prefix("openai_base_url="))
        .next_back()
        .map(unquote);
    let from_env = std::env::var("OPENAI_BASE_URL")
        .ok()
        .filter(|value| !value.trim().is_empty());
    let from_config = || {
        let home = codex_home
            .map(std::path::Path::to_path_buf)
            .or_else(|| dirs::home_dir().map(|home| home.join(".codex")))?;
        let text = clawbridge_support::fs::read_file_capped(&home.join("config.toml"), 1024 * 1024)
            .ok()?;
        String::from_utf8_lossy(&text)
            .lines()
            .take_while(|line| !line.trim_start().starts_with('['))
            .find_map(|line| {
                let (key, value) = line.split_once('=')?;
                (key.trim() == "openai_base_url").then(|| unquote(value))
            })
    };
    match from_args.or(from_env).or_else(from_config) {
        Some(url) if !url.is_empty() => Upstream::Fixed(url),
        _ => Upstream::ByCredential,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ends_are_the_first_blank_line_of_either_kind() {
        assert_eq!(find_event_end(b"data: a\n\ndata: b\r\n\r\n"), Some((7, 2)));
        assert_eq!(find_event_end(b"data: a\r\n\r\ndata: b\n\n"), Some((7, 4)));
        assert_eq!(find_event_end(b"data: a\r\ndata: b\n"), None);
        assert_eq!(find_event_end(b"\n\n"), Some((0, 2)));
        assert_eq!(find_event_end(b"\r\n\r\n"), Some((0, 4)));
    }

    /// Protection (linear recording): one event of 60 MiB in 4 KiB chunks (as large as the
    /// recording cap allows; 64 MiB in larger chunks took 25 s of CPU when the whole pending
    /// buffer was searched again on every chunk, and these smaller chunks would take minutes)
    /// and 100,000 small events in one chunk are each read in one pass.
    #[test]
    fn the_answer_recorder_reads_a_stream_once() {
        let mut recorder = AnswerRecorder::new(200, Instant::now());
        let chunk = vec![b'x'; 4 * 1024];
        recorder.feed(b"data: ");
        for _ in 0..(60 * 1024 * 1024 / chunk.len()) {
            recorder.feed(&chunk);
        }
        assert_eq!(recorder.pending.len(), 60 * 1024 * 1024 + 6);
        recorder.feed(b"\n\n");
        assert!(recorder.pending.is_empty(), "the event was taken out");
        let mut recorder = AnswerRecorder::new(200, Instant::now());
        let mut many = Vec::new();
        for index in 0..100_000 {
            many.extend_from_slice(
                format!("event: e\r\ndata: {{\"n\":{index}}}\r\n\r\n").as_bytes(),
            );
        }
        recorder.feed(&many);
        assert_eq!(recorder.events, 100_000);
        assert!(recorder.pending.is_empty());
    }

    #[test]
    fn the_upstream_is_the_flag_then_codex_s_own_configuration_then_its_default() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(
            dir.path().join("config.toml"),
            "model = \"gpt-5.5\"\nopenai_base_url = \"https://proxy.example/v1\"\n[model_providers.x]\nopenai_base_url = \"no\"\n",
        )
        .expect("config");
        let args: Vec<std::ffi::OsString> = vec![
            "-c".into(),
            "openai_base_url=\"https://args.example/v1\"".into(),
        ];
        assert_eq!(
            live_upstream(Some("https://flag.example/v1"), &args, Some(dir.path())),
            Upstream::Fixed("https://flag.example/v1".into())
        );
        if std::env::var_os("OPENAI_BASE_URL").is_none() {
            assert_eq!(
                live_upstream(None, &args, Some(dir.path())),
                Upstream::Fixed("https://args.example/v1".into())
            );
            assert_eq!(
                live_upstream(None, &[], Some(dir.path())),
                Upstream::Fixed("https://proxy.example/v1".into())
            );
            let empty = tempfile::tempdir().expect("dir");
            assert_eq!(
                live_upstream(None, &[], Some(empty.path())),
                Upstream::ByCredential
            );
        }
        let mut headers = HeaderMap::new();
        assert_eq!(Upstream::ByCredential.base_for(&headers), API_KEY_UPSTREAM);
        headers.insert("chatgpt-account-id", "acct".parse().expect("header"));
        assert_eq!(Upstream::ByCredential.base_for(&headers), CHATGPT_UPSTREAM);
    }
}
