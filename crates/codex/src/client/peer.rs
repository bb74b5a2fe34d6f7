//! A JSON-RPC peer for `codex app-server` over any `AsyncRead + AsyncWrite`.
//!
//! Child stdio in production, `tokio::io::duplex` in tests. One writer task serializes outbound
//! lines; one reader task routes responses to their pending requests (by id, keeping the id's JSON
//! type) and pushes notifications and server requests, in arrival order, into one bounded channel,
//! so a slow consumer slows the reader down instead of losing messages. Every request has a
//! timeout; when the stream ends every pending request fails at once, and so does every request
//! made after that.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::framing::{Frame, FrameReader, DEFAULT_MAX_FRAME_BYTES};
use crate::protocol::wire::{
    encode, own_json, Direction, Incoming, LineTap, Outgoing, RawJson, RequestId, RpcError,
    TapMaker, W3cTraceContext,
};
use clawbridge_support::sync::lock;

/// Removes a request's pending entry when its future ends, whichever way.
struct PendingGuard<'a> {
    peer: &'a Peer,
    id: RequestId,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.peer.lock_pending().requests.remove(&self.id);
    }
}

/// Peer limits.
#[derive(Clone, Debug)]
pub struct PeerConfig {
    /// A copy of every line both ways (`serve --transcript`, the captures' knowledge).
    pub tap: Option<TapMaker>,
    pub max_frame_bytes: usize,
    pub request_timeout: Duration,
    /// Capacity of the notification / server-request channel.
    pub event_capacity: usize,
    /// A request Codex answers with `-32001` ("Server overloaded") is sent again this many
    /// times, after a pause that doubles from `overload_backoff.0` up to `.1`, with jitter.
    pub overload_retries: u32,
    pub overload_backoff: (Duration, Duration),
}

impl Default for PeerConfig {
    fn default() -> Self {
        Self {
            tap: None,
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            request_timeout: Duration::from_secs(30),
            event_capacity: 1024,
            overload_retries: 5,
            overload_backoff: (Duration::from_millis(200), Duration::from_secs(5)),
        }
    }
}

/// Codex's JSON-RPC code for "Server overloaded": try again later.
pub const SERVER_OVERLOADED: i64 = -32001;

/// The pause before retry `attempt` (0-based) of an overloaded request: doubled per attempt,
/// capped, and scattered over its upper half so that many waiting runs do not retry together.
pub fn overload_pause(attempt: u32, backoff: (Duration, Duration)) -> Duration {
    let full = backoff
        .0
        .saturating_mul(2u32.saturating_pow(attempt.min(16)))
        .min(backoff.1);
    let mut random = [0u8; 2];
    let _ = getrandom::fill(&mut random);
    let fraction = f64::from(u16::from_le_bytes(random)) / f64::from(u16::MAX);
    full.mul_f64(0.5 + fraction / 2.0)
}

/// Why a request failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum PeerError {
    #[error("`{method}` got no answer within {after:?}")]
    Timeout { method: String, after: Duration },
    #[error("`{method}` failed: {error}")]
    Rpc { method: String, error: RpcError },
    #[error("the app-server connection closed")]
    ConnectionClosed,
    #[error("the answer to `{method}` was {bytes} bytes, over the frame cap")]
    FrameTooLarge { method: String, bytes: usize },
    #[error("`{method}`: {message}")]
    Codec { method: String, message: String },
}

type Reply = Result<RawJson, PeerError>;

struct PendingRequest {
    method: String,
    reply: oneshot::Sender<Reply>,
}

/// The requests waiting for their answer, and whether the reader has ended: once it has, no
/// answer can come, so a request made after that fails at once instead of waiting out its
/// timeout (it was put in the table after the reader's last look at it: a member that died as
/// it was sent, before anyone had noticed, held a login for the whole 30 s).
#[derive(Default)]
struct Pending {
    requests: HashMap<RequestId, PendingRequest>,
    ended: bool,
}

type PendingMap = Arc<Mutex<Pending>>;

struct Shared {
    outgoing: mpsc::Sender<String>,
    /// Shared with the reader task, which must not hold `outgoing`: stdin has to close when the
    /// last handle goes away, even while stdout is still open.
    pending: PendingMap,
    next_id: AtomicI64,
    config: PeerConfig,
    /// The reader and the writer: owned here, ended by [`Peer::close`], joined by
    /// [`Peer::closed`]. Each also ends by itself with its side of the connection.
    tasks: TaskTracker,
    cancel: CancellationToken,
    /// Notifications and server requests handed to [`Events`] so far (see
    /// [`Peer::handed_over`]).
    handed: Arc<AtomicU64>,
}

/// A cheap, cloneable handle: requests, notifications and answers to server requests.
#[derive(Clone)]
pub struct Peer {
    shared: Arc<Shared>,
}

/// Most messages handed over in one batch.
const BATCH_MESSAGES: usize = 256;

/// Inbound notifications and server requests, in arrival order.
///
/// The reader hands messages over in batches (all complete lines of one read, up to
/// [`BATCH_MESSAGES`]), so a fast stream costs one wake-up per batch rather than per message;
/// the channel of batches is bounded, so a slow consumer still slows the reader down.
pub struct Events {
    batches: mpsc::Receiver<Vec<Incoming>>,
    ready: std::collections::VecDeque<Incoming>,
    /// Messages returned by [`Events::recv`] so far.
    taken: u64,
}

impl Events {
    /// The next message, or `None` once the connection closed and everything was delivered.
    /// Cancel-safe: a message is only taken when it is returned.
    pub async fn recv(&mut self) -> Option<Incoming> {
        if self.ready.is_empty() {
            let batch = self.batches.recv().await?;
            self.ready.extend(batch);
        }
        let message = self.ready.pop_front();
        self.taken += u64::from(message.is_some());
        message
    }

    /// Messages taken so far; compare with [`Peer::handed_over`].
    pub fn taken(&self) -> u64 {
        self.taken
    }
}

impl Peer {
    /// Start the reader and writer tasks over a transport.
    pub fn connect<R, W>(reader: R, writer: W, config: PeerConfig) -> (Peer, Events)
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (outgoing, outgoing_rx) = mpsc::channel::<String>(256);
        let (events_tx, batches) = mpsc::channel((config.event_capacity / BATCH_MESSAGES).max(1));
        let events = Events {
            batches,
            ready: std::collections::VecDeque::new(),
            taken: 0,
        };
        let pending: PendingMap = Arc::new(Mutex::new(Pending::default()));
        let tasks = TaskTracker::new();
        let cancel = CancellationToken::new();
        let handed = Arc::new(AtomicU64::new(0));
        let tap = config.tap.as_ref().and_then(|maker| (maker.0)());
        let reader = TapReader {
            inner: reader,
            tap: tap.clone(),
            line: Vec::new(),
            skipping: false,
            max: config.max_frame_bytes,
        };
        tasks.spawn(write_loop(writer, outgoing_rx, cancel.clone(), tap));
        tasks.spawn(read_loop(
            reader,
            Arc::clone(&pending),
            config.max_frame_bytes,
            events_tx,
            cancel.clone(),
            Arc::clone(&handed),
        ));
        tasks.close();
        let shared = Arc::new(Shared {
            outgoing,
            pending,
            next_id: AtomicI64::new(1),
            config,
            tasks,
            cancel,
            handed,
        });
        (Peer { shared }, events)
    }

    /// End the reader and the writer now (the connection is being torn down): pending requests
    /// fail with [`PeerError::ConnectionClosed`] and the events end.
    pub fn close(&self) {
        self.shared.cancel.cancel();
    }

    /// How many notifications and server requests the reader has handed to [`Events`] so far.
    /// Everything Codex sent before a response is counted by the time that response resolves,
    /// so a consumer that has taken this many messages has seen all that preceded it.
    pub fn handed_over(&self) -> u64 {
        self.shared.handed.load(Ordering::SeqCst)
    }

    /// Wait until the reader and the writer have ended (after [`Peer::close`], or once the
    /// connection closed by itself).
    pub async fn closed(&self) {
        self.shared.tasks.wait().await;
    }

    /// Send a request and wait for its answer, parsed as `T`.
    pub async fn request<P: Serialize, T: DeserializeOwned>(
        &self,
        method: &str,
        params: &P,
    ) -> Result<T, PeerError> {
        let raw = self.request_raw(method, params).await?;
        serde_json::from_str(raw.get()).map_err(|error| PeerError::Codec {
            method: method.to_string(),
            message: format!("unexpected answer: {error}"),
        })
    }

    /// Call a typed Codex [`Method`](crate::protocol::methods::Method).
    pub async fn call<M: crate::protocol::methods::Method>(
        &self,
        params: &M::Params,
    ) -> Result<M::Result, PeerError> {
        self.request(M::NAME, params).await
    }

    /// Send a request; the answer stays raw JSON. An overloaded app-server's `-32001` is
    /// retried (see [`PeerConfig::overload_retries`]) before it is the answer.
    pub async fn request_raw<P: Serialize>(
        &self,
        method: &str,
        params: &P,
    ) -> Result<RawJson, PeerError> {
        let params = own_json(params).map_err(|error| PeerError::Codec {
            method: method.to_string(),
            message: error.to_string(),
        })?;
        self.forward_request(method, &params).await
    }

    /// Send a request whose params are already JSON (a client's, forwarded byte for byte by the
    /// endpoint); the answer stays raw. Retried on overload as [`Peer::request_raw`] is.
    pub async fn forward_request(
        &self,
        method: &str,
        params: &serde_json::value::RawValue,
    ) -> Result<RawJson, PeerError> {
        self.forward_traced(method, params, None).await
    }

    /// [`Peer::forward_request`] with a W3C trace context on the request, so Codex's own spans
    /// of it join the caller's trace.
    pub async fn forward_traced(
        &self,
        method: &str,
        params: &serde_json::value::RawValue,
        trace: Option<W3cTraceContext>,
    ) -> Result<RawJson, PeerError> {
        let config = &self.shared.config;
        let mut attempt = 0;
        loop {
            match self
                .request_once(method, params.to_owned(), trace.clone())
                .await
            {
                Err(PeerError::Rpc { error, .. })
                    if error.code == SERVER_OVERLOADED && attempt < config.overload_retries =>
                {
                    let pause = overload_pause(attempt, config.overload_backoff);
                    tracing::warn!(
                        "`{method}`: the app-server is overloaded ({}); retry {} of {} in {pause:?}",
                        error.message,
                        attempt + 1,
                        config.overload_retries
                    );
                    attempt += 1;
                    tokio::time::sleep(pause).await;
                }
                answer => return answer,
            }
        }
    }

    /// One request and its answer.
    async fn request_once(
        &self,
        method: &str,
        params: Box<serde_json::value::RawValue>,
        trace: Option<W3cTraceContext>,
    ) -> Result<RawJson, PeerError> {
        let codec = |error: serde_json::Error| PeerError::Codec {
            method: method.to_string(),
            message: error.to_string(),
        };
        let id = RequestId::Integer(self.shared.next_id.fetch_add(1, Ordering::Relaxed));
        let line = encode(&Outgoing::Request {
            id: id.clone(),
            method: method.to_string(),
            params,
            trace,
        })
        .map_err(codec)?;
        let (reply, answer) = oneshot::channel();
        {
            let mut pending = self.lock_pending();
            if pending.ended {
                return Err(PeerError::ConnectionClosed);
            }
            pending.requests.insert(
                id.clone(),
                PendingRequest {
                    method: method.to_string(),
                    reply,
                },
            );
        }
        // However this future ends (answered, timed out, or dropped by its caller mid-wait), the
        // pending entry goes with it: a cancelled caller leaves nothing behind in the map.
        let _pending = PendingGuard {
            peer: self,
            id: id.clone(),
        };
        if self.shared.outgoing.send(line).await.is_err() {
            return Err(PeerError::ConnectionClosed);
        }
        let after = self.shared.config.request_timeout;
        match tokio::time::timeout(after, answer).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => Err(PeerError::ConnectionClosed),
            Err(_) => Err(PeerError::Timeout {
                method: method.to_string(),
                after,
            }),
        }
    }

    /// Send a notification.
    pub async fn notify<P: Serialize>(
        &self,
        method: &str,
        params: Option<&P>,
    ) -> Result<(), PeerError> {
        let params = params
            .map(own_json)
            .transpose()
            .map_err(|error| PeerError::Codec {
                method: method.to_string(),
                message: error.to_string(),
            })?;
        self.send(Outgoing::Notification {
            method: method.to_string(),
            params,
        })
        .await
    }

    /// Send a notification whose params are already JSON (a client's, byte for byte).
    pub async fn forward_notification(
        &self,
        method: &str,
        params: Option<&serde_json::value::RawValue>,
    ) -> Result<(), PeerError> {
        self.send(Outgoing::Notification {
            method: method.to_string(),
            params: params.map(ToOwned::to_owned),
        })
        .await
    }

    /// Answer a server request with a result (the id is echoed exactly).
    pub async fn respond(&self, id: RequestId, result: serde_json::Value) -> Result<(), PeerError> {
        let result = own_json(&result).map_err(|error| PeerError::Codec {
            method: "a server request's answer".to_string(),
            message: error.to_string(),
        })?;
        self.send(Outgoing::Response { id, result }).await
    }

    /// Answer a server request with a result that is already JSON (a client's, byte for byte).
    pub async fn forward_answer(
        &self,
        id: RequestId,
        result: &serde_json::value::RawValue,
    ) -> Result<(), PeerError> {
        self.send(Outgoing::Response {
            id,
            result: result.to_owned(),
        })
        .await
    }

    /// Answer a server request with a client's whole error (its `data` kept).
    pub async fn respond_rpc_error(&self, id: RequestId, error: RpcError) -> Result<(), PeerError> {
        self.send(Outgoing::Error { id, error }).await
    }

    /// Answer a server request with an error.
    pub async fn respond_error(
        &self,
        id: RequestId,
        code: i64,
        message: String,
    ) -> Result<(), PeerError> {
        self.send(Outgoing::Error {
            id,
            error: RpcError {
                code,
                message,
                data: None,
            },
        })
        .await
    }

    /// Requests still waiting for an answer.
    pub fn pending_requests(&self) -> usize {
        self.lock_pending().requests.len()
    }

    async fn send(&self, message: Outgoing) -> Result<(), PeerError> {
        let line = encode(&message).map_err(|error| PeerError::Codec {
            method: "<response>".to_string(),
            message: error.to_string(),
        })?;
        self.shared
            .outgoing
            .send(line)
            .await
            .map_err(|_| PeerError::ConnectionClosed)
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        lock(&self.shared.pending)
    }
}

/// The reader of a peer, handing a copy of each complete line to the tap (lines past the frame
/// cap are left out, as the framing drops them).
struct TapReader<R> {
    inner: R,
    tap: Option<LineTap>,
    /// The start of a line whose end has not come yet.
    line: Vec<u8>,
    /// In a line over the cap: nothing of it is kept until its newline.
    skipping: bool,
    max: usize,
}

impl<R: AsyncRead + Unpin> AsyncRead for TapReader<R> {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut this.inner).poll_read(cx, buf);
        if let (std::task::Poll::Ready(Ok(())), Some(tap)) = (&polled, &this.tap) {
            let mut fresh = &buf.filled()[before..];
            while let Some(at) = memchr::memchr(b'\n', fresh) {
                if !this.skipping {
                    if this.line.is_empty() {
                        tap(Direction::Out, &fresh[..at]);
                    } else {
                        this.line.extend_from_slice(&fresh[..at]);
                        tap(Direction::Out, &this.line);
                    }
                }
                this.line.clear();
                this.skipping = false;
                fresh = &fresh[at + 1..];
            }
            if !this.skipping && !fresh.is_empty() {
                if this.line.len() + fresh.len() > this.max {
                    this.line = Vec::new();
                    this.skipping = true;
                } else {
                    this.line.extend_from_slice(fresh);
                }
            }
        }
        polled
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut writer: W,
    mut lines: mpsc::Receiver<String>,
    cancel: CancellationToken,
    tap: Option<LineTap>,
) {
    loop {
        let line = tokio::select! {
            line = lines.recv() => line,
            () = cancel.cancelled() => None,
        };
        let Some(line) = line else { break };
        if let Some(tap) = &tap {
            tap(Direction::In, line.trim_end_matches('\n').as_bytes());
        }
        if let Err(error) = writer.write_all(line.as_bytes()).await {
            tracing::debug!("app-server stdin closed: {error}");
            return;
        }
        // Flush only when nothing else is queued: batches bursts into fewer writes.
        if lines.is_empty() {
            if let Err(error) = writer.flush().await {
                tracing::debug!("app-server stdin flush failed: {error}");
                return;
            }
        }
    }
    // Every Peer handle is gone: closing stdin lets `codex app-server` exit cleanly.
    let _ = writer.shutdown().await;
}

async fn read_loop<R: AsyncRead + Unpin>(
    reader: R,
    pending: PendingMap,
    max_frame_bytes: usize,
    events: mpsc::Sender<Vec<Incoming>>,
    cancel: CancellationToken,
    handed: Arc<AtomicU64>,
) {
    let mut frames = FrameReader::new(reader, max_frame_bytes);
    let mut batch: Vec<Incoming> = Vec::new();
    // A closed receiver means nobody listens any more; keep routing responses. A cancelled
    // peer stops waiting for a slow consumer.
    let hand_over = |batch: Vec<Incoming>| {
        let events = events.clone();
        let cancel = cancel.clone();
        handed.fetch_add(batch.len() as u64, Ordering::SeqCst);
        async move {
            tokio::select! {
                _ = events.send(batch) => true,
                () = cancel.cancelled() => false,
            }
        }
    };
    loop {
        // Hand over what we have before waiting for more input (or when the batch is full).
        if !batch.is_empty()
            && (!frames.has_buffered_line() || batch.len() >= BATCH_MESSAGES)
            && !hand_over(std::mem::take(&mut batch)).await
        {
            break;
        }
        let frame = tokio::select! {
            frame = frames.next() => frame,
            () = cancel.cancelled() => break,
        };
        match frame {
            Ok(Some(Frame::Message(Incoming::Response { id, result }))) => {
                // Notifications that came before this response are delivered before it resolves.
                if !batch.is_empty() && !hand_over(std::mem::take(&mut batch)).await {
                    break;
                }
                match lock(&pending).requests.remove(&id) {
                    Some(pending) => {
                        let reply = result.map_err(|error| PeerError::Rpc {
                            method: pending.method.clone(),
                            error,
                        });
                        let _ = pending.reply.send(reply);
                    }
                    None => tracing::debug!("response for unknown request id {id}"),
                }
            }
            Ok(Some(Frame::Message(message))) => batch.push(message),
            Ok(Some(Frame::Oversized { id, bytes })) => {
                tracing::warn!("dropped an app-server frame of {bytes} bytes (over the cap)");
                if let Some(id) = id {
                    if let Some(pending) = lock(&pending).requests.remove(&id) {
                        let _ = pending.reply.send(Err(PeerError::FrameTooLarge {
                            method: pending.method,
                            bytes,
                        }));
                    }
                }
            }
            Ok(None) => break,
            Err(error) => {
                tracing::debug!("app-server stdout read failed: {error}");
                break;
            }
        }
    }
    if !batch.is_empty() && !cancel.is_cancelled() {
        let _ = hand_over(batch).await;
    }
    let stats = frames.stats;
    tracing::debug!(
        "app-server stdout closed after {} messages ({} skipped lines, {} re-joined, {} oversized)",
        stats.messages,
        stats.skipped_lines,
        stats.rejoined,
        stats.oversized
    );
    let mut pending = lock(&pending);
    pending.ended = true;
    for (_, request) in pending.requests.drain() {
        let _ = request.reply.send(Err(PeerError::ConnectionClosed));
    }
}

#[cfg(test)]
mod tap_tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// The tap gets each complete line once, whatever the reads cut it into, and nothing of a
    /// line past the cap (the framing drops it too).
    #[tokio::test]
    async fn the_tap_sees_whole_lines_and_skips_oversized_ones() {
        let seen: Arc<Mutex<Vec<(Direction, String)>>> = Arc::default();
        let kept = Arc::clone(&seen);
        let tap: LineTap = Arc::new(move |direction, line: &[u8]| {
            kept.lock()
                .expect("seen")
                .push((direction, String::from_utf8_lossy(line).into_owned()));
        });
        let (mut writer, reader) = tokio::io::duplex(8);
        let mut reader = TapReader {
            inner: reader,
            tap: Some(tap),
            line: Vec::new(),
            skipping: false,
            max: 16,
        };
        let feed = tokio::spawn(async move {
            writer
                .write_all(b"{\"a\":1}\n{\"long\":\"0123456789abcdef\"}\n{\"b\":2}\n")
                .await
                .expect("write");
        });
        let mut all = Vec::new();
        reader.read_to_end(&mut all).await.expect("read");
        feed.await.expect("feed");
        assert_eq!(all.len(), 44, "the reader passes every byte on");
        assert_eq!(
            *seen.lock().expect("seen"),
            [
                (Direction::Out, "{\"a\":1}".to_string()),
                (Direction::Out, "{\"b\":2}".to_string())
            ]
        );
    }
}
