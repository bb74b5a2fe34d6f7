//! Offline pairing: a loopback Responses API stub and a throwaway `CODEX_HOME`.
//!
//! [`ResponsesStub`] answers `POST /v1/responses` with Server-Sent Events in the shape Codex
//! 0.169.0 consumes (docs/codex-wire.md §9.2), scripted per model request by a [`StubScript`]
//! (assistant text, a function call to a named tool, a `response.failed`, or an HTTP error), and
//! records every request it gets. [`OfflineHome`] writes the offline `config.toml` that points
//! Codex at the stub, into a temp folder or a folder the user names, never the real `~/.codex`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::record::CapturedRequest;
use clawbridge_support::error::{Error, Result};
use clawbridge_support::sync::lock;
use clawbridge_support::task::Tasks;

/// One scripted answer.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum StubStep {
    /// An assistant message.
    Text(String),
    /// A function call the model makes.
    ToolCall {
        name: String,
        #[serde(default)]
        arguments: Value,
        #[serde(default)]
        namespace: Option<String>,
    },
    /// A `response.failed` event with this message.
    Fail(String),
    /// An HTTP error status instead of a stream.
    HttpStatus(u16),
    /// Never answer (the request hangs until Codex gives up or is stopped): for timeout and
    /// crash tests. Written as the string `"hang"`.
    Hang,
    /// Answer with `step` after `ms` milliseconds (a slow model: for steering a running turn,
    /// or for load with turns in flight). `{"delayed": {"ms": 2000, "step": {"text": "hi"}}}`.
    Delayed { ms: u64, step: Box<StubStep> },
    /// Stream `step`'s events with `ms` milliseconds between them (a model that streams: for
    /// checking that what sits between Codex and the model passes events on as they come).
    /// `{"paced": {"ms": 300, "step": {"text": "hi"}}}`.
    Paced { ms: u64, step: Box<StubStep> },
    /// A recorded answer played back (a replay's model side, [`crate::replay_book`]): the
    /// response's output items in order, each message's text in the deltas it came in.
    #[serde(skip)]
    Recorded(Box<crate::replay_book::RecordedAnswer>),
    /// Send the request on to this upstream base URL and stream its answer back (a replay's
    /// fork: the turns past it go live), with this bearer key when given.
    #[serde(skip)]
    Forward { url: String, bearer: Option<String> },
}

impl From<crate::replay_book::BookAnswer> for StubStep {
    fn from(answer: crate::replay_book::BookAnswer) -> Self {
        use crate::replay_book::BookAnswer;
        match answer {
            BookAnswer::Recorded(answer) => StubStep::Recorded(answer),
            BookAnswer::HttpStatus(code) => StubStep::HttpStatus(code),
            BookAnswer::Fail(message) => StubStep::Fail(message),
            BookAnswer::Forward { url, bearer } => StubStep::Forward { url, bearer },
        }
    }
}

/// Longest delay a script may ask for (a hang is `"hang"`).
const MAX_STUB_DELAY_MS: u64 = 10 * 60 * 1000;

/// Model requests the stub keeps for inspection (a capture needs one or two; each carries the
/// whole thread history, so a long-lived serve must not keep many). They are kept as the bytes
/// that came, parsed only when asked for: a parsed body takes ten to fifteen times its size.
const MAX_KEPT_REQUESTS: usize = 8;
/// Bytes of request bodies kept at most, over all kept requests (the oldest go first).
const MAX_KEPT_BYTES: usize = 32 * 1024 * 1024;
/// Largest request body the stub takes (413 past it). Codex's requests carry the thread's
/// history and are a few hundred kilobytes at most; images inline would be more, never this.
pub const MAX_REQUEST_BODY: usize = 16 * 1024 * 1024;

/// Answers per model request, in order; after the last one the stub replies with a short text.
/// `byInput` answers requests whose latest user message contains a given text from their own
/// queue first, so clients that run side by side (two agents) each get their own answers
/// whatever the order their requests arrive in.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StubScript {
    pub responses: Vec<StubStep>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_input: Vec<StubRule>,
    /// Speak the Responses WebSocket as the real upstream does (`response.create` frames in,
    /// one event per frame out); without it the stub answers Codex's upgrade 426 and Codex
    /// uses HTTP.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub websocket: bool,
}

/// Answers for the requests whose latest user message contains `contains`, in order (once
/// used up, such a request takes the next of `responses`, or the default reply).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StubRule {
    pub contains: String,
    pub responses: Vec<StubStep>,
}

/// The text of the latest user message of a Responses request body (what a rule matches).
fn latest_user_text(body: &[u8]) -> String {
    #[derive(Deserialize)]
    struct Body {
        #[serde(default)]
        input: Vec<Value>,
    }
    let Ok(body) = serde_json::from_slice::<Body>(body) else {
        return String::new();
    };
    body.input
        .iter()
        .rev()
        .find(|item| item["role"] == "user")
        .map(|item| match &item["content"] {
            Value::String(text) => text.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|part| part["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        })
        .unwrap_or_default()
}

impl StubScript {
    /// Parse a script file: `{"responses": [...]}` or a bare array of steps.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let invalid = |error: serde_json::Error| {
            Error::InvalidDocument {
            path: path.to_path_buf(),
            message: format!(
                "{error} (expected {{\"responses\": [...]}} with steps {{\"text\": ...}}, {{\"toolCall\": {{\"name\", \"arguments\"}}}}, {{\"fail\": ...}} or {{\"httpStatus\": 500}})"
            ),
        }
        };
        let value: Value = serde_json::from_str(&text).map_err(invalid)?;
        if value.is_array() {
            return Ok(StubScript {
                responses: serde_json::from_value(value).map_err(invalid)?,
                ..Default::default()
            });
        }
        serde_json::from_value(value).map_err(invalid)
    }
}

/// A request as kept: its body unparsed.
struct KeptRequest {
    headers: BTreeMap<String, String>,
    body: Bytes,
}

struct StubState {
    websocket: bool,
    script: Vec<StubStep>,
    rules: Vec<StubRule>,
    /// Where each request is also sent as it arrives (a long-lived proxy writes captures as it
    /// goes); bounded, and a full sink drops the copy rather than stall Codex.
    sink: Option<tokio::sync::mpsc::Sender<CapturedRequest>>,
    requests: std::collections::VecDeque<KeptRequest>,
    kept_bytes: usize,
    /// Requests answered so far (numbers the replies; the kept log is bounded).
    served: usize,
    /// The port it listens on: a request must name it in `Host`.
    port: u16,
    /// The random first path segment of the base URL: only the Codex that was given the URL
    /// (in a 0600 config or on its command line) can post, not any local process.
    secret: String,
    /// The server and each WebSocket's; cancelled with the stub.
    tasks: Tasks,
    /// A replay's recorded answers, taken by thread and turn before any script step.
    book: Option<Arc<Mutex<crate::replay_book::ReplayBook>>>,
}

/// Browser-proofing of the loopback stub: Codex never sends `Origin`, and it names the stub by
/// its loopback address. A web page (any `Origin`) or a DNS-rebound name (any other `Host`) is
/// refused, so no page in the user's browser can feed or read the captures.
fn refused(state: &Mutex<StubState>, headers: &HeaderMap) -> Option<Response> {
    let port = state
        .lock()
        .map(|state| state.port)
        .unwrap_or_else(|poisoned| poisoned.into_inner().port);
    clawbridge_support::loopback::refusal(headers, port, "offline stub")
}

/// The secret path segment, compared in constant time (a wrong one answers 404, like a path
/// that does not exist).
fn wrong_secret(state: &Mutex<StubState>, given: &str) -> Option<Response> {
    use subtle::ConstantTimeEq;
    let expected = state
        .lock()
        .map(|state| state.secret.clone())
        .unwrap_or_else(|poisoned| poisoned.into_inner().secret.clone());
    let same: bool = expected.as_bytes().ct_eq(given.as_bytes()).into();
    (!same).then(|| (StatusCode::NOT_FOUND, "offline stub: no such path").into_response())
}

/// The running stub; dropping it stops the server.
pub struct ResponsesStub {
    pub addr: SocketAddr,
    state: Arc<Mutex<StubState>>,
    _stop: tokio_util::sync::DropGuard,
}

impl ResponsesStub {
    /// Bind `127.0.0.1:0` and serve until dropped.
    pub async fn start(script: StubScript) -> Result<Self> {
        Self::start_with_sink(script, None).await
    }

    /// [`ResponsesStub::start`], also sending a copy of each request to `sink` as it arrives.
    pub async fn start_with_sink(
        script: StubScript,
        sink: Option<tokio::sync::mpsc::Sender<CapturedRequest>>,
    ) -> Result<Self> {
        let (listener, addr, secret) =
            clawbridge_support::loopback::bind("the offline stub").await?;
        let tasks = Tasks::new();
        let state = Arc::new(Mutex::new(StubState {
            websocket: script.websocket,
            script: script.responses,
            rules: script.by_input,
            sink,
            requests: std::collections::VecDeque::new(),
            kept_bytes: 0,
            served: 0,
            port: addr.port(),
            secret,
            tasks: tasks.clone(),
            book: None,
        }));
        let router = Router::new()
            // Codex tries a WebSocket first (GET with an upgrade); 426 sends it to HTTP at once
            // (a 404 or 405 would cost it retries first).
            .route(
                "/{secret}/v1/responses",
                post(responses).get(websocket_or_upgrade_required),
            )
            .layer(DefaultBodyLimit::max(MAX_REQUEST_BODY))
            .with_state(Arc::clone(&state));
        let stopped = tasks.token().clone().cancelled_owned();
        tasks.spawn(async move {
            let served = axum::serve(clawbridge_support::ws::no_delay(listener), router)
                .with_graceful_shutdown(stopped)
                .await;
            if let Err(error) = served {
                tracing::warn!("offline stub stopped: {error}");
            }
        });
        tracing::info!("offline Responses stub listening on http://{addr}/v1");
        Ok(Self {
            addr,
            state,
            _stop: tasks.drop_guard(),
        })
    }

    /// Answer every request from `book` (a replay's model side) rather than the script.
    pub fn answer_from(&self, book: Arc<Mutex<crate::replay_book::ReplayBook>>) {
        lock(&self.state).book = Some(book);
    }

    /// The base URL Codex is pointed at (with the secret path segment).
    pub fn base_url(&self) -> String {
        let secret = self
            .state
            .lock()
            .map(|state| state.secret.clone())
            .unwrap_or_default();
        format!("http://{}/{secret}/v1", self.addr)
    }

    /// The bodies of the requests kept (the latest, within [`MAX_KEPT_REQUESTS`] and
    /// [`MAX_KEPT_BYTES`]), as the bytes that came.
    pub fn request_bodies(&self) -> Vec<Bytes> {
        self.state
            .lock()
            .map(|state| {
                state
                    .requests
                    .iter()
                    .map(|request| request.body.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The requests kept, parsed now.
    pub fn requests(&self) -> Vec<CapturedRequest> {
        let kept: Vec<(BTreeMap<String, String>, Bytes)> = self
            .state
            .lock()
            .map(|state| {
                state
                    .requests
                    .iter()
                    .map(|request| (request.headers.clone(), request.body.clone()))
                    .collect()
            })
            .unwrap_or_default();
        kept.into_iter()
            .map(|(headers, body)| CapturedRequest::from_parts(headers, &body))
            .collect()
    }
}

async fn responses(
    State(state): State<Arc<Mutex<StubState>>>,
    axum::extract::Path(secret): axum::extract::Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refusal) = refused(&state, &headers).or_else(|| wrong_secret(&state, &secret)) {
        return refusal;
    }
    let (number, step) = next_step(&state, &headers, body.clone());
    if let StubStep::Forward { url, bearer } = &step {
        return forward_upstream(url, bearer.as_deref(), &headers, body).await;
    }
    let mut step = step;
    while let StubStep::Delayed { ms, step: then } = step {
        tokio::time::sleep(std::time::Duration::from_millis(ms.min(MAX_STUB_DELAY_MS))).await;
        step = *then;
    }
    match step {
        StubStep::Hang => std::future::pending().await,
        StubStep::Paced { ms, step } => {
            let text = sse_body(number, &step);
            let events: Vec<String> = text.split_inclusive("\n\n").map(str::to_string).collect();
            let pause = std::time::Duration::from_millis(ms.min(MAX_STUB_DELAY_MS));
            let stream = futures_util::stream::unfold(
                (events.into_iter(), true),
                move |(mut events, first)| async move {
                    let event = events.next()?;
                    if !first {
                        tokio::time::sleep(pause).await;
                    }
                    Some((Ok::<_, std::io::Error>(Bytes::from(event)), (events, false)))
                },
            );
            (
                [("content-type", "text/event-stream")],
                axum::body::Body::from_stream(stream),
            )
                .into_response()
        }
        StubStep::HttpStatus(code) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (status, "offline stub: scripted HTTP error").into_response()
        }
        step => (
            [("content-type", "text/event-stream")],
            sse_body(number, &step),
        )
            .into_response(),
    }
}

/// Headers of Codex's model request the upstream gets as they came (the body says the rest).
const FORWARDED_HEADERS: [&str; 6] = [
    "accept",
    "originator",
    "user-agent",
    "session_id",
    "openai-beta",
    "x-codex-turn-metadata",
];

/// The one client a replay's fork sends through: built on its first request (the system's
/// roots read once, the project's one TLS configuration), reused for every later one.
fn fork_client() -> std::result::Result<&'static reqwest::Client, String> {
    static CLIENT: std::sync::OnceLock<std::result::Result<reqwest::Client, String>> =
        std::sync::OnceLock::new();
    CLIENT
        .get_or_init(|| {
            let tls = clawbridge_support::tls::client_config(None, "--then-upstream")
                .map_err(|error| error.to_string())?;
            reqwest::Client::builder()
                .connect_timeout(std::time::Duration::from_secs(10))
                .use_preconfigured_tls(tls)
                .build()
                .map_err(|error| format!("clawbridge replay: cannot set up TLS: {error}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// A replay's fork: the request sent on to `url` and its answer streamed back as it comes.
async fn forward_upstream(
    url: &str,
    bearer: Option<&str>,
    headers: &HeaderMap,
    body: Bytes,
) -> Response {
    let client = match fork_client() {
        Ok(client) => client,
        Err(error) => return (StatusCode::BAD_GATEWAY, error).into_response(),
    };
    let mut request = client
        .post(format!("{}/responses", url.trim_end_matches('/')))
        .header("content-type", "application/json")
        .body(body);
    for name in FORWARDED_HEADERS {
        if let Some(value) = headers.get(name) {
            request = request.header(name, value.clone());
        }
    }
    if let Some(bearer) = bearer {
        request = request.bearer_auth(bearer);
    }
    match request.send().await {
        Ok(answer) => {
            let status =
                StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
            let kind = answer
                .headers()
                .get("content-type")
                .and_then(|value| value.to_str().ok())
                .unwrap_or("text/event-stream")
                .to_string();
            (
                status,
                [("content-type", kind)],
                axum::body::Body::from_stream(answer.bytes_stream()),
            )
                .into_response()
        }
        Err(error) => (
            StatusCode::BAD_GATEWAY,
            format!("clawbridge replay: the upstream did not answer: {error}"),
        )
            .into_response(),
    }
}

/// Record one model request and choose its answer: a rule for its latest user message, else the
/// script's next step, else the default reply. Returns the request's number with the step.
fn next_step(state: &Mutex<StubState>, headers: &HeaderMap, body: Bytes) -> (usize, StubStep) {
    let headers: BTreeMap<String, String> = headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_string(),
                value.to_str().unwrap_or("<binary>").to_string(),
            )
        })
        .collect();
    // A rule matches the latest user message: parsed (only when a rule waits) before the lock,
    // so a large body does not hold up the requests of other clients.
    let has_rules = state
        .lock()
        .map(|state| state.rules.iter().any(|rule| !rule.responses.is_empty()))
        .unwrap_or(false);
    let user_text = has_rules.then(|| latest_user_text(&body));
    {
        let mut state = state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(sink) = &state.sink {
            // Parsed for the capture writer only, and only while it keeps up.
            let sent = sink.capacity() > 0
                && sink
                    .try_send(CapturedRequest::from_parts(headers.clone(), &body))
                    .is_ok();
            if !sent {
                tracing::warn!("offline stub: a capture was dropped (the writer is behind)");
            }
        }
        let ruled = user_text.as_deref().and_then(|text| {
            state
                .rules
                .iter_mut()
                .find(|rule| !rule.responses.is_empty() && text.contains(&rule.contains))
                .map(|rule| rule.responses.remove(0))
        });
        let booked = state
            .book
            .clone()
            .map(|book| StubStep::from(lock(&book).answer(&headers)));
        // A long-lived serve sends many turns through one stub: keep the latest requests only,
        // bounded in number and bytes.
        state.kept_bytes += body.len();
        state.requests.push_back(KeptRequest { headers, body });
        while state.requests.len() > MAX_KEPT_REQUESTS
            || (state.kept_bytes > MAX_KEPT_BYTES && state.requests.len() > 1)
        {
            if let Some(old) = state.requests.pop_front() {
                state.kept_bytes -= old.body.len();
            }
        }
        state.served += 1;
        let number = state.served;
        let step = if let Some(step) = booked {
            step
        } else if let Some(step) = ruled {
            step
        } else if state.script.is_empty() {
            StubStep::Text(format!("clawbridge offline stub reply {number}."))
        } else {
            state.script.remove(0)
        };
        (number, step)
    }
}

/// Codex's WebSocket attempt: served when the script says `websocket`, else 426 (use HTTP).
async fn websocket_or_upgrade_required(
    State(state): State<Arc<Mutex<StubState>>>,
    axum::extract::Path(secret): axum::extract::Path<String>,
    request: http::Request<axum::body::Body>,
) -> Response {
    if let Some(refusal) =
        refused(&state, request.headers()).or_else(|| wrong_secret(&state, &secret))
    {
        return refusal;
    }
    let websocket = state.lock().map(|state| state.websocket).unwrap_or(false);
    if !websocket || !clawbridge_support::ws::is_upgrade(request.headers()) {
        return (
            StatusCode::UPGRADE_REQUIRED,
            "offline stub: no WebSocket here; use HTTP POST",
        )
            .into_response();
    }
    let headers = request.headers().clone();
    let (accepted, pending) = match clawbridge_support::ws::accept(request, MAX_REQUEST_BODY) {
        Ok(accepted) => accepted,
        Err(refusal) => return refusal.into_response(),
    };
    let tasks = lock(&state).tasks.clone();
    tasks.spawn_cancellable(async move {
        if let Some((sender, receiver)) = pending.connect().await {
            serve_websocket(state, headers, sender, receiver).await;
        }
    });
    accepted
}

/// One Responses WebSocket: each `response.create` frame is a model request (recorded as it
/// came: incremental input and all), answered with its step's events, one per text frame.
async fn serve_websocket(
    state: Arc<Mutex<StubState>>,
    headers: HeaderMap,
    mut sender: clawbridge_support::ws::WsSender,
    mut receiver: clawbridge_support::ws::WsReceiver,
) {
    let mut data = Vec::new();
    loop {
        data.clear();
        match receiver.receive(&mut data).await {
            Ok(soketto::Incoming::Data(soketto::Data::Text(_))) => {}
            Ok(soketto::Incoming::Data(_) | soketto::Incoming::Pong(_)) => continue,
            Ok(soketto::Incoming::Closed(_)) | Err(_) => break,
        }
        let Ok(frame) = serde_json::from_slice::<Value>(&data) else {
            continue;
        };
        if frame["type"] != "response.create" {
            continue;
        }
        if frame["generate"] == false {
            // A warm-up: answered at once with an empty response, as the real upstream does; no
            // step is used and nothing is recorded.
            let id = format!("resp_stub_warmup_{}", uuid::Uuid::new_v4().simple());
            for event in [
                json!({"type": "response.created", "response": {"id": id}}),
                json!({"type": "response.completed", "response": {"id": id, "output": []}}),
            ] {
                if sender.send_text(&event.to_string()).await.is_err() {
                    return;
                }
            }
            if sender.flush().await.is_err() {
                return;
            }
            continue;
        }
        let (number, mut step) = next_step(&state, &headers, Bytes::copy_from_slice(&data));
        while let StubStep::Delayed { ms, step: then } = step {
            tokio::time::sleep(std::time::Duration::from_millis(ms.min(MAX_STUB_DELAY_MS))).await;
            step = *then;
        }
        let (pause, step) = match step {
            StubStep::Paced { ms, step } => (
                Some(std::time::Duration::from_millis(ms.min(MAX_STUB_DELAY_MS))),
                *step,
            ),
            step => (None, step),
        };
        let events: Vec<String> = match step {
            StubStep::Hang => std::future::pending().await,
            StubStep::Forward { .. } => vec![json!({"type": "error", "status": 502,
                "error": {"type": "server_error", "code": "replay", "message": "clawbridge replay forwards over HTTP only"}})
            .to_string()],
            StubStep::HttpStatus(code) => vec![json!({"type": "error", "status": code,
                "error": {"type": "server_error", "code": "scripted", "message": "offline stub: scripted error"}})
            .to_string()],
            step => sse_body(number, &step)
                .split("\n\n")
                .filter_map(|event| {
                    event
                        .lines()
                        .find_map(|line| line.strip_prefix("data: "))
                        .map(str::to_string)
                })
                .collect(),
        };
        for (index, event) in events.iter().enumerate() {
            if let (Some(pause), true) = (pause, index > 0) {
                tokio::time::sleep(pause).await;
            }
            if sender.send_text(event).await.is_err() || sender.flush().await.is_err() {
                return;
            }
        }
    }
    let _ = sender.close().await;
}

fn sse_event(out: &mut String, value: &Value) {
    let kind = value["type"].as_str().unwrap_or("message");
    out.push_str(&format!("event: {kind}\ndata: {value}\n\n"));
}

/// The SSE body for one scripted step (rich shape, with text deltas).
pub fn sse_body(number: usize, step: &StubStep) -> String {
    let response_id = format!("resp_stub_{number}");
    let usage = json!({"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15});
    let mut out = String::new();
    sse_event(
        &mut out,
        &json!({"type": "response.created", "response": {"id": response_id}}),
    );
    sse_event(
        &mut out,
        &json!({"type": "response.in_progress", "response": {"id": response_id}}),
    );
    match step {
        StubStep::Text(text) => {
            let item_id = format!("msg_stub_{number}");
            sse_event(
                &mut out,
                &json!({"type": "response.output_item.added", "output_index": 0,
                "item": {"type": "message", "id": item_id, "status": "in_progress", "role": "assistant", "content": []}}),
            );
            sse_event(
                &mut out,
                &json!({"type": "response.content_part.added", "item_id": item_id, "output_index": 0, "content_index": 0,
                "part": {"type": "output_text", "text": "", "annotations": []}}),
            );
            let split = text
                .char_indices()
                .nth(text.chars().count() / 2)
                .map_or(text.len(), |(index, _)| index);
            for delta in [&text[..split], &text[split..]] {
                if !delta.is_empty() {
                    sse_event(
                        &mut out,
                        &json!({"type": "response.output_text.delta", "item_id": item_id, "output_index": 0, "content_index": 0, "delta": delta}),
                    );
                }
            }
            sse_event(
                &mut out,
                &json!({"type": "response.output_text.done", "item_id": item_id, "output_index": 0, "content_index": 0, "text": text}),
            );
            sse_event(
                &mut out,
                &json!({"type": "response.content_part.done", "item_id": item_id, "output_index": 0, "content_index": 0,
                "part": {"type": "output_text", "text": text, "annotations": []}}),
            );
            sse_event(
                &mut out,
                &json!({"type": "response.output_item.done", "output_index": 0,
                "item": {"type": "message", "id": item_id, "status": "completed", "role": "assistant",
                         "content": [{"type": "output_text", "text": text, "annotations": []}]}}),
            );
            sse_event(
                &mut out,
                &json!({"type": "response.completed", "response": {"id": response_id, "usage": usage}}),
            );
        }
        StubStep::ToolCall {
            name,
            arguments,
            namespace,
        } => {
            let mut item = json!({"type": "function_call", "id": format!("fc_stub_{number}"), "status": "completed",
                "call_id": format!("call_stub_{number}"), "name": name, "arguments": arguments.to_string()});
            if let Some(namespace) = namespace {
                item["namespace"] = json!(namespace);
            }
            sse_event(
                &mut out,
                &json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
            );
            sse_event(
                &mut out,
                &json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
            );
            sse_event(
                &mut out,
                &json!({"type": "response.completed", "response": {"id": response_id, "usage": usage}}),
            );
        }
        StubStep::Recorded(answer) => {
            for event in answer.events(&response_id) {
                sse_event(&mut out, &event);
            }
            return out;
        }
        StubStep::Fail(message) => {
            sse_event(
                &mut out,
                &json!({"type": "response.failed", "response": {"id": response_id,
                "error": {"code": "server_error", "message": message}}}),
            );
        }
        StubStep::HttpStatus(_)
        | StubStep::Forward { .. }
        | StubStep::Hang
        | StubStep::Delayed { .. }
        | StubStep::Paced { .. } => {}
    }
    out
}

/// Marks a `config.toml` clawbridge wrote (and may overwrite).
const CONFIG_MARKER: &str = "# written by clawbridge --offline";

/// The offline `config.toml` (docs/codex-wire.md §9.1).
pub fn offline_config(base_url: &str, model: &str) -> String {
    offline_config_with(base_url, model, r#"model_provider = "clawbridge_stub""#)
}

/// The offline `config.toml` of an account's home on the WebSocket endpoint: Codex's `openai`
/// provider pointed at the stub, so the account's login is in the loop (each model request
/// carries its key, and `account/read` names it) while nothing leaves the machine.
pub fn offline_account_config(base_url: &str, model: &str) -> String {
    let provider = format!("model_provider = \"openai\"\nopenai_base_url = \"{base_url}\"");
    offline_config_with(base_url, model, &provider)
}

fn offline_config_with(base_url: &str, model: &str, provider: &str) -> String {
    format!(
        r#"{CONFIG_MARKER}: a loopback Responses stub, no account, no network.
model = "{model}"
{provider}
check_for_update_on_startup = false

[model_providers.clawbridge_stub]
name = "clawbridge offline stub (loopback)"
base_url = "{base_url}"
wire_api = "responses"
requires_openai_auth = false
supports_websockets = false
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 30000

[features]
plugins = false
enable_request_compression = false

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"
"#
    )
}

/// Why a sandboxed turn could write `home`, if it could: it lies inside a workspace root (the
/// turn's cwd is under one) or under a temp folder (`workspace-write` leaves `/tmp` and
/// `$TMPDIR` writable). A turn that can write the Codex home can add an `[mcp_servers]` entry
/// or a provider to its `config.toml`, which the next thread (any session's) then runs outside
/// every sandbox.
pub fn sandbox_writable_reason(home: &Path, roots: &[PathBuf]) -> Option<String> {
    let real = |path: &Path| path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let home = real(home);
    if let Some(root) = roots.iter().find(|root| home.starts_with(real(root))) {
        return Some(format!(
            "it lies inside the workspace root {}",
            root.display()
        ));
    }
    let temp = [std::env::temp_dir(), PathBuf::from("/tmp")];
    temp.iter()
        .find(|dir| home.starts_with(real(dir)))
        .map(|dir| {
            format!(
                "it lies under {}, which the workspace-write sandbox leaves writable",
                dir.display()
            )
        })
}

/// A `CODEX_HOME` holding the offline config.
#[derive(Debug)]
pub struct OfflineHome {
    pub path: PathBuf,
    _temp: Option<tempfile::TempDir>,
}

impl OfflineHome {
    /// A throwaway folder, or `dir` when given (refusing the real `~/.codex`, and refusing to
    /// overwrite a `config.toml` that clawbridge did not write).
    pub fn prepare(
        dir: Option<&Path>,
        base_url: &str,
        model: &str,
        real_home: Option<&Path>,
    ) -> Result<Self> {
        let (path, temp) = match dir {
            Some(dir) => {
                std::fs::create_dir_all(dir).map_err(|source| Error::Write {
                    path: dir.to_path_buf(),
                    source,
                })?;
                let canonical = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
                if let Some(home) = real_home {
                    let real = home.join(".codex");
                    let real = real.canonicalize().unwrap_or(real);
                    if canonical == real {
                        return Err(Error::InvalidArgument {
                            flag: format!("--codex-home {}", dir.display()),
                            message: "refusing to put the offline config into your real Codex home; pass another folder or leave --codex-home out".to_string(),
                        });
                    }
                }
                (canonical, None)
            }
            None => {
                let temp = tempfile::Builder::new()
                    .prefix("clawbridge-codex-home-")
                    .tempdir()
                    .map_err(|source| Error::Write {
                        path: std::env::temp_dir(),
                        source,
                    })?;
                (temp.path().to_path_buf(), Some(temp))
            }
        };
        let config = path.join("config.toml");
        if let Ok(existing) = std::fs::read_to_string(&config) {
            if !existing.starts_with(CONFIG_MARKER) {
                return Err(Error::InvalidDocument {
                    path: config.clone(),
                    message: "exists and was not written by clawbridge; refusing to overwrite it (use an empty folder for --codex-home)".to_string(),
                });
            }
        }
        clawbridge_support::fs::write_private(&config, offline_config(base_url, model).as_bytes())?;
        Ok(Self { path, _temp: temp })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_answer_by_the_latest_user_message() {
        let script: StubScript = serde_json::from_str(
            r#"{"responses": [{"text": "shared"}], "byInput": [{"contains": "beta:", "responses": [{"text": "for beta"}]}]}"#,
        )
        .expect("script");
        assert_eq!(script.by_input[0].contains, "beta:");
        let body = br#"{"input": [{"role": "user", "content": [{"type": "input_text", "text": "beta: hi"}]}, {"role": "assistant", "content": "x"}, {"type": "function_call_output"}]}"#;
        assert_eq!(latest_user_text(body), "beta: hi");
        assert_eq!(latest_user_text(b"not json"), "");
    }

    #[test]
    fn scripts_parse_both_shapes_and_name_bad_steps() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("script.json");
        std::fs::write(&path, r#"[{"text": "hi"}, {"toolCall": {"name": "message", "arguments": {"action": "send"}}}, {"fail": "boom"}, {"httpStatus": 500}]"#).expect("write");
        let script = StubScript::load(&path).expect("script");
        assert_eq!(script.responses.len(), 4);
        std::fs::write(&path, r#"{"responses": [{"txt": "hi"}]}"#).expect("write");
        let error = StubScript::load(&path).expect_err("bad step").to_string();
        assert!(
            error.contains("script.json") && error.contains("txt"),
            "{error}"
        );
    }

    /// Send one raw HTTP request to the stub; the status code and the stub's kept requests.
    async fn raw(stub: &ResponsesStub, request: String) -> u16 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(stub.addr)
            .await
            .expect("connect");
        stream.write_all(request.as_bytes()).await.expect("write");
        let mut answer = vec![0; 64];
        let read = stream.read(&mut answer).await.expect("read");
        let text = String::from_utf8_lossy(&answer[..read]).into_owned();
        text.split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or(0)
    }

    /// The path of the stub's endpoint, secret included.
    fn endpoint(stub: &ResponsesStub) -> String {
        let base = stub.base_url();
        let path = &base[base.find("/v1").map_or(0, |_| "http://".len())..];
        let path = &path[path.find('/').unwrap_or(0)..];
        format!("{path}/responses")
    }

    #[tokio::test]
    async fn websocket_attempts_get_426_and_browsers_are_refused() {
        let stub = ResponsesStub::start(StubScript::default())
            .await
            .expect("stub");
        let port = stub.addr.port();
        let path = endpoint(&stub);
        let upgrade = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n");
        assert_eq!(
            raw(&stub, upgrade).await,
            426,
            "Codex falls back to HTTP at once"
        );
        let post = |extra: &str, host: &str| {
            format!("POST {path} HTTP/1.1\r\nHost: {host}\r\n{extra}Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}")
        };
        let own = format!("127.0.0.1:{port}");
        assert_eq!(
            raw(&stub, post("Origin: https://evil.example\r\n", &own)).await,
            403
        );
        assert_eq!(
            raw(&stub, post("", &format!("evil.example:{port}"))).await,
            403,
            "DNS rebinding"
        );
        assert!(
            stub.requests().is_empty(),
            "refused requests are not recorded"
        );
        assert_eq!(raw(&stub, post("", &own)).await, 200);
        assert_eq!(stub.requests().len(), 1);
    }

    /// Protection: another local process cannot post. Without the secret path segment (or with
    /// a wrong one) the stub answers 404 and records nothing.
    #[tokio::test]
    async fn a_request_without_the_secret_is_refused() {
        let stub = ResponsesStub::start(StubScript::default())
            .await
            .expect("stub");
        let port = stub.addr.port();
        let secret = endpoint(&stub);
        assert!(secret.len() > "/v1/responses".len() + 30, "{secret}");
        for path in [
            "/v1/responses".to_string(),
            "/0123456789abcdef0123456789abcdef/v1/responses".to_string(),
        ] {
            let request = format!("POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}");
            assert_eq!(raw(&stub, request).await, 404, "{path}");
        }
        assert!(stub.requests().is_empty());
        assert!(!stub
            .requests()
            .iter()
            .any(|request| request.path.contains(&secret)));
    }

    /// Protection: bodies are bounded. One past [`MAX_REQUEST_BODY`] gets 413; the kept ones stay
    /// within [`MAX_KEPT_BYTES`] however many arrive, and are kept unparsed.
    #[tokio::test]
    async fn bodies_are_capped_and_kept_within_a_byte_bound() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let stub = ResponsesStub::start(StubScript::default())
            .await
            .expect("stub");
        let port = stub.addr.port();
        let path = endpoint(&stub);
        let path = path.as_str();
        let addr = stub.addr;
        let post = |size: usize| async move {
            let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
            let body = format!("{{\"input\":\"{}\"}}", "x".repeat(size));
            let head = format!("POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
            stream.write_all(head.as_bytes()).await.expect("head");
            let _ = stream.write_all(body.as_bytes()).await;
            let mut answer = vec![0; 64];
            let read = stream.read(&mut answer).await.unwrap_or(0);
            String::from_utf8_lossy(&answer[..read])
                .split_whitespace()
                .nth(1)
                .and_then(|code| code.parse::<u16>().ok())
                .unwrap_or(0)
        };
        assert_eq!(post(MAX_REQUEST_BODY + 1).await, 413);
        for _ in 0..4 {
            assert_eq!(post(12 * 1024 * 1024).await, 200);
        }
        let kept = stub.requests();
        let bytes: usize = kept
            .iter()
            .map(|request| request.body["input"].as_str().map_or(0, str::len))
            .sum();
        assert!(
            !kept.is_empty() && bytes <= MAX_KEPT_BYTES,
            "{} kept, {bytes} bytes",
            kept.len()
        );
    }

    #[test]
    fn sse_bodies_end_with_completion() {
        let body = sse_body(1, &StubStep::Text("hello".into()));
        assert!(body.contains("response.output_text.delta") && body.trim_end().ends_with("}"));
        assert!(body.contains("\"type\":\"response.completed\""));
        let failed = sse_body(2, &StubStep::Fail("nope".into()));
        assert!(failed.contains("response.failed") && !failed.contains("response.completed"));
    }

    #[test]
    fn offline_home_refuses_foreign_configs_and_the_real_home() {
        let dir = tempfile::tempdir().expect("dir");
        let home = OfflineHome::prepare(Some(dir.path()), "http://127.0.0.1:1/v1", "gpt-5.5", None)
            .expect("home");
        assert!(std::fs::read_to_string(home.path.join("config.toml"))
            .expect("config")
            .contains("127.0.0.1:1"));
        std::fs::write(dir.path().join("config.toml"), "model = \"mine\"\n").expect("write");
        assert!(OfflineHome::prepare(Some(dir.path()), "http://x/v1", "gpt-5.5", None).is_err());
        let fake_home = tempfile::tempdir().expect("home");
        let real = fake_home.path().join(".codex");
        let error = OfflineHome::prepare(
            Some(&real),
            "http://x/v1",
            "gpt-5.5",
            Some(fake_home.path()),
        )
        .expect_err("real home");
        assert!(error.to_string().contains("real Codex home"));
    }
}
